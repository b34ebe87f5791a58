#include "config.h"
#include "unwinder.h"
#include "options.h"
#include "own_thread.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/auxv.h>
#include <sys/single_threaded.h>
#include <unistd.h>

struct mb_unw mb_unw;

enum { UNW_NONE, UNW_LOADING, UNW_READY, UNW_FAILED };
static _Atomic int state;

/* The names libunwind.h gives its functions (_ULx86_64_step, ...). */
#define NAME(f) NAME_(f)
#define NAME_(f) #f

/* The program's definition first, as a linked library would bind it (a
 * test interposes unw_backtrace), then libunwind's own. */
static void *sym(void *lib, const char *name)
{
	void *f = dlsym(RTLD_DEFAULT, name);
	return f ? f : dlsym(lib, name);
}

/* The dynamic loader's address range, from its program headers: its
 * mappings are where its own allocations come from. */
static uintptr_t loader_lo, loader_hi;

static void find_loader(void)
{
	uintptr_t base = (uintptr_t)getauxval(AT_BASE);
	if (!base)
		return; /* a static program, or the loader run as one */
	const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)base;
	const ElfW(Phdr) *ph = (const ElfW(Phdr) *)(base + eh->e_phoff);
	uintptr_t hi = 0;
	for (unsigned i = 0; i < eh->e_phnum; i++)
		if (ph[i].p_type == PT_LOAD && ph[i].p_vaddr + ph[i].p_memsz > hi)
			hi = ph[i].p_vaddr + ph[i].p_memsz;
	loader_lo = base;
	loader_hi = base + hi;
}

/* The descriptors held for libunwind's pipe (mb_unwinder_reserve). */
static int reserved[2] = { -1, -1 };

/* Standard descriptors that are closed, held on /dev/null: what the
 * caller opens meanwhile does not land on them. */
static void hold_std(int *held, int *nheld)
{
	for (int fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) == -1) {
			int got = open("/dev/null", O_RDWR | O_CLOEXEC);
			if (got >= 0)
				held[(*nheld)++] = got;
		}
}

void mb_unwinder_reserve(void)
{
	int held[3], nheld = 0;
	hold_std(held, &nheld);
	if (pipe2(reserved, O_CLOEXEC | O_NONBLOCK) != 0)
		reserved[0] = reserved[1] = -1;
	while (nheld)
		close(held[--nheld]);
}

static int load(void)
{
	void *lib = dlopen(MB_LIBUNWIND_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		mb_warn("cannot load %s; call sites are classified without their callers", MB_LIBUNWIND_SONAME);
		return -1;
	}
	struct mb_unw u = {
		.backtrace = (int (*)(void **, int))sym(lib, NAME(unw_backtrace)),
		.init_local = (int (*)(unw_cursor_t *, unw_context_t *))sym(lib, NAME(unw_init_local)),
		.step = (int (*)(unw_cursor_t *))sym(lib, NAME(unw_step)),
		.get_reg = (int (*)(unw_cursor_t *, unw_regnum_t, unw_word_t *))sym(lib, NAME(unw_get_reg)),
#ifdef __x86_64__
		.getcontext = (int (*)(unw_context_t *))sym(lib, NAME(unw_tdep_getcontext)),
#endif
	};
	int (*set_policy)(unw_addr_space_t, unw_caching_policy_t) =
		(int (*)(unw_addr_space_t, unw_caching_policy_t))sym(lib, NAME(unw_set_caching_policy));
	unw_addr_space_t *local = (unw_addr_space_t *)sym(lib, NAME(unw_local_addr_space));
	if (!u.backtrace || !u.init_local || !u.step || !u.get_reg || !set_policy || !local
#ifdef __x86_64__
	    || !u.getcontext
#endif
	) {
		mb_warn("%s lacks the functions libmbuddy calls; call sites are classified without their callers",
			MB_LIBUNWIND_SONAME);
		return -1;
	}
	/* libunwind opens a pipe it keeps for good (two descriptors, the
	 * lowest free). It gets the ones held for it since the start (see
	 * mb_unwinder_reserve), and a standard descriptor the program runs
	 * with closed is held on /dev/null meanwhile so that it stays closed. */
	int held[3], nheld = 0;
	hold_std(held, &nheld);
	if (reserved[0] >= 0) {
		close(reserved[0]);
		close(reserved[1]);
		reserved[0] = reserved[1] = -1;
	}
	/* Each thread keeps its own cache of unwind information, so an unwind
	 * takes no lock and masks no signal: the global cache's lock costs a
	 * sigprocmask system call at every step. (Setting it opens the pipe
	 * too.) */
	set_policy(*local, UNW_CACHE_PER_THREAD);
	while (nheld)
		close(held[--nheld]);
	mb_unw = u;
	return 0;
}

static void *loader(void *arg)
{
	(void)arg;
	int s = load() == 0 ? UNW_READY : UNW_FAILED;
	atomic_store_explicit(&state, s, memory_order_release);
	return NULL;
}

/* With other threads, the load runs in a thread of its own, which the
 * allocation that asked does not wait for: dlopen takes the loader's
 * lock, which another thread holds while it runs a library's
 * constructors, and a constructor that waits for a thread that is
 * allocating (a library starting its worker) would wait forever. */
static int start_loader(void)
{
	static const struct mb_own_thread loader_thread = { loader, "mbuddy-unwind" };
	return mb_own_thread_start(&loader_thread, 0);
}

int mb_unwinder_ready(const void *ra)
{
	int s = atomic_load_explicit(&state, memory_order_acquire);
	if (s == UNW_READY)
		return 1;
	if (s != UNW_NONE)
		return 0;
	if (!loader_hi)
		find_loader();
	if ((uintptr_t)ra >= loader_lo && (uintptr_t)ra < loader_hi)
		return 0;
	if (!atomic_compare_exchange_strong(&state, &s, UNW_LOADING))
		return 0;
	if (__libc_single_threaded) {
		/* Alone, nobody else can hold the loader's lock; and a thread
		 * of ours would make the process multi-threaded for good, and
		 * glibc lock what it need not lock alone (sqlite3's shell ran
		 * 20% slower after a thread was created and joined). */
		s = load() == 0 ? UNW_READY : UNW_FAILED;
		atomic_store_explicit(&state, s, memory_order_release);
		return s == UNW_READY;
	}
	if (start_loader() != 0) {
		mb_warn("cannot start a thread to load %s; call sites are classified without their callers",
			MB_LIBUNWIND_SONAME);
		atomic_store_explicit(&state, UNW_FAILED, memory_order_release);
	}
	return 0;
}

void mb_unwinder_fork_child(void)
{
	int s = UNW_LOADING;
	atomic_compare_exchange_strong(&state, &s, UNW_NONE);
}
