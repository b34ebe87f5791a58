/* Random sizes, a fraction handed on to another thread (rptest-like).
 *
 * After the test of rpmalloc's benchmark suite: each thread keeps a
 * working set of WS objects and loops: it replaces 56 random objects
 * (free, then malloc of a new random size, log-uniform 8 B - 16000 B),
 * then takes 8 more out of its working set (allocating replacements) and
 * hands them to the next thread in a ring, which frees them: one object
 * in eight is freed by a thread other than the one that allocated it. A
 * thread also frees whatever its predecessor handed it. With one thread
 * the hand-over goes to itself. Runs for SECONDS.
 *
 * Usage: rptest THREADS SECONDS [WS]
 * Prints: RESULT workload=rptest threads=.. sec=.. ops=.. mops=.. handed=.. kept=..
 *   ops: malloc calls; handed: objects handed on (freed by another thread
 *   when THREADS > 1); kept: objects of the last batches, freed by their
 *   own thread when the run stopped while the receiver's inbox was full.
 */
#include "common.h"

#define MAX_THREADS 256
#define LOOP_REPLACE 56
#define HAND 8
#define INBOX 256 /* batches */

struct batch {
	void *obj[HAND];
};

struct worker {
	void **ws;
	struct rng r;
	struct worker *next; /* receives our batches */
	struct worker *prev; /* sends us its batches */
	struct batch inbox[INBOX];
	_Alignas(64) size_t tail; /* written by prev */
	_Alignas(64) size_t head; /* written by us */
	_Alignas(64) int done;
	uint64_t ops, handed, kept;
};

static size_t ws_size = 2048;

static void *alloc_obj(struct rng *r)
{
	size_t n = rng_logsize(r, 8, 16000);
	void *p = malloc(n);
	if (!p)
		oom("rptest", n);
	memset(p, 0x5a, n < 16 ? n : 16);
	return p;
}

static void replace(struct worker *w, size_t k)
{
	free(w->ws[k]);
	w->ws[k] = alloc_obj(&w->r);
	w->ops++;
}

static void drain(struct worker *w)
{
	size_t t = __atomic_load_n(&w->tail, __ATOMIC_ACQUIRE);
	for (size_t h = w->head; h != t; h++)
		for (int i = 0; i < HAND; i++)
			free(w->inbox[h % INBOX].obj[i]);
	__atomic_store_n(&w->head, t, __ATOMIC_RELEASE);
}

static void hand_on(struct worker *w)
{
	struct worker *to = w->next;
	struct batch b;
	for (int i = 0; i < HAND; i++) {
		size_t k = rng_below(&w->r, ws_size);
		b.obj[i] = w->ws[k];
		w->ws[k] = alloc_obj(&w->r);
		w->ops++;
	}
	/* We are the only writer of to->tail. While the receiver's inbox is
	 * full, free what our own sender handed us (two threads waiting on
	 * each other would otherwise deadlock). */
	size_t t = to->tail;
	unsigned spins = 0;
	while (t - __atomic_load_n(&to->head, __ATOMIC_ACQUIRE) >= INBOX) {
		if (stop_requested()) {
			for (int i = 0; i < HAND; i++)
				free(b.obj[i]);
			w->kept += HAND;
			return;
		}
		drain(w);
		backoff(&spins);
	}
	to->inbox[t % INBOX] = b;
	__atomic_store_n(&to->tail, t + 1, __ATOMIC_RELEASE);
	w->handed += HAND;
}

static void *run(void *arg)
{
	struct worker *w = arg;
	for (size_t k = 0; k < ws_size; k++)
		w->ws[k] = alloc_obj(&w->r);
	while (!stop_requested()) {
		for (int i = 0; i < LOOP_REPLACE; i++)
			replace(w, rng_below(&w->r, ws_size));
		hand_on(w);
		drain(w);
	}
	__atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
	/* Free what the predecessor sends until it has stopped too. */
	for (;;) {
		int prev_done = __atomic_load_n(&w->prev->done, __ATOMIC_ACQUIRE);
		drain(w);
		if (prev_done && __atomic_load_n(&w->tail, __ATOMIC_ACQUIRE) == w->head)
			break;
		sched_yield();
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s THREADS SECONDS [WS]\n", argv[0]);
		return 1;
	}
	int nthreads = parse_threads(argv[1], MAX_THREADS);
	double seconds = atof(argv[2]);
	if (argc > 3)
		ws_size = parse_size(argv[3]);
	if (ws_size < HAND) {
		fprintf(stderr, "WS must be at least %d\n", HAND);
		return 1;
	}
	static struct worker ws[MAX_THREADS];
	for (int i = 0; i < nthreads; i++) {
		struct worker *w = &ws[i];
		w->r.s = 0xB7E151628AED2A6BULL * (uint64_t)(i + 1) | 1;
		w->next = &ws[(i + 1) % nthreads];
		w->prev = &ws[(i + nthreads - 1) % nthreads];
		w->ws = calloc(ws_size, sizeof(void *));
		if (!w->ws)
			oom("working set", ws_size * sizeof(void *));
	}
	/* Each thread fills its own working set, then loops. */
	double sec = run_threads(nthreads, run, ws, sizeof ws[0], seconds);
	uint64_t ops = 0, handed = 0, kept = 0;
	for (int i = 0; i < nthreads; i++) {
		ops += ws[i].ops;
		handed += ws[i].handed;
		kept += ws[i].kept;
		for (size_t k = 0; k < ws_size; k++)
			free(ws[i].ws[k]);
		free(ws[i].ws);
	}
	printf("RESULT workload=rptest threads=%d sec=%.3f ops=%llu mops=%.3f handed=%llu kept=%llu\n",
	       nthreads, sec, (unsigned long long)ops, (double)ops / sec / 1e6,
	       (unsigned long long)handed, (unsigned long long)kept);
	return 0;
}
