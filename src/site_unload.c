#include "config.h"
#include "site_unload.h"
#include "modules.h"
#include "profile.h"
#include "site.h"

static int in_code(uintptr_t a, const struct mb_module *gone, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (a >= gone[i].lo && a < gone[i].hi)
			return 1;
	return 0;
}

/* Whether the site is keyed on an address of unmapped code: a site's own
 * return address; for a deep site its wrapper's, or one of the two
 * callers above the wrapper its key is made of (all of them when they are
 * not known). */
static int site_in_code(const struct mb_site *s, const struct mb_module *gone, size_t n)
{
	if (!s->is_deep)
		return in_code(atomic_load(&mb_site_slot_of(s)->key), gone, n);
	uintptr_t wrapper = atomic_load(&mb_site_slot_of(s->parent)->key);
	if (in_code(wrapper, gone, n))
		return 1;
	for (int k = 0; k < s->nframes; k++)
		if ((uintptr_t)s->frames[k] == wrapper)
			return (k + 1 < s->nframes && in_code((uintptr_t)s->frames[k + 1], gone, n)) ||
			       (k + 2 < s->nframes && in_code((uintptr_t)s->frames[k + 2], gone, n));
	return 1;
}

void mb_sites_code_unmapped(struct mb_modules *before)
{
	size_t n = before ? mb_modules_unloaded(before) : 0;
	if (before && n == 0)
		return;
	mb_profile_forget_modules();
	mb_site_lock();
	for (size_t i = 0; i < mb_site_count_locked(); i++) {
		struct mb_site *s = mb_site_nth_locked(i);
		if (mb_site_flags(s) & MB_SITE_PINNED)
			continue;
		if (!before || site_in_code(s, before->v, n))
			mb_site_forget_locked(s);
	}
	mb_site_unlock();
}
