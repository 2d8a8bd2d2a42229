/* backend_log.h — a backend's two message paths, written once: log lines
 * through the host table the core handed to alice_backend_entry, and the
 * `<prefix>_fail` that puts a call's error into ctx->err and returns its
 * status. Header-only (a backend links nothing from the core); C11 and CUDA
 * C++.
 *
 *   static const struct alice_backend_host *g_host;   (set by the entry)
 *   ALICE_BACKEND_DEFINE_LOG(static, xx_log, g_host)
 *   ALICE_BACKEND_DEFINE_FAIL(, xx_fail)               (ctx->err: a char array)
 *
 * The log and fail functions keep their declarations (with the printf
 * format attribute) in the backend. */
#ifndef ALICE_BACKEND_LOG_H
#define ALICE_BACKEND_LOG_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "alice/backend.h"
#ifdef __cplusplus
}
#endif

/* The host table if the core speaks this ABI major, else NULL (no logging). */
static inline const struct alice_backend_host *alice_backend_host_accept(const struct alice_backend_host *host)
{
	return host && host->abi_major == ALICE_BACKEND_ABI_MAJOR ? host : NULL;
}

/* One log line (at most 511 bytes) through host->log; nothing without a host. */
static inline void alice_backend_vlog(const struct alice_backend_host *host, int level, const char *fmt, va_list ap)
{
	if (!host || !host->log)
		return;
	char msg[512];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	host->log(level, msg);
}

/* Defines `storage void name(int level, const char *fmt, ...)` logging
 * through the host table in variable host. */
#define ALICE_BACKEND_DEFINE_LOG(storage, name, host)                                                  \
	storage void name(int level, const char *fmt, ...)                                              \
	{                                                                                              \
		va_list ap_;                                                                           \
		va_start(ap_, fmt);                                                                    \
		alice_backend_vlog((host), level, fmt, ap_);                                           \
		va_end(ap_);                                                                           \
	}

/* Defines `storage enum alice_status name(struct alice_backend_ctx *ctx,
 * enum alice_status st, const char *fmt, ...)`: the message into ctx->err
 * (a char array), st returned. */
#define ALICE_BACKEND_DEFINE_FAIL(storage, name)                                                       \
	storage enum alice_status name(struct alice_backend_ctx *ctx, enum alice_status st, const char *fmt, ...) \
	{                                                                                              \
		va_list ap_;                                                                           \
		va_start(ap_, fmt);                                                                    \
		vsnprintf(ctx->err, sizeof(ctx->err), fmt, ap_);                                       \
		va_end(ap_);                                                                           \
		return st;                                                                             \
	}

#endif
