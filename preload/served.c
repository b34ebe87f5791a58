/* Whether the process's allocations reach libmbuddy at all. LD_PRELOAD puts
 * this library before every other shared object, but not before the
 * program: a program that defines malloc itself (rustc links jemalloc and
 * exports it) wins, and glibc and every library then call its malloc.
 * libmbuddy still serves what reaches it directly (operator new, its own
 * API), so the report says what was bypassed instead of showing an almost
 * empty heap as if it were the program's. */
#include "config.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stddef.h>
#include <string.h>

#include "elf_dyn.h"
#include "exports.h"
#include "stats_snapshot.h"

/* Whether f, which dlsym found for name, is a PLT stub of the object it
 * lies in rather than a definition. An executable that is not
 * position-independent and takes the address of a library's function
 * (or calls it from code built without -fPIC) gets a canonical PLT entry
 * for it, exported as an undefined symbol whose value is the entry, so
 * that the function has one address in every object; dlsym finds it
 * first (cc1 does this with free). Calls through it go where the
 * executable's own slot for the name is bound, which the dynamic linker
 * resolves without the stub. */
static int plt_stub(void *f, const char *name)
{
	Dl_info info;
	const ElfW(Sym) *sym = NULL;
	if (!dladdr1(f, &info, (void **)&sym, RTLD_DL_SYMENT) || !sym || !info.dli_sname)
		return 0;
	return sym->st_shndx == SHN_UNDEF && strcmp(info.dli_sname, name) == 0;
}

/* The first definition of name in the objects loaded before this
 * library, or own if none defines it. They were all loaded at start, so
 * all of them are in the global scope, in this order, and none can be
 * unloaded: their links do not change under us. */
static void *first_definition(const char *name, void *own)
{
	Dl_info info;
	struct link_map *self = NULL;
	if (!dladdr1(own, &info, (void **)&self, RTLD_DL_LINKMAP) || !self)
		return own;
	struct link_map *l = self;
	while (l->l_prev)
		l = l->l_prev;
	for (; l && l != self; l = l->l_next) {
		struct mb_elf e;
		const ElfW(Sym) *sym;
		if (mb_elf_open(&e, l->l_addr, l->l_ld) == 0 && (sym = mb_elf_symbol(&e, name)) && mb_elf_defines(sym))
			return (void *)(l->l_addr + sym->st_value);
	}
	return own;
}

void *mb_process_symbol(const char *name, void *own)
{
	void *f = dlsym(RTLD_DEFAULT, name);
	if (!f || f == own)
		return own;
	if (plt_stub(f, name))
		return first_definition(name, own);
	return f;
}

void mb_check_served(void)
{
	static const struct {
		const char *name;
		void *own;
	} family[] = {
		{ "malloc", (void *)mb_own_malloc },
		{ "free", (void *)mb_own_free },
		{ "calloc", (void *)mb_own_calloc },
		{ "realloc", (void *)mb_own_realloc },
	};
	for (size_t i = 0; i < sizeof family / sizeof family[0]; i++) {
		void *f = mb_process_symbol(family[i].name, family[i].own);
		Dl_info info;
		if (f == family[i].own)
			continue;
		const char *object = dladdr(f, &info) && info.dli_fname ? info.dli_fname : "";
		mb_stats_not_served(family[i].name, object);
		return;
	}
}
