#include "config.h"
#include "classify.h"
#include "compiler.h"
#include "heap.h"
#include "options.h"
#include "profile.h"
#include "rules.h"
#include "sample.h"
#include "site.h"
#include "unwinder.h"

#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

/* Read by every malloc while classification is off or asleep: a line
 * that no sample writes (compiler.h). */
MB_LINE_ALIGNED int mb_classify_asleep;
int mb_classify_ready;

/* Classification sleeps until the process has made WAKE_AFTER_ALLOCS
 * allocations or lived WAKE_AFTER_MS since it was set up, whichever comes
 * first: a tiny process (an assembler, a shell, an interpreter started
 * for one line, a tool a build runs a thousand times) ends before any
 * site could be set apart, and its call-site tables, samples and unwinds
 * would be all cost: page faults for tables touched at random, a slow
 * path per new site. No longer: the patch's experiment (highorder.py)
 * pins its long-lived objects among its first few thousand allocations,
 * and with 32,768 it got 81-115 of 160 blocks instead of 150-160 (16,384:
 * 23 and 91; 8,192: 122 and 154). Asleep, every allocation takes the
 * default key, as with MBUDDY_CLASSIFY=off; the fast path counts down
 * WAKE_CHECK allocations at a time (a thread's first count is 2,048), and
 * the slow path adds them up. A rule or a profile wakes it at once: the
 * user asked for types from the start. */
#define WAKE_AFTER_ALLOCS 2048
#define WAKE_AFTER_MS 10
#define WAKE_CHECK 1024
MB_LINE_ALIGNED static uint64_t asleep_allocs, asleep_since_ms;

/* Set while this thread classifies: an allocation made meanwhile (by
 * libunwind, by dladdr) takes its site's key as it stands. */
static __thread int in_classify MB_TLS;
/* A new thread starts four periods away from its first sample, and does
 * not unwind before it: libunwind gives every thread that unwinds a trace
 * cache of its own (a quarter MiB, faulted in, then unmapped at exit), which
 * short-lived threads should not pay for. */
static __thread int thread_unwinds MB_TLS;
/* Nor before it has lived THREAD_UNWIND_AFTER_MS from its first sample or
 * taken THREAD_UNWIND_AFTER_SAMPLES samples (some 32,000 allocations),
 * whichever comes first: a program that replaces its threads every few
 * milliseconds (a server's worker per request) would pay the trace cache's
 * set-up and page faults for each of them, a third of its time, for
 * samples that a longer-lived thread takes as well. */
#define THREAD_UNWIND_AFTER_MS 50
#define THREAD_UNWIND_AFTER_SAMPLES 64
static __thread uint64_t thread_first_sample_ms MB_TLS;
static __thread uint32_t thread_samples MB_TLS;
/* A new site's first allocation is unwound only once the process has
 * allocated this much (sampled allocations are unwound from the start): a
 * short process (a compiler's driver, a tool run a thousand times by a
 * build) ends before any site could be set apart (rules.c asks for a
 * quarter MiB live), and an unwind of each of its hundreds of sites would
 * be all cost, each new frame a lookup of its unwind information with
 * signals masked around it by libunwind. */
#define UNWIND_AFTER_BYTES ((uint64_t)16 << 20)

/* The allocation clock only moves forward: no latch is needed. */
static int may_unwind(void)
{
	return mb_alloc_clock_now() >= UNWIND_AFTER_BYTES;
}

/* Nor is a sample unwound before one finds the heap holding this much:
 * in a smaller one no site could be set apart (rules.c asks a quarter MiB
 * live of each), and the first unwind costs a small program (sed, grep,
 * gzip) a third of a MiB, libunwind's pages and its quarter-MiB trace
 * cache (sed's peak: glibc's +1.2 MiB, +0.4 without). Samples without a
 * stack still give their direct site its evidence. */
#define UNWIND_HEAP_BYTES ((size_t)1 << 20)
static int heap_worth_unwinding(void)
{
	static int reached;
	if (__atomic_load_n(&reached, __ATOMIC_RELAXED))
		return 1;
	if (__atomic_load_n(&mb_heap.buddy.pages_allocated, __ATOMIC_RELAXED) < UNWIND_HEAP_BYTES >> MB_PAGE_SHIFT)
		return 0;
	__atomic_store_n(&reached, 1, __ATOMIC_RELAXED);
	return 1;
}

