/* dlopen/dlclose in a loop under LD_PRELOAD=libmbuddy.so, with threads
 * allocating all the while: the loader allocates (link maps, scopes,
 * dynamic TLS, dlerror strings), the test module allocates in its
 * constructor and frees in its destructor, and blocks cross from the module
 * to the program. libmbuddy also interposes dlclose (code may be unmapped
 * under classified call sites), so this exercises that path too.
 *
 * The module is tests/preload/dlopen_lib.c, built by libtool into
 * <dir of this program>/.libs/dlopen_lib.so; $DLOPEN_TEST_LIB overrides. */
#define _GNU_SOURCE 1
#include "ptest.h"

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>

#define MiB ((size_t)1 << 20)

#define MAIN_ITERATIONS 400
#define DL_THREADS 2
#define DL_THREAD_ITERATIONS 150
#define ALLOC_THREADS 3
#define SERIAL_ITERATIONS 60

static char lib_path[PATH_MAX];
static atomic_int stop;
static atomic_long alloc_ops;

typedef void *(*alloc_fn)(size_t);
typedef int (*tls_fn)(void);
typedef unsigned (*gen_fn)(void);
typedef double (*cos_fn)(double);

static int find_lib(void)
{
	const char *env = getenv("DLOPEN_TEST_LIB");
	struct stat st;
	if (env && *env) {
		snprintf(lib_path, sizeof lib_path, "%s", env);
		return stat(lib_path, &st) == 0;
	}
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (n <= 0)
		return 0;
	exe[n] = 0;
	char *slash = strrchr(exe, '/');
	if (!slash)
		return 0;
	*slash = 0;
	const char *cands[] = { "/.libs/dlopen_lib.so", "/dlopen_lib.so" };
	for (size_t i = 0; i < sizeof cands / sizeof cands[0]; i++) {
		snprintf(lib_path, sizeof lib_path, "%s%s", exe, cands[i]);
		if (stat(lib_path, &st) == 0)
			return 1;
	}
	return 0;
}

static void *alloc_thread(void *arg)
{
	uint64_t r = 0xA0761D6478BD642FULL * ((uintptr_t)arg + 1);
	enum { N = 128 };
	unsigned char *p[N] = { 0 };
	size_t n[N] = { 0 };
	long ops = 0;
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		unsigned i = (unsigned)(pt_rand(&r) % N);
		if (p[i]) {
			PT_REQUIRE(p[i][0] == (unsigned char)i && p[i][n[i] - 1] == (unsigned char)i,
				"allocating thread: block %p damaged", (void *)p[i]);
			free(p[i]);
			p[i] = NULL;
		} else {
			n[i] = pt_rand(&r) % 64 ? pt_rand_log(&r, 1, 8192) : pt_rand_log(&r, 8192, 2 * MiB);
			p[i] = malloc(n[i]);
			PT_REQUIRE(p[i] != NULL, "malloc(%zu)", n[i]);
			p[i][0] = p[i][n[i] - 1] = (unsigned char)i;
		}
		ops++;
	}
	for (int i = 0; i < N; i++)
		free(p[i]);
	atomic_fetch_add(&alloc_ops, ops);
	return NULL;
}

static void *tls_toucher(void *arg)
{
	tls_fn f = (tls_fn)arg;
	for (int i = 0; i < 10; i++)
		if (f())
			return (void *)1;
	return NULL;
}

