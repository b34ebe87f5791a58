/* The generated workload's command line. */
#ifndef GEN_OPTIONS_H
#define GEN_OPTIONS_H

#include "gen.h"

/* ---- options ---- */

static void usage(const char *argv0)
{
	fprintf(stderr,
		"usage: %s --seed N --cap SIZE [options]   (see the top of gen.c)\n"
		"  --fill PCT (30-95)       live target against the cap [70]\n"
		"  --sites N (3-2000)       call sites [20]\n"
		"  --threads N (1-4)        [1]\n"
		"  --xthread PCT            sinks fed from another thread [0]\n"
		"  --pinned PCT --temp PCT  shares of the live target [15, 5]; caches get the rest\n"
		"  --caches N (1-64)        [2]\n"
		"  --policies LIST          eviction orders drawn from: fifo,lru,random [all]\n"
		"  --cache-tau LO:HI        cache turnovers during the churn [1:6]\n"
		"  --temp-tau LO:HI         temp turnovers during the churn [20:1000]\n"
		"  --imm X                  immediate frees, X times a site's temp volume [0]\n"
		"  --mixed PCT              sites whose objects have every lifetime [0]\n"
		"  --change PCT             sites that swap behaviour mid-run [0]\n"
		"  --big PCT                sites with objects of 4 KiB and more [0]\n"
		"  --max-big SIZE           the largest such object [1M]\n"
		"  --wrapper PCT            sites that call malloc through one wrapper [0]\n"
		"  --pinned-start F         pinned share of its budget when the churn starts [0.5]\n"
		"  --max-ops N              allocations in the churn, at most [3000000]\n"
		"  --rounds W:A             warm-up rounds, attempts [40:160]\n"
		"  --order-bytes SIZE       attempted block [2^(MBUDDY_MAX_ORDER-1) pages, 4M]\n"
		"  --idle-ms MS             idle time after the drop [100]\n"
		"  --fill-to-fail           finally allocate until malloc fails (capped heaps only)\n"
		"  --stats-signal N         raise signal N before the drop (MBUDDY_STATS_SIGNAL)\n",
		argv0);
	exit(1);
}

static double num(const char *s, double lo, double hi, const char *argv0)
{
	char *end;
	double v = strtod(s, &end);
	if (end == s || *end || !(v >= lo && v <= hi)) {
		fprintf(stderr, "gen: '%s' is not a number in [%g, %g]\n", s, lo, hi);
		usage(argv0);
	}
	return v;
}

static void range(const char *s, double *lo, double *hi, double min, double max, const char *argv0)
{
	char buf[64];
	const char *colon = strchr(s, ':');
	if (!colon || (size_t)(colon - s) >= sizeof buf)
		usage(argv0);
	memcpy(buf, s, (size_t)(colon - s));
	buf[colon - s] = '\0';
	*lo = num(buf, min, max, argv0);
	*hi = num(colon + 1, *lo, max, argv0);
}

/* "fifo,lru,random" or a part of it; 0 on anything else. */
static int parse_policies(const char *s)
{
	int mask = 0;
	while (*s) {
		size_t len = strcspn(s, ",");
		int found = 0;
		for (int p = 0; p < 3; p++)
			if (len == strlen(policy_names[p]) && !strncmp(s, policy_names[p], len)) {
				mask |= 1 << p;
				found = 1;
			}
		if (!found)
			return 0;
		s += len + (s[len] == ',');
	}
	return mask;
}

static size_t size_arg(const char *s, const char *argv0)
{
	size_t v = parse_size(s);
	if (!v)
		usage(argv0);
	return v;
}

