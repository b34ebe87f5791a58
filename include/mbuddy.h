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

#ifdef __cplusplus
}
#endif

#endif
