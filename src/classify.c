#include "config.h"
#include "classify.h"
#include "heap.h"
#include "large.h"
#include "modules.h"
#include "options.h"
#include "profile.h"
#include "region.h"
#include "slab.h"
#include "out.h"

#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>
#include <libunwind.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

/* ---- sites ---- */

#define MIN_EVIDENCE 3
/* The type of a site without evidence: the default, as with
 * classification off (reclaim_type.h). */
#define UNSETTLED_TYPE MB_DEFAULT_TYPE
#define LEARN_SAMPLES 24 /* a new site's first allocations are all sampled */

struct mb_site *mb_sites;
static struct mb_site *deep_sites;
/* Recursive for the same reason as the heap lock (see heap.c). */
static struct mb_lock site_lock = MB_LOCK_INITIALIZER_RECURSIVE("sites");
int mb_classify_ready;

static __thread int in_classify MB_TLS;
/* A new thread starts four periods away from its first sample, and does
 * not unwind before it: libunwind gives every thread that unwinds a trace
 * cache of its own (a quarter MiB, faulted in, then unmapped at exit), which
 * short-lived threads should not pay for. */
static __thread int thread_unwinds MB_TLS;
static __thread uint32_t sample_rng MB_TLS;
/* The countdown's value when it was last drawn (thread.c's start value). */
static __thread int32_t countdown_drawn MB_TLS = 4 * MB_SAMPLE_PERIOD;
static __thread struct mb_site *pending_site MB_TLS, *pending_deep MB_TLS;
static __thread int pending_nframes MB_TLS;

#define WRAPPER_MEMO 64
#define WRAPPER_RECHECK 32
struct wrapper_memo {
	uintptr_t key;
	struct mb_site *deep;
	uint32_t uses;
	uint32_t ambiguous;
};
static __thread struct wrapper_memo wrapper_memo[WRAPPER_MEMO] MB_TLS;
static __thread void *pending_frames[MB_NFRAMES] MB_TLS;

static struct mb_site *lookup(struct mb_site *table, uintptr_t key)
{
	uint32_t h = mb_site_hash(key);
	for (unsigned i = 0; i < MB_SITE_PROBES; i++) {
		struct mb_site *s = &table[(h + i) & (MB_SITE_CAP - 1)];
		uintptr_t k = atomic_load_explicit(&s->key, memory_order_acquire);
		if (k == key)
			return s;
		if (k == 0)
			return NULL;
	}
	return NULL;
}

static struct mb_site *insert_locked(struct mb_site *table, uintptr_t key, int type)
{
	uint32_t h = mb_site_hash(key);
	for (unsigned i = 0; i < MB_SITE_PROBES; i++) {
		struct mb_site *s = &table[(h + i) & (MB_SITE_CAP - 1)];
		uintptr_t k = atomic_load_explicit(&s->key, memory_order_relaxed);
		if (k == key)
			return s;
		if (k == 0) {
			atomic_store_explicit(&s->slab_key, (uint8_t)type, memory_order_relaxed);
			atomic_store_explicit(&s->flags, MB_SITE_LEARNING, memory_order_relaxed);
			atomic_store_explicit(&s->learn_left, LEARN_SAMPLES, memory_order_relaxed);
			atomic_store_explicit(&s->key, key, memory_order_release);
			return s;
		}
	}
	return NULL; /* table full around this key: the site stays unseen */
}

/* ---- rules: MBUDDY_RULES="sym:xmalloc=short,lib:libfoo=pinned" ---- */

#define MAX_RULES 32
struct rule {
	int is_lib;
	int type;
	char name[96];
};
static struct rule rules[MAX_RULES];
static int nrules;

static void parse_rules(const char *s)
{
	while (s && *s) {
		const char *end = strchr(s, ',');
		size_t len = end ? (size_t)(end - s) : strlen(s);
		const char *eq = memchr(s, '=', len);
		struct rule r = { 0 };
		const char *name = s;
		if (len > 4 && strncmp(s, "sym:", 4) == 0)
			name = s + 4;
		else if (len > 4 && strncmp(s, "lib:", 4) == 0) {
			name = s + 4;
			r.is_lib = 1;
		}
		if (!eq || eq <= name || (size_t)(eq - name) >= sizeof r.name ||
		    (r.type = mb_type_parse(eq + 1, len - (size_t)(eq + 1 - s))) < 0 || nrules == MAX_RULES) {
			mb_warn("MBUDDY_RULES: ignoring '%.*s' (expected sym:NAME=TYPE or lib:NAME=TYPE, "
				"TYPE one of KernNoRclm/pinned, KernRclm/cache, UserRclm/short)", (int)len, s);
		} else {
			memcpy(r.name, name, (size_t)(eq - name));
			rules[nrules++] = r;
		}
		s = end ? end + 1 : NULL;
	}
}

