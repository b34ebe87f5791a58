/* TLB-bound lookups (issue 21): a large structure of small nodes, each its
 * own malloc, then random lookups whose cost is mostly address translation.
 *
 *   tlb hash NODES LOOKUPS [drop]   chained hash table, one bucket per node
 *   tlb tree NODES LOOKUPS          binary search tree built in random key order
 *   tlb chase MIB READS             no allocator: what huge pages buy this machine
 *
 * Prints one RESULT line: the build and lookup times (seconds), the
 * process's AnonHugePages and Rss (KiB, from /proc/self/smaps_rollup,
 * read after the lookups) and a checksum that keeps the lookups live.
 * With "drop", the load then drops: the nine tenths of the nodes that
 * were allocated last are freed (whole pages, for any allocator), the
 * program idles 2 s without an allocator call, and the line also gives
 * the Rss and AnonHugePages then (drop_rss_kib, drop_huge_kib).
 *
 * chase maps MIB MiB twice, one after the other, once on 4 KiB pages and
 * once advised MADV_HUGEPAGE, touches every page and times READS
 * dependent random one-byte reads in each (chase_4k_s, chase_huge_s; the
 * second mapping's AnonHugePages in chase_huge_kib): the most any
 * allocator can gain from huge pages on this machine, whatever it does. */
#include "common.h"

#include <sys/mman.h>

struct hnode {
	uint64_t key, value;
	struct hnode *next;
};

struct tnode {
	uint64_t key;
	struct tnode *left, *right;
	uint64_t value;
};

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

/* The key of node i: distinct, in no order. */
static uint64_t key_of(uint64_t i)
{
	return mix(i * 2 + 1);
}

static CALL_SITE struct hnode *new_hnode(void)
{
	struct hnode *n = malloc(sizeof *n);
	if (!n)
		oom("new_hnode", sizeof *n);
	return n;
}

static CALL_SITE struct tnode *new_tnode(void)
{
	struct tnode *n = malloc(sizeof *n);
	if (!n)
		oom("new_tnode", sizeof *n);
	return n;
}

static struct hnode **hash_buckets;
static uint64_t hash_nb;

static uint64_t run_hash(uint64_t nodes, uint64_t lookups, double *build)
{
	double t0 = now_sec();
	uint64_t nb = 1;
	while (nb < nodes)
		nb <<= 1;
	struct hnode **b = calloc(nb, sizeof *b);
	if (!b)
		oom("buckets", nb * sizeof *b);
	for (uint64_t i = 0; i < nodes; i++) {
		struct hnode *n = new_hnode();
		n->key = key_of(i);
		n->value = i;
		uint64_t h = mix(n->key) & (nb - 1);
		n->next = b[h];
		b[h] = n;
	}
	*build = now_sec() - t0;
	struct rng r = { 0x9e3779b97f4a7c15ULL };
	uint64_t sum = 0;
	for (uint64_t l = 0; l < lookups; l++) {
		uint64_t k = key_of(rng_below(&r, nodes));
		for (struct hnode *n = b[mix(k) & (nb - 1)]; n; n = n->next)
			if (n->key == k) {
				sum += n->value;
				break;
			}
	}
	hash_buckets = b;
	hash_nb = nb;
	return sum;
}

/* The drop: nodes allocated after the first tenth are freed. */
static void drop_hash(uint64_t nodes)
{
	for (uint64_t h = 0; h < hash_nb; h++)
		for (struct hnode **at = &hash_buckets[h]; *at;) {
			struct hnode *n = *at;
			if (n->value >= nodes / 10) {
				*at = n->next;
				free(n);
			} else {
				at = &n->next;
			}
		}
}

