/* Whether the process's allocations reach libmbuddy at all. LD_PRELOAD puts
 * this library before every other shared object, but not before the
 * program: a program that defines malloc itself (rustc links jemalloc and
 * exports it) wins, and glibc and every library then call its malloc.
 * libmbuddy still serves what reaches it directly (operator new, its own
 * API), so the report says what was bypassed instead of showing an almost
 * empty heap as if it were the program's. */
#include "config.h"

#include <dlfcn.h>
#include <stddef.h>

#include "exports.h"
#include "stats_snapshot.h"

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
		void *f = dlsym(RTLD_DEFAULT, family[i].name);
		Dl_info info;
		if (!f || f == family[i].own)
			continue;
		const char *object = dladdr(f, &info) && info.dli_fname ? info.dli_fname : "";
		mb_stats_not_served(family[i].name, object);
		return;
	}
}
