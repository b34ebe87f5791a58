/* soak.c — a long-running, multi-threaded, forking soak test of malloc
 * (issue 7). Run it under LD_PRELOAD=libmbuddy.so, or without a preload as
 * a control against the C library's malloc:
 *
 *   soak [--seconds N] [--threads N] [--seed N] [--report N] ...
 *
 * (`soak --help` lists every option.) tests/soak/soak-quick.test runs it
 * for $MBUDDY_SOAK_SECONDS (default 20) under LD_PRELOAD=$MBUDDY_LIB.
 *
 * What it does
 *
 * - N worker threads (default 4) each own a table of WSLOTS live blocks.
 *   Sizes are random from 8 B to 2 MiB, skewed small, with extra weight on
 *   powers of two and their neighbours. Lifetimes are random: a small
 *   "short" region of the table turns over every few dozen operations, the
 *   rest holds blocks that live for hundreds to hundreds of thousands of
 *   operations, a few of them until the thread's table is emptied.
 * - Blocks come from malloc, calloc (checked to be zero), posix_memalign and
 *   aligned_alloc (checked to be aligned) and realloc(NULL, n); they are
 *   resized with realloc (the kept prefix is checked) and freed with free.
 * - Every byte of every block holds a pattern derived from (block id,
 *   generation, offset). The whole block is verified before every realloc
 *   and free, at random, and in full sweeps of the table.
 * - Some blocks are handed to other threads through a mutex-protected queue
 *   and freed (or adopted, sometimes with a realloc) there.
 * - Threads exit after a random lifetime and are replaced; the successor
 *   inherits the table, verifies it, and frees/reallocs blocks that the dead
 *   thread allocated. An exiting thread sometimes frees all its blocks or
 *   hands them to the queue first.
 * - A forker thread keeps a table of its own and forks every ~fork-ms ms.
 *   The child verifies the blocks it inherited, frees or reallocs some of
 *   them, does child-ops random operations of its own with verification,
 *   frees everything it allocated, reports its counters through a pipe and
 *   exits 0 (half of the children with exit(), half with _exit()). The
 *   parent waits and counts failures; a child that hangs is killed by its
 *   alarm (a deadlock in the child's allocator).
 *
 * Which inherited blocks are consistent in the child
 *
 * fork() does not copy memory at one instant while other threads run, so a
 * block another thread was writing during the fork may be torn in the child.
 * Each slot of a worker table therefore carries a sequence counter: odd
 * while its owner changes the slot or the block's contents (allocation,
 * fill, realloc, free, hand-off), even otherwise. The forker loads every
 * counter (acquire) before fork() and again after fork() returns in the
 * parent; a slot whose counter was even and unchanged across the whole
 * fork was not written during it, so its block is whole in the child. The
 * parent sends that set to the child as a bitmap through a pipe and the
 * child verifies only those blocks (within a byte budget, from a random
 * start) plus every block of the forker's own table (the forking thread
 * does not write while it forks). The child writes its messages with
 * write(2) and never touches the hand-off queue or any other lock that a
 * thread of the parent may have held.
 *
 * Deadlocks: a child has an alarm (--child-timeout, default 60 s); one
 * still there 10 s after it (hung with SIGALRM blocked) is reported with
 * its /proc status and killed with SIGKILL (--keep-hung leaves it for a
 * debugger). In the parent, a thread that makes no progress for
 * --stall-seconds (default 180) aborts the run with the summary line
 * marked stalled=1.
 *
 * Output: progress lines (with --report N) on standard error, and one
 * summary line on standard output:
 *
 *   SOAK seconds=.. ops=.. bytes_verified=.. forks=.. corruption=0 ...
 *
 * corruption counts failed verifications (a misaligned or non-zeroed block
 * included, in the parent or a child); null counts allocation failures;
 * stable_at_fork is the share of worker slots the children could trust.
 * The exit status is 0 only when there was no corruption, no allocation
 * failure (NULL), no failed child and no internal error. --seed N repeats
 * a run's random choices (not its thread interleaving); --inject checks
 * that the checker itself fails a run.
 *
 * Sanitizers: the program is clean under -fsanitize=thread and
 * -fsanitize=address,undefined without a preload. The sanitizers'
 * allocators (GCC 12, clang 14) are not fork-safe, though: now and then a
 * child deadlocks inside the sanitizer's own malloc, on a lock another
 * thread held at the fork, and its alarm fails the run. Use --fork-ms 0
 * with them, or ignore such child failures. */
#define _GNU_SOURCE 1

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

#define MAX_WORKERS 64
#define WSLOTS 1024      /* blocks per table */
#define SHORT_SLOTS 64   /* the short-lived region at the start of a table */
#define MIN_SIZE 8
#define MAX_SIZE (2 * MiB)
#define QCAP 1024        /* hand-off queue entries */
#define QMAX_BYTES (32 * MiB)
#define SWEEP_EVERY 65536 /* operations between full sweeps of a table */

/* ---- options ---- */

static double opt_seconds = 10;
static int opt_threads = 4;
static uint64_t opt_seed;
static size_t opt_max_mb = 256;
static int opt_fork_ms = 100;
static size_t opt_child_verify_mb = 16;
static int opt_child_ops = 3000;
static int opt_child_timeout = 60;
static int opt_stall_seconds = 180; /* a thread without progress that long: deadlock */
static double opt_report;
static int opt_quiet;
static int opt_keep_hung;
static int opt_inject; /* self-test: 1 = in a worker, 2 = in a child, 3 = hang, 4 = child hang */

/* ---- global counters ---- */

static atomic_int g_stop;
static atomic_ullong g_ops, g_verified, g_forks, g_corrupt, g_null, g_errors;
static atomic_ullong g_child_fail, g_child_corrupt, g_child_null, g_xfree;
static atomic_ullong g_threads, g_inherited_blocks, g_inherited_bytes;
static atomic_ullong g_stable_slots, g_seen_slots, g_child_us;
static atomic_uint g_serial;

/* ---- messages: one write(2) per line, usable in a forked child ---- */

static void msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void msg(const char *fmt, ...)
{
	char buf[1024];
	int saved = errno;
	int n = snprintf(buf, sizeof buf, "soak[%d]: ", (int)getpid());
	va_list ap;
	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof buf - 2)
		n = (int)sizeof buf - 2;
	buf[n++] = '\n';
	ssize_t w = write(STDERR_FILENO, buf, (size_t)n);
	(void)w;
	errno = saved;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

/* ---- per-thread context ---- */

