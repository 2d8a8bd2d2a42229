/* metrics.h — the server's request counters (bottom layer, event thread
 * only): requests by route label and status, and the token counts and times
 * of the last requests for the speed gauges. srv_request_done (reply.c)
 * feeds them; the GET /metrics page (route_metrics.c) reads them. Labels are
 * the route table's constant strings, so a client cannot create series. */
#ifndef ALICE_SERVER_METRICS_H
#define ALICE_SERVER_METRICS_H

#include <stddef.h>
#include <stdint.h>

#define SRV_METRICS_MAX_SERIES 256 /* (route, status) pairs */
#define SRV_METRICS_RECENT 32      /* requests in the speed gauges */

/* What a finished request reports. */
struct srv_request_counts {
	int64_t prompt_tokens, completion_tokens;
	int64_t cached_tokens; /* prompt tokens served by the prefix cache */
	double prefill_ms, decode_ms;
};

struct srv_metrics {
	struct {
		const char *label; /* borrowed: a route's label, or "other" */
		int status;
		uint64_t count;
	} series[SRV_METRICS_MAX_SERIES];
	size_t n_series;
	uint64_t dropped; /* observations beyond the series bound */
	struct srv_request_counts recent[SRV_METRICS_RECENT];
	size_t n_recent, next_recent;
	/* connections (conn.c) */
	int64_t conns_open;
	uint64_t conns_deadline_closed; /* --request-deadline */
	uint64_t accept_errors;         /* accept() failed (EMFILE, ...) */
};

void srv_metrics_observe(struct srv_metrics *m, const char *label, int status, const struct srv_request_counts *c);

/* Sums over the recent requests: prompt tokens actually prefilled (cached
 * ones excluded) and their time; tokens after each request's first and
 * their time. */
struct srv_metrics_speed {
	int64_t prefill_tokens, decode_tokens;
	double prefill_ms, decode_ms;
};
void srv_metrics_speed(const struct srv_metrics *m, struct srv_metrics_speed *out);

#endif
