#include "config.h"
#include "purge.h"
#include "heap.h"
#include "lockstat.h"
#include "metadata.h"
#include "options.h"
#include "reclaim_type.h"
#include "region.h"
#include "slab.h"
#include "theap.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>

/* Held by whoever has memory in flight, for one batch at a time. */
static struct mb_lock purge_lock = MB_LOCK_INITIALIZER("purge");
/* Transfer caches, free pages of sparse slabs and metadata pages are not
 * queued: they are looked at every purge period. Written under the
 * purge lock, read without. */
static uint64_t next_sweep_ms;
/* When the last pass over the queues began: passes are at least
 * MB_PURGE_INTERVAL_MS apart, so that with a short decay time memory freed
 * and reused at once is not handed back and faulted in again each time. */
static uint64_t last_pass_ms;
/* Set when objects were freed on a slow path since the last sweep that
 * finished its work: slabs may have free pages, so a sweep falls due
 * (mb_purge_next_due), or nothing would look at them in a program that
 * frees its data and goes on with the fast paths alone. */
static int sweep_wanted;

static void clock_advance_locked(uint64_t now)
{
	if (now > mb_heap.buddy.clock)
		mb_heap.buddy.clock = now;
}

/* How long queued memory waits: the decay time, at least one interval. */
static uint64_t idle_ms(void)
{
	return mb_opt.decay_ms > MB_PURGE_INTERVAL_MS ? mb_opt.decay_ms : MB_PURGE_INTERVAL_MS;
}

static uint64_t idle_since(int force, uint64_t now)
{
	if (force)
		return UINT64_MAX;
	/* Even at a decay time of 0, memory must have stayed untouched for
	 * one interval: a pageblock that memory is taken from again is
	 * queued anew (buddy.c), so what a program frees and takes back at
	 * once is not handed back and faulted in each time. */
	uint64_t idle = idle_ms();
	return now > idle ? now - idle : 0;
}

/* One batch, the purge lock held: returns the pages released; 0 when
 * nothing was due or the kernel refused. */
static size_t batch(uint64_t since, size_t budget)
{
	struct mb_buddy *b = &mb_heap.buddy;
	struct mb_purge_batch bt;
	mb_heap_lock();
	clock_advance_locked(mb_now_ms());
	size_t taken = mb_buddy_purge_take(b, since, budget, &bt);
	mb_heap_unlock();
	if (!taken)
		return 0;
	mb_buddy_purge_release(b, &bt);
	size_t released = 0;
	int failed = 0;
	for (unsigned k = 0; k < bt.n; k++) {
		if (bt.r[k].ok)
			released += bt.r[k].npages;
		else
			failed = 1;
	}
	mb_heap_lock();
	mb_buddy_purge_done(b, &bt);
	__atomic_fetch_add(&mb_heap.released_bytes, (uint64_t)released << MB_PAGE_SHIFT, __ATOMIC_RELAXED);
	mb_heap_unlock();
	return failed ? 0 : released;
}

/* Sparse slabs' free pages and unused metadata pages, the purge lock held. */
static size_t sweep(int force, uint64_t now, size_t budget)
{
	if (!force && now < next_sweep_ms)
		return 0;
	__atomic_store_n(&next_sweep_ms, now + mb_purge_period_ms(), __ATOMIC_RELAXED);
	__atomic_store_n(&sweep_wanted, 0, __ATOMIC_RELAXED);
	unsigned failed, failed2 = 0;
	size_t n = mb_slab_purge_abandoned(budget, &failed);
	if (n < budget && !failed)
		n += mb_theap_purge(budget - n, &failed2);
	if (n >= budget)
		__atomic_store_n(&sweep_wanted, 1, __ATOMIC_RELAXED); /* more to do */
	failed += failed2;
	__atomic_fetch_add(&mb_heap.released_bytes, (uint64_t)n << MB_PAGE_SHIFT, __ATOMIC_RELAXED);
	int meta_failed;
	mb_heap_lock();
	mb_heap.buddy.count.release_failures += failed;
	mb_meta_release(&meta_failed);
	if (meta_failed)
		mb_heap.buddy.count.release_failures++;
	mb_heap_unlock();
	return n;
}

/* ---- huge pages (buddy.h) ---- */