struct ctx {
	uint64_t rng;
	uint64_t ops, ops_flushed;
	uint64_t verified, verified_flushed;
	uint64_t corrupt, null, xfree;
	uint64_t serial, next_id;
	int in_child;
	char who[32];
};

static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

static uint64_t rnd(struct ctx *c)
{
	return mix64(c->rng += 0x9E3779B97F4A7C15ull);
}

static size_t rnd_range(struct ctx *c, size_t lo, size_t hi)
{
	return lo + (size_t)(rnd(c) % (hi - lo + 1));
}

/* Log-uniform in [lo, hi]: a uniform bit length, then uniform within it. */
static size_t rnd_log(struct ctx *c, size_t lo, size_t hi)
{
	unsigned blo = 63u - (unsigned)__builtin_clzll(lo);
	unsigned bhi = 63u - (unsigned)__builtin_clzll(hi);
	unsigned b = blo + (unsigned)(rnd(c) % (bhi - blo + 1));
	size_t base = (size_t)1 << b;
	size_t v = base + (size_t)(rnd(c) % base);
	return v < lo ? lo : v > hi ? hi : v;
}

/* 8 B .. 2 MiB, skewed small, with powers of two and their neighbours. */
static size_t rand_size(struct ctx *c)
{
	unsigned k = (unsigned)(rnd(c) % 1000);
	if (k < 50) {
		static const long delta[] = {-16, -8, -1, 0, 0, 1, 8, 16};
		long v = (1L << rnd_range(c, 3, 21)) + delta[rnd(c) % 8];
		return v < MIN_SIZE ? MIN_SIZE : v > (long)MAX_SIZE ? MAX_SIZE : (size_t)v;
	}
	if (k < 600)
		return rnd_log(c, 8, 128);
	if (k < 850)
		return rnd_log(c, 129, 1 * KiB);
	if (k < 950)
		return rnd_log(c, 1 * KiB + 1, 32 * KiB);
	if (k < 995)
		return rnd_log(c, 32 * KiB + 1, 256 * KiB);
	return rnd_log(c, 256 * KiB + 1, MAX_SIZE);
}

/* Lifetime (in the owner's operations) of a block of the long region. */
static uint64_t rand_lifetime(struct ctx *c)
{
	unsigned k = (unsigned)(rnd(c) % 100);
	if (k < 60)
		return rnd_range(c, 100, 5000);
	if (k < 97)
		return rnd_range(c, 5000, 300000);
	return UINT64_MAX; /* until the table is emptied */
}

/* ---- the pattern ---- */

typedef uint64_t u64a __attribute__((may_alias));

static uint64_t pat_seed(uint64_t id, uint32_t gen)
{
	return mix64(id * 0x100000001B3ull + (uint64_t)gen * 0xC2B2AE3D27D4EB4Full + 0x165667B19E3779F9ull);
}

static inline uint64_t pat_word(uint64_t seed, size_t i)
{
	uint64_t w = seed + (uint64_t)(i + 1) * 0x9E3779B97F4A7C15ull;
	return w ^ (w >> 29);
}

static inline uint8_t pat_byte(uint64_t seed, size_t off)
{
	return (uint8_t)(pat_word(seed, off / 8) >> (8 * (off % 8)));
}

/* Fill bytes [from, n) of p with the pattern of (id, gen). */
static void pat_fill(void *p, size_t n, uint64_t id, uint32_t gen, size_t from)
{
	uint64_t seed = pat_seed(id, gen);
	u64a *w = p;
	size_t nw = n / 8;
	for (size_t i = from / 8; i < nw; i++)
		w[i] = pat_word(seed, i);
	uint8_t *b = p;
	for (size_t o = nw * 8 > from ? nw * 8 : from; o < n; o++)
		b[o] = pat_byte(seed, o);
}

/* Offset of the first byte of [0, n) not matching the pattern, or n. */
static size_t pat_first_bad(const void *p, size_t n, uint64_t seed)
{
	const u64a *w = p;
	size_t nw = n / 8, i;
	for (i = 0; i < nw; i++)
		if (w[i] != pat_word(seed, i))
			break;
	const uint8_t *b = p;
	for (size_t o = i * 8; o < n; o++)
		if (b[o] != pat_byte(seed, o))
			return o;
	return n;
}

static size_t zero_first_bad(const void *p, size_t n)
{
	const u64a *w = p;
	size_t nw = n / 8, i;
	for (i = 0; i < nw; i++)
		if (w[i] != 0)
			break;
	const uint8_t *b = p;
	for (size_t o = i * 8; o < n; o++)
		if (b[o] != 0)
			return o;
	return n;
}

static void flush(struct ctx *c);

/* Describe a mismatch: where, how many bytes, the first bytes seen. */
static void report_bad(struct ctx *c, const char *what, const void *p, size_t n,
		       uint64_t id, uint32_t gen, size_t first, int zero)
{
	uint64_t seed = pat_seed(id, gen);
	const uint8_t *b = p;
	size_t bad = 0, last = first;
	for (size_t o = first; o < n; o++)
		if (b[o] != (zero ? 0 : pat_byte(seed, o))) {
			bad++;
			last = o;
		}
	char got[3 * 16 + 1], exp[3 * 16 + 1];
	got[0] = exp[0] = 0;
	for (size_t o = first, k = 0; o < n && k < 16; o++, k++) {
		snprintf(got + 3 * k, 4, " %02x", b[o]);
		snprintf(exp + 3 * k, 4, " %02x", zero ? 0 : pat_byte(seed, o));
	}
	msg("CORRUPTION (%s, %s): block %p size %zu id %#" PRIx64 " gen %u: "
	    "%zu bad bytes in [%zu, %zu]; at offset %zu expected%s got%s",
	    c->who, what, p, n, id, gen, bad, first, last, first, exp, got);
	c->corrupt++;
	flush(c);
}

/* Verify a block; 1 if whole, 0 (reported) if not. */
static int check_block(struct ctx *c, const char *what, const void *p, size_t n,
		       uint64_t id, uint32_t gen)
{
	size_t bad = pat_first_bad(p, n, pat_seed(id, gen));
	c->verified += n;
	if (bad == n)
		return 1;
	report_bad(c, what, p, n, id, gen, bad, 0);
	return 0;
}

/* ---- tables of blocks ---- */

struct blk {
	atomic_uint seq;  /* odd while the owner changes the slot or block */
	uint32_t gen;
	void *p;
	size_t size;
	uint64_t id;
	uint64_t expire; /* owner's op count at which it is freed */
};

struct table {
	struct blk b[WSLOTS];
	size_t live, budget;
};

