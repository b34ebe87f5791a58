#include "config.h"
#include "out.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

/* ---- the buffered writer ---- */

void mb_out_init(struct mb_out *o, int fd)
{
	o->fd = fd;
	o->failed = 0;
	o->n = 0;
	o->total = 0;
}

int mb_out_flush(struct mb_out *o)
{
	size_t off = 0;
	while (off < o->n && !o->failed) {
		ssize_t w = write(o->fd, o->buf + off, o->n - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			o->failed = 1;
		else
			off += (size_t)w;
	}
	o->n = 0;
	return o->failed ? -1 : 0;
}

void mb_out_mem(struct mb_out *o, const char *s, size_t len)
{
	o->total += len;
	while (len) {
		if (o->n == sizeof o->buf)
			mb_out_flush(o);
		size_t k = sizeof o->buf - o->n < len ? sizeof o->buf - o->n : len;
		memcpy(o->buf + o->n, s, k);
		o->n += k;
		s += k;
		len -= k;
	}
}

void mb_out_str(struct mb_out *o, const char *s)
{
	mb_out_mem(o, s, strlen(s));
}

/* Formatted straight into the buffer, flushed first when what is there
 * leaves too little room: nothing shorter than the buffer is ever cut (a
 * line with a path of PATH_MAX bytes, a profile's exe or module line,
 * must keep its newline). Only output longer than the whole buffer is
 * cut, to its size. */
void mb_out_fmt(struct mb_out *o, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(o->buf + o->n, sizeof o->buf - o->n, fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n >= sizeof o->buf - o->n && o->n) {
		mb_out_flush(o);
		va_start(ap, fmt);
		n = vsnprintf(o->buf, sizeof o->buf, fmt, ap);
		va_end(ap);
	}
	if (n < 0)
		return;
	size_t k = (size_t)n < sizeof o->buf - o->n ? (size_t)n : sizeof o->buf - o->n - 1;
	o->n += k;
	o->total += k;
}

/* Length of the valid UTF-8 sequence at s (2-4), or 0 (RFC 3629): the
 * second byte's range excludes overlong forms (E0 and F0), surrogates
 * (ED) and code points above U+10FFFF (F4). */
static int utf8_len(const unsigned char *s)
{
	unsigned char lo = 0x80, hi = 0xbf;
	int n;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3, lo = s[0] == 0xe0 ? 0xa0 : 0x80, hi = s[0] == 0xed ? 0x9f : 0xbf;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4, lo = s[0] == 0xf0 ? 0x90 : 0x80, hi = s[0] == 0xf4 ? 0x8f : 0xbf;
	else
		return 0;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (int i = 2; i < n; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return n;
}

/* A JSON string: program and library names are bytes, not text, so a
 * byte that does not start valid UTF-8 becomes U+FFFD. */
void mb_out_json_str(struct mb_out *o, const char *s)
{
	mb_out_str(o, "\"");
	while (*s) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			mb_out_fmt(o, "\\%c", c);
		} else if (c < 0x20) {
			mb_out_fmt(o, "\\u%04x", c);
		} else if (c < 0x80) {
			char ch[2] = { (char)c, 0 };
			mb_out_str(o, ch);
		} else {
			int n = utf8_len((const unsigned char *)s);
			if (n == 0) {
				mb_out_str(o, "\\ufffd");
				n = 1;
			} else {
				char seq[5] = { 0 };
				memcpy(seq, s, (size_t)n);
				mb_out_str(o, seq);
			}
			s += n;
			continue;
		}
		s++;
	}
	mb_out_str(o, "\"");
}

/* ---- files ---- */

static const char *not_regular(mode_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFLNK: return "is a symbolic link";
	case S_IFDIR: return "is a directory";
	case S_IFIFO: return "is a FIFO";
	case S_IFSOCK: return "is a socket";
	case S_IFCHR: return "is a character device";
	case S_IFBLK: return "is a block device";
	}
	return "is not a regular file";
}

static int same_file(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

int mb_file_open_regular(const char *path, int follow, struct stat *st, const char **why)
{
	*why = NULL;
	/* Checked before opening: opening a FIFO or a device can block or
	 * act on the device (a tape rewinds, a watchdog starts). */
	if ((follow ? stat(path, st) : lstat(path, st)) != 0)
		return -1;
	if (!S_ISREG(st->st_mode)) {
		*why = not_regular(st->st_mode);
		return -1;
	}
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK | (follow ? 0 : O_NOFOLLOW));
	if (fd < 0)
		return -1;
	struct stat now;
	if (fstat(fd, &now) != 0 || !S_ISREG(now.st_mode) || !same_file(&now, st)) {
		close(fd);
		*why = "was changed while it was opened";
		return -2;
	}
	*st = now;
	return fd;
}

