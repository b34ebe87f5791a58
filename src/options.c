#include "config.h"
#include "options.h"
#include "buddy.h"
#include "region.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define GiB ((size_t)1 << 30)

struct mb_options mb_opt = {
	.heap_size = 64 * GiB,
	.stats_fd = -1,
	.max_order = MB_MAX_ORDER_DEFAULT,
	.classify = 1,
	.decay_ms = 100,
	.background = 1,
};

const char *const mb_hugepages_names[3] = { "auto", "always", "never" };

void mb_warn(const char *fmt, ...)
{
	char buf[512];
	int saved = errno;
	va_list ap;
	va_start(ap, fmt);
	int n = snprintf(buf, sizeof buf, "libmbuddy: ");
	n += vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
	va_end(ap);
	if (n >= (int)sizeof buf - 1)
		n = (int)sizeof buf - 2;
	buf[n++] = '\n';
	ssize_t w = write(STDERR_FILENO, buf, (size_t)n);
	(void)w;
	errno = saved;
}

/* ---- strict numbers ----
 * Only plain decimal digits: strtoull would also take leading spaces, a
 * sign (and negate the value) and wrap around on overflow. Each parser
 * returns NULL, or what is wrong with the value, for the one message. */

static const char *scan_digits(const char *s, unsigned long long *v, const char **end)
{
	if (*s == ' ' || (*s >= '\t' && *s <= '\r'))
		return "starts with a space";
	if (*s == '+' || *s == '-')
		return "has a sign";
	if (*s < '0' || *s > '9')
		return "is not a number";
	unsigned long long x = 0;
	for (; *s >= '0' && *s <= '9'; s++) {
		unsigned d = (unsigned)(*s - '0');
		if (x > (ULLONG_MAX - d) / 10)
			return "is too large";
		x = x * 10 + d;
	}
	*v = x;
	*end = s;
	return NULL;
}

static const char *parse_uint(const char *s, unsigned long long lo, unsigned long long hi, unsigned long long *out)
{
	const char *end, *why = scan_digits(s, out, &end);
	if (why)
		return why;
	if (*end)
		return "has characters after the number";
	if (*out < lo || *out > hi)
		return "is out of range";
	return NULL;
}

const char *mb_parse_size(const char *s, size_t *out)
{
	unsigned long long v;
	const char *end, *why = scan_digits(s, &v, &end);
	if (why)
		return why;
	unsigned shift = 0;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	}
	if (shift && (*end == 'i' || *end == 'I'))
		end++;
	if (*end == 'b' || *end == 'B')
		end++;
	if (*end)
		return shift ? "has characters after the unit" : "has characters after the number (a unit is K, M, G or T)";
	if (v > (SIZE_MAX >> shift))
		return "is too large";
	*out = (size_t)(v << shift);
	return NULL;
}

/* ---- MBUDDY_STATS_SIGNAL ----
 * Only signals no program depends on by default: a handler of ours would
 * change what they do. The C library's own real-time signals (32 and 33
 * on glibc, below SIGRTMIN) serve its threads. */

#define SIGNALS_ALLOWED "USR1, USR2, WINCH, PWR, URG, or RTMIN to RTMAX"

static int signal_allowed(int sig)
{
	return sig == SIGUSR1 || sig == SIGUSR2 || sig == SIGWINCH || sig == SIGPWR || sig == SIGURG ||
	       (sig >= SIGRTMIN && sig <= SIGRTMAX);
}

/* Why sig cannot carry the request; NULL if it can. */
static const char *signal_refused(int sig)
{
	if (sig < 1 || sig > SIGRTMAX)
		return "is not a signal number";
	if (signal_allowed(sig))
		return NULL;
	if (sig == SIGKILL || sig == SIGSTOP)
		return "cannot be caught";
	if (sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE || sig == SIGTRAP || sig == SIGABRT ||
	    sig == SIGSYS)
		return "reports a fault";
	if (sig > SIGSYS && sig < SIGRTMIN)
		return "is reserved for the C library (below SIGRTMIN)";
	return "is one that programs rely on";
}

/* "USR1", "SIGUSR1", "RTMIN", "RTMIN+3", "RTMAX-2", case-insensitive. */
static int signal_by_name(const char *s)
{
	if (strncasecmp(s, "SIG", 3) == 0)
		s += 3;
	const char *rt = NULL;
	int base = 0, dir = 0;
	if (strncasecmp(s, "RTMIN", 5) == 0)
		rt = s + 5, base = SIGRTMIN, dir = 1;
	else if (strncasecmp(s, "RTMAX", 5) == 0)
		rt = s + 5, base = SIGRTMAX, dir = -1;
	if (rt) {
		unsigned long long k = 0;
		if (*rt && ((dir > 0 && *rt != '+') || (dir < 0 && *rt != '-') ||
			    parse_uint(rt + 1, 0, (unsigned long long)(SIGRTMAX - SIGRTMIN), &k)))
			return -1;
		return base + dir * (int)k;
	}
	for (int sig = 1; sig < SIGRTMIN; sig++) {
		const char *name = sigabbrev_np(sig);
		if (name && strcasecmp(s, name) == 0)
			return sig;
	}
	return -1;
}

