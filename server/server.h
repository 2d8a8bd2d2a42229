/* server.h — the alice-llm-server's internal pieces, shared by main.c (flags),
 * http.c (event loop, routes, errors, logging) and gen.c (the completion
 * routes that talk to the engine).
 *
 * Threads: the event thread owns every evhttp object and every struct
 * srv_gen. The model loader thread and the engine thread only post messages
 * (srv_post) that the event thread picks up through a pipe. */
#ifndef ALICE_SERVER_SERVER_H
#define ALICE_SERVER_SERVER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>
#include <event2/http.h>
#include <json-c/json.h>

#include "alice/chat.h"
#include "alice/engine.h"
#include "alice/model.h"
#include "openai.h"

struct srv_config {
	char *model_path;          /* resolved path of the GGUF */
	const char *backend;       /* "auto", "cpu", ... */
	const char *backend_dir;   /* NULL = default search */
	const char *host;
	int port;
	int n_ctx;                 /* per slot; 0 = model's choice */
	int n_parallel;
	int n_threads;             /* 0 = backend default */
	int n_batch;
	const char *api_key;       /* NULL/empty = no auth */
	size_t max_body;
	int queue;
	const char *chat_template; /* NULL = detect */
	bool log_json;
	bool no_prefix_cache;      /* engine: never reuse a slot's KV */
	const char *cors_origin;   /* NULL = no CORS headers */
	int timeout_s;             /* evhttp read/write timeout */
	struct srv_limits limits;  /* request caps (openai.h) */
};

enum srv_state {
	SRV_LOADING = 0,
	SRV_READY,
	SRV_FAILED,
	SRV_STOPPING,
};

/* One HTTP request's bookkeeping for its log line. */
struct srv_http {
	struct srv *srv;
	struct evhttp_request *req;
	uint64_t id;
	const char *method;
	char path[96];
	double t_start;
	int status;
	int64_t prompt_tokens, completion_tokens;
	int64_t cached_tokens; /* prompt tokens served by the prefix cache */
	double prefill_ms, decode_ms;
};

struct srv_msg;
struct srv_gen;

struct srv {
	struct srv_config cfg;
	struct event_base *base;
	struct evhttp *http;
	struct evhttp_bound_socket *listener;
	struct event *ev_sigint, *ev_sigterm, *ev_notify, *ev_shutdown;
	int notify_rd, notify_wr;

	pthread_mutex_t mu; /* guards msgs */
	struct srv_msg *msg_head, *msg_tail;

	pthread_t loader;
	bool loader_started;
	int loader_done; /* atomic: the loader posted its result */
	enum srv_state state; /* event thread only */
	double shutdown_started;

	struct alice_model *model;
	struct alice_engine *engine;
	struct alice_grammar_vocab *grammar_vocab; /* NULL if it could not be built */
	enum alice_chat_format chat_format;
	char model_id[128];
	int64_t created;

	uint64_t next_http_id;
	struct srv_gen *gens; /* live generation requests */
	int exit_code;
};

/* ---- messages into the event thread (any thread) ---- */
enum srv_msg_kind {
	SRV_MSG_LOADED = 0,
	SRV_MSG_LOAD_FAILED,
	SRV_MSG_ENGINE,
};

struct srv_msg {
	struct srv_msg *next;
	enum srv_msg_kind kind;
	char *error;           /* LOAD_FAILED */
	struct srv_gen *gen;   /* ENGINE */
	int choice;
	struct alice_engine_event ev; /* deep copy; see srv_msg_free */
};

void srv_post(struct srv *s, struct srv_msg *m);
void srv_msg_free(struct srv_msg *m);

/* ---- replies (event thread) ---- */
double srv_now_ms(void);
void srv_reply_json(struct srv_http *h, int status, struct json_object *obj); /* takes obj */
void srv_reply_error(struct srv_http *h, const struct srv_api_error *e);
/* Write the request's log line (called once, when the reply is complete). */
void srv_log_request(struct srv_http *h);
/* Access-Control-Allow-Origin when --cors-origin is set (http.c). */
void srv_add_cors_headers(struct srv *s, struct evhttp_request *req);

/* ---- metrics (metrics.c, event thread) ---- */
/* Count a finished request (called from srv_log_request). */
void srv_metrics_observe(const struct srv_http *h);
/* GET /metrics: Prometheus text format. */
void srv_metrics_route(struct srv *s, struct srv_http *h);

/* ---- generation routes (gen.c) ---- */
void srv_gen_handle(struct srv *s, struct srv_http *h, enum srv_kind kind, const char *body, size_t len);
void srv_gen_on_message(struct srv *s, struct srv_msg *m);
struct alice_grammar_vocab;
struct alice_tokenizer;
enum alice_status srv_grammar_vocab_build(const struct alice_tokenizer *tok, struct alice_grammar_vocab **out,
					  struct alice_error *err);
/* Cancel every live generation (shutdown). */
void srv_gen_cancel_all(struct srv *s);
int srv_gen_count(const struct srv *s);

/* ---- entry (http.c) ---- */
int srv_run(const struct srv_config *cfg);

#endif
