/* dlopen, interposed for RTLD_DEEPBIND.
 *
 * An object loaded with dlopen(RTLD_DEEPBIND) looks its symbols up in its
 * own dependencies before the global scope. libc is always among them, so
 * its malloc, free, realloc... are glibc's, not the preloaded
 * libmbuddy's, and memory crosses allocators: Debian's php loads every
 * extension so, and pdo.so's free of what php allocated made glibc abort
 * at start (every preloaded allocator has this problem). Two remedies:
 *
 * - after a successful deep-bound dlopen, the objects it loaded get their
 *   references to the malloc family, and to the C++ operators new and
 *   delete, that deep binding gave to libc (or libstdc++) rewritten to
 *   libmbuddy's, in their GOT (JUMP_SLOT and GLOB_DAT relocations, and
 *   absolute pointers to the functions in their data);
 * - what glibc's malloc handed out before that (in their constructors,
 *   which run inside dlopen), a free, realloc or malloc_usable_size of a
 *   pointer outside libmbuddy's region gives to glibc's own functions,
 *   once a deep-bound load has started (mb_glibc_pointer, deepbind.h).
 *
 * A constructor that frees, with glibc's free, something libmbuddy
 * allocated (a string of libc's strdup, say) still crashes: nothing runs
 * between the relocation of the object and its constructors.
 *
 * Everything else about the load is glibc's: the real dlopen is called
 * with the same mode. Only a name that dlopen would resolve relative to
 * its caller changes, since the caller is now this library: see
 * caller_path(). Calls without RTLD_DEEPBIND go to glibc's dlopen by a
 * tail call, so glibc sees their caller as it is. */
#include "config.h"

#include <ctype.h>
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <gnu/lib-names.h>
#include <limits.h>
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#include "deepbind.h"
#include "elf_dyn.h"
#include "exports.h"

int mb_deepbind_active;
struct mb_glibc_malloc mb_glibc;

typedef void *(*dlopen_fn)(const char *, int);
typedef int (*dlclose_fn)(void *);

static dlopen_fn next_dlopen(void)
{
	static dlopen_fn fn;
	dlopen_fn f = __atomic_load_n(&fn, __ATOMIC_ACQUIRE);
	if (!f) {
		f = (dlopen_fn)dlsym(RTLD_NEXT, "dlopen");
		__atomic_store_n(&fn, f, __ATOMIC_RELEASE);
	}
	return f;
}

static dlclose_fn next_dlclose(void)
{
	static dlclose_fn fn;
	dlclose_fn f = __atomic_load_n(&fn, __ATOMIC_ACQUIRE);
	if (!f) {
		f = (dlclose_fn)dlsym(RTLD_NEXT, "dlclose");
		__atomic_store_n(&fn, f, __ATOMIC_RELEASE);
	}
	return f;
}

/* ---- what is rebound ---- */

/* The references deep binding gives to the C library or the C++ runtime
 * and LD_PRELOAD gives to libmbuddy everywhere else: every function that
 * allocates or frees heap memory, under all of glibc's names, and the
 * Itanium-ABI operators new and delete. The functions that only describe
 * or tune the heap (mallinfo, mallopt, malloc_trim...) are left as deep
 * binding has them: they move no memory. */
static const struct {
	const char *name;
	int cxx;
} family[] = {
	{ "malloc", 0 }, { "free", 0 }, { "calloc", 0 }, { "realloc", 0 }, { "reallocarray", 0 },
	{ "memalign", 0 }, { "posix_memalign", 0 }, { "aligned_alloc", 0 }, { "valloc", 0 }, { "pvalloc", 0 },
	{ "malloc_usable_size", 0 }, { "cfree", 0 }, { "free_sized", 0 }, { "free_aligned_sized", 0 },
	{ "__libc_malloc", 0 }, { "__libc_free", 0 }, { "__libc_calloc", 0 }, { "__libc_realloc", 0 },
	{ "__libc_memalign", 0 }, { "__libc_valloc", 0 }, { "__libc_pvalloc", 0 },
	{ "_Znwm", 1 }, { "_Znam", 1 }, { "_ZnwmRKSt9nothrow_t", 1 }, { "_ZnamRKSt9nothrow_t", 1 },
	{ "_ZnwmSt11align_val_t", 1 }, { "_ZnamSt11align_val_t", 1 },
	{ "_ZnwmSt11align_val_tRKSt9nothrow_t", 1 }, { "_ZnamSt11align_val_tRKSt9nothrow_t", 1 },
	{ "_ZdlPv", 1 }, { "_ZdaPv", 1 }, { "_ZdlPvm", 1 }, { "_ZdaPvm", 1 },
	{ "_ZdlPvRKSt9nothrow_t", 1 }, { "_ZdaPvRKSt9nothrow_t", 1 },
	{ "_ZdlPvSt11align_val_t", 1 }, { "_ZdaPvSt11align_val_t", 1 },
	{ "_ZdlPvmSt11align_val_t", 1 }, { "_ZdaPvmSt11align_val_t", 1 },
	{ "_ZdlPvSt11align_val_tRKSt9nothrow_t", 1 }, { "_ZdaPvSt11align_val_tRKSt9nothrow_t", 1 },
};
#define NFAMILY (sizeof family / sizeof family[0])

