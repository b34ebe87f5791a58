/* Classification's rules: how a call site's evidence turns into its slab
 * key (site.c, mb_site_decide_locked and friends), how sampled objects
 * become that evidence (sample.c), and the MBUDDY_RULES parser (rules.c).
 *
 * Sites are made in the tables of mb_sites_init() with made-up return
 * addresses, their evidence written by hand (as sample.c writes it, under
 * the site lock) and decided on. Covered: a site with no or too little
 * evidence keeps the default key; it is set apart only when three in four
 * samples lasted and its live estimate reaches 256 KiB (both boundaries
 * exactly); its type is KernNoRclm once old samples outnumber those freed
 * late, else KernRclm; it goes back to the default once more than half of
 * its evidence is short; lanes run out and come back; a wrapper is flagged
 * only when two deep sites with evidence differ in type; pinned sites
 * never change. sample.c, over the harness's heap with page-granular
 * objects as samples: young and late frees, aging on the allocation
 * clock, and the verdict that follows. Rules are parsed in a child each
 * (the rules are global): the documented forms are taken and matched as
 * documented, bad entries are reported once each and the others kept. */
#include "config.h"
#include "harness.h"
#include "large.h"
#include "reclaim_type.h"
#include "rules.h"
#include "sample.h"
#include "site.h"

#include <dlfcn.h>

#define KiB ((int64_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define SET_APART ((int64_t)256 << 10) /* SET_APART_BYTES of site.c */

/* ---- sites ---- */

static int tables_ready;
static struct mb_site *made[256];
static unsigned nmade;
static uintptr_t next_ra = 0x7f0000001000;

static void tables(void)
{
	if (!tables_ready) {
		ASSERT_EQ(mb_sites_init(), 0);
		ASSERT_EQ(mb_samples_init(), 0);
		tables_ready = 1;
	}
	/* The sites of the tests before let go of their lanes. */
	mb_site_lock();
	for (unsigned i = 0; i < nmade; i++) {
		struct mb_site *s = made[i];
		s->n_short = s->n_medium = s->n_lasting = s->n_old = s->n_prior_old = 0;
		s->live_estimate = 0;
		s->parent = NULL;
		s->ndeep = 0;
		mb_site_forget_locked(s);
	}
	/* The rest of the heap dies young unless a test says otherwise:
	 * sites are judged on their own evidence. */
	mb_site_default_mix_reset_locked();
	for (int i = 0; i < 64; i++)
		mb_site_note_default_locked(1);
	mb_site_unlock();
	nmade = 0;
}

/* The default key's mix, from none: `young` samples died young and
 * `lasting` outlived the young threshold. */
static void rest(unsigned young, unsigned lasting)
{
	mb_site_lock();
	mb_site_default_mix_reset_locked();
	for (unsigned i = 0; i < young; i++)
		mb_site_note_default_locked(1);
	for (unsigned i = 0; i < lasting; i++)
		mb_site_note_default_locked(0);
	mb_site_unlock();
}

static struct mb_site *site_in(enum mb_site_table t)
{
	int created = 0;
	mb_site_lock();
	struct mb_site *s = mb_site_insert_locked(t, next_ra, &created);
	mb_site_unlock();
	ASSERT_NE(s, NULL);
	ASSERT_EQ(created, 1);
	ASSERT_EQ(mb_site_lookup(t, next_ra), s);
	next_ra += 0x40;
	ASSERT_LT(nmade, sizeof made / sizeof made[0]);
	made[nmade++] = s;
	return s;
}

static struct mb_site *site(void)
{
	return site_in(MB_SITES_DIRECT);
}

/* Evidence written as sample.c writes it, then decided on. */
static void evidence(struct mb_site *s, int32_t n_short, int32_t n_medium, int32_t n_lasting, int32_t n_old,
		     int64_t live)
{
	mb_site_lock();
	s->n_short = n_short;
	s->n_medium = n_medium;
	s->n_lasting = n_lasting;
	s->n_old = n_old;
	s->live_estimate = live;
	mb_site_decide_locked(s);
	mb_site_unlock();
}

static int is_default(const struct mb_site *s)
{
	return mb_site_key(s) == MB_DEFAULT_TYPE && s->lane < 0;
}

/* Apart: on a lane of its own, typed `type`. */
static void assert_apart(const struct mb_site *s, int type, int line)
{
	if (s->lane < MB_FIRST_LANE || mb_site_key(s) != s->lane || mb_site_type(s) != type)
		test_fail(__FILE__, line, "site not apart as type %d: key %d, lane %d, type %d", type,
			  mb_site_key(s), s->lane, mb_site_type(s));
}
#define ASSERT_APART(s, type) assert_apart((s), (type), __LINE__)

