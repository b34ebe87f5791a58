#include "config.h"
#include "options.h"
#include "buddy.h"

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
	.max_order = MB_MAX_ORDER_DEFAULT,
	.classify = 1,
	.decay_ms = 500,
	.background = 1,
};

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

int mb_parse_size(const char *s, size_t *out)
{
	char *end;
	errno = 0;
	if (!s || !*s || *s == '-')
		return -1;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -1;
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
	if (*end || (shift && v > (~0ULL >> shift)))
		return -1;
	*out = (size_t)(v << shift);
	return 0;
}

static int parse_uint(const char *s, unsigned long long lo, unsigned long long hi, unsigned long long *out)
{
	char *end;
	errno = 0;
	if (!*s || *s == '-')
		return -1;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno || *end || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

static int parse_signal(const char *s)
{
	static const struct { const char *name; int sig; } names[] = {
		{ "USR1", SIGUSR1 }, { "USR2", SIGUSR2 }, { "HUP", SIGHUP },
		{ "WINCH", SIGWINCH }, { "PWR", SIGPWR }, { "URG", SIGURG },
	};
	if (strncasecmp(s, "SIG", 3) == 0)
		s += 3;
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
		if (strcasecmp(s, names[i].name) == 0)
			return names[i].sig;
	unsigned long long v;
	if (parse_uint(s, 1, (unsigned long long)SIGRTMAX, &v) == 0 && v != SIGKILL && v != SIGSTOP &&
	    v != SIGSEGV && v != SIGBUS && v != SIGILL && v != SIGFPE)
		return (int)v;
	return -1;
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
static char stats_value[PATH_MAX], profile_value[PATH_MAX], rules_value[4096];

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

void mb_options_init(void)
{
	const char *v;
	unsigned long long u;

	if ((v = env("MBUDDY_MAX_ORDER"))) {
		if (parse_uint(v, MB_MAX_ORDER_MIN, MB_MAX_ORDER_MAX, &u) == 0)
			mb_opt.max_order = (unsigned)u;
		else
			mb_warn("MBUDDY_MAX_ORDER=%s is not a number from %d to %d; using %u",
				v, MB_MAX_ORDER_MIN, MB_MAX_ORDER_MAX, mb_opt.max_order);
	}
	size_t pb_bytes = (size_t)1 << (mb_opt.max_order - 1 + MB_PAGE_SHIFT);
	if ((v = env("MBUDDY_HEAP_SIZE"))) {
		size_t sz, max = (size_t)8 << 40; /* page indices are 32-bit */
		if (mb_parse_size(v, &sz) != 0)
			mb_warn("MBUDDY_HEAP_SIZE=%s is not a size (e.g. 512M, 64G); using %zu GiB", v,
				mb_opt.heap_size >> 30);
		else if (sz < 2 * pb_bytes) {
			mb_opt.heap_size = 2 * pb_bytes;
			mb_warn("MBUDDY_HEAP_SIZE=%s is below the minimum of two pageblocks; using %zu MiB", v,
				mb_opt.heap_size >> 20);
		} else if (sz > max) {
			mb_opt.heap_size = max;
			mb_warn("MBUDDY_HEAP_SIZE=%s is above the maximum of 8 TiB; using 8 TiB", v);
		} else {
			mb_opt.heap_size = sz & ~(pb_bytes - 1);
		}
	}
	if ((v = env("MBUDDY_CLASSIFY"))) {
		if (strcasecmp(v, "auto") == 0 || strcmp(v, "1") == 0 || strcasecmp(v, "on") == 0)
			mb_opt.classify = 1;
		else if (strcasecmp(v, "off") == 0 || strcmp(v, "0") == 0)
			mb_opt.classify = 0;
		else
			mb_warn("MBUDDY_CLASSIFY=%s is not 'auto' or 'off'; using auto", v);
	}
	mb_opt.stats = env_copy("MBUDDY_STATS", stats_value, sizeof stats_value);
	if ((v = env("MBUDDY_STATS_FORMAT"))) {
		if (strcasecmp(v, "text") == 0)
			mb_opt.stats_format = MB_STATS_TEXT;
		else if (strcasecmp(v, "json") == 0)
			mb_opt.stats_format = MB_STATS_JSON;
		else
			mb_warn("MBUDDY_STATS_FORMAT=%s is not 'text' or 'json'; using text", v);
	}
	if ((v = env("MBUDDY_STATS_SIGNAL"))) {
		int sig = parse_signal(v);
		if (sig > 0)
			mb_opt.stats_signal = sig;
		else
			mb_warn("MBUDDY_STATS_SIGNAL=%s is not a usable signal (e.g. USR1, USR2, or a number); no signal dump", v);
	}
	if ((v = env("MBUDDY_DECAY_MS"))) {
		if (parse_uint(v, 0, 3600000, &u) == 0)
			mb_opt.decay_ms = u;
		else
			mb_warn("MBUDDY_DECAY_MS=%s is not a number of milliseconds from 0 to 3600000; using %llu",
				v, (unsigned long long)mb_opt.decay_ms);
	}
	if ((v = env("MBUDDY_BACKGROUND"))) {
		if (parse_uint(v, 0, 1, &u) == 0)
			mb_opt.background = (int)u;
		else
			mb_warn("MBUDDY_BACKGROUND=%s is not 0 or 1; using 1", v);
	}
	if ((v = env("MBUDDY_CHECK"))) {
		if (parse_uint(v, 0, 1, &u) == 0)
			mb_opt.check = (int)u;
		else
			mb_warn("MBUDDY_CHECK=%s is not 0 or 1; using 0", v);
	}
	mb_opt.rules = env_copy("MBUDDY_RULES", rules_value, sizeof rules_value);
	mb_opt.profile = env_copy("MBUDDY_PROFILE", profile_value, sizeof profile_value);
}
