#include "config.h"
#include "background.h"
#include "heap.h"
#include "lockstat.h"
#include "options.h"
#include "out.h"
#include "own_thread.h"
#include "purge.h"

#include <dirent.h>
#include <link.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <pthread.h>
#include <sys/single_threaded.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/syscall.h>
#include <unistd.h>

enum { BG_NONE = 0, BG_STARTING, BG_RUNNING, BG_FAILED };

static int state; /* BG_*, atomic */
static struct mb_lock lock = MB_LOCK_INITIALIZER("background");
static pthread_cond_t cond;
/* When the sleeping thread wakes up by itself: UINT64_MAX while it sleeps
 * with nothing queued, 0 while it works. */
static uint64_t wake_at;

/* With nothing queued the thread still looks every LONELY_CHECK_MS whether
 * it is the last thread of the process: a program whose main thread called
 * pthread_exit() ends when its last thread does, and this one must not
 * keep it alive. */
#define LONELY_CHECK_MS 2000

/* Whether task `tid` of this process has exited (a main thread that called
 * pthread_exit() stays listed, a zombie, until the process ends). */
static int task_exited(const char *tid)
{
	char path[300], buf[512];
	snprintf(path, sizeof path, "/proc/self/task/%.255s/stat", tid);
	if (mb_read_small(path, buf, sizeof buf) <= 0)
		return 1;
	const char *p = strrchr(buf, ')'); /* the state follows the command name */
	return !p || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X';
}

/* The threads of the process that have not exited, from /proc, without
 * allocating; 0 if it cannot be read. */
static long count_threads(void)
{
	int dfd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return 0;
	char dents[4096];
	long n = 0, got;
	while ((got = syscall(SYS_getdents64, dfd, dents, sizeof dents)) > 0) {
		for (long off = 0; off < got;) {
			struct dirent64 *e = (struct dirent64 *)(dents + off);
			off += e->d_reclen;
			if (e->d_name[0] != '.' && !task_exited(e->d_name))
				n++;
		}
	}
	close(dfd);
	return n;
}

/* Returns 1 when the wait ran out (rather than being signalled). */
static int sleep_until(uint64_t when)
{
	struct timespec ts;
	ts.tv_sec = (time_t)(when / 1000);
	ts.tv_nsec = (long)(when % 1000) * 1000000L;
	/* mb_now_ms() is CLOCK_MONOTONIC_COARSE, up to a few ms behind
	 * the condition's CLOCK_MONOTONIC: wake a tick late rather than
	 * early. */
	ts.tv_nsec += 5 * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return mb_lock_cond_timedwait(&cond, &lock, &ts) == ETIMEDOUT;
}

static void *run(void *arg)
{
	(void)arg;
	for (;;) {
		size_t released = mb_purge(0);
		mb_lock_acquire(&lock);
		uint64_t due = mb_purge_next_due();
		/* Announce the sleep before the last look at the queues: a
		 * thread that queues memory meanwhile sees it and wakes us
		 * (both sides are sequentially consistent). */
		__atomic_store_n(&wake_at, due, __ATOMIC_SEQ_CST);
		due = mb_purge_next_due();
		uint64_t now = mb_now_ms();
		if (due <= now && released) {
			__atomic_store_n(&wake_at, 0, __ATOMIC_SEQ_CST);
			mb_lock_release(&lock);
			continue;
		}
		/* Due but nothing released: the kernel refused, or another
		 * thread holds it in flight; look again a decay period on. */
		if (due <= now)
			due = now + (mb_opt.decay_ms ? mb_opt.decay_ms : 10);
		__atomic_store_n(&wake_at, due, __ATOMIC_SEQ_CST);
		int idle = due == UINT64_MAX;
		int timed_out = sleep_until(idle ? now + LONELY_CHECK_MS : due);
		__atomic_store_n(&wake_at, 0, __ATOMIC_SEQ_CST);
		mb_lock_release(&lock);
		/* The last thread of a process ends it with status 0, as glibc
		 * does when the last of the program's threads exits. */
		if (idle && timed_out && count_threads() == 1)
			exit(0);
	}
	return NULL;
}

/* Adds up the TLS segments of the loaded modules. */
static int add_tls(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_TLS)
			*(size_t *)data += info->dlpi_phdr[i].p_memsz + info->dlpi_phdr[i].p_align;
	return 0;
}

/* The purge needs a few KiB of stack, the loader's lazy binding a few
 * more. glibc carves a thread's static TLS out of the stack size it is
 * given, so a program with large thread-local arrays would leave the
 * thread almost none: it gets its own need plus every module's TLS.
 * Untouched stack pages cost nothing resident. */
