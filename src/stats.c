#include "config.h"
#include "stats.h"
#include "classify.h"
#include "site_report.h"
#include "stats_account.h"
#include "fragmentation.h"
#include "stats_fields.h"
#include "lockstat.h"
#include "options.h"
#include "region.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* How a report begins, so that an earlier one can be recognised and
 * replaced (and nothing else): the text's first words, the JSON's first
 * key and one key that follows the program name. */
#define REPORT_TEXT_HEAD "libmbuddy statistics: pid "
#define REPORT_JSON_HEAD "{\"pid\":"
#define REPORT_JSON_MARK ",\"pageblock_order\":"

static struct mb_lock dump_lock = MB_LOCK_INITIALIZER("dump");
static int dump_error_reported;
static int exit_dumped;

/* Per pageblock: owner (0-2 type, 3 global) and pages in use, copied under
 * the lock into a private mapping so the report never touches the heap. */
struct pb_entry {
	uint8_t owner;
	uint8_t resident;
	uint16_t pad;
	uint32_t used;
};

static struct pb_entry *snapshot_pageblocks(size_t *count, size_t *bytes)
{
	struct mb_buddy *b = &mb_heap.buddy;
	mb_heap_lock();
	size_t n = b->pb_high;
	struct pb_entry *e = n ? mb_os_reserve_records(n * sizeof(struct pb_entry), bytes) : NULL;
	if (e) {
		for (size_t pb = 0; pb < n; pb++) {
			e[pb].owner = (uint8_t)mb_buddy_pb_type(b, pb);
			e[pb].used = b->pb_used[pb];
			e[pb].resident = (uint8_t)mb_buddy_pb_resident(b, pb);
		}
	}
	mb_heap_unlock();
	*count = e ? n : 0;
	return e;
}

static const char *owner_name(unsigned owner)
{
	return owner < MB_NTYPES ? mb_type_names[owner] : "global";
}

static const char *thp_name(int thp)
{
	static const char *const names[] = { "unavailable", "never", "madvise", "always" };
	return thp >= -1 && thp <= 2 ? names[thp + 1] : "unavailable";
}

static void write_mib(struct mb_out *o, const char *label, uint64_t bytes)
{
	mb_out_fmt(o, "  %-30s %16llu B  %10.1f MiB\n", label, (unsigned long long)bytes,
		   (double)bytes / (1 << 20));
}

/* The lines of the fields the table puts in a block of the text. */
static void write_text_fields(struct mb_out *o, const struct mb_snapshot *s, enum mb_stats_block block)
{
	for (size_t i = 0; i < mb_stats_nfields; i++) {
		const struct mb_stats_field *f = &mb_stats_fields[i];
		if (f->block != block || !f->label)
			continue;
		uint64_t v = mb_stats_field_value(f, s);
		if ((f->flags & MB_FIELD_SIGNED) && (int64_t)v < 0)
			v = 0;
		if (block == MB_BLOCK_MEMORY || (f->flags & MB_FIELD_BYTES))
			write_mib(o, f->label, v);
		else if (block == MB_BLOCK_BEAN)
			mb_out_fmt(o, "%-18s %llu\n", f->label, (unsigned long long)v);
		else if (f->flags & MB_FIELD_PAIR)
			mb_out_fmt(o, "  %-30s %llu/%llu\n", f->label, (unsigned long long)v,
				   (unsigned long long)mb_stats_field_value(f + 1, s));
		else
			mb_out_fmt(o, "  %-30s %llu\n", f->label, (unsigned long long)v);
	}
}