/* The rule's type for the code at ra, or -1. Takes the loader's lock, so
 * never called with a lock of ours held. */
static int rule_type(void *ra)
{
	if (!nrules)
		return -1;
	Dl_info info;
	if (!dladdr(ra, &info))
		return -1;
	for (int i = 0; i < nrules; i++) {
		if (rules[i].is_lib) {
			if (info.dli_fname && strstr(info.dli_fname, rules[i].name))
				return rules[i].type;
		} else if (info.dli_sname && strcmp(info.dli_sname, rules[i].name) == 0) {
			return rules[i].type;
		}
	}
	return -1;
}

/* A site met in an earlier run starts with that run's evidence, including
 * how long its freed objects lived (old_threshold depends on it). */
static void profile_evidence(struct mb_site *s, const struct mb_profile_entry *pe)
{
	s->n_short = pe->n_short;
	s->n_medium = pe->n_medium;
	s->n_old = pe->n_old;
	s->freed = (uint64_t)pe->n_short + (uint64_t)pe->n_medium;
	s->lifetime_sum = pe->mean_lifetime * s->freed;
}

/* ---- the fast path ---- */

static int next_countdown(void)
{
	/* Random period around MB_SAMPLE_PERIOD so loops cannot alias it. */
	uint32_t x = sample_rng ? sample_rng : (uint32_t)(uintptr_t)&sample_rng | 1;
	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	sample_rng = x;
	return (int32_t)(1 + x % (2 * MB_SAMPLE_PERIOD));
}

/* fork() must not happen while a thread is inside libunwind: the child
 * would inherit its cache lock held, forever. Unwinds announce themselves;
 * the prepare handler closes the gate and waits for them to finish (they
 * take none of our locks, so they always do), and an unwind that finds the
 * gate closed does without a stack. */
static _Atomic int unwinders, fork_gate;

static int capture(void)
{
	atomic_fetch_add(&unwinders, 1);
	if (atomic_load(&fork_gate)) {
		atomic_fetch_sub(&unwinders, 1);
		pending_nframes = 0;
		return 0;
	}
	int n = unw_backtrace(pending_frames, MB_NFRAMES);
	atomic_fetch_sub(&unwinders, 1);
	pending_nframes = n > 0 ? n : 0;
	return pending_nframes;
}

/* Where ra stands in the captured stack, or -1. */
static int frame_index(void *ra)
{
	for (int i = 0; i < pending_nframes; i++)
		if (pending_frames[i] == ra)
			return i;
	return -1;
}

/* The key of the frames above ra in the captured stack. */
static uintptr_t deep_key(void *ra)
{
	int i = frame_index(ra);
	if (i < 0 || i + 1 >= pending_nframes)
		return 0;
	/* Keyed on the wrapper's own address too: callers of two different
	 * wrappers are different sites. */
	uintptr_t k = (uintptr_t)ra ^ (uintptr_t)pending_frames[i + 1] * 31;
	if (i + 2 < pending_nframes)
		k ^= (uintptr_t)pending_frames[i + 2] * 0x9e3779b97f4a7c15ULL;
	return k | 1;
}

/* The site's first stack, for the report and for dlclose (which must know
 * the callers a deeper site stands for). */
static void keep_frames_locked(struct mb_site *s)
{
	if (!s->nframes && pending_nframes) {
		memcpy(s->frames, pending_frames, sizeof(void *) * (size_t)pending_nframes);
		s->nframes = pending_nframes;
	}
}

