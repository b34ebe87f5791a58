/* 1024 call sites of malloc in one program, each a distinct return
 * address: with MBUDDY_PROFILE set, every site gets a profile key, which
 * must not cost a system call per site (profile-load.test counts them). */
#include <stdio.h>
#include <stdlib.h>

static volatile size_t n = 24;
static unsigned long sum;

#define SITE do { char *p = malloc(n); if (!p) return 1; p[0] = 1; sum += (unsigned long)p[0]; free(p); } while (0);
#define SITE4 SITE SITE SITE SITE
#define SITE16 SITE4 SITE4 SITE4 SITE4
#define SITE64 SITE16 SITE16 SITE16 SITE16
#define SITE256 SITE64 SITE64 SITE64 SITE64
#define SITE1024 SITE256 SITE256 SITE256 SITE256

int main(void)
{
	SITE1024
	printf("%lu allocations from distinct call sites\n", sum);
	return sum == 1024 ? 0 : 1;
}