#if defined(__x86_64__)
#define R_GLOB_DAT R_X86_64_GLOB_DAT
#define R_JUMP_SLOT R_X86_64_JUMP_SLOT
#define R_ABS R_X86_64_64
#elif defined(__aarch64__)
#define R_GLOB_DAT R_AARCH64_GLOB_DAT
#define R_JUMP_SLOT R_AARCH64_JUMP_SLOT
#define R_ABS R_AARCH64_ABS64
#endif

/* A name to rebind: slots that hold sys (or will, for a lazy PLT slot)
 * get own. */
struct target {
	const char *name;
	ElfW(Addr) own, sys;
};

/* This library, for dlsym: its own definitions, whatever the process's
 * scope says. It is never unloaded (-z nodelete). */
static void *self_handle(void)
{
	static void *self;
	void *h = __atomic_load_n(&self, __ATOMIC_ACQUIRE);
	Dl_info info;
	if (!h && dladdr((void *)next_dlopen, &info) && info.dli_fname) {
		h = next_dlopen()(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
		__atomic_store_n(&self, h, __ATOMIC_RELEASE);
	}
	return h;
}

/* The names whose deep-bound binding is the system's definition (libc's,
 * or libstdc++'s for the operators) while the process's is libmbuddy's.
 * A name the process resolves elsewhere (a program with its own malloc)
 * or that deep binding gives to another definition (an object that
 * brings its own allocator) is left alone: it is bound as it would be
 * without libmbuddy. */
static size_t find_targets(void *handle, void *libc, void *libcxx, struct target *t)
{
	void *self = self_handle();
	size_t n = 0;
	if (!self)
		return 0;
	for (size_t i = 0; i < NFAMILY; i++) {
		const char *name = family[i].name;
		void *sys_handle = family[i].cxx ? libcxx : libc;
		void *own, *sys;
		if (!sys_handle || !(own = dlsym(self, name)) || mb_process_symbol(name, own) != own)
			continue;
		sys = dlsym(sys_handle, name);
		if (!sys || sys == own || dlsym(handle, name) != sys)
			continue;
		t[n++] = (struct target){ name, (ElfW(Addr))own, (ElfW(Addr))sys };
	}
	return n;
}

struct rebind {
	struct target t[NFAMILY];
	size_t ntargets;
	ElfW(Addr) *before; /* load biases of the objects loaded before */
	size_t nbefore, cap;
	uintptr_t page;
	size_t rewritten;
};

/* One object being rebound: the extent of its segments and its RELRO
 * pages, which the dynamic linker made read-only after relocating. */
struct object {
	struct rebind *rb;
	const struct dl_phdr_info *info;
	ElfW(Addr) lo, hi;
	ElfW(Addr) relro_lo, relro_hi;
};

/* Where slot lies: 2 on a RELRO page (read-only now), 1 in another part
 * of a writable segment, 0 elsewhere (never written). */
static int slot_place(const struct object *o, const ElfW(Addr) *slot)
{
	ElfW(Addr) a = (ElfW(Addr))slot;
	for (int i = 0; i < o->info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &o->info->dlpi_phdr[i];
		ElfW(Addr) start = o->info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_W) || a < start || a + sizeof *slot > start + ph->p_memsz)
			continue;
		return a >= o->relro_lo && a < o->relro_hi ? 2 : 1;
	}
	return 0;
}

