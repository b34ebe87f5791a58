#include "config.h"
#include "site_report.h"
#include "site.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#define TOP_SITES 20

static void symbolize(void *pc, char *out, size_t len)
{
	Dl_info info;
	if (dladdr(pc, &info) && info.dli_fname) {
		const char *lib = strrchr(info.dli_fname, '/');
		lib = lib ? lib + 1 : info.dli_fname;
		if (info.dli_sname)
			snprintf(out, len, "%s+0x%lx (%s)", info.dli_sname,
				 (unsigned long)((uintptr_t)pc - (uintptr_t)info.dli_saddr), lib);
		else
			snprintf(out, len, "0x%lx (%s)", (unsigned long)((uintptr_t)pc - (uintptr_t)info.dli_fbase), lib);
	} else {
		snprintf(out, len, "%p", pc);
	}
}

/* A site that is no wrapper is listed once: its deep sites count the
 * same samples again and decide nothing. A wrapper is listed with the
 * callers behind it (its deep sites), which split its samples. */
static int listed(const struct mb_site *s)
{
	return !s->is_deep || (mb_site_flags(s->parent) & MB_SITE_WRAPPER) != 0;
}

/* What is written of a site, copied under the lock. */
struct row {
	struct mb_site s;
	int key, flags;
};

void mb_site_report_write(struct mb_out *o, int json)
{
	if (!mb_site_slots)
		return;
	struct mb_site *top[TOP_SITES];
	static struct row rows[TOP_SITES]; /* the report is written under its own lock */
	int n = 0;
	/* The top sites by sampled bytes under the lock; symbolised after. */
	mb_site_lock();
	for (size_t i = 0; i < mb_site_count_locked(); i++) {
		struct mb_site *s = mb_site_nth_locked(i);
		if (!s->samples || !listed(s))
			continue;
		int pos = n < TOP_SITES ? n++ : TOP_SITES;
		while (pos > 0 && top[pos - 1]->sampled_bytes < s->sampled_bytes) {
			if (pos < TOP_SITES)
				top[pos] = top[pos - 1];
			pos--;
		}
		if (pos < TOP_SITES)
			top[pos] = s;
	}
	for (int i = 0; i < n; i++) {
		rows[i].s = *top[i];
		rows[i].key = mb_site_key(top[i]);
		rows[i].flags = mb_site_flags(top[i]);
	}
	mb_site_unlock();

	if (!json)
		mb_out_fmt(o, "Call sites (top %d by sampled bytes; the 'D' rows split a wrapper's row by the callers behind it)\n"
			      "  %-10s %4s %7s %10s %10s %13s %6s %5s  %s\n", TOP_SITES, "type", "lane", "samples", "bytes",
			   "live(est)", "lifetime", "freed", "flags", "frames (function+offset (library))");
	for (int i = 0; i < n; i++) {
		const struct mb_site *s = &rows[i].s;
		int key = rows[i].key, flags = rows[i].flags, type = mb_key_type(key);
		int lane = key >= MB_FIRST_LANE ? key : 0;
		double life = s->freed ? (double)s->lifetime_sum / (double)s->freed : 0;
		long long live = s->live_estimate > 0 ? s->live_estimate : 0;
		char fr[3][160] = { "", "", "" };
		int nf = 0;
		for (int k = 0; k < s->nframes && nf < 3; k++)
			symbolize(s->frames[k], fr[nf++], sizeof fr[0]);
		if (json) {
			mb_out_fmt(o, "%s{\"type\":\"%s\",\"lane\":%d,\"samples\":%llu,\"sampled_bytes\":%llu,"
				      "\"live_bytes_estimate\":%lld,\"freed_samples\":%llu,\"mean_lifetime_bytes\":%.0f,"
				      "\"evidence\":{\"young\":%d,\"freed_late\":%d,\"lasting\":%d,\"old\":%d},\"wrapper\":%s,\"deep\":%s,\"pinned_by_rule\":%s,\"frames\":[",
				   i ? "," : "", mb_type_names[type], lane, (unsigned long long)s->samples,
				   (unsigned long long)s->sampled_bytes, live, (unsigned long long)s->freed, life,
				   s->n_short, s->n_medium, s->n_lasting, s->n_old + s->n_prior_old, (flags & MB_SITE_WRAPPER) ? "true" : "false",
				   s->is_deep ? "true" : "false", (flags & MB_SITE_PINNED) ? "true" : "false");
			for (int k = 0; k < nf; k++) {
				if (k)
					mb_out_str(o, ",");
				mb_out_json_str(o, fr[k]);
			}
			mb_out_str(o, "]}");
		} else {
			char fl[8] = "";
			if (flags & MB_SITE_WRAPPER)
				strcat(fl, "W");
			if (s->is_deep)
				strcat(fl, "D");
			if (flags & MB_SITE_PINNED)
				strcat(fl, "R");
			if (flags & MB_SITE_LEARNING)
				strcat(fl, "L");
			char lanebuf[12] = "-";
			if (lane)
				snprintf(lanebuf, sizeof lanebuf, "%d", lane);
			mb_out_fmt(o, "  %-10s %4s %7llu %10llu %10lld %9.1f MiB %6llu %5s  %s", mb_type_names[type], lanebuf,
				   (unsigned long long)s->samples, (unsigned long long)s->sampled_bytes, live,
				   life / (1 << 20), (unsigned long long)s->freed, fl, fr[0]);
			for (int k = 1; k < nf; k++)
				mb_out_fmt(o, " < %s", fr[k]);
			mb_out_str(o, "\n");
		}
	}
	if (!json)
		mb_out_str(o, "  (lane: a key of its own, given on evidence; live(est): bytes of its live objects, estimated\n"
			      "   from its live samples; lifetime: mean bytes allocated between a sampled object's malloc and\n"
			      "   free; flags: W wrapper, D deep site, R type fixed by a rule, L still learning)\n\n");
}
