/* auth.c — the API key check (see auth.h). */
#include "auth.h"

#include <string.h>
#include <strings.h>

/* Constant-time comparison so the key cannot be guessed byte by byte. */
static bool key_equal(const char *a, size_t na, const char *b, size_t nb)
{
	unsigned char d = na != nb;
	for (size_t i = 0; i < na; i++)
		d |= (unsigned char)(a[i] ^ b[i % (nb ? nb : 1)]);
	return d == 0 && nb > 0;
}

bool srv_auth_required(const struct srv *s, const struct srv_route *rt)
{
	const char *key = s->cfg.api_key;
	if (!key || !key[0] || !rt || !(rt->flags & SRV_ROUTE_AUTH))
		return false;
	return !((rt->flags & SRV_ROUTE_SCRAPE) && s->cfg.metrics_no_auth);
}

bool srv_auth_check(const struct srv *s, const char *auth, size_t len, const char *xkey, size_t xlen,
		    struct srv_api_error *e)
{
	const char *key = s->cfg.api_key;
	if (!auth && xkey) { /* Anthropic's header: the key itself */
		if (memchr(xkey, '\0', xlen) || !key_equal(xkey, xlen, key, strlen(key))) {
			srv_api_error_set(e, 401, "authentication_error", "invalid_api_key", NULL,
					  "incorrect API key provided");
			return false;
		}
		return true;
	}
	if (!auth) {
		srv_api_error_set(e, 401, "authentication_error", "invalid_api_key", NULL,
				  "missing API key: send the header 'Authorization: Bearer <key>' (or 'x-api-key: <key>')");
		return false;
	}
	if (memchr(auth, '\0', len) || len < 7 || strncasecmp(auth, "Bearer ", 7) != 0) {
		srv_api_error_set(e, 401, "authentication_error", "invalid_api_key", NULL,
				  "the Authorization header must be 'Bearer <key>'");
		return false;
	}
	const char *tok = auth + 7;
	size_t n = len - 7;
	while (n > 0 && *tok == ' ')
		tok++, n--;
	if (!key_equal(tok, n, key, strlen(key))) {
		srv_api_error_set(e, 401, "authentication_error", "invalid_api_key", NULL, "incorrect API key provided");
		return false;
	}
	return true;
}
