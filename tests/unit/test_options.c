/* The MBUDDY_* variables (options.c): every variable's valid values, and
 * for every kind of bad value one warning on stderr, in the documented
 * form (libmbuddy(3), ENVIRONMENT), with the default kept. The options are
 * read once per process, so each case runs mb_options_init() in a child
 * process of its own (twice: a problem is reported once), with only the
 * variables of the case in its environment. Also mb_parse_size() and
 * mb_warn(). */
#include "config.h"
#include "harness.h"

#include <limits.h>
#include <signal.h>
#include <unistd.h>

/* The system's page size as the library sees it: the real one unless a
 * case sets fake_page (as on systems with 64 KiB or larger pages). */
static long fake_page;
long __sysconf(int name);
long sysconf(int name)
{
	return name == _SC_PAGESIZE && fake_page ? fake_page : __sysconf(name);
}

#define KiB ((uint64_t)1 << 10)
#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)
#define TiB ((uint64_t)1 << 40)

/* ---- one case: variables set, one field read ---- */

/* The fields, as numbers (a string field: 1 if set, 0 if NULL). */
enum field {
	HEAP_SIZE, MAX_ORDER, CLASSIFY, STATS_FD, STATS_FORMAT, STATS_SIGNAL, STATS_PID, DECAY_MS, CHECK_,
	BACKGROUND, STATS, JSON_FILE, RULES, PROFILE, HUGEPAGES,
};

static uint64_t field(enum field f)
{
	switch (f) {
	case HEAP_SIZE: return mb_opt.heap_size;
	case MAX_ORDER: return mb_opt.max_order;
	case CLASSIFY: return (uint64_t)mb_opt.classify;
	case STATS_FD: return (uint64_t)(int64_t)mb_opt.stats_fd;
	case STATS_FORMAT: return (uint64_t)mb_opt.stats_format;
	case STATS_SIGNAL: return (uint64_t)mb_opt.stats_signal;
	case STATS_PID: return (uint64_t)mb_opt.stats_pid;
	case DECAY_MS: return mb_opt.decay_ms;
	case CHECK_: return (uint64_t)mb_opt.check;
	case BACKGROUND: return (uint64_t)mb_opt.background;
	case STATS: return mb_opt.stats != NULL;
	case JSON_FILE: return mb_opt.stats_json_file != NULL;
	case RULES: return mb_opt.rules != NULL;
	case PROFILE: return mb_opt.profile != NULL;
	case HUGEPAGES: return (uint64_t)mb_opt.hugepages;
	}
	return 0;
}

struct opt_case {
	const char *env[3][2]; /* up to three variables and their values */
	enum field field;
	uint64_t want;
	const char *warn;      /* NULL: no warning; else part of the one warning */
	long page;             /* the system's page size, if not the real one */
};

/* Only the case's variables in the environment. */
static void set_env(const char *const env[][2], size_t n)
{
	extern char **environ;
	for (int again = 1; again;) {
		again = 0;
		for (char **e = environ; *e; e++)
			if (strncmp(*e, "MBUDDY_", 7) == 0) {
				char name[256];
				size_t len = strcspn(*e, "=");
				snprintf(name, sizeof name, "%.*s", (int)len, *e);
				unsetenv(name);
				again = 1;
				break;
			}
	}
	for (size_t i = 0; i < n && env[i][0]; i++)
		ASSERT_EQ(setenv(env[i][0], env[i][1], 1), 0);
}

static void child(void *arg)
{
	const struct opt_case *c = arg;
	set_env(c->env, 3);
	fake_page = c->page;
	mb_options_init();
	mb_options_init(); /* reads nothing again, reports nothing again */
	uint64_t got = field(c->field);
	if (got != c->want)
		FAIL("field %d is %" PRIu64 " (%#" PRIx64 "), want %" PRIu64 " (%#" PRIx64 ")", c->field, got, got,
		     c->want, c->want);
}

