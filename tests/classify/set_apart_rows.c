/* Thirty call sites of short-lived 256-byte objects, and one that a rule
 * pins (MBUDDY_RULES=sym:small_pinned=pinned, set by set-apart-rows.test)
 * and that allocates a few 16-byte objects: fewer sampled bytes than any
 * of the thirty, and none at all once pinned. */
#include "classify_common.h"

#define SITE(k) NI static void *site##k(void) { return keep(malloc(256)); }
#define SITES10(d) SITE(d##0) SITE(d##1) SITE(d##2) SITE(d##3) SITE(d##4) \
	SITE(d##5) SITE(d##6) SITE(d##7) SITE(d##8) SITE(d##9)
SITES10(1) SITES10(2) SITES10(3)

void *small_pinned(size_t n);
__attribute__((visibility("default"))) NI void *small_pinned(size_t n) { return keep(malloc(n)); }

#define CALL(k) free(site##k());
#define CALLS10(d) CALL(d##0) CALL(d##1) CALL(d##2) CALL(d##3) CALL(d##4) \
	CALL(d##5) CALL(d##6) CALL(d##7) CALL(d##8) CALL(d##9)

int main(void)
{
	need_libmbuddy();
	for (int i = 0; i < 20000; i++) {
		CALLS10(1) CALLS10(2) CALLS10(3)
	}
	void *kept[4];
	for (int i = 0; i < 4; i++)
		kept[i] = small_pinned(16);
	int bad = expect_type("pinned by a rule", kept[0], 0);
	for (int i = 0; i < 4; i++)
		free(kept[i]);
	return bad ? 1 : 0;
}