static struct mb_site *deep_site(struct mb_site *s, void *ra, int create)
{
	uintptr_t k = deep_key(ra);
	if (!k)
		return NULL;
	struct mb_site *d = lookup(deep_sites, k);
	if (d || !create)
		return d;
	uint64_t pkey = 0;
	struct mb_profile_entry pe;
	int known = 0;
	if (mb_opt.profile && s->pkey) {
		int i = frame_index(ra); /* found: deep_key succeeded */
		uint64_t f1 = i + 1 < pending_nframes ? mb_profile_pc_key(pending_frames[i + 1]) : 0;
		uint64_t f2 = i + 2 < pending_nframes ? mb_profile_pc_key(pending_frames[i + 2]) : 0;
		pkey = mb_profile_deep_key(s->pkey, f1, f2);
		known = mb_profile_lookup(pkey, &pe) == 0;
	}
	mb_lock_acquire(&site_lock);
	d = insert_locked(deep_sites, k, known ? pe.type : UNSETTLED_TYPE);
	if (d && !d->parent) {
		d->parent = s;
		d->is_deep = 1;
		d->pkey = pkey;
		keep_frames_locked(d);
		if (known) {
			profile_evidence(d, &pe);
			atomic_store(&d->flags, 0);
		}
		if (s->ndeep < MB_MAX_DEEP)
			s->deep[s->ndeep++] = d;
	}
	mb_lock_release(&site_lock);
	return d;
}

/* The slab key for an allocation through a wrapper, from its deeper site:
 * the default type until the site has evidence. */
static int deep_verdict(const struct mb_site *d)
{
	int key = atomic_load_explicit(&d->slab_key, memory_order_relaxed);
	if (d->n_short + d->n_medium + d->n_old < MIN_EVIDENCE)
		key = (key & ~MB_TYPE_MASK) | UNSETTLED_TYPE;
	return key;
}

static int classify_slow(void *ra, size_t n, struct mb_site *s, int sample)
{
	if (in_classify)
		return s ? atomic_load(&s->slab_key) : UNSETTLED_TYPE;
	in_classify = 1;
	if (!s) {
		/* dladdr takes the loader's lock: outside ours. */
		int rt = rule_type(ra);
		uint64_t pkey = mb_opt.profile ? mb_profile_pc_key(ra) : 0;
		struct mb_profile_entry pe;
		int known = rt < 0 && mb_profile_lookup(pkey, &pe) == 0;
		mb_lock_acquire(&site_lock);
		s = insert_locked(mb_sites, (uintptr_t)ra, rt >= 0 ? rt : known ? pe.type : UNSETTLED_TYPE);
		if (s) {
			s->pkey = pkey;
			if (rt >= 0) {
				atomic_store(&s->flags, MB_SITE_PINNED);
			} else if (known) {
				/* Start where the last run ended: its evidence and
				 * verdict, sampling at the normal rate. */
				profile_evidence(s, &pe);
				atomic_store(&s->flags, pe.wrapper ? MB_SITE_WRAPPER : 0);
			}
		}
		mb_lock_release(&site_lock);
		if (!s) {
			in_classify = 0;
			return UNSETTLED_TYPE;
		}
	}
	uint8_t fl = atomic_load_explicit(&s->flags, memory_order_relaxed);
	if (fl & MB_SITE_PINNED) {
		in_classify = 0;
		return atomic_load(&s->slab_key);
	}
	if (sample)
		thread_unwinds = 1;
	int type = atomic_load(&s->slab_key);
	if (!thread_unwinds) {
		/* A young thread: no unwinding, so a learning site waits for
		 * samples from older threads, and a wrapper's allocations get
		 * the default type. */
		in_classify = 0;
		return (fl & MB_SITE_WRAPPER) ? UNSETTLED_TYPE : type;
	}
	if (fl & MB_SITE_LEARNING) {
		if (atomic_fetch_sub(&s->learn_left, 1) <= 1)
			atomic_fetch_and(&s->flags, (uint8_t)~MB_SITE_LEARNING);
		sample = 1;
	}
	/* Through a wrapper: a thread's recent call paths, keyed by the return
	 * address and the stack depth, remember their deeper site. Unwinds
	 * confirm it, often at first and then one use in WRAPPER_RECHECK; two
	 * paths found behind one key (same depth, different callers) make that
	 * key unwind every time. */
	struct wrapper_memo *wm = NULL;
	if ((fl & MB_SITE_WRAPPER) && !sample) {
		/* This frame's address stands for the stack depth. */
		uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
		uintptr_t key = (uintptr_t)ra ^ (sp * 0x9e3779b97f4a7c15ULL);
		wm = &wrapper_memo[mb_site_hash(key) & (WRAPPER_MEMO - 1)];
		if (wm->key != key) {
			wm->key = key;
			wm->deep = NULL;
			wm->uses = 0;
			wm->ambiguous = 0;
		}
		uint32_t u = ++wm->uses;
		int recheck = wm->ambiguous || !wm->deep || (u & (u - 1)) == 0 || u % WRAPPER_RECHECK == 0;
		if (!recheck) {
			in_classify = 0;
			return deep_verdict(wm->deep);
		}
	}
	if (sample || (fl & MB_SITE_WRAPPER)) {
		capture();
		struct mb_site *d = deep_site(s, ra, 1);
		if (wm) {
			if (wm->deep && d != wm->deep)
				wm->ambiguous = 1;
			wm->deep = d;
		}
		/* Through a wrapper, the deeper site decides; one without
		 * evidence yet gets the default, like any unseen site. */
		if (fl & MB_SITE_WRAPPER)
			type = d ? deep_verdict(d) : UNSETTLED_TYPE;
		if (sample) {
			/* The allocation clock: the allocations since the
			 * last draw, each taken for one of this size (a
			 * random one of them), so no fast path counts bytes. */
			int32_t left = mb_self.sample_countdown > 0 ? mb_self.sample_countdown : 0;
			mb_alloc_clock_advance((uint64_t)(countdown_drawn - left) * (n ? n : 1));
			mb_self.sample_countdown = countdown_drawn = next_countdown();
			pending_site = s;
			pending_deep = d;
			type |= MB_CLASSIFY_SAMPLE;
		}
	}
	in_classify = 0;
	return type;
}

