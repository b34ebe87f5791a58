/* Profile keys of code addresses: the module's identity (which takes a
 * stat() of its file) is computed once per loaded module, not once per
 * call site, and keys stay the same when it is computed again. */
#include "config.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "profile.h"
#include "harness.h"

/* Every stat() of the process, the library's included, comes here. */
static unsigned stats;
int stat(const char *restrict path, struct stat *restrict st)
{
	stats++;
	return fstatat(AT_FDCWD, path, st, 0);
}

#define SITES 2000

static uint64_t keys[2][SITES];

/* Addresses in this program and in the C library. */
static void key_all(uint64_t *out)
{
	const char *here = (const char *)(uintptr_t)&key_all, *libc = (const char *)(uintptr_t)&printf;
	for (int i = 0; i < SITES; i++)
		out[i] = mb_profile_pc_key(i % 2 ? libc + i : here + i);
}

TEST(module_identity_computed_once)
{
	stats = 0;
	key_all(keys[0]);
	NOTE("%u stat() calls for %d call sites in two modules", stats, SITES);
	ASSERT_LE(stats, 4);
	for (int i = 0; i < SITES; i++) {
		ASSERT_NE(keys[0][i], 0);
		for (int j = i + 1; j < i + 3 && j < SITES; j++)
			ASSERT_NE(keys[0][i], keys[0][j]);
	}
	/* Code was unmapped: identities are computed again, to the same keys. */
	mb_profile_forget_modules();
	stats = 0;
	key_all(keys[1]);
	ASSERT(stats >= 1 && stats <= 4);
	ASSERT_EQ(memcmp(keys[0], keys[1], sizeof keys[0]), 0);
}
