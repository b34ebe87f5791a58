/* Cross-thread producer/consumer churn on two threads.
 *
 * Models a pipeline stage handing messages to the next: the producer
 * allocates and fills a message, the consumer reads it and frees it, so
 * every free happens on a thread other than the one that allocated. This
 * is where per-thread caches either hand memory back efficiently or pile
 * it up (or fight over a lock). Messages go through a bounded
 * single-producer/single-consumer ring; sizes are mostly small with an
 * occasional larger payload.
 *
 * Usage: xthread MESSAGES [RING]
 * Prints: RESULT workload=xthread messages=.. sec=.. ns_per_msg=..
 */
#include <stdatomic.h>

#include "common.h"

#define RING_MAX 65536

struct msg {
	size_t size;
	uint64_t seq;
};

static struct msg *ring[RING_MAX];
static size_t ring_size = 1024;
static _Atomic size_t head; /* next slot the consumer reads */
static _Atomic size_t tail; /* next slot the producer writes */
static size_t nmsg;

static void *producer(void *arg)
{
	(void)arg;
	struct rng r = { 0x243F6A8885A308D3ULL };
	for (size_t i = 0; i < nmsg; i++) {
		/* 90 % small (16-512 B), 10 % payloads up to 16 KiB. */
		size_t n = rng_below(&r, 10) ? rng_logsize(&r, 16, 512)
					      : rng_logsize(&r, 512, 16384);
		struct msg *m = malloc(n);
		if (!m)
			oom("producer", n);
		m->size = n;
		m->seq = i;
		memset(m + 1, (int)(i & 0xff), n - sizeof *m);
		size_t t = atomic_load_explicit(&tail, memory_order_relaxed);
		unsigned spins = 0;
		while (t - atomic_load_explicit(&head, memory_order_acquire) >= ring_size)
			backoff(&spins);
		ring[t % ring_size] = m;
		atomic_store_explicit(&tail, t + 1, memory_order_release);
	}
	return NULL;
}

static void *consumer(void *arg)
{
	uint64_t *sum = arg;
	for (size_t i = 0; i < nmsg; i++) {
		size_t h = atomic_load_explicit(&head, memory_order_relaxed);
		unsigned spins = 0;
		while (atomic_load_explicit(&tail, memory_order_acquire) == h)
			backoff(&spins);
		struct msg *m = ring[h % ring_size];
		atomic_store_explicit(&head, h + 1, memory_order_release);
		if (m->seq != i) {
			fprintf(stderr, "FATAL: message %zu arrived as %llu\n", i,
				(unsigned long long)m->seq);
			exit(3);
		}
		/* Read the payload's last byte, as a consumer would use it. */
		*sum += ((unsigned char *)m)[m->size - 1];
		free(m);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s MESSAGES [RING]\n", argv[0]);
		return 1;
	}
	nmsg = parse_size(argv[1]);
	if (argc > 2)
		ring_size = parse_size(argv[2]);
	if (ring_size < 1 || ring_size > RING_MAX) {
		fprintf(stderr, "RING must be 1..%d\n", RING_MAX);
		return 1;
	}
	uint64_t sum = 0;
	pthread_t pt, ct;
	double t0 = now_sec();
	if (pthread_create(&ct, NULL, consumer, &sum) || pthread_create(&pt, NULL, producer, NULL)) {
		fprintf(stderr, "FATAL: pthread_create failed\n");
		return 2;
	}
	pthread_join(pt, NULL);
	pthread_join(ct, NULL);
	double sec = now_sec() - t0;
	printf("RESULT workload=xthread messages=%zu sec=%.3f ns_per_msg=%.1f checksum=%llu\n",
	       nmsg, sec, sec * 1e9 / (double)nmsg, (unsigned long long)sum);
	return 0;
}