static void slot_begin(struct blk *b)
{
	unsigned s = atomic_load_explicit(&b->seq, memory_order_relaxed);
	atomic_store_explicit(&b->seq, s + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release); /* the odd count before the writes */
}

static void slot_end(struct blk *b)
{
	unsigned s = atomic_load_explicit(&b->seq, memory_order_relaxed);
	atomic_store_explicit(&b->seq, s + 1, memory_order_release);
}

/* Under libmbuddy, the heap's state when an allocation fails (once). */
static void dump_allocator_stats(void)
{
	static atomic_int dumped;
	if (atomic_exchange(&dumped, 1))
		return;
	int (*print)(int, int) = (int (*)(int, int))dlsym(RTLD_DEFAULT, "mbuddy_stats_print");
	if (print) {
		msg("libmbuddy statistics at the failure:");
		print(STDERR_FILENO, 0);
	}
}

static void fail_null(struct ctx *c, const char *fn, size_t n, size_t align)
{
	msg("ALLOCATION FAILURE (%s): %s(size %zu, align %zu) returned NULL: %s",
	    c->who, fn, n, align, strerror(errno));
	if (!c->in_child)
		dump_allocator_stats();
	c->null++;
	flush(c);
}

/* One allocation of about n bytes by a random function; *n may be rounded
 * up (aligned_alloc). Checks alignment and calloc's zeroing. */
static void *xalloc(struct ctx *c, size_t *np)
{
	/* malloc's guarantee: max_align_t (16), or less for smaller objects */
	size_t n = *np, align = n >= 16 ? 16 : 8;
	unsigned k = (unsigned)(rnd(c) % 100);
	const char *fn;
	void *p;
	int zeroed = 0;
	if (k < 55) {
		fn = "malloc";
		p = malloc(n);
	} else if (k < 75) {
		fn = "calloc";
		zeroed = 1;
		switch (rnd(c) % 3) {
		case 0: p = calloc(1, n); break;
		case 1: p = calloc(n, 1); break;
		default:
			if (n % 8 == 0)
				p = calloc(n / 8, 8);
			else
				p = calloc(1, n);
		}
	} else if (k < 92) {
		fn = "posix_memalign";
		if (rnd(c) % 50 == 0)
			align = (size_t)1 << rnd_range(c, 17, 21);
		else
			align = (size_t)8 << rnd_range(c, 0, 13);
		int rc = posix_memalign(&p, align, n);
		if (rc != 0) {
			errno = rc;
			p = NULL;
		}
	} else if (k < 95) {
		fn = "realloc(NULL)";
		p = realloc(NULL, n);
	} else {
		fn = "aligned_alloc";
		align = (size_t)16 << rnd_range(c, 0, 8);
		n = (n + align - 1) & ~(align - 1);
		*np = n;
		p = aligned_alloc(align, n);
	}
	if (!p) {
		fail_null(c, fn, n, align);
		return NULL;
	}
	if ((uintptr_t)p % align != 0) {
		msg("CORRUPTION (%s): %s(size %zu, align %zu) returned misaligned %p",
		    c->who, fn, n, align, p);
		c->corrupt++;
		flush(c);
	}
	if (zeroed) {
		size_t bad = zero_first_bad(p, n);
		c->verified += n;
		if (bad != n)
			report_bad(c, "calloc not zeroed", p, n, 0, 0, bad, 1);
	}
	return p;
}

static int stopping(void)
{
	return atomic_load_explicit(&g_stop, memory_order_relaxed);
}

/* A new block in empty slot b. */
static void blk_new(struct ctx *c, struct table *t, struct blk *b, size_t n, uint64_t expire)
{
	slot_begin(b);
	void *p = xalloc(c, &n);
	if (p) {
		b->p = p;
		b->size = n;
		b->id = (c->serial << 32) | c->next_id++;
		b->gen = (uint32_t)rnd(c);
		b->expire = expire;
		pat_fill(p, n, b->id, b->gen, 0);
		t->live += n;
	}
	slot_end(b);
}

static void blk_free(struct ctx *c, struct table *t, struct blk *b)
{
	check_block(c, "before free", b->p, b->size, b->id, b->gen);
	slot_begin(b);
	free(b->p);
	t->live -= b->size;
	b->p = NULL;
	b->size = 0;
	slot_end(b);
}

static void blk_realloc(struct ctx *c, struct table *t, struct blk *b, size_t n, uint64_t expire)
{
	if (!check_block(c, "before realloc", b->p, b->size, b->id, b->gen))
		return;
	slot_begin(b);
	void *q = realloc(b->p, n);
	if (!q) {
		fail_null(c, "realloc", n, 0);
		slot_end(b);
		return;
	}
	size_t keep = n < b->size ? n : b->size;
	check_block(c, "prefix after realloc", q, keep, b->id, b->gen);
	if (rnd(c) % 2) { /* same generation: extend the pattern */
		if (n > keep)
			pat_fill(q, n, b->id, b->gen, keep);
	} else { /* new generation: rewrite it all */
		b->gen++;
		pat_fill(q, n, b->id, b->gen, 0);
	}
	t->live = t->live - b->size + n;
	b->p = q;
	b->size = n;
	b->expire = expire;
	slot_end(b);
}

static size_t realloc_size(struct ctx *c, size_t old)
{
	size_t n;
	switch (rnd(c) % 10) {
	case 0: case 1: case 2: case 3:
		return rand_size(c);
	case 4: case 5: case 6:
		n = old * 2 + rnd_range(c, 0, 64);
		break;
	case 7: case 8:
		n = old / 2;
		break;
	default:
		n = old + rnd_range(c, 0, 32) - 16;
	}
	return n < MIN_SIZE ? MIN_SIZE : n > MAX_SIZE ? MAX_SIZE : n;
}

static struct blk *random_live(struct ctx *c, struct table *t)
{
	for (int i = 0; i < 8; i++) {
		struct blk *b = &t->b[rnd(c) % WSLOTS];
		if (b->p)
			return b;
	}
	return NULL;
}

static void verify_all(struct ctx *c, struct table *t, const char *what)
{
	for (int i = 0; i < WSLOTS; i++)
		if (t->b[i].p)
			check_block(c, what, t->b[i].p, t->b[i].size, t->b[i].id, t->b[i].gen);
}

static void free_all(struct ctx *c, struct table *t)
{
	for (int i = 0; i < WSLOTS; i++)
		if (t->b[i].p)
			blk_free(c, t, &t->b[i]);
}

/* ---- the hand-off queue (never touched in a forked child) ---- */

struct qitem {
	void *p;
	size_t size;
	uint64_t id;
	uint32_t gen;
};