/* The write itself: a RELRO page is made writable around it and read-only
 * again, as the dynamic linker left it. Pointer-sized and aligned, so a
 * thread calling through the slot meanwhile sees the old or the new
 * function. */
static void write_slot(struct object *o, ElfW(Addr) *slot, ElfW(Addr) v)
{
	int place = slot_place(o, slot);
	void *page = (void *)((uintptr_t)slot & ~(o->rb->page - 1));
	if (place == 0)
		return;
	if (place == 2 && mprotect(page, o->rb->page, PROT_READ | PROT_WRITE) != 0)
		return;
	__atomic_store_n(slot, v, __ATOMIC_RELAXED);
	if (place == 2)
		mprotect(page, o->rb->page, PROT_READ);
	o->rb->rewritten++;
}

static int rebind_slot(void *arg, const struct mb_elf_reloc *r)
{
#ifdef R_JUMP_SLOT
	struct object *o = arg;
	const struct target *t = NULL;
	if (r->type != R_JUMP_SLOT && r->type != R_GLOB_DAT && !(r->type == R_ABS && r->addend == 0))
		return 0;
	for (size_t i = 0; i < o->rb->ntargets && !t; i++)
		if (strcmp(r->name, o->rb->t[i].name) == 0)
			t = &o->rb->t[i];
	if (!t || (ElfW(Addr))r->slot < o->lo || (ElfW(Addr))r->slot >= o->hi)
		return 0;
	ElfW(Addr) v = *r->slot;
	/* A lazy PLT slot not called yet points back into the object's own
	 * PLT; its first call would bind it to t->sys (find_targets asked
	 * the deep-bound scope). */
	int unbound = r->type == R_JUMP_SLOT && r->sym->st_shndx == SHN_UNDEF && v >= o->lo && v < o->hi;
	if (v == t->sys || unbound)
		write_slot(o, r->slot, t->own);
#else
	(void)arg;
	(void)r;
#endif
	return 0;
}

static void rebind_object(struct rebind *rb, const struct dl_phdr_info *info)
{
	struct object o = { .rb = rb, .info = info, .lo = UINTPTR_MAX };
	const ElfW(Dyn) *dyn = NULL;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		ElfW(Addr) start = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_DYNAMIC)
			dyn = (const ElfW(Dyn) *)start;
		else if (ph->p_type == PT_LOAD) {
			o.lo = start < o.lo ? start : o.lo;
			o.hi = start + ph->p_memsz > o.hi ? start + ph->p_memsz : o.hi;
		} else if (ph->p_type == PT_GNU_RELRO) {
			/* The pages glibc protects: both ends rounded down. */
			o.relro_lo = start & ~(rb->page - 1);
			o.relro_hi = (start + ph->p_memsz) & ~(rb->page - 1);
		}
	}
	struct mb_elf e;
	if (dyn && mb_elf_open(&e, info->dlpi_addr, dyn) == 0)
		mb_elf_each_reloc(&e, rebind_slot, &o);
}

/* dl_iterate_phdr holds the loader's lock of the list of objects while
 * it calls these: no object is unloaded under them. They call nothing of
 * the loader's (its other lock is taken by dlopen before this one). */
static int count_or_record(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct rebind *rb = arg;
	(void)size;
	if (rb->nbefore < rb->cap)
		rb->before[rb->nbefore] = info->dlpi_addr;
	rb->nbefore++;
	return 0;
}

static int rebind_new(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct rebind *rb = arg;
	size_t n = rb->nbefore < rb->cap ? rb->nbefore : rb->cap;
	(void)size;
	for (size_t i = 0; i < n; i++)
		if (rb->before[i] == info->dlpi_addr)
			return 0;
	rebind_object(rb, info);
	return 0;
}

/* ---- the caller's view of the name ---- */

/* The directory of the caller's object, for $ORIGIN: the executable's
 * from /proc/self/exe, as glibc finds it, a library's from its path. */
static int caller_origin(const struct link_map *caller, char *buf, size_t size)
{
	ssize_t n;
	if (caller->l_name[0] == '\0') {
		n = readlink("/proc/self/exe", buf, size - 1);
		if (n <= 0)
			return -1;
		buf[n] = '\0';
	} else if (caller->l_name[0] == '/' && strlen(caller->l_name) < size) {
		strcpy(buf, caller->l_name);
	} else {
		return -1;
	}
	char *slash = strrchr(buf, '/');
	if (!slash)
		return -1;
	slash[slash == buf] = '\0';
	return 0;
}

