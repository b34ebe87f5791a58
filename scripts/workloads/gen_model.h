/* Building the generated workload from its seed: the kinds of the sites,
 * their sizes, the sinks and their budgets, the bytes each carries through
 * the run, the sites that change mid-run, and each thread's share. */
#ifndef GEN_MODEL_H
#define GEN_MODEL_H

#include "gen.h"

/* ---- building the program from the seed ---- */

static void pick_sizes(struct rng *r, struct sizes *sz)
{
	static const uint32_t fixed[] = { 16, 24, 32, 48, 64, 96, 128, 192, 256, 512, 1024, 2048 };
	switch (rng_below(r, 3)) {
	case 0:
		sz->lo = sz->hi = fixed[rng_below(r, sizeof fixed / sizeof fixed[0])];
		break;
	case 1:
		sz->lo = 16 + (uint32_t)rng_below(r, 49);
		sz->hi = sz->lo * (1u << rng_below(r, 7));
		break;
	default:
		sz->lo = 16u << rng_below(r, 5);
		sz->hi = sz->lo * (1u << rng_below(r, 9));
		if (sz->hi > 8192)
			sz->hi = 8192;
		break;
	}
	if (chance(r, P.big_pct)) {
		static const uint32_t per1024[] = { 8, 32, 128, 512, 1024 };
		sz->big_per_1024 = per1024[rng_below(r, 5)];
		sz->big_lo = PAGE << rng_below(r, 4);
		sz->big_hi = sz->big_lo << rng_below(r, 9);
		if (sz->big_hi > P.max_big)
			sz->big_hi = (uint32_t)P.max_big;
		if (sz->big_lo > sz->big_hi)
			sz->big_lo = sz->big_hi;
	}
}

static double mean_size(const struct sizes *sz)
{
	struct rng r = { 0x2545F4914F6CDD1DULL };
	double sum = 0;
	for (int i = 0; i < 4096; i++)
		sum += (double)draw_size(&r, sz);
	return sum / 4096;
}

static int new_sink(int kind, int owner)
{
	if (nsinks == MAX_SINKS) {
		fprintf(stderr, "gen: more than %d sinks\n", MAX_SINKS);
		exit(1);
	}
	struct sink *s = &sinks[nsinks];
	s->kind = kind;
	s->owner = owner;
	return nsinks++;
}

static void add_comp(struct behav *b, int sink)
{
	struct sink *s = &sinks[sink];
	if (s->feeders < 8)
		s->feeder[s->feeders] = (int)(b - behavs);
	s->feeders++;
	b->comp[b->ncomp++].sink = sink;
}

/* A thread for a sink fed from thread `home`: another one in xthread % of
 * cases. */
static int sink_owner(struct rng *r, int home)
{
	if (P.threads > 1 && chance(r, P.xthread))
		return (home + 1 + (int)rng_below(r, (uint64_t)P.threads - 1)) % P.threads;
	return home;
}

static void assign_kinds(struct rng *r)
{
	int have[4] = { 0 };
	for (int i = 0; i < P.sites; i++) {
		int k = chance(r, P.mixed_pct) ? K_MIXED : (int)rng_below(r, 3);
		behavs[i].kind = k;
		have[k]++;
	}
	/* Every lifetime must be present: turn the first plain sites into
	 * the missing kinds. */
	int next = 0;
	for (int k = K_PINNED; k <= K_TEMP; k++) {
		if (have[k] || have[K_MIXED])
			continue;
		while (next < P.sites && have[behavs[next].kind] == 1)
			next++;
		if (next == P.sites)
			break;
		have[behavs[next].kind]--;
		behavs[next++].kind = k;
		have[k]++;
	}
}

static void make_caches(struct rng *r)
{
	int feeders = 0;
	for (int i = 0; i < P.sites; i++)
		feeders += behavs[i].kind == K_CACHE || behavs[i].kind == K_MIXED;
	int n = P.caches < feeders ? P.caches : feeders;
	int allowed[3], na = 0;
	for (int p = 0; p < 3; p++)
		if (P.policies & (1 << p))
			allowed[na++] = p;
	for (int c = 0; c < n; c++) {
		struct sink *s = &sinks[new_sink(S_CACHE, (int)rng_below(r, (uint64_t)P.threads))];
		s->policy = allowed[rng_below(r, (uint64_t)na)];
		s->tau = rng_loguniform(r, P.tau_c_lo, P.tau_c_hi);
		s->hot = 0.05 + 0.45 * rng_unit(r);
		s->reref = 0.5 + 0.45 * rng_unit(r);
	}
}

/* A cache for a feeder on `home`: one of its own thread's unless the
 * handoff draw says otherwise. */
static int pick_cache(struct rng *r, int ncache, int home)
{
	int own[MAX_CACHES], n = 0;
	for (int c = 0; c < ncache; c++)
		if (sinks[c].owner == home)
			own[n++] = c;
	if (n && !(P.threads > 1 && chance(r, P.xthread)))
		return own[rng_below(r, (uint64_t)n)];
	return (int)rng_below(r, (uint64_t)ncache);
}

