/* gen: a synthetic allocation workload made from a seed and a few shape
 * parameters, for judging a typed heap against an untyped one on a whole
 * family of programs (scripts/sweep.py draws the parameters from a seed).
 *
 * The program has N call sites (3-2,000 distinct return addresses of
 * malloc, see gen_sites.h). Each site puts its objects into "sinks" that
 * decide how long they live:
 *   pinned  never freed; grows through the run
 *   cache   a byte budget with FIFO, LRU (clock, hot entries re-referenced)
 *           or random eviction, turning over TAU times during the churn
 *   temp    K slots, a new object replaces a random one: lifetimes are
 *           geometric, the slots turn over TAU times during the churn
 *   free    freed as soon as it is written (or handed to another thread)
 * TAU is drawn per sink from --cache-tau and --temp-tau; a run longer than
 * --max-ops allocations scales the temporaries' TAU down first (they live
 * longer), the caches' only if they alone would take half of it; the
 * report gives the turnovers that were used.
 * A plain site feeds one sink; a "mixed" site feeds a pinned list, a cache,
 * temporaries and immediate frees at once: its objects have every lifetime.
 * Sizes per site: a fixed size, a small or a medium range, and on some
 * sites a share of page-sized and larger objects (4 KiB up to --max-big).
 * The budgets add up to FILL % of the heap cap (--cap; under libmbuddy it
 * is MBUDDY_HEAP_SIZE, for other allocators only the scale of the load).
 *
 * The run: W warm-up rounds fill the caches, temps and part of the pinned
 * data,
 * then A rounds churn; after each churn round the program tries to
 * allocate one block of 2^(MAX_ORDER-1) pages (4 MiB, the kernel patch's
 * order-10 experiment) and frees it at once. Halfway through the churn,
 * pairs of sites swap what they do (--change). With T threads each site
 * and each sink belongs to a thread; objects whose sink is another thread's
 * are handed over and freed there. A full heap makes a thread evict from
 * its caches and retry, as a program that reclaims under pressure would;
 * the live fill at the first failed allocation is recorded. Then the
 * caches and temporaries are dropped, the pinned data stays: RSS right
 * after the drop, after --idle-ms without any allocator call, and after
 * malloc_trim(0). With --fill-to-fail the program finally allocates small
 * objects until malloc fails and reports the fill reached.
 *
 * Output: one line of JSON on stdout. Exit status 0, 1 on bad arguments,
 * 2 on a failed system call, 3 if an object was found corrupted.
 * The harness's own tables are mmap()ed, not malloc()ed: the allocator
 * under test sees only the workload's objects. */
#include "gen.h"
#include "gen_sinks.h"
#include "gen_model.h"
#include "gen_options.h"

/* ---- running ---- */

/* Where pinned data should stand at `at` rounds into the run: a ramp to
 * pinned_start of the budget through the warm-up, then on to all of it. */
static double pinned_target(const struct sink *s, double at)
{
	double f = at <= P.warm ? P.pinned_start * at / P.warm
				: P.pinned_start + (1 - P.pinned_start) * (at - P.warm) / P.attempts;
	return f * s->budget;
}

/* Whether n more bytes fit below target. An object that crosses it fits
 * with the odds of the room left, so that sinks whose budget is smaller
 * than their objects do not all overshoot: on average they hold their
 * budget. */
static int fits(struct thr *t, size_t have, double target, size_t n)
{
	if ((double)have >= target)
		return 0;
	return (double)(have + n) <= target || rng_unit(&t->rng) * (double)n < target - (double)have;
}

/* Top a sink up to `target` bytes with objects of its feeders; a full heap
 * (the allocation needed relief) ends the top-up. */
static void top_up(struct thr *t, struct sink *s, double target)
{
	int nf = s->feeders < 8 ? s->feeders : 8;
	unsigned long pressure = t->pressure;
	while ((double)s->bytes < target && nf && t->pressure == pressure) {
		double u = rng_unit(&t->rng);
		int f = 0;
		while (f + 1 < nf && u >= s->feeder_cum[f])
			f++;
		const struct behav *b = &behavs[s->feeder[f]];
		size_t n = draw_size(&t->rng, &b->sz);
		if (!fits(t, s->bytes, target, n))
			return;
		struct obj *o = alloc_obj(t, b, n, (int)(s - sinks));
		if (!o)
			return;
		size_t before = s->bytes;
		if (s->kind == S_TEMP)
			temp_fill(t, s, o);
		else
			sink_insert(t, o);
		if (s->bytes < before + n)
			return; /* a full sink freed some: it stands where it can */
	}
}

/* Bring the thread's pinned data and, in the warm-up, its caches to where
 * they should stand at t->at. */
