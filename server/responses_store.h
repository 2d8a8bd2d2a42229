/* responses_store.h — the Responses API's stored responses (middle layer):
 * a bounded, least-recently-used map from a response id to the response
 * object (GET /v1/responses/{id}) and the conversation it ended (the chat
 * messages a later request continues with previous_response_id). Entries
 * are kept as JSON text, so any thread may read them (a mutex guards the
 * map); the server owns the store (struct srv.responses). */
#ifndef ALICE_SERVER_RESPONSES_STORE_H
#define ALICE_SERVER_RESPONSES_STORE_H

#include <json-c/json.h>
#include <stdbool.h>

struct srv_responses_store;

/* cap: entries kept at most (the least recently used one goes first); 0:
 * nothing is kept. NULL when out of memory. */
struct srv_responses_store *srv_responses_store_new(int cap);
void srv_responses_store_free(struct srv_responses_store *st);
/* Keep (a copy of) response and history under id, replacing an older entry
 * of that id. false when nothing is kept (cap 0, out of memory). */
bool srv_responses_store_put(struct srv_responses_store *st, const char *id, struct json_object *response,
			     struct json_object *history);
/* The entry of id as new objects (either out pointer may be NULL); false when
 * unknown (or evicted). A hit counts as a use. */
bool srv_responses_store_get(struct srv_responses_store *st, const char *id, struct json_object **response,
			     struct json_object **history);

#endif