static void make_sinks(struct rng *r)
{
	make_caches(r);
	int ncache = nsinks;
	for (int i = 0; i < P.sites; i++) {
		struct behav *b = &behavs[i];
		int k = b->kind;
		if (k == K_PINNED || k == K_MIXED)
			add_comp(b, new_sink(S_PINNED, b->thread));
		if ((k == K_CACHE || k == K_MIXED) && ncache) {
			add_comp(b, pick_cache(r, ncache, b->thread));
			if (k == K_CACHE && ncache > 1 && chance(r, 20))
				add_comp(b, pick_cache(r, ncache, b->thread));
			if (b->ncomp == 2 && b->comp[0].sink == b->comp[1].sink)
				b->ncomp = 1;
		}
		if (k == K_TEMP || k == K_MIXED) {
			int s = new_sink(S_TEMP, sink_owner(r, b->thread));
			sinks[s].tau = rng_loguniform(r, P.tau_t_lo, P.tau_t_hi);
			add_comp(b, s);
			if (P.imm > 0 && (k == K_MIXED || chance(r, 50)))
				add_comp(b, new_sink(S_FREE, sink_owner(r, b->thread)));
		}
	}
}

/* Split `total` bytes over the sinks of one kind by random weights. */
static void split_budget(struct rng *r, int kind, double total)
{
	double w[MAX_SINKS], sum = 0;
	for (int k = 0; k < nsinks; k++)
		if (sinks[k].kind == kind)
			sum += w[k] = rng_loguniform(r, 1, 100);
	for (int k = 0; k < nsinks; k++)
		if (sinks[k].kind == kind)
			sinks[k].budget = total * w[k] / sum;
}

/* Bytes each component carries during the churn: pinned data grows from
 * pinned_start to its budget, a cache or temp turns over tau times, a
 * free component carries imm times its site's temp volume. */
static void set_volumes(struct rng *r)
{
	for (int i = 0; i < P.sites; i++) {
		struct behav *b = &behavs[i];
		double temp_vol = 0;
		for (int c = 0; c < b->ncomp; c++) {
			struct sink *s = &sinks[b->comp[c].sink];
			double share = s->feeders ? 1.0 / s->feeders : 1.0;
			if (s->kind == S_CACHE)
				share *= 0.25 + 1.5 * rng_unit(r);
			double v = 0;
			if (s->kind == S_PINNED)
				v = (1 - P.pinned_start) * s->budget;
			else if (s->kind == S_CACHE || s->kind == S_TEMP)
				v = s->tau * s->budget * share;
			if (s->kind == S_TEMP)
				temp_vol = v;
			b->comp[c].volume = v;
		}
		for (int c = 0; c < b->ncomp; c++)
			if (sinks[b->comp[c].sink].kind == S_FREE)
				b->comp[c].volume = P.imm * temp_vol * (0.2 + 0.8 * rng_unit(r));
	}
}

/* Allocations the churn needs per kind of sink (ops[] by enum sink_kind). */
static void count_ops(double ops[4])
{
	ops[0] = ops[1] = ops[2] = ops[3] = 0;
	for (int i = 0; i < P.sites; i++) {
		const struct behav *b = &behavs[i];
		for (int c = 0; c < b->ncomp; c++)
			ops[sinks[b->comp[c].sink].kind] += b->comp[c].volume / b->mean;
	}
}

static void scale_volumes(int kind, double f)
{
	for (int i = 0; i < P.sites; i++)
		for (int c = 0; c < behavs[i].ncomp; c++)
			if (sinks[behavs[i].comp[c].sink].kind == kind)
				behavs[i].comp[c].volume *= f;
	for (int k = 0; k < nsinks; k++)
		if (sinks[k].kind == kind)
			sinks[k].tau *= f;
}

/* Keep the run's length bounded to max_ops allocations in the churn.
 * Temporaries that turn over thousands of times in a large budget would
 * need billions: their turnover is scaled down first (they then live
 * longer, which the report shows as temp_tau_scale), and caches' only if
 * they alone would take more than half of the allocations. */
static void bound_ops(void)
{
	double ops[4];
	count_ops(ops);
	double room = P.max_ops - ops[S_PINNED];
	if (room < P.max_ops / 10)
		room = P.max_ops / 10;
	if (ops[S_CACHE] + ops[S_TEMP] + ops[S_FREE] > room && ops[S_CACHE] > room / 2) {
		cache_tau_scale = room / 2 / ops[S_CACHE];
		scale_volumes(S_CACHE, cache_tau_scale);
	}
	double rest = room - ops[S_CACHE] * cache_tau_scale, temp_ops = ops[S_TEMP] + ops[S_FREE];
	if (temp_ops > rest) {
		temp_tau_scale = rest / temp_ops;
		scale_volumes(S_TEMP, temp_tau_scale);
		scale_volumes(S_FREE, temp_tau_scale);
	}
	for (int i = 0; i < P.sites; i++) {
		struct behav *b = &behavs[i];
		b->volume = 0;
		for (int c = 0; c < b->ncomp; c++)
			b->volume += b->comp[c].volume;
		double cum = 0;
		for (int c = 0; c < b->ncomp; c++) {
			cum += b->volume > 0 ? b->comp[c].volume / b->volume : 1.0 / b->ncomp;
			b->comp[c].cum = cum;
		}
		b->comp[b->ncomp - 1].cum = 1.0;
		b->ops = b->volume / b->mean;
	}
}

