#include "config.h"
#include "slab.h"
#include "metadata.h"

#include <string.h>

static void list_push(struct mb_central *ce, struct mb_slab *s, int at_tail)
{
	s->listed = 1;
	ce->nlisted++;
	if (!ce->head) {
		s->next = s->prev = NULL;
		ce->head = ce->tail = s;
	} else if (at_tail) {
		s->next = NULL;
		s->prev = ce->tail;
		ce->tail->next = s;
		ce->tail = s;
	} else {
		s->prev = NULL;
		s->next = ce->head;
		ce->head->prev = s;
		ce->head = s;
	}
}

static void list_unlink(struct mb_central *ce, struct mb_slab *s)
{
	if (s->prev)
		s->prev->next = s->next;
	else
		ce->head = s->next;
	if (s->next)
		s->next->prev = s->prev;
	else
		ce->tail = s->prev;
	s->next = s->prev = NULL;
	s->listed = 0;
	ce->nlisted--;
}

static struct mb_slab *slab_create_locked(int type, unsigned c)
{
	struct mb_buddy *b = &mb_heap.buddy;
	const struct mb_class_info *ci = &mb_classes[c];
	long idx = mb_buddy_alloc(b, ci->slab_pages, type, NULL);
	if (idx < 0)
		return NULL;
	struct mb_slab *s = mb_meta_alloc(sizeof(*s) + ci->nobj);
	if (!s) {
		mb_buddy_free(b, (size_t)idx);
		return NULL;
	}
	s->start = (uintptr_t)mb_buddy_page_addr(b, (size_t)idx);
	s->size = ci->size;
	s->magic = ci->magic;
	s->nobj = (uint16_t)ci->nobj;
	s->nfree = (uint16_t)ci->nobj;
	s->type = (uint8_t)type;
	s->sclass = (uint8_t)c;
	for (size_t i = (size_t)idx; i < (size_t)idx + ci->slab_pages; i++) {
		struct mb_page *m = &b->pages[i];
		m->user.ptr = s;
		m->sclass = (uint8_t)c;
		m->kind = MB_KIND_SLAB;
	}
	mb_heap.central[type][c].nslabs++;
	mb_heap.slab_pages += ci->slab_pages;
	return s;
}

static void slab_destroy_locked(struct mb_slab *s)
{
	struct mb_buddy *b = &mb_heap.buddy;
	const struct mb_class_info *ci = &mb_classes[s->sclass];
	size_t idx = mb_buddy_page_index(b, (void *)s->start);
	for (size_t i = idx; i < idx + ci->slab_pages; i++) {
		b->pages[i].kind = MB_KIND_NONE;
		b->pages[i].user.ptr = NULL;
	}
	mb_buddy_free(b, idx);
	mb_heap.central[s->type][s->sclass].nslabs--;
	mb_heap.slab_pages -= ci->slab_pages;
	mb_meta_free(s, sizeof(*s) + ci->nobj);
}

unsigned mb_slab_refill_locked(int type, unsigned c, struct mb_tentry *out, unsigned want)
{
	struct mb_central *ce = &mb_heap.central[type][c];
	unsigned n = 0;
	while (n < want) {
		struct mb_slab *s = ce->head;
		if (!s) {
			s = slab_create_locked(type, c);
			if (!s)
				break;
			list_push(ce, s, 0);
		}
		uint32_t i = s->scan;
		while (n < want && s->nfree) {
			uint8_t *z = memchr(s->state + i, MB_OBJ_FREE, s->nobj - i);
			if (!z) {
				i = 0;
				continue;
			}
			i = (uint32_t)(z - s->state);
			*z = MB_OBJ_CACHED;
			s->nfree--;
			out[n].p = (void *)(s->start + (uintptr_t)i * s->size);
			out[n].st = z;
			n++;
			i++;
			if (i == s->nobj)
				i = 0;
		}
		s->scan = (uint16_t)i;
		if (!s->nfree)
			list_unlink(ce, s);
	}
	return n;
}

void mb_slab_put_locked(struct mb_slab *s, uint32_t index)
{
	struct mb_central *ce = &mb_heap.central[s->type][s->sclass];
	s->state[index] = MB_OBJ_FREE;
	s->nfree++;
	if (s->nfree == s->nobj) {
		/* Entirely free: give the pages back so the pageblock can
		 * coalesce and eventually return to the global pool. */
		if (s->listed)
			list_unlink(ce, s);
		slab_destroy_locked(s);
		return;
	}
	if (!s->listed)
		list_push(ce, s, 1);
}