static void top_up_all(struct thr *t)
{
	for (int k = 0; k < t->nsinks; k++) {
		struct sink *s = &sinks[t->sinks[k]];
		if (s->kind == S_PINNED)
			top_up(t, s, pinned_target(s, t->at));
		else if ((s->kind == S_CACHE || s->kind == S_TEMP) && t->at <= P.warm)
			top_up(t, s, s->budget * t->at / P.warm);
	}
}

static void one_op(struct thr *t)
{
	double u = rng_unit(&t->rng);
	int lo = 0, hi = t->nb - 1;
	while (lo < hi) {
		int mid = (lo + hi) / 2;
		if (u < t->cum[mid])
			hi = mid;
		else
			lo = mid + 1;
	}
	const struct behav *b = &behavs[t->behav[lo]];
	double v = rng_unit(&t->rng);
	int c = 0;
	while (c + 1 < b->ncomp && v >= b->comp[c].cum)
		c++;
	int sink = b->comp[c].sink;
	t->ops++;
	size_t n = draw_size(&t->rng, &b->sz);
	/* Pinned data grows on its schedule, no faster. */
	if (sinks[sink].kind == S_PINNED && !fits(t, sinks[sink].bytes, pinned_target(&sinks[sink], t->at), n)) {
		t->skipped++;
		return;
	}
	struct obj *o = alloc_obj(t, b, n, sink);
	if (o)
		deliver(t, o);
}

static void run_round(struct thr *t, int round)
{
	t->ops_carry += t->ops_per_round;
	long ops = (long)t->ops_carry;
	t->ops_carry -= (double)ops;
	for (int step = 0; step < STEPS; step++) {
		long from = ops * step / STEPS, to = ops * (step + 1) / STEPS;
		t->at = round + (double)(step + 1) / STEPS;
		for (long i = from; i < to; i++) {
			if (i % DRAIN_EVERY == 0)
				drain_inbox(t);
			one_op(t);
		}
		top_up_all(t);
	}
	drain_inbox(t);
}

/* One attempt at a block of the heap's largest order, freed at once. */
static int attempt(void)
{
	unsigned char *p = malloc(P.order_bytes);
	if (!p)
		return 0;
	p[0] = 1;
	p[P.order_bytes - 1] = 1;
	free(p);
	return 1;
}

static void swap_sites(void)
{
	for (int i = 0; i < P.sites; i++) {
		int j = behavs[i].swap_with;
		if (j > i) {
			int fn = behavs[i].fn;
			behavs[i].fn = behavs[j].fn;
			behavs[j].fn = fn;
		}
	}
}

/* Thread 0's part between the barriers of a round. */
static void between_rounds(int round)
{
	double live = (double)live_total();
	if (live > live_max)
		live_max = live;
	if (round == P.warm - 1)
		live_warm = live;
	if (round >= P.warm) {
		int ok = attempt();
		successes += ok;
		timeline[round - P.warm] = ok ? 'S' : '.';
		live_sum_at_attempts += live;
	}
	if (round == P.warm + P.attempts / 2 - 1)
		swap_sites();
}

static void drop(struct thr *t)
{
	drain_inbox(t);
	for (int k = 0; k < t->nsinks; k++) {
		struct sink *s = &sinks[t->sinks[k]];
		if (s->kind == S_CACHE) {
			struct obj *v;
			while ((v = cache_victim(t, s)))
				release(t, v);
		} else if (s->kind == S_TEMP) {
			for (size_t i = 0; i < s->cap; i++)
				if (s->slot[i])
					release(t, s->slot[i]);
		} else {
			continue;
		}
		unmap(s->slot, s->cap * sizeof *s->slot);
		s->slot = NULL;
		s->bytes = s->count = s->cap = 0;
	}
}

static struct {
	double t0, wall, user, sys;
	long minflt;
	struct rusage ru0;
	double live_kind[4]; /* by enum sink_kind, before the drop */
	size_t rss_start, rss_before_drop, rss_drop, rss_idle, rss_trim;
	int64_t live_drop;
} M;

static double tv_diff(struct timeval a, struct timeval b)
{
	return (double)(a.tv_sec - b.tv_sec) + (double)(a.tv_usec - b.tv_usec) * 1e-6;
}

/* CPU time and page faults of the whole process since M.ru0. */
static void usage_since_start(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	M.user = tv_diff(ru.ru_utime, M.ru0.ru_utime);
	M.sys = tv_diff(ru.ru_stime, M.ru0.ru_stime);
	M.minflt = ru.ru_minflt - M.ru0.ru_minflt;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
		;
}

static void wait_all(void)
{
	int rc = pthread_barrier_wait(&barrier);
	if (rc != 0 && rc != PTHREAD_BARRIER_SERIAL_THREAD) {
		errno = rc;
		die("pthread_barrier_wait");
	}
}

