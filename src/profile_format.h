/* The text of a profile: a first line, then one section per program,
 * opened by its exe line and holding its site and module lines (the
 * format is described in libmbuddy(3)). Version 1 files had no sections:
 * all their lines count as the reading program's. Parsing and writing
 * lines; no file handling. */
#ifndef MB_PROFILE_FORMAT_H
#define MB_PROFILE_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "out.h"

#define MB_PROFILE_MAGIC "libmbuddy-profile 2"
#define MB_PROFILE_MAGIC_V1 "libmbuddy-profile 1"

/* What a site line says: what a run learned about one call site. */
struct mb_profile_entry {
	uint64_t key;
	uint8_t type, wrapper;
	int32_t n_short, n_medium, n_old;
	uint64_t mean_lifetime; /* of freed samples, in bytes allocated */
};

/* One line, without its newline. */
struct mb_profile_line {
	enum { MB_PROFILE_COMMENT, MB_PROFILE_EXE, MB_PROFILE_SITE, MB_PROFILE_MODULE } kind;
	const char *start, *end;
	uint64_t exe;                  /* MB_PROFILE_EXE: the program's id */
	struct mb_profile_entry site;  /* MB_PROFILE_SITE */
	uint64_t size, mtime;          /* MB_PROFILE_MODULE, and its path up to end */
	const char *path;
};

typedef void mb_profile_line_fn(const struct mb_profile_line *l, int ours, void *arg);

/* Check a whole profile (len bytes of text, then a NUL) and give each
 * line after the first to each (if not NULL), with ours set for the lines
 * of the section of program exe. NULL, or why text is not a profile,
 * *lineno then the line. */
const char *mb_profile_walk(const char *text, size_t len, uint64_t exe, unsigned *lineno, mb_profile_line_fn *each,
			    void *arg);

/* The first lines of a profile, and the exe line of program exe. */
void mb_profile_write_start(struct mb_out *o, uint64_t exe, const char *path);
void mb_profile_write_site(struct mb_out *o, const struct mb_profile_entry *e);
void mb_profile_write_module(struct mb_out *o, uint64_t size, uint64_t mtime, const char *path);

#endif