TEST(new_site_has_the_default_key)
{
	tables();
	struct mb_site *s = site();
	ASSERT_EQ(mb_site_key(s), MB_DEFAULT_TYPE);
	ASSERT_EQ(mb_site_type(s), MB_USERRCLM);
	ASSERT_EQ(mb_site_flags(s), MB_SITE_LEARNING);
	ASSERT_EQ(s->lane, -1);
	ASSERT_EQ(s->learn_left, MB_LEARN_SAMPLES);
	ASSERT_EQ(s->is_deep, 0);
	/* No evidence: nothing decided. */
	evidence(s, 0, 0, 0, 0, 0);
	ASSERT(is_default(s));
	/* Seven samples, however lasting and big: still too few. */
	evidence(s, 0, 0, 7, 0, 1 << 30);
	ASSERT(is_default(s));
	evidence(s, 0, 0, 0, 7, 1 << 30);
	ASSERT(is_default(s));
	/* The eighth decides. */
	evidence(s, 0, 0, 8, 0, 1 << 30);
	ASSERT_APART(s, MB_KERNRCLM);
	/* The same key inserted again is the same site. */
	int created = 1;
	mb_site_lock();
	uintptr_t ra = (uintptr_t)s->slot->key;
	ASSERT_EQ(mb_site_insert_locked(MB_SITES_DIRECT, ra, &created), s);
	mb_site_unlock();
	ASSERT_EQ(created, 0);
}

TEST(set_apart_needs_the_volume)
{
	tables();
	struct mb_site *s = site();
	evidence(s, 0, 0, 8, 0, SET_APART - 1);
	ASSERT(is_default(s));
	evidence(s, 0, 0, 100, 0, SET_APART - 1);
	ASSERT(is_default(s));
	evidence(s, 0, 0, 8, 0, SET_APART);
	ASSERT_APART(s, MB_KERNRCLM);
	ASSERT_EQ(mb_lane_type[s->lane], MB_KERNRCLM);
	/* Apart, it stays apart when its volume falls while it lasts. */
	evidence(s, 0, 0, 8, 0, 0);
	ASSERT_APART(s, MB_KERNRCLM);
}

/* Apart only from a rest of the heap that dies sooner: a quarter of the
 * default key's samples at least die young, twice the share of the
 * site's own, and the site's young samples three standard deviations
 * below what the rest's share predicts; judged on 16 of the rest's at
 * least. */
TEST(set_apart_only_from_a_rest_that_dies_sooner)
{
	tables();
	struct mb_site *s = site();
	/* A site whose 16 samples all last stays with the default key next
	 * to these rests (young, lasting): */
	static const struct {
		unsigned young, lasting;
	} no_sooner[] = {
		{ 0, 100 }, /* everything lasts: nothing to be set apart from */
		{ 15, 0 },  /* too few of the rest's samples to judge */
		{ 20, 80 }, /* a fifth dies young: not enough */
	};
	for (size_t i = 0; i < sizeof no_sooner / sizeof no_sooner[0]; i++) {
		rest(no_sooner[i].young, no_sooner[i].lasting);
		evidence(s, 0, 0, 16, 0, 1 << 30);
		if (!is_default(s))
			FAIL("set apart next to a rest of %u young and %u lasting samples", no_sooner[i].young,
			     no_sooner[i].lasting);
	}
	/* Two in five of the rest die young. Of a site's 16 samples, 6.4
	 * would at that rate (a standard deviation of 1.96): 4 is more than
	 * half of it; 3 and 1 are fewer than half but not three deviations
	 * below, as likely from a site like the rest; none is. */
	rest(40, 60);
	evidence(s, 4, 0, 12, 0, 1 << 30);
	ASSERT(is_default(s));
	evidence(s, 3, 0, 13, 0, 1 << 30);
	ASSERT(is_default(s));
	evidence(s, 1, 0, 15, 0, 1 << 30);
	ASSERT(is_default(s));
	evidence(s, 0, 0, 16, 0, 1 << 30);
	ASSERT_APART(s, MB_KERNRCLM);
	/* Once apart it stays apart while its own evidence holds, whatever
	 * the rest does. */
	rest(0, 100);
	evidence(s, 3, 0, 13, 0, 1 << 30);
	ASSERT_APART(s, MB_KERNRCLM);
	/* More evidence, a narrower deviation: 12 young of 64 against the
	 * 25.6 predicted (deviation 3.9) is apart. */
	tables();
	s = site();
	rest(40, 60);
	evidence(s, 12, 0, 52, 0, 1 << 30);
	ASSERT_APART(s, MB_KERNRCLM);
	/* rptest, as it was measured: a site of 1 young sample in 8 next to
	 * a rest of 126 young and 204 lasting, although both live 8 MiB of
	 * allocation on average. */
	tables();
	s = site();
	rest(126, 204);
	evidence(s, 1, 2, 5, 0, 16 << 20);
	ASSERT(is_default(s));
}

