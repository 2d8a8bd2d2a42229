/* route_metrics.c — GET /metrics in the Prometheus text format (0.0.4):
 * requests by route and status (metrics.c's counters), prompt/generated/
 * cached token counters, prefill and decode speed over the last requests,
 * queue depth, busy slots and KV cache use (the engine's stats, read at
 * scrape time). */
#include <stdio.h>

#include <event2/buffer.h>

#include "reply.h"
#include "routes.h"

static void metric(struct evbuffer *b, const char *name, const char *type, const char *help)
{
	evbuffer_add_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void engine_metrics(struct evbuffer *b, const struct alice_engine_stats *st)
{
	metric(b, "alice_prompt_tokens_total", "counter", "Prompt tokens of requests started by the engine.");
	evbuffer_add_printf(b, "alice_prompt_tokens_total %llu\n", (unsigned long long)st->prompt_tokens);
	metric(b, "alice_prompt_tokens_cached_total", "counter",
	       "Prompt tokens whose KV was reused from the prefix cache.");
	evbuffer_add_printf(b, "alice_prompt_tokens_cached_total %llu\n",
			    (unsigned long long)st->prompt_tokens_cached);
	metric(b, "alice_generated_tokens_total", "counter", "Tokens sampled by finished requests.");
	evbuffer_add_printf(b, "alice_generated_tokens_total %llu\n", (unsigned long long)st->tokens_generated);
	metric(b, "alice_engine_requests_total", "counter", "Requests the engine finished (per choice).");
	evbuffer_add_printf(b, "alice_engine_requests_total %llu\n", (unsigned long long)st->requests_done);
	metric(b, "alice_engine_steps_total", "counter", "Batched decode steps.");
	evbuffer_add_printf(b, "alice_engine_steps_total %llu\n", (unsigned long long)st->steps);
}

static void speed_metrics(struct evbuffer *b, const struct srv_metrics *m)
{
	struct srv_metrics_speed sp;
	srv_metrics_speed(m, &sp);
	metric(b, "alice_prefill_tokens_per_second", "gauge",
	       "Prompt tokens prefilled (not cached) per second over the last 32 requests.");
	evbuffer_add_printf(b, "alice_prefill_tokens_per_second %.3f\n",
			    sp.prefill_ms > 0 ? (double)sp.prefill_tokens * 1000.0 / sp.prefill_ms : 0.0);
	metric(b, "alice_decode_tokens_per_second", "gauge",
	       "Generated tokens per second after the first token, over the last 32 requests.");
	evbuffer_add_printf(b, "alice_decode_tokens_per_second %.3f\n",
			    sp.decode_ms > 0 ? (double)sp.decode_tokens * 1000.0 / sp.decode_ms : 0.0);
}

static void load_metrics(struct evbuffer *b, const struct srv *s, const struct alice_engine_stats *st)
{
	metric(b, "alice_queue_depth", "gauge", "Requests waiting for a slot.");
	evbuffer_add_printf(b, "alice_queue_depth %u\n", st->queued);
	metric(b, "alice_slots_busy", "gauge", "Slots decoding a request.");
	evbuffer_add_printf(b, "alice_slots_busy %u\n", st->slots_busy);
	metric(b, "alice_slots_total", "gauge", "Slots (parallel sequences).");
	evbuffer_add_printf(b, "alice_slots_total %u\n", st->n_slots);
	metric(b, "alice_kv_cache_cells_used", "gauge", "KV cache positions in use, prefix-cached idle slots included.");
	evbuffer_add_printf(b, "alice_kv_cache_cells_used %llu\n", (unsigned long long)st->kv_cells_used);
	metric(b, "alice_kv_cache_cells_total", "gauge", "KV cache cells (the pool; default slots x context).");
	evbuffer_add_printf(b, "alice_kv_cache_cells_total %llu\n", (unsigned long long)st->kv_cells_total);
	metric(b, "alice_kv_cache_usage_ratio", "gauge", "Used / total KV cache positions.");
	evbuffer_add_printf(b, "alice_kv_cache_usage_ratio %.6f\n",
			    st->kv_cells_total ? (double)st->kv_cells_used / (double)st->kv_cells_total : 0.0);
	metric(b, "alice_kv_block_cells", "gauge", "Cells per block of the paged KV cache.");
	evbuffer_add_printf(b, "alice_kv_block_cells %u\n", st->kv_block_cells);
	metric(b, "alice_kv_blocks_total", "gauge", "Blocks of the paged KV cache (--kv-cells / block cells).");
	evbuffer_add_printf(b, "alice_kv_blocks_total %u\n", st->kv_blocks_total);
	metric(b, "alice_kv_blocks_used", "gauge", "KV blocks held by at least one slot, cached idle slots included.");
	evbuffer_add_printf(b, "alice_kv_blocks_used %u\n", st->kv_blocks_used);
	metric(b, "alice_kv_blocks_shared", "gauge", "KV blocks held by more than one slot (shared prompt prefixes).");
	evbuffer_add_printf(b, "alice_kv_blocks_shared %u\n", st->kv_blocks_shared);
	metric(b, "alice_kv_blocks_cached", "gauge", "KV blocks held only by idle slots' prefix caches (evictable).");
	evbuffer_add_printf(b, "alice_kv_blocks_cached %u\n", st->kv_blocks_cached);
	metric(b, "alice_kv_blocks_available", "gauge", "KV blocks free and not reserved by running requests.");
	evbuffer_add_printf(b, "alice_kv_blocks_available %u\n", st->kv_blocks_available);
	metric(b, "alice_kv_waited_requests_total", "counter", "Requests that waited in the queue for KV blocks.");
	evbuffer_add_printf(b, "alice_kv_waited_requests_total %llu\n", (unsigned long long)st->requests_kv_waited);
	metric(b, "alice_time_to_first_token_ms", "gauge",
	       "Time to first token (queue + prefill), p50 and p95 over the last 4096 requests.");
	evbuffer_add_printf(b, "alice_time_to_first_token_ms{quantile=\"0.5\"} %.3f\n", st->ttft_p50_ms);
	evbuffer_add_printf(b, "alice_time_to_first_token_ms{quantile=\"0.95\"} %.3f\n", st->ttft_p95_ms);
	metric(b, "alice_inter_token_ms", "gauge",
	       "Gap between consecutive tokens of a request, p50 and p95 over the last 4096 gaps.");
	evbuffer_add_printf(b, "alice_inter_token_ms{quantile=\"0.5\"} %.3f\n", st->itl_p50_ms);
	evbuffer_add_printf(b, "alice_inter_token_ms{quantile=\"0.95\"} %.3f\n", st->itl_p95_ms);
	metric(b, "alice_draft_tokens_total", "counter", "Tokens drafted for speculative decoding.");
	evbuffer_add_printf(b, "alice_draft_tokens_total %llu\n", (unsigned long long)st->draft_tokens);
	metric(b, "alice_draft_accepted_total", "counter", "Drafted tokens the model accepted.");
	evbuffer_add_printf(b, "alice_draft_accepted_total %llu\n", (unsigned long long)st->draft_accepted);
	metric(b, "alice_token_picks_total", "counter",
	       "Tokens chosen on the device (from a row's best entries or a draw) or from whole logits rows read "
	       "to the host (top-p / min-p without top-k, logprobs with penalties, a backend without the sampling "
	       "ops).");
	evbuffer_add_printf(b, "alice_token_picks_total{where=\"device\"} %llu\n", (unsigned long long)st->picks_device);
	evbuffer_add_printf(b, "alice_token_picks_total{where=\"host\"} %llu\n", (unsigned long long)st->picks_host);
	metric(b, "alice_steps_fed_total", "counter",
	       "Steps launched before the previous step's tokens reached the host (tokens fed on the device).");
	evbuffer_add_printf(b, "alice_steps_fed_total %llu\n", (unsigned long long)st->steps_fed);
	metric(b, "alice_requests_in_flight", "gauge", "Completion requests being answered.");
	evbuffer_add_printf(b, "alice_requests_in_flight %d\n", s->n_gens);
	metric(b, "alice_connections_open", "gauge", "Open HTTP connections (at most --max-connections).");
	evbuffer_add_printf(b, "alice_connections_open %lld\n", (long long)s->metrics.conns_open);
	metric(b, "alice_connections_deadline_closed_total", "counter",
	       "Connections closed for not sending a whole request within --request-deadline.");
	evbuffer_add_printf(b, "alice_connections_deadline_closed_total %llu\n",
			    (unsigned long long)s->metrics.conns_deadline_closed);
	metric(b, "alice_accept_errors_total", "counter", "accept() failures (out of descriptors, ...).");
	evbuffer_add_printf(b, "alice_accept_errors_total %llu\n", (unsigned long long)s->metrics.accept_errors);
	metric(b, "alice_model_loaded", "gauge", "1 once the model is loaded and the server is ready.");
	evbuffer_add_printf(b, "alice_model_loaded %d\n", s->state == SRV_READY ? 1 : 0);
}

void srv_route_metrics(struct srv *s, struct srv_http *h, const char *body, size_t len)
{
	(void)body;
	(void)len;
	struct evbuffer *b = evbuffer_new();
	if (!b) {
		srv_reply_nomem(h);
		return;
	}
	struct alice_engine_stats st;
	alice_engine_stats(s->engine, &st); /* zeros while loading */
	metric(b, "alice_requests_total", "counter", "HTTP requests answered, by route and status.");
	for (size_t i = 0; i < s->metrics.n_series; i++)
		evbuffer_add_printf(b, "alice_requests_total{route=\"%s\",status=\"%d\"} %llu\n",
				    s->metrics.series[i].label, s->metrics.series[i].status,
				    (unsigned long long)s->metrics.series[i].count);
	engine_metrics(b, &st);
	speed_metrics(b, &s->metrics);
	load_metrics(b, s, &st);
	srv_reply_body(h, 200, "text/plain; version=0.0.4; charset=utf-8", b);
	evbuffer_free(b);
}