static __thread uint32_t sample_rng MB_TLS;
/* The countdown's value when it was last drawn (thread.c's start value). */
static __thread int32_t countdown_drawn MB_TLS = 4 * MB_SAMPLE_PERIOD;
/* The sample the next mb_classify_sampled() records. */
static __thread struct mb_site *pending_site MB_TLS, *pending_deep MB_TLS;
static __thread uint32_t pending_weight MB_TLS;
static __thread int pending_key MB_TLS; /* the slab key it was given */
static __thread void *pending_frames[MB_NFRAMES] MB_TLS;
static __thread int pending_nframes MB_TLS;

/* A thread's recent call paths through a wrapper, keyed by the return
 * address and the stack depth, remember their deep site. Unwinds confirm
 * it, often at first and then one use in WRAPPER_RECHECK; two paths found
 * behind one key (same depth, same caller of the wrapper when its slot
 * is known, different callers above it) make that key unwind every time. */
#define WRAPPER_MEMO 64
#define WRAPPER_RECHECK 32
struct wrapper_memo {
	uintptr_t key;
	struct mb_site *deep;
	uint32_t uses;
	uint32_t ambiguous;
};
static __thread struct wrapper_memo wrapper_memo[WRAPPER_MEMO] MB_TLS;

/* A site met in an earlier run starts with that run's evidence, including
 * how long its freed objects lived (old_threshold depends on it). */
static void profile_evidence(struct mb_site *s, const struct mb_profile_entry *pe)
{
	s->n_short = pe->n_short;
	s->n_medium = pe->n_medium;
	s->n_prior_old = pe->n_old;
	s->freed = (uint64_t)pe->n_short + (uint64_t)pe->n_medium;
	s->lifetime_sum = pe->mean_lifetime * s->freed;
}

static int32_t next_countdown(void)
{
	/* Random period around MB_SAMPLE_PERIOD so loops cannot alias it. */
	uint32_t x = sample_rng ? sample_rng : (uint32_t)(uintptr_t)&sample_rng | 1;
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	sample_rng = x;
	return (int32_t)(1 + x % (2 * MB_SAMPLE_PERIOD));
}

/* Classification starts: the fast path reads the site tables, and this
 * thread's next sample falls as any would. */
static void wake(void)
{
	mb_sites_publish();
	__atomic_store_n(&mb_classify_ready, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&mb_classify_asleep, 0, __ATOMIC_RELEASE);
	mb_self.sample_countdown = countdown_drawn = next_countdown();
}

/* Asleep, this thread's countdown ran out: countdown_drawn allocations. */
static void wake_maybe(void)
{
	uint64_t n = __atomic_add_fetch(&asleep_allocs, (uint64_t)countdown_drawn, __ATOMIC_RELAXED);
	mb_self.sample_countdown = countdown_drawn = WAKE_CHECK;
	if (n >= WAKE_AFTER_ALLOCS || mb_now_ms() - asleep_since_ms >= WAKE_AFTER_MS)
		wake();
}

/* ---- the stack ---- */

/* fork() must not happen while a thread is inside libunwind: the child
 * would inherit its cache lock held, forever. Unwinds announce themselves;
 * the prepare handler closes the gate and waits for them to finish (they
 * take none of our locks, so they always do), and an unwind that finds the
 * gate closed does without a stack. */
MB_LINE_ALIGNED static _Atomic int unwinders, fork_gate;

static void capture(void)
{
	atomic_fetch_add(&unwinders, 1);
	if (atomic_load(&fork_gate)) {
		atomic_fetch_sub(&unwinders, 1);
		pending_nframes = 0;
		return;
	}
	int n = mb_unw.backtrace(pending_frames, MB_NFRAMES);
	atomic_fetch_sub(&unwinders, 1);
	pending_nframes = n > 0 ? n : 0;
}

/* Where ra stands in the captured stack, or -1. */
static int frame_index(void *ra)
{
	for (int i = 0; i < pending_nframes; i++)
		if (pending_frames[i] == ra)
			return i;
	return -1;
}

