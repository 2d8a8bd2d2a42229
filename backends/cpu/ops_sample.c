/* ops_sample.c — sampling ops (backend.h 1.4, 1.5), rows split across threads.
 * TOPK: the best K entries of each row by sorted insertion (after the
 * first few hundred entries almost nothing beats the K-th, so a row costs
 * about one compare per entry). SAMPLE_TEMP: alice/temp_sample.h's rule,
 * the sampler's own code. LOGIT_ADJUST: a few hundred edits, one thread. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "alice/temp_sample.h"
#include "cpu_internal.h"

struct topk_job {
	const struct alice_tensor *x, *d;
	int32_t k;
};


static void topk_run(void *arg, int ith, int nth)
{
	const struct topk_job *j = arg;
	const int64_t n = j->x->ne[0], rows = j->x->ne[1];
	const int32_t k = j->k;
	for (int64_t r = ith; r < rows; r += nth) {
		const float *x = (const float *)(tensor_data(j->x) + r * j->x->nb[1]);
		int32_t *o = (int32_t *)(tensor_data(j->d) + r * j->d->nb[2]);
		float v[ALICE_TOPK_MAX];
		int32_t id[ALICE_TOPK_MAX], m = 0;
		for (int64_t i = 0; i < n; i++) {
			float xi = alice_ts_clean(x[i]);
			/* a later index loses a tie, so it must be strictly better */
			if (m == k && !(xi > v[k - 1]))
				continue;
			int32_t p = m < k ? m++ : k - 1;
			while (p > 0 && xi > v[p - 1]) {
				v[p] = v[p - 1];
				id[p] = id[p - 1];
				p--;
			}
			v[p] = xi;
			id[p] = (int32_t)i;
		}
		for (int32_t i = 0; i < k; i++) {
			o[2 * i] = id[i];
			memcpy(&o[2 * i + 1], &v[i], 4);
		}
	}
}

enum alice_status cpu_op_topk(const struct alice_op_args *a)
{
	struct topk_job j = {.x = a->src[0], .d = a->dst, .k = a->node->ip[0]};
	cpu_pool_run_sized(a->ctx->pool, topk_run, &j, tensor_nelem(j.x));
	return ALICE_OK;
}

struct temp_job {
	const struct alice_tensor *x, *p, *d;
	struct alice_backend_ctx *ctx;
};

static void temp_run(void *arg, int ith, int nth)
{
	const struct temp_job *j = arg;
	const int32_t n = (int32_t)j->x->ne[0];
	const int64_t rows = j->x->ne[1];
	float *w = (float *)j->ctx->tdata[ith];
	double *bs = (double *)(w + n + (n & 1));
	for (int64_t r = ith; r < rows; r += nth) {
		const float *x = (const float *)(tensor_data(j->x) + r * j->x->nb[1]);
		const int32_t *p = (const int32_t *)(tensor_data(j->p) + r * j->p->nb[1]);
		int32_t *o = (int32_t *)(tensor_data(j->d) + r * j->d->nb[1]);
		float t;
		memcpy(&t, &p[0], 4);
		o[0] = -1;
		o[1] = 0;
		if (!(t > 0))
			continue;
		float mx = -INFINITY;
		for (int32_t i = 0; i < n; i++) {
			w[i] = alice_ts_clean(x[i]);
			mx = w[i] > mx ? w[i] : mx;
		}
		if (!(mx > -INFINITY))
			continue;
		int32_t n_live, last;
		double z = alice_ts_weigh(w, n, mx, alice_ts_floor(mx, t), 1.0f / t, bs, &n_live, &last);
		if (n_live == 1) {
			o[0] = alice_ts_single(w, n);
			continue;
		}
		uint64_t bits = (uint64_t)(uint32_t)p[1] | (uint64_t)(uint32_t)p[2] << 32;
		double u01;
		memcpy(&u01, &bits, 8);
		o[0] = alice_ts_draw(w, n, bs, last, u01 * z);
		o[1] = 1;
	}
}

enum alice_status cpu_op_sample_temp(const struct alice_op_args *a)
{
	struct temp_job j = {.x = a->src[0], .p = a->src[1], .d = a->dst, .ctx = a->ctx};
	int64_t n = j.x->ne[0], nblk = (n + ALICE_TS_BLOCK - 1) / ALICE_TS_BLOCK;
	enum alice_status st = cpu_scratch(a->ctx, 0, (size_t)(n + 1) * sizeof(float) + (size_t)nblk * sizeof(double));
	if (st != ALICE_OK)
		return st;
	cpu_pool_run_sized(a->ctx->pool, temp_run, &j, tensor_nelem(j.x));
	return ALICE_OK;
}