TEST(set_apart_needs_three_in_four_lasting)
{
	tables();
	/* (short, lasting): apart or not. */
	static const struct {
		int32_t sh, la;
		int apart;
	} cases[] = {
		{ 2, 6, 1 },  { 3, 5, 0 },  { 3, 9, 1 },   { 4, 8, 0 },  { 25, 75, 1 },
		{ 26, 75, 0 }, { 0, 8, 1 }, { 1, 7, 1 },   { 10, 29, 0 }, { 10, 30, 1 },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		struct mb_site *s = site();
		evidence(s, cases[i].sh, 0, cases[i].la, 0, SET_APART);
		if ((mb_site_key(s) != MB_DEFAULT_TYPE) != cases[i].apart)
			FAIL("short %d lasting %d: key %d, expected %s", cases[i].sh, cases[i].la, mb_site_key(s),
			     cases[i].apart ? "apart" : "the default");
		/* Late frees count as lasting too. */
		struct mb_site *t = site();
		evidence(t, cases[i].sh, cases[i].la, 0, 0, SET_APART);
		ASSERT_EQ(mb_site_key(t) != MB_DEFAULT_TYPE, cases[i].apart);
		tables(); /* lanes back */
	}
}

/* Decisions on s in a row: per step, its samples freed late, lasting and
 * old, and the type it must then have, apart on its lane. */
struct type_step {
	int32_t late, lasting, old;
	int type;
};

static void type_steps(struct mb_site *s, const struct type_step *st, size_t n, int line)
{
	for (size_t i = 0; i < n; i++) {
		evidence(s, 0, st[i].late, st[i].lasting, st[i].old, SET_APART);
		if (s->lane < MB_FIRST_LANE || mb_site_key(s) != s->lane || mb_site_type(s) != st[i].type)
			test_fail(__FILE__, line, "step %zu (late %d, lasting %d, old %d): not apart as type %d: key %d, lane %d, type %d",
				  i, st[i].late, st[i].lasting, st[i].old, st[i].type, mb_site_key(s), s->lane, mb_site_type(s));
	}
}
#define TYPE_STEPS(s, st) type_steps((s), (st), sizeof(st) / sizeof((st)[0]), __LINE__)

TEST(type_follows_old_against_late_frees)
{
	tables();
	struct mb_site *s = site();
	static const struct type_step steps[] = {
		{ 0, 0, 8, MB_KERNNORCLM },  /* old samples only: pinned */
		{ 4, 0, 4, MB_KERNRCLM },    /* as many freed late as old: a cache */
		{ 4, 0, 5, MB_KERNRCLM },    /* more old than freed late is not enough */
		{ 4, 0, 32, MB_KERNRCLM },   /* nor eight times as many */
		{ 4, 0, 33, MB_KERNNORCLM }, /* more than eight times is */
		{ 4, 20, 4, MB_KERNRCLM },   /* lasting (not old) samples do not count */
	};
	TYPE_STEPS(s, steps);
	/* The type changes on the same lane. */
	int lane = s->lane;
	evidence(s, 0, 4, 0, 33, SET_APART);
	ASSERT_EQ(s->lane, lane);
	ASSERT_EQ(mb_lane_type[lane], MB_KERNNORCLM);
	evidence(s, 0, 4, 20, 4, SET_APART);
	ASSERT_APART(s, MB_KERNRCLM);
	/* An earlier run's old samples (the profile) count as old. */
	mb_site_lock();
	s->n_prior_old = 29;
	mb_site_decide_locked(s);
	mb_site_unlock();
	ASSERT_APART(s, MB_KERNNORCLM);
}

/* A cache holds old objects while it frees others late, about as many or
 * twice as many while it grows: its type must not follow every sample
 * across one boundary, or each flip sends its new slabs to the other
 * type's pageblocks. The cache's counts are those of the patch's
 * experiment (highorder), whose FIFO cache went pinned and back in about
 * one run in eight. */
TEST(type_holds_between_its_two_boundaries)
{
	tables();
	static const struct type_step cache[] = {
		{ 0, 8, 0, MB_KERNRCLM },     { 164, 102, 329, MB_KERNRCLM }, { 178, 74, 357, MB_KERNRCLM },
		{ 235, 307, 116, MB_KERNRCLM }, { 155, 216, 156, MB_KERNRCLM }, { 190, 181, 191, MB_KERNRCLM },
		{ 128, 5, 405, MB_KERNRCLM },  { 184, 331, 91, MB_KERNRCLM },
	};
	TYPE_STEPS(site(), cache);
	/* A pinned site stays pinned while up to half as many samples are
	 * freed late as are old, goes back at more, and then needs eight
	 * times as many old again. */
	static const struct type_step pinned[] = {
		{ 0, 0, 40, MB_KERNNORCLM },  { 20, 0, 40, MB_KERNNORCLM }, { 21, 0, 40, MB_KERNRCLM },
		{ 21, 0, 168, MB_KERNRCLM }, { 21, 0, 169, MB_KERNNORCLM },
	};
	TYPE_STEPS(site(), pinned);
}