static void program_name(char *out, size_t len)
{
	out[0] = 0;
	int fd = open("/proc/self/comm", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t n = read(fd, out, len - 1);
	close(fd);
	if (n <= 0)
		n = 0;
	out[n] = 0;
	char *nl = strchr(out, '\n');
	if (nl)
		*nl = 0;
}

/* Lock-stats builds only: one row per lock name, key=value for tools. */
static void write_locks(struct mb_out *o, int json)
{
	struct mb_lockstat_row rows[16];
	size_t n = mb_lockstat_collect(rows, 16);
	if (!mb_lockstat_enabled())
		return;
	if (json)
		mb_out_str(o, "\"locks\":[");
	else
		mb_out_str(o, "Locks (lock-stats build; times in ns over the whole process)\n");
	for (size_t i = 0; i < n; i++) {
		const struct mb_lockstat_row *r = &rows[i];
		const char *f = json ? "%s{\"name\":\"%s\",\"instances\":%u,\"shared\":%u,\"acquisitions\":%llu,"
				      "\"contended\":%llu,\"handoffs\":%llu,\"hold_ns\":%llu,\"wait_ns\":%llu,"
				      "\"shared_hold_ns\":%llu,\"busiest_hold_ns\":%llu}"
				    : "%slockstat name=%s instances=%u shared=%u acquisitions=%llu contended=%llu "
				      "handoffs=%llu hold_ns=%llu wait_ns=%llu shared_hold_ns=%llu busiest_hold_ns=%llu\n";
		mb_out_fmt(o, f, json && i ? "," : "", r->name, r->instances, r->shared,
			   (unsigned long long)r->acquisitions, (unsigned long long)r->contended,
			   (unsigned long long)r->handoffs, (unsigned long long)r->hold_ns,
			   (unsigned long long)r->wait_ns, (unsigned long long)r->shared_hold_ns,
			   (unsigned long long)r->busiest_hold_ns);
	}
	mb_out_str(o, json ? "]," : "\n");
}

static const char *const trigger_names[] = {
	[MB_TRIGGER_API] = "api",
	[MB_TRIGGER_EXIT] = "exit",
	[MB_TRIGGER_SIGNAL] = "signal",
};

static const char *const trigger_text[] = {
	[MB_TRIGGER_API] = "asked for by mbuddy_stats_print()",
	[MB_TRIGGER_EXIT] = "at exit",
	[MB_TRIGGER_SIGNAL] = "asked for by MBUDDY_STATS_SIGNAL",
};

/* Now, in UTC, as 2026-12-03T10:11:12Z. By hand: gmtime_r() reads the
 * time zone once, and allocates doing so. The date from days since
 * 1970-01-01 in the proleptic Gregorian calendar, counted in eras of 400
 * years from 0000-03-01. */
static void time_stamp(char *out, size_t len)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	long long t = ts.tv_sec, days = t / 86400, secs = t % 86400;
	if (secs < 0) {
		secs += 86400;
		days--;
	}
	long long z = days + 719468, era = (z >= 0 ? z : z - 146096) / 146097;
	long long doe = z - era * 146097;                                      /* day of the era */
	long long yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365; /* year of the era */
	long long doy = doe - (365 * yoe + yoe / 4 - yoe / 100);               /* from March 1st */
	long long mp = (5 * doy + 2) / 153, day = doy - (153 * mp + 2) / 5 + 1;
	long long month = mp < 10 ? mp + 3 : mp - 9, year = yoe + era * 400 + (month <= 2);
	snprintf(out, len, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lldZ", year, month, day, secs / 3600, secs / 60 % 60,
		 secs % 60);
}

/* Who wrote the report, when, why, and what its counters cover. */
static void write_text_header(struct mb_out *o, const struct mb_snapshot *s, int trigger)
{
	char prog[64], when[64];
	program_name(prog, sizeof prog);
	time_stamp(when, sizeof when);
	mb_out_fmt(o, REPORT_TEXT_HEAD "%d (%s), parent pid %d\n", (int)getpid(), prog, (int)getppid());
	mb_out_fmt(o, "libmbuddy " PACKAGE_VERSION ", %s, written %s; counters since the %s", when,
		   trigger_text[trigger], s->forked ? "fork" : "start");
	if (s->forked)
		mb_out_fmt(o, " from pid %d", s->forked_from);
	mb_out_str(o, "\n");
	if (!s->served)
		mb_out_fmt(o, "NOT SERVED: this process calls the %s() of %s, not libmbuddy's: what it allocates "
			      "that way bypasses libmbuddy, and this report counts only what reached libmbuddy\n",
			   s->foreign_symbol, s->foreign_object);
}

/* auto, off, or asleep: on, but the process has not lived long enough
 * for it to start (classify.c). */
static const char *classify_state(void)
{
	if (!mb_opt.classify)
		return "off";
	return __atomic_load_n(&mb_classify_asleep, __ATOMIC_ACQUIRE) ? "asleep" : "auto";
}