/* file with $ORIGIN and ${ORIGIN} replaced by origin, in out. */
static int expand_origin(const char *file, const char *origin, char *out, size_t size)
{
	size_t n = 0, olen = strlen(origin);
	while (*file) {
		/* glibc's rule: $ORIGIN ends where a name could not go on. */
		size_t skip = strncmp(file, "${ORIGIN}", 9) == 0 ? 9 : 0;
		if (!skip && strncmp(file, "$ORIGIN", 7) == 0 && !isalnum((unsigned char)file[7]) && file[7] != '_')
			skip = 7;
		if (skip) {
			if (n + olen >= size)
				return -1;
			memcpy(out + n, origin, olen);
			n += olen;
			file += skip;
			continue;
		}
		if (n + 1 >= size)
			return -1;
		out[n++] = *file++;
	}
	out[n] = '\0';
	return 0;
}

/* The directories glibc searches for a name loaded by the object behind
 * handle (a link map: glibc's handles are link maps), less the system
 * directories at the end: RPATHs, LD_LIBRARY_PATH, RUNPATH. NULL if not
 * known; free() the result. */
static Dl_serinfo *search_dirs(void *handle)
{
	Dl_serinfo size;
	if (dlinfo(handle, RTLD_DI_SERINFOSIZE, &size) != 0 || size.dls_size < sizeof size)
		return NULL;
	Dl_serinfo *si = malloc(size.dls_size);
	if (!si)
		return NULL;
	*si = size;
	if (dlinfo(handle, RTLD_DI_SERINFO, si) != 0) {
		free(si);
		return NULL;
	}
	return si;
}

/* Whether path is an ELF object this process could load (glibc skips the
 * others and searches on). */
static int loadable(const char *path)
{
	ElfW(Ehdr) h;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, &h, sizeof h);
	close(fd);
	if (n != (ssize_t)sizeof h || memcmp(h.e_ident, ELFMAG, SELFMAG) != 0 || h.e_ident[EI_CLASS] != ELFCLASS64)
		return 0;
#if defined(__x86_64__)
	return h.e_machine == EM_X86_64;
#elif defined(__aarch64__)
	return h.e_machine == EM_AARCH64;
#else
	return 1;
#endif
}

/* glibc resolves what dlopen is given relative to the object that called
 * it: $ORIGIN is that object's directory, and a name without a slash is
 * searched for in its RPATH or RUNPATH first. Called from here, glibc
 * would use this library's instead, so the name is resolved for the
 * caller: $ORIGIN expanded, and the caller's own directories searched, in
 * glibc's order, up to those this library's search shares with it (the
 * system's, LD_LIBRARY_PATH when it comes last, the executable's RPATH),
 * which glibc then searches as it would have, with ld.so.cache. Returns
 * the name to give glibc: file, or out. Secure-execution programs keep
 * their names as they are (glibc restricts $ORIGIN there). */
static const char *caller_path(const char *file, void *ra, char *out, size_t size)
{
	Dl_info info;
	struct link_map *caller = NULL;
	char origin[PATH_MAX], expanded[PATH_MAX];
	const char *name = file;
	if (!file || getauxval(AT_SECURE) || !dladdr1(ra, &info, (void **)&caller, RTLD_DL_LINKMAP) || !caller)
		return file;
	if (strchr(file, '$') && caller_origin(caller, origin, sizeof origin) == 0 &&
	    expand_origin(file, origin, expanded, sizeof expanded) == 0)
		name = expanded;
	if (strchr(name, '/')) {
		if (name == file || strlen(name) >= size)
			return file;
		strcpy(out, name);
		return out;
	}
	struct link_map *self = NULL;
	if (!dladdr1((void *)next_dlopen, &info, (void **)&self, RTLD_DL_LINKMAP) || !self || self == caller)
		return file;
	Dl_serinfo *theirs = search_dirs(caller), *ours = search_dirs(self);
	const char *result = file;
	if (theirs && ours) {
		/* The directories both searches end with. */
		unsigned a = theirs->dls_cnt, b = ours->dls_cnt;
		while (a > 0 && b > 0 && strcmp(theirs->dls_serpath[a - 1].dls_name, ours->dls_serpath[b - 1].dls_name) == 0)
			a--, b--;
		for (unsigned i = 0; i < a && result == file; i++) {
			const char *dir = theirs->dls_serpath[i].dls_name;
			if (strlen(dir) + 1 + strlen(name) < size) {
				strcpy(out, dir);
				strcat(out, "/");
				strcat(out, name);
				if (loadable(out))
					result = out;
			}
		}
	}
	free(theirs);
	free(ours);
	return result;
}

