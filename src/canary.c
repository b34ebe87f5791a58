#include "config.h"
#include "canary.h"
#include "heap.h"

#include <unistd.h>

static uint64_t canary_secret;

uint64_t mb_canary_value(const void *at)
{
	uint64_t x = (uintptr_t)at ^ canary_secret;
	x ^= x >> 31;
	x *= 0x9e3779b97f4a7c15ULL;
	return x ^ (x >> 29);
}

void mb_canary_init(void)
{
	uint64_t t = mb_now_ms();
	canary_secret = (uint64_t)(uintptr_t)&t * 0xff51afd7ed558ccdULL ^ t ^ ((uint64_t)getpid() << 32);
}
