/* Classification: which slab key an allocation gets.
 *
 * The program's own word comes first (the per-thread hint of the public
 * API). Otherwise the call site decides (site.h): the fast path keys on
 * the return address and reads the key its site has, which is the default
 * (the untyped heap's) until evidence sets the site apart. The evidence
 * comes from a sample of allocations (sample.h): every new site's first
 * ones, then one in MB_SAMPLE_PERIOD on average. A sample due on the
 * countdown also records the call stack, taken with libunwind's
 * unw_backtrace: a return address whose callers' objects live differently
 * is a wrapper (xmalloc, strdup, g_malloc, PyObject_Malloc...), whose
 * allocations are told apart by the frames above it. */
#ifndef MB_CLASSIFY_H
#define MB_CLASSIFY_H

#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>

#include "reclaim_type.h"
#include "out.h"
#include "site.h"
#include "thread.h"

#define MB_CLASSIFY_SAMPLE 0x100 /* record this allocation as a sample */

extern int mb_classify_ready;
/* Set while classification sleeps (classify.c): the fast path counts the
 * allocations down to the slow path, which decides when it wakes. */
extern int mb_classify_asleep;

/* mb_self.type_hint (thread.h): -1, or the slab key of every allocation
 * of the thread: the type it asked for with mbuddy_set_thread_type(), or
 * MB_OWN_KEY inside the library's own machinery. */

/* Type (and MB_CLASSIFY_SAMPLE) for an allocation of n bytes whose
 * caller returns to ra: the general case. Never called with an allocator
 * lock held. */
int mb_classify_site_slow(void *ra, size_t n);

/* The fast path: 1 with *key set when the thread's hint, the default or
 * a known, settled site in its home slot decides and no sample is due; 0
 * when mb_classify_site_slow() has to (the countdown is already counted).
 * Before the tables exist, while classification sleeps and with it off,
 * mb_site_table is 0; while they are being set up no key matches, and
 * the slow path waits for mb_classify_ready. */
static inline int mb_classify_fast(void *ra, int *key)
{
	int hint = mb_self.type_hint;
	if (__builtin_expect(hint >= 0, 0)) {
		*key = hint;
		return 1;
	}
	uintptr_t tab = atomic_load_explicit((_Atomic uintptr_t *)&mb_site_table, memory_order_acquire);
	if (__builtin_expect(tab == 0, 0)) {
		/* Classification off, or asleep: the countdown still brings
		 * the thread to a slow path now and then (alloc.h). */
		*key = MB_DEFAULT_TYPE;
		return --mb_self.sample_countdown > 0;
	}
	if (__builtin_expect(--mb_self.sample_countdown > 0, 1)) {
		struct mb_site_slot *s = &mb_site_table_slots(tab)[mb_site_hash((uintptr_t)ra) & mb_site_table_mask(tab)];
		if (__builtin_expect(atomic_load_explicit(&s->key, memory_order_relaxed) == (uintptr_t)ra &&
				     !atomic_load_explicit(&s->flags, memory_order_relaxed), 1)) {
			*key = atomic_load_explicit(&s->slab_key, memory_order_relaxed);
			return 1;
		}
	}
	return 0;
}

/* After an allocation that the classifier marked for sampling. */
void mb_classify_sampled(void *p, size_t n);
static inline void *mb_sampled(void *p, int t, size_t n)
{
	if (__builtin_expect((t & MB_CLASSIFY_SAMPLE) && p != NULL, 0))
		mb_classify_sampled(p, n);
	return p;
}

/* A sampled object is being freed (its slab or page record says so). */
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
/* dlclose (site_unload.h) and the report's section (site_report.h) are
 * layers of their own above this one. */

#endif
