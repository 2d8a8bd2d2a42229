/* ops_ssm.c — the recurrent ops of backend.h 1.1: SSM_CONV (causal
 * depthwise conv with per-sequence state) and GATED_DELTA_NET (gated delta
 * rule with a per-sequence matrix state per head). Both update their state
 * source in place and walk the batch's tokens in order; the work is split
 * across threads by channel (conv) or by (value head, sequence) pair
 * (delta rule), which keeps every state owned by one thread and the token
 * order intact whatever the mix of sequences in the batch.
 * The arithmetic is llama.cpp's CPU one (the parity references): the conv
 * window is one fma chain per channel, the delta rule's dot products sum in
 * ggml_vec_dot_f32's order (mm_order.h) and its rank-1 update is fused. */
#include <math.h>
#include <string.h>

#include "cpu_internal.h"
#include "mm_order.h"

static inline int32_t ld_i32(const struct alice_tensor *t, int64_t i)
{
	int32_t v;
	memcpy(&v, tensor_data(t) + i * t->nb[0], 4);
	return v;
}

static inline float ld_f(const uint8_t *p)
{
	float v;
	memcpy(&v, p, 4);
	return v;
}

static bool contiguous_f32(const struct alice_tensor *t)
{
	return t->nb[0] == 4 && t->nb[1] == 4 * t->ne[0] && t->nb[2] == t->nb[1] * t->ne[1] &&
	       t->nb[3] == t->nb[2] * t->ne[2];
}

/* Every sequence id of seq [T] is in [0, n_seq). */
static enum alice_status check_seq(const struct alice_op_args *a, const struct alice_tensor *seq, int64_t T,
				   int64_t n_seq)
{
	if (seq->ne[0] * seq->ne[1] * seq->ne[2] * seq->ne[3] != T || seq->ne[0] != T)
		return cpu_fail(a->ctx, ALICE_ERR_INVALID, "seq: %lld ids for %lld tokens", (long long)tensor_nelem(seq),
				(long long)T);
	for (int64_t t = 0; t < T; t++) {
		int32_t s = ld_i32(seq, t);
		if (s < 0 || s >= n_seq)
			return cpu_fail(a->ctx, ALICE_ERR_RANGE, "seq[%lld] = %d is outside the state's %lld sequences",
					(long long)t, s, (long long)n_seq);
	}
	return ALICE_OK;
}

/* ---- SSM_CONV ---- */

struct conv_job {
	const struct alice_tensor *x, *w, *state, *seq, *d;
	int64_t C, T, K;
};

static inline __attribute__((always_inline)) void conv_rows(void *arg, int ith, int nth)
{
	struct conv_job *j = arg;
	int64_t C = j->C, K = j->K;
	int64_t c0 = C * ith / nth, c1 = C * (ith + 1) / nth;
	const float *w = (const float *)tensor_data(j->w);
	float *state = (float *)tensor_data(j->state);
	float *out = (float *)tensor_data(j->d);
	for (int64_t t = 0; t < j->T; t++) {
		int64_t s = ld_i32(j->seq, t);
		const uint8_t *xr = tensor_data(j->x) + t * j->x->nb[1];
		for (int64_t c = c0; c < c1; c++) {
			float *st = state + (s * C + c) * (K - 1);
			const float *wc = w + c * K;
			float xv = ld_f(xr + c * j->x->nb[0]);
			float sum = 0.0f;
			for (int64_t k = 0; k < K - 1; k++)
				sum = fmaf(st[k], wc[k], sum);
			sum = fmaf(xv, wc[K - 1], sum);
			out[t * C + c] = sum;
			for (int64_t k = 0; k + 1 < K - 1; k++)
				st[k] = st[k + 1];
			st[K - 2] = xv;
		}
	}
}

