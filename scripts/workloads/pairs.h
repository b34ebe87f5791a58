/* Producer/consumer pairs, for the workloads where one thread allocates
 * and another frees (xmalloc, churn).
 *
 * THREADS >= 2 runs THREADS/2 pairs, each a consumer and a producer
 * thread sharing a ring; THREADS = 1 runs one thread that does both, with
 * no cross-thread free, for the scaling reference. A pair's state starts
 * with struct pair_head; the workload's ring follows it. */
#ifndef BENCH_PAIRS_H
#define BENCH_PAIRS_H

#include "common.h"

struct pair_head {
	_Alignas(64) size_t tail; /* items published by the producer */
	_Alignas(64) size_t head; /* items taken by the consumer */
	_Alignas(64) int done;    /* the producer has stopped */
	uint64_t seed, produced, consumed;
};

struct pair_roles {
	void *(*producer)(void *);
	void *(*consumer)(void *);
	void *(*alone)(void *);
};

struct pair_job {
	struct pair_head *pair;
	void *(*fn)(void *);
};

static void *pair_start(void *arg)
{
	struct pair_job *j = arg;
	return j->fn(j->pair);
}

/* Run the pairs (npairs_max of `stride` bytes at `pairs`) for `seconds`;
 * returns the items produced, after checking each was consumed, and sets
 * *threads and *sec. */
static uint64_t run_pairs(int nthreads, double seconds, void *pairs, size_t stride, int npairs_max,
			  const struct pair_roles *roles, int *threads, double *sec)
{
	static struct pair_job jobs[MAX_RUN_THREADS];
	int npairs = nthreads < 2 ? 1 : nthreads / 2;
	if (npairs > npairs_max) {
		fprintf(stderr, "THREADS must be at most %d\n", 2 * npairs_max);
		exit(1);
	}
	int n = 0;
	for (int i = 0; i < npairs; i++) {
		struct pair_head *p = (struct pair_head *)((char *)pairs + (size_t)i * stride);
		p->seed = 0x243F6A8885A308D3ULL * (uint64_t)(i + 1) | 1;
		if (nthreads == 1) {
			jobs[n++] = (struct pair_job){ p, roles->alone };
		} else {
			jobs[n++] = (struct pair_job){ p, roles->consumer };
			jobs[n++] = (struct pair_job){ p, roles->producer };
		}
	}
	*threads = n;
	*sec = run_threads(n, pair_start, jobs, sizeof jobs[0], seconds);
	uint64_t ops = 0;
	for (int i = 0; i < npairs; i++) {
		struct pair_head *p = (struct pair_head *)((char *)pairs + (size_t)i * stride);
		if (p->consumed != p->produced) {
			fprintf(stderr, "FATAL: pair %d produced %llu, consumed %llu\n", i,
				(unsigned long long)p->produced, (unsigned long long)p->consumed);
			exit(3);
		}
		ops += p->produced;
	}
	return ops;
}

#endif
