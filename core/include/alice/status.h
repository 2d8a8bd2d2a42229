/* status.h — the result type of every fallible alice function, and the
 * caller-owned error message that goes with it.
 *
 * Convention: a function that can fail returns enum alice_status and, when it
 * is given a non-NULL struct alice_error, writes a human-readable message there
 * (naming the file / field / position involved). The caller owns the struct. */
#ifndef ALICE_STATUS_H
#define ALICE_STATUS_H

#include <stdarg.h>
#include <stddef.h>

enum alice_status {
	ALICE_OK = 0,
	ALICE_ERR_NOMEM = -1,       /* allocation failed */
	ALICE_ERR_INVALID = -2,     /* bad input: corrupt file, bad request, bad grammar */
	ALICE_ERR_IO = -3,          /* open/read/mmap failed */
	ALICE_ERR_UNSUPPORTED = -4, /* valid but not supported (arch, type, op) */
	ALICE_ERR_BACKEND = -5,     /* a backend (GPU) failed */
	ALICE_ERR_CANCELLED = -6,   /* the work was cancelled */
	ALICE_ERR_NOT_FOUND = -7,   /* a looked-up key/tensor/file does not exist */
	ALICE_ERR_TYPE = -8,        /* a key exists but has another type */
	ALICE_ERR_RANGE = -9,       /* a value is out of range (context full, ...) */
};

#define ALICE_ERROR_MSG_MAX 512

struct alice_error {
	char msg[ALICE_ERROR_MSG_MAX];
};

/* A short constant name for a status ("invalid input", ...). */
const char *alice_status_str(enum alice_status st);

/* printf into err->msg (truncating); no-op when err is NULL. */
void alice_error_set(struct alice_error *err, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void alice_error_vset(struct alice_error *err, const char *fmt, va_list ap);

/* Set the message and return st, for `return alice_fail(err, ALICE_ERR_X, ...)`. */
enum alice_status alice_fail(struct alice_error *err, enum alice_status st,
			     const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
