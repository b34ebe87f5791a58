/* The patch's three reclaim types, mapped to object lifetimes in a process. */
#ifndef MB_RECLAIM_TYPE_H
#define MB_RECLAIM_TYPE_H

#include <stdint.h>

enum mb_type {
	MB_KERNNORCLM = 0, /* long-lived or never freed ("pinned") */
	MB_KERNRCLM = 1,   /* medium-lived, freed in bulk later ("cache") */
	MB_USERRCLM = 2,   /* short-lived temporaries ("short") */
	MB_NTYPES = 3
};

/* The type of everything without evidence, and of everything with
 * classification off. Most objects die young: an untyped heap is a heap
 * of short-lived objects, from which what proved to live long (pinned) or
 * to die together later (cache) is set apart. */
#define MB_DEFAULT_TYPE MB_USERRCLM

/* Small objects are filed under a slab key, and slabs of different keys
 * never share a page. Keys 0-2 are the three types themselves: what the
 * typed API, the thread hints and the rules ask for, and (key
 * MB_DEFAULT_TYPE) everything without evidence, which is everything with
 * classification off, so that a heap with no evidence is placed exactly
 * as an untyped one. The keys above are lanes: classification gives one
 * to a call site whose objects clearly outlive the rest and are numerous
 * enough to fill slabs of their own (classify.c), so that its objects
 * gather apart from the others; a lane's type is its site's and may
 * change as the site's evidence does. The last key is not a lane: see
 * MB_OWN_KEY. */
#define MB_NKEYS 16
#define MB_FIRST_LANE MB_NTYPES
/* What the library's own machinery makes others allocate (libunwind's
 * thread-local block at a thread's first unwind, dlopen's records of
 * libunwind, in the classifier's slow path and the library's own
 * threads): slabs of their own, away from the program's objects, where
 * an overflow of one of theirs would reach libunwind; of the default
 * type, in the default key's pageblocks (slab.c), so that these few KiB
 * do not hold a pageblock of their own. */
#define MB_OWN_KEY (MB_NKEYS - 1)
#define MB_KEY_MASK 0xf
extern uint8_t mb_lane_type[MB_NKEYS];
static inline int mb_key_type(int key)
{
	key &= MB_KEY_MASK;
	return key < MB_FIRST_LANE ? key : __atomic_load_n(&mb_lane_type[key], __ATOMIC_RELAXED);
}

/* Patch names, used in every report so kernel people recognise them. */
extern const char *const mb_type_names[MB_NTYPES];
/* Readable aliases accepted in rules and shown beside the patch names. */
extern const char *const mb_type_aliases[MB_NTYPES];

/* Parse a type name or alias (case-insensitive); -1 if unknown. */
int mb_type_parse(const char *s, unsigned long len);

#endif
