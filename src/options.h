/* Every MBUDDY_* environment variable, parsed once at initialisation.
 * Parsing never allocates: it runs inside the first malloc. String values
 * are copies, never pointers into the environment. */
#ifndef MB_OPTIONS_H
#define MB_OPTIONS_H

#include <stddef.h>
#include <stdint.h>

enum mb_stats_format { MB_STATS_TEXT = 0, MB_STATS_JSON = 1 };
enum mb_hugepages { MB_HUGE_AUTO = 0, MB_HUGE_ALWAYS = 1, MB_HUGE_NEVER = 2 };
extern const char *const mb_hugepages_names[3]; /* "auto", "always", "never" */

struct mb_options {
	size_t heap_size;       /* MBUDDY_HEAP_SIZE */
	unsigned max_order;     /* MBUDDY_MAX_ORDER */
	int classify;           /* MBUDDY_CLASSIFY: 1 auto, 0 off */
	const char *stats;      /* MBUDDY_STATS: NULL (no report), a stream's word or a path */
	int stats_fd;           /* MBUDDY_STATS names a stream: 1 or 2; a path: -1 */
	int stats_format;       /* MBUDDY_STATS_FORMAT */
	int stats_signal;       /* MBUDDY_STATS_SIGNAL: 0 = none */
	const char *stats_json_file; /* MBUDDY_STATS_JSON_FILE: a path for a JSON report at exit, or NULL */
	int stats_pid;          /* MBUDDY_STATS_PID: the one process with exit reports; 0 = all */
	uint64_t decay_ms;      /* MBUDDY_DECAY_MS */
	int check;              /* MBUDDY_CHECK: 1 puts a canary after every object (canary.h) */
	int background;         /* MBUDDY_BACKGROUND: 0 keeps the purge thread from starting */
	const char *rules;      /* MBUDDY_RULES */
	const char *profile;    /* MBUDDY_PROFILE */
	int hugepages;          /* MBUDDY_HUGEPAGES: enum mb_hugepages */
};

extern struct mb_options mb_opt;

/* Read every variable, once; later calls do nothing. */
void mb_options_init(void);

/* The largest heap: page indices are 32-bit. */
#define MB_HEAP_SIZE_MAX ((size_t)8 << 40)

/* Parse "123", "64K", "4M", "64G", "1T" (binary units): plain digits, no
 * space, no sign. NULL on success, else what is wrong ("has a sign"). */
const char *mb_parse_size(const char *s, size_t *out);

/* Report a problem on stderr, prefixed "libmbuddy: ". Never allocates. */
void mb_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* What the program may still be using is looked at every purge period,
 * two and a half decay times (250 ms by default): the size classes of the
 * thread caches, the free pages of sparse slabs, run caches, metadata
 * pages, and a pageblock it keeps taking pieces from. Memory nobody
 * touches goes back after the decay; memory in use again within a period
 * is not handed back and faulted in at each look (larson-like sizes of
 * 8 B - 32 KiB ran 6% slower with a period of half the decay at 100 ms).
 * Not more often than the floor: with a decay time of 0 it would be walked
 * on every slow path. */
#define MB_PURGE_PERIOD_MIN_MS 50
static inline unsigned long long mb_purge_period_ms(void)
{
	unsigned long long period = mb_opt.decay_ms * 5 / 2;
	return period > MB_PURGE_PERIOD_MIN_MS ? period : MB_PURGE_PERIOD_MIN_MS;
}

#endif
