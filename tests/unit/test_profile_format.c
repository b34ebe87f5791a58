/* The text of a profile (profile_format.c): what the writers produce, the
 * walker reads back the same, line by line, with each line's section
 * (ours or another program's); version 1 files; and every malformed line
 * refused with its line number. */
#include "config.h"
#include "harness.h"
#include "profile_format.h"

#include <limits.h>
#include <sys/mman.h>

#define MAXLINES 64

/* ---- writing into memory ---- */

static struct mb_out out;
static int out_fd = -1;
static char text[3 * PATH_MAX + 4096];
static size_t text_len;

static void begin(void)
{
	out_fd = memfd_create("profile", MFD_CLOEXEC);
	ASSERT_GE(out_fd, 0);
	mb_out_init(&out, out_fd);
}

static const char *end(void)
{
	ASSERT_EQ(mb_out_flush(&out), 0);
	ssize_t n = pread(out_fd, text, sizeof text - 1, 0);
	ASSERT_GE(n, 0);
	ASSERT_LT(n, (ssize_t)sizeof text - 1);
	text[n] = 0;
	text_len = (size_t)n;
	close(out_fd);
	return text;
}

/* ---- reading back ---- */

struct seen {
	unsigned n;
	struct mb_profile_line l[MAXLINES];
	int ours[MAXLINES];
};

static void collect(const struct mb_profile_line *l, int ours, void *arg)
{
	struct seen *s = arg;
	ASSERT_LT(s->n, MAXLINES);
	s->l[s->n] = *l;
	s->ours[s->n] = ours;
	s->n++;
}

/* Walk text as program exe, which must be a valid profile. */
static void walk(const char *t, uint64_t exe, struct seen *s)
{
	unsigned lineno = 0;
	memset(s, 0, sizeof *s);
	const char *why = mb_profile_walk(t, strlen(t), exe, &lineno, collect, s);
	if (why)
		FAIL("not a profile: %s, line %u, in:\n%s", why, lineno, t);
	ASSERT_EQ(lineno, s->n + 1); /* every line after the first was given */
}

static void assert_site(const struct mb_profile_entry *a, const struct mb_profile_entry *b)
{
	ASSERT_EQ(a->key, b->key);
	ASSERT_EQ(a->type, b->type);
	ASSERT_EQ(a->wrapper, b->wrapper);
	ASSERT_EQ(a->n_short, b->n_short);
	ASSERT_EQ(a->n_medium, b->n_medium);
	ASSERT_EQ(a->n_old, b->n_old);
	ASSERT_EQ(a->mean_lifetime, b->mean_lifetime);
}

/* The path of a module or exe line, up to the line's end. */
static int path_is(const struct mb_profile_line *l, const char *path)
{
	const char *p = l->kind == MB_PROFILE_MODULE ? l->path : strchr(strchr(l->start, ' ') + 1, ' ') + 1;
	return (size_t)(l->end - p) == strlen(path) && memcmp(p, path, strlen(path)) == 0;
}

static const struct mb_profile_entry sites[] = {
	{ 0x1, 0, 0, 0, 0, 0, 0 },
	{ 0xfedcba9876543210ULL, 1, 1, 3, 2, 1, 123456789 },
	{ UINT64_MAX, 2, 0, INT32_MAX, INT32_MAX, INT32_MAX, UINT64_MAX },
};

TEST(round_trip)
{
	begin();
	mb_profile_write_start(&out, 0xabc, "/usr/bin/prog");
	for (size_t i = 0; i < sizeof sites / sizeof sites[0]; i++)
		mb_profile_write_site(&out, &sites[i]);
	mb_profile_write_module(&out, 4096, 1700000000, "/usr/lib/libc.so.6");
	mb_profile_write_module(&out, UINT64_MAX, 0, "/opt/a b/lib x.so");
	const char *t = end();
	ASSERT_EQ(strncmp(t, MB_PROFILE_MAGIC "\n", strlen(MB_PROFILE_MAGIC) + 1), 0);

	struct seen s;
	walk(t, 0xabc, &s);
	unsigned i = 0;
	while (s.l[i].kind == MB_PROFILE_COMMENT) {
		ASSERT_EQ(*s.l[i].start, '#');
		ASSERT_EQ(*s.l[i].end, '\n');
		i++;
	}
	ASSERT_EQ(s.l[i].kind, MB_PROFILE_EXE);
	ASSERT_EQ(s.l[i].exe, 0xabc);
	ASSERT(path_is(&s.l[i], "/usr/bin/prog"));
	ASSERT(s.ours[i]);
	i++;
	for (size_t k = 0; k < sizeof sites / sizeof sites[0]; k++, i++) {
		ASSERT_EQ(s.l[i].kind, MB_PROFILE_SITE);
		assert_site(&s.l[i].site, &sites[k]);
		ASSERT(s.ours[i]);
	}
	ASSERT_EQ(s.l[i].kind, MB_PROFILE_MODULE);
	ASSERT_EQ(s.l[i].size, 4096);
	ASSERT_EQ(s.l[i].mtime, 1700000000);
	ASSERT(path_is(&s.l[i], "/usr/lib/libc.so.6"));
	i++;
	ASSERT_EQ(s.l[i].size, UINT64_MAX);
	ASSERT_EQ(s.l[i].mtime, 0);
	ASSERT(path_is(&s.l[i], "/opt/a b/lib x.so"));
	ASSERT(s.ours[i]);
	ASSERT_EQ(i + 1, s.n);

	/* Another program reads the same file: nothing of it is its own. */
	walk(t, 0xabd, &s);
	for (i = 0; i < s.n; i++)
		ASSERT(!s.ours[i]);
	/* Without a callback the file is only checked. */
	unsigned lineno;
	ASSERT_EQ(mb_profile_walk(t, text_len, 0xabc, &lineno, NULL, NULL), NULL);
}

