/* status.c — status names and error-message helpers (see status.h). */
#include "alice/status.h"

#include <stdio.h>

const char *alice_status_str(enum alice_status st)
{
	switch (st) {
	case ALICE_OK: return "ok";
	case ALICE_ERR_NOMEM: return "out of memory";
	case ALICE_ERR_INVALID: return "invalid input";
	case ALICE_ERR_IO: return "i/o error";
	case ALICE_ERR_UNSUPPORTED: return "unsupported";
	case ALICE_ERR_BACKEND: return "backend error";
	case ALICE_ERR_CANCELLED: return "cancelled";
	case ALICE_ERR_NOT_FOUND: return "not found";
	case ALICE_ERR_TYPE: return "wrong type";
	case ALICE_ERR_RANGE: return "out of range";
	}
	return "unknown status";
}

void alice_error_vset(struct alice_error *err, const char *fmt, va_list ap)
{
	if (!err)
		return;
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
}

void alice_error_set(struct alice_error *err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	alice_error_vset(err, fmt, ap);
	va_end(ap);
}

enum alice_status alice_fail(struct alice_error *err, enum alice_status st, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	alice_error_vset(err, fmt, ap);
	va_end(ap);
	return st;
}
