/* server.h — the alice-llm-server's shared state: flags (struct srv_config),
 * the server (struct srv), one HTTP request's bookkeeping (struct srv_http)
 * and a route's table entry (struct srv_route). Types only; the functions
 * live in three layers, each calling only the ones below it:
 *
 *   top     http.c      router, model loader, signals, shutdown (srv_run)
 *           conn.c      connections: cap, accept back-off, request deadline,
 *                       the early head check (key, framing) before a body
 *   middle  routes.c    the route table; one route_*.c / gen*.c per route
 *   bottom  reply.c     JSON/error replies, CORS, srv_request_done (log + count)
 *           auth.c      the API key check
 *           queue.c     messages into the event thread, the one drain loop
 *           metrics.c   request counters;  sse.c: SSE framing
 *           openai.c    the wire format (openai_tools.c: its tool fields);
 *                       limits.c: operator caps;
 *           api_error.c OpenAI-shaped errors
 *
 * Threads: the event thread owns every evhttp object and every struct
 * srv_gen. The loader and engine threads only post messages (queue.h). */
#ifndef ALICE_SERVER_SERVER_H
#define ALICE_SERVER_SERVER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>
#include <event2/http.h>

#include "alice/chat.h"
#include "alice/engine.h"
#include "alice/model.h"
#include "metrics.h"
#include "openai.h"
#include "queue.h"

struct srv_config {
	char *model_path;          /* resolved path of the GGUF */
	const char *backend;       /* "auto", "cpu", ... */
	const char *backend_dir;   /* NULL = default search */
	const char *host;
	int port;
	int n_ctx;                 /* per slot; 0 = model's choice */
	uint32_t kv_cells;         /* the paged KV cache's cells; 0 = n_parallel * n_ctx */
	int n_parallel;
	int n_threads;             /* 0 = backend default */
	int n_batch;
	const char *api_key;       /* NULL/empty = no auth */
	size_t max_body;
	int queue;
	const char *chat_template; /* NULL = detect */
	const char *chat_template_file; /* --chat-template-file: its path, NULL = none */
	char *chat_template_src;        /* that file's text (main.c owns it) */
	size_t chat_template_len;
	bool reasoning_none;       /* --reasoning-format none: <think> blocks stay in content */
	bool log_json;
	bool no_prefix_cache;      /* engine: never reuse a slot's KV */
	bool embeddings;           /* --embeddings: serve /v1/embeddings, refuse generation */
	int pooling;               /* --pooling (enum alice_pooling); -1 = the GGUF's */
	const char *cors_origin;   /* NULL = no CORS headers */
	int timeout_s;             /* evhttp read/write timeout: client inactivity */
	int max_connections;       /* open connections at most; the listener pauses beyond */
	int request_deadline_s;    /* a request's head and body must arrive within this */
	bool metrics_no_auth;      /* /metrics without the API key */
	bool no_webui;             /* --no-webui: no chat page at / */
	int responses_store;       /* --responses-store: responses kept for previous_response_id */
	/* speculative decoding (--spec, --model-draft, --draft-*): engine
	 * params; .draft is set by the loader from draft_path */
	struct alice_spec_params spec;
	const char *draft_path;    /* --model-draft, NULL = none */
	const char *backend_draft; /* --backend-draft, NULL = the model's backend */
	struct srv_limits limits;  /* request caps (openai.h) */
};

enum srv_state {
	SRV_LOADING = 0,
	SRV_READY,
	SRV_FAILED,
	SRV_STOPPING,
};

struct srv;
struct srv_http;
struct srv_gen;

/* A route: one entry in routes.c's table. */
enum {
	SRV_ROUTE_PREFIX = 1 << 0,  /* path is a prefix of one more segment (/v1/models/{id}) */
	SRV_ROUTE_AUTH = 1 << 1,    /* needs the API key (when --api-key is set) */
	SRV_ROUTE_ANYTIME = 1 << 2, /* answered while loading / stopping too */
	SRV_ROUTE_SCRAPE = 1 << 3,  /* /metrics: open under --metrics-no-auth */
	SRV_ROUTE_ANTHROPIC = 1 << 4, /* every error it answers (router's included) in Anthropic's shape */
	SRV_ROUTE_GENERATE = 1 << 5, /* generates text: refused (400) by an embeddings server */
};
struct srv_route {
	const char *path;
	const char *label; /* constant metrics label */
	enum evhttp_cmd_type method;
	const char *allow; /* the Allow header */
	unsigned flags;
	/* Answers the request (every path ends in exactly one srv_request_done). */
	void (*handle)(struct srv *s, struct srv_http *h, const char *body, size_t len);
};

/* One HTTP request's bookkeeping for its log line and counters. */
struct srv_http {
	struct srv *srv;
	struct evhttp_request *req;
	const struct srv_route *route; /* NULL when no route matched */
	uint64_t id;
	const char *method;
	char path[96];
	double t_start;
	int status;
	struct srv_request_counts counts;
};

struct srv {
	struct srv_config cfg;
	struct event_base *base;
	struct evhttp *http;
	struct evhttp_bound_socket *listener;
	struct srv_conns *conns; /* connection tracking (conn.c) */
	struct event *ev_sigint, *ev_sigterm, *ev_notify, *ev_shutdown;
	struct srv_msgq q;

	pthread_t loader;
	bool loader_started;
	int loader_done; /* atomic: the loader posted its result */
	enum srv_state state; /* event thread only */
	double shutdown_started;

	struct alice_model *model;
	struct alice_model *draft; /* --model-draft, NULL = none */
	struct alice_engine *engine;
	struct alice_grammar_vocab *grammar_vocab; /* NULL if it could not be built */
	struct alice_chat_template *chat_tmpl; /* chosen at load (chat_tmpl.c) */
	enum alice_chat_format chat_format;   /* its family: end-of-turn stop strings */
	char model_id[128];
	int64_t created;

	uint64_t next_http_id;
	struct srv_gen *gens; /* live generation requests (gen.c) */
	int n_gens;
	struct srv_metrics metrics;
	int exit_code;
	struct srv_responses_store *responses; /* /v1/responses: stored responses (responses_store.h) */
};

/* ---- entry (http.c) ---- */
int srv_run(const struct srv_config *cfg);

#endif
