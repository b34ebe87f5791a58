/* The generated workload (gen.c): its parameters, types and shared state,
 * and the small helpers every part uses. */
#ifndef GEN_H
#define GEN_H

#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "common.h"
#include "gen_sites.h"

#define MAX_SITES 2000
#define MAX_THREADS 4
#define MAX_CACHES 64
#define MAX_SINKS (3 * MAX_SITES + MAX_CACHES) /* a mixed site has three of its own */
#define MAX_COMPS 4
#define MIN_OBJ 16
#define PAGE 4096
#define STEPS 8          /* top-up points per round */
#define DRAIN_EVERY 64   /* ops between looks at the inbox */
#define MAX_ROUNDS 100000
#define LRU_MAX_MOVES 64 /* second chances per eviction, at most */
#define RELIEVE_BYTES ((size_t)256 << 10)

enum kind { K_PINNED, K_CACHE, K_TEMP, K_MIXED };
enum sink_kind { S_PINNED, S_CACHE, S_TEMP, S_FREE };
enum policy { P_FIFO, P_LRU, P_RANDOM };
static const char *const policy_names[] = { "fifo", "lru", "random" };

/* Every object starts with this header; the last byte repeats `check`. */
struct obj {
	struct obj *next;
	uint32_t size;
	uint16_t sink;
	uint8_t hot;
	uint8_t check;
};

struct sizes {
	uint32_t lo, hi;          /* the usual objects */
	uint32_t big_lo, big_hi;  /* page-sized and larger */
	uint32_t big_per_1024;    /* how often a big one */
};

struct comp {
	int sink;
	double volume; /* bytes over the churn */
	double cum;    /* cumulative probability within the site */
};

/* A site's behaviour: what its objects look like and where they go. The
 * function (fn) that allocates them may change mid-run. */
struct behav {
	int kind, thread, fn, swap_with;
	struct sizes sz;
	double mean, volume, ops;
	int ncomp;
	struct comp comp[MAX_COMPS];
};

struct sink {
	int kind, policy, owner, feeders;
	double budget, tau;
	double hot, reref;        /* LRU: share of hot entries, their re-reference odds */
	size_t bytes, count;
	struct obj *head;         /* pinned: a list */
	struct obj **slot;        /* cache: ring (FIFO, LRU) or array (random); temp: slots */
	size_t cap, first;        /* ring capacity (a power of two), index of the oldest */
	int feeder[8];            /* behaviours that feed it (caches: up to 8 tracked) */
	double feeder_cum[8];
};

struct thr {
	_Atomic int64_t live; /* bytes allocated minus freed by this thread */
	int id;
	struct rng rng;
	pthread_mutex_t inbox_lock;
	struct obj *inbox;
	int nb;
	int *behav;
	double *cum;
	double ops_per_round, ops_carry;
	double at; /* position in the run, in rounds (pinned data's schedule) */
	int nsinks;
	int *sinks;
	int relieve_at;
	unsigned long ops, allocs, frees, handoffs, pressure, load_failures, skipped;
	double alloc_bytes;
} __attribute__((aligned(64)));

/* ---- parameters ---- */

static struct {
	uint64_t seed;
	size_t cap;
	double fill;
	int sites, threads;
	double xthread, pinned_pct, temp_pct, mixed_pct, change_pct, big_pct, wrapper_pct, imm;
	int caches, policies; /* bit mask of enum policy */
	double tau_c_lo, tau_c_hi, tau_t_lo, tau_t_hi, pinned_start;
	size_t max_big, order_bytes;
	double max_ops;
	int warm, attempts;
	long idle_ms;
	int fill_to_fail, stats_signal;
} P = {
	.fill = 70, .sites = 20, .threads = 1, .pinned_pct = 15, .temp_pct = 5, .caches = 2,
	.policies = 7, .tau_c_lo = 1, .tau_c_hi = 6, .tau_t_lo = 20, .tau_t_hi = 1000,
	.pinned_start = 0.5, .max_big = 1 << 20, .max_ops = 3e6, .warm = 40, .attempts = 160,
	.idle_ms = 100,
};

static struct behav behavs[MAX_SITES];
static struct sink sinks[MAX_SINKS];
static int nsinks;
static struct thr thrs[MAX_THREADS];
static int site_wrapped[GEN_NSITES];
static int nwrapped;
static double cache_tau_scale = 1, temp_tau_scale = 1;
static pthread_barrier_t barrier;

/* Filled by thread 0 between the barriers of each round. */
static char timeline[MAX_ROUNDS + 1];
static int successes;
static double live_max, live_warm, live_sum_at_attempts;
static _Atomic int first_fail_small_set, first_fail_any_set;
static _Atomic int64_t first_fail_small_live, first_fail_any_live;
static _Atomic unsigned long corrupted;

static void die(const char *what)
{
	fprintf(stderr, "gen: %s: %s\n", what, strerror(errno));
	exit(2);
}

/* ---- harness memory: mmap, never malloc ---- */

static void *map(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die("mmap");
	return p;
}

static void unmap(void *p, size_t bytes)
{
	if (p && munmap(p, bytes) != 0)
		die("munmap");
}

/* ---- random numbers ---- */

static uint64_t splitmix(uint64_t *x)
{
	uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

static double rng_unit(struct rng *r)
{
	return (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

static double rng_loguniform(struct rng *r, double lo, double hi)
{
	return lo * exp(rng_unit(r) * log(hi / lo));
}

static int chance(struct rng *r, double pct)
{
	return rng_unit(r) * 100 < pct;
}


#endif
