/* files.h — whole-file reads for tests. Call from a Criterion test. */
#ifndef ALICE_TEST_FILES_H
#define ALICE_TEST_FILES_H

#include <stddef.h>

/* The bytes of the file at path plus a NUL after them (*len, when not NULL,
 * counts the bytes); the caller frees. Asserts, naming the path, that the
 * file can be read. */
char *alice_test_read_file(const char *path, size_t *len);

#endif