int mb_classify_site_slow(void *ra, size_t n)
{
	if (!mb_classify_ready)
		return UNSETTLED_TYPE;
	struct mb_site *s = lookup(mb_sites, (uintptr_t)ra);
	int sample = mb_self.sample_countdown <= 0;
	if (s && !sample && !(atomic_load_explicit(&s->flags, memory_order_relaxed) & (MB_SITE_LEARNING | MB_SITE_WRAPPER)))
		return atomic_load_explicit(&s->slab_key, memory_order_relaxed);
	return classify_slow(ra, n, s, sample);
}

/* ---- samples: live sampled objects, out of band ---- */

#define SAMPLE_CAP (1u << 16)
#define SAMPLE_BUCKETS (1u << 14)

struct sample {
	uintptr_t addr;
	struct mb_site *site, *deep;
	uint64_t born;
	uint32_t next; /* bucket chain, or free list */
	uint8_t counted_old;
};

static struct sample *samples;
static uint32_t *buckets;
static uint32_t free_sample = UINT32_MAX, nsamples;

static uint32_t bucket_of(uintptr_t a)
{
	return mb_site_hash(a) & (SAMPLE_BUCKETS - 1);
}

/* Thresholds on the allocation clock, scaled to the heap's size: short is
 * freed before 1/64 of the heap is allocated again, old has survived the
 * allocation of twice the heap. */
static void thresholds(uint64_t *t_short, uint64_t *t_old)
{
	uint64_t held = (uint64_t)mb_heap.buddy.pages_allocated << MB_PAGE_SHIFT;
	*t_short = held / 64 > (1u << 20) ? held / 64 : (1u << 20);
	*t_old = 2 * held > (64u << 20) ? 2 * held : (64u << 20);
}

static void decide_locked(struct mb_site *s);

static int site_type(const struct mb_site *s)
{
	return mb_key_type(atomic_load_explicit(&s->slab_key, memory_order_relaxed));
}

/* The site's type changes. */
static void set_site_type(struct mb_site *s, int t)
{
	atomic_store_explicit(&s->slab_key, (uint8_t)t, memory_order_relaxed);
}

static void check_wrapper_locked(struct mb_site *parent)
{
	int seen = -1;
	for (int i = 0; i < parent->ndeep; i++) {
		struct mb_site *d = parent->deep[i];
		if (d->n_short + d->n_medium + d->n_old < MIN_EVIDENCE)
			continue;
		int t = site_type(d);
		if (seen >= 0 && t != seen) {
			atomic_fetch_or(&parent->flags, MB_SITE_WRAPPER);
			return;
		}
		seen = t;
	}
}

