/* Layer 5: which reclaim type an allocation gets. The program's own word
 * comes first (the per-thread type hint of the public API); otherwise the
 * call site decides. */
#ifndef MB_CLASSIFY_H
#define MB_CLASSIFY_H

#include <stddef.h>

#include "reclaim_type.h"
#include "tcache.h"

/* -1, or the type the thread asked for with mbuddy_set_thread_type(). */
extern __thread int mb_type_hint MB_TLS;

/* The type for an allocation of n bytes whose caller returns to ra. */
int mb_classify_site(void *ra, size_t n);

static inline int mb_classify(void *ra, size_t n)
{
	int hint = mb_type_hint;
	if (__builtin_expect(hint >= 0, 0))
		return hint;
	return mb_classify_site(ra, n);
}

#endif