static void *thread_main(void *arg)
{
	struct thr *t = arg;
	for (int round = 0; round < P.warm + P.attempts; round++) {
		run_round(t, round);
		wait_all();
		if (t->id == 0)
			between_rounds(round);
		wait_all();
	}
	if (t->id == 0) {
		M.rss_before_drop = rss_bytes();
		for (int k = 0; k < nsinks; k++)
			M.live_kind[sinks[k].kind] += (double)sinks[k].bytes;
		if (P.stats_signal) {
			/* libmbuddy writes the report asked for at its next large
			 * allocation: make one now, before the drop. */
			raise(P.stats_signal);
			void *p = malloc((size_t)1 << 20);
			__asm__ volatile("" : : "r"(p) : "memory"); /* not optimised away */
			free(p);
		}
	}
	wait_all();
	drop(t);
	wait_all();
	if (t->id == 0) {
		M.wall = now_sec() - M.t0;
		usage_since_start();
		M.live_drop = live_total();
		M.rss_drop = rss_bytes();
		sleep_ms(P.idle_ms);
		M.rss_idle = rss_bytes();
		malloc_trim(0);
		M.rss_trim = rss_bytes();
	}
	wait_all();
	return NULL;
}

/* Small objects from a site of their own until malloc fails: the fill the
 * heap reaches, or -1 if 2x the cap went by without a failure. The objects
 * are neither written (only the allocator's placement counts here, and
 * page faults would triple the time) nor freed: the program ends next. */
static double fill_until_failure(double *sec)
{
	struct rng r = { P.seed * 2 + 1 };
	double filled = 0, t0 = now_sec();
	int fn = GEN_NSITES - 1;
	for (int i = 0; i < P.sites; i++)
		if (behavs[i].fn == fn) {
			fn--;
			i = -1; /* look again: the site must be no behaviour's */
		}
	double fill = -1;
	while (filled < 2.0 * (double)P.cap) {
		size_t n = rng_logsize(&r, 64, 2048);
		if (!gen_site_fns[fn](n, 0)) {
			fill = ((double)M.live_drop + filled) / (double)P.cap;
			break;
		}
		filled += (double)n;
	}
	*sec = now_sec() - t0;
	return fill;
}

/* The pinned data must have come through intact. */
static size_t verify_pinned(int64_t *bytes)
{
	size_t n = 0;
	*bytes = 0;
	for (int k = 0; k < nsinks; k++) {
		for (struct obj *o = sinks[k].head; o; o = o->next, n++) {
			if (!intact(o) || o->sink != k)
				atomic_fetch_add(&corrupted, 1);
			*bytes += o->size;
		}
	}
	return n;
}

/* ---- the report ---- */

static void json_fill(const char *name, int set, int64_t live)
{
	if (set)
		printf(",\"%s\":%.4f", name, (double)live / (double)P.cap);
	else
		printf(",\"%s\":null", name);
}