static void write_text(struct mb_out *o, const struct mb_snapshot *s, int trigger)
{
	uint64_t nr[MB_MAX_ORDER_MAX] = { 0 };
	mb_stats_free_blocks(s, nr);

	write_text_header(o, s, trigger);
	mb_out_fmt(o, "Heap of %.1f MiB in %zu pageblocks of %zu KiB (MAX_ORDER %u), classification %s\n\n",
		   (double)s->region_bytes / (1 << 20), s->nblocks, s->pb_bytes >> 10, s->max_order,
		   classify_state());

	if (s->has_account)
		mb_stats_write_account_text(o, &s->account, s->has_account_peak ? &s->account_peak : NULL,
					    s->peak_rss_bytes);

	mb_out_str(o, "Memory\n");
	write_text_fields(o, s, MB_BLOCK_MEMORY);
	mb_out_str(o, "\n");

	mb_out_fmt(o, "Huge pages (MBUDDY_HUGEPAGES=%s in force; system THP %s)\n", mb_hugepages_names[s->hp_mode],
		   thp_name(s->hp_thp));
	write_text_fields(o, s, MB_BLOCK_HUGE);
	if (s->has_account && s->live_bytes > 0)
		mb_out_fmt(o, "  %-30s %15.1f %%\n", "huge pages / live bytes",
			   100.0 * (double)s->account.heap_anon_huge / (double)s->live_bytes);
	mb_out_str(o, "\n");

	/* /proc/buddyinfo: free blocks per order, all types; then the pool. */
	mb_out_str(o, "Buddyinfo (free blocks per order; the last column is the global pool)\n");
	mb_out_str(o, "Heap     ");
	for (unsigned k = 0; k < s->pb_order; k++)
		mb_out_fmt(o, " %6u", k);
	mb_out_str(o, "  global\n         ");
	for (unsigned k = 0; k < s->pb_order; k++)
		mb_out_fmt(o, " %6llu", (unsigned long long)nr[k]);
	mb_out_fmt(o, "  %6zu\n\n", s->global_free);

	/* /proc/pagetypeinfo: the same per type. */
	mb_out_str(o, "Free blocks per type and order\n");
	mb_out_str(o, "type               ");
	for (unsigned k = 0; k < s->pb_order; k++)
		mb_out_fmt(o, " %6u", k);
	mb_out_str(o, "\n");
	for (int t = 0; t < MB_NTYPES; t++) {
		mb_out_fmt(o, "%-10s %-8s", mb_type_names[t], mb_type_aliases[t]);
		for (unsigned k = 0; k < s->pb_order; k++)
			mb_out_fmt(o, " %6llu", (unsigned long long)s->nr_free[t][k]);
		mb_out_str(o, "\n");
	}
	mb_out_fmt(o, "Global pool (order %u): %zu free pageblocks, %zu of them resident\n\n",
		   s->pb_order, s->global_free, s->global_resident);

	mb_out_str(o, "Pageblocks per type\n");
	for (int t = 0; t < MB_NTYPES; t++)
		mb_out_fmt(o, "  %-10s %8zu  (%.1f MiB)\n", mb_type_names[t], s->pb_owned[t],
			   (double)s->pb_owned[t] * (double)s->pb_bytes / (1 << 20));
	mb_out_fmt(o, "  %-10s %8zu\n\n", "global", s->global_free);

	/* The patch's bean counters, in its own words. */
	mb_out_str(o, "Global beancounters\n");
	write_text_fields(o, s, MB_BLOCK_BEAN);
	for (int t = 0; t < MB_NTYPES; t++) {
		char label[32];
		snprintf(label, sizeof label, "%s allocs:", mb_type_names[t]);
		mb_out_fmt(o, "%-18s %llu\n", label, (unsigned long long)s->count.allocs[t]);
	}
	for (int t = 0; t < MB_NTYPES; t++)
		mb_out_fmt(o, "%-10s Fallback count: %llu\n", mb_type_names[t], (unsigned long long)s->count.fallbacks[t]);
	mb_out_str(o, "\n");

	mb_out_str(o, "Allocator counters\n");
	for (int t = 0; t < MB_NTYPES; t++)
		mb_out_fmt(o, "  %-10s objects allocated   %llu\n", mb_type_names[t],
			   (unsigned long long)s->counts.mallocs[t]);
	write_text_fields(o, s, MB_BLOCK_COUNTERS);
	mb_out_str(o, "\n");

	mb_out_str(o, "Fragmentation per order (kernel's unusable free space index / fragmentation index)\n");
	mb_out_str(o, "order    ");
	for (unsigned k = 0; k < s->max_order; k++)
		mb_out_fmt(o, " %6u", k);
	for (size_t i = 0; i < mb_stats_nindices; i++) {
		mb_out_fmt(o, "\n%s", mb_stats_indices[i].label);
		for (unsigned k = 0; k < s->max_order; k++)
			mb_out_fmt(o, " %6.3f", mb_stats_indices[i].value(nr, s->max_order, k));
	}
	mb_out_str(o, "\n\n");

	write_locks(o, 0);
	mb_site_report_write(o, 0);
}

