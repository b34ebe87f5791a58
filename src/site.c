#include "config.h"
#include "site.h"
#include "compiler.h"
#include "lockstat.h"
#include "region.h"

#include <stddef.h>
#include <string.h>

_Static_assert(offsetof(struct mb_site, learn_left) == MB_CACHE_LINE,
	       "what the slow path reads, then what every sample writes, on separate lines");

/* Fewer samples than this decide nothing. */
#define MIN_EVIDENCE 8
/* A site is set apart only if its live objects would fill slabs of their
 * own: a lane for less would hold partly used slabs of its own in every
 * size class and thread, for nothing. */
#define SET_APART_BYTES ((int64_t)256 << 10)

/* Slots by hash; records in the order made, so that the pages they use
 * are as many as the sites need, not one per site. The table word is
 * read by every malloc: it starts a line (compiler.h), and the counts
 * that the site lock's holders write at every sample start another. */
MB_LINE_ALIGNED uintptr_t mb_site_table;
static uintptr_t tables[2];        /* slots | log2(slots), as mb_site_table */
static struct mb_site_slot *room[2]; /* reserved for every size a table takes */
static uint32_t room_used[2];      /* slots of room[] taken by tables so far */
static uint32_t nsites[2];         /* sites in each table */
static const uint32_t cap_max[2] = { MB_SITE_CAP, MB_DEEP_CAP };
static int published;
static struct mb_site *records; /* both tables' */
static size_t nused;
/* Recursive: fork's prepare handler holds it while others may allocate. */
static struct mb_lock site_lock = MB_LOCK_INITIALIZER_RECURSIVE("sites");
/* The site each lane was given to, or NULL. */
static struct mb_site *lane_owner[MB_NKEYS];

static uintptr_t table_word(struct mb_site_slot *slots, uint32_t cap)
{
	return (uintptr_t)slots | (uintptr_t)__builtin_ctz(cap);
}

int mb_sites_init(void)
{
	for (int t = 0; t < 2; t++) {
		/* MIN + 2 MIN + ... + max: every table it may grow through. */
		size_t n = (size_t)2 * cap_max[t] - MB_SITE_CAP_MIN;
		if (!(room[t] = mb_os_reserve_records(n * sizeof(struct mb_site_slot), NULL)))
			return -1;
		mb_os_set_use(room[t], MB_USE_SITES);
		room_used[t] = MB_SITE_CAP_MIN;
		tables[t] = table_word(room[t], MB_SITE_CAP_MIN);
	}
	records = mb_os_reserve_records(((size_t)MB_SITE_CAP + MB_DEEP_CAP) * sizeof(struct mb_site), NULL);
	if (!records)
		return -1;
	mb_os_set_use(records, MB_USE_SITES);
	return 0;
}

void mb_sites_publish(void)
{
	mb_site_lock();
	published = 1;
	__atomic_store_n(&mb_site_table, tables[MB_SITES_DIRECT], __ATOMIC_RELEASE);
	mb_site_unlock();
}

/* With the site lock held: table t twice as large, its sites moved, each
 * record pointed at its new slot before readers are. -1 when it is as
 * large as it gets, or a site would land beyond the probes that find it
 * (the old table stays). */