/* Paths as long as the system allows come back whole. */
TEST(long_paths)
{
	static char exe[PATH_MAX], lib[PATH_MAX];
	memset(exe, 'e', sizeof exe - 1);
	memset(lib, 'l', sizeof lib - 1);
	exe[0] = lib[0] = '/';
	begin();
	mb_profile_write_start(&out, 7, exe);
	mb_profile_write_site(&out, &sites[1]);
	mb_profile_write_module(&out, 1, 2, lib);
	mb_profile_write_module(&out, 3, 4, "/lib/after");
	struct seen s;
	walk(end(), 7, &s);
	ASSERT_EQ(s.n, 7);
	ASSERT_EQ(s.l[3].kind, MB_PROFILE_EXE);
	ASSERT(path_is(&s.l[3], exe));
	ASSERT_EQ(s.l[4].kind, MB_PROFILE_SITE);
	assert_site(&s.l[4].site, &sites[1]);
	ASSERT_EQ(s.l[5].kind, MB_PROFILE_MODULE);
	ASSERT(path_is(&s.l[5], lib));
	ASSERT(path_is(&s.l[6], "/lib/after"));
}

/* Sections: each exe line opens the section of one program; comments
 * belong to the section they are in. */
TEST(sections)
{
	const char *t = MB_PROFILE_MAGIC "\n"
				"# a comment\n"
				"exe 1 /bin/one\n"
				"site 10 0 0 1 0 0 5\n"
				"# in one\n"
				"exe 2 /bin/two\n"
				"site 20 2 0 0 1 0 7\n"
				"module 1 2 /lib/two.so\n"
				"exe 1 /bin/one-again\n"
				"site 11 1 1 0 0 1 9\n";
	static const int ours1[] = { 0, 1, 1, 1, 0, 0, 0, 1, 1 }, ours2[] = { 0, 0, 0, 0, 1, 1, 1, 0, 0 };
	struct seen s;
	walk(t, 1, &s);
	ASSERT_EQ(s.n, 9);
	for (unsigned i = 0; i < s.n; i++)
		ASSERT_EQ(s.ours[i], ours1[i]);
	walk(t, 2, &s);
	for (unsigned i = 0; i < s.n; i++)
		ASSERT_EQ(s.ours[i], ours2[i]);
	ASSERT_EQ(s.l[5].site.key, 0x20);
	ASSERT_EQ(s.l[5].site.type, 2);
	ASSERT_EQ(s.l[5].site.n_medium, 1);
	ASSERT_EQ(s.l[5].site.mean_lifetime, 7);
	walk(t, 3, &s);
	for (unsigned i = 0; i < s.n; i++)
		ASSERT_EQ(s.ours[i], 0);
}

/* Version 1: no exe lines, every line is the reading program's. */
TEST(version_1)
{
	const char *t = MB_PROFILE_MAGIC_V1 "\n"
					"# old\n"
					"site 10 0 0 1 0 0 5\n"
					"module 1 2 /lib/x.so\n";
	struct seen s;
	walk(t, 42, &s);
	ASSERT_EQ(s.n, 3);
	for (unsigned i = 0; i < s.n; i++)
		ASSERT(s.ours[i]);
	ASSERT_EQ(s.l[1].kind, MB_PROFILE_SITE);
	ASSERT_EQ(s.l[2].kind, MB_PROFILE_MODULE);
}

struct bad {
	const char *text;
	unsigned line;
	const char *why;
};

