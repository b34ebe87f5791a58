/* The patch's three reclaim types, mapped to object lifetimes in a process. */
#ifndef MB_RECLAIM_TYPE_H
#define MB_RECLAIM_TYPE_H

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

/* Small objects are filed under a slab key: the reclaim type. Slabs of
 * different keys never share a page. A call site gets a key of its own
 * only on evidence (classify.c); until then it has the default type, the
 * one every allocation has with classification off, so that a heap with
 * no evidence is placed exactly as an untyped one. */
#define MB_TYPE_MASK 0x3
#define MB_NKEYS MB_NTYPES
#define MB_KEY_MASK MB_TYPE_MASK
static inline int mb_key_type(int key) { return key & MB_TYPE_MASK; }

/* Patch names, used in every report so kernel people recognise them. */
extern const char *const mb_type_names[MB_NTYPES];
/* Readable aliases accepted in rules and shown beside the patch names. */
extern const char *const mb_type_aliases[MB_NTYPES];

/* Parse a type name or alias (case-insensitive); -1 if unknown. */
int mb_type_parse(const char *s, unsigned long len);

#endif