/* Collapses per pass: each copies up to 2 MiB, with no lock held. */
#define HUGE_PASS_UNITS 8
/* After a pass, the next waits mb_cost_wait_ms() of it: the collapses
 * take at most 2% of the process's run. A collapse copies its 2 MiB with
 * the address space's lock held for writing, so the program's page
 * faults wait meanwhile: sqlite3 building a 100 MiB database had 64
 * collapses of 2-6 ms each in a run of 1.2 s, 10% of its time, for a
 * lookup phase too short to win it back. A long-lived program still gets
 * every dense unit collapsed, over 50 times as long. */

/* Dense units that have waited long enough are collapsed, the purge lock
 * held (no release runs meanwhile), no allocator lock. Returns the units
 * the kernel was asked about. */
static size_t huge_pass(size_t max)
{
	struct mb_buddy *b = &mb_heap.buddy;
	uint64_t now = mb_now_ms();
	if (__atomic_load_n(&b->hp_due, __ATOMIC_SEQ_CST) > now ||
	    __atomic_load_n(&mb_heap.hp_after_ms, __ATOMIC_RELAXED) > now)
		return 0;
	uint64_t start = mb_now_us();
	size_t units[HUGE_PASS_UNITS];
	int err[HUGE_PASS_UNITS];
	if (max > HUGE_PASS_UNITS)
		max = HUGE_PASS_UNITS;
	mb_heap_lock();
	clock_advance_locked(mb_now_ms());
	size_t n = b->hp_on ? mb_buddy_hp_take(b, units, max) : 0;
	mb_heap_unlock();
	for (size_t k = 0; k < n; k++) {
		void *unit = mb_buddy_page_addr(b, units[k] << MB_HP_SHIFT);
		/* Too few pages written: the collapse would fault the rest in. */
		long resident = mb_os_resident_pages(unit, MB_HP_PAGES);
		if (resident >= 0 && (size_t)resident < b->hp_resident)
			err[k] = -1;
		else
			err[k] = mb_os_collapse(unit, MB_HP_PAGES << MB_PAGE_SHIFT);
	}
	mb_heap_lock();
	for (size_t k = 0; k < n; k++) {
		mb_buddy_hp_done(b, units[k],
				 err[k] == 0 ? MB_HP_COLLAPSED : err[k] < 0 ? MB_HP_UNWRITTEN : MB_HP_REFUSED);
		/* Not supported here (an old kernel, a seccomp filter): no
		 * unit will do better; stop asking. */
		if (err[k] == EINVAL || err[k] == EPERM || err[k] == ENOSYS) {
			b->hp_on = 0;
			__atomic_store_n(&b->hp_due, UINT64_MAX, __ATOMIC_SEQ_CST);
		}
	}
	mb_heap_unlock();
	if (n)
		__atomic_store_n(&mb_heap.hp_after_ms, mb_now_ms() + mb_cost_wait_ms(mb_now_us() - start),
				 __ATOMIC_RELAXED);
	return n;
}

/* Batches until nothing is due; the purge lock is taken for each. */
static size_t batches(int force)
{
	__atomic_store_n(&last_pass_ms, mb_now_ms(), __ATOMIC_RELAXED);
	size_t total = 0, n;
	do {
		mb_lock_acquire(&purge_lock);
		n = batch(idle_since(force, mb_now_ms()), MB_PURGE_BATCH_BUDGET);
		mb_lock_release(&purge_lock);
		total += n;
	} while (n);
	return total;
}

size_t mb_purge(int force)
{
	mb_lock_acquire(&purge_lock);
	while (huge_pass(HUGE_PASS_UNITS))
		;
	mb_lock_release(&purge_lock);
	size_t total = batches(force);
	/* Then the slabs, bounded, as each central lock is held while its
	 * pages are released; slabs they free are queued, and taken at once
	 * when forced. */
	mb_lock_acquire(&purge_lock);
	total += sweep(force, mb_now_ms(), force ? SIZE_MAX : MB_PURGE_SWEEP_BUDGET);
	mb_lock_release(&purge_lock);
	return total + batches(force);
}

/* Batch after batch, the purge lock held: up to want pages of what has
 * been queued since `since` or before. Returns the pages released, fewer
 * when nothing more is (or the kernel refused). */
