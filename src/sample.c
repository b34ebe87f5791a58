#include "config.h"
#include "sample.h"
#include "heap.h"
#include "large.h"
#include "region.h"
#include "site.h"
#include "slab.h"
#include "theap.h"

#include <string.h>

#define SAMPLE_CAP (1u << 16)
/* The bucket table starts at one page and doubles while it holds more
 * than two live samples a bucket: a short process touches one page of it,
 * not sixteen. */
#define SAMPLE_BUCKETS_MIN (1u << 10)
#define SAMPLE_BUCKETS_MAX (1u << 14)
#define NIL UINT32_MAX
/* The bucket chains and the free list link sample i as i + 1, so that 0
 * ends a chain: the bucket table needs no set-up, and a process that
 * takes no sample never touches its 64 KiB. */
#define LINK(i) ((i) + 1)
#define UNLINK(l) ((l) - 1)

/* What a live sample counts as for its site so far. */
enum { AGE_YOUNG, AGE_LASTING, AGE_OLD };

struct sample {
	uintptr_t addr;
	struct mb_site *site, *deep;
	uint64_t born;     /* on the allocation clock */
	int64_t bytes;     /* its size times its weight */
	uint32_t next;     /* bucket chain, or the free list: a link (LINK) */
	uint32_t qprev, qnext; /* its age queue, oldest first */
	uint8_t age;
	uint8_t in_default; /* allocated with the default key (site.h) */
};

static struct sample *samples;
static uint32_t *buckets, nbuckets;
static uint32_t *bucket_room; /* every size the bucket table takes, in turn */
static uint32_t free_sample /* a link */, nsamples, nlive;
/* Live samples by age, oldest first: the young ones wait for the young
 * threshold, the lasting ones for the old one. So aging looks only at
 * the samples whose turn has come. */
struct queue {
	uint32_t head, tail;
};
static struct queue queues[2] = { { NIL, NIL }, { NIL, NIL } };

int mb_samples_init(void)
{
	samples = mb_os_reserve_records((size_t)SAMPLE_CAP * sizeof(struct sample), NULL);
	bucket_room = mb_os_reserve_records((2 * SAMPLE_BUCKETS_MAX - SAMPLE_BUCKETS_MIN) * sizeof(uint32_t), NULL);
	if (!samples || !bucket_room)
		return -1;
	mb_os_set_use(samples, MB_USE_SAMPLES);
	mb_os_set_use(bucket_room, MB_USE_SAMPLES);
	buckets = bucket_room;
	nbuckets = SAMPLE_BUCKETS_MIN;
	return 0;
}

static uint32_t bucket_of(uintptr_t a)
{
	return mb_site_hash(a) & (nbuckets - 1);
}

/* With the site lock held: twice the buckets, every chain rehashed, the
 * old table's pages given back. */
static void grow_buckets_locked(void)
{
	uint32_t *old = buckets, n = nbuckets;
	buckets = old + n; /* the next size, right after this one in the room */
	nbuckets = n * 2;
	for (uint32_t b = 0; b < n; b++)
		for (uint32_t l = old[b], next; l; l = next) {
			struct sample *e = &samples[UNLINK(l)];
			next = e->next;
			uint32_t nb = bucket_of(e->addr);
			e->next = buckets[nb];
			buckets[nb] = l;
		}
	mb_os_release(old, n * sizeof *old);
}

static void q_append(struct queue *q, uint32_t i)
{
	samples[i].qnext = NIL;
	samples[i].qprev = q->tail;
	if (q->tail != NIL)
		samples[q->tail].qnext = i;
	else
		q->head = i;
	q->tail = i;
}

static void q_unlink(struct queue *q, uint32_t i)
{
	struct sample *e = &samples[i];
	if (e->qprev != NIL)
		samples[e->qprev].qnext = e->qnext;
	else
		q->head = e->qnext;
	if (e->qnext != NIL)
		samples[e->qnext].qprev = e->qprev;
	else
		q->tail = e->qprev;
}

/* Thresholds on the allocation clock, scaled to the heap's size. */
static void thresholds(uint64_t *t_young, uint64_t *t_old)
{
	uint64_t held = (uint64_t)mb_heap.buddy.pages_allocated << MB_PAGE_SHIFT;
	*t_young = held / 64 > (1u << 20) ? held / 64 : (1u << 20);
	/* Four times what the heap holds: a cache that turns over slower than
	 * the heap (the patch experiment's, 2/3 of the heap, lives ~2x its
	 * size of allocation) must not pass for pinned data while it fills. */
	*t_old = 4 * held > (64u << 20) ? 4 * held : (64u << 20);
}

/* A site whose objects are seen to die is judged by its own lifetimes: an
 * object is old only once it has outlived four times their mean, so a big
 * cache that turns over slowly is not mistaken for pinned data. */
static uint64_t old_threshold(const struct mb_site *s, uint64_t t_old)
{
	if (s->freed >= 8) {
		uint64_t own = 4 * (s->lifetime_sum / s->freed);
		return own > t_old ? own : t_old;
	}
	return t_old;
}

static void count(struct mb_site *s, int age, int delta)
{
	if (!s)
		return;
	if (age == AGE_LASTING)
		s->n_lasting += delta;
	else if (age == AGE_OLD)
		s->n_old += delta;
	mb_site_decide_locked(s);
}

/* At most this many samples change age per call: the work stays bounded
 * when a phase of the program ends and many age at once. */
#define AGE_BATCH 64

