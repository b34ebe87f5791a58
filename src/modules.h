/* The code of the process as address ranges, one per loaded module (the
 * executable and each shared object): a list taken before dlclose and
 * compared with the modules loaded after it tells which ranges of code
 * were unmapped, so that only the call sites inside them are forgotten. */
#ifndef MB_MODULES_H
#define MB_MODULES_H

#include <stddef.h>
#include <stdint.h>

struct mb_module {
	uintptr_t lo, hi; /* executable segments: [lo, hi) */
	uintptr_t base;   /* load address */
	uint64_t name;    /* hash of the path */
};

struct mb_modules {
	struct mb_module *v; /* a private mapping: taking the list never allocates */
	size_t n, bytes;
};

/* The modules loaded now. 0, or -1 when the list could not be taken
 * whole (no memory, or modules loaded meanwhile by another thread filled
 * it): then nothing is known of what an unload unmaps. Takes the loader's
 * lock, so never with an allocator lock held. */
int mb_modules_take(struct mb_modules *m);
void mb_modules_drop(struct mb_modules *m);

/* Move the modules of m that are not loaded any more to its front; returns
 * how many there are. */
size_t mb_modules_unloaded(struct mb_modules *m);

#endif
