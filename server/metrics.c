/* metrics.c — GET /metrics in the Prometheus text format (0.0.4): requests
 * by route and status, prompt/generated/cached token counters, prefill and
 * decode speed over the last requests, queue depth, busy slots and KV cache
 * use. The request counters live here (event thread only); the rest is read
 * from the engine's stats at scrape time. */
#include "server.h"

#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>

#define MAX_SERIES 256 /* (route, status) pairs; bounded: routes are a fixed set */
#define RECENT 32      /* requests in the speed gauges */

static const char *const route_labels[] = {
	"/health", "/v1/models", "/v1/models/{id}", "/v1/chat/completions", "/v1/completions",
	"/tokenize", "/detokenize", "/metrics", "other",
};
#define N_ROUTES (sizeof(route_labels) / sizeof(route_labels[0]))

static struct {
	struct {
		unsigned route;
		int status;
		uint64_t count;
	} series[MAX_SERIES];
	size_t n_series;
	uint64_t dropped; /* observations beyond MAX_SERIES (cannot happen with real statuses) */
	struct {
		int64_t prompt, completion;
		double prefill_ms, decode_ms;
	} recent[RECENT];
	size_t n_recent, next_recent;
} M;

/* Fixed labels only: a client-chosen path must not create new series. */
static unsigned route_of(const char *path)
{
	for (unsigned i = 0; i < N_ROUTES - 1; i++)
		if (i != 2 && strcmp(path, route_labels[i]) == 0)
			return i;
	if (strncmp(path, "/v1/models/", 11) == 0 && path[11] && !strchr(path + 11, '/'))
		return 2;
	return N_ROUTES - 1;
}

void srv_metrics_observe(const struct srv_http *h)
{
	unsigned r = route_of(h->path);
	size_t i;
	for (i = 0; i < M.n_series; i++)
		if (M.series[i].route == r && M.series[i].status == h->status)
			break;
	if (i == M.n_series) {
		if (M.n_series == MAX_SERIES) {
			M.dropped++;
			return;
		}
		M.series[i].route = r;
		M.series[i].status = h->status;
		M.series[i].count = 0;
		M.n_series++;
	}
	M.series[i].count++;
	if (h->completion_tokens > 0 || h->prefill_ms > 0) {
		/* tokens actually prefilled: the cached ones cost nothing */
		M.recent[M.next_recent].prompt = h->prompt_tokens - h->cached_tokens;
		M.recent[M.next_recent].completion = h->completion_tokens;
		M.recent[M.next_recent].prefill_ms = h->prefill_ms;
		M.recent[M.next_recent].decode_ms = h->decode_ms;
		M.next_recent = (M.next_recent + 1) % RECENT;
		if (M.n_recent < RECENT)
			M.n_recent++;
	}
}