#define V2 MB_PROFILE_MAGIC "\n"
#define EXE "exe 1 /p\n"
static const struct bad bad[] = {
	{ "", 1, "does not start with" },
	{ "libmbuddy-profile 3\n", 1, "does not start with" },
	{ MB_PROFILE_MAGIC, 1, "does not start with" },
	{ MB_PROFILE_MAGIC " \n", 1, "does not start with" },
	{ " " V2, 1, "does not start with" },
	{ V2 EXE "site 1 0 0 0 0 0 0", 3, "last line is truncated" },
	{ V2 "site 1 0 0 0 0 0 0\n", 2, "before the first exe line" },
	{ V2 "module 1 2 /x\n", 2, "before the first exe line" },
	{ V2 "\n", 2, "unknown line" },
	{ V2 EXE "sites 1 0 0 0 0 0 0\n", 3, "unknown line" },
	{ V2 EXE "site\n", 3, "unknown line" },
	{ V2 EXE "Site 1 0 0 0 0 0 0\n", 3, "unknown line" },
	{ V2 EXE "# fine\n\n", 4, "unknown line" },
	{ MB_PROFILE_MAGIC_V1 "\n" EXE, 2, "unknown line" },
	/* site lines: <key> <type> <wrapper> <short> <medium> <old> <lifetime> */
	{ V2 EXE "site 0 0 0 0 0 0 0\n", 3, "site line is malformed" },              /* key 0 */
	{ V2 EXE "site 11111111111111111 0 0 0 0 0 0\n", 3, "site line is malformed" }, /* 17 digits */
	{ V2 EXE "site AB 0 0 0 0 0 0\n", 3, "site line is malformed" },             /* upper case */
	{ V2 EXE "site 1 3 0 0 0 0 0\n", 3, "site line is malformed" },              /* type */
	{ V2 EXE "site 1 0 2 0 0 0 0\n", 3, "site line is malformed" },              /* wrapper */
	{ V2 EXE "site 1 0 0 2147483648 0 0 0\n", 3, "site line is malformed" },
	{ V2 EXE "site 1 0 0 0 2147483648 0 0\n", 3, "site line is malformed" },
	{ V2 EXE "site 1 0 0 0 0 2147483648 0\n", 3, "site line is malformed" },
	{ V2 EXE "site 1 0 0 0 0 0 18446744073709551616\n", 3, "site line is malformed" },
	{ V2 EXE "site 1 0 0 -1 0 0 0\n", 3, "site line is malformed" },
	{ V2 EXE "site 1 0 0 0 0 0\n", 3, "site line is malformed" },
	{ V2 EXE "site 1 0 0 0 0 0 0 \n", 3, "site line is malformed" },
	{ V2 EXE "site 1 0 0 0 0 0 0 0\n", 3, "site line is malformed" },
	{ V2 EXE "site  1 0 0 0 0 0 0\n", 3, "site line is malformed" },
	{ V2 EXE "site 1 0 0 0 0 0 7x\n", 3, "site line is malformed" },
	/* module lines: <size> <mtime> <path> */
	{ V2 EXE "module 1 2\n", 3, "module line is malformed" },
	{ V2 EXE "module x 2 /p\n", 3, "module line is malformed" },
	{ V2 EXE "module 1 18446744073709551616 /p\n", 3, "module line is malformed" },
	/* exe lines: <id> <path> */
	{ V2 "exe 1\n", 2, "exe line is malformed" },
	{ V2 "exe 1 \n", 2, "exe line is malformed" },
	{ V2 "exe g /p\n", 2, "exe line is malformed" },
	{ V2 "exe 11111111111111111 /p\n", 2, "exe line is malformed" },
};

TEST(malformed_profiles)
{
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		unsigned lineno = 0;
		struct seen s = { 0 };
		const char *why = mb_profile_walk(bad[i].text, strlen(bad[i].text), 1, &lineno, collect, &s);
		if (!why || !strstr(why, bad[i].why) || lineno != bad[i].line)
			FAIL("profile %zu:\n%s\ngave \"%s\" at line %u; want \"%s\" at line %u", i, bad[i].text,
			     why ? why : "(valid)", lineno, bad[i].why, bad[i].line);
	}
	/* A NUL byte inside the text. */
	const char t[] = V2 EXE "site 1 0 0 0 0 0 0\n\0site 2 0 0 0 0 0 0\n";
	unsigned lineno = 0;
	const char *why = mb_profile_walk(t, sizeof t - 1, 1, &lineno, NULL, NULL);
	ASSERT_NE(why, NULL);
	ASSERT_CONTAINS(why, "NUL byte");
	/* The limits themselves are valid. */
	const char *ok = V2 "exe ffffffffffffffff /p\n"
			    "site ffffffffffffffff 2 1 2147483647 2147483647 2147483647 18446744073709551615\n"
			    "module 18446744073709551615 18446744073709551615 /p q\n";
	struct seen s;
	walk(ok, UINT64_MAX, &s);
	ASSERT_EQ(s.n, 3);
	ASSERT(s.ours[1]);
}