static void decide_locked(struct mb_site *s)
{
	if (!s)
		return;
	if (s->n_short + s->n_medium + s->n_old > 256) {
		s->n_short /= 2;
		s->n_medium /= 2;
		s->n_old /= 2;
	}
	int32_t total = s->n_short + s->n_medium + s->n_old;
	if (total >= MIN_EVIDENCE && !(atomic_load(&s->flags) & MB_SITE_PINNED)) {
		int t;
		if (2 * s->n_short > total)
			t = MB_USERRCLM;
		else if (s->n_old > s->n_medium)
			t = MB_KERNNORCLM;
		else
			t = MB_KERNRCLM;
		set_site_type(s, t);
	}
	if (s->parent)
		check_wrapper_locked(s->parent);
}

/* A site whose objects are seen to die is judged by its own lifetimes: an
 * object is old only once it has outlived four times their mean, so a big
 * cache that turns over slowly is not mistaken for pinned data. */
static uint64_t old_threshold(const struct mb_site *s, uint64_t t_old)
{
	if (s->freed >= 8) {
		uint64_t own = 4 * (s->lifetime_sum / s->freed);
		return own > t_old ? own : t_old;
	}
	return t_old;
}

/* Live samples are aged a slice at a time: each registration scans the
 * next AGE_SLICE buckets, so the whole table is seen once per
 * SAMPLE_BUCKETS / AGE_SLICE registrations and no single call holds the
 * site lock for a whole scan. */
#define AGE_SLICE 32
static uint32_t age_cursor;

static void age_scan_locked(void)
{
	uint64_t now = mb_alloc_clock_now(), t_short, t_old;
	thresholds(&t_short, &t_old);
	uint32_t first = age_cursor;
	age_cursor = (first + AGE_SLICE) & (SAMPLE_BUCKETS - 1);
	for (uint32_t b = first; b < first + AGE_SLICE; b++) {
		for (uint32_t i = buckets[b]; i != UINT32_MAX; i = samples[i].next) {
			struct sample *e = &samples[i];
			if (e->counted_old || now - e->born < old_threshold(e->site, t_old))
				continue;
			e->counted_old = 1;
			e->site->n_old++;
			decide_locked(e->site);
			if (e->deep) {
				e->deep->n_old++;
				decide_locked(e->deep);
			}
		}
	}
}

/* Mark the object as sampled in its out-of-band state: only in a slab
 * the calling thread owns (it just allocated the object there), since
 * only the owner writes a slab's bits. */
static int mark_sampled(void *p, size_t n)
{
	struct mb_buddy *b = &mb_heap.buddy;
	struct mb_page *m = &b->pages[mb_buddy_page_index(b, p)];
	(void)n;
	if (m->kind == MB_KIND_SLAB) {
		struct mb_slab *s = mb_slab_of_page(m);
		long i = mb_slab_index(s, p);
		if (i < 0 || mb_self.heap == NULL || mb_slab_owner(s) != mb_self.heap || mb_slab_is_free(s, (uint32_t)i))
			return -1;
		mb_slab_mark_sampled(s, (uint32_t)i);
		return 0;
	}
	if (m->kind == MB_KIND_LARGE) {
		m->user16 |= MB_LARGE_SAMPLED;
		return 0;
	}
	return -1;
}

void mb_classify_sampled(void *p, size_t n)
{
	struct mb_site *s = pending_site, *d = pending_deep;
	pending_site = pending_deep = NULL;
	if (!s || !mb_classify_ready || !mb_buddy_contains(&mb_heap.buddy, p))
		return;
	mb_lock_acquire(&site_lock);
	s->samples++;
	s->sampled_bytes += n;
	keep_frames_locked(s);
	if (d) {
		d->samples++;
		d->sampled_bytes += n;
		keep_frames_locked(d);
	}
	if (free_sample != UINT32_MAX || nsamples < SAMPLE_CAP) {
		uint32_t i;
		if (free_sample != UINT32_MAX) {
			i = free_sample;
			free_sample = samples[i].next;
		} else {
			i = nsamples++;
		}
		if (mark_sampled(p, n) == 0) {
			struct sample *e = &samples[i];
			e->addr = (uintptr_t)p;
			e->site = s;
			e->deep = d;
			e->born = mb_alloc_clock_now();
			e->counted_old = 0;
			uint32_t b = bucket_of(e->addr);
			e->next = buckets[b];
			buckets[b] = i;
		} else {
			samples[i].next = free_sample;
			free_sample = i;
		}
	}
	age_scan_locked();
	mb_lock_release(&site_lock);
}