static void run_case(const struct opt_case *c)
{
	struct test_child out;
	test_child_run(&out, child, (void *)c);
	if (out.status != 0)
		FAIL("%s=\"%.60s\": the child failed (status %d):\n%s", c->env[0][0], c->env[0][1], out.status, out.out);
	unsigned warnings = test_count_lines(out.out, "libmbuddy: ");
	if (!c->warn && warnings)
		FAIL("%s=\"%.60s\": unexpected warning:\n%s", c->env[0][0], c->env[0][1], out.out);
	if (!c->warn)
		return;
	if (warnings != 1)
		FAIL("%s=\"%.60s\": %u warnings, want one containing \"%s\":\n%s", c->env[0][0], c->env[0][1], warnings,
		     c->warn, out.out);
	if (!strstr(out.out, c->warn))
		FAIL("%s=\"%.60s\": the warning does not say \"%s\":\n%s", c->env[0][0], c->env[0][1], c->warn, out.out);
	/* One line, starting with the prefix, ending with its newline. */
	ASSERT_EQ(strncmp(out.out, "libmbuddy: ", 11), 0);
	ASSERT_EQ(strchr(out.out, '\n'), out.out + strlen(out.out) - 1);
}

static void run_cases(const struct opt_case *c, size_t n)
{
	for (size_t i = 0; i < n; i++)
		run_case(&c[i]);
}

#define RUN_CASES(cases) run_cases(cases, sizeof cases / sizeof cases[0])

/* ---- the defaults ---- */

TEST(defaults)
{
	/* As in libmbuddy(3); an empty value is the same as none. */
	static const struct opt_case cases[] = {
		{ { { NULL } }, HEAP_SIZE, 64 * GiB, NULL, 0 },
		{ { { NULL } }, MAX_ORDER, 11, NULL, 0 },
		{ { { NULL } }, CLASSIFY, 1, NULL, 0 },
		{ { { NULL } }, STATS, 0, NULL, 0 },
		{ { { NULL } }, STATS_FD, (uint64_t)-1, NULL, 0 },
		{ { { NULL } }, STATS_FORMAT, MB_STATS_TEXT, NULL, 0 },
		{ { { NULL } }, JSON_FILE, 0, NULL, 0 },
		{ { { NULL } }, STATS_PID, 0, NULL, 0 },
		{ { { NULL } }, STATS_SIGNAL, 0, NULL, 0 },
		{ { { NULL } }, DECAY_MS, 100, NULL, 0 },
		{ { { NULL } }, CHECK_, 0, NULL, 0 },
		{ { { NULL } }, BACKGROUND, 1, NULL, 0 },
		{ { { NULL } }, RULES, 0, NULL, 0 },
		{ { { NULL } }, PROFILE, 0, NULL, 0 },
		{ { { "MBUDDY_HEAP_SIZE", "" } }, HEAP_SIZE, 64 * GiB, NULL, 0 },
		{ { { "MBUDDY_MAX_ORDER", "" } }, MAX_ORDER, 11, NULL, 0 },
		{ { { "MBUDDY_DECAY_MS", "" } }, DECAY_MS, 100, NULL, 0 },
		{ { { "MBUDDY_STATS", "" } }, STATS, 0, NULL, 0 },
		{ { { "MBUDDY_STATS_SIGNAL", "" } }, STATS_SIGNAL, 0, NULL, 0 },
		{ { { "MBUDDY_PROFILE", "" } }, PROFILE, 0, NULL, 0 },
	};
	RUN_CASES(cases);
}

/* ---- sizes ---- */

struct size_case {
	const char *s;
	size_t want;       /* when valid */
	const char *why;   /* NULL when valid */
};

