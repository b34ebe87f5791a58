/* The state of the calling thread that the fast paths read, in one
 * initial-exec TLS block: malloc's classification and its thread heap,
 * and free, all start from one thread-pointer offset. */
#ifndef MB_THREAD_H
#define MB_THREAD_H

#include <stdint.h>

#define MB_TLS __attribute__((tls_model("initial-exec")))

/* Classification samples one allocation in this many, on average; the
 * countdown to the next sample is per thread. */
#define MB_SAMPLE_PERIOD 512

struct mb_theap;

struct mb_thread {
	struct mb_theap *fast;    /* the heap the inline fast paths use: heap,
				   * or NULL with canaries (MBUDDY_CHECK=1), whose
				   * checks live on the general paths */
	struct mb_theap *heap;    /* NULL until the first small allocation, and after exit */
	int32_t sample_countdown; /* allocations until the next classification sample */
	int32_t type_hint;        /* -1, or the slab key of the thread's allocations:
				   * the type set with mbuddy_set_thread_type(), or MB_OWN_KEY */
	int32_t heap_busy;        /* set while the heap is being created or torn down */
};

extern __thread struct mb_thread mb_self MB_TLS;

#endif