static int grow_locked(enum mb_site_table t)
{
	uintptr_t old = tables[t];
	uint32_t cap = mb_site_table_mask(old) + 1, ncap = cap * 2;
	if (ncap > cap_max[t])
		return -1;
	struct mb_site_slot *from = mb_site_table_slots(old), *to = room[t] + room_used[t];
	for (uint32_t j = 0; j < cap; j++) {
		uintptr_t key = atomic_load_explicit(&from[j].key, memory_order_relaxed);
		if (!key)
			continue;
		uint32_t h = mb_site_hash(key), i = 0;
		while (i < MB_SITE_PROBES && atomic_load_explicit(&to[(h + i) & (ncap - 1)].key, memory_order_relaxed))
			i++;
		if (i == MB_SITE_PROBES) {
			mb_os_release(to, (size_t)ncap * sizeof *to);
			return -1;
		}
		struct mb_site_slot *sl = &to[(h + i) & (ncap - 1)];
		atomic_store_explicit(&sl->slab_key, atomic_load(&from[j].slab_key), memory_order_relaxed);
		atomic_store_explicit(&sl->flags, atomic_load(&from[j].flags), memory_order_relaxed);
		sl->site = from[j].site;
		atomic_store_explicit(&sl->key, key, memory_order_relaxed);
	}
	room_used[t] += ncap;
	for (uint32_t j = 0; j < ncap; j++)
		if (atomic_load_explicit(&to[j].key, memory_order_relaxed))
			__atomic_store_n(&records[to[j].site].slot, &to[j], __ATOMIC_RELEASE);
	__atomic_store_n(&tables[t], table_word(to, ncap), __ATOMIC_RELEASE);
	if (t == MB_SITES_DIRECT && published)
		__atomic_store_n(&mb_site_table, tables[t], __ATOMIC_RELEASE);
	/* A reader still in the old table reads zeros there: no key, so it
	 * takes the slow path, which finds the site in the new one. */
	mb_os_release(from, (size_t)cap * sizeof *from);
	return 0;
}

void mb_site_lock(void)
{
	mb_lock_acquire(&site_lock);
}

void mb_site_unlock(void)
{
	mb_lock_release(&site_lock);
}

struct mb_site *mb_site_lookup(enum mb_site_table t, uintptr_t key)
{
	uintptr_t tw = __atomic_load_n(&tables[t], __ATOMIC_ACQUIRE);
	struct mb_site_slot *slots = mb_site_table_slots(tw);
	uint32_t h = mb_site_hash(key), mask = mb_site_table_mask(tw);
	for (unsigned i = 0; i < MB_SITE_PROBES; i++) {
		struct mb_site_slot *sl = &slots[(h + i) & mask];
		uintptr_t k = atomic_load_explicit(&sl->key, memory_order_acquire);
		if (k == key)
			return &records[sl->site];
		if (k == 0)
			return NULL;
	}
	return NULL;
}

struct mb_site *mb_site_insert_locked(enum mb_site_table t, uintptr_t key, int *created)
{
	*created = 0;
	struct mb_site *found = mb_site_lookup(t, key);
	if (found)
		return found;
	/* More than a sixteenth full: twice the slots, so that nearly every
	 * site sits in its home slot, the only one the fast path reads (a
	 * site displaced by a collision takes the slow path at every
	 * allocation; at this load, one in thirty). */
	if ((nsites[t] + 1) * 16 > mb_site_table_mask(tables[t]) + 1)
		grow_locked(t);
	for (;;) {
		uintptr_t tw = tables[t];
		struct mb_site_slot *slots = mb_site_table_slots(tw);
		uint32_t h = mb_site_hash(key), mask = mb_site_table_mask(tw);
		for (unsigned i = 0; i < MB_SITE_PROBES; i++) {
			struct mb_site_slot *sl = &slots[(h + i) & mask];
			if (atomic_load_explicit(&sl->key, memory_order_relaxed) != 0)
				continue;
			struct mb_site *s = &records[nused];
			s->slot = sl;
			s->lane = -1;
			s->is_deep = t == MB_SITES_DEEP;
			if (!s->is_deep) {
				/* Its own return address heads its stack, unwound or not. */
				s->frames[0] = (void *)key;
				s->nframes = 1;
			}
			sl->site = (uint32_t)nused++;
			nsites[t]++;
			atomic_store_explicit(&sl->slab_key, MB_DEFAULT_TYPE, memory_order_relaxed);
			atomic_store_explicit(&sl->flags, MB_SITE_LEARNING, memory_order_relaxed);
			atomic_store_explicit(&s->learn_left, MB_LEARN_SAMPLES, memory_order_relaxed);
			*created = 1;
			/* Published last: a reader that finds the key finds the rest. */
			atomic_store_explicit(&sl->key, key, memory_order_release);
			return s;
		}
		/* The probes around this key are taken: a larger table, or
		 * the site stays unseen. */
		if (grow_locked(t) != 0)
			return NULL;
	}
}

