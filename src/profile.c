#include "config.h"
#include "profile.h"
#include "options.h"
#include "out.h"
#include "region.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PROFILE_MAGIC "libmbuddy-profile 1"
/* What a load keeps, and so what a save writes: sites, and bytes read. */
#define PROFILE_SITES_MAX 16384
#define PROFILE_MAX_BYTES (8 << 20)

/* ---- keys ---- */

static uint64_t mix(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdULL;
	k ^= k >> 33;
	k *= 0xc4ceb9fe1a85ec53ULL;
	k ^= k >> 33;
	return k;
}

static uint64_t str_hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');
	return b ? b + 1 : path;
}

/* The module's identity: its name, and its size and mtime when the file
 * can be found, so a rebuilt module never matches old entries. */
static uint64_t module_ident(const char *path)
{
	uint64_t h = str_hash(base_name(path));
	struct stat st;
	if ((*path && stat(path, &st) == 0) || stat("/proc/self/exe", &st) == 0)
		h ^= mix((uint64_t)st.st_size * 1000003u + (uint64_t)st.st_mtime);
	return h;
}

/* Identities of loaded modules by load address, computed once each: a new
 * call site must not cost a stat(). Emptied when code is unmapped, since
 * another module may then load at the same address. */
#define MODULE_CACHE 1024 /* a power of two; more modules go uncached */
static struct {
	uintptr_t base;
	uint64_t ident;
} module_cache[MODULE_CACHE];
static unsigned nmodules; /* at most half the slots: probes stay short */
static pthread_mutex_t module_lock = PTHREAD_MUTEX_INITIALIZER;

static unsigned module_slot(uintptr_t base)
{
	return (unsigned)mix(base) & (MODULE_CACHE - 1);
}

/* The cached identity of the module at base; 0 if it is not cached. */
static uint64_t cached_ident(uintptr_t base)
{
	uint64_t ident = 0;
	pthread_mutex_lock(&module_lock);
	unsigned i = module_slot(base);
	while (module_cache[i].base && module_cache[i].base != base)
		i = (i + 1) & (MODULE_CACHE - 1);
	ident = module_cache[i].ident; /* 0 in an empty slot */
	pthread_mutex_unlock(&module_lock);
	return ident;
}

static void cache_ident(uintptr_t base, uint64_t ident)
{
	pthread_mutex_lock(&module_lock);
	unsigned i = module_slot(base);
	while (module_cache[i].base && module_cache[i].base != base)
		i = (i + 1) & (MODULE_CACHE - 1);
	if (module_cache[i].base || nmodules < MODULE_CACHE / 2) {
		nmodules += !module_cache[i].base;
		module_cache[i].ident = ident;
		module_cache[i].base = base;
	}
	pthread_mutex_unlock(&module_lock);
}

void mb_profile_forget_modules(void)
{
	pthread_mutex_lock(&module_lock);
	memset(module_cache, 0, sizeof module_cache);
	nmodules = 0;
	pthread_mutex_unlock(&module_lock);
}

void mb_profile_lock(void)
{
	pthread_mutex_lock(&module_lock);
}

void mb_profile_unlock(void)
{
	pthread_mutex_unlock(&module_lock);
}

void mb_profile_after_fork_child(void)
{
	pthread_mutex_init(&module_lock, NULL);
}

uint64_t mb_profile_pc_key(const void *pc)
{
	Dl_info info;
	if (!dladdr(pc, &info) || !info.dli_fname)
		return 0;
	uintptr_t base = (uintptr_t)info.dli_fbase;
	uint64_t ident = cached_ident(base);
	if (!ident) {
		ident = module_ident(info.dli_fname) | 1; /* never 0, the "not cached" mark */
		cache_ident(base, ident);
	}
	uint64_t k = mix(ident ^ mix((uintptr_t)pc - base));
	return k ? k : 1;
}

uint64_t mb_profile_deep_key(uint64_t parent, uint64_t f1, uint64_t f2)
{
	uint64_t k = mix(parent ^ mix(f1 + 0x9e3779b97f4a7c15ULL) ^ mix(f2 * 31 + 7));
	return k ? k : 1;
}

/* ---- the table of loaded entries ----
 * Open addressing at a load of at most one half: PROFILE_SITES_MAX entries
 * in twice as many slots. Keys come from a file, so they are hashed with a
 * seed of this process: a file cannot line them up into one long probe. */

#define PROFILE_SLOTS (2 * PROFILE_SITES_MAX)

static struct mb_profile_entry *table;
static unsigned nentries;
static uint64_t table_seed;
static int loaded;

static struct mb_profile_entry *slot(uint64_t key)
{
	unsigned i = (unsigned)mix(key ^ table_seed) & (PROFILE_SLOTS - 1);
	while (table[i].key != key && table[i].key != 0)
		i = (i + 1) & (PROFILE_SLOTS - 1);
	return &table[i];
}

int mb_profile_lookup(uint64_t key, struct mb_profile_entry *out)
{
	if (!loaded || !key)
		return -1;
	struct mb_profile_entry *e = slot(key);
	if (e->key != key)
		return -1;
	*out = *e;
	return 0;
}

