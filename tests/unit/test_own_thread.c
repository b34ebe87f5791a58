/* The library's own threads (own_thread.c): each runs with every signal
 * blocked, allocating with the own key, and already carries its name when
 * its function starts; a detached thread that ends at once is never
 * touched by its starter afterwards (naming it from outside once wrote
 * into the descriptor of a thread that had exited). */
#include "config.h"
#include "harness.h"
#include "own_thread.h"
#include "reclaim_type.h"
#include "thread.h"

#include <pthread.h>
#include <signal.h>
#include <time.h>

#define ROUNDS 300

static struct {
	char name[16];
	int hint;
	int blocked;
} seen;
static int done;

static void *look(void *arg)
{
	(void)arg;
	pthread_getname_np(pthread_self(), seen.name, sizeof seen.name);
	seen.hint = mb_self.type_hint;
	sigset_t now;
	pthread_sigmask(SIG_SETMASK, NULL, &now);
	seen.blocked = sigismember(&now, SIGINT) && sigismember(&now, SIGTERM) && sigismember(&now, SIGUSR1);
	__atomic_store_n(&done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static const struct mb_own_thread looker = { look, "mbuddy-test" };

TEST(named_blocked_and_own_key_from_the_start)
{
	for (int r = 0; r < ROUNDS; r++) {
		memset(&seen, 0, sizeof seen);
		__atomic_store_n(&done, 0, __ATOMIC_RELAXED);
		ASSERT_EQ(mb_own_thread_start(&looker, 0), 0);
		struct timespec ms = { 0, 1000000L };
		for (int k = 0; k < 10000 && !__atomic_load_n(&done, __ATOMIC_ACQUIRE); k++)
			nanosleep(&ms, NULL);
		ASSERT_EQ(__atomic_load_n(&done, __ATOMIC_ACQUIRE), 1);
		ASSERT_STR_EQ(seen.name, "mbuddy-test");
		ASSERT_EQ(seen.hint, MB_OWN_KEY);
		ASSERT_EQ(seen.blocked, 1);
	}
}
