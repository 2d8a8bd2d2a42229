/* auth.h — the API key check (bottom layer), shared by the router (http.c)
 * and the early head check (conn.c), which runs before a body is read. */
#ifndef ALICE_SERVER_AUTH_H
#define ALICE_SERVER_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#include "server.h"

/* Whether route rt needs the key under this configuration (--api-key set,
 * the route is not /health, and not /metrics under --metrics-no-auth). */
bool srv_auth_required(const struct srv *s, const struct srv_route *rt);
/* Whether the Authorization value auth (len bytes, NULL = absent) carries
 * the configured key, or, without an Authorization header, the x-api-key
 * value xkey (Anthropic's clients; NULL = absent) is the key; else e is the
 * 401. Constant time in the key. */
bool srv_auth_check(const struct srv *s, const char *auth, size_t len, const char *xkey, size_t xlen,
		    struct srv_api_error *e);

#endif