/* ---- LOGIT_ADJUST (1.5): per-token edits in place, alice_ts_adjust ---- */

enum alice_status cpu_op_logit_adjust(const struct alice_op_args *a)
{
	const struct alice_tensor *x = a->dst, *r = a->src[0];
	const int32_t *rec = (const int32_t *)tensor_data(r);
	int64_t cnt = rec[0], cap = r->ne[1] - 1;
	if (cnt > cap)
		cnt = cap;
	for (int64_t i = 1; i <= cnt; i++) {
		const int32_t *e = rec + 6 * i;
		if (e[0] < 0 || e[0] >= x->ne[1] || e[1] < 0 || e[1] >= x->ne[0])
			continue;
		float bias, rp, pen;
		memcpy(&bias, &e[3], 4);
		memcpy(&rp, &e[4], 4);
		memcpy(&pen, &e[5], 4);
		float *v = (float *)((uint8_t *)tensor_data(x) + (int64_t)e[0] * x->nb[1]) + e[1];
		*v = alice_ts_adjust(alice_ts_clean(*v), (uint32_t)e[2], bias, rp, pen);
	}
	return ALICE_OK;
}

/* ---- FEED (1.6): a step's tokens, some from the previous step's picks ---- */

enum alice_status cpu_op_feed(const struct alice_op_args *a)
{
	const int32_t *host = (const int32_t *)tensor_data(a->src[0]), *idx = (const int32_t *)tensor_data(a->src[1]),
		      *picks = (const int32_t *)tensor_data(a->src[2]);
	int32_t *d = (int32_t *)tensor_data(a->dst);
	const int64_t m = a->src[2]->ne[0];
	for (int64_t i = 0; i < a->dst->ne[0]; i++) {
		if (idx[i] >= m)
			return cpu_fail(a->ctx, ALICE_ERR_RANGE, "FEED: token %lld takes pick %d, outside 0..%lld",
					(long long)i, idx[i], (long long)m - 1);
		d[i] = idx[i] < 0 ? host[i] : picks[idx[i]];
	}
	return ALICE_OK;
}

/* ---- LOGSUMEXP (1.6): logprobs' normaliser, alice_ts_lse_sum ---- */

enum alice_status cpu_op_logsumexp(const struct alice_op_args *a)
{
	const struct alice_tensor *x = a->src[0], *tk = a->src[1];
	for (int64_t r = 0; r < x->ne[1]; r++) {
		const float *row = (const float *)((const uint8_t *)tensor_data(x) + r * x->nb[1]);
		int32_t *o = (int32_t *)((uint8_t *)tensor_data(a->dst) + r * a->dst->nb[1]);
		float mx = -INFINITY;
		for (int64_t i = 0; i < x->ne[0]; i++) {
			float v = alice_ts_clean(row[i]);
			mx = v > mx ? v : mx;
		}
		double sum = mx > -INFINITY ? alice_ts_lse_sum(row, (int32_t)x->ne[0], mx) : 0.0;
		int32_t tok = tk ? ((const int32_t *)((const uint8_t *)tensor_data(tk) + r * tk->nb[1]))[0] : -1;
		float val = tok >= 0 && tok < x->ne[0] ? alice_ts_clean(row[tok]) : 0.0f;
		uint64_t sb;
		memcpy(&sb, &sum, 8);
		memcpy(&o[0], &mx, 4);
		o[1] = (int32_t)(uint32_t)sb;
		o[2] = (int32_t)(uint32_t)(sb >> 32);
		memcpy(&o[3], &val, 4);
	}
	return ALICE_OK;
}

/* ---- TOKEN_MASK (1.6): a grammar's allowed tokens, the rest -inf ---- */

enum alice_status cpu_op_token_mask(const struct alice_op_args *a)
{
	const struct alice_tensor *x = a->dst, *r = a->src[0];
	const int32_t *rec = (const int32_t *)tensor_data(r);
	const int64_t W = r->ne[0];
	int64_t cnt = rec[0], cap = r->ne[1] - 1;
	if (cnt > cap)
		cnt = cap;
	for (int64_t k = 1; k <= cnt; k++) {
		const int32_t *e = rec + W * k;
		if (e[0] < 0 || e[0] >= x->ne[1])
			continue;
		float *v = (float *)((uint8_t *)tensor_data(x) + (int64_t)e[0] * x->nb[1]);
		for (int64_t t = 0; t < x->ne[0]; t++)
			if (!(((uint32_t)e[1 + t / 32] >> (t % 32)) & 1u))
				v[t] = -INFINITY;
	}
	return ALICE_OK;
}
