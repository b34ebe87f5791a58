/* A thread heap's inbox: the small objects other threads freed into its
 * slabs, posted for the owner to take at its next free or slow path.
 *
 * A free of another thread's object used to set the object's remote bit
 * (slab.h) with an atomic OR: a write to one of the owner's slab lines,
 * and a later miss for the owner on the line of the remote bits and of
 * the flag that says there are any. Where the freed objects lie at random
 * in many slabs (rptest, a server that hands requests around), each such
 * free costs a line moved between processors and back. A post writes one
 * word of a line of this queue, eight posts share a line, and the owner
 * then frees the objects into its own slabs as if it had freed them
 * itself.
 *
 * A bounded queue of many producers and one consumer, after Dmitry
 * Vyukov's: each slot carries a sequence number, i when it is free for
 * post i, i + 1 when it holds post i, so a producer never reads the
 * owner's index and the owner never reads the producers'. Only the owner
 * takes; a full queue refuses a post (the caller frees the usual way).
 * Closed (its thread exits), it refuses every post.
 *
 * No lock, and nothing here allocates. */
#ifndef MB_INBOX_H
#define MB_INBOX_H

#include <stdint.h>

#include "compiler.h"

#define MB_INBOX_SLOTS 256 /* posts waiting at most: 4 KiB of slots */

struct mb_inbox_slot {
	uint64_t seq; /* i: free for post i; i + 1: holds post i */
	void *p;
};

struct mb_inbox {
	MB_LINE_ALIGNED uint64_t tail; /* producers: the next post; MB_INBOX_CLOSED */
	MB_LINE_ALIGNED uint64_t head; /* the owner: the next post to take */
	struct mb_inbox_slot *next;    /* &slot[head % MB_INBOX_SLOTS] */
	MB_LINE_ALIGNED struct mb_inbox_slot slot[MB_INBOX_SLOTS];
};

#define MB_INBOX_CLOSED ((uint64_t)1 << 63)

/* Open in (zeroed, or closed and emptied): posts accepted again. */
void mb_inbox_open(struct mb_inbox *in);
/* Post p: 1 if posted, 0 if the inbox is full or closed. Any thread. */
int mb_inbox_post(struct mb_inbox *in, void *p);
/* The oldest post, out of the inbox; NULL if there is none. The owner. */
void *mb_inbox_take(struct mb_inbox *in);
/* Refuse posts from now on, and wait (yielding) until every post that
 * got a slot has filled it: then mb_inbox_take sees all of them. */
void mb_inbox_close(struct mb_inbox *in);
/* In the child of fork: posts that threads the child does not have had
 * claimed a slot for but not filled never will be; their slots are let
 * go, so that the posts after them can be taken. */
void mb_inbox_fork_child(struct mb_inbox *in);

/* fn(ctx, p) for each post waiting, read as it is now (the owner may be
 * taking them meanwhile): for the account. */
void mb_inbox_each(const struct mb_inbox *in, void (*fn)(void *ctx, const void *p), void *ctx);

/* Whether a post waits (the owner's fast path: two loads). */
static inline int mb_inbox_pending(const struct mb_inbox *in)
{
	return __atomic_load_n(&in->next->seq, __ATOMIC_RELAXED) == in->head + 1;
}

#endif