static void credit_free(struct mb_site *s, uint64_t life, uint64_t t_short, int was_old)
{
	if (!s)
		return;
	if (was_old && s->n_old > 0)
		s->n_old--;
	if (life < t_short)
		s->n_short++;
	else
		s->n_medium++;
	s->freed++;
	s->lifetime_sum += life;
	decide_locked(s);
}

void mb_classify_freed(const void *p)
{
	if (!mb_classify_ready)
		return;
	uint64_t now = mb_alloc_clock_now(), t_short, t_old;
	mb_lock_acquire(&site_lock);
	thresholds(&t_short, &t_old);
	uint32_t b = bucket_of((uintptr_t)p), *link = &buckets[b];
	for (uint32_t i = *link; i != UINT32_MAX; link = &samples[i].next, i = *link) {
		struct sample *e = &samples[i];
		if (e->addr != (uintptr_t)p)
			continue;
		uint64_t life = now - e->born;
		credit_free(e->site, life, t_short, e->counted_old);
		credit_free(e->deep, life, t_short, e->counted_old);
		*link = e->next;
		e->next = free_sample;
		free_sample = i;
		break;
	}
	mb_lock_release(&site_lock);
}

/* ---- set-up, fork, dlclose ---- */

void mb_classify_init(void)
{
	if (!mb_opt.classify)
		return;
	parse_rules(mb_opt.rules);
	if (mb_opt.profile)
		mb_profile_load(mb_opt.profile);
	size_t site_bytes = (size_t)MB_SITE_CAP * sizeof(struct mb_site);
	mb_sites = mb_os_reserve_records(site_bytes, NULL);
	deep_sites = mb_os_reserve_records(site_bytes, NULL);
	samples = mb_os_reserve_records((size_t)SAMPLE_CAP * sizeof(struct sample), NULL);
	buckets = mb_os_reserve_records(SAMPLE_BUCKETS * sizeof(uint32_t), NULL);
	if (!mb_sites || !deep_sites || !samples || !buckets) {
		mb_warn("cannot reserve the call-site tables; classification is off");
		mb_opt.classify = 0;
		/* The fast path reads a NULL table as "off". */
		if (mb_sites)
			mb_os_unreserve(mb_sites, site_bytes);
		mb_sites = NULL;
		return;
	}
	memset(buckets, 0xff, SAMPLE_BUCKETS * sizeof(uint32_t));
	/* The first unw_backtrace of a process costs a fraction of a
	 * millisecond; pay it now, not inside some allocation. It also makes
	 * libunwind open a pipe it keeps for good: a program started with
	 * stdin, stdout or stderr closed must not find that pipe there, so
	 * closed standard descriptors are held on /dev/null meanwhile. */
	int held[3], nheld = 0;
	for (int fd = 0; fd < 3; fd++) {
		if (fcntl(fd, F_GETFD) == -1) {
			int got = open("/dev/null", O_RDWR | O_CLOEXEC);
			if (got >= 0)
				held[nheld++] = got;
		}
	}
	void *warm[MB_NFRAMES];
	unw_backtrace(warm, MB_NFRAMES);
	while (nheld)
		close(held[--nheld]);
	__atomic_store_n(&mb_classify_ready, 1, __ATOMIC_RELEASE);
}

void mb_classify_fork_prepare(void)
{
	atomic_store(&fork_gate, 1);
	while (atomic_load(&unwinders))
		sched_yield();
	mb_lock_acquire(&site_lock);
}

void mb_classify_fork_parent(void)
{
	mb_lock_release(&site_lock);
	atomic_store(&fork_gate, 0);
}

void mb_classify_fork_child(void)
{
	atomic_store(&unwinders, 0);
	atomic_store(&fork_gate, 0);
	mb_lock_after_fork_child(&site_lock, 1);
}

/* ---- dlclose ---- */

static int in_code(uintptr_t a, const struct mb_module *gone, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (a >= gone[i].lo && a < gone[i].hi)
			return 1;
	return 0;
}

