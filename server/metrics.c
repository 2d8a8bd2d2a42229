/* metrics.c — request counters (see metrics.h). */
#include "metrics.h"

#include <string.h>

void srv_metrics_observe(struct srv_metrics *m, const char *label, int status, const struct srv_request_counts *c)
{
	size_t i;
	for (i = 0; i < m->n_series; i++)
		if (m->series[i].status == status && strcmp(m->series[i].label, label) == 0)
			break;
	if (i == m->n_series) {
		if (m->n_series == SRV_METRICS_MAX_SERIES) {
			m->dropped++;
			return;
		}
		m->series[i].label = label;
		m->series[i].status = status;
		m->series[i].count = 0;
		m->n_series++;
	}
	m->series[i].count++;
	if (c->completion_tokens > 0 || c->prefill_ms > 0) {
		m->recent[m->next_recent] = *c;
		m->next_recent = (m->next_recent + 1) % SRV_METRICS_RECENT;
		if (m->n_recent < SRV_METRICS_RECENT)
			m->n_recent++;
	}
}

void srv_metrics_speed(const struct srv_metrics *m, struct srv_metrics_speed *out)
{
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < m->n_recent; i++) {
		const struct srv_request_counts *r = &m->recent[i];
		out->prefill_tokens += r->prompt_tokens - r->cached_tokens; /* cached ones cost nothing */
		out->prefill_ms += r->prefill_ms;
		if (r->completion_tokens > 1) { /* the first token is part of the prefill time */
			out->decode_tokens += r->completion_tokens - 1;
			out->decode_ms += r->decode_ms;
		}
	}
}
