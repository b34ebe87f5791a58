/* Output (out.c): the buffered writer keeps every byte in order whatever
 * the buffer holds, JSON strings are escaped and always valid UTF-8, and
 * safe file creation: new files are 0600 and never made through a
 * symbolic link; a replacement only lands if the path still names the file
 * that was checked, or, for a new file, if nothing appeared there
 * meanwhile; the temporary file never stays behind; only regular files are
 * opened for reading, without blocking. */
#include "config.h"

#include <dirent.h>
#include <signal.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "out.h"
#include "harness.h"

static char dir[] = "/tmp/mbuddy-test-out.XXXXXX";
static char path[PATH_MAX], other[PATH_MAX];

static void put(const char *p, const char *text)
{
	FILE *f = fopen(p, "w");
	ASSERT(f && fputs(text, f) >= 0 && fclose(f) == 0);
}

static int holds(const char *p, const char *text)
{
	char buf[256] = "";
	FILE *f = fopen(p, "r");
	if (!f)
		return 0;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	return strcmp(buf, text) == 0;
}

/* Entries of dir, not counting . and .. */
static int entries(void)
{
	DIR *d = opendir(dir);
	int n = 0;
	for (struct dirent *e; (e = readdir(d));)
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n;
}

static void remove_dir(void)
{
	rmdir(dir);
}

/* Each test of files starts in the test directory, made by the first,
 * empty, and leaves it empty. */
static void use_dir(void)
{
	if (!path[0]) {
		ASSERT_NE(mkdtemp(dir), NULL);
		atexit(remove_dir);
		snprintf(path, sizeof path, "%s/file", dir);
		snprintf(other, sizeof other, "%s/other", dir);
	}
	ASSERT_EQ(entries(), 0);
}

static void write_all(int fd, const char *text)
{
	ASSERT_EQ(write(fd, text, strlen(text)), (ssize_t)strlen(text));
}

TEST(writer)
{
	int fds[2];
	ASSERT_EQ(pipe(fds), 0);
	struct mb_out o;
	mb_out_init(&o, fds[1]);
	mb_out_str(&o, "a");
	mb_out_fmt(&o, "%d", 42);
	mb_out_json_str(&o, "q\"\x01\xff");
	ASSERT_EQ(mb_out_flush(&o), 0);
	char buf[64] = "";
	ASSERT_GT(read(fds[0], buf, sizeof buf - 1), 0);
	ASSERT_STR_EQ(buf, "a42\"q\\\"\\u0001\\ufffd\"");
	close(fds[0]);
	close(fds[1]);
}

/* ---- the writer, into memory ---- */

static struct mb_out wo;
static int wfd = -1;
static char got[262144];

static void wbegin(void)
{
	wfd = memfd_create("out", MFD_CLOEXEC);
	ASSERT_GE(wfd, 0);
	mb_out_init(&wo, wfd);
}

/* What was written, NUL-terminated; *len (if not NULL) its length. */
static const char *wend(size_t *len)
{
	ASSERT_EQ(mb_out_flush(&wo), 0);
	ssize_t n = pread(wfd, got, sizeof got - 1, 0);
	ASSERT_GE(n, 0);
	got[n] = 0;
	close(wfd);
	ASSERT_EQ(wo.total, (size_t)n);
	if (len)
		*len = (size_t)n;
	return got;
}

/* Formatted and plain output longer than the buffer, and formatted lines
 * up to a path's length at every fill level of the buffer, arrive whole
 * and in order. */
TEST(writer_keeps_everything)
{
	static char path_max[PATH_MAX], expect[sizeof got];
	memset(path_max, 'p', sizeof path_max - 1);
	size_t at = 0;
	wbegin();
	for (unsigned i = 0; i < 24; i++) {
		/* Every third line with a path of PATH_MAX - 1 bytes. */
		const char *p = path_max + (i % 3 == 0 ? 0 : sizeof path_max - 1 - (i * 577) % (sizeof path_max - 1));
		char line[sizeof path_max + 64];
		int n = snprintf(line, sizeof line, "%u %s\n", i, p);
		mb_out_fmt(&wo, "%u %s\n", i, p);
		memcpy(expect + at, line, (size_t)n);
		at += (size_t)n;
	}
	static char big[3 * sizeof wo.buf + 5];
	for (size_t i = 0; i < sizeof big - 1; i++)
		big[i] = (char)('a' + i % 26);
	mb_out_str(&wo, big);
	memcpy(expect + at, big, sizeof big - 1);
	at += sizeof big - 1;
	size_t len;
	const char *t = wend(&len);
	ASSERT_EQ(len, at);
	ASSERT_EQ(memcmp(t, expect, at), 0);
}

