/* sbuf.c — see sbuf.h. */
#include "alice/sbuf.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool alice_sb_reserve(struct alice_sbuf *b, size_t n)
{
	if (b->oom)
		return false;
	if (n > SIZE_MAX - b->n - 1) {
		b->oom = true;
		return false;
	}
	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->n + n + 1)
			cap = cap > SIZE_MAX / 2 ? b->n + n + 1 : cap * 2;
		char *p = realloc(b->p, cap);
		if (!p) {
			b->oom = true;
			return false;
		}
		b->p = p;
		b->cap = cap;
	}
	return true;
}

bool alice_grow(void **p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return true;
	size_t nc = *cap ? *cap : 8;
	while (nc < need) {
		if (nc > SIZE_MAX / 2)
			return false;
		nc *= 2;
	}
	if (elem && nc > SIZE_MAX / elem)
		return false;
	void *np = realloc(*p, nc * elem);
	if (!np)
		return false;
	*p = np;
	*cap = nc;
	return true;
}

bool alice_sb_add(struct alice_sbuf *b, const char *s)
{
	return alice_sb_addn(b, s, strlen(s));
}

bool alice_sb_addf(struct alice_sbuf *b, const char *fmt, ...)
{
	char tmp[256];
	va_list ap, ap2;
	va_start(ap, fmt);
	va_copy(ap2, ap);
	int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
	va_end(ap);
	bool ok;
	if (k <= 0) {
		ok = !b->oom;
	} else if ((size_t)k < sizeof tmp) {
		ok = alice_sb_addn(b, tmp, (size_t)k);
	} else { /* longer: format again into the buffer's own room */
		ok = alice_sb_reserve(b, (size_t)k);
		if (ok) {
			vsnprintf(b->p + b->n, (size_t)k + 1, fmt, ap2);
			b->n += (size_t)k;
		}
	}
	va_end(ap2);
	return ok;
}

char *alice_sb_take(struct alice_sbuf *b)
{
	if (b->oom) {
		free(b->p);
		b->p = NULL;
		return NULL;
	}
	if (!b->p)
		return strdup("");
	return b->p;
}
