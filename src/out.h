/* Output: a buffered writer on a file descriptor (text and JSON), and the
 * safe creation of the files libmbuddy writes (reports, profiles).
 *
 * A leaf module: it uses nothing else of the library, and never allocates
 * (reports are written from inside the allocator). The file rules:
 *  - a file is created with O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600, so a
 *    planted symbolic link or an existing file is never written through;
 *  - an existing file is only ever replaced, never written to or
 *    truncated, and only once its owner decided it may be (it is a regular
 *    file of ours, see mb_file_may_replace, with contents the caller
 *    recognises): a temporary file beside it is renamed over it, and only
 *    if the path still names the file that was checked;
 *  - files are read only if they are regular, and opening never blocks. */
#ifndef MB_OUT_H
#define MB_OUT_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

/* ---- the buffered writer ---- */

struct mb_out {
	int fd;
	int failed;
	size_t n;
	size_t total; /* bytes taken since mb_out_init */
	char buf[8192];
};

/* Start writing to fd. */
void mb_out_init(struct mb_out *o, int fd);
void mb_out_mem(struct mb_out *o, const char *s, size_t len);
void mb_out_str(struct mb_out *o, const char *s);
void mb_out_fmt(struct mb_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A JSON string literal, escaped; bytes that are not UTF-8 become U+FFFD. */
void mb_out_json_str(struct mb_out *o, const char *s);
/* Write what is buffered; 0, or -1 once any write has failed. */
int mb_out_flush(struct mb_out *o);

/* ---- files ----
 * Functions that refuse a path return -1 and set *why to a phrase that
 * follows the path in a message ("is a FIFO"); on a system error *why is
 * NULL and errno says what failed. */

/* Open path for reading if it is a regular file (a symbolic link is
 * followed only if follow is set). A FIFO or device is never opened, and
 * opening never blocks. Returns the descriptor, with *st its status; -2
 * (and *why) when the path named another file once opened than when
 * looked at: another process may have just renamed a file over it, and a
 * caller that replaces it may try again. */
int mb_file_open_regular(const char *path, int follow, struct stat *st, const char **why);

/* Whether the regular file *st may be replaced: it belongs to the
 * effective user and its owner may write it (a read-only file is kept). */
int mb_file_may_replace(const struct stat *st, const char **why);

/* Take the advisory lock of fd (flock, exclusive), waiting at most
 * wait_ms for another process to release it. 0, or -1 (errno
 * EWOULDBLOCK if it was still held). A file system without locks gives 0:
 * mb_file_commit still checks that the path names the same file. */
int mb_file_lock(int fd, unsigned wait_ms);

/* A file being written, until mb_file_commit or mb_file_abandon. */
struct mb_file {
	int fd;
	enum { MB_FILE_NEW, MB_FILE_LINK, MB_FILE_RENAME } how;
	dev_t dev;        /* MB_FILE_RENAME: the file it replaces */
	ino_t ino;
	const char *path; /* the caller's, kept until commit */
	char tmp[PATH_MAX];
};

/* Create path, which must not exist, and write it directly. Returns the
 * descriptor, or -1 (errno EEXIST if something is there). */
int mb_file_create(struct mb_file *f, const char *path);

/* Write a file that will appear at path only when complete: into a
 * temporary file beside it, with a random name (O_EXCL, mode 0600, then
 * chmod to mode). With old, the file that must still be at path at commit
 * (checked by the caller, see above); without, path must still not exist
 * at commit. Returns the descriptor, or -1. */
int mb_file_replace(struct mb_file *f, const char *path, const struct stat *old, mode_t mode);

/* Close, and move the temporary file into place. 0, or -1 with the
 * temporary file removed (*why "was changed meanwhile" if path no longer
 * is what was expected). */
int mb_file_commit(struct mb_file *f, const char **why);

/* Close and remove the temporary file; path is left as it was. */
void mb_file_abandon(struct mb_file *f);

/* Read up to len - 1 bytes of a small file (under /proc) into buf, which
 * is then NUL-terminated. Returns the bytes read, or -1. Never allocates. */
long mb_read_small(const char *path, char *buf, size_t len);

/* The process's resident set now, in bytes (/proc/self/statm), or 0. */
uint64_t mb_read_rss(void);

#endif
