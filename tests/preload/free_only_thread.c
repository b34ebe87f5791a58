/* A thread that only frees (the consumer end of a queue) gets a thread
 * heap of its own at its first free, as a thread that allocates does at
 * its first malloc (MBUDDY_DECAY_MS=3600000 and MBUDDY_BACKGROUND=0 from
 * tests/preload/free_only_thread.env: no purge runs meanwhile).
 *
 *  - Objects of an exited thread: a producer thread allocates objects of
 *    several small sizes and exits, leaving its slabs abandoned with every
 *    object live. A consumer thread that never allocates frees them all
 *    and exits. With a heap of its own, the consumer adopts each slab at
 *    its first free into it and frees the rest as the owner, so the slabs
 *    empty and go back to the buddy: afterwards the account finds no free
 *    object left in slabs of exited threads, and the buddy has given back
 *    what the producer took. (A consumer without a heap would only mark
 *    the objects freed remotely, and the slabs would stay abandoned, full
 *    of free objects, until a purge collects them.)
 *  - A live producer and a free-only consumer exchange objects through a
 *    ring; every object the consumer receives holds what the producer
 *    wrote, and the counters balance once both have exited. */
#define _GNU_SOURCE 1
#include "ptest.h"

#include <pthread.h>
#include <stdatomic.h>

#include "mbuddy.h"

#define NOBJ 30000
#define NSIZES 4
#define RING 1024
#define PIPE_OBJECTS 400000

static const size_t sizes[NSIZES] = { 24, 64, 200, 720 };
static void *objects[NOBJ];

static int (*stats_read)(struct mbuddy_stats *, size_t);

static void read_stats(struct mbuddy_stats *st)
{
	PT_REQUIRE(stats_read(st, sizeof *st) == (int)sizeof *st, "mbuddy_stats_read failed");
}

static void *producer(void *arg)
{
	(void)arg;
	for (size_t i = 0; i < NOBJ; i++) {
		size_t n = sizes[i % NSIZES];
		unsigned char *p = malloc(n);
		PT_REQUIRE(p != NULL, "malloc(%zu)", n);
		memset(p, (int)(i & 0xff), n);
		objects[i] = p;
	}
	return NULL;
}

/* Frees what the producer left, checking its contents; allocates nothing. */
static void *consumer(void *arg)
{
	(void)arg;
	for (size_t i = 0; i < NOBJ; i++) {
		unsigned char *p = objects[i];
		size_t n = sizes[i % NSIZES];
		PT_CHECK(p[0] == (unsigned char)(i & 0xff) && p[n - 1] == (unsigned char)(i & 0xff),
			 "object %zu changed before its free", i);
		free(p);
		objects[i] = NULL;
	}
	return NULL;
}

static void run_thread(void *(*fn)(void *))
{
	pthread_t t;
	PT_REQUIRE(pthread_create(&t, NULL, fn, NULL) == 0, "pthread_create");
	PT_REQUIRE(pthread_join(t, NULL) == 0, "pthread_join");
}

static void exited_producer(void)
{
	static struct mbuddy_stats before, left, after;
	read_stats(&before);
	run_thread(producer);
	read_stats(&left);
	unsigned long long taken = left.buddy_allocated_bytes - before.buddy_allocated_bytes;
	PT_CHECK(taken >= (unsigned long long)NOBJ / NSIZES * (24 + 64 + 200 + 720),
		 "the producer's objects took %llu bytes from the buddy", taken);
	run_thread(consumer);
	read_stats(&after);
	PT_CHECK(after.frees - left.frees >= NOBJ, "%llu frees counted for %d objects freed",
		 after.frees - left.frees, NOBJ);
	PT_CHECK(after.account.slab_free_abandoned < 64 * 1024,
		 "%llu bytes of free objects left in slabs of exited threads "
		 "(the free-only thread did not adopt them)",
		 after.account.slab_free_abandoned);
	PT_CHECK(after.buddy_allocated_bytes < before.buddy_allocated_bytes + taken / 8,
		 "the buddy still lends %llu bytes of the %llu the producer took",
		 after.buddy_allocated_bytes - before.buddy_allocated_bytes, taken);
}

/* ---- a live pipeline ---- */

static void *_Atomic ring[RING];
static atomic_size_t head, tail;

static void *pipe_producer(void *arg)
{
	(void)arg;
	for (size_t i = 0; i < PIPE_OBJECTS; i++) {
		size_t n = sizes[i % NSIZES];
		size_t *p = malloc(n);
		PT_REQUIRE(p != NULL, "malloc(%zu)", n);
		p[0] = i;
		p[n / sizeof(size_t) - 1] = ~i;
		while (i - atomic_load(&tail) >= RING)
			sched_yield();
		atomic_store(&ring[i % RING], p);
		atomic_store(&head, i + 1);
	}
	return NULL;
}

static void *pipe_consumer(void *arg)
{
	(void)arg;
	for (size_t i = 0; i < PIPE_OBJECTS; i++) {
		while (atomic_load(&head) <= i)
			sched_yield();
		size_t *p = atomic_load(&ring[i % RING]);
		size_t n = sizes[i % NSIZES];
		PT_REQUIRE(p[0] == i && p[n / sizeof(size_t) - 1] == ~i, "message %zu corrupted", i);
		free(p);
		atomic_store(&tail, i + 1);
	}
	return NULL;
}

static void pipeline(void)
{
	static struct mbuddy_stats before, after;
	read_stats(&before);
	pthread_t p, c;
	PT_REQUIRE(pthread_create(&c, NULL, pipe_consumer, NULL) == 0, "pthread_create");
	PT_REQUIRE(pthread_create(&p, NULL, pipe_producer, NULL) == 0, "pthread_create");
	PT_REQUIRE(pthread_join(p, NULL) == 0 && pthread_join(c, NULL) == 0, "pthread_join");
	read_stats(&after);
	PT_CHECK(after.mallocs - before.mallocs >= PIPE_OBJECTS && after.frees - before.frees >= PIPE_OBJECTS,
		 "%llu mallocs and %llu frees counted for %d objects", after.mallocs - before.mallocs,
		 after.frees - before.frees, PIPE_OBJECTS);
	PT_CHECK(after.live_bytes <= before.live_bytes + 64 * 1024, "live bytes grew from %llu to %llu",
		 before.live_bytes, after.live_bytes);
}

int main(void)
{
	pt_init("free_only_thread");
	if (!pt_mbuddy)
		return PT_SKIP;
	stats_read = (int (*)(struct mbuddy_stats *, size_t))dlsym(RTLD_DEFAULT, "mbuddy_stats_read");
	PT_REQUIRE(stats_read != NULL, "mbuddy_stats_read");
	PT_RUN(exited_producer);
	PT_RUN(pipeline);
	return pt_failures ? 1 : 0;
}
