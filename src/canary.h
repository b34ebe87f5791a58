/* MBUDDY_CHECK=1: every object ends in a canary, 8 bytes holding a value
 * derived from their own address and a per-process secret. free and
 * realloc verify it (alloc.c), so a write past the end that reaches the
 * next object is reported with the address instead of corrupting a
 * neighbour silently. Whether canaries are on is mb_opt.check. */
#ifndef MB_CANARY_H
#define MB_CANARY_H

#include <stdint.h>

#define MB_CANARY_BYTES 8

/* Choose the secret: once, at set-up, before the first object. */
void mb_canary_init(void);

/* The canary for the 8 bytes at `at`. */
uint64_t mb_canary_value(const void *at);

#endif