static uint64_t pay(uint64_t since, uint64_t want)
{
	uint64_t paid = 0;
	while (paid < want) {
		size_t released = batch(since, (size_t)(want - paid));
		if (!released)
			break;
		paid += released;
	}
	return paid;
}

/* Below this many fresh pages, no system call is worth it. */
#define OFFSET_MIN_PAGES 64
/* Memory idle for less than this is not matched: a program that frees a
 * buffer and takes another of a different size at once would otherwise
 * see each buffer handed back and faulted in again, and the faults of
 * one count as fresh pages that hand back the next. */
#define OFFSET_MIN_IDLE_MS 10
/* Pages released per call at most: the caller is an allocation. */
#define OFFSET_BUDGET 1024

void mb_purge_offset(void)
{
	uint64_t fresh = __atomic_load_n(&mb_heap.buddy.fresh_pages, __ATOMIC_RELAXED);
	uint64_t matched = __atomic_load_n(&mb_heap.fresh_matched, __ATOMIC_RELAXED);
	if (fresh - matched < OFFSET_MIN_PAGES)
		return;
	uint64_t oldest = __atomic_load_n(&mb_heap.buddy.oldest, __ATOMIC_SEQ_CST);
	if (oldest == UINT64_MAX) {
		/* Nothing idle: the heap grows because the program's data do. */
		__atomic_store_n(&mb_heap.fresh_matched, fresh, __ATOMIC_RELAXED);
		return;
	}
	/* The debt is kept while what is queued is younger than
	 * OFFSET_MIN_IDLE_MS: once it has aged without being reused, the heap
	 * grew beside it for nothing, and it goes. */
	uint64_t now = mb_now_ms();
	if (now < OFFSET_MIN_IDLE_MS || oldest > now - OFFSET_MIN_IDLE_MS)
		return;
	if (mb_lock_try(&purge_lock) != 0)
		return;
	matched = __atomic_load_n(&mb_heap.fresh_matched, __ATOMIC_RELAXED);
	uint64_t debt = fresh > matched ? fresh - matched : 0;
	uint64_t want = debt < OFFSET_BUDGET ? debt : OFFSET_BUDGET;
	/* Oldest first, idle for OFFSET_MIN_IDLE_MS at least, however short
	 * the decay time is: memory the heap did not reuse while it needed
	 * memory is memory it is not about to reuse. Paid at once, however
	 * fast the heap grows: with one batch per 10 ms CPython's tests grew
	 * faster than their idle pages went back (main process's peak 59
	 * MiB, 55 paid at once; 52 with MBUDDY_CLASSIFY=off). */
	uint64_t paid = pay(now - OFFSET_MIN_IDLE_MS, want);
	/* What the budget left is paid by the next call; short of it,
	 * nothing idle is left to pay with (or the kernel refused) and the
	 * debt is settled: no slow path retries until the heap has taken
	 * OFFSET_MIN_PAGES more. */
	uint64_t settled = paid >= want && paid < debt ? paid : debt;
	__atomic_store_n(&mb_heap.fresh_matched, matched + settled, __ATOMIC_RELAXED);
	mb_lock_release(&purge_lock);
}

void mb_purge_offset_run(uint64_t pages)
{
	if (pages < mb_heap.buddy.pb_pages || mb_lock_try(&purge_lock) != 0)
		return;
	uint64_t fresh = __atomic_load_n(&mb_heap.buddy.fresh_pages, __ATOMIC_RELAXED);
	uint64_t matched = __atomic_load_n(&mb_heap.fresh_matched, __ATOMIC_RELAXED);
	uint64_t want = fresh > matched ? fresh - matched : 0;
	if (want > pages)
		want = pages;
	/* Whatever is queued, however young: the run is there to be
	 * written, and pages released now are not resident beside it. */
	pay(mb_now_ms(), want);
	/* Settled, paid in full or not: what was queued has gone, and
	 * memory freed later was not idle beside the run. */
	__atomic_fetch_add(&mb_heap.fresh_matched, want, __ATOMIC_RELAXED);
	mb_lock_release(&purge_lock);
}

