/* 2,048 distinct call sites of malloc for the generated workload (gen.c).
 *
 * A call-site classifier keys on the return address of malloc, so every
 * site must be a function of its own with its own call instruction: one
 * function called in a loop would be one site. Each site_NNNN is
 * CALL_SITE (never inlined, cloned or folded into another) and does
 * something after the call, so that the call is not turned into a tail
 * jump, which would make the return address the caller's, the same for
 * every site. The constant in the asm statement makes every body different
 * as well.
 *
 * A site either calls malloc itself or goes through one shared wrapper
 * (like xmalloc or operator new): then every wrapped site has the same
 * return address and only the frame above it, the site function's, tells
 * them apart, as it does for a classifier that unwinds.
 *
 * Names are four octal digits, site_0000 to site_3777, so that the
 * constants are valid octal literals and all distinct. */
#ifndef GEN_SITES_H
#define GEN_SITES_H

#include "common.h"

#define GEN_NSITES 2048

CALL_SITE void *gen_wrapper(size_t n);
void *gen_wrapper(size_t n)
{
	void *p = malloc(n);
	__asm__ volatile("" : "+r"(p));
	return p;
}

#define GEN_SITE_FN(d)                                                  \
	CALL_SITE void *site_##d(size_t n, int wrapped);                \
	void *site_##d(size_t n, int wrapped)                           \
	{                                                               \
		void *p = wrapped ? gen_wrapper(n) : malloc(n);         \
		__asm__ volatile("" : "+r"(p) : "i"(0##d));             \
		return p;                                               \
	}
#define GEN_SITE_PTR(d) site_##d,

#define GEN_D8(X, p) X(p##0) X(p##1) X(p##2) X(p##3) X(p##4) X(p##5) X(p##6) X(p##7)
#define GEN_D64(X, p) GEN_D8(X, p##0) GEN_D8(X, p##1) GEN_D8(X, p##2) GEN_D8(X, p##3) \
	GEN_D8(X, p##4) GEN_D8(X, p##5) GEN_D8(X, p##6) GEN_D8(X, p##7)
#define GEN_D512(X, p) GEN_D64(X, p##0) GEN_D64(X, p##1) GEN_D64(X, p##2) GEN_D64(X, p##3) \
	GEN_D64(X, p##4) GEN_D64(X, p##5) GEN_D64(X, p##6) GEN_D64(X, p##7)
#define GEN_ALL(X) GEN_D512(X, 0) GEN_D512(X, 1) GEN_D512(X, 2) GEN_D512(X, 3)

GEN_ALL(GEN_SITE_FN)

typedef void *(*gen_site_fn)(size_t n, int wrapped);
static gen_site_fn const gen_site_fns[GEN_NSITES] = { GEN_ALL(GEN_SITE_PTR) };

#endif