TEST(parse_size)
{
	static const struct size_case cases[] = {
		{ "0", 0, NULL },
		{ "123", 123, NULL },
		{ "268435456", 256 * MiB, NULL },
		{ "64K", 64 * KiB, NULL },
		{ "64k", 64 * KiB, NULL },
		{ "4M", 4 * MiB, NULL },
		{ "512m", 512 * MiB, NULL },
		{ "64G", 64 * GiB, NULL },
		{ "64GiB", 64 * GiB, NULL },
		{ "64Gi", 64 * GiB, NULL },
		{ "64GB", 64 * GiB, NULL },
		{ "64gib", 64 * GiB, NULL },
		{ "1T", TiB, NULL },
		{ "100B", 100, NULL },
		{ "16777215T", 16777215 * TiB, NULL },
		{ "", 0, "is not a number" },
		{ "G", 0, "is not a number" },
		{ " 1G", 0, "starts with a space" },
		{ "\t1G", 0, "starts with a space" },
		{ "+1G", 0, "has a sign" },
		{ "-1G", 0, "has a sign" },
		{ "1.5G", 0, "has characters after the number" },
		{ "1 G", 0, "has characters after the number" },
		{ "1Q", 0, "has characters after the number" },
		{ "1iB", 0, "has characters after the number" },
		{ "1G ", 0, "has characters after the unit" },
		{ "1GiBB", 0, "has characters after the unit" },
		{ "1GG", 0, "has characters after the unit" },
		{ "16777216T", 0, "is too large" },
		{ "18446744073709551615", SIZE_MAX, NULL },
		{ "18446744073709551616", 0, "is too large" },
		{ "99999999999999999999999", 0, "is too large" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		size_t v = 12345;
		const char *why = mb_parse_size(cases[i].s, &v);
		if (cases[i].why ? !why || !strstr(why, cases[i].why) : why || v != cases[i].want)
			FAIL("mb_parse_size(\"%s\") = \"%s\", %zu; want \"%s\", %zu", cases[i].s, why ? why : "(ok)", v,
			     cases[i].why ? cases[i].why : "(ok)", cases[i].want);
		if (why)
			ASSERT_EQ(v, 12345); /* untouched */
	}
}

TEST(heap_size)
{
	static const struct opt_case cases[] = {
		{ { { "MBUDDY_HEAP_SIZE", "512M" } }, HEAP_SIZE, 512 * MiB, NULL, 0 },
		{ { { "MBUDDY_HEAP_SIZE", "64GiB" } }, HEAP_SIZE, 64 * GiB, NULL, 0 },
		{ { { "MBUDDY_HEAP_SIZE", "1T" } }, HEAP_SIZE, TiB, NULL, 0 },
		{ { { "MBUDDY_HEAP_SIZE", "268435456" } }, HEAP_SIZE, 256 * MiB, NULL, 0 },
		{ { { "MBUDDY_HEAP_SIZE", "8M" } }, HEAP_SIZE, 8 * MiB, NULL, 0 },
		{ { { "MBUDDY_HEAP_SIZE", "8T" } }, HEAP_SIZE, 8 * TiB, NULL, 0 },
		/* Rounded down to whole pageblocks, silently. */
		{ { { "MBUDDY_HEAP_SIZE", "13M" } }, HEAP_SIZE, 12 * MiB, NULL, 0 },
		{ { { "MBUDDY_HEAP_SIZE", "9437185" } }, HEAP_SIZE, 8 * MiB, NULL, 0 },
		/* Below the minimum of two pageblocks, above 8 TiB: clamped. */
		{ { { "MBUDDY_HEAP_SIZE", "4M" } }, HEAP_SIZE, 8 * MiB,
		  "MBUDDY_HEAP_SIZE=\"4M\" is below the minimum of two pageblocks; using 8 MiB", 0 },
		{ { { "MBUDDY_HEAP_SIZE", "0" } }, HEAP_SIZE, 8 * MiB, "is below the minimum", 0 },
		{ { { "MBUDDY_HEAP_SIZE", "9T" } }, HEAP_SIZE, 8 * TiB,
		  "MBUDDY_HEAP_SIZE=\"9T\" is above the maximum of 8 TiB; using 8 TiB", 0 },
		/* Anything else: the default. */
		{ { { "MBUDDY_HEAP_SIZE", "1.5G" } }, HEAP_SIZE, 64 * GiB,
		  "MBUDDY_HEAP_SIZE=\"1.5G\" has characters after the number (a unit is K, M, G or T) (expected a size "
		  "such as 512M or 64G); using 64 GiB",
		  0 },
		{ { { "MBUDDY_HEAP_SIZE", "-1G" } }, HEAP_SIZE, 64 * GiB, "\"-1G\" has a sign", 0 },
		{ { { "MBUDDY_HEAP_SIZE", " 1G" } }, HEAP_SIZE, 64 * GiB, "starts with a space", 0 },
		{ { { "MBUDDY_HEAP_SIZE", "1G " } }, HEAP_SIZE, 64 * GiB, "has characters after the unit", 0 },
		{ { { "MBUDDY_HEAP_SIZE", "lots" } }, HEAP_SIZE, 64 * GiB, "is not a number", 0 },
		{ { { "MBUDDY_HEAP_SIZE", "99999999999999999999" } }, HEAP_SIZE, 64 * GiB, "is too large", 0 },
		/* The minimum and the rounding follow MBUDDY_MAX_ORDER. */
		{ { { "MBUDDY_MAX_ORDER", "6" }, { "MBUDDY_HEAP_SIZE", "300K" } }, HEAP_SIZE, 256 * KiB, NULL, 0 },
		{ { { "MBUDDY_MAX_ORDER", "6" }, { "MBUDDY_HEAP_SIZE", "100K" } }, HEAP_SIZE, 256 * KiB,
		  "MBUDDY_HEAP_SIZE=\"100K\" is below the minimum of two pageblocks; using 256 KiB", 0 },
		{ { { "MBUDDY_MAX_ORDER", "16" }, { "MBUDDY_HEAP_SIZE", "200M" } }, HEAP_SIZE, 256 * MiB,
		  "below the minimum of two pageblocks; using 256 MiB", 0 },
		{ { { "MBUDDY_MAX_ORDER", "16" }, { "MBUDDY_HEAP_SIZE", "500M" } }, HEAP_SIZE, 384 * MiB, NULL, 0 },
	};
	RUN_CASES(cases);
}

/* ---- numbers ---- */

TEST(max_order)
{
	static const struct opt_case cases[] = {
		{ { { "MBUDDY_MAX_ORDER", "6" } }, MAX_ORDER, 6, NULL, 0 },
		{ { { "MBUDDY_MAX_ORDER", "11" } }, MAX_ORDER, 11, NULL, 0 },
		{ { { "MBUDDY_MAX_ORDER", "16" } }, MAX_ORDER, 16, NULL, 0 },
		{ { { "MBUDDY_MAX_ORDER", "016" } }, MAX_ORDER, 16, NULL, 0 },
		{ { { "MBUDDY_MAX_ORDER", "5" } }, MAX_ORDER, 11,
		  "MBUDDY_MAX_ORDER=\"5\" is out of range (expected a number from 6 to 16); using 11", 0 },
		{ { { "MBUDDY_MAX_ORDER", "17" } }, MAX_ORDER, 11, "is out of range", 0 },
		{ { { "MBUDDY_MAX_ORDER", "+8" } }, MAX_ORDER, 11, "has a sign", 0 },
		{ { { "MBUDDY_MAX_ORDER", "8 " } }, MAX_ORDER, 11, "has characters after the number", 0 },
		{ { { "MBUDDY_MAX_ORDER", "eleven" } }, MAX_ORDER, 11, "is not a number", 0 },
		{ { { "MBUDDY_MAX_ORDER", "18446744073709551616" } }, MAX_ORDER, 11, "is too large", 0 },
		/* Pageblocks hold whole pages of the system: 256 KiB pages
		 * need MAX_ORDER 7 at least. */
		{ { { "MBUDDY_MAX_ORDER", "6" } }, MAX_ORDER, 7,
		  "MAX_ORDER 6 makes pageblocks smaller than this system's pages of 256 KiB; using 7", 256 * 1024 },
		{ { { NULL } }, MAX_ORDER, 11, NULL, 256 * 1024 },
		{ { { "MBUDDY_MAX_ORDER", "6" } }, MAX_ORDER, 6, NULL, 64 * 1024 },
	};
	RUN_CASES(cases);
}

TEST(decay_ms)
{
	static const struct opt_case cases[] = {
		{ { { "MBUDDY_DECAY_MS", "0" } }, DECAY_MS, 0, NULL, 0 },
		{ { { "MBUDDY_DECAY_MS", "250" } }, DECAY_MS, 250, NULL, 0 },
		{ { { "MBUDDY_DECAY_MS", "3600000" } }, DECAY_MS, 3600000, NULL, 0 },
		{ { { "MBUDDY_DECAY_MS", "3600001" } }, DECAY_MS, 100,
		  "MBUDDY_DECAY_MS=\"3600001\" is out of range (expected milliseconds from 0 to 3600000); using 100", 0 },
		{ { { "MBUDDY_DECAY_MS", "-1" } }, DECAY_MS, 100, "has a sign", 0 },
		{ { { "MBUDDY_DECAY_MS", "1e3" } }, DECAY_MS, 100, "has characters after the number", 0 },
		{ { { "MBUDDY_DECAY_MS", " 5" } }, DECAY_MS, 100, "starts with a space", 0 },
	};
	RUN_CASES(cases);
}

TEST(stats_pid)
{
	static const struct opt_case cases[] = {
		{ { { "MBUDDY_STATS_PID", "1" } }, STATS_PID, 1, NULL, 0 },
		{ { { "MBUDDY_STATS_PID", "2147483647" } }, STATS_PID, 2147483647, NULL, 0 },
		{ { { "MBUDDY_STATS_PID", "0" } }, STATS_PID, 0,
		  "MBUDDY_STATS_PID=\"0\" is out of range (expected a process id from 1 to 2147483647); using 0", 0 },
		{ { { "MBUDDY_STATS_PID", "2147483648" } }, STATS_PID, 0, "is out of range", 0 },
		{ { { "MBUDDY_STATS_PID", "-5" } }, STATS_PID, 0, "has a sign", 0 },
		{ { { "MBUDDY_STATS_PID", "$$" } }, STATS_PID, 0, "is not a number", 0 },
	};
	RUN_CASES(cases);
}

/* The two 0-or-1 variables name both values in their warning. */
TEST(switches)
{
	static const struct opt_case cases[] = {
		{ { { "MBUDDY_BACKGROUND", "0" } }, BACKGROUND, 0, NULL, 0 },
		{ { { "MBUDDY_BACKGROUND", "1" } }, BACKGROUND, 1, NULL, 0 },
		{ { { "MBUDDY_BACKGROUND", "2" } }, BACKGROUND, 1,
		  "MBUDDY_BACKGROUND=\"2\" is out of range (expected 0 or 1); using 1", 0 },
		{ { { "MBUDDY_BACKGROUND", "no" } }, BACKGROUND, 1, "is not a number (expected 0 or 1); using 1", 0 },
		{ { { "MBUDDY_CHECK", "1" } }, CHECK_, 1, NULL, 0 },
		{ { { "MBUDDY_CHECK", "0" } }, CHECK_, 0, NULL, 0 },
		{ { { "MBUDDY_CHECK", "yes" } }, CHECK_, 0,
		  "MBUDDY_CHECK=\"yes\" is not a number (expected 0 or 1); using 0", 0 },
		{ { { "MBUDDY_CHECK", "01x" } }, CHECK_, 0, "has characters after the number", 0 },
	};
	RUN_CASES(cases);
}

/* ---- words ---- */

TEST(classify_and_format)
{
	static const struct opt_case cases[] = {
		{ { { "MBUDDY_CLASSIFY", "auto" } }, CLASSIFY, 1, NULL, 0 },
		{ { { "MBUDDY_CLASSIFY", "ON" } }, CLASSIFY, 1, NULL, 0 },
		{ { { "MBUDDY_CLASSIFY", "1" } }, CLASSIFY, 1, NULL, 0 },
		{ { { "MBUDDY_CLASSIFY", "off" } }, CLASSIFY, 0, NULL, 0 },
		{ { { "MBUDDY_CLASSIFY", "Off" } }, CLASSIFY, 0, NULL, 0 },
		{ { { "MBUDDY_CLASSIFY", "0" } }, CLASSIFY, 0, NULL, 0 },
		{ { { "MBUDDY_CLASSIFY", "no" } }, CLASSIFY, 1,
		  "MBUDDY_CLASSIFY=\"no\" is not auto, on, 1, off or 0; using auto", 0 },
		{ { { "MBUDDY_CLASSIFY", "offf" } }, CLASSIFY, 1, "is not auto, on, 1, off or 0", 0 },
		{ { { "MBUDDY_STATS_FORMAT", "text" } }, STATS_FORMAT, MB_STATS_TEXT, NULL, 0 },
		{ { { "MBUDDY_STATS_FORMAT", "json" } }, STATS_FORMAT, MB_STATS_JSON, NULL, 0 },
		{ { { "MBUDDY_STATS_FORMAT", "JSON" } }, STATS_FORMAT, MB_STATS_JSON, NULL, 0 },
		{ { { "MBUDDY_STATS_FORMAT", "xml" } }, STATS_FORMAT, MB_STATS_TEXT,
		  "MBUDDY_STATS_FORMAT=\"xml\" is not text or json; using text", 0 },
		{ { { NULL } }, HUGEPAGES, MB_HUGE_AUTO, NULL, 0 },
		{ { { "MBUDDY_HUGEPAGES", "auto" } }, HUGEPAGES, MB_HUGE_AUTO, NULL, 0 },
		{ { { "MBUDDY_HUGEPAGES", "always" } }, HUGEPAGES, MB_HUGE_ALWAYS, NULL, 0 },
		{ { { "MBUDDY_HUGEPAGES", "Never" } }, HUGEPAGES, MB_HUGE_NEVER, NULL, 0 },
		{ { { "MBUDDY_HUGEPAGES", "madvise" } }, HUGEPAGES, MB_HUGE_AUTO,
		  "MBUDDY_HUGEPAGES=\"madvise\" is not auto, always or never; using auto", 0 },
	};
	RUN_CASES(cases);
}

/* ---- the report's destination ---- */

static void stats_child(void *arg)
{
	const char *const(*env)[2] = arg;
	set_env(env, 1);
	mb_options_init();
	printf("stats=%s fd=%d\n", mb_opt.stats ? mb_opt.stats : "(null)", mb_opt.stats_fd);
}

/* What MBUDDY_STATS=value gives: the value kept (or NULL) and the fd. */
static void stats_is(const char *value, const char *stats, int fd)
{
	const char *env[1][2] = { { "MBUDDY_STATS", value } };
	struct test_child c;
	test_child_run(&c, stats_child, env);
	ASSERT_CHILD_OK(&c);
	char want[PATH_MAX + 64];
	snprintf(want, sizeof want, "stats=%s fd=%d\n", stats ? stats : "(null)", fd);
	ASSERT_STR_EQ(c.out, want);
}

TEST(stats)
{
	stats_is("0", NULL, -1);
	stats_is("off", NULL, -1);
	stats_is("NO", NULL, -1);
	stats_is("1", "1", STDERR_FILENO);
	stats_is("stderr", "stderr", STDERR_FILENO);
	stats_is("StdErr", "StdErr", STDERR_FILENO);
	stats_is("stdout", "stdout", STDOUT_FILENO);
	stats_is("/tmp/report.%p", "/tmp/report.%p", -1);
	stats_is("./0", "./0", -1);
	stats_is("/dev/stderr", "/dev/stderr", -1);
}

/* ---- strings: copied, and refused when too long ---- */

static char long_value[PATH_MAX + 8];

static void strings_child(void *arg)
{
	(void)arg;
	static const char *const env[][2] = {
		{ "MBUDDY_STATS_JSON_FILE", "/tmp/a.json" },
		{ "MBUDDY_PROFILE", "/tmp/p" },
		{ "MBUDDY_RULES", "sym:xstrdup=short" },
	};
	set_env(env, 3);
	ASSERT_EQ(setenv("MBUDDY_STATS", "/tmp/s", 1), 0);
	mb_options_init();
	/* The program rewrites its environment afterwards. */
	clearenv();
	ASSERT_EQ(setenv("MBUDDY_STATS", "/tmp/other", 1), 0);
	ASSERT_STR_EQ(mb_opt.stats, "/tmp/s");
	ASSERT_STR_EQ(mb_opt.stats_json_file, "/tmp/a.json");
	ASSERT_STR_EQ(mb_opt.profile, "/tmp/p");
	ASSERT_STR_EQ(mb_opt.rules, "sym:xstrdup=short");
}

TEST(strings_are_copies)
{
	struct test_child c;
	test_child_run(&c, strings_child, NULL);
	ASSERT_CHILD_OK(&c);
	ASSERT_EQ(test_count_lines(c.out, "libmbuddy: "), 0);
}

/* 4095 bytes are taken, 4096 refused with one warning. */
TEST(strings_too_long)
{
	static const char *const vars[] = { "MBUDDY_STATS", "MBUDDY_STATS_JSON_FILE", "MBUDDY_PROFILE", "MBUDDY_RULES" };
	static const enum field fields[] = { STATS, JSON_FILE, PROFILE, RULES };
	for (size_t i = 0; i < 4; i++)
		for (size_t len = 4095; len <= 4096; len++) {
			memset(long_value, 'x', len);
			long_value[0] = '/';
			long_value[len] = 0;
			char warn[128];
			snprintf(warn, sizeof warn, "%s is longer than 4095 bytes; ignored", vars[i]);
			struct opt_case c = { { { vars[i], long_value } }, fields[i], len == 4095, len == 4095 ? NULL : warn, 0 };
			run_case(&c);
		}
}

/* ---- the signal ---- */

TEST(stats_signal_accepted)
{
	static char rtmin[16], rtmax[16];
	snprintf(rtmin, sizeof rtmin, "%d", SIGRTMIN);
	snprintf(rtmax, sizeof rtmax, "%d", SIGRTMAX);
	const struct opt_case cases[] = {
		{ { { "MBUDDY_STATS_SIGNAL", "USR1" } }, STATS_SIGNAL, SIGUSR1, NULL, 0 },
		{ { { "MBUDDY_STATS_SIGNAL", "SIGUSR2" } }, STATS_SIGNAL, SIGUSR2, NULL, 0 },
		{ { { "MBUDDY_STATS_SIGNAL", "sigwinch" } }, STATS_SIGNAL, SIGWINCH, NULL, 0 },
		{ { { "MBUDDY_STATS_SIGNAL", "Pwr" } }, STATS_SIGNAL, SIGPWR, NULL, 0 },
		{ { { "MBUDDY_STATS_SIGNAL", "URG" } }, STATS_SIGNAL, SIGURG, NULL, 0 },
		{ { { "MBUDDY_STATS_SIGNAL", "10" } }, STATS_SIGNAL, SIGUSR1, NULL, 0 },
		{ { { "MBUDDY_STATS_SIGNAL", "28" } }, STATS_SIGNAL, 28, NULL, 0 }, /* SIGWINCH */
		{ { { "MBUDDY_STATS_SIGNAL", "RTMIN" } }, STATS_SIGNAL, (uint64_t)SIGRTMIN, NULL, 0 },
		{ { { "MBUDDY_STATS_SIGNAL", "SIGRTMIN+3" } }, STATS_SIGNAL, (uint64_t)SIGRTMIN + 3, NULL, 0 },
		{ { { "MBUDDY_STATS_SIGNAL", "rtmax-2" } }, STATS_SIGNAL, (uint64_t)SIGRTMAX - 2, NULL, 0 },
		{ { { "MBUDDY_STATS_SIGNAL", "RTMAX" } }, STATS_SIGNAL, (uint64_t)SIGRTMAX, NULL, 0 },
		{ { { "MBUDDY_STATS_SIGNAL", rtmin } }, STATS_SIGNAL, (uint64_t)SIGRTMIN, NULL, 0 },
		{ { { "MBUDDY_STATS_SIGNAL", rtmax } }, STATS_SIGNAL, (uint64_t)SIGRTMAX, NULL, 0 },
	};
	RUN_CASES(cases);
}

TEST(stats_signal_refused)
{
	static char past_rtmax[16], rtmin_past[32];
	snprintf(past_rtmax, sizeof past_rtmax, "%d", SIGRTMAX + 1);
	snprintf(rtmin_past, sizeof rtmin_past, "RTMIN+%d", SIGRTMAX - SIGRTMIN + 1);
	const struct opt_case cases[] = {
		{ { { "MBUDDY_STATS_SIGNAL", "KILL" } }, STATS_SIGNAL, 0,
		  "MBUDDY_STATS_SIGNAL=\"KILL\" (SIGKILL) cannot be caught; no signal dump (use USR1, USR2, WINCH, PWR, "
		  "URG, or RTMIN to RTMAX",
		  0 },
		{ { { "MBUDDY_STATS_SIGNAL", "19" } }, STATS_SIGNAL, 0, "(SIGSTOP) cannot be caught", 0 },
		{ { { "MBUDDY_STATS_SIGNAL", "SEGV" } }, STATS_SIGNAL, 0, "(SIGSEGV) reports a fault", 0 },
		{ { { "MBUDDY_STATS_SIGNAL", "6" } }, STATS_SIGNAL, 0, "(SIGABRT) reports a fault", 0 },
		{ { { "MBUDDY_STATS_SIGNAL", "SIGSYS" } }, STATS_SIGNAL, 0, "reports a fault", 0 },
		{ { { "MBUDDY_STATS_SIGNAL", "INT" } }, STATS_SIGNAL, 0, "(SIGINT) is one that programs rely on", 0 },
		{ { { "MBUDDY_STATS_SIGNAL", "term" } }, STATS_SIGNAL, 0, "is one that programs rely on", 0 },
		{ { { "MBUDDY_STATS_SIGNAL", "CHLD" } }, STATS_SIGNAL, 0, "is one that programs rely on", 0 },
		{ { { "MBUDDY_STATS_SIGNAL", "32" } }, STATS_SIGNAL, 0,
		  "\"32\" is reserved for the C library (below SIGRTMIN)", 0 },
		{ { { "MBUDDY_STATS_SIGNAL", "33" } }, STATS_SIGNAL, 0, "is reserved for the C library", 0 },
		{ { { "MBUDDY_STATS_SIGNAL", "0" } }, STATS_SIGNAL, 0, "\"0\" is not a signal number", 0 },
		{ { { "MBUDDY_STATS_SIGNAL", past_rtmax } }, STATS_SIGNAL, 0, "is not a signal number", 0 },
		{ { { "MBUDDY_STATS_SIGNAL", "4294967306" } }, STATS_SIGNAL, 0, "is not a signal number", 0 },
		{ { { "MBUDDY_STATS_SIGNAL", "99999999999999999999" } }, STATS_SIGNAL, 0, "is too large", 0 },
		{ { { "MBUDDY_STATS_SIGNAL", "+10" } }, STATS_SIGNAL, 0, "has a sign", 0 },
		{ { { "MBUDDY_STATS_SIGNAL", "-10" } }, STATS_SIGNAL, 0, "has a sign", 0 },
		{ { { "MBUDDY_STATS_SIGNAL", " 10" } }, STATS_SIGNAL, 0, "starts with a space", 0 },
		{ { { "MBUDDY_STATS_SIGNAL", "10x" } }, STATS_SIGNAL, 0, "has characters after the number", 0 },
		{ { { "MBUDDY_STATS_SIGNAL", "FOO" } }, STATS_SIGNAL, 0, "\"FOO\" is not a signal name", 0 },
		{ { { "MBUDDY_STATS_SIGNAL", "USR3" } }, STATS_SIGNAL, 0, "is not a signal name", 0 },
		{ { { "MBUDDY_STATS_SIGNAL", rtmin_past } }, STATS_SIGNAL, 0, "is not a signal name", 0 },
		{ { { "MBUDDY_STATS_SIGNAL", "RTMIN-1" } }, STATS_SIGNAL, 0, "is not a signal name", 0 },
		{ { { "MBUDDY_STATS_SIGNAL", "RTMAX+1" } }, STATS_SIGNAL, 0, "is not a signal name", 0 },
		{ { { "MBUDDY_STATS_SIGNAL", "RTMIN+" } }, STATS_SIGNAL, 0, "is not a signal name", 0 },
		{ { { "MBUDDY_STATS_SIGNAL", "RTMIN3" } }, STATS_SIGNAL, 0, "is not a signal name", 0 },
	};
	RUN_CASES(cases);
}

/* ---- several problems at once: one line each, once ---- */

static void many_child(void *arg)
{
	(void)arg;
	static const char *const env[][2] = {
		{ "MBUDDY_DECAY_MS", "soon" },
		{ "MBUDDY_CLASSIFY", "maybe" },
		{ "MBUDDY_STATS_SIGNAL", "HUP" },
	};
	set_env(env, 3);
	ASSERT_EQ(setenv("MBUDDY_CHECK", "2", 1), 0);
	mb_options_init();
	mb_options_init();
	mb_options_init();
}

TEST(each_problem_reported_once)
{
	struct test_child c;
	test_child_run(&c, many_child, NULL);
	ASSERT_CHILD_OK(&c);
	ASSERT_EQ(test_count_lines(c.out, "libmbuddy: "), 4);
	ASSERT_EQ(test_count_lines(c.out, "libmbuddy: MBUDDY_DECAY_MS=\"soon\""), 1);
	ASSERT_EQ(test_count_lines(c.out, "libmbuddy: MBUDDY_CLASSIFY=\"maybe\""), 1);
	ASSERT_EQ(test_count_lines(c.out, "libmbuddy: MBUDDY_STATS_SIGNAL=\"HUP\""), 1);
	ASSERT_EQ(test_count_lines(c.out, "libmbuddy: MBUDDY_CHECK=\"2\""), 1);
}

/* ---- mb_warn ---- */

static void warn_child(void *arg)
{
	(void)arg;
	static char big[2000];
	memset(big, 'w', sizeof big - 1);
	errno = 1234;
	mb_warn("short %d", 42);
	ASSERT_EQ(errno, 1234);
	mb_warn("%s", big);
	ASSERT_EQ(errno, 1234);
	mb_warn("after");
}

/* One line each, prefixed, errno kept; a long message is cut but keeps
 * its newline. */
TEST(warn)
{
	struct test_child c;
	test_child_run(&c, warn_child, NULL);
	ASSERT_CHILD_OK(&c);
	ASSERT_EQ(strncmp(c.out, "libmbuddy: short 42\nlibmbuddy: www", 34), 0);
	ASSERT_EQ(test_count_lines(c.out, "libmbuddy: "), 3);
	const char *second = strchr(c.out, '\n') + 1, *third = strchr(second, '\n') + 1;
	ASSERT_LE(third - second, 512);
	ASSERT_STR_EQ(third, "libmbuddy: after\n");
}
