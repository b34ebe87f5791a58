/* Safe file creation (out.h): new files are 0600 and never made through a
 * symbolic link; a replacement only lands if the path still names the file
 * that was checked, or, for a new file, if nothing appeared there
 * meanwhile; the temporary file never stays behind; only regular files are
 * opened for reading, without blocking. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
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
