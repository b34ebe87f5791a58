#include "config.h"
#include "modules.h"
#include "region.h"

#include <link.h>
#include <string.h>

#define PAGE ((size_t)4096)

static uint64_t name_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ULL; /* FNV-1a */
	for (; s && *s; s++)
		h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
	return h;
}

static void describe(const struct dl_phdr_info *info, struct mb_module *m)
{
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		uintptr_t a = info->dlpi_addr + ph->p_vaddr;
		if (a < lo)
			lo = a;
		if (a + ph->p_memsz > hi)
			hi = a + ph->p_memsz;
	}
	m->lo = hi ? lo : 0;
	m->hi = hi;
	m->base = info->dlpi_addr;
	m->name = name_hash(info->dlpi_name);
}

static int count_one(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)info;
	(void)size;
	++*(size_t *)data;
	return 0;
}

struct filling {
	struct mb_modules *m;
	size_t cap;
};

static int add_one(struct dl_phdr_info *info, size_t size, void *data)
{
	struct filling *f = data;
	(void)size;
	if (f->m->n == f->cap)
		return 1; /* full: modules were loaded since they were counted */
	describe(info, &f->m->v[f->m->n++]);
	return 0;
}

int mb_modules_take(struct mb_modules *m)
{
	size_t count = 0;
	memset(m, 0, sizeof *m);
	dl_iterate_phdr(count_one, &count);
	/* Room for a few modules another thread loads meanwhile. */
	m->bytes = ((count + 16) * sizeof(struct mb_module) + PAGE - 1) & ~(PAGE - 1);
	m->v = mb_os_reserve(m->bytes, PAGE);
	if (!m->v)
		return -1;
	struct filling f = { m, m->bytes / sizeof(struct mb_module) };
	if (dl_iterate_phdr(add_one, &f) != 0) {
		mb_modules_drop(m);
		return -1;
	}
	return 0;
}

void mb_modules_drop(struct mb_modules *m)
{
	if (m->v)
		mb_os_unreserve(m->v, m->bytes);
	memset(m, 0, sizeof *m);
}

/* ---- which are gone: the modules loaded now in a hash table ---- */

static int same(const struct mb_module *a, const struct mb_module *b)
{
	return a->base == b->base && a->name == b->name && a->lo == b->lo && a->hi == b->hi;
}

static size_t slot_of(const struct mb_module *a, size_t mask)
{
	return (size_t)(((a->base ^ a->name) * 0x9e3779b97f4a7c15ULL) >> 32) & mask;
}

size_t mb_modules_unloaded(struct mb_modules *m)
{
	struct mb_modules now;
	if (mb_modules_take(&now) != 0)
		return m->n; /* unknown: as if all were gone */
	size_t cap = 16;
	while (cap < 2 * now.n)
		cap <<= 1;
	size_t bytes = (cap * sizeof(uint32_t) + PAGE - 1) & ~(PAGE - 1);
	uint32_t *slot = mb_os_reserve(bytes, PAGE); /* zero: empty slots */
	if (!slot) {
		mb_modules_drop(&now);
		return m->n;
	}
	for (size_t i = 0; i < now.n; i++) {
		size_t s = slot_of(&now.v[i], cap - 1);
		while (slot[s])
			s = (s + 1) & (cap - 1);
		slot[s] = (uint32_t)i + 1;
	}
	size_t gone = 0;
	for (size_t i = 0; i < m->n; i++) {
		size_t s = slot_of(&m->v[i], cap - 1);
		while (slot[s] && !same(&now.v[slot[s] - 1], &m->v[i]))
			s = (s + 1) & (cap - 1);
		if (slot[s])
			continue; /* still loaded */
		struct mb_module t = m->v[gone];
		m->v[gone++] = m->v[i];
		m->v[i] = t;
	}
	mb_os_unreserve(slot, bytes);
	mb_modules_drop(&now);
	return gone;
}
