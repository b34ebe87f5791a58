/* The patch's three reclaim types, mapped to object lifetimes in a process. */
#ifndef MB_RECLAIM_TYPE_H
#define MB_RECLAIM_TYPE_H

enum mb_type {
	MB_KERNNORCLM = 0, /* long-lived or never freed ("pinned"); the default */
	MB_KERNRCLM = 1,   /* medium-lived, freed in bulk later ("cache") */
	MB_USERRCLM = 2,   /* short-lived temporaries ("short") */
	MB_NTYPES = 3
};

/* Patch names, used in every report so kernel people recognise them. */
extern const char *const mb_type_names[MB_NTYPES];
/* Readable aliases accepted in rules and shown beside the patch names. */
extern const char *const mb_type_aliases[MB_NTYPES];

/* Parse a type name or alias (case-insensitive); -1 if unknown. */
int mb_type_parse(const char *s, unsigned long len);

#endif
