#include "config.h"
#include "thread.h"

/* A new thread starts four sample periods away from its first sample (see
 * classify.c for why) and without a type hint. */
__thread struct mb_thread mb_self MB_TLS = {
	.sample_countdown = 4 * MB_SAMPLE_PERIOD,
	.type_hint = -1,
};
