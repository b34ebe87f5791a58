/* The inbox of src/inbox.c alone: posts are taken in order, once each; a
 * full inbox refuses a post and takes it again once the owner took one,
 * round and round the slots; a closed one refuses every post until it is
 * opened, and its close waits for a post that claimed a slot to fill it;
 * after a fork, a slot claimed by a thread the child does not have is let
 * go and the posts behind it are taken; and posts of four threads at
 * once, taken by a fifth, arrive each exactly once and in each thread's
 * order. */
#include "config.h"
#include "harness.h"
#include "inbox.h"

#include <pthread.h>

static struct mb_inbox *fresh(void)
{
	static struct mb_inbox in;
	memset(&in, 0, sizeof in);
	mb_inbox_open(&in);
	return &in;
}

/* The pointer posted as number k (never NULL). */
static void *obj(uintptr_t k)
{
	return (void *)((k + 1) << 4);
}

TEST(posts_are_taken_in_order_once)
{
	struct mb_inbox *in = fresh();
	ASSERT(!mb_inbox_pending(in));
	ASSERT_EQ(mb_inbox_take(in), NULL);
	for (uintptr_t k = 0; k < 10; k++)
		ASSERT_EQ(mb_inbox_post(in, obj(k)), 1);
	ASSERT(mb_inbox_pending(in));
	for (uintptr_t k = 0; k < 10; k++)
		ASSERT_EQ(mb_inbox_take(in), obj(k));
	ASSERT(!mb_inbox_pending(in));
	ASSERT_EQ(mb_inbox_take(in), NULL);
}

TEST(a_full_inbox_refuses_until_the_owner_takes)
{
	struct mb_inbox *in = fresh();
	uintptr_t posted = 0, taken = 0;
	/* Round the slots several times, full at every turn. */
	for (int round = 0; round < 5; round++) {
		while (mb_inbox_post(in, obj(posted)))
			posted++;
		ASSERT_EQ(posted - taken, MB_INBOX_SLOTS);
		ASSERT_EQ(mb_inbox_post(in, obj(posted)), 0);
		/* One taken: one more post fits, then none. */
		ASSERT_EQ(mb_inbox_take(in), obj(taken));
		taken++;
		ASSERT_EQ(mb_inbox_post(in, obj(posted)), 1);
		posted++;
		ASSERT_EQ(mb_inbox_post(in, obj(posted)), 0);
		/* Two thirds taken, in order. */
		while (posted - taken > MB_INBOX_SLOTS / 3) {
			ASSERT_EQ(mb_inbox_take(in), obj(taken));
			taken++;
		}
	}
	while (taken < posted) {
		ASSERT_EQ(mb_inbox_take(in), obj(taken));
		taken++;
	}
	ASSERT_EQ(mb_inbox_take(in), NULL);
}

TEST(a_closed_inbox_refuses_until_opened)
{
	struct mb_inbox *in = fresh();
	ASSERT_EQ(mb_inbox_post(in, obj(0)), 1);
	ASSERT_EQ(mb_inbox_post(in, obj(1)), 1);
	mb_inbox_close(in);
	ASSERT_EQ(mb_inbox_post(in, obj(2)), 0);
	/* What was posted before is still taken, in order. */
	ASSERT_EQ(mb_inbox_take(in), obj(0));
	ASSERT_EQ(mb_inbox_take(in), obj(1));
	ASSERT_EQ(mb_inbox_take(in), NULL);
	ASSERT_EQ(mb_inbox_post(in, obj(3)), 0);
	/* Opened again (a heap for a new thread): posts as before. */
	mb_inbox_open(in);
	ASSERT(!mb_inbox_pending(in));
	ASSERT_EQ(mb_inbox_post(in, obj(4)), 1);
	ASSERT_EQ(mb_inbox_take(in), obj(4));
	ASSERT_EQ(mb_inbox_take(in), NULL);
}

/* A post that has claimed slot `claimed` (tail moved past it) and fills
 * it 30 ms later, from another thread. */
struct late_fill {
	struct mb_inbox *in;
	uint64_t claimed;
	void *p;
};

static void *fill_late(void *arg)
{
	struct late_fill *f = arg;
	struct timespec ts = { 0, 30 * 1000 * 1000 };
	nanosleep(&ts, NULL);
	struct mb_inbox_slot *s = &f->in->slot[f->claimed % MB_INBOX_SLOTS];
	s->p = f->p;
	__atomic_store_n(&s->seq, f->claimed + 1, __ATOMIC_RELEASE);
	return NULL;
}

/* Claim the next slot as mb_inbox_post does, without filling it. */
static uint64_t claim(struct mb_inbox *in)
{
	uint64_t t = in->tail;
	ASSERT_EQ(in->slot[t % MB_INBOX_SLOTS].seq, t);
	in->tail = t + 1;
	return t;
}

