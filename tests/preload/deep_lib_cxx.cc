// A C++ library loaded with dlopen(RTLD_DEEPBIND) by deepbind.c, which
// does not link libstdc++: this dlopen loads it, deep-bound too, so its
// operator new calls libc's malloc until rebound. The constructor
// allocates with operator new (before anyone can rebind); the rest news
// what the program deletes and deletes what the program newed.
#include <cstddef>
#include <new>
#include <string>
#include <vector>

static std::string *made_in_ctor;

__attribute__((constructor)) static void deep_cxx_init()
{
	made_in_ctor = new std::string(200, 'c');
}

extern "C" {

size_t deep_cxx_release(void)
{
	size_t n = made_in_ctor ? made_in_ctor->size() : 0;
	delete made_in_ctor;
	made_in_ctor = nullptr;
	return n;
}

void *deep_cxx_new(size_t n) { return ::operator new(n); }
void deep_cxx_delete(void *p) { ::operator delete(p); }
void *deep_cxx_new_aligned(size_t n) { return ::operator new(n, std::align_val_t(256)); }
void deep_cxx_delete_aligned(void *p) { ::operator delete(p, std::align_val_t(256)); }

size_t deep_cxx_strings(int n)
{
	std::vector<std::string> v;
	size_t total = 0;
	for (int i = 0; i < n; i++)
		v.push_back(std::string(static_cast<size_t>(20 + i % 100), static_cast<char>('a' + i % 26)));
	for (const std::string &s : v)
		total += s.size();
	return total;
}

}
