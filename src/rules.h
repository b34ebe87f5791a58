/* MBUDDY_RULES: types given to call sites by name, the way a kernel
 * caller's GFP flags give a page its type:
 *   MBUDDY_RULES="sym:xmalloc=short,lib:libfoo=pinned" */
#ifndef MB_RULES_H
#define MB_RULES_H

/* Parse the variable's value; entries that make no sense are reported
 * once each on stderr and ignored. */
void mb_rules_parse(const char *s);

/* The type a rule gives the code at ra, or -1. Looks the address up with
 * dladdr, which takes the loader's lock: never called with a lock of the
 * allocator held. */
int mb_rules_type(void *ra);

#endif
