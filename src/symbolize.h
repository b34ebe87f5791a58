/* Names for code addresses, as dladdr(3) gives them, for many addresses
 * at once. dladdr scans the whole dynamic symbol table of the object at
 * each call (libcrypto has 5,000 symbols, libpython 8,000): the report's
 * sixty frames cost it some ten million instructions, a tenth of a short
 * process's run. Here each object's table is scanned once, for all of its
 * addresses. */
#ifndef MB_SYMBOLIZE_H
#define MB_SYMBOLIZE_H

#include <stddef.h>
#include <stdint.h>

struct mb_symbol {
	const char *object; /* the object's path (the program's: argv[0]), or NULL */
	const char *name;   /* the symbol, or NULL */
	uintptr_t offset;   /* from the symbol, or without one from the object's start */
};

/* out[i] for pc[i], i < n: the nearest symbol of pc's object at or below
 * it that contains it (or starts at it, if it has no size), dladdr's
 * rule. Takes the loader's lock (dl_iterate_phdr): never with an
 * allocator lock held. Names point into the objects, which must stay
 * loaded while they are used. */
void mb_symbolize(void *const *pc, size_t n, struct mb_symbol *out);

#endif
