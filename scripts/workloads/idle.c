/* Memory given back while the program is idle.
 *
 * A load spike (loadspike.h) grows the heap to about CACHE_BYTES +
 * PINNED_BYTES live, then ends: the cache and the temporaries are freed,
 * leaving the pinned objects (about 15% with the sizes make bench uses).
 * The program then goes idle, making no allocator call at all, and
 * samples its own RSS (from /proc/self/statm, without allocating) 0, 0.5,
 * 1.0, 1.5 and 2.0 s after the last free. An allocator that returns
 * memory only from inside malloc or free never gets the chance here.
 *
 * Usage: idle CACHE_BYTES PINNED_BYTES
 * Prints: RESULT workload=idle live_bytes=.. rss_peak=.. rss_0ms=.. rss_500ms=..
 *         rss_1000ms=.. rss_1500ms=.. rss_2000ms=.. work_sec=.. pinned_objs=..
 *   live_bytes: the pinned bytes as requested; work_sec: time of the load
 *   and the drop, without the idle time.
 */
#include "loadspike.h"

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s CACHE_BYTES PINNED_BYTES\n", argv[0]);
		return 1;
	}
	static struct spike s = { .rng = { 0x6A09E667F3BCC908ULL } };
	double t0 = now_sec();
	spike_load(&s, parse_size(argv[1]), parse_size(argv[2]));
	size_t rss_peak = rss_bytes();
	spike_drop(&s);
	double t_drop = now_sec();

	/* Idle: sleeps and reads of statm only. */
	static const int at_ms[] = { 0, 500, 1000, 1500, 2000 };
	size_t rss[5];
	for (int i = 0; i < 5; i++) {
		double wait = t_drop + at_ms[i] / 1000.0 - now_sec();
		if (wait > 0)
			sleep_sec(wait);
		rss[i] = rss_bytes();
	}

	size_t bad = spike_corrupted(&s);
	if (bad) {
		fprintf(stderr, "FATAL: %zu pinned objects corrupted\n", bad);
		return 3;
	}
	printf("RESULT workload=idle live_bytes=%zu rss_peak=%zu rss_0ms=%zu rss_500ms=%zu "
	       "rss_1000ms=%zu rss_1500ms=%zu rss_2000ms=%zu work_sec=%.3f pinned_objs=%zu\n",
	       s.pinned_bytes, rss_peak, rss[0], rss[1], rss[2], rss[3], rss[4], t_drop - t0,
	       s.pinned_objs);
	return 0;
}