/* The key of the frames above ra in the captured stack. */
static uintptr_t deep_key(void *ra)
{
	int i = frame_index(ra);
	if (i < 0 || i + 1 >= pending_nframes)
		return 0;
	/* Keyed on the wrapper's own address too: callers of two different
	 * wrappers are different sites. */
	uintptr_t k = (uintptr_t)ra ^ (uintptr_t)pending_frames[i + 1] * 31;
	if (i + 2 < pending_nframes)
		k ^= (uintptr_t)pending_frames[i + 2] * 0x9e3779b97f4a7c15ULL;
	return k | 1;
}

/* The site's first stack from `anchor` on (its return address, a deep
 * site's wrapper's), for the report and for dlclose (which must know the
 * callers a deep site stands for). */
static void keep_frames_locked(struct mb_site *s, void *anchor)
{
	int i = frame_index(anchor);
	if (s->nframes > 1 || i < 0)
		return;
	s->nframes = 0;
	while (i < pending_nframes && s->nframes < MB_SITE_FRAMES)
		s->frames[s->nframes++] = pending_frames[i++];
}

/* The deep site of the captured stack's frames above ra, made if new. */
static struct mb_site *deep_site(struct mb_site *s, void *ra)
{
	uintptr_t k = deep_key(ra);
	if (!k)
		return NULL;
	struct mb_site *d = mb_site_lookup(MB_SITES_DEEP, k);
	if (d)
		return d;
	uint64_t pkey = 0;
	struct mb_profile_entry pe;
	int known = 0;
	if (mb_opt.profile && s->pkey) {
		int i = frame_index(ra); /* found: deep_key succeeded */
		uint64_t f1 = i + 1 < pending_nframes ? mb_profile_pc_key(pending_frames[i + 1]) : 0;
		uint64_t f2 = i + 2 < pending_nframes ? mb_profile_pc_key(pending_frames[i + 2]) : 0;
		pkey = mb_profile_deep_key(s->pkey, f1, f2);
		known = mb_profile_lookup(pkey, &pe) == 0;
	}
	mb_site_lock();
	int created;
	d = mb_site_insert_locked(MB_SITES_DEEP, k, &created);
	if (created) {
		d->parent = s;
		d->pkey = pkey;
		keep_frames_locked(d, ra);
		if (s->ndeep < MB_MAX_DEEP)
			s->deep[s->ndeep++] = mb_site_index(d);
		if (known) {
			profile_evidence(d, &pe);
			atomic_store(&mb_site_slot_of(d)->flags, 0);
			mb_site_set_type_locked(d, pe.type);
		}
	}
	mb_site_unlock();
	return d;
}

/* ---- the slow path ---- */

/* The direct site of ra, new: typed by a rule, started from a profile,
 * or learning. */
static struct mb_site *new_site(void *ra)
{
	/* dladdr takes the loader's lock: outside ours. */
	int rt = mb_rules_type(ra);
	uint64_t pkey = mb_opt.profile ? mb_profile_pc_key(ra) : 0;
	struct mb_profile_entry pe;
	int known = rt < 0 && mb_profile_lookup(pkey, &pe) == 0;
	mb_site_lock();
	int created;
	struct mb_site *s = mb_site_insert_locked(MB_SITES_DIRECT, (uintptr_t)ra, &created);
	if (created) {
		s->pkey = pkey;
		if (rt >= 0) {
			mb_site_pin_locked(s, rt);
		} else if (known) {
			/* Start where the last run ended: its evidence and
			 * verdict, sampling at the normal rate. */
			profile_evidence(s, &pe);
			atomic_store(&mb_site_slot_of(s)->flags, pe.wrapper ? MB_SITE_WRAPPER : 0);
			mb_site_set_type_locked(s, pe.type);
		}
	}
	mb_site_unlock();
	return s;
}

/* Where a wrapper keeps its own return address (its caller's call site),
 * as an offset from wrapper_deep()'s frame: per thread and per wrapper
 * return address, learned from one unwind that reports stack pointers, and
 * checked against the unwound caller at every unwind after. A wrapper
 * called from several places at one depth (xmalloc from three functions
 * that main calls) is then told apart by one load instead of an unwind per
 * call. A mismatch, or a wrapper whose frame does not hold the address
 * once and only once, falls back to the depth alone for good. */
