/* The report's call-site section: the sites with the most sampled bytes,
 * their keys and evidence, and where they are in the program. */
#ifndef MB_SITE_REPORT_H
#define MB_SITE_REPORT_H

#include "out.h"

/* As text, or as the elements of a JSON array. */
void mb_site_report_write(struct mb_out *o, int json);

#endif
