#include "config.h"
#include "site_report.h"
#include "site.h"
#include "symbolize.h"

#include <stdio.h>
#include <string.h>

#define TOP_SITES 20
#define ROW_FRAMES 3

/* function+offset (library), 0xoffset (library) or the bare address. */
static void frame_text(void *pc, const struct mb_symbol *sym, char *out, size_t len)
{
	if (sym->object) {
		const char *lib = strrchr(sym->object, '/');
		lib = lib ? lib + 1 : sym->object;
		if (sym->name)
			snprintf(out, len, "%s+0x%lx (%s)", sym->name, (unsigned long)sym->offset, lib);
		else
			snprintf(out, len, "0x%lx (%s)", (unsigned long)sym->offset, lib);
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

/* Insert s into top[0, *n), kept in decreasing sampled bytes, at most
 * `cap` long. */
static void rank(struct mb_site **top, int *n, int cap, struct mb_site *s)
{
	int pos = *n < cap ? (*n)++ : cap;
	while (pos > 0 && top[pos - 1]->sampled_bytes < s->sampled_bytes) {
		if (pos < cap)
			top[pos] = top[pos - 1];
		pos--;
	}
	if (pos < cap)
		top[pos] = s;
}

void mb_site_report_write(struct mb_out *o, int json)
{
	if (!mb_site_table)
		return;
	struct mb_site *top[2 * TOP_SITES];
	static struct row rows[2 * TOP_SITES]; /* the report is written under its own lock */
	int n = 0, more = 0;
	/* Under the lock, the top sites by sampled bytes, then the sites set
	 * apart that are not among them (a site set apart on little volume,
	 * or pinned by a rule and no longer sampled, would not show); named
	 * after. */
	mb_site_lock();
	for (size_t i = 0; i < mb_site_count_locked(); i++) {
		struct mb_site *s = mb_site_nth_locked(i);
		if (s->samples && listed(s))
			rank(top, &n, TOP_SITES, s);
	}
	for (size_t i = 0; i < mb_site_count_locked(); i++) {
		struct mb_site *s = mb_site_nth_locked(i);
		if (!listed(s) || !mb_site_set_apart(s))
			continue;
		int in_top = 0;
		for (int k = 0; k < n && !in_top; k++)
			in_top = top[k] == s;
		if (!in_top)
			rank(top + n, &more, TOP_SITES, s);
	}
	n += more;
	for (int i = 0; i < n; i++) {
		rows[i].s = *top[i];
		rows[i].key = mb_site_key(top[i]);
		rows[i].flags = mb_site_flags(top[i]);
	}
	mb_site_unlock();

	/* Every frame named at once: one pass over each object's symbols. */
	static void *pcs[2 * TOP_SITES * ROW_FRAMES];
	static struct mb_symbol syms[2 * TOP_SITES * ROW_FRAMES];
	size_t npc = 0;
	for (int i = 0; i < n; i++)
		for (int k = 0; k < rows[i].s.nframes && k < ROW_FRAMES; k++)
			pcs[npc++] = rows[i].s.frames[k];
	mb_symbolize(pcs, npc, syms);
	npc = 0;

	if (!json)
		mb_out_fmt(o, "Call sites (top %d by sampled bytes, then up to %d more set apart from the default type;"
			      " the 'D' rows split a wrapper's row by the callers behind it)\n"
			      "  %-10s %4s %7s %10s %10s %13s %6s %5s  %s\n", TOP_SITES, TOP_SITES, "type", "lane", "samples", "bytes",
			   "live(est)", "lifetime", "freed", "flags", "frames (function+offset (library))");
	for (int i = 0; i < n; i++) {
		const struct mb_site *s = &rows[i].s;
		int key = rows[i].key, flags = rows[i].flags, type = mb_key_type(key);
		int lane = key >= MB_FIRST_LANE ? key : 0;
		double life = s->freed ? (double)s->lifetime_sum / (double)s->freed : 0;
		long long live = s->live_estimate > 0 ? s->live_estimate : 0;
		char fr[ROW_FRAMES][160] = { "", "", "" };
		int nf = 0;
		for (int k = 0; k < s->nframes && nf < ROW_FRAMES; k++, npc++)
			frame_text(s->frames[k], &syms[npc], fr[nf++], sizeof fr[0]);
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