TEST(back_to_default_when_most_die_young)
{
	tables();
	struct mb_site *s = site();
	evidence(s, 0, 0, 10, 0, SET_APART);
	ASSERT_APART(s, MB_KERNRCLM);
	int lane = s->lane;
	/* Half short: neither lasting enough to be set apart anew, nor
	 * short enough to go back. */
	evidence(s, 10, 0, 10, 0, SET_APART);
	ASSERT_APART(s, MB_KERNRCLM);
	evidence(s, 9, 0, 9, 0, 0);
	ASSERT_APART(s, MB_KERNRCLM);
	/* More than half. */
	evidence(s, 11, 0, 10, 0, SET_APART);
	ASSERT(is_default(s));
	/* Its lane is free again: the next site set apart gets it. */
	struct mb_site *t = site();
	evidence(t, 0, 0, 8, 0, SET_APART);
	ASSERT_APART(t, MB_KERNRCLM);
	ASSERT_EQ(t->lane, lane);
	/* At the default, many short samples change nothing. */
	evidence(s, 100, 0, 0, 0, 0);
	ASSERT(is_default(s));
}

TEST(evidence_is_halved_past_256)
{
	tables();
	struct mb_site *s = site();
	/* 256 freed samples: kept as they are. */
	evidence(s, 200, 56, 3, 1, 0);
	ASSERT_EQ(s->n_short, 200);
	ASSERT_EQ(s->n_medium, 56);
	/* 257: both halved, the live counts not. */
	evidence(s, 200, 57, 3, 1, 0);
	ASSERT_EQ(s->n_short, 100);
	ASSERT_EQ(s->n_medium, 28);
	ASSERT_EQ(s->n_lasting, 3);
	ASSERT_EQ(s->n_old, 1);
}

TEST(lanes_run_out_and_come_back)
{
	tables();
	struct mb_site *s[MB_NKEYS];
	int nl = MB_OWN_KEY - MB_FIRST_LANE; /* the own key is no lane */
	for (int i = 0; i < nl; i++) {
		s[i] = site();
		evidence(s[i], 0, 0, 8, 0, SET_APART);
		ASSERT_APART(s[i], MB_KERNRCLM);
		ASSERT_LT(s[i]->lane, MB_OWN_KEY);
		for (int k = 0; k < i; k++)
			ASSERT_NE(s[k]->lane, s[i]->lane);
	}
	/* Every lane taken: the type's own key, shared. */
	struct mb_site *x = site();
	evidence(x, 0, 0, 0, 8, SET_APART);
	ASSERT_EQ(x->lane, -1);
	ASSERT_EQ(mb_site_key(x), MB_KERNNORCLM);
	struct mb_site *y = site();
	evidence(y, 0, 0, 8, 0, SET_APART);
	ASSERT_EQ(mb_site_key(y), MB_KERNRCLM);
	/* y goes back to the default from its shared key. */
	evidence(y, 9, 0, 8, 0, SET_APART);
	ASSERT(is_default(y));
	/* One lane given back: the next decision of x takes it. */
	evidence(s[3], 20, 0, 0, 0, 0);
	ASSERT(is_default(s[3]));
	evidence(x, 0, 0, 0, 8, SET_APART);
	ASSERT_APART(x, MB_KERNNORCLM);
}