static void report(double fill_fail, double fill_sec, size_t pinned_objs)
{
	unsigned long ops = 0, allocs = 0, frees = 0, handoffs = 0, pressure = 0, fails = 0, skipped = 0;
	double bytes = 0;
	for (int t = 0; t < P.threads; t++) {
		ops += thrs[t].ops;
		allocs += thrs[t].allocs;
		frees += thrs[t].frees;
		handoffs += thrs[t].handoffs;
		pressure += thrs[t].pressure;
		fails += thrs[t].load_failures;
		skipped += thrs[t].skipped;
		bytes += thrs[t].alloc_bytes;
	}
	int kinds[4] = { 0 }, skinds[4] = { 0 }, pols[3] = { 0 };
	for (int i = 0; i < P.sites; i++)
		kinds[behavs[i].kind]++;
	for (int k = 0; k < nsinks; k++) {
		skinds[sinks[k].kind]++;
		if (sinks[k].kind == S_CACHE)
			pols[sinks[k].policy]++;
	}
	printf("{\"workload\":\"gen\",\"seed\":%llu,\"cap\":%zu,\"fill_pct\":%g,\"sites\":%d,\"threads\":%d",
	       (unsigned long long)P.seed, P.cap, P.fill, P.sites, P.threads);
	printf(",\"site_kinds\":{\"pinned\":%d,\"cache\":%d,\"temp\":%d,\"mixed\":%d}", kinds[0], kinds[1],
	       kinds[2], kinds[3]);
	printf(",\"caches\":{\"fifo\":%d,\"lru\":%d,\"random\":%d},\"temp_sinks\":%d,\"free_sinks\":%d",
	       pols[0], pols[1], pols[2], skinds[S_TEMP], skinds[S_FREE]);
	double tau[2][2] = { { 1e300, 0 }, { 1e300, 0 } };
	for (int k = 0; k < nsinks; k++) {
		int i = sinks[k].kind == S_CACHE ? 0 : sinks[k].kind == S_TEMP ? 1 : -1;
		if (i >= 0 && sinks[k].tau < tau[i][0])
			tau[i][0] = sinks[k].tau;
		if (i >= 0 && sinks[k].tau > tau[i][1])
			tau[i][1] = sinks[k].tau;
	}
	printf(",\"wrapped_sites\":%d,\"cache_tau\":[%.3g,%.3g],\"temp_tau\":[%.3g,%.3g]"
	       ",\"cache_tau_scale\":%.4f,\"temp_tau_scale\":%.4f", nwrapped, tau[0][0], tau[0][1],
	       skinds[S_TEMP] ? tau[1][0] : 0, tau[1][1], cache_tau_scale, temp_tau_scale);
	printf(",\"attempts\":%d,\"success\":%d,\"order_bytes\":%zu,\"timeline\":\"%s\"", P.attempts, successes,
	       P.order_bytes, timeline);
	printf(",\"live_max\":%.0f,\"live_after_warmup\":%.0f,\"live_mean_at_attempts\":%.0f", live_max,
	       live_warm, live_sum_at_attempts / P.attempts);
	printf(",\"live_before_drop\":{\"pinned\":%.0f,\"cache\":%.0f,\"temp\":%.0f}", M.live_kind[S_PINNED],
	       M.live_kind[S_CACHE], M.live_kind[S_TEMP]);
	printf(",\"live_after_drop\":%lld,\"pinned_objects\":%zu", (long long)M.live_drop, pinned_objs);
	printf(",\"rss_start\":%zu,\"rss_before_drop\":%zu,\"rss_after_drop\":%zu,\"rss_after_idle\":%zu,"
	       "\"rss_after_trim\":%zu,\"idle_ms\":%ld", M.rss_start, M.rss_before_drop, M.rss_drop, M.rss_idle,
	       M.rss_trim, P.idle_ms);
	json_fill("first_fail_fill", atomic_load(&first_fail_small_set), atomic_load(&first_fail_small_live));
	json_fill("first_fail_fill_any", atomic_load(&first_fail_any_set), atomic_load(&first_fail_any_live));
	if (P.fill_to_fail && fill_fail >= 0)
		printf(",\"fill_to_fail\":%.4f,\"fill_sec\":%.3f", fill_fail, fill_sec);
	else
		printf(",\"fill_to_fail\":null");
	printf(",\"ops\":%lu,\"allocs\":%lu,\"frees\":%lu,\"alloc_bytes\":%.0f,\"handoffs\":%lu,\"skipped\":%lu",
	       ops, allocs, frees, bytes, handoffs, skipped);
	printf(",\"pressure_events\":%lu,\"load_failures\":%lu,\"wall_sec\":%.4f,\"cpu_sec\":%.4f"
	       ",\"user_sec\":%.4f,\"sys_sec\":%.4f,\"minor_faults\":%ld}\n", pressure, fails, M.wall,
	       M.user + M.sys, M.user, M.sys, M.minflt);
}

int main(int argc, char **argv)
{
	parse_args(argc, argv);
	M.rss_start = rss_bytes();
	generate();
	int err = pthread_barrier_init(&barrier, NULL, (unsigned)P.threads);
	if (err) {
		errno = err;
		die("pthread_barrier_init");
	}
	pthread_t tid[MAX_THREADS];
	M.t0 = now_sec();
	getrusage(RUSAGE_SELF, &M.ru0);
	for (int t = 1; t < P.threads; t++) {
		err = pthread_create(&tid[t], NULL, thread_main, &thrs[t]);
		if (err) {
			errno = err;
			die("pthread_create");
		}
	}
	thread_main(&thrs[0]);
	for (int t = 1; t < P.threads; t++)
		pthread_join(tid[t], NULL);
	double fill_sec = 0, fill_fail = P.fill_to_fail ? fill_until_failure(&fill_sec) : -1;
	int64_t pinned_bytes;
	size_t pinned_objs = verify_pinned(&pinned_bytes);
	if (pinned_bytes != M.live_drop) {
		fprintf(stderr, "gen: live bytes after the drop %lld, pinned lists hold %lld\n",
			(long long)M.live_drop, (long long)pinned_bytes);
		return 3;
	}
	if (atomic_load(&corrupted)) {
		fprintf(stderr, "gen: %lu objects corrupted\n", atomic_load(&corrupted));
		return 3;
	}
	report(fill_fail, fill_sec, pinned_objs);
	return 0;
}