/* One round: load the module and libm, use them, unload them. */
static void one_round(uint64_t *r, int with_thread)
{
	int mode = RTLD_NOW | (pt_rand(r) % 2 ? RTLD_LOCAL : RTLD_GLOBAL);
	void *h = dlopen(lib_path, mode);
	PT_REQUIRE(h != NULL, "dlopen(%s): %s", lib_path, dlerror());
	alloc_fn fa = (alloc_fn)dlsym(h, "dlt_alloc");
	tls_fn ft = (tls_fn)dlsym(h, "dlt_check_tls");
	PT_REQUIRE(fa && ft, "dlsym in the test module: %s", dlerror());

	size_t n = pt_rand(r) % 16 ? pt_rand_log(r, 1, 20000) : pt_rand_log(r, 20000, 3 * MiB);
	unsigned char *b = fa(n);
	PT_REQUIRE(b != NULL, "dlt_alloc(%zu) failed", n);
	PT_REQUIRE(b[0] == 0xA5 && b[n / 2] == 0xA5 && b[n - 1] == 0xA5, "dlt_alloc(%zu) block wrong", n);
	unsigned char *b2 = realloc(b, n + 100); /* the program resizes the module's block */
	PT_REQUIRE(b2 && b2[n - 1] == 0xA5, "realloc of the module's block");
	free(b2);
	PT_CHECK(ft() == 0, "the module's TLS lost its contents in this thread");

	if (with_thread) {
		pthread_t t;
		void *res;
		PT_REQUIRE(pthread_create(&t, NULL, tls_toucher, (void *)ft) == 0, "pthread_create");
		pthread_join(t, &res);
		PT_CHECK(res == NULL, "the module's TLS lost its contents in a short thread");
	}

	void *m = dlopen("libm.so.6", RTLD_NOW | RTLD_LOCAL);
	PT_REQUIRE(m != NULL, "dlopen(libm.so.6): %s", dlerror());
	cos_fn c = (cos_fn)dlsym(m, "cos");
	PT_REQUIRE(c != NULL, "dlsym(cos): %s", dlerror());
	PT_CHECK(c(0.0) == 1.0, "cos(0) != 1");

	/* A failing dlopen allocates its error message. */
	void *none = dlopen("libmbuddy-test-does-not-exist.so.0", RTLD_NOW);
	PT_CHECK(none == NULL, "dlopen of a missing library succeeded");
	const char *err = dlerror();
	PT_CHECK(err != NULL && strstr(err, "does-not-exist") != NULL, "dlerror() after a failed dlopen: %s",
	         err ? err : "(null)");

	PT_CHECK(dlclose(m) == 0, "dlclose(libm): %s", dlerror());
	PT_CHECK(dlclose(h) == 0, "dlclose(module): %s", dlerror());
}

static void *dl_thread(void *arg)
{
	uint64_t r = 0xE7037ED1A0B428DBULL * ((uintptr_t)arg + 1);
	for (int i = 0; i < DL_THREAD_ITERATIONS; i++)
		one_round(&r, i % 25 == 0);
	return NULL;
}

int main(void)
{
	pt_init("dlopen_loop");
	pt_watchdog(120);
	if (!find_lib()) {
		pt_msg("FAIL: cannot find the test module dlopen_lib.so next to this program (or in .libs/); "
		       "set DLOPEN_TEST_LIB");
		return 1;
	}

	pthread_t at[ALLOC_THREADS], dt[DL_THREADS];
	for (uintptr_t i = 0; i < ALLOC_THREADS; i++)
		PT_REQUIRE(pthread_create(&at[i], NULL, alloc_thread, (void *)i) == 0, "pthread_create");
	for (uintptr_t i = 0; i < DL_THREADS; i++)
		PT_REQUIRE(pthread_create(&dt[i], NULL, dl_thread, (void *)i) == 0, "pthread_create");

	uint64_t r = 777;
	for (int i = 0; i < MAIN_ITERATIONS; i++)
		one_round(&r, i % 20 == 0);
	for (int i = 0; i < DL_THREADS; i++)
		pthread_join(dt[i], NULL);

	/* With no other thread holding it, every dlclose unloads the module:
	 * its constructor and destructor run each time (the generation
	 * counter starts again at 1 in each fresh copy). */
	int unloaded = 0;
	for (int i = 0; i < SERIAL_ITERATIONS; i++) {
		void *h = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
		PT_REQUIRE(h != NULL, "dlopen: %s", dlerror());
		gen_fn g = (gen_fn)dlsym(h, "dlt_generation");
		PT_REQUIRE(g != NULL, "dlsym(dlt_generation)");
		PT_CHECK(g() == 1, "module generation %u: it was not unloaded/reloaded", g());
		PT_CHECK(dlclose(h) == 0, "dlclose: %s", dlerror());
		void *again = dlopen(lib_path, RTLD_NOW | RTLD_NOLOAD);
		if (again)
			dlclose(again);
		else
			unloaded++;
	}
	PT_CHECK(unloaded == SERIAL_ITERATIONS, "the module stayed loaded after %d of %d dlclose calls",
	         SERIAL_ITERATIONS - unloaded, SERIAL_ITERATIONS);

	atomic_store(&stop, 1);
	for (int i = 0; i < ALLOC_THREADS; i++)
		pthread_join(at[i], NULL);
	pt_msg("%d + %d dlopen/dlclose rounds, %ld allocations by other threads",
	       MAIN_ITERATIONS + DL_THREADS * DL_THREAD_ITERATIONS, SERIAL_ITERATIONS, atomic_load(&alloc_ops));
	return pt_finish();
}
