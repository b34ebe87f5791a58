#include "config.h"
#include "profile_format.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Parsed by hand, without sscanf: a profile can have many thousands of
 * lines and every process that starts reads it. */

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
		/* x * 10 + d <= max; max - d must not wrap around (a type
		 * of 3 to 9 against a maximum of 2). */
		if (d > max || x > (max - d) / 10)
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

/* " <key> <type> <wrapper> <short> <medium> <old> <lifetime>" up to end. */
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

/* " <size> <mtime> <path>" up to end. */
static int parse_module(const char *p, const char *end, uint64_t *size, uint64_t *mtime, const char **path)
{
	if (field_dec(&p, UINT64_MAX, size) || field_dec(&p, UINT64_MAX, mtime) || *p++ != ' ' || p > end)
		return -1;
	*path = p;
	return 0;
}

/* " <id> <path>" up to end, path not empty. */
static int parse_exe(const char *p, const char *end, uint64_t *id)
{
	return *p++ == ' ' && parse_hex(&p, id) == 0 && *p++ == ' ' && p < end ? 0 : -1;
}

static int is_word(const char *line, const char *word, size_t len)
{
	return strncmp(line, word, len) == 0 && line[len] == ' ';
}

static const char *parse_line(const char *start, const char *end, struct mb_profile_line *l)
{
	l->start = start;
	l->end = end;
	if (*start == '#') {
		l->kind = MB_PROFILE_COMMENT;
	} else if (is_word(start, "site", 4)) {
		l->kind = MB_PROFILE_SITE;
		if (parse_site(start + 4, end, &l->site) != 0)
			return "a site line is malformed";
	} else if (is_word(start, "module", 6)) {
		l->kind = MB_PROFILE_MODULE;
		if (parse_module(start + 6, end, &l->size, &l->mtime, &l->path) != 0)
			return "a module line is malformed";
	} else if (is_word(start, "exe", 3)) {
		l->kind = MB_PROFILE_EXE;
		if (parse_exe(start + 3, end, &l->exe) != 0)
			return "an exe line is malformed";
	} else {
		return "it has an unknown line";
	}
	return NULL;
}

const char *mb_profile_walk(const char *text, size_t len, uint64_t exe, unsigned *lineno, mb_profile_line_fn *each,
			    void *arg)
{
	int version = strncmp(text, MB_PROFILE_MAGIC "\n", sizeof MB_PROFILE_MAGIC) == 0		 ? 2
		      : strncmp(text, MB_PROFILE_MAGIC_V1 "\n", sizeof MB_PROFILE_MAGIC_V1) == 0 ? 1
											   : 0;
	*lineno = 1;
	if (!version)
		return "it does not start with '" MB_PROFILE_MAGIC "'";
	if (strlen(text) != len)
		return "it holds a NUL byte";
	int ours = version == 1, in_section = version == 1;
	for (const char *line = strchr(text, '\n') + 1, *end; *line; line = end + 1) {
		++*lineno;
		if (!(end = strchr(line, '\n')))
			return "its last line is truncated";
		struct mb_profile_line l;
		const char *why = parse_line(line, end, &l);
		if (why)
			return why;
		if (l.kind == MB_PROFILE_EXE && version == 1)
			return "it has an unknown line";
		if (l.kind == MB_PROFILE_EXE) {
			ours = l.exe == exe;
			in_section = 1;
		} else if (l.kind != MB_PROFILE_COMMENT && !in_section) {
			return "a site or module line comes before the first exe line";
		}
		if (each)
			each(&l, ours, arg);
	}
	return NULL;
}

void mb_profile_write_start(struct mb_out *o, uint64_t exe, const char *path)
{
	mb_out_str(o, MB_PROFILE_MAGIC "\n# exe <id> <program>: the program's lines follow; the last saved comes first\n"
		      "# site <key> <type> <wrapper> <short> <medium> <old> <mean lifetime>\n"
		      "# module <size> <mtime> <path>\n");
	mb_out_fmt(o, "exe %llx %s\n", (unsigned long long)exe, path);
}

void mb_profile_write_site(struct mb_out *o, const struct mb_profile_entry *e)
{
	mb_out_fmt(o, "site %llx %d %d %d %d %d %llu\n", (unsigned long long)e->key, e->type, e->wrapper, e->n_short,
		   e->n_medium, e->n_old, (unsigned long long)e->mean_lifetime);
}

void mb_profile_write_module(struct mb_out *o, uint64_t size, uint64_t mtime, const char *path)
{
	mb_out_fmt(o, "module %llu %llu %s\n", (unsigned long long)size, (unsigned long long)mtime, path);
}