/* The signal of v, or 0 after reporting why it cannot be used. */
static int parse_signal(const char *v)
{
	unsigned long long n;
	const char *end, *why = NULL;
	int sig;
	if ((*v >= '0' && *v <= '9') || *v == '+' || *v == '-' || *v == ' ' || (*v >= '\t' && *v <= '\r')) {
		why = scan_digits(v, &n, &end);
		if (!why && *end)
			why = "has characters after the number";
		sig = why ? 0 : n > INT_MAX ? -1 : (int)n;
	} else {
		sig = signal_by_name(v);
		if (sig < 0)
			why = "is not a signal name";
	}
	if (!why)
		why = signal_refused(sig);
	if (!why)
		return sig;
	if (sig > 0 && sig < SIGRTMIN && sigabbrev_np(sig))
		mb_warn("MBUDDY_STATS_SIGNAL=\"%s\" (SIG%s) %s; no signal dump (use " SIGNALS_ALLOWED ", %d to %d)", v,
			sigabbrev_np(sig), why, SIGRTMIN, SIGRTMAX);
	else
		mb_warn("MBUDDY_STATS_SIGNAL=\"%s\" %s; no signal dump (use " SIGNALS_ALLOWED ", %d to %d)", v, why,
			SIGRTMIN, SIGRTMAX);
	return 0;
}

static const char *env(const char *name)
{
	/* secure_getenv: a set-user-ID program must not be steered into
	 * writing files through MBUDDY_STATS or MBUDDY_PROFILE. */
	const char *v = secure_getenv(name);
	return v && *v ? v : NULL;
}

/* Values used after initialisation are copied here: a program may rewrite
 * its environment (setenv, clearenv, a process title written over environ)
 * long before the exit report and the profile are written. Static, since
 * initialisation runs inside the first malloc. */
static char stats_value[PATH_MAX], json_file_value[PATH_MAX], profile_value[PATH_MAX], rules_value[4096];

static const char *env_copy(const char *name, char *buf, size_t len)
{
	const char *v = env(name);
	if (!v)
		return NULL;
	size_t n = strlen(v);
	if (n >= len) {
		mb_warn("%s is longer than %zu bytes; ignored", name, len - 1);
		return NULL;
	}
	memcpy(buf, v, n + 1);
	return buf;
}

/* A number variable: 1 with *out set, or 0 when unset or after one
 * message saying what is wrong with it and which default stays. */
static int opt_uint(const char *name, unsigned long long lo, unsigned long long hi, const char *what,
		    unsigned long long dflt, unsigned long long *out)
{
	const char *v = env(name), *why;
	if (!v)
		return 0;
	if (!(why = parse_uint(v, lo, hi, out)))
		return 1;
	if (hi == lo + 1)
		mb_warn("%s=\"%s\" %s (expected %llu or %llu); using %llu", name, v, why, lo, hi, dflt);
	else
		mb_warn("%s=\"%s\" %s (expected %s from %llu to %llu); using %llu", name, v, why, what, lo, hi, dflt);
	return 0;
}

/* Whether v is one of the words, case-insensitive. */
static int word_in(const char *v, const char *const *words)
{
	for (; *words; words++)
		if (strcasecmp(v, *words) == 0)
			return 1;
	return 0;
}

/* bytes in the largest binary unit that divides it: "256 KiB", "8 MiB". */
static const char *size_text(char *buf, size_t len, size_t bytes)
{
	static const char *const units[] = { "bytes", "KiB", "MiB", "GiB", "TiB" };
	unsigned u = 0;
	while (u < 4 && bytes && !(bytes & 1023))
		bytes >>= 10, u++;
	snprintf(buf, len, "%zu %s", bytes, units[u]);
	return buf;
}

static void opt_heap_size(void)
{
	const char *v = env("MBUDDY_HEAP_SIZE"), *why;
	size_t pb_bytes = (size_t)1 << (mb_opt.max_order - 1 + MB_PAGE_SHIFT), sz;
	size_t min = 2 * pb_bytes, max = MB_HEAP_SIZE_MAX;
	if (!v)
		return;
	if ((why = mb_parse_size(v, &sz))) {
		mb_warn("MBUDDY_HEAP_SIZE=\"%s\" %s (expected a size such as 512M or 64G); using %zu GiB", v, why,
			mb_opt.heap_size >> 30);
	} else if (sz < min) {
		char text[32];
		mb_opt.heap_size = min;
		/* 256 KiB with MBUDDY_MAX_ORDER=6: not "0 MiB". */
		mb_warn("MBUDDY_HEAP_SIZE=\"%s\" is below the minimum of two pageblocks; using %s", v,
			size_text(text, sizeof text, min));
	} else if (sz > max) {
		mb_opt.heap_size = max;
		mb_warn("MBUDDY_HEAP_SIZE=\"%s\" is above the maximum of %zu TiB; using %zu TiB", v, max >> 40,
			max >> 40);
	} else {
		mb_opt.heap_size = sz & ~(pb_bytes - 1);
	}
}