#define PURGE_STACK_BYTES (64 * 1024)
static size_t stack_bytes(void)
{
	size_t tls = 0;
	dl_iterate_phdr(add_tls, &tls);
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	/* Twice the segments: their alignment and glibc's surplus. */
	return (PURGE_STACK_BYTES + 2 * tls + page - 1) & ~(page - 1);
}

static int start(void)
{
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&cond, &ca);
	pthread_condattr_destroy(&ca);

	static const struct mb_own_thread purge_thread = { run, "mbuddy-purge" };
	return mb_own_thread_start(&purge_thread, stack_bytes());
}

/* A heap that has handed out this much is worth the thread as soon as it
 * has memory to give back, however young the process: reaching it took
 * tens of milliseconds of page faults, next to which starting a thread is
 * nothing, and a program that builds such a load in less than a decay
 * time, drops it and goes idle would otherwise keep it all. */
#define BG_START_HEAP_BYTES ((size_t)64 << 20)

static int large_heap(void)
{
	size_t pages = __atomic_load_n(&mb_heap.buddy.pages_allocated, __ATOMIC_RELAXED);
	return pages >= BG_START_HEAP_BYTES >> MB_PAGE_SHIFT;
}

static uint64_t start_age_ms(void)
{
	uint64_t age = mb_opt.decay_ms;
	if (__libc_single_threaded && age < MB_BG_ALONE_AGE_MS)
		age = MB_BG_ALONE_AGE_MS;
	return age;
}

/* Starts the thread if a purge is due and may_start, wakes it if it
 * sleeps with nothing to wait for. Returns 1 if the thread takes care of
 * the work. */
static int kick(uint64_t due, int may_start)
{
	int s = __atomic_load_n(&state, __ATOMIC_ACQUIRE);
	if (s == BG_RUNNING) {
		if (__atomic_load_n(&wake_at, __ATOMIC_SEQ_CST) > due) {
			mb_lock_acquire(&lock);
			pthread_cond_signal(&cond);
			mb_lock_release(&lock);
		}
		return 1;
	}
	/* Memory to return starts it, in a process that has lived one decay
	 * time (most processes end before any of their memory could be due,
	 * and need no thread; a process of one thread, MB_BG_ALONE_AGE_MS)
	 * or holds a large heap, as soon as it is queued rather than when it
	 * falls due: a program that frees its data and then makes no
	 * allocator call would otherwise keep it all. Or a dense unit that
	 * has waited MB_HP_THREAD_MS for its collapse, or in a process that
	 * holds a large heap, one due at all: a program that builds a large
	 * table and then only reads it makes no call that could start the
	 * thread later (bench_huge.py's quick hash and tree never got a huge
	 * page). A process that frees nothing and holds no dense 2 MiB keeps
	 * one thread. Collapses are made by the thread only, never on an
	 * allocation's path (one can take milliseconds). */
	uint64_t now = mb_now_ms(), hp = __atomic_load_n(&mb_heap.buddy.hp_due, __ATOMIC_SEQ_CST);
	int release = mb_purge_release_due() != UINT64_MAX &&
		      (now - mb_heap.started_ms >= start_age_ms() || large_heap());
	int collapse = hp != UINT64_MAX && (now >= hp + MB_HP_THREAD_MS || (now >= hp && large_heap()));
	if (s != BG_NONE || !may_start || !mb_opt.background || (!release && !collapse))
		return 0;
	/* The first purge is due: start the thread. pthread_create may
	 * allocate, and so come back here: the state says it is starting. */
	int expected = BG_NONE;
	if (!__atomic_compare_exchange_n(&state, &expected, BG_STARTING, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
		return 0;
	int rc = start();
	__atomic_store_n(&state, rc == 0 ? BG_RUNNING : BG_FAILED, __ATOMIC_RELEASE);
	return rc == 0;
}

static void work(int may_start)
{
	mb_purge_offset();
	uint64_t due = mb_purge_next_due();
	if (due != UINT64_MAX && kick(due, may_start))
		return;
	/* Without the thread, the step collapses nothing (purge.c) unless
	 * the program asked for no thread: a collapse alone is not its work. */
	mb_purge_step(mb_opt.background ? mb_purge_release_due() : due);
}

/* The caller is an allocator call, whose errno is the program's: a
 * failed malloc reports ENOMEM, not the EAGAIN of a refused collapse
 * (fault.test saw it, with MBUDDY_BACKGROUND=0) or of a madvise. */
static void maybe(int may_start)
{
	int saved = errno;
	work(may_start);
	errno = saved;
}

void mb_purge_maybe(void)
{
	maybe(1);
}

void mb_purge_maybe_after_free(void)
{
	maybe(0);
}

void mb_background_fork_child(void)
{
	mb_lock_after_fork_child(&lock, 0);
	wake_at = 0;
	__atomic_store_n(&state, BG_NONE, __ATOMIC_RELEASE);
}
