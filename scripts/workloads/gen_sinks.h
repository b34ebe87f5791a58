/* The generated workload's objects and the sinks that decide their
 * lifetimes: pinned lists, caches with FIFO, LRU or random eviction, temp
 * slots and immediate frees; hand-over between threads; relief when the
 * heap is full. */
#ifndef GEN_SINKS_H
#define GEN_SINKS_H

#include "gen.h"

/* ---- objects ---- */

static uint8_t check_of(uint32_t size, uint16_t sink)
{
	return (uint8_t)(size * 131u + sink * 7u + 0x5Au);
}

/* rng_logsize() needs lo < hi. */
static size_t between(struct rng *r, size_t lo, size_t hi)
{
	return lo < hi ? rng_logsize(r, lo, hi) : lo;
}

static size_t draw_size(struct rng *r, const struct sizes *s)
{
	if (s->big_per_1024 && rng_below(r, 1024) < s->big_per_1024)
		return between(r, s->big_lo, s->big_hi);
	return between(r, s->lo, s->hi);
}

static int64_t live_total(void)
{
	int64_t sum = 0;
	for (int t = 0; t < P.threads; t++)
		sum += atomic_load_explicit(&thrs[t].live, memory_order_relaxed);
	return sum;
}

static void live_add(struct thr *t, int64_t d)
{
	int64_t v = atomic_load_explicit(&t->live, memory_order_relaxed);
	atomic_store_explicit(&t->live, v + d, memory_order_relaxed);
}

static void note_failure(size_t size)
{
	int64_t live = live_total();
	int expect = 0;
	if (atomic_compare_exchange_strong(&first_fail_any_set, &expect, 1))
		atomic_store(&first_fail_any_live, live);
	expect = 0;
	if (size < PAGE && atomic_compare_exchange_strong(&first_fail_small_set, &expect, 1))
		atomic_store(&first_fail_small_live, live);
}

/* An object as init_obj() left it: header and last byte agree (the last
 * byte is read only once the size is known to be the one written). */
static int intact(const struct obj *o)
{
	return o->size >= MIN_OBJ && o->check == check_of(o->size, o->sink) &&
	       ((const unsigned char *)o)[o->size - 1] == o->check;
}

static void release(struct thr *t, struct obj *o)
{
	if (!intact(o))
		atomic_fetch_add(&corrupted, 1);
	live_add(t, -(int64_t)o->size);
	t->frees++;
	free(o);
}

/* Write the object as its owner would: the header, the last byte, and one
 * byte in every page, so that every page it spans is resident. */
static struct obj *init_obj(void *p, size_t n, int sink)
{
	struct obj *o = p;
	o->next = NULL;
	o->size = (uint32_t)n;
	o->sink = (uint16_t)sink;
	o->hot = 0;
	o->check = check_of(o->size, o->sink);
	unsigned char *b = p;
	for (size_t i = PAGE; i < n; i += PAGE)
		b[i] = (unsigned char)i;
	b[n - 1] = o->check;
	return o;
}

static int relieve(struct thr *t, size_t want);

/* malloc through the behaviour's current call site; under pressure the
 * thread evicts from its caches and tries again. */
static struct obj *alloc_obj(struct thr *t, const struct behav *b, size_t n, int sink)
{
	int fn = b->fn;
	void *p;
	while (!(p = gen_site_fns[fn](n, site_wrapped[fn]))) {
		t->pressure++;
		note_failure(n);
		if (!relieve(t, n + RELIEVE_BYTES)) {
			t->load_failures++;
			return NULL;
		}
	}
	live_add(t, (int64_t)n);
	t->allocs++;
	t->alloc_bytes += (double)n;
	return init_obj(p, n, sink);
}

/* ---- sinks ---- */

static void ring_grow(struct sink *s)
{
	size_t ncap = s->cap ? 2 * s->cap : 1024;
	if (!s->slot) {
		s->slot = map(ncap * sizeof *s->slot);
	} else {
		void *p = mremap(s->slot, s->cap * sizeof *s->slot, ncap * sizeof *s->slot, MREMAP_MAYMOVE);
		if (p == MAP_FAILED)
			die("mremap");
		s->slot = p;
		/* Unwrap: the entries before `first` move past the old end. */
		if (s->policy != P_RANDOM && s->first + s->count > s->cap)
			memcpy(s->slot + s->cap, s->slot, (s->first + s->count - s->cap) * sizeof *s->slot);
	}
	s->cap = ncap;
}

static struct obj *ring_pop(struct sink *s)
{
	struct obj *o = s->slot[s->first];
	s->first = (s->first + 1) & (s->cap - 1);
	s->count--;
	return o;
}

static void ring_push(struct sink *s, struct obj *o)
{
	if (s->count == s->cap)
		ring_grow(s);
	s->slot[(s->first + s->count) & (s->cap - 1)] = o;
	s->count++;
}