static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;
static struct qitem q_items[QCAP];
static size_t q_head, q_len, q_bytes;

static int q_push(const struct qitem *it)
{
	int ok = 0;
	pthread_mutex_lock(&q_lock);
	if (q_len < QCAP && q_bytes + it->size <= QMAX_BYTES) {
		q_items[(q_head + q_len) % QCAP] = *it;
		q_len++;
		q_bytes += it->size;
		ok = 1;
	}
	pthread_mutex_unlock(&q_lock);
	return ok;
}

static int q_pop(struct qitem *it)
{
	int ok = 0;
	pthread_mutex_lock(&q_lock);
	if (q_len) {
		*it = q_items[q_head];
		q_head = (q_head + 1) % QCAP;
		q_len--;
		q_bytes -= it->size;
		ok = 1;
	}
	pthread_mutex_unlock(&q_lock);
	return ok;
}

/* Give b's block to the queue (or free it when the queue is full). The slot
 * stays odd until the block is out of it: once queued, another thread may
 * free it at any time. */
static void blk_handoff(struct ctx *c, struct table *t, struct blk *b)
{
	if (!check_block(c, "before hand-off", b->p, b->size, b->id, b->gen))
		return;
	struct qitem it = {b->p, b->size, b->id, b->gen};
	slot_begin(b);
	if (!q_push(&it))
		free(b->p);
	t->live -= b->size;
	b->p = NULL;
	b->size = 0;
	slot_end(b);
}

/* Take up to max blocks from the queue: free them here, or adopt one into
 * an empty slot of the long region (resized half the time). */
static void q_drain(struct ctx *c, struct table *t, int max)
{
	struct qitem it;
	for (int i = 0; i < max && q_pop(&it); i++) {
		check_block(c, "queued block", it.p, it.size, it.id, it.gen);
		struct blk *b = &t->b[SHORT_SLOTS + rnd(c) % (WSLOTS - SHORT_SLOTS)];
		if (rnd(c) % 4 == 0 && !b->p && t->live + it.size <= t->budget) {
			slot_begin(b);
			b->p = it.p;
			b->size = it.size;
			b->id = it.id;
			b->gen = it.gen;
			b->expire = c->ops + rand_lifetime(c);
			t->live += it.size;
			slot_end(b);
			if (rnd(c) % 2)
				blk_realloc(c, t, b, realloc_size(c, b->size), b->expire);
		} else {
			free(it.p);
		}
		c->xfree++;
	}
}

/* ---- one random operation on a table ---- */

static void evict(struct ctx *c, struct table *t)
{
	struct blk *b = random_live(c, t);
	if (b)
		blk_free(c, t, b);
}

/* Self-test of the checker: flip one byte of a live block behind the
 * table's back; the next verification of that block must catch it. */
static void inject(struct ctx *c, struct table *t)
{
	struct blk *b = random_live(c, t);
	if (!b)
		return;
	size_t off = (size_t)(rnd(c) % b->size);
	msg("%s: injecting corruption at offset %zu of block %p (size %zu)", c->who, off, b->p, b->size);
	((volatile uint8_t *)b->p)[off] ^= 0x20;
}

static void table_op(struct ctx *c, struct table *t)
{
	unsigned k = (unsigned)(rnd(c) % 1000);
	struct blk *b;
	c->ops++;
	if (k < 480) { /* short-lived region */
		b = &t->b[rnd(c) % SHORT_SLOTS];
		if (b->p) {
			if (rnd(c) % 8 == 0)
				blk_realloc(c, t, b, realloc_size(c, b->size), 0);
			else
				blk_free(c, t, b);
		} else {
			size_t n = rand_size(c);
			if (t->live + n <= t->budget)
				blk_new(c, t, b, n, 0);
			else
				evict(c, t);
		}
	} else if (k < 780) { /* long-lived region */
		b = &t->b[SHORT_SLOTS + rnd(c) % (WSLOTS - SHORT_SLOTS)];
		if (!b->p) {
			size_t n = rand_size(c);
			if (t->live + n <= t->budget)
				blk_new(c, t, b, n, c->ops + rand_lifetime(c));
			else
				evict(c, t);
		} else if (b->expire <= c->ops) {
			unsigned r = (unsigned)(rnd(c) % 100);
			if (r < 60)
				blk_free(c, t, b);
			else if (r < 75 && !c->in_child)
				blk_handoff(c, t, b);
			else
				blk_realloc(c, t, b, realloc_size(c, b->size), c->ops + rand_lifetime(c));
		} else if (rnd(c) % 16 == 0) {
			check_block(c, "random check", b->p, b->size, b->id, b->gen);
		}
	} else if (k < 860) {
		if ((b = random_live(c, t)))
			blk_realloc(c, t, b, realloc_size(c, b->size), b->expire);
	} else if (k < 920) {
		if ((b = random_live(c, t)))
			check_block(c, "random check", b->p, b->size, b->id, b->gen);
	} else if (k < 960) {
		if (!c->in_child && (b = random_live(c, t)))
			blk_handoff(c, t, b);
	} else if (!c->in_child) {
		q_drain(c, t, 8);
	}
	if (c->ops % SWEEP_EVERY == 0)
		verify_all(c, t, "sweep");
	if (opt_inject == (c->in_child ? 2 : 1) && c->ops == (c->in_child ? 1000u : 20000u))
		inject(c, t);
}

/* ---- counters ---- */

static void flush(struct ctx *c)
{
	if (c->in_child)
		return; /* reported through the pipe at exit */
	atomic_fetch_add(&g_ops, c->ops - c->ops_flushed);
	atomic_fetch_add(&g_verified, c->verified - c->verified_flushed);
	c->ops_flushed = c->ops;
	c->verified_flushed = c->verified;
	if (c->xfree) {
		atomic_fetch_add(&g_xfree, c->xfree);
		c->xfree = 0;
	}
	if (c->corrupt || c->null) {
		atomic_fetch_add(&g_corrupt, c->corrupt);
		atomic_fetch_add(&g_null, c->null);
		c->corrupt = c->null = 0;
		atomic_store(&g_stop, 1);
	}
}

static void ctx_init(struct ctx *c, const char *who, unsigned idx)
{
	memset(c, 0, sizeof *c);
	c->serial = atomic_fetch_add(&g_serial, 1) + 1;
	c->rng = mix64(opt_seed ^ (c->serial * 0xD1B54A32D192ED03ull));
	snprintf(c->who, sizeof c->who, "%s %u/#%" PRIu64, who, idx, c->serial);
}

/* ---- workers ---- */