int mb_file_may_replace(const struct stat *st, const char **why)
{
	*why = NULL;
	if (!S_ISREG(st->st_mode))
		*why = not_regular(st->st_mode);
	else if (st->st_uid != geteuid())
		*why = "belongs to another user";
	else if (!(st->st_mode & S_IWUSR))
		*why = "is read-only";
	return *why == NULL;
}

int mb_file_lock(int fd, unsigned wait_ms)
{
	for (unsigned waited = 0;; waited += 10) {
		if (flock(fd, LOCK_EX | LOCK_NB) == 0)
			return 0;
		if (errno != EWOULDBLOCK && errno != EINTR)
			return 0; /* no locks here (ENOLCK, EINVAL) */
		if (waited >= wait_ms)
			return -1;
		struct timespec ts = { 0, 10 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
}

int mb_file_create(struct mb_file *f, const char *path)
{
	f->how = MB_FILE_NEW;
	f->path = path;
	f->tmp[0] = 0;
	f->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, 0600);
	return f->fd;
}

/* "<dir>/.<name>.XXXXXX" for path "<dir>/<name>". */
static int temp_name(char *tmp, size_t len, const char *path)
{
	const char *slash = strrchr(path, '/');
	size_t dir = slash ? (size_t)(slash + 1 - path) : 0;
	int n = snprintf(tmp, len, "%.*s.%s.XXXXXX", (int)dir, path, path + dir);
	if (n < 0 || (size_t)n >= len) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

int mb_file_replace(struct mb_file *f, const char *path, const struct stat *old, mode_t mode)
{
	f->path = path;
	f->how = old ? MB_FILE_RENAME : MB_FILE_LINK;
	if (old) {
		f->dev = old->st_dev;
		f->ino = old->st_ino;
	}
	f->fd = -1;
	if (temp_name(f->tmp, sizeof f->tmp, path) != 0) {
		f->tmp[0] = 0;
		return -1;
	}
	f->fd = mkostemp(f->tmp, O_CLOEXEC);
	if (f->fd < 0) {
		f->tmp[0] = 0;
		return -1;
	}
	if ((mode & 0777) != 0600 && fchmod(f->fd, mode & 0777) != 0) {
		mb_file_abandon(f);
		return -1;
	}
	return f->fd;
}

/* Give tmp the name path only if nothing has that name yet. */
static int link_new(const char *tmp, const char *path)
{
#ifdef RENAME_NOREPLACE
	if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -1; /* EEXIST: created meanwhile */
#endif
	/* A file system without RENAME_NOREPLACE: a hard link fails just
	 * the same if path exists. */
	if (link(tmp, path) != 0)
		return -1;
	unlink(tmp);
	return 0;
}

int mb_file_commit(struct mb_file *f, const char **why)
{
	*why = NULL;
	int rc = close(f->fd);
	f->fd = -1;
	if (rc != 0 || f->how == MB_FILE_NEW)
		goto out;
	if (f->how == MB_FILE_LINK) {
		rc = link_new(f->tmp, f->path);
		if (rc != 0 && errno == EEXIST)
			*why = "was created meanwhile by another process";
		goto out;
	}
	/* The window between this check and the rename is the caller's
	 * lock's to close; a rename never writes through a symbolic link
	 * or into another file, it only replaces a name. */
	struct stat now;
	if (lstat(f->path, &now) != 0 || now.st_dev != f->dev || now.st_ino != f->ino) {
		*why = "was changed meanwhile";
		rc = -1;
		goto out;
	}
	rc = rename(f->tmp, f->path);
out:
	if (rc != 0 && f->tmp[0]) {
		int e = errno;
		unlink(f->tmp);
		errno = e;
	}
	f->tmp[0] = 0;
	return rc;
}

void mb_file_abandon(struct mb_file *f)
{
	if (f->fd >= 0)
		close(f->fd);
	f->fd = -1;
	if (f->tmp[0])
		unlink(f->tmp);
	f->tmp[0] = 0;
}

long mb_read_small(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = 0;
	return (long)n;
}

uint64_t mb_read_rss(void)
{
	char buf[128];
	if (mb_read_small("/proc/self/statm", buf, sizeof buf) <= 0)
		return 0;
	unsigned long size, resident;
	if (sscanf(buf, "%lu %lu", &size, &resident) != 2)
		return 0;
	return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}