size_t mb_site_count_locked(void)
{
	return nused;
}

struct mb_site *mb_site_nth_locked(size_t i)
{
	return &records[i];
}

uint32_t mb_site_index(const struct mb_site *s)
{
	return (uint32_t)(s - records);
}

/* ---- keys ---- */

/* The slot's line is read by every malloc of every thread: a decision
 * that changes nothing (a site apart stays apart, at each of its samples)
 * must not write it, or each one evicts it from the other threads'
 * caches. */
static void set_key(struct mb_site *s, int key)
{
	if (atomic_load_explicit(&s->slot->slab_key, memory_order_relaxed) != (uint8_t)key)
		atomic_store_explicit(&s->slot->slab_key, (uint8_t)key, memory_order_relaxed);
}

/* s gets a lane of its own, typed `type`; with every lane taken, the key
 * of its type, shared. */
static void set_apart(struct mb_site *s, int type)
{
	if (s->lane < 0) {
		for (int k = MB_FIRST_LANE; k < MB_OWN_KEY; k++)
			if (!lane_owner[k]) {
				lane_owner[k] = s;
				s->lane = (int8_t)k;
				break;
			}
	}
	if (s->lane >= 0) {
		if (__atomic_load_n(&mb_lane_type[s->lane], __ATOMIC_RELAXED) != (uint8_t)type)
			__atomic_store_n(&mb_lane_type[s->lane], (uint8_t)type, __ATOMIC_RELAXED);
		set_key(s, s->lane);
	} else {
		set_key(s, type);
	}
}

static void back_to_default(struct mb_site *s)
{
	if (s->lane >= 0) {
		/* Its slabs keep the key; a site set apart later shares
		 * them until they drain. */
		lane_owner[s->lane] = NULL;
		s->lane = -1;
	}
	set_key(s, MB_DEFAULT_TYPE);
}

static int32_t evidence(const struct mb_site *s)
{
	return s->n_short + s->n_medium + s->n_lasting + s->n_old + s->n_prior_old;
}

/* A return address is a wrapper when the callers behind it (its deep
 * sites) that have evidence get different types; its allocations then
 * take the slow path, where the frames above it find their deep site.
 * Otherwise every caller gets the site's own key, and the fast path gives
 * it. */
static void check_wrapper_locked(struct mb_site *parent)
{
	int differs = 0, seen = -1;
	for (int i = 0; i < parent->ndeep && !differs; i++) {
		const struct mb_site *d = &records[parent->deep[i]];
		if (evidence(d) < MIN_EVIDENCE)
			continue;
		differs = seen >= 0 && mb_site_type(d) != seen;
		seen = mb_site_type(d);
	}
	/* Written only when it changes (set_key). */
	int is = (atomic_load_explicit(&parent->slot->flags, memory_order_relaxed) & MB_SITE_WRAPPER) != 0;
	if (differs && !is)
		atomic_fetch_or(&parent->slot->flags, MB_SITE_WRAPPER);
	else if (!differs && is)
		atomic_fetch_and(&parent->slot->flags, (uint8_t)~MB_SITE_WRAPPER);
}

/* The default key's decided samples, halved as they grow (site.h); a mix
 * is judged on this many at least (a site's own need MIN_EVIDENCE). */
#define DEFAULT_EVIDENCE 16
MB_LINE_ALIGNED static uint32_t default_young, default_lasting;

void mb_site_note_default_locked(int young)
{
	if (young)
		default_young++;
	else
		default_lasting++;
	if (default_young + default_lasting > 1024) {
		default_young /= 2;
		default_lasting /= 2;
	}
}

void mb_site_default_mix_reset_locked(void)
{
	default_young = default_lasting = 0;
}

/* Whether setting s apart would separate it from objects that die
 * sooner: at least a quarter of the default key's samples die young, at
 * least twice the share of s's own, and s's share three binomial
 * standard deviations below the rest's, not a few lucky samples. A site
 * whose objects live as long as the rest of the heap's gains nothing from
 * slabs of its own and costs their partly used ones (rptest-like: every
 * site lasting, three of them set apart held 1.75x the RSS at 2 threads,
 * classified against off; one set apart on 1 young sample in 8, against
 * the rest's 2 in 5, sent every allocation of its wrapper to the slow
 * path). */
