/* The report's account of the resident set (account.h), now and at the
 * peak, as text and as JSON. */
#ifndef MB_STATS_ACCOUNT_H
#define MB_STATS_ACCOUNT_H

#include "account.h"
#include "out.h"

/* peak may be NULL (no peak account was taken); hwm is the kernel's
 * high-water mark of the resident set (0 if unknown), which says whether
 * the peak account was taken at the peak. */
void mb_stats_write_account_text(struct mb_out *o, const struct mb_account *now, const struct mb_account *peak,
				 uint64_t hwm);
/* The members "account" and, with a peak, "account_at_peak", each
 * followed by a comma. */
void mb_stats_write_account_json(struct mb_out *o, const struct mb_account *now, const struct mb_account *peak);

#endif
