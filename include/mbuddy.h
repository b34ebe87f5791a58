/* libmbuddy public interface. See libmbuddy(3). */
#ifndef MBUDDY_H
#define MBUDDY_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The patch's reclaim types: how long an object is expected to live. */
enum mbuddy_type {
	MBUDDY_KERNNORCLM = 0, /* long-lived or never freed ("pinned") */
	MBUDDY_KERNRCLM = 1,   /* medium-lived, freed in bulk ("cache") */
	MBUDDY_USERRCLM = 2,   /* short-lived ("short") */
};

/* Allocate with an explicit type: the GFP-flag equivalent. Free the result
 * with free(). An invalid type gives NULL with errno = EINVAL. */
void *mbuddy_malloc(size_t size, int type);
void *mbuddy_calloc(size_t nmemb, size_t size, int type);

/* Give every allocation of this thread the type `type` (or, with -1, let
 * call-site classification decide again). Returns the previous setting. */
int mbuddy_set_thread_type(int type);

#ifdef __cplusplus
}
#endif

#endif