#define CALLER_SLOTS 32
#define CALLER_FRAME_MAX 4096 /* bytes of a wrapper's frame searched */
enum { SLOT_UNKNOWN, SLOT_KNOWN, SLOT_NONE };
struct caller_slot {
	uintptr_t ra;
	intptr_t off;
	int state;
};
static __thread struct caller_slot caller_slots[CALLER_SLOTS] MB_TLS;

/* The frame of the wrapper that returns to ra, from an unwind with stack
 * pointers: the offset from `here` of the one word in that frame holding
 * the wrapper's own return address, which must be `caller`. 0 if there is
 * no such word. */
/* Where libunwind's getcontext is a function (x86-64) it was looked up
 * when libunwind was loaded; elsewhere libunwind.h defines it inline. */
#ifdef __x86_64__
#define GETCONTEXT(uc) mb_unw.getcontext(uc)
#else
#define GETCONTEXT(uc) unw_getcontext(uc)
#endif

static __attribute__((noinline)) MB_READS_OTHER_FRAMES int learn_caller_slot(uintptr_t ra, uintptr_t caller, uintptr_t here, intptr_t *off)
{
	atomic_fetch_add(&unwinders, 1);
	int found = 0;
	unw_context_t uc;
	unw_cursor_t c;
	if (atomic_load(&fork_gate) || GETCONTEXT(&uc) != 0 || mb_unw.init_local(&c, &uc) != 0)
		goto out;
	for (int n = 0; n < 2 * MB_NFRAMES && mb_unw.step(&c) > 0; n++) {
		unw_word_t ip, sp, up_ip, up_sp;
		if (mb_unw.get_reg(&c, UNW_REG_IP, &ip) != 0 || ip != ra)
			continue;
		/* The wrapper's frame: from its stack pointer at the call to
		 * its caller's. */
		if (mb_unw.get_reg(&c, UNW_REG_SP, &sp) != 0 || mb_unw.step(&c) <= 0 ||
		    mb_unw.get_reg(&c, UNW_REG_IP, &up_ip) != 0 || mb_unw.get_reg(&c, UNW_REG_SP, &up_sp) != 0 ||
		    up_ip != caller || up_sp <= sp || up_sp - sp > CALLER_FRAME_MAX || sp < here)
			break;
		uintptr_t at = 0;
		int seen = 0;
		for (uintptr_t w = (uintptr_t)sp; w + sizeof(uintptr_t) <= (uintptr_t)up_sp; w += sizeof(uintptr_t))
			if (*(const uintptr_t *)w == caller) {
				at = w;
				seen++;
			}
		if (seen == 1 && at - here <= CALLER_FRAME_MAX) {
			*off = (intptr_t)(at - here);
			found = 1;
		}
		break;
	}
out:
	atomic_fetch_sub(&unwinders, 1);
	return found;
}

/* The deep site that a wrapper's allocation at this stack depth, from
 * this caller of the wrapper when its slot is known, comes from: from the
 * thread's memo when it is sure, else by unwinding. */
static __attribute__((noinline)) MB_READS_OTHER_FRAMES struct mb_site *wrapper_deep(struct mb_site *s, void *ra)
{
	/* This frame's address stands for the stack depth; the frames
	 * between it and the wrapper's are the same for one return address. */
	uintptr_t here = (uintptr_t)__builtin_frame_address(0);
	struct caller_slot *cs = &caller_slots[mb_site_hash((uintptr_t)ra) & (CALLER_SLOTS - 1)];
	if (cs->ra != (uintptr_t)ra) {
		cs->ra = (uintptr_t)ra;
		cs->state = SLOT_UNKNOWN;
	}
	uintptr_t caller = cs->state == SLOT_KNOWN ? *(const uintptr_t *)(here + (uintptr_t)cs->off) : 0;
	uintptr_t key = (uintptr_t)ra ^ (here * 0x9e3779b97f4a7c15ULL) ^ (caller * 0xc2b2ae3d27d4eb4fULL);
	/* Two ways: call paths that meet in one entry would otherwise evict
	 * each other at every call, and each come back as an unwind. The
	 * busier entry stays. */
	uint32_t h = mb_site_hash(key) & (WRAPPER_MEMO - 1);
	struct wrapper_memo *wm = &wrapper_memo[h];
	if (wm->key != key && wrapper_memo[h ^ 1].key == key)
		wm = &wrapper_memo[h ^ 1];
	if (wm->key != key) {
		if (wrapper_memo[h ^ 1].uses < wm->uses)
			wm = &wrapper_memo[h ^ 1];
		wm->key = key;
		wm->deep = NULL;
		wm->uses = 0;
		wm->ambiguous = 0;
	}
	uint32_t u = ++wm->uses;
	if (!wm->ambiguous && wm->deep && (u & (u - 1)) != 0 && u % WRAPPER_RECHECK != 0)
		return wm->deep;
	capture();
	struct mb_site *d = deep_site(s, ra);
	int i = frame_index(ra);
	uintptr_t unwound = i >= 0 && i + 1 < pending_nframes ? (uintptr_t)pending_frames[i + 1] : 0;
	if (cs->state == SLOT_KNOWN && caller != unwound) {
		/* Not where it was: another path through the entry points,
		 * or a frame of variable size. */
		cs->state = SLOT_NONE;
	} else if (cs->state == SLOT_UNKNOWN) {
		intptr_t off;
		cs->state = unwound && learn_caller_slot((uintptr_t)ra, unwound, here, &off) ? SLOT_KNOWN : SLOT_NONE;
		if (cs->state == SLOT_KNOWN)
			cs->off = off;
	}
	if (wm->deep && d != wm->deep)
		wm->ambiguous = 1;
	wm->deep = d;
	return d;
}

