/* A load spike and its end, shared by the idle and latency workloads.
 *
 * Models a server under load: long-lived "pinned" objects trickle in
 * while a FIFO cache fills to CACHE_BYTES and turns over once and request
 * temporaries come and go, all interleaved and of mixed sizes (16 B -
 * 4 KiB), from three call sites (spike_pinned_alloc, spike_cache_alloc,
 * spike_temp_alloc) as a call-site classifier sees them. Then the load
 * stops: the cache and the temporaries are freed and the pinned objects
 * stay, scattered over the pages the load used, leaving the heap full of
 * holes. Every page of every object is written. */
#ifndef BENCH_LOADSPIKE_H
#define BENCH_LOADSPIKE_H

#include "common.h"

#define SPIKE_MIN_OBJ 16
#define SPIKE_MAX_OBJ 4096
#define SPIKE_TEMPS 256

struct spike_obj {
	struct spike_obj *next;
	size_t size;
};

struct spike {
	struct rng rng;
	struct spike_obj *pinned, *head, *tail;
	struct spike_obj *temps[SPIKE_TEMPS];
	size_t pinned_bytes, pinned_objs, cache_bytes;
};

CALL_SITE struct spike_obj *spike_pinned_alloc(size_t n);
CALL_SITE struct spike_obj *spike_cache_alloc(size_t n);
CALL_SITE struct spike_obj *spike_temp_alloc(size_t n);

static struct spike_obj *spike_new(size_t n, const char *site)
{
	struct spike_obj *o = malloc(n);
	if (!o)
		oom(site, n);
	touch_pages(o, n, n);
	o->next = NULL;
	o->size = n;
	return o;
}

struct spike_obj *spike_pinned_alloc(size_t n) { return spike_new(n, "pinned"); }
struct spike_obj *spike_cache_alloc(size_t n) { return spike_new(n, "cache"); }
struct spike_obj *spike_temp_alloc(size_t n) { return spike_new(n, "temp"); }

static size_t spike_size(struct spike *s)
{
	return rng_logsize(&s->rng, SPIKE_MIN_OBJ, SPIKE_MAX_OBJ);
}

/* The load: about cache_cap + pinned_target bytes live at the end. */
static void spike_load(struct spike *s, size_t cache_cap, size_t pinned_target)
{
	size_t cache_total = 0, goal = 2 * cache_cap;
	while (cache_total < goal) {
		size_t n = spike_size(s);
		struct spike_obj *o = spike_cache_alloc(n);
		if (s->tail)
			s->tail->next = o;
		else
			s->head = o;
		s->tail = o;
		s->cache_bytes += n;
		cache_total += n;
		while (s->cache_bytes > cache_cap) {
			struct spike_obj *old = s->head;
			s->head = old->next;
			s->cache_bytes -= old->size;
			free(old);
		}
		for (int k = 0; k < 2; k++) {
			unsigned i = (unsigned)rng_below(&s->rng, SPIKE_TEMPS);
			free(s->temps[i]);
			s->temps[i] = spike_temp_alloc(spike_size(s));
		}
		if (s->pinned_bytes < (double)pinned_target * cache_total / goal) {
			size_t m = spike_size(s);
			struct spike_obj *p = spike_pinned_alloc(m);
			p->next = s->pinned;
			s->pinned = p;
			s->pinned_bytes += m;
			s->pinned_objs++;
		}
	}
}

/* The end of the load: the cache and the temporaries go. */
static void spike_drop(struct spike *s)
{
	while (s->head) {
		struct spike_obj *o = s->head;
		s->head = o->next;
		free(o);
	}
	s->tail = NULL;
	s->cache_bytes = 0;
	for (unsigned i = 0; i < SPIKE_TEMPS; i++) {
		free(s->temps[i]);
		s->temps[i] = NULL;
	}
}

/* Pinned objects whose last byte is no longer what was written. */
static size_t spike_corrupted(const struct spike *s)
{
	size_t bad = 0;
	for (const struct spike_obj *o = s->pinned; o; o = o->next)
		bad += o->size > sizeof *o && ((const unsigned char *)o)[o->size - 1] != (unsigned char)o->size;
	return bad;
}

#endif
