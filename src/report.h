/* Fatal reports: misuse, like glibc's "free(): invalid pointer", with the
 * address, then abort. Nothing is written to the heap first. */
#ifndef MB_REPORT_H
#define MB_REPORT_H

__attribute__((noreturn, cold)) void mb_fatal_pointer(const char *func, const char *what, const void *p);
/* A broken invariant of the allocator's own structures, found by a debug
 * build's checker after operation op. */
__attribute__((noreturn, cold)) void mb_fatal_invariant(const char *op, const char *broken);

#endif