TEST(wrapper_only_when_deep_sites_differ)
{
	tables();
	struct mb_site *w = site();
	struct mb_site *d[3];
	mb_site_lock();
	atomic_store(&w->slot->flags, 0);
	mb_site_unlock();
	for (int i = 0; i < 3; i++) {
		d[i] = site_in(MB_SITES_DEEP);
		ASSERT_EQ(d[i]->is_deep, 1);
		mb_site_lock();
		d[i]->parent = w;
		w->deep[w->ndeep++] = mb_site_index(d[i]);
		mb_site_unlock();
	}
	/* One deep site apart, the others without enough evidence. */
	evidence(d[0], 0, 0, 8, 0, SET_APART);
	ASSERT_APART(d[0], MB_KERNRCLM);
	ASSERT_EQ(mb_site_flags(w) & MB_SITE_WRAPPER, 0);
	evidence(d[1], 7, 0, 0, 0, 0);
	ASSERT_EQ(mb_site_flags(w) & MB_SITE_WRAPPER, 0);
	/* The second one gets evidence, of the default type: they differ. */
	evidence(d[1], 8, 0, 0, 0, 0);
	ASSERT_EQ(mb_site_type(d[1]), MB_DEFAULT_TYPE);
	ASSERT_EQ(mb_site_flags(w) & MB_SITE_WRAPPER, MB_SITE_WRAPPER);
	/* The first back to the default: the same type, no wrapper. */
	evidence(d[0], 20, 0, 8, 0, SET_APART);
	ASSERT(is_default(d[0]));
	ASSERT_EQ(mb_site_flags(w) & MB_SITE_WRAPPER, 0);
	/* Both apart, pinned and cache: they differ. */
	evidence(d[0], 0, 0, 0, 8, SET_APART);
	evidence(d[1], 0, 0, 8, 0, SET_APART);
	ASSERT_APART(d[0], MB_KERNNORCLM);
	ASSERT_APART(d[1], MB_KERNRCLM);
	ASSERT_EQ(mb_site_flags(w) & MB_SITE_WRAPPER, MB_SITE_WRAPPER);
	/* Both the same type on different lanes: no wrapper. */
	evidence(d[0], 0, 8, 0, 0, SET_APART);
	ASSERT_APART(d[0], MB_KERNRCLM);
	ASSERT_NE(d[0]->lane, d[1]->lane);
	ASSERT_EQ(mb_site_flags(w) & MB_SITE_WRAPPER, 0);
	/* The third, with evidence, differs from both: flagged by its
	 * decision too. */
	evidence(d[2], 8, 0, 0, 0, 0);
	ASSERT_EQ(mb_site_flags(w) & MB_SITE_WRAPPER, MB_SITE_WRAPPER);
	/* A type set from a profile checks the wrapper as well. */
	mb_site_lock();
	mb_site_set_type_locked(d[2], MB_KERNRCLM);
	mb_site_unlock();
	ASSERT_EQ(mb_site_flags(w) & MB_SITE_WRAPPER, 0);
}

TEST(pinned_sites_never_change)
{
	tables();
	static const int types[] = { MB_KERNNORCLM, MB_KERNRCLM, MB_USERRCLM };
	for (int t = 0; t < 3; t++) {
		struct mb_site *s = site();
		mb_site_lock();
		mb_site_pin_locked(s, types[t]);
		mb_site_unlock();
		ASSERT_EQ(mb_site_flags(s), MB_SITE_PINNED);
		ASSERT_EQ(mb_site_key(s), types[t]);
		evidence(s, 100, 0, 0, 0, 0);
		ASSERT_EQ(mb_site_key(s), types[t]);
		evidence(s, 0, 0, 100, 0, 1 << 30);
		ASSERT_EQ(mb_site_key(s), types[t]);
		evidence(s, 0, 0, 0, 100, 1 << 30);
		ASSERT_EQ(mb_site_key(s), types[t]);
		ASSERT_EQ(s->lane, -1);
		ASSERT_EQ(mb_site_flags(s), MB_SITE_PINNED);
	}
}

/* ---- samples ---- */

static struct mb_buddy *const B = &mb_heap.buddy;
static int heap_ready;

static void heap(void)
{
	tables();
	if (!heap_ready) {
		test_heap_setup(64 * MiB, MB_MAX_ORDER_DEFAULT, 3600000);
		heap_ready = 1;
	}
}

static void *obj(size_t n)
{
	void *p = mb_large_alloc(n, 0, MB_DEFAULT_TYPE, 0);
	ASSERT_NE(p, NULL);
	return p;
}

static struct mb_page *record(void *p)
{
	return &B->pages[mb_buddy_page_index(B, p)];
}

static void drop(void *p)
{
	struct mb_page *m = record(p);
	if (m->user16 & MB_LARGE_SAMPLED)
		mb_sample_freed(p);
	mb_large_free(p, m);
	ASSERT_BUDDY(B);
}

/* The young threshold of sample.c for the heap as it is. */
static uint64_t t_young(void)
{
	uint64_t held = (uint64_t)B->pages_allocated << MB_PAGE_SHIFT;
	return held / 64 > MiB ? held / 64 : MiB;
}

static uint64_t t_old(void)
{
	uint64_t held = (uint64_t)B->pages_allocated << MB_PAGE_SHIFT;
	return 4 * held > 64 * MiB ? 4 * held : 64 * MiB;
}

static void age(void)
{
	mb_site_lock();
	mb_samples_age_locked();
	mb_site_unlock();
}