struct worker {
	struct table t;
	pthread_t tid;
	int running;
	atomic_int done;
	atomic_ullong beat; /* bumped every 256 operations */
	unsigned idx;
	/* main thread's watch */
	unsigned long long seen_beat;
	double seen_at;
};

static atomic_ullong g_forker_beat;

static struct worker workers[MAX_WORKERS];
static struct table forker_table;
static int nworkers;

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct ctx c;
	ctx_init(&c, "worker", w->idx);
	verify_all(&c, &w->t, "inherited from the previous thread");
	double end = now_s() + 0.2 + (double)(rnd(&c) % 2800) / 1000.0;
	int expired = 0;
	while (!stopping()) {
		table_op(&c, &w->t);
		if (c.ops % 256 == 0) {
			flush(&c);
			atomic_fetch_add_explicit(&w->beat, 1, memory_order_relaxed);
			if (opt_inject == 3 && w->idx == 0 && c.ops >= 20000) {
				msg("%s: hanging on purpose (--inject hang)", c.who);
				for (;;)
					sleep_ms(1000);
			}
			if (now_s() >= end) {
				expired = 1;
				break;
			}
		}
	}
	if (expired) {
		switch (rnd(&c) % 3) {
		case 0: /* free everything */
			free_all(&c, &w->t);
			break;
		case 1: /* hand everything that fits to other threads */
			for (int i = 0; i < WSLOTS; i++)
				if (w->t.b[i].p)
					blk_handoff(&c, &w->t, &w->t.b[i]);
			break;
		default: /* leave everything to the successor */
			break;
		}
	}
	flush(&c);
	atomic_store(&w->done, 1);
	return NULL;
}

static int start_worker(struct worker *w)
{
	atomic_store(&w->done, 0);
	w->seen_beat = atomic_load(&w->beat);
	w->seen_at = now_s();
	int rc = pthread_create(&w->tid, NULL, worker_main, w);
	if (rc) {
		msg("pthread_create: %s", strerror(rc));
		atomic_fetch_add(&g_errors, 1);
		atomic_store(&g_stop, 1);
		w->running = 0;
		return -1;
	}
	w->running = 1;
	atomic_fetch_add(&g_threads, 1);
	return 0;
}

/* ---- fork ---- */

struct child_stats {
	uint64_t ops, verified, inherited_blocks, inherited_bytes, corrupt, null;
};

static unsigned snap[MAX_WORKERS * WSLOTS];
static uint8_t stable_map[MAX_WORKERS * WSLOTS / 8];

static struct table child_table;