/* ---- parsing ----
 * By hand, without sscanf: a profile can have many thousands of lines and
 * every process that starts reads it. */

static int parse_hex(const char **p, uint64_t *v)
{
	const char *s = *p;
	uint64_t x = 0;
	int n = 0;
	for (;; s++, n++) {
		unsigned d;
		if (*s >= '0' && *s <= '9')
			d = (unsigned)(*s - '0');
		else if (*s >= 'a' && *s <= 'f')
			d = (unsigned)(*s - 'a' + 10);
		else
			break;
		if (n == 16)
			return -1;
		x = x << 4 | d;
	}
	*p = s;
	*v = x;
	return n ? 0 : -1;
}

static int parse_dec(const char **p, uint64_t max, uint64_t *v)
{
	const char *s = *p;
	uint64_t x = 0;
	if (*s < '0' || *s > '9')
		return -1;
	for (; *s >= '0' && *s <= '9'; s++) {
		unsigned d = (unsigned)(*s - '0');
		if (x > (max - d) / 10)
			return -1;
		x = x * 10 + d;
	}
	*p = s;
	*v = x;
	return 0;
}

/* A space, then a number. */
static int field_dec(const char **p, uint64_t max, uint64_t *v)
{
	return *(*p)++ == ' ' ? parse_dec(p, max, v) : -1;
}

/* "site <key> <type> <wrapper> <short> <medium> <old> <lifetime>", with
 * *p just after "site"; the line ends at end. */
static int parse_site(const char *p, const char *end, struct mb_profile_entry *e)
{
	uint64_t key, type, wrapper, ns, nm, no, life;
	if (*p++ != ' ' || parse_hex(&p, &key) || !key || field_dec(&p, 2, &type) || field_dec(&p, 1, &wrapper) ||
	    field_dec(&p, INT32_MAX, &ns) || field_dec(&p, INT32_MAX, &nm) || field_dec(&p, INT32_MAX, &no) ||
	    field_dec(&p, UINT64_MAX, &life) || p != end)
		return -1;
	*e = (struct mb_profile_entry){ key, (uint8_t)type, (uint8_t)wrapper, (int32_t)ns, (int32_t)nm, (int32_t)no, life };
	return 0;
}

/* "module <size> <mtime> <path>", with *p just after "module". */
static int parse_module(const char *p, const char *end, uint64_t *size, uint64_t *mtime, const char **path)
{
	if (field_dec(&p, UINT64_MAX, size) || field_dec(&p, UINT64_MAX, mtime) || *p++ != ' ' || p > end)
		return -1;
	*path = p;
	return 0;
}

/* Whether the module of a module line is still the file it was: 1 yes, 0
 * changed, -1 not checkable. */
static int module_current(uint64_t size, uint64_t mtime, const char *path, const char *end)
{
	char name[PATH_MAX];
	struct stat st;
	if ((size == 0 && mtime == 0) || (size_t)(end - path) >= sizeof name)
		return -1;
	memcpy(name, path, (size_t)(end - path));
	name[end - path] = 0;
	return stat(name, &st) == 0 && (uint64_t)st.st_size == size && (uint64_t)st.st_mtime == mtime;
}

#define MODULE_CHECKS_MAX 256 /* module lines checked with stat() at start */

/* What one load found. */
struct load_result {
	unsigned stale, checked, dropped;
};

static void load_site(const struct mb_profile_entry *e, struct load_result *r)
{
	struct mb_profile_entry *s = slot(e->key);
	if (!s->key) {
		if (nentries == PROFILE_SITES_MAX) {
			r->dropped++;
			return;
		}
		nentries++;
	}
	*s = *e;
}

/* Parse and load text (NUL-terminated); NULL, or why it is not a profile. */
static const char *parse_and_load(const char *text, unsigned *lineno, struct load_result *r)
{
	if (strncmp(text, PROFILE_MAGIC "\n", sizeof PROFILE_MAGIC) != 0)
		return "it does not start with '" PROFILE_MAGIC "'";
	*lineno = 1;
	for (const char *line = text + sizeof PROFILE_MAGIC; *line; (*lineno)++) {
		const char *end = strchr(line, '\n');
		if (!end)
			return "its last line is truncated";
		struct mb_profile_entry e;
		uint64_t size, mtime;
		const char *path;
		if (line[0] == '#') {
		} else if (strncmp(line, "site", 4) == 0) {
			if (parse_site(line + 4, end, &e) != 0)
				return "a site line is malformed";
			load_site(&e, r);
		} else if (strncmp(line, "module", 6) == 0) {
			if (parse_module(line + 6, end, &size, &mtime, &path) != 0)
				return "a module line is malformed";
			if (r->checked < MODULE_CHECKS_MAX) {
				r->checked++;
				r->stale += module_current(size, mtime, path, end) == 0;
			}
		} else {
			return "it has an unknown line";
		}
		line = end + 1;
	}
	return NULL;
}

/* ---- loading ---- */