TEST(samples_freed_young_or_late)
{
	heap();
	struct mb_site *s = site();
	void *p = obj(16 << 10);
	mb_sample_add(p, 16 << 10, s, NULL, 4, mb_site_key(s));
	ASSERT_EQ(record(p)->user16 & MB_LARGE_SAMPLED, MB_LARGE_SAMPLED);
	ASSERT_EQ(s->samples, 1);
	ASSERT_EQ(s->sampled_bytes, 16 << 10);
	ASSERT_EQ(s->live_estimate, 64 << 10);
	/* Freed just before the young threshold: short. */
	mb_alloc_clock_advance(t_young() - 1);
	age();
	ASSERT_EQ(s->n_lasting, 0);
	drop(p);
	ASSERT_EQ(s->n_short, 1);
	ASSERT_EQ(s->n_medium, 0);
	ASSERT_EQ(s->live_estimate, 0);
	ASSERT_EQ(s->freed, 1);
	/* At the threshold: lasting while it lives, late when freed. */
	p = obj(16 << 10);
	mb_sample_add(p, 16 << 10, s, NULL, 1, mb_site_key(s));
	mb_alloc_clock_advance(t_young());
	age();
	ASSERT_EQ(s->n_lasting, 1);
	drop(p);
	ASSERT_EQ(s->n_lasting, 0);
	ASSERT_EQ(s->n_medium, 1);
	ASSERT_EQ(s->n_short, 1);
	ASSERT_EQ(s->live_estimate, 0);
	/* A free of an object that is no sample changes nothing. */
	p = obj(16 << 10);
	mb_sample_freed(p);
	drop(p);
	ASSERT_EQ(s->n_short + s->n_medium, 2);
}

/* Live samples age on the allocation clock, and the site's verdict
 * follows: a cache while they are lasting, pinned once they are old,
 * and back to the default when they are replaced by short-lived ones. */
TEST(samples_age_into_a_verdict)
{
	heap();
	struct mb_site *s = site(), *d = site_in(MB_SITES_DEEP);
	void *p[8];
	for (int i = 0; i < 8; i++) {
		p[i] = obj(16 << 10);
		mb_sample_add(p[i], 16 << 10, s, d, 2, mb_site_key(s)); /* 8 * 32 KiB: 256 KiB */
	}
	ASSERT_EQ(s->live_estimate, SET_APART);
	ASSERT_EQ(d->live_estimate, SET_APART);
	ASSERT(is_default(s));
	mb_alloc_clock_advance(t_young());
	age();
	ASSERT_EQ(s->n_lasting, 8);
	ASSERT_EQ(d->n_lasting, 8);
	ASSERT_APART(s, MB_KERNRCLM);
	ASSERT_APART(d, MB_KERNRCLM);
	mb_alloc_clock_advance(t_old());
	age();
	ASSERT_EQ(s->n_lasting, 0);
	ASSERT_EQ(s->n_old, 8);
	ASSERT_APART(s, MB_KERNNORCLM);
	ASSERT_APART(d, MB_KERNNORCLM);
	/* Freed now: late, and the site's own lifetimes count. */
	for (int i = 0; i < 8; i++)
		drop(p[i]);
	ASSERT_EQ(s->n_medium, 8);
	ASSERT_EQ(s->n_old, 0);
	ASSERT_APART(s, MB_KERNRCLM);
	ASSERT_EQ(s->live_estimate, 0);
	/* Nine short-lived ones: more than half short, back. */
	for (int i = 0; i < 9; i++) {
		void *q = obj(16 << 10);
		mb_sample_add(q, 16 << 10, s, NULL, 1, mb_site_key(s));
		drop(q);
	}
	ASSERT_EQ(s->n_short, 9);
	ASSERT(is_default(s));
}

/* The bucket table of live samples starts at one page and doubles past
 * two samples a bucket: after two doublings every sample is still found
 * when its object is freed, and credited once. */
TEST(samples_found_after_the_buckets_grow)
{
	heap();
	struct mb_site *s = site();
	enum { N = 5000 };
	static void *p[N];
	for (int i = 0; i < N; i++) {
		p[i] = obj(4 << 10);
		mb_sample_add(p[i], 4 << 10, s, NULL, 1, mb_site_key(s));
	}
	ASSERT_EQ(s->samples, N);
	ASSERT_EQ(s->live_estimate, (int64_t)N * (4 << 10));
	for (int i = N - 1; i >= 0; i--)
		drop(p[i]);
	ASSERT_EQ(s->freed, N);
	ASSERT_EQ(s->live_estimate, 0);
}

/* ---- MBUDDY_RULES, each parse in a child ---- */

static void own_function(void)
{
}

struct rules_case {
	const char *rules;
	int lib_type; /* what mb_rules_type gives this program's code */
	int sym_type; /* and sym_fn, named by its dynamic symbol */
};

static char sym_name[128];
static void *sym_fn; /* the function sym_name names */

static void parse_and_match(void *arg)
{
	const struct rules_case *rc = arg;
	char buf[8192];
	/* %S stands for sym_fn's dynamic symbol name. */
	const char *in = rc->rules;
	size_t n = 0;
	for (; *in && n < sizeof buf - 200; in++) {
		if (in[0] == '%' && in[1] == 'S') {
			n += (size_t)snprintf(buf + n, sizeof buf - n, "%s", sym_name);
			in++;
		} else {
			buf[n++] = *in;
		}
	}
	buf[n] = 0;
	mb_rules_parse(buf);
	printf("lib %d sym %d\n", mb_rules_type((void *)own_function), mb_rules_type(sym_fn));
}