static int rest_dies_sooner(const struct mb_site *s, int32_t total)
{
	int64_t all = (int64_t)default_young + default_lasting;
	if (all < DEFAULT_EVIDENCE || 4 * (int64_t)default_young < all)
		return 0;
	/* In units of 1/all: expected young samples of s at the rest's
	 * rate, and how far below it s's own lie. */
	int64_t expected = (int64_t)total * default_young, below = expected - (int64_t)s->n_short * all;
	int64_t variance = (int64_t)total * default_young * default_lasting;
	return 2 * below >= expected && below * below >= 9 * variance;
}

/* Whether a site set apart is pinned (KernNoRclm) rather than a cache
 * (KernRclm), from its samples now old and those freed late: pinned once
 * eight times as many are old as were freed late (its objects are
 * hardly ever freed), a cache again once fewer than twice as many are.
 * A cache holds old objects too, as many as it frees late or twice as
 * many while it grows; with one boundary at "more old than freed late"
 * such a cache flipped to pinned and back, and each flip sent its new
 * slabs to the other type's pageblocks, a churning cache among the pinned
 * objects (the patch's experiment: 15-133 of 160 in one run in eight,
 * instead of 150-160). */
static int pinned_type(const struct mb_site *s, int32_t old)
{
	_Static_assert(MB_DEFAULT_TYPE != MB_KERNNORCLM, "a site typed KernNoRclm is set apart");
	if (mb_site_type(s) == MB_KERNNORCLM)
		return old >= 2 * (int64_t)s->n_medium;
	return old > 8 * (int64_t)s->n_medium;
}

void mb_site_decide_locked(struct mb_site *s)
{
	if (s->n_short + s->n_medium > 256) {
		s->n_short /= 2;
		s->n_medium /= 2;
	}
	int32_t old = s->n_old + s->n_prior_old;
	int32_t lasting = s->n_medium + s->n_lasting + old, total = s->n_short + lasting;
	if (total >= MIN_EVIDENCE && !(mb_site_flags(s) & MB_SITE_PINNED)) {
		/* Clearly lasting: three in four samples outlived the young
		 * threshold. A site apart stays apart while that holds, even
		 * when its volume falls (a cache between two fills). Its
		 * type: pinned_type(). */
		if (4 * lasting >= 3 * total &&
		    (mb_site_set_apart(s) || (s->live_estimate >= SET_APART_BYTES && rest_dies_sooner(s, total))))
			set_apart(s, pinned_type(s, old) ? MB_KERNNORCLM : MB_KERNRCLM);
		else if (2 * s->n_short > total && mb_site_set_apart(s))
			back_to_default(s);
	}
	if (s->parent)
		check_wrapper_locked(s->parent);
}

void mb_site_set_type_locked(struct mb_site *s, int type)
{
	if (type == MB_DEFAULT_TYPE)
		back_to_default(s);
	else
		set_apart(s, type);
	if (s->parent)
		check_wrapper_locked(s->parent);
}

void mb_site_pin_locked(struct mb_site *s, int type)
{
	back_to_default(s);
	set_key(s, type);
	atomic_store(&s->slot->flags, MB_SITE_PINNED);
}

void mb_site_forget_locked(struct mb_site *s)
{
	s->n_short = s->n_medium = s->n_prior_old = 0; /* live samples keep their counts */
	s->pkey = 0;
	back_to_default(s);
	atomic_store(&s->learn_left, MB_LEARN_SAMPLES);
	atomic_store(&s->slot->flags, MB_SITE_LEARNING);
}

/* ---- fork ---- */

void mb_sites_fork_prepare(void)
{
	mb_lock_acquire(&site_lock);
}

void mb_sites_fork_parent(void)
{
	mb_lock_release(&site_lock);
}

void mb_sites_fork_child(void)
{
	mb_lock_after_fork_child(&site_lock, 1);
}