static void opt_words(void)
{
	static const char *const on[] = { "auto", "on", "1", NULL }, *const off[] = { "off", "0", NULL };
	static const char *const text[] = { "text", NULL }, *const json[] = { "json", NULL };
	const char *v;
	if ((v = env("MBUDDY_CLASSIFY"))) {
		if (word_in(v, on))
			mb_opt.classify = 1;
		else if (word_in(v, off))
			mb_opt.classify = 0;
		else
			mb_warn("MBUDDY_CLASSIFY=\"%s\" is not auto, on, 1, off or 0; using auto", v);
	}
	if ((v = env("MBUDDY_HUGEPAGES"))) {
		int found = 0;
		for (int m = 0; m < 3; m++)
			if (strcasecmp(v, mb_hugepages_names[m]) == 0) {
				mb_opt.hugepages = m;
				found = 1;
			}
		if (!found)
			mb_warn("MBUDDY_HUGEPAGES=\"%s\" is not auto, always or never; using auto", v);
	}
	if ((v = env("MBUDDY_STATS_FORMAT"))) {
		if (word_in(v, text))
			mb_opt.stats_format = MB_STATS_TEXT;
		else if (word_in(v, json))
			mb_opt.stats_format = MB_STATS_JSON;
		else
			mb_warn("MBUDDY_STATS_FORMAT=\"%s\" is not text or json; using text", v);
	}
}

/* MBUDDY_STATS: words that switch the report off or name a stream, any
 * other value a path. */
static void opt_stats(void)
{
	static const char *const none[] = { "0", "off", "no", NULL }, *const err[] = { "1", "stderr", NULL };
	static const char *const out[] = { "stdout", NULL };
	const char *v = env_copy("MBUDDY_STATS", stats_value, sizeof stats_value);
	mb_opt.stats = NULL;
	mb_opt.stats_fd = -1;
	if (!v || word_in(v, none))
		return;
	mb_opt.stats = v;
	if (word_in(v, err))
		mb_opt.stats_fd = STDERR_FILENO;
	else if (word_in(v, out))
		mb_opt.stats_fd = STDOUT_FILENO;
}

/* A pageblock must hold whole pages of the system, or none of its memory
 * could ever go back to the kernel. */
static void fit_system_pages(void)
{
	unsigned o = mb_opt.max_order;
	while (o < MB_MAX_ORDER_MAX && ((size_t)1 << (o - 1 + MB_PAGE_SHIFT)) < mb_os_page_size())
		o++;
	if (o != mb_opt.max_order)
		mb_warn("MAX_ORDER %u makes pageblocks smaller than this system's pages of %zu KiB; using %u",
			mb_opt.max_order, mb_os_page_size() >> 10, o);
	mb_opt.max_order = o;
}

void mb_options_init(void)
{
	static int done;
	unsigned long long u;
	if (done)
		return; /* each problem is reported once */
	done = 1;
	if (opt_uint("MBUDDY_MAX_ORDER", MB_MAX_ORDER_MIN, MB_MAX_ORDER_MAX, "a number", mb_opt.max_order, &u))
		mb_opt.max_order = (unsigned)u;
	fit_system_pages();
	opt_heap_size();
	opt_words();
	opt_stats();
	mb_opt.stats_json_file = env_copy("MBUDDY_STATS_JSON_FILE", json_file_value, sizeof json_file_value);
	if (opt_uint("MBUDDY_STATS_PID", 1, INT_MAX, "a process id", 0, &u))
		mb_opt.stats_pid = (int)u;
	const char *v = env("MBUDDY_STATS_SIGNAL");
	if (v)
		mb_opt.stats_signal = parse_signal(v);
	if (opt_uint("MBUDDY_DECAY_MS", 0, 3600000, "milliseconds", mb_opt.decay_ms, &u))
		mb_opt.decay_ms = u;
	if (opt_uint("MBUDDY_BACKGROUND", 0, 1, NULL, (unsigned long long)mb_opt.background, &u))
		mb_opt.background = (int)u;
	if (opt_uint("MBUDDY_CHECK", 0, 1, NULL, (unsigned long long)mb_opt.check, &u))
		mb_opt.check = (int)u;
	mb_opt.rules = env_copy("MBUDDY_RULES", rules_value, sizeof rules_value);
	mb_opt.profile = env_copy("MBUDDY_PROFILE", profile_value, sizeof profile_value);
}
