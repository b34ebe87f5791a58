/* Fatal misuse reports: like glibc's "free(): invalid pointer", with the
 * address, then abort. Nothing is written to the heap first. */
#ifndef MB_REPORT_H
#define MB_REPORT_H

__attribute__((noreturn, cold)) void mb_fatal_pointer(const char *func, const char *what, const void *p);

#endif
