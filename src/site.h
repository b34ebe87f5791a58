/* Call sites: what classification knows of each place that allocates, and
 * the rule that turns that evidence into a slab key.
 *
 * A site is a return address (a direct site, which the malloc fast path
 * looks up), or for an allocation made through a wrapper (xmalloc,
 * g_malloc, PyObject_Malloc...) the wrapper's return address with the
 * frames above it (a deep site). Each site gathers evidence from its
 * sampled objects (sample.h): how many died young, lived on, or are old.
 *
 * Classification is an overlay on the untyped heap: a site keeps the
 * default key (the heap it would have with classification off) until its
 * evidence says clearly that its objects outlive the rest and there are
 * enough of them to fill slabs of their own. Then it gets a lane, a key of
 * its own (reclaim_type.h), typed KernRclm while its objects die late and
 * KernNoRclm once they are old; it goes back to the default key when most
 * of its objects are seen to die young.
 *
 * The fast path reads only a site's slot (struct mb_site_slot): 16 bytes,
 * so the table of them stays in few cache lines. Everything else is under
 * the site lock, which nests outside every allocator lock and is never
 * held while the stack is unwound. */
#ifndef MB_SITE_H
#define MB_SITE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "compiler.h"
#include "reclaim_type.h"

/* Slots of the direct sites (the fast path's table) and of the deep
 * ones, at most. A site touches the page of its slot, so a table starts
 * at a few pages (MB_SITE_CAP_MIN slots) and doubles while its sites
 * fill more than a sixteenth of it: a short process with fifty sites
 * touches 4 pages of slots, not 50. */
#define MB_SITE_CAP (1u << 14)
#define MB_DEEP_CAP (1u << 13)
#define MB_SITE_CAP_MIN (1u << 10)
#define MB_SITE_PROBES 32
#define MB_NFRAMES 8      /* frames an unwind takes */
#define MB_SITE_FRAMES 4  /* frames a site keeps, from its return address on */
#define MB_MAX_DEEP 8
/* A new site's first allocations are all samples, for early evidence. */
#define MB_LEARN_SAMPLES 8

enum {
	MB_SITE_LEARNING = 1, /* its first allocations are samples */
	MB_SITE_WRAPPER = 2,  /* deeper frames decide the key */
	MB_SITE_PINNED = 4,   /* type fixed by a rule */
};

/* What the fast path reads. A slot with flags 0 is settled: its key is
 * the allocation's. */
struct mb_site_slot {
	_Atomic uintptr_t key;     /* return address, or hash of deeper frames; 0: free */
	_Atomic uint8_t slab_key;
	_Atomic uint8_t flags;
	uint8_t pad[2];
	uint32_t site;             /* its record's index */
};

struct mb_site {
	/* Read at every allocation that takes the slow path (a wrapper's,
	 * and its deep site's key through the slot), and written only when
	 * the site is made, moved to a grown table, set apart or given a
	 * deep site: a line that no sample writes, so that no other thread's
	 * samples evict it. */
	struct mb_site_slot *slot;
	struct mb_site *parent;     /* deep sites: the wrapper's site */
	uint64_t pkey;              /* profile key (module + offset), 0 if none */
	uint8_t is_deep, ndeep;
	int8_t lane;                /* its own key, or -1 */
	uint32_t deep[MB_MAX_DEEP]; /* its deep sites (mb_site_nth_locked) */
	/* Written at every sample of the site, under the site lock. */
	MB_LINE_ALIGNED _Atomic int32_t learn_left; /* learning samples to go */
	/* Evidence: samples freed young and freed late (halved when they
	 * pass 256), and the live samples that have outlived the young
	 * threshold (lasting) or the old one (old). */
	int32_t n_short, n_medium, n_lasting, n_old;
	int32_t n_prior_old;        /* old samples of an earlier run (the profile) */
	int64_t live_estimate;      /* bytes of its live objects, from the live samples */
	uint64_t samples, sampled_bytes, freed, lifetime_sum;
	int nframes;
	/* One sampled stack from the site's return address on (a deep
	 * site's: its wrapper's), for the report and for dlclose. */
	void *frames[MB_SITE_FRAMES];
};

