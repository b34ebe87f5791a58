/* A program with a malloc of its own: a bump allocator over a static
 * arena (free does nothing). Under LD_PRELOAD=libmbuddy.so its malloc
 * still wins, as rustc's does: libmbuddy must say it served nothing. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

static _Alignas(16) char arena[16 << 20];
static size_t used;
static size_t served_here;

void *malloc(size_t n)
{
	size_t at = (used + 15) & ~(size_t)15;
	if (n > sizeof arena - at - 16)
		return NULL;
	*(size_t *)(arena + at) = n;
	used = at + 16 + n;
	served_here++;
	return arena + at + 16;
}

void free(void *p)
{
	(void)p;
}

void *calloc(size_t a, size_t b)
{
	size_t n;
	if (__builtin_mul_overflow(a, b, &n))
		return NULL;
	void *p = malloc(n);
	if (p)
		memset(p, 0, n);
	return p;
}

void *realloc(void *p, size_t n)
{
	void *q = malloc(n);
	if (q && p) {
		size_t old = *(size_t *)((char *)p - 16);
		memcpy(q, p, old < n ? old : n);
	}
	return q;
}

int main(void)
{
	for (int i = 0; i < 1000; i++) {
		char *s = malloc(100 + i);
		snprintf(s, 100, "object %d", i);
		free(s);
	}
	printf("own malloc served %zu allocations\n", served_here);
	return served_here >= 1000 ? 0 : 1;
}
