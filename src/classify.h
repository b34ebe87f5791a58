/* Classification: which reclaim type an allocation gets.
 *
 * The program's own word comes first (the per-thread hint of the public
 * API). Otherwise the call site decides: the fast path keys on the return
 * address and reads the type learned for it. A sample of allocations (every
 * new site's first ones, then one in MB_SAMPLE_PERIOD) records its call
 * stack and allocation time on the allocator's clock; when a sampled object
 * is freed, its lifetime updates its site's evidence, and objects still
 * alive count as long-lived as they age:
 *   mostly short-lived      -> UserRclm
 *   freed, but late         -> KernRclm
 *   outliving, never freed  -> KernNoRclm (also the type of unseen sites)
 * A return address whose deeper stacks disagree is a wrapper (xmalloc,
 * strdup, g_malloc, PyMem_*...): its allocations are told apart by the
 * frames above it, taken with libunwind's unw_backtrace. */
#ifndef MB_CLASSIFY_H
#define MB_CLASSIFY_H

#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>

#include "reclaim_type.h"
#include "out.h"
#include "thread.h"

#define MB_CLASSIFY_SAMPLE 0x100 /* record this allocation as a sample */

#define MB_SITE_CAP (1u << 15)
#define MB_SITE_PROBES 32
#define MB_NFRAMES 8
#define MB_MAX_DEEP 8

enum {
	MB_SITE_LEARNING = 1, /* still sampling every allocation */
	MB_SITE_WRAPPER = 2,  /* deeper frames decide the type */
	MB_SITE_PINNED = 4,   /* type fixed by a rule */
};

/* One call site. The first three fields are all the fast path reads. */
struct mb_site {
	_Atomic uintptr_t key;   /* return address, or hash of deeper frames */
	_Atomic uint8_t slab_key; /* the reclaim type its objects get */
	_Atomic uint8_t flags;
	uint8_t ndeep;
	uint8_t is_deep;
	_Atomic int32_t learn_left;
	/* Below: under the site lock. Evidence counters decay by halving. */
	int32_t n_short, n_medium, n_old;
	uint64_t samples, sampled_bytes, freed, lifetime_sum;
	int nframes;
	void *frames[MB_NFRAMES];   /* one sampled stack, for the report */
	struct mb_site *parent;     /* deep sites: the wrapper's site */
	uint64_t pkey;           /* profile key (module + offset), 0 if none */
	struct mb_site *deep[MB_MAX_DEEP];
};

extern struct mb_site *mb_sites;
extern int mb_classify_ready;

static inline uint32_t mb_site_hash(uintptr_t k)
{
	return (uint32_t)((k * 0x9e3779b97f4a7c15ULL) >> 40);
}

/* mb_self.type_hint (thread.h): -1, or the type the thread asked for with
 * mbuddy_set_thread_type(). */

/* Type (and MB_CLASSIFY_SAMPLE) for an allocation of n bytes whose
 * caller returns to ra: the general case. Never called with an allocator
 * lock held. */
int mb_classify_site_slow(void *ra, size_t n);

/* The fast path: 1 with *key set when the thread's hint, the default or
 * a known, settled site in its home slot decides and no sample is due; 0
 * when mb_classify_site_slow() has to (the countdown is already counted).
 * Before the tables exist, and with classification off, mb_sites is NULL;
 * while they are being set up no key matches, and the slow path waits for
 * mb_classify_ready. */
static inline int mb_classify_fast(void *ra, int *key)
{
	int hint = mb_self.type_hint;
	if (__builtin_expect(hint >= 0, 0)) {
		*key = hint;
		return 1;
	}
	struct mb_site *tab = mb_sites;
	if (__builtin_expect(tab == NULL, 0)) {
		*key = MB_DEFAULT_TYPE; /* classification off */
		return 1;
	}
	if (__builtin_expect(--mb_self.sample_countdown > 0, 1)) {
		struct mb_site *s = &tab[mb_site_hash((uintptr_t)ra) & (MB_SITE_CAP - 1)];
		if (__builtin_expect(atomic_load_explicit(&s->key, memory_order_relaxed) == (uintptr_t)ra &&
				     !atomic_load_explicit(&s->flags, memory_order_relaxed), 1)) {
			*key = atomic_load_explicit(&s->slab_key, memory_order_relaxed);
			return 1;
		}
	}
	return 0;
}

static inline int mb_classify(void *ra, size_t n)
{
	int key;
	if (__builtin_expect(mb_classify_fast(ra, &key), 1))
		return key;
	return mb_classify_site_slow(ra, n);
}

/* After an allocation that mb_classify() marked for sampling. */
void mb_classify_sampled(void *p, size_t n);
static inline void *mb_sampled(void *p, int t, size_t n)
{
	if (__builtin_expect((t & MB_CLASSIFY_SAMPLE) && p != NULL, 0))
		mb_classify_sampled(p, n);
	return p;
}

/* A sampled object is being freed (its state says so). */
void mb_classify_freed(const void *p);

/* Called once the heap is ready: options, rules, profile, unwinder warm-up. */
void mb_classify_init(void);
/* Around fork: prepare waits for unwinds in progress and takes the site
 * lock; parent releases it; child starts afresh. */
void mb_classify_fork_prepare(void);
void mb_classify_fork_parent(void);
void mb_classify_fork_child(void);
/* At exit: what this run learned, written to MBUDDY_PROFILE for the next. */
void mb_classify_save_profile(void);
/* After a successful dlclose, given the modules loaded before it
 * (modules.h): the sites keyed on code that was unloaded learn again, the
 * others keep what they know. With NULL (the list could not be taken),
 * every site learns again. Takes the loader's lock: no lock of ours held. */
struct mb_modules;
void mb_classify_code_unmapped(struct mb_modules *before);

/* The report's call-site section: the sites with the most sampled bytes,
 * as text or as the elements of a JSON array. */
void mb_classify_write_sites(struct mb_out *o, int json);

#endif