/* The warnings of a parse, and what the rules give after it. */
static void rules(const char *r, int lib_type, int sym_type, unsigned warnings, int line)
{
	struct rules_case rc = { r, lib_type, sym_type };
	struct test_child c;
	test_child_run(&c, parse_and_match, &rc);
	if (c.status != 0)
		test_fail(__FILE__, line, "parsing '%s': status %d\n%s", r, c.status, c.out);
	char want[64];
	snprintf(want, sizeof want, "lib %d sym %d\n", lib_type, sym_type);
	if (!strstr(c.out, want) || test_count_lines(c.out, "libmbuddy: MBUDDY_RULES: ignoring '") != warnings)
		test_fail(__FILE__, line, "rules '%s': expected '%.*s' and %u warnings; got:\n%s", r,
			  (int)strlen(want) - 1, want, warnings, c.out);
}
#define RULES(r, lib, sym, warnings) rules((r), (lib), (sym), (warnings), __LINE__)

/* A function of the C library, named in its dynamic symbol table and not
 * lying in this program (a sanitizer's runtime, linked in, may intercept
 * some, qsort among them). */
static void libc_symbol(void)
{
	static void *const cands[] = { (void *)getpid, (void *)qsort, (void *)labs };
	Dl_info info;
	sym_fn = NULL;
	for (size_t i = 0; i < sizeof cands / sizeof cands[0] && !sym_fn; i++)
		if (dladdr(cands[i], &info) && info.dli_sname && info.dli_fname && !strstr(info.dli_fname, "test_site")) {
			snprintf(sym_name, sizeof sym_name, "%s", info.dli_sname);
			sym_fn = cands[i];
		}
	if (!sym_fn)
		SKIP("dladdr names no function of the C library outside this program");
	/* This program's own code: found by its path, not by a name. */
	if (!dladdr((void *)own_function, &info) || !info.dli_fname || !strstr(info.dli_fname, "test_site"))
		SKIP("dladdr does not place this program's code in test_site");
}

TEST(rules_documented_forms)
{
	libc_symbol();
	RULES("", -1, -1, 0);
	RULES("lib:test_site=pinned", MB_KERNNORCLM, -1, 0);
	RULES("sym:%S=cache", -1, MB_KERNRCLM, 0);
	/* No prefix: a sym: entry. */
	RULES("%S=short", -1, MB_USERRCLM, 0);
	RULES("test_site=short", -1, -1, 0);
	/* Every type name and alias, in any case. */
	RULES("lib:test_site=KernNoRclm,sym:%S=kernrclm", MB_KERNNORCLM, MB_KERNRCLM, 0);
	RULES("lib:test_site=LONG,sym:%S=Medium", MB_KERNNORCLM, MB_KERNRCLM, 0);
	RULES("lib:test_site=temp,sym:%S=USERRCLM", MB_USERRCLM, MB_USERRCLM, 0);
	RULES("lib:test_site=Cache,sym:%S=Pinned", MB_KERNRCLM, MB_KERNNORCLM, 0);
	/* The first matching entry wins. */
	RULES("lib:test_site=pinned,lib:test_site=short,sym:%S=short,sym:%S=pinned", MB_KERNNORCLM, MB_USERRCLM, 0);
	/* sym: is exact, lib: a part of the path. */
	RULES("sym:getpi=short,sym:qsor=short,sym:lab=short,lib:unit/test_si=cache", MB_KERNRCLM, -1, 0);
	/* The documented example. */
	RULES("sym:xstrdup=short,lib:libsqlite3=cache", -1, -1, 0);
}

TEST(rules_bad_entries_are_reported_and_skipped)
{
	libc_symbol();
	RULES("lib:test_site", -1, -1, 1);
	RULES("lib:test_site=", -1, -1, 1);
	RULES("lib:test_site=bogus,sym:%S=cache", -1, MB_KERNRCLM, 1);
	RULES("sym:=pinned,lib:test_site=pinned", MB_KERNNORCLM, -1, 1);
	RULES("=pinned", -1, -1, 1);
	RULES("lib:=pinned", -1, -1, 1);
	/* No spaces around the separators. */
	RULES("lib:test_site=pinned ,sym:%S=cache", -1, MB_KERNRCLM, 1);
	RULES("lib:test_site=pinned,sym:%S= cache", MB_KERNNORCLM, -1, 1);
	RULES("sym:%S=a=b,lib:test_site=temp", MB_USERRCLM, -1, 1);
	/* Each bad entry once. */
	RULES("a,b=,=c,lib:test_site=cache,d=e", MB_KERNRCLM, -1, 4);
}

