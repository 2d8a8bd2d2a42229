/* responses_store.c — the stored responses (see responses_store.h): a list
 * in use order, most recent first; a lookup walks it (the cap is a few
 * hundred entries by default, a walk is microseconds next to a generation). */
#include "responses_store.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct entry {
	struct entry *prev, *next;
	char *id;
	char *response; /* JSON text */
	char *history;  /* JSON text */
};

struct srv_responses_store {
	pthread_mutex_t mu;
	struct entry *head, *tail;
	int n, cap;
};

struct srv_responses_store *srv_responses_store_new(int cap)
{
	struct srv_responses_store *st = calloc(1, sizeof(*st));
	if (!st)
		return NULL;
	pthread_mutex_init(&st->mu, NULL);
	st->cap = cap < 0 ? 0 : cap;
	return st;
}

static void entry_free(struct entry *e)
{
	free(e->id);
	free(e->response);
	free(e->history);
	free(e);
}

static void unlink_entry(struct srv_responses_store *st, struct entry *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		st->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		st->tail = e->prev;
	e->prev = e->next = NULL;
	st->n--;
}

static void push_front(struct srv_responses_store *st, struct entry *e)
{
	e->prev = NULL;
	e->next = st->head;
	if (st->head)
		st->head->prev = e;
	st->head = e;
	if (!st->tail)
		st->tail = e;
	st->n++;
}

static struct entry *find(struct srv_responses_store *st, const char *id)
{
	for (struct entry *e = st->head; e; e = e->next)
		if (strcmp(e->id, id) == 0)
			return e;
	return NULL;
}

void srv_responses_store_free(struct srv_responses_store *st)
{
	if (!st)
		return;
	while (st->head) {
		struct entry *e = st->head;
		unlink_entry(st, e);
		entry_free(e);
	}
	pthread_mutex_destroy(&st->mu);
	free(st);
}

static char *json_dup(struct json_object *o)
{
	const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
	return s ? strdup(s) : NULL;
}

bool srv_responses_store_put(struct srv_responses_store *st, const char *id, struct json_object *response,
			     struct json_object *history)
{
	if (!st || st->cap == 0)
		return false;
	struct entry *e = calloc(1, sizeof(*e));
	if (!e || !(e->id = strdup(id)) || !(e->response = json_dup(response)) || !(e->history = json_dup(history))) {
		if (e)
			entry_free(e);
		return false;
	}
	pthread_mutex_lock(&st->mu);
	struct entry *old = find(st, id);
	if (old) {
		unlink_entry(st, old);
		entry_free(old);
	}
	push_front(st, e);
	while (st->n > st->cap) {
		struct entry *last = st->tail;
		unlink_entry(st, last);
		entry_free(last);
	}
	pthread_mutex_unlock(&st->mu);
	return true;
}

/* Stored text came from a request parsed at depth 64, nested a few levels
 * deeper here. */
static struct json_object *parse_stored(const char *text)
{
	struct json_tokener *tok = json_tokener_new_ex(128);
	if (!tok)
		return NULL;
	struct json_object *o = json_tokener_parse_ex(tok, text, (int)strlen(text));
	json_tokener_free(tok);
	return o;
}

bool srv_responses_store_get(struct srv_responses_store *st, const char *id, struct json_object **response,
			     struct json_object **history)
{
	if (response)
		*response = NULL;
	if (history)
		*history = NULL;
	if (!st)
		return false;
	pthread_mutex_lock(&st->mu);
	struct entry *e = find(st, id);
	if (e) {
		unlink_entry(st, e);
		push_front(st, e);
		if (response)
			*response = parse_stored(e->response);
		if (history)
			*history = parse_stored(e->history);
	}
	pthread_mutex_unlock(&st->mu);
	return e != NULL;
}