/* Only output longer than the whole buffer is cut (to the buffer). */
TEST(writer_cuts_only_beyond_its_buffer)
{
	static char huge[2 * sizeof wo.buf];
	memset(huge, 'h', sizeof huge - 1);
	wbegin();
	mb_out_str(&wo, "x");
	mb_out_fmt(&wo, "%s", huge);
	size_t len;
	const char *t = wend(&len);
	ASSERT_EQ(len, sizeof wo.buf);
	ASSERT_EQ(t[0], 'x');
	ASSERT_EQ(strspn(t + 1, "h"), sizeof wo.buf - 1);
}

/* A write that fails is reported by every later flush. */
TEST(writer_reports_failure)
{
	int fds[2];
	ASSERT_EQ(pipe(fds), 0);
	close(fds[0]);
	signal(SIGPIPE, SIG_IGN);
	struct mb_out o;
	mb_out_init(&o, fds[1]);
	mb_out_str(&o, "lost");
	ASSERT_EQ(mb_out_flush(&o), -1);
	mb_out_fmt(&o, "%d", 1);
	ASSERT_EQ(mb_out_flush(&o), -1);
	close(fds[1]);
}

static const char *json(const char *s)
{
	wbegin();
	mb_out_json_str(&wo, s);
	return wend(NULL);
}

TEST(json_escapes)
{
	ASSERT_STR_EQ(json(""), "\"\"");
	ASSERT_STR_EQ(json("a\"b\\c/d"), "\"a\\\"b\\\\c/d\"");
	for (int c = 1; c < 0x20; c++) {
		char in[2] = { (char)c, 0 }, want[16];
		snprintf(want, sizeof want, "\"\\u%04x\"", c);
		ASSERT_STR_EQ(json(in), want);
	}
	ASSERT_STR_EQ(json("\x7f"), "\"\x7f\"");
}

/* Valid UTF-8 passes as it is: 2, 3 and 4 bytes, the ends of each range. */
TEST(json_valid_utf8)
{
	static const char *const ok[] = {
		"\xc2\x80",         /* U+0080 */
		"caf\xc3\xa9",      /* é */
		"\xdf\xbf",         /* U+07FF */
		"\xe0\xa0\x80",     /* U+0800 */
		"\xe2\x82\xac",     /* € */
		"\xed\x9f\xbf",     /* U+D7FF, below the surrogates */
		"\xee\x80\x80",     /* U+E000, above them */
		"\xef\xbf\xbf",     /* U+FFFF */
		"\xf0\x90\x80\x80", /* U+10000 */
		"\xf0\x9f\x98\x80", /* 😀 */
		"\xf4\x8f\xbf\xbf", /* U+10FFFF, the last */
	};
	for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
		char want[32];
		snprintf(want, sizeof want, "\"%s\"", ok[i]);
		ASSERT_STR_EQ(json(ok[i]), want);
	}
}

/* Every byte that is not part of valid UTF-8 becomes U+FFFD, so that a
 * report naming a file with such bytes stays valid JSON: stray and
 * truncated sequences, overlong forms, surrogates, and code points above
 * U+10FFFF. */