/* With in_classify set: the key for an allocation of n bytes at ra (site
 * s, NULL if unseen), and MB_CLASSIFY_SAMPLE with the pending sample when
 * it is one. `due`: the sampling countdown ran out. */
static int classify(void *ra, size_t n, struct mb_site *s, int due)
{
	if (!s && !(s = new_site(ra)))
		return MB_DEFAULT_TYPE;
	int fl = mb_site_flags(s);
	if (fl & MB_SITE_PINNED)
		return mb_site_key(s);
	if (due && !thread_unwinds) {
		uint64_t now = mb_now_ms();
		if (!thread_first_sample_ms)
			thread_first_sample_ms = now;
		else if (now - thread_first_sample_ms >= THREAD_UNWIND_AFTER_MS ||
			 ++thread_samples >= THREAD_UNWIND_AFTER_SAMPLES)
			thread_unwinds = 1;
	}
	uint32_t weight = 0;
	int unwind = 0;
	if (due) {
		/* The allocations since the last draw, each taken for one of
		 * this size (a random one of them): the allocation clock, with
		 * no byte counted on a fast path. */
		int32_t left = mb_self.sample_countdown > 0 ? mb_self.sample_countdown : 0;
		weight = (uint32_t)(countdown_drawn - left);
		mb_alloc_clock_advance((uint64_t)weight * (n ? n : 1));
		mb_self.sample_countdown = countdown_drawn = next_countdown();
		unwind = thread_unwinds && heap_worth_unwinding();
	} else if (fl & MB_SITE_LEARNING) {
		int32_t left = atomic_fetch_sub(&s->learn_left, 1);
		if (left <= 1)
			atomic_fetch_and(&mb_site_slot_of(s)->flags, (uint8_t)~MB_SITE_LEARNING);
		if (left > 0) {
			weight = 1;
			/* Only its first: the others need no stack, and a
			 * short process has many sites. */
			unwind = thread_unwinds && left == MB_LEARN_SAMPLES && may_unwind();
		}
	}
	int key = mb_site_key(s);
	struct mb_site *d = NULL;
	int through_wrapper = (fl & MB_SITE_WRAPPER) && thread_unwinds;
	if ((unwind || through_wrapper) && !mb_unwinder_ready(ra)) {
		/* Not loaded yet, or not from here: no stack this time. */
		unwind = 0;
	} else if (unwind) {
		capture();
		d = deep_site(s, ra);
	} else if (through_wrapper) {
		d = wrapper_deep(s, ra);
	}
	/* Through a wrapper, the deep site decides. */
	if (d && (fl & MB_SITE_WRAPPER))
		key = mb_site_key(d);
	if (!weight)
		return key;
	pending_site = s;
	pending_deep = d;
	pending_weight = weight;
	pending_key = key;
	if (!unwind)
		pending_nframes = 0;
	return key | MB_CLASSIFY_SAMPLE;
}

