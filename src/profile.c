#include "config.h"
#include "profile.h"
#include "lockstat.h"
#include "profile_format.h"
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

/* What a load keeps, and so what a save writes for one program: sites;
 * the largest file read; what a save writes at most, its own section
 * first, then those of other programs, most recently saved first, as long
 * as they fit; how long a save waits for another one's lock. */
#define PROFILE_SITES_MAX 16384
#define PROFILE_MAX_BYTES (8 << 20)
#define PROFILE_SAVE_BYTES (4 << 20)
#define PROFILE_LOCK_WAIT_MS 2000

/* ---- the program: its profile section is keyed by its path ---- */

static char exe_path[PATH_MAX];
static uint64_t exe_id;

static uint64_t str_hash(const char *s);

static void find_program(void)
{
	if (exe_path[0])
		return;
	ssize_t n = readlink("/proc/self/exe", exe_path, sizeof exe_path - 1);
	if (n <= 0)
		n = snprintf(exe_path, sizeof exe_path, "?");
	exe_path[n] = 0;
	/* A binary replaced while it runs reads "<path> (deleted)". */
	static const char deleted[] = " (deleted)";
	if ((size_t)n > sizeof deleted && strcmp(exe_path + n - (sizeof deleted - 1), deleted) == 0)
		exe_path[n - (sizeof deleted - 1)] = 0;
	for (char *c = exe_path; *c; c++)
		if (*c == '\n')
			*c = '?'; /* it is written on one line */
	exe_id = str_hash(exe_path);
}

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
static struct mb_lock module_lock = MB_LOCK_INITIALIZER("modules");

static unsigned module_slot(uintptr_t base)
{
	return (unsigned)mix(base) & (MODULE_CACHE - 1);
}

/* The cached identity of the module at base; 0 if it is not cached. */
static uint64_t cached_ident(uintptr_t base)
{
	uint64_t ident = 0;
	mb_lock_acquire(&module_lock);
	unsigned i = module_slot(base);
	while (module_cache[i].base && module_cache[i].base != base)
		i = (i + 1) & (MODULE_CACHE - 1);
	ident = module_cache[i].ident; /* 0 in an empty slot */
	mb_lock_release(&module_lock);
	return ident;
}

static void cache_ident(uintptr_t base, uint64_t ident)
{
	mb_lock_acquire(&module_lock);
	unsigned i = module_slot(base);
	while (module_cache[i].base && module_cache[i].base != base)
		i = (i + 1) & (MODULE_CACHE - 1);
	if (module_cache[i].base || nmodules < MODULE_CACHE / 2) {
		nmodules += !module_cache[i].base;
		module_cache[i].ident = ident;
		module_cache[i].base = base;
	}
	mb_lock_release(&module_lock);
}

void mb_profile_forget_modules(void)
{
	mb_lock_acquire(&module_lock);
	memset(module_cache, 0, sizeof module_cache);
	nmodules = 0;
	mb_lock_release(&module_lock);
}

void mb_profile_fork_prepare(void)
{
	mb_lock_acquire(&module_lock);
}

void mb_profile_fork_parent(void)
{
	mb_lock_release(&module_lock);
}