TEST(close_waits_for_a_claimed_slot)
{
	struct mb_inbox *in = fresh();
	ASSERT_EQ(mb_inbox_post(in, obj(0)), 1);
	struct late_fill f = { in, claim(in), obj(1) };
	/* Not filled yet: the owner sees nothing past post 0. */
	ASSERT_EQ(mb_inbox_take(in), obj(0));
	ASSERT(!mb_inbox_pending(in));
	pthread_t t;
	ASSERT_EQ(pthread_create(&t, NULL, fill_late, &f), 0);
	mb_inbox_close(in);
	/* close returned: the late post is there to take. */
	ASSERT_EQ(mb_inbox_take(in), obj(1));
	ASSERT_EQ(mb_inbox_take(in), NULL);
	ASSERT_EQ(pthread_join(t, NULL), 0);
	mb_inbox_open(in);
}

TEST(fork_child_lets_go_of_slots_never_filled)
{
	struct mb_inbox *in = fresh();
	/* Round the slots once first, so that the gap straddles their end. */
	for (uintptr_t k = 0; k < MB_INBOX_SLOTS - 2; k++) {
		ASSERT_EQ(mb_inbox_post(in, obj(k)), 1);
		ASSERT_EQ(mb_inbox_take(in), obj(k));
	}
	ASSERT_EQ(mb_inbox_post(in, obj(100)), 1);
	claim(in); /* its thread is not in the child */
	ASSERT_EQ(mb_inbox_post(in, obj(101)), 1);
	claim(in);
	claim(in);
	ASSERT_EQ(mb_inbox_post(in, obj(102)), 1);
	/* The parent's owner stops at the first unfilled slot. */
	ASSERT_EQ(mb_inbox_take(in), obj(100));
	ASSERT_EQ(mb_inbox_take(in), NULL);
	mb_inbox_fork_child(in);
	ASSERT(mb_inbox_pending(in));
	ASSERT_EQ(mb_inbox_take(in), obj(101));
	ASSERT_EQ(mb_inbox_take(in), obj(102));
	ASSERT_EQ(mb_inbox_take(in), NULL);
	/* Every slot usable again: a full round of posts fits. */
	uintptr_t n = 0;
	while (mb_inbox_post(in, obj(n)))
		n++;
	ASSERT_EQ(n, MB_INBOX_SLOTS);
	for (uintptr_t k = 0; k < n; k++)
		ASSERT_EQ(mb_inbox_take(in), obj(k));
	ASSERT_EQ(mb_inbox_take(in), NULL);
}

/* ---- four producers, one consumer ---- */

#define PRODUCERS 4
#define PER_PRODUCER 200000

struct producer {
	struct mb_inbox *in;
	uintptr_t id;
	unsigned long refused;
};

/* Object k of producer id: both recoverable from the pointer. */
static void *tagged(uintptr_t id, uintptr_t k)
{
	return obj(k * PRODUCERS + id);
}

static void *produce(void *arg)
{
	struct producer *p = arg;
	for (uintptr_t k = 0; k < PER_PRODUCER; k++)
		while (!mb_inbox_post(p->in, tagged(p->id, k))) {
			p->refused++; /* full: the consumer is behind */
			sched_yield();
		}
	return NULL;
}

TEST(four_producers_each_post_arrives_once_in_order)
{
	struct mb_inbox *in = fresh();
	struct producer prod[PRODUCERS];
	pthread_t t[PRODUCERS];
	for (uintptr_t id = 0; id < PRODUCERS; id++) {
		prod[id] = (struct producer){ in, id, 0 };
		ASSERT_EQ(pthread_create(&t[id], NULL, produce, &prod[id]), 0);
	}
	uintptr_t next[PRODUCERS] = { 0 };
	unsigned long got = 0;
	while (got < (unsigned long)PRODUCERS * PER_PRODUCER) {
		void *p = mb_inbox_take(in);
		if (!p) {
			sched_yield();
			continue;
		}
		uintptr_t v = ((uintptr_t)p >> 4) - 1, id = v % PRODUCERS, k = v / PRODUCERS;
		ASSERT_LT(id, PRODUCERS);
		ASSERT_EQ(k, next[id]); /* each producer's posts in its order, none twice */
		next[id]++;
		got++;
	}
	for (int id = 0; id < PRODUCERS; id++)
		ASSERT_EQ(pthread_join(t[id], NULL), 0);
	ASSERT_EQ(mb_inbox_take(in), NULL);
	unsigned long refused = 0;
	for (int id = 0; id < PRODUCERS; id++)
		refused += prod[id].refused;
	NOTE("%lu posts, %lu refused while full", got, refused);
}
