/* The library deepbind.c loads with dlopen(RTLD_DEEPBIND), as Debian's php
 * loads its extensions: its references to the malloc family bind to libc
 * first. It allocates in its constructor (before anyone can rebind it),
 * allocates what the program frees, frees what the program allocated,
 * reallocates across the boundary, and keeps pointers to malloc and free
 * in its data (GLOB_DAT and absolute relocations, some in RELRO pages). */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

static char *made_in_ctor;
static char *big_in_ctor;

__attribute__((constructor)) static void deep_init(void)
{
	made_in_ctor = malloc(64);
	if (made_in_ctor)
		strcpy(made_in_ctor, "allocated in the constructor");
	/* Above glibc's mmap threshold: a chunk glibc maps on its own. */
	big_in_ctor = malloc(1 << 20);
	if (big_in_ctor)
		memset(big_in_ctor, 0x5a, 1 << 20);
}

char *deep_ctor_string(void)
{
	char *p = made_in_ctor;
	made_in_ctor = NULL;
	return p;
}

char *deep_ctor_big(void)
{
	char *p = big_in_ctor;
	big_in_ctor = NULL;
	return p;
}

void *deep_malloc(size_t n) { return malloc(n); }
void *deep_calloc(size_t a, size_t b) { return calloc(a, b); }
void *deep_realloc(void *p, size_t n) { return realloc(p, n); }
void deep_free(void *p) { free(p); }
size_t deep_usable_size(void *p) { return malloc_usable_size(p); }
char *deep_strdup(const char *s) { return strdup(s); }

void *deep_aligned(size_t align, size_t n)
{
	void *p;
	return posix_memalign(&p, align, n) == 0 ? p : NULL;
}

/* The address of malloc as this library sees it (a GLOB_DAT slot). */
void *deep_malloc_address(void) { return (void *)malloc; }

/* Pointers to free in data: writable (.data) and read-only after
 * relocation (.data.rel.ro, a RELRO page). */
void (*deep_free_pointer)(void *) = free;
void (*const deep_free_table[2])(void *) = { free, free };

void deep_free_through_pointers(void *p, void *q)
{
	void (*const *volatile table)(void *) = deep_free_table;
	deep_free_pointer(p);
	table[1](q);
}