static void parse_args(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "seed", 1, 0, 's' }, { "cap", 1, 0, 'c' }, { "fill", 1, 0, 'f' },
		{ "sites", 1, 0, 'n' }, { "threads", 1, 0, 't' }, { "xthread", 1, 0, 'x' },
		{ "pinned", 1, 0, 'p' }, { "temp", 1, 0, 'T' }, { "caches", 1, 0, 'C' },
		{ "policies", 1, 0, 'P' }, { "cache-tau", 1, 0, 'a' }, { "temp-tau", 1, 0, 'b' },
		{ "imm", 1, 0, 'i' }, { "mixed", 1, 0, 'm' }, { "change", 1, 0, 'g' },
		{ "big", 1, 0, 'B' }, { "max-big", 1, 0, 'M' }, { "wrapper", 1, 0, 'w' },
		{ "pinned-start", 1, 0, 'S' }, { "max-ops", 1, 0, 'o' }, { "rounds", 1, 0, 'r' },
		{ "order-bytes", 1, 0, 'O' }, { "idle-ms", 1, 0, 'I' }, { "fill-to-fail", 0, 0, 'F' },
		{ "stats-signal", 1, 0, 'G' }, { 0, 0, 0, 0 },
	};
	const char *a0 = argv[0];
	double w, at;
	int c, have_seed = 0;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 's': P.seed = (uint64_t)num(optarg, 0, 9007199254740992.0, a0); have_seed = 1; break;
		case 'c': P.cap = size_arg(optarg, a0); break;
		case 'f': P.fill = num(optarg, 1, 100, a0); break;
		case 'n': P.sites = (int)num(optarg, 3, MAX_SITES, a0); break;
		case 't': P.threads = (int)num(optarg, 1, MAX_THREADS, a0); break;
		case 'x': P.xthread = num(optarg, 0, 100, a0); break;
		case 'p': P.pinned_pct = num(optarg, 0, 100, a0); break;
		case 'T': P.temp_pct = num(optarg, 0, 100, a0); break;
		case 'C': P.caches = (int)num(optarg, 1, MAX_CACHES, a0); break;
		case 'P': if (!(P.policies = parse_policies(optarg))) usage(a0); break;
		case 'a': range(optarg, &P.tau_c_lo, &P.tau_c_hi, 0.01, 1e4, a0); break;
		case 'b': range(optarg, &P.tau_t_lo, &P.tau_t_hi, 0.01, 1e6, a0); break;
		case 'i': P.imm = num(optarg, 0, 100, a0); break;
		case 'm': P.mixed_pct = num(optarg, 0, 100, a0); break;
		case 'g': P.change_pct = num(optarg, 0, 100, a0); break;
		case 'B': P.big_pct = num(optarg, 0, 100, a0); break;
		case 'M': P.max_big = size_arg(optarg, a0); break;
		case 'w': P.wrapper_pct = num(optarg, 0, 100, a0); break;
		case 'S': P.pinned_start = num(optarg, 0, 1, a0); break;
		case 'o': P.max_ops = num(optarg, 1000, 1e9, a0); break;
		case 'r': range(optarg, &w, &at, 0, MAX_ROUNDS, a0);
			P.warm = (int)w; P.attempts = (int)at; break;
		case 'O': P.order_bytes = size_arg(optarg, a0); break;
		case 'I': P.idle_ms = (long)num(optarg, 0, 600000, a0); break;
		case 'F': P.fill_to_fail = 1; break;
		case 'G': P.stats_signal = (int)num(optarg, 1, 64, a0); break;
		default: usage(a0);
		}
	}
	if (optind != argc || !have_seed || !P.cap || P.attempts < 1 || P.warm < 1 ||
	    P.warm + P.attempts > MAX_ROUNDS || P.pinned_pct + P.temp_pct > 95 ||
	    P.max_big < PAGE || P.max_big > ((size_t)64 << 20) || P.cap > ((size_t)1 << 44)) {
		fprintf(stderr, "gen: need --seed and --cap; pinned + temp <= 95 %%; "
				"4K <= max-big <= 64M; warm, attempts >= 1\n");
		usage(a0);
	}
	if (!P.order_bytes) {
		const char *mo = getenv("MBUDDY_MAX_ORDER");
		long order = mo && *mo ? atol(mo) : 11;
		if (order < 2 || order > 20)
			order = 11;
		P.order_bytes = (size_t)PAGE << (order - 1);
	}
}


#endif