static uint64_t run_tree(uint64_t nodes, uint64_t lookups, double *build)
{
	double t0 = now_sec();
	struct tnode *root = NULL;
	for (uint64_t i = 0; i < nodes; i++) {
		struct tnode *n = new_tnode();
		n->key = key_of(i);
		n->value = i;
		n->left = n->right = NULL;
		struct tnode **at = &root;
		while (*at)
			at = n->key < (*at)->key ? &(*at)->left : &(*at)->right;
		*at = n;
	}
	*build = now_sec() - t0;
	struct rng r = { 0x9e3779b97f4a7c15ULL };
	uint64_t sum = 0;
	for (uint64_t l = 0; l < lookups; l++) {
		uint64_t k = key_of(rng_below(&r, nodes));
		struct tnode *n = root;
		while (n && n->key != k)
			n = k < n->key ? n->left : n->right;
		if (n)
			sum += n->value;
	}
	return sum;
}

/* A field of /proc/self/smaps_rollup, in KiB; -1 if unreadable. */
static long rollup_kib(const char *field)
{
	char buf[4096];
	int fd = open("/proc/self/smaps_rollup", O_RDONLY);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	size_t fl = strlen(field);
	for (char *p = buf; (p = strstr(p, field)); p++)
		if ((p == buf || p[-1] == '\n') && p[fl] == ':')
			return strtol(p + fl + 1, NULL, 10);
	return -1;
}

/* Dependent random reads over MIB MiB: each address depends on the byte
 * read before, so no two misses overlap. Returns the seconds taken. */
static double chase_once(size_t mib, uint64_t reads, int huge, long *huge_kib)
{
	size_t size = mib << 20, align = (size_t)2 << 20;
	char *map = mmap(NULL, size + align, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED)
		oom("chase", size);
	char *p = (char *)(((uintptr_t)map + align - 1) & ~(uintptr_t)(align - 1));
#ifdef MADV_HUGEPAGE
	if (huge)
		madvise(p, size, MADV_HUGEPAGE);
#endif
	for (size_t i = 0; i < size; i += 64)
		p[i] = (char)mix(i);
	*huge_kib = rollup_kib("AnonHugePages");
	uint64_t x = 0x9e3779b97f4a7c15ULL, s = 0;
	double t0 = now_sec();
	for (uint64_t i = 0; i < reads; i++) {
		x = mix(x + s);
		s += (unsigned char)p[x % size];
	}
	double t = now_sec() - t0;
	munmap(map, size + align);
	if (s == 42) /* keeps the reads */
		printf("#");
	return t;
}

int main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "chase") == 0) {
		size_t mib = strtoull(argv[2], NULL, 0);
		uint64_t reads = strtoull(argv[3], NULL, 0);
		long k4, kh;
		double t4 = chase_once(mib, reads, 0, &k4), th = chase_once(mib, reads, 1, &kh);
		printf("RESULT chase_4k_s=%.3f chase_huge_s=%.3f chase_huge_kib=%ld\n", t4, th, kh);
		return 0;
	}
	int drop = argc == 5 && strcmp(argv[4], "drop") == 0 && strcmp(argv[1], "hash") == 0;
	if ((argc != 4 && !drop) || (strcmp(argv[1], "hash") && strcmp(argv[1], "tree"))) {
		fprintf(stderr, "usage: %s hash NODES LOOKUPS [drop] | tree NODES LOOKUPS | chase MIB READS\n", argv[0]);
		return 2;
	}
	uint64_t nodes = strtoull(argv[2], NULL, 0), lookups = strtoull(argv[3], NULL, 0);
	double build, t0;
	uint64_t sum;
	if (argv[1][0] == 'h') {
		t0 = now_sec();
		sum = run_hash(nodes, lookups, &build);
	} else {
		t0 = now_sec();
		sum = run_tree(nodes, lookups, &build);
	}
	double lookup = now_sec() - t0 - build;
	printf("RESULT build_s=%.3f lookup_s=%.3f anon_huge_kib=%ld rss_kib=%ld sum=%llu", build, lookup,
	       rollup_kib("AnonHugePages"), rollup_kib("Rss"), (unsigned long long)sum);
	if (drop) {
		fflush(stdout);
		drop_hash(nodes);
		sleep_sec(2.0);
		printf(" drop_rss_kib=%ld drop_huge_kib=%ld", rollup_kib("Rss"), rollup_kib("AnonHugePages"));
	}
	printf("\n");
	return 0;
}