void mb_profile_fork_child(void)
{
	mb_lock_after_fork_child(&module_lock, 0);
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

/* ---- loading ---- */

#define MODULE_CHECKS_MAX 256 /* module lines checked with stat() at start */

/* Whether a module line's file is still the one it was: 1 yes, 0 changed,
 * -1 not checkable. */
static int module_current(const struct mb_profile_line *l)
{
	char name[PATH_MAX];
	struct stat st;
	if ((l->size == 0 && l->mtime == 0) || (size_t)(l->end - l->path) >= sizeof name)
		return -1;
	memcpy(name, l->path, (size_t)(l->end - l->path));
	name[l->end - l->path] = 0;
	return stat(name, &st) == 0 && (uint64_t)st.st_size == l->size && (uint64_t)st.st_mtime == l->mtime;
}

struct load_result {
	unsigned stale, checked, dropped;
};

static void load_line(const struct mb_profile_line *l, int ours, void *arg)
{
	struct load_result *r = arg;
	if (!ours)
		return;
	if (l->kind == MB_PROFILE_MODULE && r->checked < MODULE_CHECKS_MAX) {
		r->checked++;
		r->stale += module_current(l) == 0;
	} else if (l->kind == MB_PROFILE_SITE) {
		struct mb_profile_entry *s = slot(l->site.key);
		if (!s->key && nentries == PROFILE_SITES_MAX) {
			r->dropped++;
			return;
		}
		nentries += !s->key;
		*s = l->site;
	}
}

static void seed_hash(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	table_seed = mix((uint64_t)ts.tv_nsec ^ (uint64_t)getpid() << 32 ^ (uintptr_t)&ts);
}

/* The whole file, NUL-terminated, in a fresh mapping of *bytes; *got the
 * bytes read. */
static char *read_all(int fd, size_t len, size_t *bytes, size_t *got)
{
	char *text = mb_os_reserve_records(len + 1, bytes);
	if (!text)
		return NULL;
	*got = 0;
	while (*got < len) {
		ssize_t r = read(fd, text + *got, len - *got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		*got += (size_t)r;
	}
	text[*got] = 0;
	return text;
}

/* Set when loading reported the file: saving it then stays quiet. */
static int load_warned;

void mb_profile_load(const char *path)
{
	struct stat st;
	const char *why;
	find_program();
	seed_hash();
	int fd = mb_file_open_regular(path, 1, &st, &why);
	load_warned = fd < 0 && (why || errno != ENOENT);
	if (fd < 0) {
		if (why)
			mb_warn("MBUDDY_PROFILE=%s %s; ignored", path, why);
		else if (errno != ENOENT)
			mb_warn("MBUDDY_PROFILE=%s cannot be read (%s); starting unclassified", path, strerror(errno));
		return;
	}
	load_warned = st.st_size <= 0 || st.st_size > PROFILE_MAX_BYTES;
	if (load_warned) {
		close(fd);
		mb_warn("MBUDDY_PROFILE=%s is empty or larger than %d MiB; ignored", path, PROFILE_MAX_BYTES >> 20);
		return;
	}
	size_t text_bytes, table_bytes = sizeof(struct mb_profile_entry) * PROFILE_SLOTS;
	size_t text_len;
	char *text = read_all(fd, (size_t)st.st_size, &text_bytes, &text_len);
	close(fd);
	if (!table)
		table = mb_os_reserve_records(table_bytes, NULL);
	if (!text || !table) {
		if (text)
			mb_os_unreserve(text, text_bytes);
		return;
	}
	unsigned lineno;
	struct load_result r = { 0, 0, 0 };
	why = mb_profile_walk(text, text_len, exe_id, &lineno, load_line, &r);
	mb_os_unreserve(text, text_bytes);
	if (why) {
		load_warned = 1;
		mb_warn("MBUDDY_PROFILE=%s is not a valid profile (%s, line %u); ignored, and never written over", path,
			why, lineno);
		memset(table, 0, table_bytes);
		nentries = 0;
		return;
	}
	if (r.dropped)
		mb_warn("MBUDDY_PROFILE=%s has more than %u sites for this program; the other %u are ignored", path,
			PROFILE_SITES_MAX, r.dropped);
	if (r.stale)
		mb_warn("MBUDDY_PROFILE=%s: %u module(s) changed since it was written; their sites start unclassified",
			path, r.stale);
	loaded = 1;
}

/* ---- saving ----
 * The entries of this run are collected, then merged at exit, under the
 * file's lock, with what the file holds by then: other processes of the
 * same program or of others may have saved since this one started. */

static const char *save_path;
static struct mb_profile_entry *own;  /* this run's entries */
static unsigned nown, own_dropped;
static uint64_t *saved_keys;          /* keys written, PROFILE_SLOTS */
static unsigned nsaved;
static struct mb_out save_out;
static struct mb_file save_file;

#define OWN_BYTES (sizeof(struct mb_profile_entry) * PROFILE_SITES_MAX)
#define SAVED_BYTES (sizeof(uint64_t) * PROFILE_SLOTS)

int mb_profile_save_begin(const char *path)
{
	find_program();
	if (!table_seed)
		seed_hash();
	own = mb_os_reserve_records(OWN_BYTES, NULL);
	saved_keys = mb_os_reserve_records(SAVED_BYTES, NULL);
	if (!own || !saved_keys) {
		mb_warn("cannot write the profile %s: %s", path, strerror(ENOMEM));
		return -1;
	}
	save_path = path;
	nown = own_dropped = 0;
	return 0;
}

void mb_profile_save_site(const struct mb_profile_entry *e)
{
	if (nown == PROFILE_SITES_MAX)
		own_dropped++;
	else
		own[nown++] = *e;
}

/* Write a site line unless its key was written already or the section
 * is full. */
static void save_entry(const struct mb_profile_entry *e, const struct mb_profile_line *raw)
{
	if (nsaved == PROFILE_SITES_MAX)
		return;
	unsigned i = (unsigned)mix(e->key ^ table_seed) & (PROFILE_SLOTS - 1);
	while (saved_keys[i] && saved_keys[i] != e->key)
		i = (i + 1) & (PROFILE_SLOTS - 1);
	if (saved_keys[i])
		return;
	saved_keys[i] = e->key;
	nsaved++;
	if (raw) {
		mb_out_mem(&save_out, raw->start, (size_t)(raw->end - raw->start) + 1);
		return;
	}
	mb_profile_write_site(&save_out, e);
}

/* The file's sites of this program that this run did not meet. */
static void keep_disk_site(const struct mb_profile_line *l, int ours, void *arg)
{
	(void)arg;
	if (ours && l->kind == MB_PROFILE_SITE)
		save_entry(&l->site, l);
}

/* A module line for every loaded object with a file, so a later run can
 * say which ones changed. */
static int write_module(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	(void)arg;
	const char *name = info->dlpi_name && *info->dlpi_name ? info->dlpi_name : NULL;
	struct stat st;
	if (name && *name == '/' && !strchr(name, '\n') && stat(name, &st) == 0)
		mb_profile_write_module(&save_out, (uint64_t)st.st_size, (uint64_t)st.st_mtime, name);
	return 0;
}

/* The sections of other programs, in their order (most recently saved
 * first), as long as the file stays within PROFILE_SAVE_BYTES, each with
 * no more sites than a load keeps. */
struct copy_state {
	const char *text_end;
	int copying, full;
	unsigned sites;
};

static void copy_other(const struct mb_profile_line *l, int ours, void *arg)
{
	struct copy_state *c = arg;
	if (c->full)
		return;
	if (l->kind == MB_PROFILE_EXE) {
		const char *next = strstr(l->end, "\nexe ");
		size_t len = (size_t)((next ? next + 1 : c->text_end) - l->start);
		c->copying = !ours;
		c->sites = 0;
		c->full = c->copying && save_out.total + len > PROFILE_SAVE_BYTES;
		c->copying &= !c->full;
	}
	if (c->copying && (l->kind != MB_PROFILE_SITE || c->sites++ < PROFILE_SITES_MAX))
		mb_out_mem(&save_out, l->start, (size_t)(l->end - l->start) + 1);
}

/* Write the merged profile to a new file that will replace old (or appear
 * at path if old is NULL). 0, 1 to try again (the path changed), -1. */
static int write_merged(const struct stat *old, const char *text, size_t len, const char **why)
{
	if (mb_file_replace(&save_file, save_path, old, old ? old->st_mode : 0600) < 0)
		return -1;
	mb_out_init(&save_out, save_file.fd);
	mb_profile_write_start(&save_out, exe_id, exe_path);
	memset(saved_keys, 0, SAVED_BYTES);
	nsaved = 0;
	for (unsigned i = 0; i < nown; i++)
		save_entry(&own[i], NULL);
	unsigned lineno;
	if (text)
		mb_profile_walk(text, len, exe_id, &lineno, keep_disk_site, NULL);
	dl_iterate_phdr(write_module, NULL);
	struct copy_state c = { text ? text + len : NULL, 0, 0, 0 };
	if (text)
		mb_profile_walk(text, len, exe_id, &lineno, copy_other, &c);
	if (mb_out_flush(&save_out) != 0) {
		mb_file_abandon(&save_file);
		return -1;
	}
	if (mb_file_commit(&save_file, why) != 0)
		return *why ? 1 : -1;
	return 0;
}

/* With fd the file at save_path, open: lock it, check that it is still
 * there and a profile of ours, and read it into *text. 0, 1 to try
 * again, -1 refused (*why), -2 a read-only profile, kept quietly. */
static int read_locked(int fd, struct stat *st, char **text, size_t *len, size_t *bytes, const char **why)
{
	if (st->st_uid == geteuid() && !(st->st_mode & S_IWUSR))
		return -2;
	if (!mb_file_may_replace(st, why))
		return -1;
	if (mb_file_lock(fd, PROFILE_LOCK_WAIT_MS) != 0) {
		*why = "stayed locked by another process";
		return -1;
	}
	struct stat now;
	if (lstat(save_path, &now) != 0 || fstat(fd, st) != 0 || now.st_dev != st->st_dev || now.st_ino != st->st_ino)
		return 1; /* replaced by another process's save meanwhile */
	if (st->st_size > PROFILE_MAX_BYTES) {
		*why = "is larger than 8 MiB";
		return -1;
	}
	*text = read_all(fd, (size_t)st->st_size, bytes, len);
	if (!*text)
		return -1;
	unsigned lineno;
	if (mb_profile_walk(*text, *len, exe_id, &lineno, NULL, NULL)) {
		*why = "is not a valid profile";
		return -1;
	}
	return 0;
}

/* One attempt: 0 saved, 1 try again, -1 refused or failed, -2 quietly
 * not saved. */
static int save_once(const char **why)
{
	struct stat st;
	char *text = NULL;
	size_t len = 0, bytes = 0;
	int fd = mb_file_open_regular(save_path, 0, &st, why), rc = 0;
	if (fd == -2)
		return 1; /* another process's save renamed its file over it */
	if (fd < 0 && (*why || errno != ENOENT))
		return -1;
	if (fd >= 0)
		rc = read_locked(fd, &st, &text, &len, &bytes, why);
	if (rc == 0)
		rc = write_merged(fd >= 0 ? &st : NULL, text, len, why);
	if (text)
		mb_os_unreserve(text, bytes);
	if (fd >= 0)
		close(fd); /* releases the lock, after the rename */
	return rc;
}

void mb_profile_save_end(void)
{
	const char *why = NULL;
	/* A run that learned nothing leaves the file alone. */
	int rc = nown ? 1 : 0;
	for (int attempt = 0; rc == 1 && attempt < 8; attempt++)
		rc = save_once(&why);
	if (rc == 1)
		why = "kept being replaced by other processes";
	if (rc != 0 && rc != -2 && !load_warned) {
		if (why)
			mb_warn("MBUDDY_PROFILE=%s %s; the profile is not saved", save_path, why);
		else
			mb_warn("cannot write the profile %s: %s", save_path, strerror(errno));
	}
	if (rc == 0 && own_dropped)
		mb_warn("MBUDDY_PROFILE=%s: %u sites of this run not saved (at most %u per program)", save_path,
			own_dropped, PROFILE_SITES_MAX);
	mb_os_unreserve(own, OWN_BYTES);
	mb_os_unreserve(saved_keys, SAVED_BYTES);
	own = NULL;
	saved_keys = NULL;
}
