#include "config.h"
#include "symbolize.h"
#include "elf_dyn.h"

#include <elf.h>
#include <errno.h>
#include <link.h>
#include <string.h>
#include <unistd.h>

struct batch {
	void *const *pc;
	size_t n;
	struct mb_symbol *out;
	int seen;       /* objects visited: the first is the program */
	uintptr_t page; /* the page size: dladdr's object start is that of its first page */
};

/* The symbols dladdr considers: not thread-local, not absolute, not
 * hidden, defined or with a value (a canonical PLT entry). */
static int considered(const ElfW(Sym) *s)
{
	return ELF64_ST_TYPE(s->st_info) != STT_TLS && (s->st_shndx != SHN_UNDEF || s->st_value != 0) &&
	       s->st_shndx != SHN_ABS && ELF64_ST_VISIBILITY(s->st_other) != STV_HIDDEN;
}

/* Whether s, at v, holds pc: inside its size, or at its start if it has
 * none (dladdr's rule). */
static int holds(const ElfW(Sym) *s, uintptr_t v, uintptr_t pc)
{
	if (pc < v)
		return 0;
	if (s->st_shndx == SHN_UNDEF || s->st_size == 0)
		return pc == v;
	return pc < v + s->st_size;
}

static int in_object(const struct dl_phdr_info *info, uintptr_t pc)
{
	for (int k = 0; k < info->dlpi_phnum; k++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[k];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_LOAD && pc >= lo && pc < lo + ph->p_memsz)
			return 1;
	}
	return 0;
}

/* Bits of the bitmap of pages that hold an address (a hash of the page:
 * two pages may share a bit, which costs a bisection, never an answer). */
#define PAGE_BITS 4096u

/* Whether a page of [a, z] (offsets from the lowest address) has its
 * bit set; a span of more pages than the bitmap has bits always has. */
static int on_marked_page(const uint64_t *pages, uintptr_t a, uintptr_t z)
{
	if ((z >> 12) - (a >> 12) >= PAGE_BITS)
		return 1;
	for (uintptr_t p = a >> 12; p <= z >> 12; p++) {
		size_t pg = p & (PAGE_BITS - 1);
		if (pages[pg / 64] & (uint64_t)1 << (pg % 64))
			return 1;
	}
	return 0;
}

static int visit(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	struct batch *bt = arg;
	int first = bt->seen++ == 0;
	uintptr_t page = bt->page, start = UINTPTR_MAX;
	const ElfW(Dyn) *dyn = NULL;
	for (int k = 0; k < info->dlpi_phnum; k++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[k];
		uintptr_t lo = (info->dlpi_addr + ph->p_vaddr) & ~(page - 1);
		if (ph->p_type == PT_LOAD && lo < start)
			start = lo;
		if (ph->p_type == PT_DYNAMIC)
			dyn = (const ElfW(Dyn) *)(info->dlpi_addr + ph->p_vaddr);
	}
	const char *path = info->dlpi_name && info->dlpi_name[0] ? info->dlpi_name
				: first ? program_invocation_name : "";
	size_t mine[bt->n], nmine = 0; /* this object's addresses */
	uintptr_t lo = UINTPTR_MAX, hi = 0;
	for (size_t i = 0; i < bt->n; i++) {
		uintptr_t pc = (uintptr_t)bt->pc[i];
		if (bt->out[i].object || !in_object(info, pc))
			continue;
		bt->out[i].object = path;
		bt->out[i].offset = pc - start;
		mine[nmine++] = i;
		lo = pc < lo ? pc : lo;
		hi = pc > hi ? pc : hi;
	}
	struct mb_elf e;
	if (!nmine || mb_elf_open(&e, info->dlpi_addr, dyn) != 0)
		return 0;
	/* By address (a few dozen at most): each symbol finds the ones it
	 * may hold by bisection. */
	for (size_t j = 1; j < nmine; j++)
		for (size_t k = j; k > 0 && bt->pc[mine[k - 1]] > bt->pc[mine[k]]; k--) {
			size_t t = mine[k];
			mine[k] = mine[k - 1];
			mine[k - 1] = t;
		}
	/* The pages that hold an address, hashed into a bitmap: most
	 * symbols of a large library lie between the lowest and highest
	 * address but on no page of one, and are passed over with no
	 * bisection. */
	uint64_t pages[PAGE_BITS / 64] = { 0 };
	for (size_t j = 0; j < nmine; j++) {
		size_t pg = (((uintptr_t)bt->pc[mine[j]] - lo) >> 12) & (PAGE_BITS - 1);
		pages[pg / 64] |= (uint64_t)1 << (pg % 64);
	}
	/* One pass over the table for every address of this object; the
	 * greatest start wins, as in dladdr. The GNU hash table leaves out
	 * the symbols below its first hashed index, and so does dladdr. */
	size_t from = e.gnu_hash ? e.gnu_hash[1] : 0, nsyms = mb_elf_nsyms(&e);
	const ElfW(Sym) *best[bt->n];
	memset(best, 0, sizeof best);
	for (size_t k = from; k < nsyms; k++) {
		const ElfW(Sym) *s = &e.symtab[k];
		uintptr_t v = info->dlpi_addr + s->st_value, end = v + (s->st_size ? s->st_size : 1);
		if (v > hi || end <= lo || !on_marked_page(pages, v > lo ? v - lo : 0, (end <= hi ? end - 1 : hi) - lo) ||
		    !considered(s))
			continue;
		size_t a = 0, b = nmine; /* the first address at or above v */
		while (a < b) {
			size_t m = (a + b) / 2;
			if ((uintptr_t)bt->pc[mine[m]] < v)
				a = m + 1;
			else
				b = m;
		}
		for (size_t j = a; j < nmine && (uintptr_t)bt->pc[mine[j]] < end; j++) {
			size_t i = mine[j];
			if (holds(s, v, (uintptr_t)bt->pc[i]) && (!best[i] || best[i]->st_value < s->st_value))
				best[i] = s;
		}
	}
	for (size_t i = 0; i < bt->n; i++)
		if (best[i]) {
			bt->out[i].name = mb_elf_sym_name(&e, best[i]);
			bt->out[i].offset = (uintptr_t)bt->pc[i] - (info->dlpi_addr + best[i]->st_value);
		}
	return 0;
}

void mb_symbolize(void *const *pc, size_t n, struct mb_symbol *out)
{
	memset(out, 0, n * sizeof *out);
	if (!n)
		return;
	struct batch bt = { pc, n, out, 0, (uintptr_t)sysconf(_SC_PAGESIZE) };
	dl_iterate_phdr(visit, &bt);
}
