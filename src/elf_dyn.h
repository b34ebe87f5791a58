/* Reading what the dynamic linker reads in a loaded object: its dynamic
 * symbol table (through its hash table), and the relocations that bind
 * its references to other objects' symbols. Nothing here takes a lock of
 * the loader or allocates: the caller keeps the object loaded. */
#ifndef MB_ELF_DYN_H
#define MB_ELF_DYN_H

#include <link.h>
#include <stddef.h>
#include <stdint.h>

struct mb_elf {
	ElfW(Addr) base; /* load bias: l_addr, dlpi_addr */
	const ElfW(Sym) *symtab;
	const char *strtab;
	size_t strsz;
	const ElfW(Half) *versym;   /* or NULL */
	const uint32_t *gnu_hash;   /* or NULL */
	const ElfW(Word) *sysv_hash; /* or NULL */
	/* [0] DT_RELA or DT_REL, [1] DT_JMPREL (the PLT's). */
	const char *rel[2];
	size_t relsz[2];
	int rela[2]; /* whether entries are ElfW(Rela) */
};

/* Fill *e from the dynamic section of an object loaded at base. -1 when
 * it has no symbol or string table or no hash table. */
int mb_elf_open(struct mb_elf *e, ElfW(Addr) base, const ElfW(Dyn) *dyn);

/* The symbol `name` of the object's hash table in its default version
 * (not a hidden one), or NULL. It may be undefined: in an executable, a
 * canonical PLT entry (taking the address of a function of a library,
 * or calling it from code built without -fPIC) is an undefined symbol
 * whose value is the entry's address, hashed so that every object's
 * pointer to the function is that entry. */
const ElfW(Sym) *mb_elf_symbol(const struct mb_elf *e, const char *name);

/* Whether sym is a definition another object can bind to. */
int mb_elf_defines(const ElfW(Sym) *sym);

/* How many entries the symbol table has, from the hash table (the
 * dynamic section does not say): the first index past every chain. */
size_t mb_elf_nsyms(const struct mb_elf *e);

/* A symbol's name, or "" if its offset lies past the string table. */
const char *mb_elf_sym_name(const struct mb_elf *e, const ElfW(Sym) *s);

/* One relocation that names a symbol. */
struct mb_elf_reloc {
	ElfW(Addr) *slot;     /* where the dynamic linker wrote */
	unsigned type;        /* ELF64_R_TYPE */
	const ElfW(Sym) *sym; /* the symbol named, in this object's table */
	const char *name;
	ElfW(Sxword) addend;  /* 0 for REL entries */
};

/* Call fn for each relocation of the object (DT_RELA or DT_REL, then
 * DT_JMPREL) that names a symbol; stops early when fn returns nonzero. */
void mb_elf_each_reloc(const struct mb_elf *e, int (*fn)(void *arg, const struct mb_elf_reloc *r), void *arg);

#endif
