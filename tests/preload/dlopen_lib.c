/* A small module for dlopen_loop: it allocates in its constructor, checks
 * and frees in its destructor, exports functions that allocate, and has
 * thread-local storage of its own (dynamic TLS, which glibc allocates with
 * malloc in each thread that touches it). Any damage found makes the
 * process exit with status 1, since the module cannot report otherwise
 * once it is unloaded. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NBLOCKS 8

static unsigned char *blocks[NBLOCKS];
static size_t sizes[NBLOCKS] = { 1, 24, 100, 1000, 5000, 16385, 70000, 1 << 20 };
static __thread unsigned char tls_buf[3000] = { 1 };
static __thread unsigned tls_calls;

void *dlt_alloc(size_t n);
int dlt_check_tls(void);
unsigned dlt_generation(void);

static unsigned generation;

static void die(const char *what)
{
	char buf[200];
	int n = snprintf(buf, sizeof buf, "dlopen_lib: FAIL: %s\n", what);
	ssize_t w = write(2, buf, (size_t)n);
	(void)w;
	_exit(1);
}

static unsigned char tag(size_t i, size_t k)
{
	return (unsigned char)(i * 31 + k * 7 + 1);
}

__attribute__((constructor)) static void dlt_init(void)
{
	generation++;
	for (size_t i = 0; i < NBLOCKS; i++) {
		blocks[i] = malloc(sizes[i]);
		if (!blocks[i])
			die("malloc in the constructor");
		for (size_t k = 0; k < sizes[i]; k += 97)
			blocks[i][k] = tag(i, k);
		blocks[i][sizes[i] - 1] = tag(i, sizes[i] - 1);
	}
	/* Some memory realloc'd and some strdup'd, too. */
	char *s = strdup("constructed");
	if (!s)
		die("strdup in the constructor");
	char *t = realloc(s, 4096);
	if (!t)
		die("realloc in the constructor");
	free(t);
}

__attribute__((destructor)) static void dlt_fini(void)
{
	for (size_t i = 0; i < NBLOCKS; i++) {
		for (size_t k = 0; k < sizes[i]; k += 97)
			if (blocks[i][k] != tag(i, k))
				die("a block allocated by the constructor was damaged");
		if (blocks[i][sizes[i] - 1] != tag(i, sizes[i] - 1))
			die("the end of a block allocated by the constructor was damaged");
		free(blocks[i]);
		blocks[i] = NULL;
	}
}

/* A block the caller frees: memory crosses from the module to the program. */
void *dlt_alloc(size_t n)
{
	unsigned char *p = malloc(n);
	if (p)
		memset(p, 0xA5, n);
	return p;
}

/* Touch this thread's TLS block of the module; returns 0 if it holds what
 * this thread last wrote. */
int dlt_check_tls(void)
{
	unsigned c = tls_calls;
	if (c == 0 && tls_buf[0] != 1)
		return 1;
	if (c && (tls_buf[1] != (unsigned char)c || tls_buf[2999] != (unsigned char)(c * 3)))
		return 1;
	tls_calls = ++c;
	tls_buf[1] = (unsigned char)c;
	tls_buf[2999] = (unsigned char)(c * 3);
	return 0;
}

unsigned dlt_generation(void)
{
	return generation;
}