static void metric_head(struct evbuffer *b, const char *name, const char *type, const char *help)
{
	evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void srv_metrics_route(struct srv *s, struct srv_http *h)
{
	struct evbuffer *b = evbuffer_new();
	if (!b) {
		struct srv_api_error e;
		srv_api_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
		srv_reply_error(h, &e);
		return;
	}
	struct alice_engine_stats st;
	alice_engine_stats(s->engine, &st); /* zeros while loading */

	metric_head(b, "alice_requests_total", "counter", "HTTP requests answered, by route and status.");
	for (size_t i = 0; i < M.n_series; i++)
		evbuffer_add_printf(b, "alice_requests_total{route=\"%s\",status=\"%d\"} %llu\n",
				    route_labels[M.series[i].route], M.series[i].status,
				    (unsigned long long)M.series[i].count);

	metric_head(b, "alice_prompt_tokens_total", "counter", "Prompt tokens of requests started by the engine.");
	evbuffer_add_printf(b, "alice_prompt_tokens_total %llu\n", (unsigned long long)st.prompt_tokens);
	metric_head(b, "alice_prompt_tokens_cached_total", "counter",
		    "Prompt tokens whose KV was reused from the prefix cache.");
	evbuffer_add_printf(b, "alice_prompt_tokens_cached_total %llu\n",
			    (unsigned long long)st.prompt_tokens_cached);
	metric_head(b, "alice_generated_tokens_total", "counter", "Tokens sampled by finished requests.");
	evbuffer_add_printf(b, "alice_generated_tokens_total %llu\n", (unsigned long long)st.tokens_generated);
	metric_head(b, "alice_engine_requests_total", "counter", "Requests the engine finished (per choice).");
	evbuffer_add_printf(b, "alice_engine_requests_total %llu\n", (unsigned long long)st.requests_done);
	metric_head(b, "alice_engine_steps_total", "counter", "Batched decode steps.");
	evbuffer_add_printf(b, "alice_engine_steps_total %llu\n", (unsigned long long)st.steps);

	int64_t pt = 0, ct = 0;
	double pms = 0, dms = 0;
	for (size_t i = 0; i < M.n_recent; i++) {
		pt += M.recent[i].prompt;
		pms += M.recent[i].prefill_ms;
		if (M.recent[i].completion > 1) { /* the first token is part of the prefill time */
			ct += M.recent[i].completion - 1;
			dms += M.recent[i].decode_ms;
		}
	}
	metric_head(b, "alice_prefill_tokens_per_second", "gauge",
		    "Prompt tokens prefilled (not cached) per second over the last 32 requests.");
	evbuffer_add_printf(b, "alice_prefill_tokens_per_second %.3f\n", pms > 0 ? (double)pt * 1000.0 / pms : 0.0);
	metric_head(b, "alice_decode_tokens_per_second", "gauge",
		    "Generated tokens per second after the first token, over the last 32 requests.");
	evbuffer_add_printf(b, "alice_decode_tokens_per_second %.3f\n", dms > 0 ? (double)ct * 1000.0 / dms : 0.0);

	metric_head(b, "alice_queue_depth", "gauge", "Requests waiting for a slot.");
	evbuffer_add_printf(b, "alice_queue_depth %u\n", st.queued);
	metric_head(b, "alice_slots_busy", "gauge", "Slots decoding a request.");
	evbuffer_add_printf(b, "alice_slots_busy %u\n", st.slots_busy);
	metric_head(b, "alice_slots_total", "gauge", "Slots (parallel sequences).");
	evbuffer_add_printf(b, "alice_slots_total %u\n", st.n_slots);
	metric_head(b, "alice_kv_cache_cells_used", "gauge",
		    "KV cache positions in use, prefix-cached idle slots included.");
	evbuffer_add_printf(b, "alice_kv_cache_cells_used %llu\n", (unsigned long long)st.kv_cells_used);
	metric_head(b, "alice_kv_cache_cells_total", "gauge", "KV cache positions (slots x context).");
	evbuffer_add_printf(b, "alice_kv_cache_cells_total %llu\n", (unsigned long long)st.kv_cells_total);
	metric_head(b, "alice_kv_cache_usage_ratio", "gauge", "Used / total KV cache positions.");
	evbuffer_add_printf(b, "alice_kv_cache_usage_ratio %.6f\n",
			    st.kv_cells_total ? (double)st.kv_cells_used / (double)st.kv_cells_total : 0.0);
	metric_head(b, "alice_requests_in_flight", "gauge", "Completion requests being answered.");
	evbuffer_add_printf(b, "alice_requests_in_flight %d\n", srv_gen_count(s));
	metric_head(b, "alice_model_loaded", "gauge", "1 once the model is loaded and the server is ready.");
	evbuffer_add_printf(b, "alice_model_loaded %d\n", s->state == SRV_READY ? 1 : 0);

	struct evkeyvalq *hd = evhttp_request_get_output_headers(h->req);
	srv_add_cors_headers(s, h->req);
	evhttp_add_header(hd, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
	evhttp_send_reply(h->req, 200, "OK", b);
	evbuffer_free(b);
	h->status = 200;
	srv_log_request(h);
}
