#include "config.h"
#include "rules.h"
#include "options.h"
#include "reclaim_type.h"

#include <dlfcn.h>
#include <string.h>

#define MAX_RULES 32
struct rule {
	int is_lib;
	int type;
	char name[96];
};
static struct rule rules[MAX_RULES];
static int nrules;

void mb_rules_parse(const char *s)
{
	while (s && *s) {
		const char *end = strchr(s, ',');
		size_t len = end ? (size_t)(end - s) : strlen(s);
		const char *eq = memchr(s, '=', len);
		struct rule r = { 0 };
		const char *name = s;
		if (len > 4 && strncmp(s, "sym:", 4) == 0)
			name = s + 4;
		else if (len > 4 && strncmp(s, "lib:", 4) == 0) {
			name = s + 4;
			r.is_lib = 1;
		}
		if (!eq || eq <= name || (size_t)(eq - name) >= sizeof r.name ||
		    (r.type = mb_type_parse(eq + 1, len - (size_t)(eq + 1 - s))) < 0 || nrules == MAX_RULES) {
			mb_warn("MBUDDY_RULES: ignoring '%.*s' (expected sym:NAME=TYPE or lib:NAME=TYPE, "
				"TYPE one of KernNoRclm/pinned, KernRclm/cache, UserRclm/short)", (int)len, s);
		} else {
			memcpy(r.name, name, (size_t)(eq - name));
			rules[nrules++] = r;
		}
		s = end ? end + 1 : NULL;
	}
}

int mb_rules_type(void *ra)
{
	if (!nrules)
		return -1;
	Dl_info info;
	if (!dladdr(ra, &info))
		return -1;
	for (int i = 0; i < nrules; i++) {
		if (rules[i].is_lib) {
			if (info.dli_fname && strstr(info.dli_fname, rules[i].name))
				return rules[i].type;
		} else if (info.dli_sname && strcmp(info.dli_sname, rules[i].name) == 0) {
			return rules[i].type;
		}
	}
	return -1;
}
