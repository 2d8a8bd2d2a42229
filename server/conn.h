/* conn.h — connection tracking (top layer, beside http.c; see conn.c):
 * the --max-connections cap, accept() back-off, the --request-deadline for
 * receiving a request, and the early head check (key, Content-Length, NUL)
 * that answers before a body is read. Event thread only. */
#ifndef ALICE_SERVER_CONN_H
#define ALICE_SERVER_CONN_H

#include <stdbool.h>

#include "server.h"

/* After evhttp_new, before binding: 0, or -1 (out of memory). */
int srv_conn_setup(struct srv *s);
/* After binding s->listener: pause on accept errors instead of spinning. */
void srv_conn_listening(struct srv *s);
/* The router got req: its connection is busy (no deadline) until the
 * reply completes. false: the early check answered it already; drop it. */
bool srv_conn_dispatched(struct srv *s, struct evhttp_request *req);
/* After evhttp_free: release what is left. */
void srv_conn_teardown(struct srv *s);

#endif
