/* The reclaim types (reclaim_type.c): the patch's names, their aliases and
 * the extra words rules accept, parsed from a length-delimited piece of a
 * longer string; slab keys are types. */
#include "config.h"
#include "harness.h"
#include "reclaim_type.h"

#include <ctype.h>

static int parse(const char *s)
{
	return mb_type_parse(s, strlen(s));
}

TEST(names_and_aliases)
{
	ASSERT_STR_EQ(mb_type_names[MB_KERNNORCLM], "KernNoRclm");
	ASSERT_STR_EQ(mb_type_names[MB_KERNRCLM], "KernRclm");
	ASSERT_STR_EQ(mb_type_names[MB_USERRCLM], "UserRclm");
	ASSERT_STR_EQ(mb_type_aliases[MB_KERNNORCLM], "pinned");
	ASSERT_STR_EQ(mb_type_aliases[MB_KERNRCLM], "cache");
	ASSERT_STR_EQ(mb_type_aliases[MB_USERRCLM], "short");
	for (int t = 0; t < MB_NTYPES; t++) {
		ASSERT_EQ(parse(mb_type_names[t]), t);
		ASSERT_EQ(parse(mb_type_aliases[t]), t);
	}
	/* The words of libmbuddy(3) for MBUDDY_RULES. */
	ASSERT_EQ(parse("long"), MB_KERNNORCLM);
	ASSERT_EQ(parse("medium"), MB_KERNRCLM);
	ASSERT_EQ(parse("temp"), MB_USERRCLM);
}

/* Every accepted word, in upper, lower and mixed case. */
TEST(case_insensitive)
{
	static const char *const words[] = { "KernNoRclm", "pinned", "long",  "KernRclm", "cache",
					     "medium",     "UserRclm", "short", "temp" };
	for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
		char up[16], low[16], mixed[16];
		size_t n = strlen(words[i]);
		for (size_t k = 0; k <= n; k++) {
			up[k] = (char)toupper((unsigned char)words[i][k]);
			low[k] = (char)tolower((unsigned char)words[i][k]);
			mixed[k] = k % 2 ? up[k] : low[k];
		}
		int t = (int)(i / 3);
		ASSERT_EQ(parse(up), t);
		ASSERT_EQ(parse(low), t);
		ASSERT_EQ(parse(mixed), t);
	}
}

/* Rules hand over a word inside the list, by length: no more, no less. */
TEST(length_delimited)
{
	const char *rules = "sym:xstrdup=short,lib:libsqlite3=cache";
	const char *a = strchr(rules, '=') + 1, *b = strrchr(rules, '=') + 1;
	ASSERT_EQ(mb_type_parse(a, (unsigned long)(strchr(a, ',') - a)), MB_USERRCLM);
	ASSERT_EQ(mb_type_parse(b, strlen(b)), MB_KERNRCLM);
	/* A prefix of a word, a word with more after it, the empty word. */
	ASSERT_EQ(mb_type_parse("cache", 4), -1);
	ASSERT_EQ(mb_type_parse("cache", 0), -1);
	ASSERT_EQ(mb_type_parse("caches", 6), -1);
	ASSERT_EQ(mb_type_parse("short", 6), -1); /* the NUL is not part of a word */
	ASSERT_EQ(mb_type_parse("KernRclmX", 8), MB_KERNRCLM);
	ASSERT_EQ(mb_type_parse("KernNoRclm", 8), -1); /* "KernNoRc" */
}

TEST(unknown_words)
{
	static const char *const bad[] = { "", "kern", "rclm", "KernNo", "UserNoRclm", "pinned ", " pinned",
					   "cache,", "0", "1", "2", "global", "movable" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
		if (parse(bad[i]) != -1)
			FAIL("mb_type_parse(\"%s\") = %d, want -1", bad[i], parse(bad[i]));
}

/* Keys 0-2 are the types themselves; the keys above are lanes, typed as
 * classification says (the default until then); bits above a key (the
 * classifier's flags) are not part of it. */
TEST(slab_keys)
{
	ASSERT_GE(MB_NKEYS, MB_FIRST_LANE + 1);
	ASSERT_EQ(MB_FIRST_LANE, MB_NTYPES);
	ASSERT_GE(MB_KEY_MASK + 1, MB_NKEYS);
	for (int t = 0; t < MB_NTYPES; t++)
		ASSERT_EQ(mb_key_type(t), t);
	for (int k = MB_FIRST_LANE; k < MB_NKEYS; k++)
		ASSERT_EQ(mb_key_type(k), MB_DEFAULT_TYPE);
	mb_lane_type[MB_FIRST_LANE] = MB_KERNNORCLM;
	ASSERT_EQ(mb_key_type(MB_FIRST_LANE), MB_KERNNORCLM);
	ASSERT_EQ(mb_key_type(0x100 | MB_FIRST_LANE), MB_KERNNORCLM);
	mb_lane_type[MB_FIRST_LANE] = MB_DEFAULT_TYPE;
	ASSERT_EQ(mb_key_type(0x100 | MB_USERRCLM), MB_USERRCLM);
}
