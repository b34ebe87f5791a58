/* The dynamic section of a loaded object, read as the dynamic linker
 * reads it (elf_dyn.h). */
#include "config.h"

#include <elf.h>
#include <link.h>
#include <string.h>

#include "elf_dyn.h"

/* glibc relocates most address entries of a writable dynamic section in
 * place (d_ptr += l_addr) and leaves a read-only one (the vDSO's, or on
 * targets that keep it read-only) as the file has it. An object's own
 * addresses as the file has them are offsets below its size, far below
 * the load bias of a shared object, so the two cannot be confused; in an
 * executable that is not position-independent the bias is 0 and both are
 * the same. */
static const void *dyn_ptr(ElfW(Addr) base, ElfW(Addr) p)
{
	return (const void *)(p < base ? base + p : p);
}

int mb_elf_open(struct mb_elf *e, ElfW(Addr) base, const ElfW(Dyn) *dyn)
{
	memset(e, 0, sizeof *e);
	e->base = base;
	int pltrel = DT_RELA;
	if (!dyn)
		return -1;
	for (; dyn->d_tag != DT_NULL; dyn++) {
		switch (dyn->d_tag) {
		case DT_SYMTAB: e->symtab = dyn_ptr(base, dyn->d_un.d_ptr); break;
		case DT_STRTAB: e->strtab = dyn_ptr(base, dyn->d_un.d_ptr); break;
		case DT_STRSZ: e->strsz = dyn->d_un.d_val; break;
		case DT_VERSYM: e->versym = dyn_ptr(base, dyn->d_un.d_ptr); break;
		case DT_GNU_HASH: e->gnu_hash = dyn_ptr(base, dyn->d_un.d_ptr); break;
		case DT_HASH: e->sysv_hash = dyn_ptr(base, dyn->d_un.d_ptr); break;
		case DT_RELA: e->rel[0] = dyn_ptr(base, dyn->d_un.d_ptr); e->rela[0] = 1; break;
		case DT_RELASZ: e->relsz[0] = dyn->d_un.d_val; break;
		case DT_REL: e->rel[0] = dyn_ptr(base, dyn->d_un.d_ptr); e->rela[0] = 0; break;
		case DT_RELSZ: e->relsz[0] = dyn->d_un.d_val; break;
		case DT_JMPREL: e->rel[1] = dyn_ptr(base, dyn->d_un.d_ptr); break;
		case DT_PLTRELSZ: e->relsz[1] = dyn->d_un.d_val; break;
		case DT_PLTREL: pltrel = (int)dyn->d_un.d_val; break;
		default: break;
		}
	}
	e->rela[1] = pltrel == DT_RELA;
	if (!e->symtab || !e->strtab || (!e->gnu_hash && !e->sysv_hash))
		return -1;
	return 0;
}

const char *mb_elf_sym_name(const struct mb_elf *e, const ElfW(Sym) *s)
{
	return s->st_name < e->strsz ? e->strtab + s->st_name : "";
}

/* The default version of a name, or a symbol without versions: what an
 * unversioned lookup (dlsym's) accepts. */
static int acceptable(const struct mb_elf *e, size_t i, const char *name)
{
	const ElfW(Sym) *s = &e->symtab[i];
	if (s->st_value == 0 && s->st_shndx != SHN_ABS)
		return 0;
	if (e->versym && (e->versym[i] & 0x8000))
		return 0;
	return strcmp(mb_elf_sym_name(e, s), name) == 0;
}

static const ElfW(Sym) *gnu_lookup(const struct mb_elf *e, const char *name)
{
	const uint32_t *h = e->gnu_hash;
	uint32_t nbuckets = h[0], symoffset = h[1], bloom_words = h[2];
	const uint32_t *buckets = (const uint32_t *)((const ElfW(Addr) *)(h + 4) + bloom_words);
	const uint32_t *chain = buckets + nbuckets;
	uint32_t hash = 5381;
	for (const unsigned char *c = (const unsigned char *)name; *c; c++)
		hash = hash * 33 + *c;
	if (nbuckets == 0)
		return NULL;
	uint32_t i = buckets[hash % nbuckets];
	if (i < symoffset)
		return NULL;
	for (;; i++) {
		uint32_t ch = chain[i - symoffset];
		if ((ch | 1) == (hash | 1) && acceptable(e, i, name))
			return &e->symtab[i];
		if (ch & 1)
			return NULL;
	}
}