/* Remove one entry as the policy says; NULL if the cache is empty. */
static struct obj *cache_victim(struct thr *t, struct sink *s)
{
	if (!s->count)
		return NULL;
	if (s->policy == P_RANDOM) {
		size_t i = rng_below(&t->rng, s->count);
		struct obj *o = s->slot[i];
		s->slot[i] = s->slot[--s->count];
		return o;
	}
	if (s->policy == P_LRU) {
		/* Clock: a hot entry referenced since it was last looked at gets
		 * a second chance at the tail. */
		for (int k = 0; k < LRU_MAX_MOVES && s->count > 1; k++) {
			struct obj *o = s->slot[s->first];
			if (!o->hot || rng_unit(&t->rng) >= s->reref)
				break;
			ring_push(s, ring_pop(s));
		}
	}
	return ring_pop(s);
}

static void cache_insert(struct thr *t, struct sink *s, struct obj *o)
{
	if (s->policy == P_LRU)
		o->hot = rng_unit(&t->rng) < s->hot;
	if (s->policy == P_RANDOM && s->count == s->cap)
		ring_grow(s);
	if (s->policy == P_RANDOM)
		s->slot[s->count++] = o;
	else
		ring_push(s, o);
	s->bytes += o->size;
	/* Down to empty: a cache smaller than an object does not keep it. */
	while (s->bytes > s->budget && s->count > 0) {
		struct obj *v = cache_victim(t, s);
		s->bytes -= v->size;
		release(t, v);
	}
}

static void temp_insert(struct thr *t, struct sink *s, struct obj *o)
{
	size_t i = rng_below(&t->rng, s->cap);
	if (s->slot[i]) {
		s->bytes -= s->slot[i]->size;
		s->count--;
		release(t, s->slot[i]);
	}
	s->slot[i] = o;
	s->bytes += o->size;
	s->count++;
}

/* Warm-up: the next empty slot, so that the slots fill up. */
static void temp_fill(struct thr *t, struct sink *s, struct obj *o)
{
	while (s->first < s->cap && s->slot[s->first])
		s->first++;
	if (s->first == s->cap) {
		temp_insert(t, s, o);
		return;
	}
	s->slot[s->first] = o;
	s->bytes += o->size;
	s->count++;
}

/* Put an object into its sink; the sink's owner thread calls this. */
static void sink_insert(struct thr *t, struct obj *o)
{
	struct sink *s = &sinks[o->sink];
	switch (s->kind) {
	case S_PINNED:
		o->next = s->head;
		s->head = o;
		s->bytes += o->size;
		s->count++;
		break;
	case S_CACHE:
		cache_insert(t, s, o);
		break;
	case S_TEMP:
		temp_insert(t, s, o);
		break;
	default:
		release(t, o);
		break;
	}
}

static void drain_inbox(struct thr *t)
{
	pthread_mutex_lock(&t->inbox_lock);
	struct obj *o = t->inbox;
	t->inbox = NULL;
	pthread_mutex_unlock(&t->inbox_lock);
	while (o) {
		struct obj *next = o->next;
		o->next = NULL;
		sink_insert(t, o);
		o = next;
	}
}

/* Hand the object to its sink, directly or through the owner's inbox. */
static void deliver(struct thr *t, struct obj *o)
{
	int owner = sinks[o->sink].owner;
	if (owner == t->id) {
		sink_insert(t, o);
		return;
	}
	struct thr *to = &thrs[owner];
	pthread_mutex_lock(&to->inbox_lock);
	o->next = to->inbox;
	to->inbox = o;
	pthread_mutex_unlock(&to->inbox_lock);
	t->handoffs++;
}

/* Free at least `want` bytes from this thread's caches, then temporaries,
 * taking the sinks in turn. Returns 0 if there was nothing to free. */
static int relieve(struct thr *t, size_t want)
{
	size_t freed = 0;
	for (int pass = 0; pass < 2 && freed < want; pass++) {
		for (int k = 0; k < t->nsinks && freed < want; k++) {
			struct sink *s = &sinks[t->sinks[(t->relieve_at + k) % t->nsinks]];
			if (s->kind == S_CACHE && pass == 0) {
				struct obj *v;
				while (freed < want && (v = cache_victim(t, s))) {
					s->bytes -= v->size;
					freed += v->size;
					release(t, v);
				}
			} else if (s->kind == S_TEMP && pass == 1) {
				for (size_t i = 0; i < s->cap && freed < want; i++) {
					if (!s->slot[i])
						continue;
					freed += s->slot[i]->size;
					s->bytes -= s->slot[i]->size;
					s->count--;
					release(t, s->slot[i]);
					s->slot[i] = NULL;
				}
			}
		}
	}
	t->relieve_at++;
	return freed > 0;
}


#endif