static int read_all(int fd, void *buf, size_t n)
{
	uint8_t *p = buf;
	while (n) {
		ssize_t r = read(fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

static int write_all(int fd, const void *buf, size_t n)
{
	const uint8_t *p = buf;
	while (n) {
		ssize_t r = write(fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* The child: single-threaded, inherits the parent's heap. Exit status:
 * 0 good, 10 corruption, 11 NULL, 12 protocol error. */
static void child_main(struct ctx *parent, unsigned forkno, int rfd, int wfd) __attribute__((noreturn));
static void child_main(struct ctx *parent, unsigned forkno, int rfd, int wfd)
{
	alarm((unsigned)opt_child_timeout); /* a deadlock kills the child */
	struct ctx c = *parent;
	c.in_child = 1;
	c.ops = c.ops_flushed = c.verified = c.verified_flushed = 0;
	c.corrupt = c.null = c.xfree = 0;
	c.serial = 0x80000000u | forkno;
	c.next_id = 0;
	c.rng = mix64(c.rng ^ forkno);
	snprintf(c.who, sizeof c.who, "child of fork %u", forkno);
	size_t nslots = (size_t)nworkers * WSLOTS;
	if (read_all(rfd, stable_map, (nslots + 7) / 8) != 0) {
		msg("child of fork %u: could not read the stable map", forkno);
		_exit(12);
	}
	close(rfd);
	if (opt_inject == 4 && forkno == 3) {
		sigset_t all;
		sigfillset(&all);
		sigprocmask(SIG_BLOCK, &all, NULL);
		msg("child of fork %u: hanging with every signal blocked (--inject child-hang)", forkno);
		for (;;)
			sleep_ms(1000);
	}

	/* The forking thread's own blocks are all whole. */
	verify_all(&c, &forker_table, "inherited from the forking thread");

	/* Blocks of the other threads that were stable across the fork. */
	struct child_stats cs = {0, 0, 0, 0, 0, 0};
	size_t budget = opt_child_verify_mb * MiB, start = (size_t)(rnd(&c) % nslots);
	for (size_t j = 0; j < nslots; j++) {
		size_t i = (start + j) % nslots;
		if (!(stable_map[i / 8] & (1u << (i % 8))))
			continue;
		struct table *t = &workers[i / WSLOTS].t;
		struct blk *b = &t->b[i % WSLOTS];
		if (!b->p || cs.inherited_bytes + b->size > budget)
			continue;
		cs.inherited_blocks++;
		cs.inherited_bytes += b->size;
		char what[64];
		snprintf(what, sizeof what, "inherited from worker %zu slot %zu", i / WSLOTS, i % WSLOTS);
		if (!check_block(&c, what, b->p, b->size, b->id, b->gen))
			continue;
		switch (rnd(&c) % 8) {
		case 0: case 1: case 2: case 3: /* free another thread's block */
			slot_begin(b);
			free(b->p);
			b->p = NULL;
			slot_end(b);
			break;
		case 4: /* resize it, then free it */
			blk_realloc(&c, t, b, realloc_size(&c, b->size), 0);
			if (b->p) {
				check_block(&c, "inherited after realloc", b->p, b->size, b->id, b->gen);
				slot_begin(b);
				free(b->p);
				b->p = NULL;
				slot_end(b);
			}
			break;
		default:
			break;
		}
	}

	/* Work on the forker's table too: free or resize some. */
	for (int i = 0; i < WSLOTS; i++) {
		struct blk *b = &forker_table.b[i];
		if (!b->p)
			continue;
		unsigned r = (unsigned)(rnd(&c) % 4);
		if (r == 0)
			blk_free(&c, &forker_table, b);
		else if (r == 1)
			blk_realloc(&c, &forker_table, b, realloc_size(&c, b->size), 0);
	}

	/* A few thousand operations of its own, then free them all. */
	memset(&child_table, 0, sizeof child_table);
	child_table.budget = 16 * MiB;
	for (int i = 0; i < opt_child_ops; i++)
		table_op(&c, &child_table);
	verify_all(&c, &child_table, "child final check");
	free_all(&c, &child_table);
	verify_all(&c, &forker_table, "forker table at child exit");

	cs.ops = c.ops;
	cs.verified = c.verified;
	cs.corrupt = c.corrupt;
	cs.null = c.null;
	if (write_all(wfd, &cs, sizeof cs) != 0)
		_exit(12);
	int code = c.corrupt ? 10 : c.null ? 11 : 0;
	/* Half the children run the exit path (atexit handlers, destructors,
	 * the allocator's own exit work); stdout holds nothing unwritten. */
	if (rnd(&c) % 2)
		exit(code);
	_exit(code);
}

/* Print a line of /proc/PID/FILE fields starting with one of the keys. */
static void proc_fields(pid_t pid, const char *file, const char *keys[], int nkeys)
{
	char path[64], buf[4096];
	snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, file);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = 0;
	char *save = NULL;
	for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		for (int k = 0; k < nkeys; k++)
			if (!strncmp(line, keys[k], strlen(keys[k])))
				msg("  child %d %s", (int)pid, line);
}

/* Wait for a child. The child's own alarm ends it after --child-timeout
 * seconds, unless it hangs with SIGALRM blocked (libunwind, for one,
 * blocks every signal while it holds its lock): a child still there 10 s
 * later is reported, killed with SIGKILL (or, with --keep-hung, left for a
 * debugger) and 0 is returned. Otherwise waitpid's result. */
static pid_t wait_child(pid_t pid, unsigned forkno, int *status)
{
	double limit = now_s() + opt_child_timeout + 10;
	for (;;) {
		pid_t r = waitpid(pid, status, WNOHANG);
		if (r != 0 && !(r == -1 && errno == EINTR))
			return r;
		if (now_s() > limit)
			break;
		sleep_ms(2);
	}
	static const char *keys[] = {"State", "SigBlk", "ShdPnd", "SigPnd"};
	char wchan[64] = "?";
	char path[64];
	snprintf(path, sizeof path, "/proc/%d/wchan", (int)pid);
	int fd = open(path, O_RDONLY);
	if (fd >= 0) {
		ssize_t n = read(fd, wchan, sizeof wchan - 1);
		wchan[n > 0 ? n : 0] = 0;
		close(fd);
	}
	msg("child of fork %u (pid %d) HUNG: still running 10 s after its alarm was due "
	    "(deadlock in the child; wchan %s)%s",
	    forkno, (int)pid, wchan,
	    opt_keep_hung ? "; left running for a debugger (--keep-hung)" : "; killed with SIGKILL");
	proc_fields(pid, "status", keys, 4);
	if (opt_keep_hung) {
		msg("  attach with: gdb -p %d -batch -ex 'thread apply all bt'", (int)pid);
		return 0;
	}
	kill(pid, SIGKILL);
	while (waitpid(pid, status, 0) == -1 && errno == EINTR)
		;
	return 0;
}

static void do_fork(struct ctx *c, unsigned forkno)
{
	size_t nslots = (size_t)nworkers * WSLOTS;
	int p2c[2], c2p[2];
	if (pipe(p2c) != 0) {
		msg("pipe: %s", strerror(errno));
		atomic_fetch_add(&g_errors, 1);
		atomic_store(&g_stop, 1);
		return;
	}
	if (pipe(c2p) != 0) {
		msg("pipe: %s", strerror(errno));
		close(p2c[0]);
		close(p2c[1]);
		atomic_fetch_add(&g_errors, 1);
		atomic_store(&g_stop, 1);
		return;
	}
	for (size_t i = 0; i < nslots; i++)
		snap[i] = atomic_load_explicit(&workers[i / WSLOTS].t.b[i % WSLOTS].seq, memory_order_acquire);
	flush(c);
	double t_fork = now_s();
	pid_t pid = fork();
	if (pid == 0) {
		close(p2c[1]);
		close(c2p[0]);
		child_main(c, forkno, p2c[0], c2p[1]);
	}
	int err = errno;
	close(p2c[0]);
	close(c2p[1]);
	if (pid < 0) {
		msg("fork: %s", strerror(err));
		close(p2c[1]);
		close(c2p[0]);
		atomic_fetch_add(&g_errors, 1);
		atomic_store(&g_stop, 1);
		return;
	}
	size_t stable = 0;
	memset(stable_map, 0, (nslots + 7) / 8);
	for (size_t i = 0; i < nslots; i++) {
		unsigned s = atomic_load_explicit(&workers[i / WSLOTS].t.b[i % WSLOTS].seq, memory_order_acquire);
		if (s == snap[i] && s % 2 == 0) {
			stable_map[i / 8] |= (uint8_t)(1u << (i % 8));
			stable++;
		}
	}
	atomic_fetch_add(&g_stable_slots, stable);
	atomic_fetch_add(&g_seen_slots, nslots);
	int wrote = write_all(p2c[1], stable_map, (nslots + 7) / 8);
	close(p2c[1]);

	int status = 0;
	pid_t r = wait_child(pid, forkno, &status);
	if (r == 0) { /* hung and killed: reported */
		close(c2p[0]);
		atomic_fetch_add(&g_forks, 1);
		atomic_fetch_add(&g_child_fail, 1);
		atomic_store(&g_stop, 1);
		return;
	}
	struct child_stats cs;
	int got = read_all(c2p[0], &cs, sizeof cs) == 0;
	close(c2p[0]);
	atomic_fetch_add(&g_forks, 1);
	atomic_fetch_add(&g_child_us, (unsigned long long)((now_s() - t_fork) * 1e6));
	if (r != pid) {
		msg("waitpid: %s", strerror(errno));
		atomic_fetch_add(&g_errors, 1);
		atomic_store(&g_stop, 1);
		return;
	}
	if (got) {
		atomic_fetch_add(&g_ops, cs.ops);
		atomic_fetch_add(&g_verified, cs.verified);
		atomic_fetch_add(&g_inherited_blocks, cs.inherited_blocks);
		atomic_fetch_add(&g_inherited_bytes, cs.inherited_bytes);
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && got && wrote == 0)
		return;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 10) {
		atomic_fetch_add(&g_child_corrupt, 1);
	} else if (WIFEXITED(status) && WEXITSTATUS(status) == 11) {
		atomic_fetch_add(&g_child_null, 1);
	} else if (WIFSIGNALED(status)) {
		msg("child of fork %u (pid %d) killed by signal %d (%s)%s", forkno, (int)pid,
		    WTERMSIG(status), strsignal(WTERMSIG(status)),
		    WTERMSIG(status) == SIGALRM ? ": deadlock or hang in the child" : "");
	} else {
		msg("child of fork %u (pid %d) exited with status %d%s", forkno, (int)pid,
		    WIFEXITED(status) ? WEXITSTATUS(status) : -1,
		    got ? "" : " without reporting");
	}
	atomic_fetch_add(&g_child_fail, 1);
	atomic_store(&g_stop, 1);
}

static void *forker_main(void *arg)
{
	(void)arg;
	struct ctx c;
	ctx_init(&c, "forker", 0);
	unsigned forkno = 0;
	double last = now_s();
	while (!stopping()) {
		int n = (int)rnd_range(&c, 50, 200);
		for (int i = 0; i < n && !stopping(); i++)
			table_op(&c, &forker_table);
		flush(&c);
		atomic_fetch_add_explicit(&g_forker_beat, 1, memory_order_relaxed);
		if (opt_fork_ms <= 0) {
			sleep_ms(50);
			continue;
		}
		/* The next fork ~fork-ms after the start of the previous one (at
		 * least 10 ms after its child exited). */
		long ms = (long)rnd_range(&c, (size_t)opt_fork_ms / 2, (size_t)opt_fork_ms * 3 / 2);
		ms -= (long)((now_s() - last) * 1000.0);
		sleep_ms(ms < 10 ? 10 : ms);
		if (stopping())
			break;
		last = now_s();
		do_fork(&c, ++forkno);
	}
	flush(&c);
	return NULL;
}

/* ---- main ---- */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: soak [--seconds N] [--threads N] [--seed N] [--max-mb N] [--fork-ms N]\n"
		"            [--child-verify-mb N] [--child-ops N] [--child-timeout N]\n"
		"            [--stall-seconds N] [--report N] [--inject WHAT] [--keep-hung]\n"
		"            [--quiet]\n"
		"  --seconds N          run time (default 10)\n"
		"  --threads N          worker threads, 1..%d (default 4)\n"
		"  --seed N             random seed (default: from the clock, printed)\n"
		"  --max-mb N           live bytes of all tables together (default 256)\n"
		"  --fork-ms N          mean interval between forks, 0 = no fork (default 100)\n"
		"  --child-verify-mb N  inherited bytes a child verifies (default 16)\n"
		"  --child-ops N        operations of each child (default 3000)\n"
		"  --child-timeout N    seconds before a child counts as hung (default 60)\n"
		"  --report N           progress line on stderr every N seconds (default off)\n"
		"  --stall-seconds N    a thread without progress that long is a deadlock:\n"
		"                       the run aborts (default 180)\n"
		"  --inject WHAT        self-test, the run must fail: corrupt a byte in a\n"
		"                       worker (parent) or in a forked child (child), make\n"
		"                       a worker hang (hang), or a child hang with every\n"
		"                       signal blocked (child-hang)\n"
		"  --keep-hung          leave a hung child running (for gdb) instead of\n"
		"                       killing it; the run still fails\n"
		"  --quiet              no start-up line\n",
		MAX_WORKERS);
}

static int parse_num(const char *opt, const char *s, double lo, double hi, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || end == s || *end || v < lo || v > hi) {
		fprintf(stderr, "soak: bad value for %s: '%s' (expected %g..%g)\n", opt, s, lo, hi);
		return -1;
	}
	*out = v;
	return 0;
}

static int parse_args(int argc, char **argv)
{
	int seeded = 0;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		double v;
		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			exit(0);
		}
		if (!strcmp(a, "--quiet")) {
			opt_quiet = 1;
			continue;
		}
		if (!strcmp(a, "--keep-hung")) {
			opt_keep_hung = 1;
			continue;
		}
		if (i + 1 >= argc) {
			fprintf(stderr, "soak: unknown option or missing value: %s\n", a);
			usage(stderr);
			return -1;
		}
		const char *s = argv[++i];
		if (!strcmp(a, "--seconds")) {
			if (parse_num(a, s, 0, 1e7, &opt_seconds))
				return -1;
		} else if (!strcmp(a, "--threads")) {
			if (parse_num(a, s, 1, MAX_WORKERS, &v))
				return -1;
			opt_threads = (int)v;
		} else if (!strcmp(a, "--seed")) {
			char *end;
			errno = 0;
			opt_seed = strtoull(s, &end, 0);
			if (errno || end == s || *end) {
				fprintf(stderr, "soak: bad value for --seed: '%s'\n", s);
				return -1;
			}
			seeded = 1;
		} else if (!strcmp(a, "--max-mb")) {
			if (parse_num(a, s, 1, 1 << 20, &v))
				return -1;
			opt_max_mb = (size_t)v;
		} else if (!strcmp(a, "--fork-ms")) {
			if (parse_num(a, s, 0, 1e6, &v))
				return -1;
			opt_fork_ms = (int)v;
		} else if (!strcmp(a, "--child-verify-mb")) {
			if (parse_num(a, s, 0, 1 << 20, &v))
				return -1;
			opt_child_verify_mb = (size_t)v;
		} else if (!strcmp(a, "--child-ops")) {
			if (parse_num(a, s, 0, 1e9, &v))
				return -1;
			opt_child_ops = (int)v;
		} else if (!strcmp(a, "--child-timeout")) {
			if (parse_num(a, s, 1, 1e6, &v))
				return -1;
			opt_child_timeout = (int)v;
		} else if (!strcmp(a, "--inject")) {
			if (!strcmp(s, "parent"))
				opt_inject = 1;
			else if (!strcmp(s, "child"))
				opt_inject = 2;
			else if (!strcmp(s, "hang"))
				opt_inject = 3;
			else if (!strcmp(s, "child-hang"))
				opt_inject = 4;
			else {
				fprintf(stderr, "soak: bad value for --inject: '%s' (parent, child, hang or child-hang)\n", s);
				return -1;
			}
		} else if (!strcmp(a, "--stall-seconds")) {
			if (parse_num(a, s, 1, 1e6, &v))
				return -1;
			opt_stall_seconds = (int)v;
		} else if (!strcmp(a, "--report")) {
			if (parse_num(a, s, 0, 1e7, &opt_report))
				return -1;
		} else {
			fprintf(stderr, "soak: unknown option: %s\n", a);
			usage(stderr);
			return -1;
		}
	}
	if (!seeded) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		opt_seed = mix64((uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec) ^ (uint64_t)getpid();
	}
	return 0;
}

