#include "config.h"
#include "inbox.h"

#include <sched.h>

void mb_inbox_open(struct mb_inbox *in)
{
	if (!in->next) /* never opened: every slot free for its first post */
		for (uint64_t i = 0; i < MB_INBOX_SLOTS; i++)
			in->slot[i].seq = i;
	in->next = &in->slot[in->head % MB_INBOX_SLOTS];
	__atomic_store_n(&in->tail, in->head, __ATOMIC_RELEASE);
}

int mb_inbox_post(struct mb_inbox *in, void *p)
{
	uint64_t t = __atomic_load_n(&in->tail, __ATOMIC_RELAXED);
	struct mb_inbox_slot *slot;
	for (;;) {
		if (t & MB_INBOX_CLOSED)
			return 0;
		slot = &in->slot[t % MB_INBOX_SLOTS];
		uint64_t seq = __atomic_load_n(&slot->seq, __ATOMIC_ACQUIRE);
		if (seq == t) {
			if (__atomic_compare_exchange_n(&in->tail, &t, t + 1, 0, __ATOMIC_RELAXED,
							__ATOMIC_RELAXED))
				break;
		} else if ((int64_t)(seq - t) < 0) {
			return 0; /* full: the owner has not taken post t - SLOTS yet */
		} else {
			t = __atomic_load_n(&in->tail, __ATOMIC_RELAXED); /* another post took t */
		}
	}
	__atomic_store_n(&slot->p, p, __ATOMIC_RELAXED); /* the account reads it (mb_inbox_each) */
	__atomic_store_n(&slot->seq, t + 1, __ATOMIC_RELEASE);
	return 1;
}

void *mb_inbox_take(struct mb_inbox *in)
{
	uint64_t h = in->head;
	struct mb_inbox_slot *slot = in->next;
	if (__atomic_load_n(&slot->seq, __ATOMIC_ACQUIRE) != h + 1)
		return NULL;
	void *p = __atomic_load_n(&slot->p, __ATOMIC_RELAXED);
	/* Free for the post SLOTS later. */
	__atomic_store_n(&slot->seq, h + MB_INBOX_SLOTS, __ATOMIC_RELEASE);
	__atomic_store_n(&in->head, h + 1, __ATOMIC_RELAXED); /* the account reads it */
	in->next = &in->slot[(h + 1) % MB_INBOX_SLOTS];
	return p;
}

void mb_inbox_each(const struct mb_inbox *in, void (*fn)(void *ctx, const void *p), void *ctx)
{
	uint64_t tail = __atomic_load_n(&in->tail, __ATOMIC_ACQUIRE) & ~MB_INBOX_CLOSED;
	for (uint64_t i = __atomic_load_n(&in->head, __ATOMIC_RELAXED); (int64_t)(tail - i) > 0; i++) {
		const struct mb_inbox_slot *s = &in->slot[i % MB_INBOX_SLOTS];
		if (__atomic_load_n(&s->seq, __ATOMIC_ACQUIRE) == i + 1)
			fn(ctx, __atomic_load_n(&s->p, __ATOMIC_RELAXED));
	}
}

void mb_inbox_close(struct mb_inbox *in)
{
	uint64_t t = __atomic_fetch_or(&in->tail, MB_INBOX_CLOSED, __ATOMIC_ACQ_REL) & ~MB_INBOX_CLOSED;
	/* A post that claimed slot i fills it a few instructions later. */
	for (uint64_t i = in->head; i != t; i++)
		while (__atomic_load_n(&in->slot[i % MB_INBOX_SLOTS].seq, __ATOMIC_ACQUIRE) != i + 1)
			sched_yield();
}

void mb_inbox_fork_child(struct mb_inbox *in)
{
	uint64_t closed = in->tail & MB_INBOX_CLOSED, tail = in->tail & ~MB_INBOX_CLOSED;
	uint64_t kept = in->head;
	/* Filled posts move up over the unfilled ones, in order. */
	for (uint64_t i = in->head; i != tail; i++) {
		struct mb_inbox_slot *s = &in->slot[i % MB_INBOX_SLOTS];
		if (s->seq != i + 1)
			continue;
		struct mb_inbox_slot *to = &in->slot[kept % MB_INBOX_SLOTS];
		to->p = s->p;
		to->seq = kept + 1;
		kept++;
	}
	for (uint64_t i = kept; i != tail; i++)
		in->slot[i % MB_INBOX_SLOTS].seq = i;
	in->tail = kept | closed;
}