/* built twice: fmaf must be an instruction, not a libm call */
static void conv_run_generic(void *arg, int ith, int nth)
{
	conv_rows(arg, ith, nth);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2,fma"))) static void conv_run_fma(void *arg, int ith, int nth)
{
	conv_rows(arg, ith, nth);
}

static bool have_fma(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}
#endif

enum alice_status cpu_op_ssm_conv(const struct alice_op_args *a)
{
	const struct alice_tensor *x = a->src[0], *w = a->src[1], *state = a->src[2], *seq = a->src[3], *d = a->dst;
	int64_t C = x->ne[0], T = x->ne[1], K = w->ne[0];
	if (x->ne[2] * x->ne[3] != 1 || K < 2 || w->ne[1] != C || w->ne[2] * w->ne[3] != 1 || !contiguous_f32(w))
		return cpu_fail(a->ctx, ALICE_ERR_INVALID, "x [%lld, %lld] and w [%lld, %lld] (contiguous) do not fit",
				(long long)C, (long long)T, (long long)w->ne[0], (long long)w->ne[1]);
	if (state->ne[0] != K - 1 || state->ne[1] != C || state->ne[2] != 1 || !contiguous_f32(state))
		return cpu_fail(a->ctx, ALICE_ERR_INVALID, "state must be contiguous [%lld, %lld, 1, n_seq]",
				(long long)(K - 1), (long long)C);
	if (d->ne[0] != C || d->ne[1] != T || d->ne[2] * d->ne[3] != 1 || !contiguous_f32(d))
		return cpu_fail(a->ctx, ALICE_ERR_INVALID, "dst must be contiguous [%lld, %lld]", (long long)C,
				(long long)T);
	if (x->nb[0] != 4)
		return cpu_fail(a->ctx, ALICE_ERR_INVALID, "x rows must be contiguous");
	enum alice_status st = check_seq(a, seq, T, state->ne[3]);
	if (st != ALICE_OK)
		return st;
	struct conv_job j = {.x = x, .w = w, .state = state, .seq = seq, .d = d, .C = C, .T = T, .K = K};
#if defined(__x86_64__) && defined(__GNUC__)
	cpu_pool_run(a->ctx->pool, have_fma() ? conv_run_fma : conv_run_generic, &j);
#else
	cpu_pool_run(a->ctx->pool, conv_run_generic, &j);
#endif
	return ALICE_OK;
}

/* ---- GATED_DELTA_NET ---- */

struct gdn_job {
	const struct alice_tensor *qk, *v, *g, *beta, *state, *seq, *d;
	int64_t S, Hk, Hv, T;
	const int32_t *seqs; /* the distinct sequences of the batch */
	int64_t n_seqs;
	float scale;
};

static inline __attribute__((always_inline)) void gdn_rows(void *arg, int ith, int nth)
{
	struct gdn_job *j = arg;
	const int64_t S = j->S, Hk = j->Hk, Hv = j->Hv;
	float *state = (float *)tensor_data(j->state);
	float *out = (float *)tensor_data(j->d);
	for (int64_t u = ith; u < Hv * j->n_seqs; u += nth) {
		int64_t h = u % Hv, hk = h % Hk, s = j->seqs[u / Hv];
		for (int64_t t = 0; t < j->T; t++) {
			if (ld_i32(j->seq, t) != s)
				continue;
			float *M = state + (s * Hv + h) * S * S;
			const uint8_t *qkt = tensor_data(j->qk) + t * j->qk->nb[2];
			const float *q = (const float *)(qkt + hk * j->qk->nb[1]);
			const float *k = (const float *)(qkt + (Hk + hk) * j->qk->nb[1]);
			const float *v = (const float *)(tensor_data(j->v) + h * j->v->nb[1] + t * j->v->nb[2]);
			float g = ld_f(tensor_data(j->g) + h * j->g->nb[0] + t * j->g->nb[1]);
			float beta = ld_f(tensor_data(j->beta) + h * j->beta->nb[0] + t * j->beta->nb[1]);
			float decay = expf(g);
			float *o = out + (t * Hv + h) * S;
			for (int64_t r = 0; r < S; r++) {
				float *row = M + r * S;
				for (int64_t i = 0; i < S; i++)
					row[i] *= decay;
				float dr = (v[r] - cpu_mm_order_dot(MM_ORD_VEC_F32, S, row, k)) * beta;
				for (int64_t i = 0; i < S; i++)
					row[i] = fmaf(k[i], dr, row[i]);
				o[r] = cpu_mm_order_dot(MM_ORD_VEC_F32, S, row, q) * j->scale;
			}
		}
	}
}

static void gdn_run_generic(void *arg, int ith, int nth)
{
	gdn_rows(arg, ith, nth);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2,fma"))) static void gdn_run_fma(void *arg, int ith, int nth)
{
	gdn_rows(arg, ith, nth);
}
#endif

enum alice_status cpu_op_gated_delta_net(const struct alice_op_args *a)
{
	const struct alice_tensor *qk = a->src[0], *v = a->src[1], *g = a->src[2], *beta = a->src[3],
				  *state = a->src[4], *seq = a->src[5], *d = a->dst;
	int64_t S = v->ne[0], Hv = v->ne[1], T = v->ne[2], Hk = qk->ne[1] / 2;
	if (qk->ne[0] != S || qk->ne[1] < 2 || qk->ne[1] % 2 || Hv % Hk || qk->ne[2] != T || qk->ne[3] != 1 ||
	    v->ne[3] != 1 || qk->nb[0] != 4 || v->nb[0] != 4)
		return cpu_fail(a->ctx, ALICE_ERR_INVALID, "qk [%lld, %lld, %lld] and v [%lld, %lld, %lld] do not fit",
				(long long)qk->ne[0], (long long)qk->ne[1], (long long)qk->ne[2], (long long)S,
				(long long)Hv, (long long)T);
	if (g->ne[0] != Hv || g->ne[1] != T || g->ne[2] * g->ne[3] != 1 || beta->ne[0] != Hv || beta->ne[1] != T ||
	    beta->ne[2] * beta->ne[3] != 1)
		return cpu_fail(a->ctx, ALICE_ERR_INVALID, "g and beta must be [%lld, %lld]", (long long)Hv,
				(long long)T);
	if (state->ne[0] != S || state->ne[1] != S || state->ne[2] != Hv || !contiguous_f32(state))
		return cpu_fail(a->ctx, ALICE_ERR_INVALID, "state must be contiguous [%lld, %lld, %lld, n_seq]",
				(long long)S, (long long)S, (long long)Hv);
	if (d->ne[0] != S || d->ne[1] != Hv || d->ne[2] != T || d->ne[3] != 1 || !contiguous_f32(d))
		return cpu_fail(a->ctx, ALICE_ERR_INVALID, "dst must be contiguous [%lld, %lld, %lld]", (long long)S,
				(long long)Hv, (long long)T);
	if (!isfinite(a->node->fp[0]))
		return cpu_fail(a->ctx, ALICE_ERR_INVALID, "scale must be finite");
	enum alice_status st = check_seq(a, seq, T, state->ne[3]);
	if (st != ALICE_OK)
		return st;
	if ((st = cpu_scratch(a->ctx, (size_t)T * sizeof(int32_t), 0)) != ALICE_OK)
		return st;
	int32_t *seqs = (int32_t *)a->ctx->wdata;
	int64_t n_seqs = 0;
	for (int64_t t = 0; t < T; t++) { /* a batch holds few sequences: a linear scan is fine */
		int32_t s = ld_i32(seq, t);
		int64_t k = 0;
		while (k < n_seqs && seqs[k] != s)
			k++;
		if (k == n_seqs)
			seqs[n_seqs++] = s;
	}
	struct gdn_job j = {.qk = qk, .v = v, .g = g, .beta = beta, .state = state, .seq = seq, .d = d,
			    .S = S, .Hk = Hk, .Hv = Hv, .T = T, .seqs = seqs, .n_seqs = n_seqs,
			    .scale = a->node->fp[0]};
#if defined(__x86_64__) && defined(__GNUC__)
	cpu_pool_run(a->ctx->pool, have_fma() ? gdn_run_fma : gdn_run_generic, &j);
#else
	cpu_pool_run(a->ctx->pool, gdn_run_generic, &j);
#endif
	return ALICE_OK;
}
