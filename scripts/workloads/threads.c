/* Many short-lived threads, each allocating and freeing a little.
 *
 * Models a thread-per-task program (or a pool that is resized often):
 * threads are started in waves of WAVE, each does some mixed-size work
 * with a small working set, frees most of it, hands one result back to the
 * main thread (which frees it: a cross-thread free at thread end), and
 * exits. This exercises per-thread cache set-up and, above all, tear-down:
 * memory cached by a dead thread must go back where others can use it.
 *
 * Usage: threads THREADS [OPS_PER_THREAD] [WAVE]
 * Prints: RESULT workload=threads threads=.. sec=..
 */
#include <pthread.h>

#include "common.h"

#define WORKING_SET 128
#define MAX_WAVE 64

static size_t ops_per_thread = 2000;

struct task {
	pthread_t tid;
	uint64_t seed;
	void *result;
};

static void *worker(void *arg)
{
	struct task *t = arg;
	struct rng r = { t->seed | 1 };
	void *ws[WORKING_SET] = { 0 };
	for (size_t i = 0; i < ops_per_thread; i++) {
		unsigned k = (unsigned)rng_below(&r, WORKING_SET);
		free(ws[k]);
		size_t n = rng_logsize(&r, 16, 8192);
		ws[k] = malloc(n);
		if (!ws[k])
			oom("worker", n);
		memset(ws[k], (int)i, n < 64 ? n : 64);
	}
	for (unsigned k = 1; k < WORKING_SET; k++)
		free(ws[k]);
	/* Slot 0 is the result, freed by the main thread (if ever filled). */
	t->result = ws[0];
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s THREADS [OPS_PER_THREAD] [WAVE]\n", argv[0]);
		return 1;
	}
	size_t nthreads = parse_size(argv[1]);
	if (argc > 2)
		ops_per_thread = parse_size(argv[2]);
	size_t wave = argc > 3 ? parse_size(argv[3]) : 8;
	if (wave < 1 || wave > MAX_WAVE) {
		fprintf(stderr, "WAVE must be 1..%d\n", MAX_WAVE);
		return 1;
	}
	struct task tasks[MAX_WAVE];
	size_t results = 0;
	double t0 = now_sec();
	for (size_t started = 0; started < nthreads;) {
		size_t n = nthreads - started < wave ? nthreads - started : wave;
		for (size_t i = 0; i < n; i++) {
			tasks[i].seed = 0x85A308D313198A2EULL * (started + i + 1);
			if (pthread_create(&tasks[i].tid, NULL, worker, &tasks[i])) {
				fprintf(stderr, "FATAL: pthread_create failed\n");
				return 2;
			}
		}
		for (size_t i = 0; i < n; i++) {
			pthread_join(tasks[i].tid, NULL);
			results += tasks[i].result != NULL;
			free(tasks[i].result);
		}
		started += n;
	}
	double sec = now_sec() - t0;
	printf("RESULT workload=threads threads=%zu ops_per_thread=%zu results=%zu sec=%.3f\n",
	       nthreads, ops_per_thread, results, sec);
	return 0;
}
