/* The patch's three reclaim types, mapped to object lifetimes in a process. */
#ifndef MB_RECLAIM_TYPE_H
#define MB_RECLAIM_TYPE_H

enum mb_type {
	MB_KERNNORCLM = 0, /* long-lived or never freed ("pinned"); the default */
	MB_KERNRCLM = 1,   /* medium-lived, freed in bulk later ("cache") */
	MB_USERRCLM = 2,   /* short-lived temporaries ("short") */
	MB_NTYPES = 3
};

/* Small objects are filed under a slab key: the reclaim type in the low
 * two bits and a lane above them. Call sites are dealt out to the lanes of
 * their type in turn, so sites that appear one after another never share a
 * slab: a cache and the pinned data allocated beside it, both unsettled
 * and so of the same type, still fill different slabs, and the cache's slabs
 * empty whole when it is dropped. Lane 0 also takes everything that has no
 * site (explicit types, hints, classification off). */
#define MB_TYPE_MASK 0x3
#define MB_LANE_SHIFT 2
#define MB_LANES 4
#define MB_NKEYS (MB_LANES << MB_LANE_SHIFT)
#define MB_KEY_MASK (MB_NKEYS - 1)
static inline int mb_key_type(int key) { return key & MB_TYPE_MASK; }
static inline int mb_key_lane(int key) { return (key & MB_KEY_MASK) >> MB_LANE_SHIFT; }

/* Patch names, used in every report so kernel people recognise them. */
extern const char *const mb_type_names[MB_NTYPES];
/* Readable aliases accepted in rules and shown beside the patch names. */
extern const char *const mb_type_aliases[MB_NTYPES];

/* Parse a type name or alias (case-insensitive); -1 if unknown. */
int mb_type_parse(const char *s, unsigned long len);

#endif