void mb_purge_init(void)
{
	/* A pageblock the program keeps taking pieces from still gives back
	 * its other free pages, a purge period and a decay time after the
	 * first of them was freed, at the cost of faulting in again what it
	 * takes next. */
	mb_heap.buddy.max_wait_ms = mb_purge_period_ms();
	/* Free pages in pageblocks of the other types, where classification
	 * puts the sites it sets apart, wait a quarter of the decay time:
	 * only those sites take them again (the rest of the heap takes its
	 * own pageblocks, then the pool's), so once the objects of such a
	 * site are freed its pages would stay resident beside the memory the
	 * rest of the heap goes on to use (CPython's tests, classified, held
	 * 1.2x the time-averaged RSS of MBUDDY_CLASSIFY=off). */
	for (int t = 0; t < MB_NTYPES; t++)
		mb_heap.buddy.head_start_ms[t] = t == MB_DEFAULT_TYPE ? 0 : idle_ms() - idle_ms() / 4;
}

void mb_purge_slabs_freed(void)
{
	if (!__atomic_load_n(&sweep_wanted, __ATOMIC_RELAXED))
		__atomic_store_n(&sweep_wanted, 1, __ATOMIC_RELAXED);
}

unsigned long long mb_purge_release_due(void)
{
	uint64_t oldest = __atomic_load_n(&mb_heap.buddy.oldest, __ATOMIC_SEQ_CST);
	uint64_t sweep_due = __atomic_load_n(&sweep_wanted, __ATOMIC_RELAXED)
				     ? __atomic_load_n(&next_sweep_ms, __ATOMIC_RELAXED)
				     : UINT64_MAX;
	if (oldest == UINT64_MAX)
		return sweep_due;
	uint64_t due = oldest + idle_ms();
	if (sweep_due < due)
		due = sweep_due;
	uint64_t next_pass = __atomic_load_n(&last_pass_ms, __ATOMIC_RELAXED) + MB_PURGE_INTERVAL_MS;
	return due > next_pass ? due : next_pass;
}

unsigned long long mb_purge_next_due(void)
{
	uint64_t huge = __atomic_load_n(&mb_heap.buddy.hp_due, __ATOMIC_SEQ_CST);
	uint64_t after = __atomic_load_n(&mb_heap.hp_after_ms, __ATOMIC_RELAXED);
	if (huge != UINT64_MAX && huge < after)
		huge = after;
	uint64_t due = mb_purge_release_due();
	return huge < due ? huge : due;
}

void mb_purge_step(unsigned long long due)
{
	uint64_t now = mb_now_ms();
	if (now < due && now < __atomic_load_n(&next_sweep_ms, __ATOMIC_RELAXED))
		return;
	/* No thread does it: a bounded step here, unless another thread is
	 * at it (or this one, inside a fork handler). */
	if (mb_lock_try(&purge_lock) != 0)
		return;
	size_t n = 0;
	/* With MBUDDY_BACKGROUND=0 only, one collapse at most: the caller is
	 * an allocation. Else the thread makes them. */
	if (!mb_opt.background)
		huge_pass(1);
	if (now >= due) {
		__atomic_store_n(&last_pass_ms, now, __ATOMIC_RELAXED);
		n = batch(idle_since(0, now), MB_PURGE_INLINE_BUDGET);
	}
	if (n < MB_PURGE_INLINE_BUDGET)
		sweep(0, now, MB_PURGE_INLINE_BUDGET - n);
	mb_lock_release(&purge_lock);
}

int mb_purge_settle(void)
{
	mb_heap_lock();
	int busy = mb_heap.buddy.nr_inflight || mb_heap.buddy.pages_inflight;
	mb_heap_unlock();
	if (busy) {
		mb_lock_acquire(&purge_lock);
		mb_lock_release(&purge_lock);
	}
	return busy;
}

void mb_purge_pause(void)
{
	mb_lock_acquire(&purge_lock);
}

void mb_purge_resume(void)
{
	mb_lock_release(&purge_lock);
}

void mb_purge_fork_prepare(void)
{
	mb_lock_acquire(&purge_lock);
}

void mb_purge_fork_parent(void)
{
	mb_lock_release(&purge_lock);
}

void mb_purge_fork_child(void)
{
	mb_lock_after_fork_child(&purge_lock, 0);
}