/* The direct sites' slots, the fast path's table: its address (page
 * aligned) with log2 of its slots in the low bits, one word so that a
 * reader never pairs a table with another's size. 0 while
 * classification is off or not set up. A table that grew stays mapped
 * (its pages given back): a reader still in it finds no key there. */
extern uintptr_t mb_site_table;
#define MB_SITE_TABLE_BITS 31u

static inline struct mb_site_slot *mb_site_table_slots(uintptr_t t)
{
	return (struct mb_site_slot *)(t & ~(uintptr_t)MB_SITE_TABLE_BITS);
}
static inline uint32_t mb_site_table_mask(uintptr_t t)
{
	return ((uint32_t)1 << (t & MB_SITE_TABLE_BITS)) - 1;
}

static inline uint32_t mb_site_hash(uintptr_t k)
{
	return (uint32_t)((k * 0x9e3779b97f4a7c15ULL) >> 40);
}

enum mb_site_table { MB_SITES_DIRECT, MB_SITES_DEEP };

/* Reserve the tables (nothing is touched until used); -1 without memory. */
int mb_sites_init(void);
/* The fast path reads the tables from now on (mb_site_table). */
void mb_sites_publish(void);

/* The site of key in a table, or NULL; without the lock. */
struct mb_site *mb_site_lookup(enum mb_site_table t, uintptr_t key);
/* The site of key, made learning with the default key if it is new
 * (*created set); NULL when its part of the table is full. */
struct mb_site *mb_site_insert_locked(enum mb_site_table t, uintptr_t key, int *created);

void mb_site_lock(void);
void mb_site_unlock(void);

/* The sites in use, in the order they were made: i < mb_site_count(). */
size_t mb_site_count_locked(void);
struct mb_site *mb_site_nth_locked(size_t i);
/* s's place in that order. */
uint32_t mb_site_index(const struct mb_site *s);

/* Its slot: moved under the site lock when its table grows. */
static inline struct mb_site_slot *mb_site_slot_of(const struct mb_site *s)
{
	return __atomic_load_n(&s->slot, __ATOMIC_ACQUIRE);
}
static inline int mb_site_key(const struct mb_site *s)
{
	return atomic_load_explicit(&mb_site_slot_of(s)->slab_key, memory_order_relaxed);
}
static inline int mb_site_flags(const struct mb_site *s)
{
	return atomic_load_explicit(&mb_site_slot_of(s)->flags, memory_order_relaxed);
}
static inline int mb_site_type(const struct mb_site *s)
{
	return mb_key_type(mb_site_key(s));
}
/* Whether s's allocations get another key than the default type's: set
 * apart on evidence, or typed by a rule or a profile. */
static inline int mb_site_set_apart(const struct mb_site *s)
{
	return mb_site_key(s) != MB_DEFAULT_TYPE;
}

/* The evidence of s changed: its key, and its wrapper's flag. */
void mb_site_decide_locked(struct mb_site *s);
/* A sample allocated with the default key has died young (young = 1) or
 * outlived the young threshold (0): the mix of what a site shares slabs
 * with until it is set apart. */
void mb_site_note_default_locked(int young);
/* Forget that mix (the unit tests start each case from none). */
void mb_site_default_mix_reset_locked(void);
/* Type fixed by a rule, or taken from a profile: a type other than the
 * default sets the site apart (it was decided on evidence before). */
void mb_site_set_type_locked(struct mb_site *s, int type);
/* Type fixed by a rule: the key of the type itself, for good. */
void mb_site_pin_locked(struct mb_site *s, int type);
/* Its code was unloaded: it learns again from nothing. */
void mb_site_forget_locked(struct mb_site *s);

/* Around fork (the site lock). */
void mb_sites_fork_prepare(void);
void mb_sites_fork_parent(void);
void mb_sites_fork_child(void);

#endif