static void json_u64_array(struct mb_out *o, const uint64_t *v, unsigned n)
{
	mb_out_str(o, "[");
	for (unsigned i = 0; i < n; i++)
		mb_out_fmt(o, "%s%llu", i ? "," : "", (unsigned long long)v[i]);
	mb_out_str(o, "]");
}

/* The objects of the field table ("global", "counters", "heap"), each
 * followed by a comma. */
static void write_json_fields(struct mb_out *o, const struct mb_snapshot *s)
{
	const char *object = NULL;
	for (size_t i = 0; i < mb_stats_nfields; i++) {
		const struct mb_stats_field *f = &mb_stats_fields[i];
		if (!f->key)
			continue;
		int first = !object || strcmp(object, f->object) != 0;
		if (first)
			mb_out_fmt(o, "%s\"%s\":{", object ? "}," : "", f->object);
		object = f->object;
		uint64_t v = mb_stats_field_value(f, s);
		if (f->flags & MB_FIELD_SIGNED)
			mb_out_fmt(o, "%s\"%s\":%lld", first ? "" : ",", f->key, (long long)v);
		else
			mb_out_fmt(o, "%s\"%s\":%llu", first ? "" : ",", f->key, (unsigned long long)v);
	}
	if (object)
		mb_out_str(o, "},");
}

static void write_json(struct mb_out *o, const struct mb_snapshot *s, int trigger)
{
	char prog[64], when[64];
	program_name(prog, sizeof prog);
	time_stamp(when, sizeof when);
	uint64_t nr[MB_MAX_ORDER_MAX] = { 0 };
	mb_stats_free_blocks(s, nr);

	mb_out_fmt(o, REPORT_JSON_HEAD "%d,\"program\":", (int)getpid());
	mb_out_json_str(o, prog);
	mb_out_fmt(o, ",\"max_order\":%u" REPORT_JSON_MARK "%u,\"page_bytes\":%zu,\"pageblock_bytes\":%zu,"
		      "\"pageblocks_total\":%zu,\"classify\":\"%s\",",
		   s->max_order, s->pb_order, MB_PAGE_SIZE, s->pb_bytes, s->nblocks, classify_state());
	mb_out_fmt(o, "\"ppid\":%d,\"version\":\"" PACKAGE_VERSION "\",\"time\":\"%s\",\"trigger\":\"%s\","
		      "\"counted_since\":\"%s\",\"forked_from\":%d,\"served\":%s,\"foreign_symbol\":",
		   (int)getppid(), when, trigger_names[trigger], s->forked ? "fork" : "start", s->forked_from,
		   s->served ? "true" : "false");
	mb_out_json_str(o, s->served ? "" : s->foreign_symbol);
	mb_out_str(o, ",\"foreign_object\":");
	mb_out_json_str(o, s->served ? "" : s->foreign_object);
	mb_out_fmt(o, ",\"hugepages\":\"%s\",\"thp\":\"%s\",", mb_hugepages_names[s->hp_mode], thp_name(s->hp_thp));

	mb_out_str(o, "\"types\":[");
	for (int t = 0; t < MB_NTYPES; t++) {
		mb_out_fmt(o, "%s{\"name\":\"%s\",\"alias\":\"%s\",\"free\":", t ? "," : "", mb_type_names[t],
			   mb_type_aliases[t]);
		json_u64_array(o, s->nr_free[t], s->pb_order);
		for (size_t i = 0; i < mb_stats_ntype_fields; i++)
			mb_out_fmt(o, ",\"%s\":%llu", mb_stats_type_fields[i].key,
				   (unsigned long long)mb_stats_type_value(&mb_stats_type_fields[i], s, t));
		mb_out_str(o, "}");
	}
	mb_out_str(o, "],");
	write_json_fields(o, s);
	if (s->has_account)
		mb_stats_write_account_json(o, &s->account, s->has_account_peak ? &s->account_peak : NULL);

	mb_out_str(o, "\"fragmentation\":{");
	for (size_t i = 0; i < mb_stats_nindices; i++) {
		mb_out_fmt(o, "%s\"%s\":[", i ? "," : "", mb_stats_indices[i].key);
		for (unsigned k = 0; k < s->max_order; k++)
			mb_out_fmt(o, "%s%.4f", k ? "," : "", mb_stats_indices[i].value(nr, s->max_order, k));
		mb_out_str(o, "]");
	}
	mb_out_str(o, "},");

	write_locks(o, 1);
	mb_out_str(o, "\"sites\":[");
	mb_site_report_write(o, 1);
	mb_out_str(o, "],");

	size_t npb = 0, map_bytes = 0;
	struct pb_entry *pbs = snapshot_pageblocks(&npb, &map_bytes);
	mb_out_str(o, "\"pageblocks\":[");
	for (size_t i = 0; i < npb; i++)
		mb_out_fmt(o, "%s{\"index\":%zu,\"owner\":\"%s\",\"used_pages\":%u,\"resident\":%s}", i ? "," : "", i,
			   owner_name(pbs[i].owner), pbs[i].used, pbs[i].resident ? "true" : "false");
	mb_out_str(o, "]}\n");
	if (pbs)
		mb_os_unreserve(pbs, map_bytes);
}