/* ---- dlopen ---- */

/* libc.so.6, for dlsym: its own definitions. Never unloaded. */
static void *libc_handle(dlopen_fn real)
{
	static void *libc;
	void *h = __atomic_load_n(&libc, __ATOMIC_ACQUIRE);
	if (!h) {
		h = real(LIBC_SO, RTLD_LAZY | RTLD_NOLOAD);
		__atomic_store_n(&libc, h, __ATOMIC_RELEASE);
	}
	return h;
}

/* glibc's free, realloc and malloc_usable_size, from libc itself (the
 * next definition after this library might be another allocator's). */
static int find_glibc(void *libc)
{
	if (__atomic_load_n(&mb_glibc.free, __ATOMIC_ACQUIRE))
		return 0;
	struct mb_glibc_malloc g = {
		.free = (void (*)(void *))dlsym(libc, "free"),
		.realloc = (void *(*)(void *, size_t))dlsym(libc, "realloc"),
		.usable_size = (size_t(*)(void *))dlsym(libc, "malloc_usable_size"),
	};
	if (!g.free || !g.realloc || !g.usable_size)
		return -1;
	mb_glibc.realloc = g.realloc;
	mb_glibc.usable_size = g.usable_size;
	__atomic_store_n(&mb_glibc.free, g.free, __ATOMIC_RELEASE);
	return 0;
}

static __attribute__((noinline)) void *dlopen_deep(dlopen_fn real, const char *file, int mode, void *ra)
{
	static int loaded_once;
	char path[PATH_MAX];
	void *libc = libc_handle(real);
	const char *name = caller_path(file, ra, path, sizeof path);

	/* What the objects already loaded are, to tell the new ones after. */
	struct rebind *rb = calloc(1, sizeof *rb);
	if (rb) {
		dl_iterate_phdr(count_or_record, rb);
		rb->cap = rb->nbefore + 16;
		rb->before = malloc(rb->cap * sizeof *rb->before);
		rb->nbefore = 0;
		if (rb->before)
			dl_iterate_phdr(count_or_record, rb);
		rb->page = (uintptr_t)sysconf(_SC_PAGESIZE);
	}
	/* From now on, constructors of the objects being loaded may allocate
	 * with glibc's malloc, and the program may free that later. */
	int glibc_ok = libc && find_glibc(libc) == 0;
	if (glibc_ok)
		__atomic_add_fetch(&mb_deepbind_active, 1, __ATOMIC_RELEASE);

	void *h = real(name, mode);

	if (h && rb && rb->before) {
		void *libcxx = real("libstdc++.so.6", RTLD_LAZY | RTLD_NOLOAD);
		rb->ntargets = find_targets(h, libc, libcxx, rb->t);
		if (rb->ntargets)
			dl_iterate_phdr(rebind_new, rb);
		if (libcxx)
			next_dlclose()(libcxx);
	}
	if (h)
		dlerror(); /* a successful dlopen leaves no error, as glibc's */
	/* Active for good once a deep-bound object is in: what its
	 * constructors allocated may be freed at any time. */
	if (glibc_ok && (!h || __atomic_exchange_n(&loaded_once, 1, __ATOMIC_ACQ_REL)))
		__atomic_sub_fetch(&mb_deepbind_active, 1, __ATOMIC_RELEASE);
	if (rb)
		free(rb->before);
	free(rb);
	return h;
}

/* Without RTLD_DEEPBIND this is glibc's dlopen, reached by a tail call:
 * glibc takes the caller from the return address, and it must be the
 * program's. */
EXPORT void *dlopen(const char *file, int mode)
{
	dlopen_fn real = next_dlopen();
	if (__builtin_expect(!real, 0))
		return NULL;
	if (__builtin_expect(!(mode & RTLD_DEEPBIND), 1))
		return real(file, mode);
	return dlopen_deep(real, file, mode, CALLER);
}
