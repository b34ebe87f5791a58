#include "config.h"
#include "reclaim_type.h"
#include <strings.h>

const char *const mb_type_names[MB_NTYPES] = { "KernNoRclm", "KernRclm", "UserRclm" };
const char *const mb_type_aliases[MB_NTYPES] = { "pinned", "cache", "short" };

/* Each lane's type, set by classification; keys below MB_FIRST_LANE are
 * their own type. */
uint8_t mb_lane_type[MB_NKEYS] = { MB_KERNNORCLM, MB_KERNRCLM, MB_USERRCLM,
				   [MB_FIRST_LANE ... MB_NKEYS - 1] = MB_DEFAULT_TYPE };

int mb_type_parse(const char *s, unsigned long len)
{
	static const char *const extra[MB_NTYPES] = { "long", "medium", "temp" };
	for (int t = 0; t < MB_NTYPES; t++) {
		const char *cands[3] = { mb_type_names[t], mb_type_aliases[t], extra[t] };
		for (int i = 0; i < 3; i++) {
			const char *c = cands[i];
			unsigned long n = 0;
			while (c[n])
				n++;
			if (n == len && strncasecmp(s, c, len) == 0)
				return t;
		}
	}
	return -1;
}
