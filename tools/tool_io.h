/* tool_io.h — reading a whole file, for the command-line tools. Header-only
 * because every tools/alice-*.c is built as its own executable. */
#ifndef ALICE_TOOL_IO_H
#define ALICE_TOOL_IO_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* The bytes of the file at path, exactly as stored, plus a NUL after them
 * (*len, when not NULL, counts the bytes without it); the caller frees.
 * NULL with errno set if it cannot be opened, read (EIO) or held. */
static inline char *tool_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	size_t cap = 1 << 16, n = 0;
	char *p = malloc(cap);
	while (p) {
		n += fread(p + n, 1, cap - n - 1, f);
		if (n + 1 < cap)
			break; /* end of file, or an error (below) */
		char *q = realloc(p, cap * 2);
		if (!q) {
			free(p);
			p = NULL;
			break;
		}
		p = q;
		cap *= 2;
	}
	if (p && ferror(f)) {
		free(p);
		p = NULL;
		errno = EIO;
	}
	int e = errno;
	fclose(f);
	errno = e;
	if (p) {
		p[n] = 0;
		if (len)
			*len = n;
	}
	return p;
}

#endif
