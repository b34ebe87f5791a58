/* dlclose forgets only the call sites of the code it unloads. Two copies
 * of a library whose objects are kept (A and B) and the program itself
 * learn that their sites' objects last, which sets the sites apart from
 * the default type, directly and through a wrapper in the program (whose
 * callers in B and in the program disagree, which makes it a wrapper);
 * then A is unloaded. The very next allocation of each site that stayed
 * must keep its type: before, dlclose made every site of the process
 * learn again. A's own sites are forgotten: loaded again at the same
 * address, A starts from the default type like any new code. */
#include "classify_common.h"

#include <string.h>

typedef void *(*work_fn)(int);
typedef void *(*work_via_fn)(void *(*)(size_t), int);

enum { ROUNDS = 20000, DEFAULT = 2 };

/* Whether p's type is not the default one: its site was set apart. */
static int expect_apart(const char *what, const void *p)
{
	int got = pointer_type(p);
	printf("%-32s %-10s (want KernNoRclm or KernRclm)\n", what, got >= 0 ? type_name[got] : "none");
	return got == 0 || got == 1 ? 0 : 1;
}

/* Temporaries from a site of their own: the allocation clock advances,
 * so the kept objects' samples outlive the young threshold. */
static NI void churn(size_t bytes)
{
	for (size_t done = 0; done < bytes; done += 256)
		free(keep(malloc(256)));
}

static NI void *own_alloc(size_t n)
{
	return keep(malloc(n));
}

/* An allocation wrapper, like xmalloc. */
static NI void *wrap(size_t n)
{
	return keep(malloc(n));
}

/* The program's own kept objects. */
static NI void *own_work(int rounds)
{
	static void *kept[ROUNDS];
	for (int i = 0; i < rounds; i++)
		kept[i % ROUNDS] = own_alloc(64);
	return kept[(rounds - 1) % ROUNDS];
}

/* The program's short-lived objects through the wrapper. */
static NI void own_short_via_wrap(int rounds)
{
	for (int i = 0; i < rounds; i++)
		free(wrap(64));
}

/* B's code through the program's wrapper, always from here: the frames
 * above the wrapper are the same each time. */
static work_via_fn b_via;
static NI void *b_via_wrap(int rounds)
{
	return keep(b_via(wrap, rounds));
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
	void *a = load(dir, "dlsite_pinned"), *b = load(dir, "dlsite_pinned2");
	work_fn a_work = (work_fn)dlsym(a, "lib_work"), b_work = (work_fn)dlsym(b, "lib_work");
	b_via = (work_via_fn)dlsym(b, "lib_work_via");
	void *a_site = dlsym(a, "lib_alloc");
	int bad = 0;

	/* Learn: every site's objects kept, then enough allocation that
	 * their samples count as lasting, then once more. */
	void *pa = NULL, *pb = NULL, *pp = NULL, *pv = NULL;
	for (int round = 0; round < 2; round++) {
		pa = a_work(ROUNDS);
		pb = b_work(ROUNDS);
		pp = own_work(ROUNDS);
		own_short_via_wrap(ROUNDS);
		pv = b_via_wrap(ROUNDS);
		if (round == 0)
			churn(64 << 20);
	}
	bad += expect_apart("A, learned", pa);
	bad += expect_apart("B, learned", pb);
	bad += expect_apart("program, learned", pp);
	bad += expect_apart("B via wrapper, learned", pv);
	if (bad) {
		fprintf(stderr, "the sites did not learn their types: nothing to test\n");
		return 99;
	}

	dlclose(a);

	/* One allocation each: no time to learn again. */
	bad += expect_apart("B after dlclose(A)", b_work(1));
	bad += expect_apart("program after dlclose(A)", own_work(1));
	bad += expect_apart("B via wrapper after dlclose(A)", b_via_wrap(1));

	/* A's sites are forgotten: loaded again at the same address, its
	 * first allocation gets the default type, as a site without
	 * evidence. */
	a = load(dir, "dlsite_pinned");
	if (dlsym(a, "lib_alloc") == a_site)
		bad += expect_type("A again, at the same address", ((work_fn)dlsym(a, "lib_work"))(1), DEFAULT);
	else
		printf("(A was loaded again at another address: its check is skipped)\n");
	dlclose(a);
	dlclose(b);
	return bad ? 1 : 0;
}
