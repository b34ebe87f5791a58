/* Branch hints for the fast paths; attributes. */
#ifndef MB_COMPILER_H
#define MB_COMPILER_H

#define mb_likely(x) __builtin_expect(!!(x), 1)
#define mb_unlikely(x) __builtin_expect(!!(x), 0)

/* A function that reads other functions' stack frames word by word (the
 * caller slot of classify.c): an AddressSanitizer build must not take the
 * red zones between their variables for an overflow. */
#define MB_READS_OTHER_FRAMES __attribute__((no_sanitize_address))

#endif