/* Under dump_lock. */
static int write_report(int fd, int format, int trigger)
{
	static struct mb_out out; /* 8 KiB kept off the stack */
	static struct mb_snapshot snap;
	mb_out_init(&out, fd);
	mb_stats_snapshot(&snap);
	mb_stats_take_account(&snap);
	if (format == MB_STATS_JSON)
		write_json(&out, &snap, trigger);
	else
		write_text(&out, &snap, trigger);
	return mb_out_flush(&out);
}

int mb_stats_write(int fd, int format)
{
	mb_lock_acquire(&dump_lock);
	int rc = write_report(fd, format, MB_TRIGGER_API);
	mb_lock_release(&dump_lock);
	return rc;
}

/* ---- where and when to dump ---- */

/* A copy of the stream the report goes to (stderr, or stdout), taken at
 * start-up: programs such as coreutils close descriptors 1 and 2 before
 * the exit dump runs. A program may also close the copy and reuse its
 * number for a file of its own, so the report is only written to a
 * descriptor that still is the stream seen at start. */
#define STREAM_COPY_MIN 100 /* above the descriptors programs use first */
static int stream_fd = -1, stream_copy = -1;
static struct stat stream_at_start;

static int is_stream_at_start(int fd)
{
	struct stat st;
	return stream_fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == stream_at_start.st_dev &&
	       st.st_ino == stream_at_start.st_ino &&
	       (st.st_mode & S_IFMT) == (stream_at_start.st_mode & S_IFMT);
}

/* Where a report to the stream goes: the copy, else the stream's own
 * descriptor, whichever still is the one of the start; -1 if neither is. */
static int stream_target(void)
{
	if (stream_copy >= 0 && is_stream_at_start(stream_copy))
		return stream_copy;
	return stream_fd >= 0 && is_stream_at_start(stream_fd) ? stream_fd : -1;
}

/* Where the reports go when not to a file: MBUDDY_STATS's stream, or
 * stderr for a signal's report without MBUDDY_STATS. */
static int report_stream(void)
{
	return mb_opt.stats ? mb_opt.stats_fd : STDERR_FILENO;
}

/* A path of MBUDDY_STATS or MBUDDY_STATS_JSON_FILE, with every %p replaced by
 * the pid; -1 if that does not fit (a shortened path would name another
 * file). */
static int expand_path(const char *spec, char *path, size_t len)
{
	size_t n = 0;
	for (const char *p = spec; *p; p++) {
		if (n + 24 >= len) {
			errno = ENAMETOOLONG;
			return -1;
		}
		if (p[0] == '%' && p[1] == 'p') {
			n += (size_t)snprintf(path + n, len - n, "%d", (int)getpid());
			p++;
		} else {
			path[n++] = *p;
		}
	}
	path[n] = 0;
	return 0;
}

