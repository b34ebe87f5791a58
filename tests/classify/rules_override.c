/* A rule in MBUDDY_RULES pins a site by symbol name, whatever its objects
 * do: here a site of temporaries is declared pinned (KernNoRclm), and a
 * pinned site declared short (UserRclm). Run with
 * MBUDDY_RULES="sym:temps_declared_pinned=pinned,sym:pins_declared_short=short". */
#include "classify_common.h"

__attribute__((visibility("default"))) NI void *temps_declared_pinned(size_t n) { return keep(malloc(n)); }
__attribute__((visibility("default"))) NI void *pins_declared_short(size_t n) { return keep(malloc(n)); }
NI static void *temps_learned(size_t n) { return keep(malloc(n)); }

int main(void)
{
	need_libmbuddy();
	void **pins = calloc(100000, sizeof(void *));
	for (long i = 0; i < 100000; i++) {
		free(temps_declared_pinned(64));
		free(temps_learned(64));
		pins[i] = pins_declared_short(64);
	}
	int bad = 0;
	void *a = temps_declared_pinned(64), *b = pins_declared_short(64), *c = temps_learned(64);
	bad += expect_type("temporaries, rule pinned", a, 0);
	bad += expect_type("pinned, rule short", b, 2);
	bad += expect_type("temporaries, learned", c, 2);
	return bad ? 1 : 0;
}
