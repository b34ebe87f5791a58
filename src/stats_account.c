#include "config.h"
#include "stats_account.h"
#include "reclaim_type.h"
#include "region.h"

/* The rows of the account: the parts of the resident set, each once, in
 * the order the text shows them. */
#define F(m) offsetof(struct mb_account, m)
static const struct row {
	const char *key;   /* JSON */
	const char *label; /* text */
	size_t at;
} rows[] = {
	{ "resident_bytes", "resident (process RSS)", F(rss) },
	{ "small_requested_bytes", "  heap: small objects, bytes asked for", F(small_requested) },
	{ "small_rounding_bytes", "        rounding up to their size class", F(small_rounding) },
	{ "large_requested_bytes", "        large objects, bytes asked for", F(large_requested) },
	{ "large_rounding_bytes", "        rounding up to whole pages", F(large_rounding) },
	{ "slab_free_bytes", "        free objects in slabs", F(slab_free) },
	{ "slab_free_current_bytes", "          in slabs threads allocate from", F(slab_free_where[MB_ACC_CURRENT]) },
	{ "slab_free_partial_bytes", "          in threads' other slabs", F(slab_free_where[MB_ACC_PARTIAL]) },
	{ "slab_free_full_bytes", "          freed by other threads", F(slab_free_where[MB_ACC_FULL]) },
	{ "slab_free_abandoned_bytes", "          in slabs of exited threads", F(slab_free_where[MB_ACC_ABANDONED]) },
	{ "slab_free_cached_bytes", "          in threads' caches", F(slab_free_where[MB_ACC_CACHED]) },
	{ "slab_tail_bytes", "        slab tails past the last object", F(slab_tail) },
	{ "run_cache_bytes", "        page runs cached by threads", F(run_cache) },
	{ "free_pages_bytes", "        free pages not yet returned", F(free_pages) },
	{ "metadata_bytes", "  allocator metadata (out of band)", F(meta_rss) },
	{ "metadata_page_records_bytes", "    page records of the heap", F(meta_use[MB_USE_PAGES]) },
	{ "metadata_arena_bytes", "    slab descriptors, thread heaps", F(meta_use[MB_USE_ARENA]) },
	{ "metadata_sites_bytes", "    call-site tables", F(meta_use[MB_USE_SITES]) },
	{ "metadata_samples_bytes", "    samples", F(meta_use[MB_USE_SAMPLES]) },
	{ "metadata_other_bytes", "    other", F(meta_use[MB_USE_OTHER]) },
	{ "file_bytes", "  not heap: program and libraries", F(file_rss) },
	{ "stack_bytes", "            main stack", F(stack_rss) },
	{ "other_anonymous_bytes", "            other anonymous memory", F(anon_rss) },
	{ "heap_region_bytes", NULL, F(heap_rss) },
};
#undef F

static uint64_t value(const struct mb_account *a, const struct row *r)
{
	return *(const uint64_t *)((const char *)a + r->at);
}

static double mib(uint64_t b)
{
	return (double)b / (1 << 20);
}

static void text_sum(struct mb_out *o, const struct mb_account *a)
{
	uint64_t sum = mb_account_sum(a);
	mb_out_fmt(o, " %8.1f (%5.1f%%)", mib(sum), a->rss ? 100.0 * (double)sum / (double)a->rss : 0.0);
}

/* Whether an account of a resident set of rss bytes was taken at the
 * peak, hwm: an account is taken each time the resident set has grown a
 * tenth (account.c), so one within that of the high-water mark is. One
 * further below missed the peak between two accounts (a process that grew
 * faster than the accounts' cost lets them follow, or in its first
 * 50 ms). */
static int at_the_peak(uint64_t rss, uint64_t hwm)
{
	return hwm == 0 || rss * 11 >= hwm * 10;
}