static double t_start;

static void print_summary(int stalled)
{
	unsigned long long corrupt = atomic_load(&g_corrupt) + atomic_load(&g_child_corrupt);
	unsigned long long seen = atomic_load(&g_seen_slots);
	printf("SOAK seconds=%.0f ops=%llu bytes_verified=%llu forks=%llu corruption=%llu "
	       "null=%llu child_failures=%llu errors=%llu threads=%llu cross_thread_frees=%llu "
	       "inherited_verified_blocks=%llu inherited_verified_bytes=%llu stable_at_fork=%.1f%% "
	       "%sseed=%#" PRIx64 "\n",
	       now_s() - t_start, (unsigned long long)atomic_load(&g_ops),
	       (unsigned long long)atomic_load(&g_verified),
	       (unsigned long long)atomic_load(&g_forks), corrupt,
	       (unsigned long long)(atomic_load(&g_null) + atomic_load(&g_child_null)),
	       (unsigned long long)atomic_load(&g_child_fail),
	       (unsigned long long)atomic_load(&g_errors),
	       (unsigned long long)atomic_load(&g_threads),
	       (unsigned long long)atomic_load(&g_xfree),
	       (unsigned long long)atomic_load(&g_inherited_blocks),
	       (unsigned long long)atomic_load(&g_inherited_bytes),
	       seen ? 100.0 * (double)atomic_load(&g_stable_slots) / (double)seen : 0.0,
	       stalled ? "stalled=1 " : "", opt_seed);
	fflush(stdout);
}