TEST(rules_limits)
{
	libc_symbol();
	char r[8192], name[128];
	/* A name of 95 characters is taken, of 96 not. */
	memset(name, 'x', 95);
	name[95] = 0;
	snprintf(r, sizeof r, "sym:%s=short,lib:test_site=cache", name);
	RULES(r, MB_KERNRCLM, -1, 0);
	memset(name, 'x', 96);
	name[96] = 0;
	snprintf(r, sizeof r, "sym:%s=short,lib:test_site=cache", name);
	RULES(r, MB_KERNRCLM, -1, 1);
	/* 32 entries are taken, the 33rd not (reported). */
	size_t n = 0;
	for (int i = 0; i < 31; i++)
		n += (size_t)snprintf(r + n, sizeof r - n, "sym:none%d=short,", i);
	snprintf(r + n, sizeof r - n, "lib:test_site=pinned");
	RULES(r, MB_KERNNORCLM, -1, 0);
	snprintf(r + n, sizeof r - n, "sym:none31=short,lib:test_site=pinned");
	RULES(r, -1, -1, 1);
}

/* ---- the slot tables ---- */

/* Whether the fast path (classify.h) finds s in its home slot. */
static int at_home(uintptr_t table, const struct mb_site *s, uintptr_t ra)
{
	const struct mb_site_slot *home = &mb_site_table_slots(table)[mb_site_hash(ra) & mb_site_table_mask(table)];
	return home == mb_site_slot_of(s) && atomic_load(&home->key) == ra;
}

/* A table starts at MB_SITE_CAP_MIN slots and doubles while its sites
 * fill more than a sixteenth of it, up to its maximum. Every site moves
 * with its key, flags and record; the old table reads as zeros (a reader
 * still in it finds nothing and takes the slow path); the fast path's
 * word follows the direct table once published. */
TEST(tables_grow_and_keep_every_site)
{
	tables();
	mb_sites_publish();
	uintptr_t first = mb_site_table;
	ASSERT_NE(first, 0);
	ASSERT_EQ(mb_site_table_mask(first) + 1, MB_SITE_CAP_MIN);
	enum { N = 3000, NDEEP = 1500 };
	static struct mb_site *s[N + NDEEP];
	static uintptr_t ra[N + NDEEP];
	for (unsigned i = 0; i < N + NDEEP; i++) {
		enum mb_site_table t = i < N ? MB_SITES_DIRECT : MB_SITES_DEEP;
		int created = 0;
		ra[i] = 0x7e0000000000 + (uintptr_t)i * 0x35;
		mb_site_lock();
		s[i] = mb_site_insert_locked(t, ra[i], &created);
		if (s[i] && i % 7 == 0)
			mb_site_pin_locked(s[i], MB_KERNNORCLM);
		mb_site_unlock();
		ASSERT_NE(s[i], NULL);
		ASSERT_EQ(created, 1);
	}
	uintptr_t now = mb_site_table;
	/* 3000 sites ask for 48,000 slots: the largest table. */
	ASSERT_EQ(mb_site_table_mask(now) + 1, MB_SITE_CAP);
	/* The first table's pages went back: its slots read as zeros. */
	const struct mb_site_slot *old = mb_site_table_slots(first);
	for (unsigned j = 0; j < MB_SITE_CAP_MIN; j++)
		ASSERT_EQ(atomic_load(&old[j].key), 0);
	unsigned home = 0;
	for (unsigned i = 0; i < N + NDEEP; i++) {
		enum mb_site_table t = i < N ? MB_SITES_DIRECT : MB_SITES_DEEP;
		ASSERT_EQ(mb_site_lookup(t, ra[i]), s[i]);
		ASSERT_EQ(atomic_load(&mb_site_slot_of(s[i])->key), ra[i]);
		ASSERT_EQ(mb_site_key(s[i]), i % 7 == 0 ? MB_KERNNORCLM : MB_DEFAULT_TYPE);
		ASSERT_EQ(mb_site_flags(s[i]), i % 7 == 0 ? MB_SITE_PINNED : MB_SITE_LEARNING);
		ASSERT_EQ(s[i]->is_deep, t == MB_SITES_DEEP);
		if (t == MB_SITES_DIRECT)
			home += at_home(now, s[i], ra[i]);
	}
	/* At most a fifth of a table in use: nearly every site is at home. */
	if (home * 10 < N * 9)
		FAIL("%u of %u direct sites in their home slot", home, (unsigned)N);
	/* A key seen again is the same site, in the grown table too. */
	int created = 1;
	mb_site_lock();
	ASSERT_EQ(mb_site_insert_locked(MB_SITES_DIRECT, ra[5], &created), s[5]);
	mb_site_unlock();
	ASSERT_EQ(created, 0);
}
