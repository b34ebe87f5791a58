/* Branch hints for the fast paths; attributes. */
#ifndef MB_COMPILER_H
#define MB_COMPILER_H

#define mb_likely(x) __builtin_expect(!!(x), 1)
#define mb_unlikely(x) __builtin_expect(!!(x), 0)

/* A function that reads other functions' stack frames word by word (the
 * caller slot of classify.c): an AddressSanitizer build must not take the
 * red zones between their variables for an overflow. */
#define MB_READS_OTHER_FRAMES __attribute__((no_sanitize_address))

/* A cache line. Data that every thread's fast path reads start one, and
 * what any thread writes at its slow paths starts the next: a write
 * shares no line with the reads, so no thread's slab or lock traffic
 * evicts what another thread's every malloc and free read. */
#define MB_CACHE_LINE 64
#define MB_LINE_ALIGNED _Alignas(MB_CACHE_LINE)

#endif
