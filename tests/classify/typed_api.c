/* The GFP-flag equivalent: explicit types and the per-thread hint win over
 * classification. */
#include "classify_common.h"

#include <errno.h>

int main(void)
{
	need_libmbuddy();
	void *(*typed)(size_t, int) = (void *(*)(size_t, int))dlsym(RTLD_DEFAULT, "mbuddy_malloc");
	int (*hint)(int) = (int (*)(int))dlsym(RTLD_DEFAULT, "mbuddy_set_thread_type");
	if (!typed || !hint)
		return 1;
	int bad = 0;
	for (int t = 0; t < 3; t++) {
		void *p = typed(100, t), *q = typed(100000, t);
		bad += expect_type("mbuddy_malloc small", p, t);
		bad += expect_type("mbuddy_malloc large", q, t);
		free(p);
		free(q);
		int prev = hint(t);
		void *r = malloc(200);
		bad += expect_type("malloc under thread hint", r, t);
		free(r);
		hint(prev);
	}
	errno = 0;
	if (typed(10, 7) != NULL || errno != EINVAL) {
		printf("mbuddy_malloc with type 7 must fail with EINVAL\n");
		bad++;
	}
	return bad ? 1 : 0;
}
