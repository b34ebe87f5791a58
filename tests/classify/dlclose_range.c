/* dlclose forgets only the call sites of the code it unloads. Two copies
 * of a library of short-lived allocations (A and B) and the program itself
 * learn that their sites are short-lived (UserRclm), directly and through
 * a wrapper in the program (whose callers in B and in the program disagree,
 * which makes it a wrapper); then A is unloaded. The very next allocation
 * of each site that stayed must keep its type: before, dlclose made every
 * site of the process learn again from the default type. A's own sites are
 * forgotten: loaded again at the same address, A starts from the unsettled
 * type like any new code. */
#include "classify_common.h"

#include <string.h>

typedef void *(*work_fn)(int);
typedef void *(*work_via_fn)(void *(*)(size_t), int);

enum { ROUNDS = 20000, SHORT = 2, UNSETTLED = 1 };

static NI void *own_alloc(size_t n)
{
	return keep(malloc(n));
}

/* An allocation wrapper, like xmalloc. */
static NI void *wrap(size_t n)
{
	return keep(malloc(n));
}

static NI void *own_work(int rounds)
{
	void *last = NULL;
	for (int i = 0; i < rounds; i++) {
		void *p = own_alloc(64);
		free(last);
		last = p;
	}
	return last;
}

static NI void *own_pinned_via_wrap(int rounds)
{
	static void *kept[ROUNDS];
	for (int i = 0; i < rounds; i++)
		kept[i] = wrap(64);
	return kept[rounds - 1];
}

static void *load(const char *dir, const char *name)
{
	char path[4096];
	snprintf(path, sizeof path, "%s/.libs/%s.so", dir, name);
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
		exit(99);
	}
	return h;
}

int main(int argc, char **argv)
{
	need_libmbuddy();
	const char *dir = argc > 1 ? argv[1] : "tests/classify";
	void *a = load(dir, "dlsite_short"), *b = load(dir, "dlsite_short2");
	work_fn a_work = (work_fn)dlsym(a, "lib_work"), b_work = (work_fn)dlsym(b, "lib_work");
	work_via_fn b_via = (work_via_fn)dlsym(b, "lib_work_via");
	void *a_site = dlsym(a, "lib_alloc");
	int bad = 0;

	/* Learn. */
	bad += expect_type("A, learned", a_work(ROUNDS), SHORT);
	bad += expect_type("B, learned", b_work(ROUNDS), SHORT);
	bad += expect_type("program, learned", own_work(ROUNDS), SHORT);
	own_pinned_via_wrap(ROUNDS);
	bad += expect_type("B via wrapper, learned", b_via(wrap, ROUNDS), SHORT);
	if (bad) {
		fprintf(stderr, "the sites did not learn their types: nothing to test\n");
		return 99;
	}

	dlclose(a);

	/* One allocation each: no time to learn again. */
	bad += expect_type("B after dlclose(A)", b_work(1), SHORT);
	bad += expect_type("program after dlclose(A)", own_work(1), SHORT);
	bad += expect_type("B via wrapper after dlclose(A)", b_via(wrap, 1), SHORT);

	/* A's sites are forgotten: loaded again at the same address, its
	 * first allocation gets the type of a site without evidence. */
	a = load(dir, "dlsite_short");
	if (dlsym(a, "lib_alloc") == a_site)
		bad += expect_type("A again, at the same address", ((work_fn)dlsym(a, "lib_work"))(1), UNSETTLED);
	else
		printf("(A was loaded again at another address: its check is skipped)\n");
	dlclose(a);
	dlclose(b);
	return bad ? 1 : 0;
}
