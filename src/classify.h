/* Layer 5: which reclaim type an allocation gets.
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
#include <stdint.h>

#include "reclaim_type.h"
#include "tcache.h"

#define MB_TYPE_MASK 0x3
#define MB_CLASSIFY_SAMPLE 0x100 /* record this allocation as a sample */
#define MB_SAMPLE_PERIOD 128     /* one sampled allocation in this many */

/* -1, or the type the thread asked for with mbuddy_set_thread_type(). */
extern __thread int mb_type_hint MB_TLS;

/* The allocator's clock: bytes handed out so far (approximately). */
extern uint64_t mb_alloc_clock;

/* Type (and MB_CLASSIFY_SAMPLE) for an allocation of n bytes whose
 * caller returns to ra. Never called with an allocator lock held. */
int mb_classify_site(void *ra, size_t n);

static inline int mb_classify(void *ra, size_t n)
{
	int hint = mb_type_hint;
	if (__builtin_expect(hint >= 0, 0))
		return hint;
	return mb_classify_site(ra, n);
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
/* Around fork. */
void mb_classify_lock(void);
void mb_classify_unlock(void);
void mb_classify_after_fork_child(void);
/* After dlclose: sites in unmapped code must not be trusted. */
void mb_classify_code_unmapped(void);

#endif
