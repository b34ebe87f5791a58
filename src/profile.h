/* Classification profiles: what a run learned about its call sites, saved
 * at exit and read at the next start, so that run begins classified. Sites
 * are keyed by module and offset (stable across ASLR and reruns); a module
 * whose file changed makes its entries stale, and they are ignored. */
#ifndef MB_PROFILE_H
#define MB_PROFILE_H

#include <stdint.h>

#include "profile_format.h"

/* Read MBUDDY_PROFILE if it is a regular file (never blocks on a FIFO);
 * problems are reported once and the file ignored. At most 16384 sites
 * are kept, and a file above 8 MiB is not read. Called at
 * initialisation, no lock held. */
void mb_profile_load(const char *path);

/* The ASLR-proof key of a code address (module basename + offset), or 0.
 * Calls dladdr, so never with an allocator lock held. A module's identity
 * (it takes a stat) is computed once per load address. */
uint64_t mb_profile_pc_key(const void *pc);
/* Code was unmapped: module identities are computed again. */
void mb_profile_forget_modules(void);
/* Around fork: the lock of the module identities. */
void mb_profile_fork_prepare(void);
void mb_profile_fork_parent(void);
void mb_profile_fork_child(void);
/* A deeper site's key from its wrapper's and its callers' keys. */
uint64_t mb_profile_deep_key(uint64_t parent, uint64_t f1, uint64_t f2);

/* What the previous run learned for key; 0 if found. */
int mb_profile_lookup(uint64_t key, struct mb_profile_entry *out);

/* Writing: open, one call per site, close. */
int mb_profile_save_begin(const char *path);
void mb_profile_save_site(const struct mb_profile_entry *e);
void mb_profile_save_end(void);

#endif
