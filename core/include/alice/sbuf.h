/* sbuf.h — the one growable, always NUL-terminated byte buffer of the
 * project (core, server and tools use it; no file keeps its own).
 *
 * Out of memory is sticky: the first failed append sets `oom`, frees nothing
 * and makes every later append a no-op, so a builder can append freely and
 * check once at the end (alice_sb_take returns NULL). A zeroed struct is an
 * empty buffer; the caller owns `p` (free it, or take it). */
#ifndef ALICE_SBUF_H
#define ALICE_SBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

struct alice_sbuf {
	char *p; /* NULL until the first append */
	size_t n, cap;
	bool oom;
};

/* Room for n more bytes and the NUL (the slow path of alice_sb_addn). */
bool alice_sb_reserve(struct alice_sbuf *b, size_t n);

/* Append n bytes; false once the buffer is out of memory. Inline: the
 * detokenizer appends every piece through it. */
static inline bool alice_sb_addn(struct alice_sbuf *b, const void *s, size_t n)
{
	if (b->oom || (n >= b->cap - b->n && !alice_sb_reserve(b, n)))
		return false;
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = 0;
	return true;
}

bool alice_sb_add(struct alice_sbuf *b, const char *s);
/* printf-style append. */
__attribute__((format(printf, 2, 3))) bool alice_sb_addf(struct alice_sbuf *b, const char *fmt, ...);
/* Room for `need` elements of `elem` bytes in the array *p holding *cap
 * (grows by doubling, from 8). False when out of memory or the size would
 * overflow; *p and *cap are then unchanged. For the core's growable arrays. */
bool alice_grow(void **p, size_t *cap, size_t need, size_t elem);

/* The string (the caller frees; "" if nothing was appended), or NULL after
 * out of memory (the buffer is freed then). */
char *alice_sb_take(struct alice_sbuf *b);

#endif