void mb_stats_write_account_text(struct mb_out *o, const struct mb_account *now, const struct mb_account *peak,
				 uint64_t hwm)
{
	int at_peak = peak && at_the_peak(peak->rss, hwm);
	if (!peak)
		mb_out_str(o, "Where the resident memory is (MiB: now)\n");
	else if (at_peak)
		mb_out_str(o, "Where the resident memory is (MiB: now, and at the peak)\n");
	else
		mb_out_fmt(o, "Where the resident memory is (MiB: now, and at the largest account: the peak, %.1f, "
			   "came between two accounts)\n", mib(hwm));
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
		if (!rows[i].label)
			continue;
		mb_out_fmt(o, "  %-42s %8.1f", rows[i].label, mib(value(now, &rows[i])));
		if (peak)
			mb_out_fmt(o, " %8.1f", mib(value(peak, &rows[i])));
		mb_out_str(o, "\n");
	}
	mb_out_fmt(o, "  %-42s", "sum of the parts (% of RSS)");
	text_sum(o, now);
	if (peak)
		text_sum(o, peak);
	mb_out_str(o, "\n");
	const struct mb_account *a = peak ? peak : now;
	mb_out_fmt(o, "  free bytes in slabs%s by type:", !peak ? "" : at_peak ? " at the peak" : " at the largest account");
	for (int t = 0; t < MB_NTYPES; t++)
		mb_out_fmt(o, " %s %.1f MiB%s", mb_type_names[t], mib(a->slab_free_type[t]), t + 1 < MB_NTYPES ? "," : "\n");
	/* The classes that hold the most: where slab sizes or spacing cost. */
	unsigned top[4] = { 0 }, ntop = 0;
	for (unsigned c = 0; c < MB_NCLASSES; c++) {
		unsigned pos = ntop < 4 ? ntop++ : 4;
		while (pos > 0 && a->slab_free_class[top[pos - 1]] < a->slab_free_class[c]) {
			if (pos < 4)
				top[pos] = top[pos - 1];
			pos--;
		}
		if (pos < 4)
			top[pos] = c;
	}
	/* Under the free bytes in slabs, whose split it is. */
	mb_out_str(o, "    by size class, the most:");
	for (unsigned i = 0; i < ntop; i++)
		mb_out_fmt(o, " %u B %.2f MiB%s", mb_classes[top[i]].size, mib(a->slab_free_class[top[i]]),
			   i + 1 < ntop ? "," : "\n");
	mb_out_str(o, "  free pages not yet returned, by the pageblock's type:");
	for (int t = 0; t <= MB_NTYPES; t++)
		mb_out_fmt(o, " %s %.1f MiB%s", t < MB_NTYPES ? mb_type_names[t] : "pool", mib(a->free_pages_type[t]),
			   t < MB_NTYPES ? "," : "\n");
	mb_out_str(o, "\n");
}

static void json_one(struct mb_out *o, const char *name, const struct mb_account *a)
{
	mb_out_fmt(o, "\"%s\":{", name);
	for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
		mb_out_fmt(o, "\"%s\":%llu,", rows[i].key, (unsigned long long)value(a, &rows[i]));
	mb_out_str(o, "\"slab_free_by_type\":{");
	for (int t = 0; t < MB_NTYPES; t++)
		mb_out_fmt(o, "%s\"%s\":%llu", t ? "," : "", mb_type_names[t], (unsigned long long)a->slab_free_type[t]);
	mb_out_str(o, "},\"free_pages_by_owner\":{");
	for (int t = 0; t <= MB_NTYPES; t++)
		mb_out_fmt(o, "%s\"%s\":%llu", t ? "," : "", t < MB_NTYPES ? mb_type_names[t] : "pool",
			   (unsigned long long)a->free_pages_type[t]);
	mb_out_str(o, "},\"slab_free_by_class\":{");
	for (unsigned c = 0; c < MB_NCLASSES; c++)
		mb_out_fmt(o, "%s\"%u\":%llu", c ? "," : "", mb_classes[c].size, (unsigned long long)a->slab_free_class[c]);
	mb_out_fmt(o, "},\"sum_of_parts_bytes\":%llu,\"mappings_not_listed\":%llu,\"read_from\":\"%s\"},",
		   (unsigned long long)mb_account_sum(a), (unsigned long long)a->mappings_unknown,
		   a->by_mapping ? "smaps" : "smaps_rollup");
}

void mb_stats_write_account_json(struct mb_out *o, const struct mb_account *now, const struct mb_account *peak)
{
	json_one(o, "account", now);
	if (peak)
		json_one(o, "account_at_peak", peak);
}