/* Temp slots: as many as the budget holds at the site's mean size. The
 * feeders that top a sink up, each as likely (the first 8 only). */
static void size_sinks(void)
{
	for (int k = 0; k < nsinks; k++) {
		struct sink *s = &sinks[k];
		if (s->kind == S_TEMP) {
			double mean = behavs[s->feeder[0]].mean;
			double n = s->budget / mean;
			s->cap = n < 1 ? 1 : n > (1 << 22) ? (1 << 22) : (size_t)n;
			s->slot = map(s->cap * sizeof *s->slot);
		}
		int nf = s->feeders < 8 ? s->feeders : 8;
		double cum = 0;
		for (int f = 0; f < nf; f++)
			s->feeder_cum[f] = cum += 1;
		for (int f = 0; f < nf; f++)
			s->feeder_cum[f] /= cum;
	}
}

/* Pairs of sites that swap call sites halfway through the churn,
 * preferably of different kinds. */
static void pick_changes(struct rng *r)
{
	int cand[MAX_SITES], n = 0;
	for (int i = 0; i < P.sites; i++) {
		behavs[i].swap_with = -1;
		if (chance(r, P.change_pct))
			cand[n++] = i;
	}
	for (int i = n - 1; i > 0; i--) {
		int j = (int)rng_below(r, (uint64_t)i + 1), x = cand[i];
		cand[i] = cand[j];
		cand[j] = x;
	}
	for (int i = 0; i + 1 < n; i += 2) {
		for (int j = i + 2; j < n && behavs[cand[i]].kind == behavs[cand[i + 1]].kind; j++) {
			if (behavs[cand[j]].kind != behavs[cand[i]].kind) {
				int x = cand[i + 1];
				cand[i + 1] = cand[j];
				cand[j] = x;
			}
		}
		behavs[cand[i]].swap_with = cand[i + 1];
		behavs[cand[i + 1]].swap_with = cand[i];
	}
}

static void assign_functions(struct rng *r)
{
	int perm[GEN_NSITES];
	for (int i = 0; i < GEN_NSITES; i++)
		perm[i] = i;
	for (int i = GEN_NSITES - 1; i > 0; i--) {
		int j = (int)rng_below(r, (uint64_t)i + 1), x = perm[i];
		perm[i] = perm[j];
		perm[j] = x;
	}
	for (int i = 0; i < P.sites; i++) {
		behavs[i].fn = perm[i];
		if (chance(r, P.wrapper_pct)) {
			site_wrapped[perm[i]] = 1;
			nwrapped++;
		}
	}
}

/* Each thread's table of its behaviours, and its owned sinks. */
static void build_threads(void)
{
	for (int t = 0; t < P.threads; t++) {
		struct thr *th = &thrs[t];
		th->id = t;
		uint64_t x = P.seed ^ (0xD1B54A32D192ED03ULL * (uint64_t)(t + 1));
		th->rng.s = splitmix(&x) | 1;
		pthread_mutex_init(&th->inbox_lock, NULL);
		th->behav = map(MAX_SITES * sizeof(int));
		th->cum = map(MAX_SITES * sizeof(double));
		th->sinks = map(MAX_SINKS * sizeof(int));
		double cum = 0;
		for (int i = 0; i < P.sites; i++) {
			if (behavs[i].thread != t || behavs[i].ops <= 0)
				continue;
			th->behav[th->nb] = i;
			th->cum[th->nb++] = cum += behavs[i].ops;
		}
		for (int i = 0; i < th->nb; i++)
			th->cum[i] /= cum;
		th->ops_per_round = cum / P.attempts;
		for (int k = 0; k < nsinks; k++)
			if (sinks[k].owner == t)
				th->sinks[th->nsinks++] = k;
	}
}

static void generate(void)
{
	uint64_t x = P.seed;
	struct rng r = { splitmix(&x) | 1 };
	assign_kinds(&r);
	for (int i = 0; i < P.sites; i++) {
		behavs[i].thread = (int)rng_below(&r, (uint64_t)P.threads);
		pick_sizes(&r, &behavs[i].sz);
		behavs[i].mean = mean_size(&behavs[i].sz);
	}
	make_sinks(&r);
	double live = P.fill / 100 * (double)P.cap;
	double cache_pct = 100 - P.pinned_pct - P.temp_pct;
	split_budget(&r, S_PINNED, live * P.pinned_pct / 100);
	split_budget(&r, S_TEMP, live * P.temp_pct / 100);
	split_budget(&r, S_CACHE, live * cache_pct / 100);
	set_volumes(&r);
	bound_ops();
	size_sinks();
	pick_changes(&r);
	assign_functions(&r);
	build_threads();
}


#endif