void mb_samples_age_locked(void)
{
	uint64_t now = mb_alloc_clock_now(), t_young, t_old;
	thresholds(&t_young, &t_old);
	unsigned n = 0;
	uint32_t i;
	while (n < AGE_BATCH && (i = queues[AGE_YOUNG].head) != NIL && now - samples[i].born >= t_young) {
		struct sample *e = &samples[i];
		q_unlink(&queues[AGE_YOUNG], i);
		e->age = AGE_LASTING;
		q_append(&queues[AGE_LASTING], i);
		if (e->in_default)
			mb_site_note_default_locked(0);
		count(e->site, AGE_LASTING, 1);
		count(e->deep, AGE_LASTING, 1);
		n++;
	}
	while (n < AGE_BATCH && (i = queues[AGE_LASTING].head) != NIL && now - samples[i].born >= t_old) {
		struct sample *e = &samples[i];
		q_unlink(&queues[AGE_LASTING], i);
		n++;
		if (now - e->born < old_threshold(e->site, t_old)) {
			/* Not old by its site's own measure yet: looked at
			 * again after the others. */
			q_append(&queues[AGE_LASTING], i);
			continue;
		}
		e->age = AGE_OLD;
		count(e->site, AGE_LASTING, -1);
		count(e->site, AGE_OLD, 1);
		count(e->deep, AGE_LASTING, -1);
		count(e->deep, AGE_OLD, 1);
	}
}

/* Mark the object as sampled in its out-of-band state: in a slab only if
 * the calling thread owns it (it just allocated the object there), since
 * only the owner writes a slab's bits. */
static int mark_sampled(void *p)
{
	struct mb_buddy *b = &mb_heap.buddy;
	struct mb_page *m = &b->pages[mb_buddy_page_index(b, p)];
	if (m->kind == MB_KIND_SLAB) {
		struct mb_slab *s = mb_slab_of_page(m);
		long i = mb_slab_index(s, p);
		if (i < 0 || mb_self.heap == NULL || mb_slab_owner(s) != mb_self.heap || mb_slab_is_free(s, (uint32_t)i))
			return -1;
		mb_slab_mark_sampled(s, (uint32_t)i);
		return 0;
	}
	if (m->kind == MB_KIND_LARGE) {
		m->user16 |= MB_LARGE_SAMPLED;
		return 0;
	}
	return -1;
}

void mb_sample_add(void *p, size_t n, struct mb_site *s, struct mb_site *d, uint64_t weight, int key)
{
	if (!mb_buddy_contains(&mb_heap.buddy, p))
		return;
	mb_site_lock();
	s->samples++;
	s->sampled_bytes += n;
	if (d) {
		d->samples++;
		d->sampled_bytes += n;
	}
	if ((free_sample || nsamples < SAMPLE_CAP) && mark_sampled(p) == 0) {
		uint32_t i;
		if (free_sample) {
			i = UNLINK(free_sample);
			free_sample = samples[i].next;
		} else {
			i = nsamples++;
		}
		struct sample *e = &samples[i];
		e->addr = (uintptr_t)p;
		e->site = s;
		e->deep = d;
		e->born = mb_alloc_clock_now();
		e->bytes = (int64_t)(n * weight);
		e->age = AGE_YOUNG;
		e->in_default = key == MB_DEFAULT_TYPE;
		if (++nlive > 2 * nbuckets && nbuckets < SAMPLE_BUCKETS_MAX)
			grow_buckets_locked();
		uint32_t b = bucket_of(e->addr);
		e->next = buckets[b];
		buckets[b] = LINK(i);
		q_append(&queues[AGE_YOUNG], i);
		s->live_estimate += e->bytes;
		if (d)
			d->live_estimate += e->bytes;
	}
	mb_samples_age_locked();
	mb_site_unlock();
}

/* A sample freed after `life` bytes of allocation. */
static void credit_free(struct mb_site *s, const struct sample *e, uint64_t life, uint64_t t_young)
{
	if (!s)
		return;
	if (e->age == AGE_LASTING)
		s->n_lasting--;
	else if (e->age == AGE_OLD)
		s->n_old--;
	if (life < t_young)
		s->n_short++;
	else
		s->n_medium++;
	s->freed++;
	s->lifetime_sum += life;
	s->live_estimate -= e->bytes;
	mb_site_decide_locked(s);
}

void mb_sample_freed(const void *p)
{
	if (!samples)
		return;
	uint64_t now = mb_alloc_clock_now(), t_young, t_old;
	mb_site_lock();
	thresholds(&t_young, &t_old);
	uint32_t b = bucket_of((uintptr_t)p), *link = &buckets[b];
	for (uint32_t l = *link; l; link = &samples[UNLINK(l)].next, l = *link) {
		uint32_t i = UNLINK(l);
		struct sample *e = &samples[i];
		if (e->addr != (uintptr_t)p)
			continue;
		uint64_t life = now - e->born;
		/* Each sample tells the default key's mix once: dead young,
		 * or lasting (counted here if the ager had not yet). */
		if (e->in_default && (life < t_young || e->age == AGE_YOUNG))
			mb_site_note_default_locked(life < t_young);
		credit_free(e->site, e, life, t_young);
		credit_free(e->deep, e, life, t_young);
		if (e->age != AGE_OLD)
			q_unlink(&queues[e->age], i);
		*link = e->next;
		e->next = free_sample;
		free_sample = LINK(i);
		nlive--;
		break;
	}
	mb_samples_age_locked();
	mb_site_unlock();
}