int mb_classify_site_slow(void *ra, size_t n)
{
	if (!mb_classify_ready) {
		if (__atomic_load_n(&mb_classify_asleep, __ATOMIC_ACQUIRE))
			wake_maybe();
		else
			mb_self.sample_countdown = countdown_drawn = WAKE_CHECK;
		return MB_DEFAULT_TYPE;
	}
	struct mb_site *s = mb_site_lookup(MB_SITES_DIRECT, (uintptr_t)ra);
	int due = mb_self.sample_countdown <= 0;
	if (s && !due && !(mb_site_flags(s) & (MB_SITE_LEARNING | MB_SITE_WRAPPER)))
		return mb_site_key(s);
	if (in_classify)
		return s ? mb_site_key(s) : MB_DEFAULT_TYPE;
	in_classify = 1;
	/* What libunwind and the loader allocate meanwhile (glibc's block of
	 * libunwind's thread-local variables at a thread's first unwind,
	 * dlopen's records of it) lives as long as the thread or the process
	 * and must not lie among the program's objects, where an overflow of
	 * one of theirs would reach it: it takes the own key's slabs
	 * (reclaim_type.h). tests/classify/unwinder_tls checks it. */
	int hint = mb_self.type_hint;
	mb_self.type_hint = MB_OWN_KEY;
	int key = classify(ra, n, s, due);
	mb_self.type_hint = hint;
	in_classify = 0;
	return key;
}

/* ---- samples ---- */

void mb_classify_sampled(void *p, size_t n)
{
	struct mb_site *s = pending_site, *d = pending_deep;
	pending_site = pending_deep = NULL;
	if (!s || !mb_classify_ready)
		return;
	if (pending_nframes) {
		void *ra = (void *)atomic_load(&mb_site_slot_of(s)->key);
		mb_site_lock();
		keep_frames_locked(s, ra);
		if (d)
			keep_frames_locked(d, ra);
		mb_site_unlock();
	}
	mb_sample_add(p, n, s, d, pending_weight, pending_key);
}

void mb_classify_freed(const void *p)
{
	if (mb_classify_ready)
		mb_sample_freed(p);
}

/* ---- set-up, fork, profile ---- */

void mb_classify_init(void)
{
	if (!mb_opt.classify)
		return;
	mb_rules_parse(mb_opt.rules);
	if (mb_opt.profile)
		mb_profile_load(mb_opt.profile);
	if (mb_samples_init() != 0 || mb_sites_init() != 0) {
		/* The fast path reads no table as "off". */
		mb_site_table = 0;
		mb_warn("cannot reserve the call-site tables; classification is off");
		mb_opt.classify = 0;
		return;
	}
	mb_unwinder_reserve();
	if (mb_opt.rules || mb_opt.profile) {
		wake();
		return;
	}
	asleep_since_ms = mb_now_ms();
	__atomic_store_n(&mb_classify_asleep, 1, __ATOMIC_RELEASE);
}

void mb_classify_fork_prepare(void)
{
	atomic_store(&fork_gate, 1);
	while (atomic_load(&unwinders))
		sched_yield();
	mb_sites_fork_prepare();
}

void mb_classify_fork_parent(void)
{
	mb_sites_fork_parent();
	atomic_store(&fork_gate, 0);
}

void mb_classify_fork_child(void)
{
	atomic_store(&unwinders, 0);
	atomic_store(&fork_gate, 0);
	mb_unwinder_fork_child();
	mb_sites_fork_child();
}

void mb_classify_save_profile(void)
{
	if (!mb_classify_ready || !mb_opt.profile)
		return;
	if (mb_profile_save_begin(mb_opt.profile) != 0)
		return;
	mb_site_lock();
	for (size_t i = 0; i < mb_site_count_locked(); i++) {
		struct mb_site *s = mb_site_nth_locked(i);
		int fl = mb_site_flags(s);
		if (!s->pkey || (fl & MB_SITE_PINNED) || s->n_short + s->n_medium + s->n_old + s->n_prior_old < 3)
			continue;
		struct mb_profile_entry e = { s->pkey, (uint8_t)mb_site_type(s), (fl & MB_SITE_WRAPPER) != 0,
					      s->n_short, s->n_medium, s->n_old + s->n_prior_old,
					      s->freed ? s->lifetime_sum / s->freed : 0 };
		mb_profile_save_site(&e);
	}
	mb_site_unlock();
	mb_profile_save_end();
}
