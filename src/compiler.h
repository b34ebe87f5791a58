/* Branch hints for the fast paths. */
#ifndef MB_COMPILER_H
#define MB_COMPILER_H

#define mb_likely(x) __builtin_expect(!!(x), 1)
#define mb_unlikely(x) __builtin_expect(!!(x), 0)

#endif
