/* dlopen/dlclose must not confuse sites whose addresses are reused: a
 * library of short-lived allocations is loaded after one of pinned
 * allocations (and the other way round) and its site must be learned
 * afresh, while another thread keeps allocating. */
#include "classify_common.h"

#include <pthread.h>
#include <string.h>

static volatile int stop;

enum { PINNED_OR_UNSETTLED = -2 };

static void *churn(void *arg)
{
	(void)arg;
	while (!stop) {
		void *p = malloc(100);
		free(p);
	}
	return NULL;
}

static int run(const char *dir, const char *name, int want)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/.libs/%s.so", dir, name);
	void *h = dlopen(path, RTLD_NOW);
	if (!h) {
		fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
		return 1;
	}
	void *(*work)(int) = (void *(*)(int))dlsym(h, "lib_work");
	void *p = work(20000);
	int bad;
	if (want == PINNED_OR_UNSETTLED) {
		/* 20,000 small pinned objects are too little allocation to prove
		 * them old: the site may still have the type of a site without
		 * evidence, but never the short verdict of the library that had
		 * the same address before. */
		int got = pointer_type(p);
		bad = got != 0 && got != 1;
		printf("%-28s %d (want KernNoRclm, or KernRclm while unsettled)\n", name, got);
	} else {
		bad = expect_type(name, p, want);
	}
	/* What stays allocated belongs to the program now. */
	dlclose(h);
	return bad;
}

int main(int argc, char **argv)
{
	need_libmbuddy();
	const char *dir = argc > 1 ? argv[1] : "tests/classify";
	pthread_t t;
	pthread_create(&t, NULL, churn, NULL);
	int bad = 0;
	for (int i = 0; i < 3; i++) {
		bad += run(dir, "dlsite_short", 2);
		bad += run(dir, "dlsite_pinned", PINNED_OR_UNSETTLED);
	}
	stop = 1;
	pthread_join(t, NULL);
	return bad ? 1 : 0;
}