static void table_reset(void)
{
	memset(table, 0, sizeof(struct mb_profile_entry) * PROFILE_SLOTS);
	nentries = 0;
}

/* The whole file, NUL-terminated, in a fresh mapping of *bytes. */
static char *read_all(int fd, size_t len, size_t *bytes)
{
	*bytes = (len + 1 + 4095) & ~(size_t)4095;
	char *text = mb_os_reserve(*bytes, 4096);
	if (!text)
		return NULL;
	size_t got = 0;
	while (got < len) {
		ssize_t r = read(fd, text + got, len - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	text[got] = 0;
	return text;
}

void mb_profile_load(const char *path)
{
	struct stat st;
	const char *why;
	int fd = mb_file_open_regular(path, 1, &st, &why);
	if (fd < 0) {
		if (why)
			mb_warn("MBUDDY_PROFILE=%s %s; ignored", path, why);
		else if (errno != ENOENT)
			mb_warn("MBUDDY_PROFILE=%s cannot be read (%s); starting unclassified", path, strerror(errno));
		return;
	}
	if (st.st_size <= 0 || st.st_size > PROFILE_MAX_BYTES) {
		close(fd);
		mb_warn("MBUDDY_PROFILE=%s is empty or larger than %d MiB; ignored", path, PROFILE_MAX_BYTES >> 20);
		return;
	}
	size_t text_bytes, table_bytes = sizeof(struct mb_profile_entry) * PROFILE_SLOTS;
	char *text = read_all(fd, (size_t)st.st_size, &text_bytes);
	close(fd);
	if (!table)
		table = mb_os_reserve(table_bytes, 4096);
	if (!text || !table) {
		if (text)
			mb_os_unreserve(text, text_bytes);
		return;
	}
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	table_seed = mix((uint64_t)ts.tv_nsec ^ (uint64_t)getpid() << 32 ^ (uintptr_t)&ts);

	unsigned lineno = 0;
	struct load_result r = { 0, 0, 0 };
	why = parse_and_load(text, &lineno, &r);
	mb_os_unreserve(text, text_bytes);
	if (why) {
		mb_warn("MBUDDY_PROFILE=%s is not a valid profile (%s, line %u); ignored", path, why, lineno);
		table_reset();
		return;
	}
	if (r.dropped)
		mb_warn("MBUDDY_PROFILE=%s has more than %u sites; the other %u are ignored", path,
			PROFILE_SITES_MAX, r.dropped);
	if (r.stale)
		mb_warn("MBUDDY_PROFILE=%s: %u module(s) changed since it was written; their sites start unclassified",
			path, r.stale);
	loaded = 1;
}

/* ---- saving ---- */

static struct mb_out save_out;
static char save_tmp[4096];
static char save_path[4096];
static unsigned save_count, save_dropped;

int mb_profile_save_begin(const char *path)
{
	snprintf(save_path, sizeof save_path, "%s", path);
	snprintf(save_tmp, sizeof save_tmp, "%s.tmp.%d", path, (int)getpid());
	mb_out_init(&save_out, open(save_tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
	if (save_out.fd < 0) {
		mb_warn("cannot write the profile %s: %s", save_tmp, strerror(errno));
		return -1;
	}
	save_count = save_dropped = 0;
	mb_out_str(&save_out, PROFILE_MAGIC "\n# site <key> <type> <wrapper> <short> <medium> <old> <mean lifetime>\n");
	return 0;
}

void mb_profile_save_site(const struct mb_profile_entry *e)
{
	/* Never more than the loader keeps. */
	if (save_count == PROFILE_SITES_MAX) {
		save_dropped++;
		return;
	}
	save_count++;
	mb_out_fmt(&save_out, "site %llx %d %d %d %d %d %llu\n", (unsigned long long)e->key, e->type, e->wrapper,
		   e->n_short, e->n_medium, e->n_old, (unsigned long long)e->mean_lifetime);
}

/* A module line for every loaded object with a file, so a later run can
 * say which ones changed. */
static int write_module(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	(void)arg;
	const char *name = info->dlpi_name && *info->dlpi_name ? info->dlpi_name : NULL;
	struct stat st;
	if (name && *name == '/' && stat(name, &st) == 0)
		mb_out_fmt(&save_out, "module %llu %llu %s\n", (unsigned long long)st.st_size,
			   (unsigned long long)st.st_mtime, name);
	return 0;
}

void mb_profile_save_end(void)
{
	dl_iterate_phdr(write_module, NULL);
	if (mb_out_flush(&save_out) != 0 || close(save_out.fd) != 0) {
		mb_warn("cannot write the profile %s: %s", save_tmp, strerror(errno));
		unlink(save_tmp);
		return;
	}
	if (save_dropped)
		mb_warn("MBUDDY_PROFILE=%s: %u sites not saved (at most %u are kept)", save_path, save_dropped,
			PROFILE_SITES_MAX);
	/* Atomically replace, so a concurrent reader never sees half a file. */
	if (rename(save_tmp, save_path) != 0) {
		mb_warn("cannot write the profile %s: %s", save_path, strerror(errno));
		unlink(save_tmp);
	}
}