/* Whether the site is keyed on an address of unmapped code: a site's own
 * return address; for a deeper site its wrapper's, or one of the two
 * callers above the wrapper its key is made of (all of them when they are
 * not known). */
static int site_in_code(const struct mb_site *s, const struct mb_module *gone, size_t n)
{
	if (!s->is_deep)
		return in_code(atomic_load(&s->key), gone, n);
	uintptr_t wrapper = atomic_load(&s->parent->key);
	if (in_code(wrapper, gone, n))
		return 1;
	for (int k = 0; k < s->nframes; k++)
		if ((uintptr_t)s->frames[k] == wrapper)
			return (k + 1 < s->nframes && in_code((uintptr_t)s->frames[k + 1], gone, n)) ||
			       (k + 2 < s->nframes && in_code((uintptr_t)s->frames[k + 2], gone, n));
	return 1;
}

/* What the site learned no longer applies to the code at its address: it
 * learns again, and its evidence is not saved under a module that left. */
static void forget_locked(struct mb_site *s)
{
	s->n_short = s->n_medium = s->n_old = 0;
	s->pkey = 0;
	set_site_type(s, UNSETTLED_TYPE);
	atomic_store(&s->learn_left, LEARN_SAMPLES);
	atomic_store(&s->flags, MB_SITE_LEARNING);
}

void mb_classify_code_unmapped(struct mb_modules *before)
{
	if (!mb_classify_ready)
		return;
	size_t n = before ? mb_modules_unloaded(before) : 0;
	if (before && n == 0)
		return;
	mb_profile_forget_modules();
	mb_lock_acquire(&site_lock);
	for (struct mb_site *t = mb_sites; t; t = t == mb_sites ? deep_sites : NULL) {
		for (uint32_t i = 0; i < MB_SITE_CAP; i++) {
			struct mb_site *s = &t[i];
			if (!atomic_load(&s->key) || (atomic_load(&s->flags) & MB_SITE_PINNED))
				continue;
			if (!before || site_in_code(s, before->v, n))
				forget_locked(s);
		}
	}
	mb_lock_release(&site_lock);
}

void mb_classify_save_profile(void)
{
	if (!mb_classify_ready || !mb_opt.profile)
		return;
	if (mb_profile_save_begin(mb_opt.profile) != 0)
		return;
	mb_lock_acquire(&site_lock);
	for (struct mb_site *t = mb_sites; t; t = t == mb_sites ? deep_sites : NULL) {
		for (uint32_t i = 0; i < MB_SITE_CAP; i++) {
			struct mb_site *s = &t[i];
			int fl = atomic_load(&s->flags);
			if (!atomic_load(&s->key) || !s->pkey || (fl & MB_SITE_PINNED) ||
			    s->n_short + s->n_medium + s->n_old < MIN_EVIDENCE)
				continue;
			struct mb_profile_entry e = { s->pkey, site_type(s), (fl & MB_SITE_WRAPPER) != 0,
						      s->n_short, s->n_medium, s->n_old,
						      s->freed ? s->lifetime_sum / s->freed : 0 };
			mb_profile_save_site(&e);
		}
	}
	mb_lock_release(&site_lock);
	mb_profile_save_end();
}

/* ---- the report's call-site section ---- */

static void symbolize(void *pc, char *out, size_t len)
{
	Dl_info info;
	if (dladdr(pc, &info) && info.dli_fname) {
		const char *lib = strrchr(info.dli_fname, '/');
		lib = lib ? lib + 1 : info.dli_fname;
		if (info.dli_sname)
			snprintf(out, len, "%s+0x%lx (%s)", info.dli_sname,
				 (unsigned long)((uintptr_t)pc - (uintptr_t)info.dli_saddr), lib);
		else
			snprintf(out, len, "0x%lx (%s)", (unsigned long)((uintptr_t)pc - (uintptr_t)info.dli_fbase), lib);
	} else {
		snprintf(out, len, "%p", pc);
	}
}

#define TOP_SITES 20

/* A site that is no wrapper is listed once: its deeper sites count the
 * same samples again and decide nothing. A wrapper is listed with the
 * callers behind it (its deeper sites), which split its samples. */