TEST(json_invalid_utf8)
{
	static const struct {
		const char *in;
		int bad; /* bytes replaced */
	} cases[] = {
		{ "\x80", 1 },             /* a continuation byte alone */
		{ "\xbf\xbf", 2 },
		{ "\xc0\x80", 2 },         /* overlong NUL */
		{ "\xc1\xbf", 2 },         /* overlong U+007F */
		{ "\xe0\x80\x80", 3 },     /* overlong U+0000 */
		{ "\xe0\x9f\xbf", 3 },     /* overlong U+07FF */
		{ "\xed\xa0\x80", 3 },     /* U+D800, a surrogate */
		{ "\xed\xbf\xbf", 3 },     /* U+DFFF */
		{ "\xf0\x80\x80\x80", 4 }, /* overlong U+0000 */
		{ "\xf0\x8f\xbf\xbf", 4 }, /* overlong U+FFFF */
		{ "\xf4\x90\x80\x80", 4 }, /* U+110000 */
		{ "\xf5\x80\x80\x80", 4 },
		{ "\xff", 1 },
		{ "\xe2\x82", 2 },         /* truncated by the end */
		{ "\xf0\x9f\x98", 3 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		char want[64] = "\"";
		for (int k = 0; k < cases[i].bad; k++)
			strcat(want, "\\ufffd");
		strcat(want, "\"");
		const char *j = json(cases[i].in);
		if (strcmp(j, want) != 0)
			FAIL("case %zu: %s, want %s", i, j, want);
	}
	/* Between valid characters, only the bad bytes go. */
	ASSERT_STR_EQ(json("a\xe0\x80\x80\xc3\xa9z"), "\"a\\ufffd\\ufffd\\ufffd\xc3\xa9z\"");
}

TEST(create)
{
	use_dir();
	struct mb_file f;
	mode_t old = umask(0);
	int fd = mb_file_create(&f, path);
	umask(old);
	ASSERT_GE(fd, 0);
	write_all(fd, "one");
	const char *why;
	ASSERT_EQ(mb_file_commit(&f, &why), 0);
	struct stat st;
	ASSERT(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
	/* Never over an existing file, nor through a symbolic link. */
	ASSERT(mb_file_create(&f, path) < 0 && errno == EEXIST);
	ASSERT_EQ(symlink(path, other), 0);
	ASSERT(mb_file_create(&f, other) < 0 && errno == EEXIST);
	ASSERT(holds(path, "one"));
	unlink(other);
	unlink(path);
	ASSERT_EQ(entries(), 0);
}

TEST(replace)
{
	use_dir();
	put(path, "old");
	chmod(path, 0640);
	struct stat st;
	const char *why;
	int fd = mb_file_open_regular(path, 0, &st, &why);
	ASSERT_GE(fd, 0);
	close(fd);
	ASSERT(mb_file_may_replace(&st, &why));
	struct mb_file f;
	fd = mb_file_replace(&f, path, &st, st.st_mode);
	ASSERT_GE(fd, 0);
	write_all(fd, "new");
	ASSERT(holds(path, "old")); /* nothing visible before the commit */
	ASSERT_EQ(mb_file_commit(&f, &why), 0);
	ASSERT(holds(path, "new"));
	struct stat now;
	ASSERT(stat(path, &now) == 0 && (now.st_mode & 0777) == 0640);
	ASSERT_EQ(entries(), 1);

	/* The path changed between the check and the commit: kept. */
	ASSERT_EQ(stat(path, &st), 0);
	fd = mb_file_replace(&f, path, &st, 0600);
	ASSERT_GE(fd, 0);
	write_all(fd, "mine");
	put(other, "theirs");
	ASSERT_EQ(rename(other, path), 0);
	ASSERT(mb_file_commit(&f, &why) != 0 && why != NULL);
	ASSERT(holds(path, "theirs"));
	ASSERT_EQ(entries(), 1);

	/* Abandoned: the path is untouched, nothing left behind. */
	fd = mb_file_replace(&f, path, &st, 0600);
	ASSERT_GE(fd, 0);
	mb_file_abandon(&f);
	ASSERT(holds(path, "theirs") && entries() == 1);
	unlink(path);
	ASSERT_EQ(entries(), 0);
}

TEST(replace_missing)
{
	use_dir();
	struct mb_file f;
	const char *why;
	int fd = mb_file_replace(&f, path, NULL, 0600);
	ASSERT_GE(fd, 0);
	write_all(fd, "first");
	ASSERT(mb_file_commit(&f, &why) == 0 && holds(path, "first"));
	/* Created meanwhile by someone else: not replaced. */
	unlink(path);
	fd = mb_file_replace(&f, path, NULL, 0600);
	ASSERT_GE(fd, 0);
	write_all(fd, "late");
	put(path, "early");
	ASSERT(mb_file_commit(&f, &why) != 0 && errno == EEXIST && why != NULL);
	ASSERT(holds(path, "early") && entries() == 1);
	unlink(path);
	ASSERT_EQ(entries(), 0);
}

TEST(open_regular)
{
	use_dir();
	struct stat st;
	const char *why;
	ASSERT_EQ(mkfifo(path, 0600), 0);
	ASSERT(mb_file_open_regular(path, 1, &st, &why) < 0 && why && strstr(why, "FIFO"));
	unlink(path);
	put(other, "x");
	ASSERT_EQ(symlink(other, path), 0);
	ASSERT(mb_file_open_regular(path, 0, &st, &why) < 0 && why && strstr(why, "symbolic link"));
	int fd = mb_file_open_regular(path, 1, &st, &why);
	ASSERT_GE(fd, 0);
	close(fd);
	unlink(path);
	ASSERT(mb_file_open_regular(path, 1, &st, &why) < 0 && errno == ENOENT && why == NULL);
	/* Read-only and foreign files are not replaced. */
	ASSERT_EQ(stat(other, &st), 0);
	st.st_mode &= ~(mode_t)S_IWUSR;
	ASSERT(!mb_file_may_replace(&st, &why) && strstr(why, "read-only"));
	st.st_mode |= S_IWUSR;
	st.st_uid = geteuid() + 1;
	ASSERT(!mb_file_may_replace(&st, &why) && strstr(why, "another user"));
	unlink(other);
	ASSERT_EQ(entries(), 0);
}
