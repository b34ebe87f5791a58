/* realloc growth: many buffers growing at the same time.
 *
 * Models string builders and dynamic arrays: half of the buffers grow by
 * small appends (1-64 bytes, like building a string or a log line), half
 * double their capacity when full (like a vector). Buffers grow in turn,
 * so their reallocs interleave and in-place growth is not free. A buffer
 * that reaches its final length (log-uniform up to MAX_FINAL) is freed and
 * replaced. Contents are checked after every realloc: growth must keep the
 * bytes.
 *
 * Usage: realloc BUFFERS STEPS [MAX_FINAL]
 * Prints: RESULT workload=realloc reallocs=.. sec=..
 */
#include "common.h"

struct buf {
	unsigned char *p;
	size_t len, cap, final;
	int doubling;
};

static struct rng rng = { 0xA4093822299F31D0ULL };
static size_t max_final = (size_t)1 << 20;

static void start(struct buf *b)
{
	b->final = rng_logsize(&rng, 64, max_final);
	b->doubling = (int)rng_below(&rng, 2);
	b->len = 0;
	b->cap = b->doubling ? 16 : 1;
	b->p = malloc(b->cap);
	if (!b->p)
		oom("realloc start", b->cap);
}

/* Append up to 64 bytes; returns 1 if a realloc happened. */
static int grow(struct buf *b)
{
	size_t add = 1 + rng_below(&rng, 64);
	if (b->len + add > b->final)
		add = b->final - b->len;
	int moved = 0;
	if (b->len + add > b->cap) {
		size_t ncap = b->doubling ? b->cap * 2 : b->len + add;
		while (ncap < b->len + add)
			ncap *= 2;
		unsigned char *np = realloc(b->p, ncap);
		if (!np)
			oom("realloc grow", ncap);
		/* The byte before the append point must have survived. */
		if (b->len && np[b->len - 1] != (unsigned char)(b->len - 1)) {
			fprintf(stderr, "FATAL: realloc lost data at %zu\n", b->len - 1);
			exit(3);
		}
		b->p = np;
		b->cap = ncap;
		moved = 1;
	}
	for (size_t i = 0; i < add; i++, b->len++)
		b->p[b->len] = (unsigned char)b->len;
	return moved;
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: %s BUFFERS STEPS [MAX_FINAL]\n", argv[0]);
		return 1;
	}
	size_t nbuf = parse_size(argv[1]);
	size_t steps = parse_size(argv[2]);
	if (argc > 3)
		max_final = parse_size(argv[3]);

	struct buf *bufs = malloc(nbuf * sizeof *bufs);
	if (!bufs)
		oom("buffer table", nbuf * sizeof *bufs);
	for (size_t i = 0; i < nbuf; i++)
		start(&bufs[i]);

	unsigned long reallocs = 0, completed = 0;
	double t0 = now_sec();
	for (size_t s = 0; s < steps; s++) {
		struct buf *b = &bufs[s % nbuf];
		reallocs += (unsigned long)grow(b);
		if (b->len == b->final) {
			free(b->p);
			completed++;
			start(b);
		}
	}
	double sec = now_sec() - t0;
	for (size_t i = 0; i < nbuf; i++)
		free(bufs[i].p);
	free(bufs);
	printf("RESULT workload=realloc reallocs=%lu completed=%lu sec=%.3f\n",
	       reallocs, completed, sec);
	return 0;
}
