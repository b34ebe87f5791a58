#include "config.h"
#include "fragmentation.h"

struct contig {
	uint64_t free_pages, free_blocks_total, free_blocks_suitable;
};

static struct contig fill_contig(const uint64_t *nr_free, unsigned norders, unsigned j)
{
	struct contig c = { 0, 0, 0 };
	for (unsigned o = 0; o < norders; o++) {
		c.free_pages += nr_free[o] << o;
		c.free_blocks_total += nr_free[o];
		if (o >= j)
			c.free_blocks_suitable += nr_free[o] << (o - j);
	}
	return c;
}

double mb_unusable_free_index(const uint64_t *nr_free, unsigned norders, unsigned j)
{
	struct contig c = fill_contig(nr_free, norders, j);
	if (c.free_pages == 0)
		return 1.0;
	return (double)(c.free_pages - (c.free_blocks_suitable << j)) / (double)c.free_pages;
}

double mb_fragmentation_index(const uint64_t *nr_free, unsigned norders, unsigned j)
{
	struct contig c = fill_contig(nr_free, norders, j);
	if (c.free_blocks_suitable)
		return -1.0;
	if (c.free_blocks_total == 0)
		return 0.0;
	return 1.0 - (1.0 + (double)c.free_pages / (double)((uint64_t)1 << j)) / (double)c.free_blocks_total;
}
