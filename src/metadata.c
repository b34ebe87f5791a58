#include "config.h"
#include "metadata.h"
#include "region.h"

#include <string.h>

#define GRAIN 64
#define CHUNK ((size_t)2 << 20)

struct free_obj {
	struct free_obj *next;
};

static struct free_obj *free_lists[MB_META_MAX / GRAIN + 1];
static char *bump, *bump_end;
static size_t mapped;

void *mb_meta_alloc(size_t n)
{
	if (n == 0 || n > MB_META_MAX)
		return NULL;
	size_t k = (n + GRAIN - 1) / GRAIN;
	struct free_obj *o = free_lists[k];
	if (o) {
		free_lists[k] = o->next;
		memset(o, 0, k * GRAIN);
		return o;
	}
	size_t sz = k * GRAIN;
	if ((size_t)(bump_end - bump) < sz) {
		/* The rest of the old chunk feeds the free lists, not the void. */
		while ((size_t)(bump_end - bump) >= GRAIN) {
			size_t left = (size_t)(bump_end - bump) / GRAIN;
			if (left > MB_META_MAX / GRAIN)
				left = MB_META_MAX / GRAIN;
			mb_meta_free(bump, left * GRAIN);
			bump += left * GRAIN;
		}
		char *c = mb_os_reserve(CHUNK, 4096);
		if (!c)
			return NULL;
		mapped += CHUNK;
		bump = c;
		bump_end = c + CHUNK;
	}
	void *p = bump; /* fresh mapping: already zero */
	bump += sz;
	return p;
}

void mb_meta_free(void *p, size_t n)
{
	if (!p)
		return;
	size_t k = (n + GRAIN - 1) / GRAIN;
	struct free_obj *o = p;
	o->next = free_lists[k];
	free_lists[k] = o;
}

size_t mb_meta_mapped(void)
{
	return mapped;
}
