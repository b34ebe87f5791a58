#include "config.h"
#include "init.h"
#include "account.h"
#include "canary.h"
#include "classify.h"
#include "heap.h"
#include "options.h"
#include "profile.h"
#include "purge.h"
#include "region.h"
#include "background.h"
#include "sizeclass.h"
#include "slab.h"
#include "stats.h"
#include "theap.h"
#include "thread.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

volatile int mb_process_state;
/* Set in the thread that runs the set-up: an allocation made meanwhile by
 * a library the set-up calls fails instead of waiting for itself. */
static __thread int setting_up MB_TLS;

/* ---- fork ---- */

/* Every lock of the allocator is taken before fork, in the order they nest
 * (the memory account's, classification's sites, the profile's module
 * identities, the purge lock, the orphan heap's, the list of thread heaps
 * and each heap's, the abandoned slabs' lists in index order, the heap's,
 * the table of mappings), so the child starts
 * with none held by a thread it does not have, every list consistent and
 * no memory in flight. The background purge thread is not copied: the
 * child starts its own when it has something to purge. */
static void fork_prepare(void)
{
	mb_account_fork_prepare();
	mb_classify_fork_prepare();
	mb_profile_fork_prepare();
	mb_purge_fork_prepare(); /* waits for a release in flight */
	mb_theap_fork_prepare();
	mb_slab_fork_prepare();
	mb_heap_lock();
	mb_os_fork_prepare(); /* a spin lock, innermost */
}

static void fork_parent(void)
{
	mb_os_fork_parent();
	mb_heap_unlock();
	mb_slab_fork_parent();
	mb_theap_fork_parent();
	mb_purge_fork_parent();
	mb_profile_fork_parent();
	mb_classify_fork_parent();
	mb_account_fork_parent();
}

static void fork_child(void)
{
	mb_os_fork_child();
	mb_heap_fork_child();
	mb_slab_fork_child();
	mb_theap_fork_child(); /* abandons the other threads' slabs */
	mb_purge_fork_child();
	mb_background_fork_child();
	mb_classify_fork_child();
	mb_profile_fork_child();
	mb_stats_fork_child(); /* reads the counters the heaps have set right */
	mb_account_fork_child();
}

/* ---- threads ---- */

/* Its destructor lets go of an exiting thread's heap. */
static pthread_key_t thread_key;
static int thread_key_ok;
/* Set once the thread's heap has been let go of at exit: later
 * allocations from other TLS destructors use the orphan heap (theap.h). */
static __thread int thread_done MB_TLS;

static void thread_exit(void *arg)
{
	struct mb_theap *h = arg;
	if (!h)
		return;
	mb_self.heap_busy = 1;
	mb_self.heap = mb_self.fast = NULL;
	thread_done = 1;
	mb_theap_destroy(h);
	mb_self.heap_busy = 0;
	mb_purge_maybe();
}

struct mb_theap *mb_thread_init(void)
{
	if (mb_self.heap_busy || thread_done || !thread_key_ok)
		return NULL;
	mb_self.heap_busy = 1;
	struct mb_theap *h = mb_theap_create();
	if (h) {
		/* Our key is among the first, so this does not allocate; if it
		 * did, mb_self.heap_busy sends that allocation to the orphan
		 * heap. */
		pthread_setspecific(thread_key, h);
		mb_self.heap = h;
		/* With canaries every object passes the general paths. */
		mb_self.fast = mb_opt.check ? NULL : h;
	}
	mb_self.heap_busy = 0;
	return h;
}

/* ---- deferred work ---- */

static volatile sig_atomic_t report_requested;

static void on_report_signal(int sig)
{
	(void)sig;
	report_requested = 1;
}

void mb_deferred_poll(void)
{
	mb_stats_sample_peak();
	if (!report_requested)
		return;
	report_requested = 0;
	mb_stats_dump_requested();
}

static void catch_report_signal(int sig)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_report_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, NULL);
}

/* ---- the process ---- */

/* What the first object needs. Nothing here may allocate. */
static int set_up(void)
{
	mb_options_init();
	mb_sizeclass_init();
	if (mb_heap_init() != 0)
		return -1;
	mb_purge_init();
	if (mb_opt.check)
		mb_canary_init();
	thread_key_ok = pthread_key_create(&thread_key, thread_exit) == 0;
	return 0;
}

/* What may allocate, so runs once the heap is ready. */
static void start(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
	mb_stats_init();
	if (mb_opt.stats_signal)
		catch_report_signal(mb_opt.stats_signal);
	mb_classify_init();
}

int mb_process_init(void)
{
	int s = __atomic_load_n(&mb_process_state, __ATOMIC_ACQUIRE);
	if (__builtin_expect(s == MB_PROCESS_READY, 1))
		return 0;
	if (s == MB_PROCESS_FAILED)
		return -1;
	int expected = MB_PROCESS_NEW;
	if (__atomic_compare_exchange_n(&mb_process_state, &expected, MB_PROCESS_STARTING, 0, __ATOMIC_ACQ_REL,
					__ATOMIC_ACQUIRE)) {
		setting_up = 1;
		int rc = set_up();
		__atomic_store_n(&mb_process_state, rc == 0 ? MB_PROCESS_READY : MB_PROCESS_FAILED, __ATOMIC_RELEASE);
		setting_up = 0;
		if (rc == 0)
			start();
		return rc;
	}
	if (setting_up)
		return -1;
	while ((s = __atomic_load_n(&mb_process_state, __ATOMIC_ACQUIRE)) == MB_PROCESS_STARTING)
		sched_yield();
	return s == MB_PROCESS_READY ? 0 : -1;
}

/* At exit: the report MBUDDY_STATS asks for, then what this run learned,
 * for the next one. */
__attribute__((destructor)) static void process_exit(void)
{
	/* A program that never allocated still gets the report it asked for. */
	if (mb_process_state == MB_PROCESS_NEW &&
	    (secure_getenv("MBUDDY_STATS") || secure_getenv("MBUDDY_STATS_JSON_FILE")))
		mb_process_init();
	if (mb_process_state != MB_PROCESS_READY)
		return;
	/* A report the signal asked for and no slow path wrote yet (the
	 * program slept, or allocated from its caches only): now, unless the
	 * exit report, written next to the same place, stands for it. */
	if (!mb_opt.stats)
		mb_deferred_poll();
	mb_stats_dump_at_exit();
	mb_classify_save_profile();
}