static const ElfW(Sym) *sysv_lookup(const struct mb_elf *e, const char *name)
{
	const ElfW(Word) *h = e->sysv_hash;
	ElfW(Word) nbucket = h[0], nchain = h[1];
	const ElfW(Word) *bucket = h + 2, *chain = bucket + nbucket;
	unsigned long hash = 0;
	for (const unsigned char *c = (const unsigned char *)name; *c; c++) {
		hash = (hash << 4) + *c;
		unsigned long g = hash & 0xf0000000ul;
		hash ^= g >> 24;
		hash &= ~g;
	}
	if (nbucket == 0)
		return NULL;
	for (ElfW(Word) i = bucket[hash % nbucket]; i != STN_UNDEF && i < nchain; i = chain[i])
		if (acceptable(e, i, name))
			return &e->symtab[i];
	return NULL;
}

size_t mb_elf_nsyms(const struct mb_elf *e)
{
	if (!e->gnu_hash)
		return e->sysv_hash[1]; /* nchain: one per symbol */
	const uint32_t *h = e->gnu_hash;
	uint32_t nbuckets = h[0], symoffset = h[1], bloom_words = h[2];
	const uint32_t *buckets = (const uint32_t *)((const ElfW(Addr) *)(h + 4) + bloom_words);
	const uint32_t *chain = buckets + nbuckets;
	uint32_t last = 0;
	for (uint32_t b = 0; b < nbuckets; b++)
		if (buckets[b] > last)
			last = buckets[b];
	if (last < symoffset)
		return symoffset;
	/* The last bucket's chain ends with the table: its low bit set. */
	while (!(chain[last - symoffset] & 1))
		last++;
	return (size_t)last + 1;
}

const ElfW(Sym) *mb_elf_symbol(const struct mb_elf *e, const char *name)
{
	return e->gnu_hash ? gnu_lookup(e, name) : sysv_lookup(e, name);
}

/* 64-bit objects only: configure refuses anything else. */
int mb_elf_defines(const ElfW(Sym) *sym)
{
	int bind = ELF64_ST_BIND(sym->st_info), type = ELF64_ST_TYPE(sym->st_info);
	int vis = ELF64_ST_VISIBILITY(sym->st_other);
	return sym->st_shndx != SHN_UNDEF && (bind == STB_GLOBAL || bind == STB_WEAK || bind == STB_GNU_UNIQUE) &&
	       type != STT_TLS && type != STT_SECTION && type != STT_FILE && vis != STV_HIDDEN && vis != STV_INTERNAL;
}

void mb_elf_each_reloc(const struct mb_elf *e, int (*fn)(void *arg, const struct mb_elf_reloc *r), void *arg)
{
	for (int t = 0; t < 2; t++) {
		if (!e->rel[t])
			continue;
		size_t entsize = e->rela[t] ? sizeof(ElfW(Rela)) : sizeof(ElfW(Rel));
		for (size_t off = 0; off + entsize <= e->relsz[t]; off += entsize) {
			const ElfW(Rela) *ra = (const ElfW(Rela) *)(e->rel[t] + off);
			const ElfW(Rel) *rl = (const ElfW(Rel) *)(e->rel[t] + off);
			ElfW(Xword) info = e->rela[t] ? ra->r_info : rl->r_info;
			size_t symidx = ELF64_R_SYM(info);
			if (symidx == STN_UNDEF)
				continue;
			struct mb_elf_reloc r = {
				.slot = (ElfW(Addr) *)(e->base + (e->rela[t] ? ra->r_offset : rl->r_offset)),
				.type = (unsigned)ELF64_R_TYPE(info),
				.sym = &e->symtab[symidx],
				.name = mb_elf_sym_name(e, &e->symtab[symidx]),
				.addend = e->rela[t] ? ra->r_addend : 0,
			};
			if (fn(arg, &r))
				return;
		}
	}
}