static int site_listed(const struct mb_site *s)
{
	return !s->is_deep || (atomic_load(&s->parent->flags) & MB_SITE_WRAPPER) != 0;
}

void mb_classify_write_sites(struct mb_out *o, int json)
{
	if (!mb_classify_ready)
		return;
	struct mb_site *top[TOP_SITES];
	struct mb_site copy[TOP_SITES];
	int n = 0;
	/* Pick the top sites by sampled bytes under the lock; symbolise after. */
	mb_lock_acquire(&site_lock);
	for (struct mb_site *t = mb_sites; t; t = t == mb_sites ? deep_sites : NULL) {
		for (uint32_t i = 0; i < MB_SITE_CAP; i++) {
			struct mb_site *s = &t[i];
			if (!atomic_load(&s->key) || !s->samples || !site_listed(s))
				continue;
			int pos = n < TOP_SITES ? n++ : TOP_SITES;
			while (pos > 0 && top[pos - 1]->sampled_bytes < s->sampled_bytes) {
				if (pos < TOP_SITES)
					top[pos] = top[pos - 1];
				pos--;
			}
			if (pos < TOP_SITES)
				top[pos] = s;
		}
	}
	for (int i = 0; i < n; i++)
		copy[i] = *top[i];
	mb_lock_release(&site_lock);

	if (!json)
		mb_out_fmt(o, "Call sites (top %d by sampled bytes; the 'D' rows split a wrapper's row by the callers behind it)\n"
			      "  %-10s %7s %10s %13s %6s %6s  %s\n", TOP_SITES, "type", "samples", "bytes", "lifetime",
			   "freed", "flags", "frames (function+offset (library))");
	for (int i = 0; i < n; i++) {
		struct mb_site *s = &copy[i];
		int type = site_type(s), flags = atomic_load(&s->flags);
		double life = s->freed ? (double)s->lifetime_sum / (double)s->freed : 0;
		char fr[3][160] = { "", "", "" };
		/* The interesting frames start at the site's return address. */
		int start = 0;
		uintptr_t ra = atomic_load(&s->key);
		for (int k = 0; k < s->nframes; k++)
			if ((uintptr_t)s->frames[k] == (s->is_deep ? (uintptr_t)s->parent->key : ra))
				start = k;
		int nf = 0;
		for (int k = start; k < s->nframes && nf < 3; k++)
			symbolize(s->frames[k], fr[nf++], sizeof fr[0]);
		if (json) {
			mb_out_fmt(o, "%s{\"type\":\"%s\",\"samples\":%llu,\"sampled_bytes\":%llu,\"freed_samples\":%llu,"
				      "\"mean_lifetime_bytes\":%.0f,\"wrapper\":%s,\"deep\":%s,\"pinned_by_rule\":%s,\"frames\":[",
				   i ? "," : "", mb_type_names[type], (unsigned long long)s->samples,
				   (unsigned long long)s->sampled_bytes, (unsigned long long)s->freed, life,
				   (flags & MB_SITE_WRAPPER) ? "true" : "false", s->is_deep ? "true" : "false",
				   (flags & MB_SITE_PINNED) ? "true" : "false");
			for (int k = 0; k < nf; k++) {
				if (k)
					mb_out_str(o, ",");
				mb_out_json_str(o, fr[k]);
			}
			mb_out_str(o, "]}");
		} else {
			char fl[8] = "";
			if (flags & MB_SITE_WRAPPER)
				strcat(fl, "W");
			if (s->is_deep)
				strcat(fl, "D");
			if (flags & MB_SITE_PINNED)
				strcat(fl, "R");
			if (flags & MB_SITE_LEARNING)
				strcat(fl, "L");
			mb_out_fmt(o, "  %-10s %7llu %10llu %9.1f MiB %6llu %6s  %s", mb_type_names[type],
				   (unsigned long long)s->samples, (unsigned long long)s->sampled_bytes,
				   life / (1 << 20), (unsigned long long)s->freed, fl, fr[0]);
			for (int k = 1; k < nf; k++)
				mb_out_fmt(o, " < %s", fr[k]);
			mb_out_str(o, "\n");
		}
	}
	if (!json)
		mb_out_str(o, "  (lifetime: mean bytes allocated between a sampled object's malloc and free;\n"
			      "   flags: W wrapper, D deeper site, R pinned by rule, L still learning)\n\n");
}
