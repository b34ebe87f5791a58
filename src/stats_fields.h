/* The report's fields, each listed once: the text report, the JSON report
 * and mbuddy_stats_get() all read these tables, so a field added here
 * shows in all three. Rows the text writes as tables of their own (free
 * blocks per order, pageblocks per type, the per-type counters) are
 * written there from the same snapshot. */
#ifndef MB_STATS_FIELDS_H
#define MB_STATS_FIELDS_H

#include <stddef.h>
#include <stdint.h>

#include "stats_snapshot.h"

/* The block of the text report a field is shown in. */
enum mb_stats_block {
	MB_BLOCK_NONE,     /* JSON and mbuddy_stats_get() only */
	MB_BLOCK_MEMORY,   /* "Memory": bytes, and MiB */
	MB_BLOCK_BEAN,     /* "Global beancounters", in the patch's words */
	MB_BLOCK_COUNTERS, /* "Allocator counters" */
	MB_BLOCK_HUGE,     /* "Huge pages": bytes (MB_FIELD_BYTES) and counts */
};

#define MB_FIELD_SIGNED 0x1 /* may be negative: JSON shows it signed, text 0 */
#define MB_FIELD_PAIR 0x2   /* text: this field and the next on one line, a/b */
#define MB_FIELD_BYTES 0x4  /* MB_BLOCK_HUGE: shown as bytes and MiB */

/* A 64-bit value of struct mb_snapshot. */
struct mb_stats_field {
	const char *object;   /* the JSON object that holds it */
	const char *key;      /* its key there; NULL: text only */
	const char *label;    /* its label in the text; NULL: not in the text */
	uint8_t block;        /* enum mb_stats_block */
	uint8_t flags;        /* MB_FIELD_* */
	size_t at;            /* offsetof(struct mb_snapshot, ...) */
	size_t api;           /* offsetof(struct mbuddy_stats, ...) + 1; 0: not there */
};

extern const struct mb_stats_field mb_stats_fields[];
extern const size_t mb_stats_nfields;

/* A per-type value of struct mb_snapshot: an array indexed by type. */
struct mb_stats_type_field {
	const char *key;      /* its key in each element of JSON "types" */
	size_t at;            /* offsetof(struct mb_snapshot, ...[0]) */
	size_t api;           /* offsetof(struct mbuddy_type_stats, ...) */
};

extern const struct mb_stats_type_field mb_stats_type_fields[];
extern const size_t mb_stats_ntype_fields;

/* A fragmentation index per order (fragmentation.h). */
struct mb_stats_index {
	const char *key;      /* its key in JSON "fragmentation" */
	const char *label;    /* its row in the text, padded */
	double (*value)(const uint64_t *nr_free, unsigned norders, unsigned order);
	size_t api;           /* offsetof(struct mbuddy_stats, ...[0]) */
};

extern const struct mb_stats_index mb_stats_indices[];
extern const size_t mb_stats_nindices;

static inline uint64_t mb_stats_field_value(const struct mb_stats_field *f, const struct mb_snapshot *s)
{
	return *(const uint64_t *)((const char *)s + f->at);
}

static inline uint64_t mb_stats_type_value(const struct mb_stats_type_field *f, const struct mb_snapshot *s, int type)
{
	return ((const uint64_t *)((const char *)s + f->at))[type];
}

#endif
