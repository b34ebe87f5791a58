// The three lifetimes behind C++ new: pinned, FIFO cache, temporaries.
#include "classify_common.h"

#include <cstring>
#include <memory>
#include <vector>

struct Obj {
	char data[96];
};

NI static Obj *pinned_new() { return static_cast<Obj *>(keep(new Obj())); }
NI static Obj *cache_new() { return static_cast<Obj *>(keep(new Obj())); }
NI static Obj *temp_new() { return static_cast<Obj *>(keep(new Obj())); }

int main()
{
	need_libmbuddy();
	const long cache_size = 40000, rounds = 400000;
	std::vector<Obj *> cache(cache_size, nullptr), pins;
	Obj *last_temp = nullptr;
	for (long i = 0; i < rounds; i++) {
		Obj *t = temp_new();
		std::memset(t->data, 1, sizeof t->data);
		long c = i % cache_size;
		delete cache[c];
		cache[c] = cache_new();
		if (i % 8 == 0)
			pins.push_back(pinned_new());
		if (i == rounds - 1)
			last_temp = t;
		else
			delete t;
	}
	int bad = 0;
	bad += expect_type("pinned new site", pins.back(), 0);
	bad += expect_type("FIFO cache new site", cache[(rounds - 1) % cache_size], 1);
	bad += expect_type("temporaries new site", last_temp, 2);
	delete last_temp;
	return bad ? 1 : 0;
}
