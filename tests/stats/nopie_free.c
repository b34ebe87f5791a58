/* Built as an executable that is not position-independent (-fno-pie
 * -no-pie), whose code takes the addresses of malloc and free (an absolute
 * 32-bit relocation in the text, which the dynamic linker cannot patch):
 * the link gives both canonical PLT entries, exported as undefined symbols
 * whose value is the entry, so dlsym(RTLD_DEFAULT, "free") answers the
 * executable's stub rather than a definition. Calls through the stub and
 * through the pointers still reach the preloaded libmbuddy, which must
 * say so in its report (not-served.test) and count the objects. */
#include <stdio.h>
#include <stdlib.h>

static void *(*volatile alloc_fn)(size_t);
static void (*volatile free_fn)(void *);

int main(void)
{
	unsigned long sum = 0;
	alloc_fn = malloc;
	free_fn = free;
	for (int i = 0; i < 3000; i++) {
		char *p = alloc_fn(100 + (size_t)(i % 50));
		if (!p)
			return 1;
		snprintf(p, 100, "object %d", i);
		sum += (unsigned char)p[7];
		free_fn(p);
	}
	for (int i = 0; i < 1000; i++)
		free(malloc(64)); /* through the PLT entries themselves */
	printf("%d objects through pointers to malloc and free, checksum %lu\n", 3000, sum);
	return 0;
}
