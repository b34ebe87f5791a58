// The C++ operator new/delete family under LD_PRELOAD=libmbuddy.so: plain,
// array, nothrow, sized and aligned forms; that they reach libmbuddy; that
// a failing throwing new calls the new-handler and then throws
// std::bad_alloc, and that a failing nothrow new returns nullptr.
#include "ptest.h"

#include <malloc.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <vector>

namespace {

const std::size_t MiB = std::size_t(1) << 20;

// Keep the compiler from pairing and deleting new/delete expressions.
template <class T> T *keep(T *p)
{
	return static_cast<T *>(pt_hide(static_cast<void *>(p)));
}

bool aligned_to(const void *p, std::size_t a)
{
	return (reinterpret_cast<std::uintptr_t>(p) & (a - 1)) == 0;
}

std::size_t live_bytes()
{
	return mallinfo2().uordblks;
}

void test_interposition()
{
	static const char *const names[] = {
		"_Znwm", "_Znam", "_ZnwmRKSt9nothrow_t", "_ZnamRKSt9nothrow_t",
		"_ZnwmSt11align_val_t", "_ZnamSt11align_val_t",
		"_ZnwmSt11align_val_tRKSt9nothrow_t", "_ZnamSt11align_val_tRKSt9nothrow_t",
		"_ZdlPv", "_ZdaPv", "_ZdlPvm", "_ZdaPvm", "_ZdlPvRKSt9nothrow_t", "_ZdaPvRKSt9nothrow_t",
		"_ZdlPvSt11align_val_t", "_ZdaPvSt11align_val_t", "_ZdlPvmSt11align_val_t",
		"_ZdaPvmSt11align_val_t", "_ZdlPvSt11align_val_tRKSt9nothrow_t",
		"_ZdaPvSt11align_val_tRKSt9nothrow_t", nullptr,
	};
	pt_check_interposed(names);

	if (!pt_mbuddy)
		return;
	// The operators really allocate from libmbuddy's heap: its accounting
	// sees a 16 MiB new and delete.
	std::size_t before = live_bytes();
	char *p = keep(new char[16 * MiB]);
	std::size_t during = live_bytes();
	PT_CHECK(during >= before + 16 * MiB, "new char[16M] not seen by libmbuddy: live %zu -> %zu", before, during);
	delete[] keep(p);
	std::size_t after = live_bytes();
	PT_CHECK(after + 16 * MiB <= during, "delete[] not seen by libmbuddy: live %zu -> %zu", during, after);
}

struct Plain {
	long v[3];
};

struct alignas(64) Line {
	unsigned char b[64];
};

struct alignas(4096) PageObj {
	unsigned char b[100];
};

struct alignas(1 << 20) Huge {
	unsigned char b[16];
};

template <class T> void check_obj(T *p, const char *what)
{
	PT_CHECK(p != nullptr, "%s returned nullptr", what);
	PT_CHECK(aligned_to(p, alignof(T)), "%s = %p is not aligned to %zu", what, (void *)p, alignof(T));
	PT_CHECK(aligned_to(p, alignof(T) < 16 ? alignof(T) : 16), "%s", what);
}

template <class T> void forms(const char *name, std::size_t max_n)
{
	char what[128];
	for (int round = 0; round < 50; round++) {
		T *a = keep(new T);
		std::snprintf(what, sizeof what, "new %s", name);
		check_obj(a, what);
		std::memset(static_cast<void *>(a), 0x11, sizeof(T));
		delete keep(a); // sized (and aligned, if over-aligned) delete

		std::size_t n = std::size_t(round) * 3 % max_n + 1;
		T *arr = keep(new T[n]);
		std::snprintf(what, sizeof what, "new %s[%zu]", name, n);
		check_obj(arr, what);
		std::memset(static_cast<void *>(arr), 0x22, n * sizeof(T));
		PT_CHECK(malloc_usable_size(arr) >= n * sizeof(T), "%s: usable size too small", what);
		delete[] keep(arr);

		T *nt = keep(new (std::nothrow) T);
		std::snprintf(what, sizeof what, "new (nothrow) %s", name);
		check_obj(nt, what);
		delete keep(nt);

		T *nta = keep(new (std::nothrow) T[n]);
		std::snprintf(what, sizeof what, "new (nothrow) %s[%zu]", name, n);
		check_obj(nta, what);
		delete[] keep(nta);
	}
}

// Every operator called by name, with every alignment from 1 to 1 MiB.
void test_explicit_operators()
{
	for (std::size_t n : { std::size_t(0), std::size_t(1), std::size_t(24), std::size_t(1000),
			       std::size_t(16384), std::size_t(20000), std::size_t(3 * MiB) }) {
		void *p = keep(::operator new(n));
		PT_CHECK(p && aligned_to(p, 16), "operator new(%zu) = %p", n, p);
		std::memset(p, 1, n);
		::operator delete(keep(p));
		p = keep(::operator new[](n));
		PT_CHECK(p && aligned_to(p, 16), "operator new[](%zu) = %p", n, p);
		std::memset(p, 1, n);
		::operator delete[](keep(p));
		p = keep(::operator new(n));
		::operator delete(keep(p), n);
		p = keep(::operator new[](n));
		::operator delete[](keep(p), n);
		p = keep(::operator new(n, std::nothrow));
		PT_CHECK(p != nullptr, "operator new(%zu, nothrow) = nullptr", n);
		::operator delete(keep(p), std::nothrow);
		p = keep(::operator new[](n, std::nothrow));
		PT_CHECK(p != nullptr, "operator new[](%zu, nothrow) = nullptr", n);
		::operator delete[](keep(p), std::nothrow);

		for (std::size_t al = 1; al <= MiB; al <<= 1) {
			std::align_val_t a{ al };
			void *q = keep(::operator new(n, a));
			PT_CHECK(q && aligned_to(q, al), "operator new(%zu, align %zu) = %p", n, al, q);
			if (q) {
				PT_CHECK(malloc_usable_size(q) >= n, "aligned new: usable size");
				std::memset(q, 2, n);
			}
			::operator delete(keep(q), a);
			q = keep(::operator new[](n, a));
			PT_CHECK(q && aligned_to(q, al), "operator new[](%zu, align %zu) = %p", n, al, q);
			::operator delete[](keep(q), n, a);
			q = keep(::operator new(n, a, std::nothrow));
			PT_CHECK(q && aligned_to(q, al), "operator new(%zu, align %zu, nothrow) = %p", n, al, q);
			::operator delete(keep(q), a, std::nothrow);
			q = keep(::operator new[](n, a, std::nothrow));
			PT_CHECK(q && aligned_to(q, al), "operator new[](%zu, align %zu, nothrow) = %p", n, al, q);
			::operator delete[](keep(q), a, std::nothrow);
			q = keep(::operator new(n, a));
			::operator delete(keep(q), n, a);
		}
	}
	// Deleting a null pointer is a no-op in every form.
	::operator delete(nullptr);
	::operator delete[](nullptr);
	::operator delete(nullptr, std::size_t(8));
	::operator delete(nullptr, std::align_val_t{ 64 });
	::operator delete[](nullptr, std::nothrow);
}

int handler_calls;
int handler_limit;

void counting_handler()
{
	if (++handler_calls >= handler_limit)
		std::set_new_handler(nullptr);
}

void test_failures()
{
	const std::size_t huge[] = { SIZE_MAX, SIZE_MAX / 2, std::size_t(1) << 48, SIZE_MAX - 4095 };
	for (std::size_t h : huge) {
		std::size_t n = pt_hide_size(h);
		bool threw = false;
		try {
			void *p = keep(::operator new(n));
			::operator delete(p);
		} catch (const std::bad_alloc &) {
			threw = true;
		}
		PT_CHECK(threw, "operator new(%zu) did not throw std::bad_alloc", n);
		threw = false;
		try {
			void *p = keep(::operator new[](n));
			::operator delete[](p);
		} catch (const std::bad_alloc &) {
			threw = true;
		}
		PT_CHECK(threw, "operator new[](%zu) did not throw std::bad_alloc", n);
		threw = false;
		try {
			void *p = keep(::operator new(n, std::align_val_t{ 256 }));
			::operator delete(p, std::align_val_t{ 256 });
		} catch (const std::bad_alloc &) {
			threw = true;
		}
		PT_CHECK(threw, "operator new(%zu, align 256) did not throw std::bad_alloc", n);
		threw = false;
		try {
			void *p = keep(::operator new[](n, std::align_val_t{ 1 << 20 }));
			::operator delete[](p, std::align_val_t{ 1 << 20 });
		} catch (const std::bad_alloc &) {
			threw = true;
		}
		PT_CHECK(threw, "operator new[](%zu, align 1M) did not throw std::bad_alloc", n);

		void *p = keep(::operator new(n, std::nothrow));
		PT_CHECK(p == nullptr, "operator new(%zu, nothrow) = %p, want nullptr", n, p);
		p = keep(::operator new[](n, std::nothrow));
		PT_CHECK(p == nullptr, "operator new[](%zu, nothrow) = %p, want nullptr", n, p);
		p = keep(::operator new(n, std::align_val_t{ 64 }, std::nothrow));
		PT_CHECK(p == nullptr, "operator new(%zu, align 64, nothrow) = %p, want nullptr", n, p);
		p = keep(::operator new[](n, std::align_val_t{ 4096 }, std::nothrow));
		PT_CHECK(p == nullptr, "operator new[](%zu, align 4096, nothrow) = %p, want nullptr", n, p);
	}

	// Throwing new: the new-handler is called until it gives up
	// ([new.delete.single]), then std::bad_alloc.
	handler_calls = 0;
	handler_limit = 3;
	std::set_new_handler(counting_handler);
	bool threw = false;
	try {
		void *p = keep(::operator new(pt_hide_size(SIZE_MAX / 2)));
		::operator delete(p);
	} catch (const std::bad_alloc &) {
		threw = true;
	}
	PT_CHECK(threw && handler_calls == 3, "operator new with a new-handler: threw %d, handler called %d times, want 3",
	         threw, handler_calls);
	handler_calls = 0;
	std::set_new_handler(counting_handler);
	threw = false;
	try {
		void *p = keep(::operator new(pt_hide_size(SIZE_MAX / 2), std::align_val_t{ 128 }));
		::operator delete(p, std::align_val_t{ 128 });
	} catch (const std::bad_alloc &) {
		threw = true;
	}
	PT_CHECK(threw && handler_calls == 3, "aligned operator new with a new-handler: threw %d, handler called %d times",
	         threw, handler_calls);

	// The nothrow forms behave as if they called the throwing form and
	// caught the exception ([new.delete.single]/6, since C++11), so the
	// new-handler runs for them too before nullptr comes back.
	handler_calls = 0;
	handler_limit = 2;
	std::set_new_handler(counting_handler);
	void *p = keep(::operator new(pt_hide_size(SIZE_MAX / 2), std::nothrow));
	PT_CHECK(p == nullptr && handler_calls == 2,
	         "operator new(huge, nothrow): %p, new-handler called %d times, want nullptr after 2 calls", p,
	         handler_calls);
	handler_calls = 0;
	std::set_new_handler(counting_handler);
	p = keep(::operator new[](pt_hide_size(SIZE_MAX / 2), std::align_val_t{ 64 }, std::nothrow));
	PT_CHECK(p == nullptr && handler_calls == 2,
	         "operator new[](huge, align 64, nothrow): %p, new-handler called %d times, want nullptr after 2 calls",
	         p, handler_calls);
	std::set_new_handler(nullptr);

	// After all that, exceptions (which allocate) and containers work.
	int caught = 0;
	for (int i = 0; i < 2000; i++) {
		try {
			throw std::string(std::size_t(i % 300), 'x');
		} catch (const std::string &s) {
			caught += s.size() == std::size_t(i % 300);
		}
	}
	PT_CHECK(caught == 2000, "exceptions: %d of 2000 caught intact", caught);
}

void test_containers()
{
	uint64_t r = 5;
	std::map<std::string, std::vector<int>> m;
	for (int i = 0; i < 20000; i++) {
		std::string k = "key" + std::to_string(pt_rand(&r) % 5000);
		auto &v = m[k];
		v.push_back(i);
		if (pt_rand(&r) % 7 == 0)
			m.erase(k);
	}
	std::size_t total = 0;
	for (auto &kv : m)
		for (int x : kv.second)
			total += (x >= 0);
	PT_CHECK(total > 0, "map of vectors");
	std::vector<std::unique_ptr<Line[]>> lines;
	for (int i = 0; i < 1000; i++) {
		lines.emplace_back(new Line[std::size_t(i % 9 + 1)]);
		PT_CHECK(aligned_to(lines.back().get(), 64), "new Line[] misaligned");
	}
	std::vector<std::shared_ptr<PageObj>> pages;
	for (int i = 0; i < 200; i++) {
		pages.push_back(std::make_shared<PageObj>());
		PT_CHECK(aligned_to(pages.back().get(), 4096), "make_shared<PageObj> misaligned");
	}
}

} // namespace

int main()
{
	pt_init("cxx_operators");
	pt_watchdog(120);
	test_interposition();
	forms<char>("char", 100000);
	forms<Plain>("Plain", 1000);
	forms<Line>("Line (alignas 64)", 1000);
	forms<PageObj>("PageObj (alignas 4096)", 100);
	forms<Huge>("Huge (alignas 1M)", 4);
	test_explicit_operators();
	test_failures();
	test_containers();
	return pt_finish();
}