/* Whether fd holds a report of ours, text or JSON, by its first bytes. */
static int is_report(int fd, const char **why)
{
	char head[512];
	ssize_t n = pread(fd, head, sizeof head - 1, 0);
	head[n > 0 ? n : 0] = 0;
	if (strncmp(head, REPORT_TEXT_HEAD, strlen(REPORT_TEXT_HEAD)) == 0 ||
	    (strncmp(head, REPORT_JSON_HEAD, strlen(REPORT_JSON_HEAD)) == 0 && strstr(head, REPORT_JSON_MARK)))
		return 1;
	*why = "is not a libmbuddy report";
	return 0;
}

/* The report goes to a new file at path, or replaces an earlier report
 * (through a temporary file renamed over it). Anything else at path is
 * refused, with *why saying why. Under dump_lock. */
static int write_file(const char *path, int format, int trigger, const char **why)
{
	static struct mb_file f;
	*why = NULL;
	if (mb_file_create(&f, path) < 0) {
		if (errno != EEXIST)
			return -1;
		struct stat st;
		int fd = mb_file_open_regular(path, 0, &st, why);
		if (fd < 0)
			return -1;
		int replace = mb_file_may_replace(&st, why) && is_report(fd, why);
		close(fd);
		if (!replace || mb_file_replace(&f, path, &st, 0600) < 0)
			return -1;
	}
	if (write_report(f.fd, format, trigger) != 0) {
		mb_file_abandon(&f);
		return -1;
	}
	return mb_file_commit(&f, why);
}

static void warn_once(int *reported, const char *path, const char *why)
{
	if (*reported)
		return;
	*reported = 1;
	if (why)
		mb_warn("cannot write statistics to %s: it %s (a report is only written to a new file "
			"or over an earlier report)", path, why);
	else
		mb_warn("cannot write statistics to %s: %s", path, strerror(errno));
}

/* A report to a file: spec is a path with %p for the pid. Under dump_lock. */
static void dump_to_file(const char *spec, int format, int trigger, int *reported)
{
	static char path[PATH_MAX];
	const char *why = NULL;
	if (expand_path(spec, path, sizeof path) != 0)
		warn_once(reported, spec, NULL);
	else if (write_file(path, format, trigger, &why) != 0)
		warn_once(reported, path, why);
}

/* The report MBUDDY_STATS asks for: to its stream, or to its file. */
static void dump_now(int trigger)
{
	int saved = errno;
	mb_lock_acquire(&dump_lock);
	if (report_stream() >= 0) {
		int fd = stream_target();
		/* No stream left: nowhere to write the report (nor, for
		 * stderr, to warn). */
		if (fd >= 0 && write_report(fd, mb_opt.stats_format, trigger) != 0)
			warn_once(&dump_error_reported, report_stream() == STDOUT_FILENO ? "stdout" : "stderr", NULL);
	} else {
		dump_to_file(mb_opt.stats, mb_opt.stats_format, trigger, &dump_error_reported);
	}
	mb_lock_release(&dump_lock);
	errno = saved;
}

/* MBUDDY_STATS_PID names the one process that writes exit reports (the
 * program a launcher started, through its execs); unset, every process. */
static int reports_at_exit(void)
{
	return !mb_opt.stats_pid || mb_opt.stats_pid == (int)getpid();
}

void mb_stats_dump_at_exit(void)
{
	static int json_error_reported;
	if (exit_dumped || !reports_at_exit())
		return;
	exit_dumped = 1;
	if (mb_opt.stats)
		dump_now(MB_TRIGGER_EXIT);
	if (mb_opt.stats_json_file) {
		int saved = errno;
		mb_lock_acquire(&dump_lock);
		dump_to_file(mb_opt.stats_json_file, MB_STATS_JSON, MB_TRIGGER_EXIT, &json_error_reported);
		mb_lock_release(&dump_lock);
		errno = saved;
	}
}

void mb_stats_dump_requested(void)
{
	dump_now(MB_TRIGGER_SIGNAL);
}

void mb_stats_fork_child(void)
{
	mb_lock_after_fork_child(&dump_lock, 0);
	mb_stats_snapshot_fork_child();
}

void mb_stats_init(void)
{
	int fd = report_stream();
	if ((mb_opt.stats || mb_opt.stats_signal) && fd >= 0 && fstat(fd, &stream_at_start) == 0) {
		stream_fd = fd;
		stream_copy = fcntl(fd, F_DUPFD_CLOEXEC, STREAM_COPY_MIN);
	}
}
