/* files.c — see files.h. */
#include "support/files.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

char *alice_test_read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	cr_assert(f, "cannot open %s", path);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	cr_assert(n >= 0, "cannot size %s", path);
	char *p = malloc((size_t)n + 1);
	cr_assert(p);
	cr_assert_eq(fread(p, 1, (size_t)n, f), (size_t)n, "cannot read %s", path);
	p[n] = 0;
	fclose(f);
	if (len)
		*len = (size_t)n;
	return p;
}