/* A thread made no progress for too long: report, and end the process
 * (abort: a core or a debugger shows where it hangs). */
static void stall(const char *who, double secs) __attribute__((noreturn));
static void stall(const char *who, double secs)
{
	msg("%s made no progress for %.0f s: deadlock? (forks=%llu)", who, secs,
	    (unsigned long long)atomic_load(&g_forks));
	atomic_fetch_add(&g_errors, 1);
	print_summary(1);
	abort();
}

/* Join a thread that was told to stop, or give up after `secs`. */
static void join_or_stall(pthread_t tid, const char *who, double secs)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += (time_t)secs;
	int rc = pthread_timedjoin_np(tid, NULL, &ts);
	if (rc == ETIMEDOUT)
		stall(who, secs);
	if (rc) {
		msg("pthread_join (%s): %s", who, strerror(rc));
		atomic_fetch_add(&g_errors, 1);
	}
}

int main(int argc, char **argv)
{
	if (parse_args(argc, argv) != 0)
		return 2;
	signal(SIGPIPE, SIG_IGN);
	nworkers = opt_threads;
	size_t budget = opt_max_mb * MiB / (size_t)(nworkers + 1);
	if (!opt_quiet)
		fprintf(stderr, "soak: %g s, %d threads, seed %#" PRIx64 ", %zu MiB per table, fork every ~%d ms\n",
			opt_seconds, nworkers, opt_seed, budget / MiB, opt_fork_ms);

	forker_table.budget = budget < 8 * MiB ? budget : 8 * MiB;
	for (int i = 0; i < nworkers; i++) {
		workers[i].idx = (unsigned)i;
		workers[i].t.budget = budget;
	}
	double t0 = now_s(), deadline = t0 + opt_seconds;
	double stall_limit = opt_stall_seconds > opt_child_timeout + 10 ? opt_stall_seconds : opt_child_timeout + 10;
	t_start = t0;
	for (int i = 0; i < nworkers; i++)
		start_worker(&workers[i]);
	pthread_t forker;
	int rc = pthread_create(&forker, NULL, forker_main, NULL);
	if (rc) {
		msg("pthread_create: %s", strerror(rc));
		atomic_fetch_add(&g_errors, 1);
		atomic_store(&g_stop, 1);
	}

	double next_report = opt_report > 0 ? t0 + opt_report : 0;
	unsigned long long forker_beat = 0;
	double forker_seen = t0;
	for (;;) {
		sleep_ms(10);
		double t = now_s();
		if (t >= deadline || stopping())
			break;
		for (int i = 0; i < nworkers; i++) {
			struct worker *w = &workers[i];
			if (!w->running)
				continue;
			if (atomic_load(&w->done)) {
				join_or_stall(w->tid, "an exiting worker thread", stall_limit);
				w->running = 0;
				start_worker(w);
				continue;
			}
			unsigned long long b = atomic_load_explicit(&w->beat, memory_order_relaxed);
			if (b != w->seen_beat) {
				w->seen_beat = b;
				w->seen_at = t;
			} else if (t - w->seen_at > stall_limit) {
				char who[48];
				snprintf(who, sizeof who, "worker thread %d", i);
				stall(who, t - w->seen_at);
			}
		}
		unsigned long long fb = atomic_load_explicit(&g_forker_beat, memory_order_relaxed);
		if (fb != forker_beat) {
			forker_beat = fb;
			forker_seen = t;
		} else if (rc == 0 && t - forker_seen > stall_limit) {
			stall("the forker thread", t - forker_seen);
		}
		if (next_report > 0 && t >= next_report) {
			next_report += opt_report;
			unsigned long long forks = atomic_load(&g_forks);
			fprintf(stderr, "soak: t=%.0f s ops=%llu verified=%.2f GiB forks=%llu (%.0f ms each) threads=%llu cross_frees=%llu\n",
				t - t0, (unsigned long long)atomic_load(&g_ops),
				(double)atomic_load(&g_verified) / (double)(1ull << 30), forks,
				forks ? (double)atomic_load(&g_child_us) / 1000.0 / (double)forks : 0.0,
				(unsigned long long)atomic_load(&g_threads),
				(unsigned long long)atomic_load(&g_xfree));
		}
	}
	atomic_store(&g_stop, 1);
	for (int i = 0; i < nworkers; i++)
		if (workers[i].running) {
			join_or_stall(workers[i].tid, "a worker thread told to stop", stall_limit);
			workers[i].running = 0;
		}
	if (rc == 0)
		join_or_stall(forker, "the forker thread told to stop", stall_limit);

	/* Clean up: every remaining block is verified and freed. */
	struct ctx c;
	ctx_init(&c, "main", 0);
	struct qitem it;
	while (q_pop(&it)) {
		check_block(&c, "queued block at exit", it.p, it.size, it.id, it.gen);
		free(it.p);
		c.xfree++;
	}
	for (int i = 0; i < nworkers; i++)
		free_all(&c, &workers[i].t);
	free_all(&c, &forker_table);
	flush(&c);

	print_summary(0);
	int failed = atomic_load(&g_corrupt) || atomic_load(&g_child_corrupt) || atomic_load(&g_null) ||
		     atomic_load(&g_child_null) || atomic_load(&g_child_fail) || atomic_load(&g_errors);
	return failed ? 1 : 0;
}
