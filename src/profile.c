#include "config.h"
#include "profile.h"
#include "options.h"
#include "region.h"
#include "out.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PROFILE_MAGIC "libmbuddy-profile 1"
#define PROFILE_CAP (1u << 15)

static struct mb_profile_entry *table; /* open addressing on key */
static unsigned nentries;
static int loaded;

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

uint64_t mb_profile_pc_key(const void *pc)
{
	Dl_info info;
	if (!dladdr(pc, &info) || !info.dli_fname)
		return 0;
	uint64_t k = mix(module_ident(info.dli_fname) ^ mix((uintptr_t)pc - (uintptr_t)info.dli_fbase));
	return k ? k : 1;
}

uint64_t mb_profile_deep_key(uint64_t parent, uint64_t f1, uint64_t f2)
{
	uint64_t k = mix(parent ^ mix(f1 + 0x9e3779b97f4a7c15ULL) ^ mix(f2 * 31 + 7));
	return k ? k : 1;
}

static struct mb_profile_entry *slot(uint64_t key)
{
	for (unsigned i = 0; i < PROFILE_CAP; i++) {
		struct mb_profile_entry *e = &table[(key + i) & (PROFILE_CAP - 1)];
		if (e->key == key || e->key == 0)
			return e;
	}
	return NULL;
}

int mb_profile_lookup(uint64_t key, struct mb_profile_entry *out)
{
	if (!loaded || !key)
		return -1;
	struct mb_profile_entry *e = slot(key);
	if (!e || e->key != key)
		return -1;
	*out = *e;
	return 0;
}

int mb_profile_loaded(void)
{
	return loaded;
}

/* A module line: "module <size> <mtime> <path>". Entries carry their
 * module's identity in their keys, so a changed module's entries can never
 * match; the line lets the change be reported. */
static int module_current(const char *line)
{
	unsigned long long size, mtime;
	int n = 0;
	if (sscanf(line, "module %llu %llu %n", &size, &mtime, &n) != 2 || !n)
		return -1;
	struct stat st;
	if (size == 0 && mtime == 0)
		return 1; /* not checkable (e.g. no path) */
	if (stat(line + n, &st) != 0 || (unsigned long long)st.st_size != size ||
	    (unsigned long long)st.st_mtime != mtime)
		return 0;
	return 1;
}

void mb_profile_load(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno != ENOENT)
			mb_warn("MBUDDY_PROFILE=%s cannot be read (%s); starting unclassified", path, strerror(errno));
		return;
	}
	struct stat st;
	if (fstat(fd, &st) != 0 || st.st_size <= 0 || st.st_size > (64 << 20)) {
		close(fd);
		mb_warn("MBUDDY_PROFILE=%s is empty or too large; ignored", path);
		return;
	}
	size_t len = (size_t)st.st_size, bytes = (len + 1 + (sizeof(struct mb_profile_entry) * PROFILE_CAP) + 4095) & ~(size_t)4095;
	char *buf = mb_os_reserve(bytes, 4096);
	if (!buf) {
		close(fd);
		return;
	}
	table = (struct mb_profile_entry *)buf;
	char *text = buf + sizeof(struct mb_profile_entry) * PROFILE_CAP;
	size_t got = 0;
	while (got < len) {
		ssize_t r = read(fd, text + got, len - got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fd);
	text[got] = 0;

	const char *why = NULL;
	unsigned stale = 0, lineno = 0;
	if (strncmp(text, PROFILE_MAGIC "\n", sizeof PROFILE_MAGIC) != 0)
		why = "it does not start with '" PROFILE_MAGIC "'";
	for (char *line = text; !why && line && *line; lineno++) {
		char *nl = strchr(line, '\n');
		if (!nl) {
			why = "its last line is truncated";
			break;
		}
		*nl = 0;
		if (lineno == 0 || line[0] == '#') {
		} else if (strncmp(line, "module ", 7) == 0) {
			int current = module_current(line);
			if (current < 0)
				why = "a module line is malformed";
			stale += current == 0;
		} else if (strncmp(line, "site ", 5) == 0) {
			unsigned long long key;
			unsigned long long life;
			int type, wrapper, ns, nm, no;
			if (sscanf(line, "site %llx %d %d %d %d %d %llu", &key, &type, &wrapper, &ns, &nm, &no, &life) != 7 ||
			    type < 0 || type > 2 || key == 0 || ns < 0 || nm < 0 || no < 0) {
				why = "a site line is malformed";
			} else {
				struct mb_profile_entry *e = slot(key);
				if (e && !e->key)
					nentries++;
				if (e)
					*e = (struct mb_profile_entry){ key, (uint8_t)type, (uint8_t)(wrapper != 0), ns, nm, no,
									life };
			}
		} else {
			why = "it has an unknown line";
		}
		line = nl + 1;
	}
	if (why) {
		mb_warn("MBUDDY_PROFILE=%s is not a valid profile (%s, line %u); ignored", path, why, lineno + 1);
		mb_os_unreserve(buf, bytes);
		table = NULL;
		nentries = 0;
		return;
	}
	if (stale)
		mb_warn("MBUDDY_PROFILE=%s: %u module(s) changed since it was written; their sites start unclassified",
			path, stale);
	loaded = 1;
}

/* ---- saving ---- */

static struct mb_out save_out;
static char save_tmp[4096];
static char save_path[4096];

int mb_profile_save_begin(const char *path)
{
	snprintf(save_path, sizeof save_path, "%s", path);
	snprintf(save_tmp, sizeof save_tmp, "%s.tmp.%d", path, (int)getpid());
	mb_out_init(&save_out, open(save_tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
	if (save_out.fd < 0) {
		mb_warn("cannot write the profile %s: %s", save_tmp, strerror(errno));
		return -1;
	}
	mb_out_str(&save_out, PROFILE_MAGIC "\n# site <key> <type> <wrapper> <short> <medium> <old> <mean lifetime>\n");
	return 0;
}

void mb_profile_save_site(const struct mb_profile_entry *e)
{
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
	/* Atomically replace, so a concurrent reader never sees half a file. */
	if (rename(save_tmp, save_path) != 0) {
		mb_warn("cannot write the profile %s: %s", save_path, strerror(errno));
		unlink(save_tmp);
	}
}
