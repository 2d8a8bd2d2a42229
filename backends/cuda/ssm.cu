/* ssm.cu — the recurrent ops of backend.h 1.1: SSM_CONV (causal depthwise
 * conv with a per-sequence window state) and GATED_DELTA_NET (gated delta
 * rule with a per-sequence S x S matrix state per value head). Both walk
 * the batch's tokens in order inside one launch and update their state
 * source in place.
 *
 * SSM_CONV: one thread per channel; the K-1 window of the sequence being
 * walked lives in registers (K <= 4; larger K reads the state in memory)
 * and is written back when the batch moves to another sequence.
 *
 * GATED_DELTA_NET: row j of a head's matrix only ever meets its own v[j],
 * so rows update independently: a block of 8 warps owns 32 rows of one
 * (value head, sequence) state, 4 rows per warp, each lane holding the
 * columns i = lane + 32c of its rows in registers. The dots over i are
 * warp reductions (fixed order: results do not depend on the batch mix).
 * Grid: (value head x row block, y) where block y walks the tokens whose
 * sequence s has s % gridDim.y == y; with gridDim.y = min(n_seq, T) every
 * sequence of a batch usually gets its own blocks.
 *
 * A sequence id outside the state sets CU_FLAG_SEQ (graph_compute fails
 * the call); the token is skipped. */
#include "common.cuh"

static inline bool contig_f32(const struct alice_tensor *t)
{
	return tcontig(t, 4);
}

static enum alice_status check_seq_shape(struct alice_backend_ctx *ctx, const struct alice_tensor *seq, int64_t T)
{
	if (tnelem(seq) != T || seq->ne[0] != T)
		return cu_fail(ctx, ALICE_ERR_INVALID, "seq: %lld ids for %lld tokens", (long long)tnelem(seq),
			       (long long)T);
	if (T > 0x7fffffff)
		return cu_fail(ctx, ALICE_ERR_INVALID, "too many tokens (%lld)", (long long)T);
	return ALICE_OK;
}

/* ---- SSM_CONV ---- */

struct conv_p {
	const uint8_t *x;
	int64_t x_nb1;
	const float *w;
	float *state;
	const uint8_t *seq;
	int64_t seq_nb0;
	float *d;
	int C, T, K, n_seq;
	int *flag;
};

__device__ static inline int ld_seq(const uint8_t *seq, int64_t nb0, int t)
{
	return *(const int *)(seq + (int64_t)t * nb0);
}

/* window in registers; KM = K */
template <int KM>
__global__ void __launch_bounds__(128) k_ssm_conv(struct conv_p p)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	if (c >= p.C)
		return;
	float w[KM], win[KM - 1];
#pragma unroll
	for (int k = 0; k < KM; k++)
		w[k] = p.w[(int64_t)c * KM + k];
	int cur = -1;
	float *st = NULL;
	for (int t = 0; t < p.T; t++) {
		int s = ld_seq(p.seq, p.seq_nb0, t);
		if (s < 0 || s >= p.n_seq) {
			if (c == 0)
				atomicOr(p.flag, CU_FLAG_SEQ);
			p.d[(int64_t)t * p.C + c] = 0.f;
			continue;
		}
		if (s != cur) {
			if (cur >= 0) {
#pragma unroll
				for (int k = 0; k < KM - 1; k++)
					st[k] = win[k];
			}
			cur = s;
			st = p.state + ((int64_t)s * p.C + c) * (KM - 1);
#pragma unroll
			for (int k = 0; k < KM - 1; k++)
				win[k] = st[k];
		}
		float xv = *(const float *)(p.x + (int64_t)t * p.x_nb1 + (int64_t)c * 4);
		float sum = 0.f;
#pragma unroll
		for (int k = 0; k < KM - 1; k++)
			sum += win[k] * w[k];
		sum += xv * w[KM - 1];
		p.d[(int64_t)t * p.C + c] = sum;
#pragma unroll
		for (int k = 0; k + 1 < KM - 1; k++)
			win[k] = win[k + 1];
		win[KM - 2] = xv;
	}
	if (cur >= 0) {
#pragma unroll
		for (int k = 0; k < KM - 1; k++)
			st[k] = win[k];
	}
}

/* any K: the window stays in the state tensor */
__global__ void __launch_bounds__(128) k_ssm_conv_any(struct conv_p p)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	if (c >= p.C)
		return;
	const int K = p.K;
	const float *w = p.w + (int64_t)c * K;
	for (int t = 0; t < p.T; t++) {
		int s = ld_seq(p.seq, p.seq_nb0, t);
		if (s < 0 || s >= p.n_seq) {
			if (c == 0)
				atomicOr(p.flag, CU_FLAG_SEQ);
			p.d[(int64_t)t * p.C + c] = 0.f;
			continue;
		}
		float *st = p.state + ((int64_t)s * p.C + c) * (K - 1);
		float xv = *(const float *)(p.x + (int64_t)t * p.x_nb1 + (int64_t)c * 4);
		float sum = 0.f;
		for (int k = 0; k < K - 1; k++)
			sum += st[k] * w[k];
		sum += xv * w[K - 1];
		p.d[(int64_t)t * p.C + c] = sum;
		for (int k = 0; k + 1 < K - 1; k++)
			st[k] = st[k + 1];
		st[K - 2] = xv;
	}
}

enum alice_status cu_op_ssm_conv(const struct alice_op_args *a)
{
	struct alice_backend_ctx *ctx = a->ctx;
	const struct alice_tensor *x = a->src[0], *w = a->src[1], *state = a->src[2], *seq = a->src[3], *d = a->dst;
	int64_t C = x->ne[0], T = x->ne[1], K = w->ne[0];
	if (x->ne[2] * x->ne[3] != 1 || K < 2 || w->ne[1] != C || w->ne[2] * w->ne[3] != 1 || !contig_f32(w))
		return cu_fail(ctx, ALICE_ERR_INVALID, "x [%lld, %lld] and w [%lld, %lld] (contiguous) do not fit",
			       (long long)C, (long long)T, (long long)w->ne[0], (long long)w->ne[1]);
	if (state->ne[0] != K - 1 || state->ne[1] != C || state->ne[2] != 1 || !contig_f32(state))
		return cu_fail(ctx, ALICE_ERR_INVALID, "state must be contiguous [%lld, %lld, 1, n_seq]", (long long)(K - 1),
			       (long long)C);
	if (d->ne[0] != C || d->ne[1] != T || d->ne[2] * d->ne[3] != 1 || !contig_f32(d))
		return cu_fail(ctx, ALICE_ERR_INVALID, "dst must be contiguous [%lld, %lld]", (long long)C, (long long)T);
	if (x->nb[0] != 4)
		return cu_fail(ctx, ALICE_ERR_INVALID, "x rows must be contiguous");
	if (C > 0x7fffffff || K > 0x7fffffff || state->ne[3] > 0x7fffffff)
		return cu_fail(ctx, ALICE_ERR_INVALID, "sizes out of range");
	enum alice_status st = check_seq_shape(ctx, seq, T);
	if (st != ALICE_OK)
		return st;
	struct conv_p p;
	p.x = tdata(x);
	p.x_nb1 = x->nb[1];
	p.w = (const float *)tdata(w);
	p.state = (float *)tdata(state);
	p.seq = tdata(seq);
	p.seq_nb0 = seq->nb[0];
	p.d = (float *)tdata(d);
	p.C = (int)C;
	p.T = (int)T;
	p.K = (int)K;
	p.n_seq = (int)state->ne[3];
	p.flag = ctx->dflag;
	unsigned blocks = cu_blocks(C, 128);
	switch (K) {
	case 2: k_ssm_conv<2><<<blocks, 128, 0, ctx->stream>>>(p); break;
	case 3: k_ssm_conv<3><<<blocks, 128, 0, ctx->stream>>>(p); break;
	case 4: k_ssm_conv<4><<<blocks, 128, 0, ctx->stream>>>(p); break;
	default: k_ssm_conv_any<<<blocks, 128, 0, ctx->stream>>>(p); break;
	}
	CUDA_LAUNCH_CHECK(ctx, "ssm_conv");
	return ALICE_OK;
}

/* ---- GATED_DELTA_NET ---- */

#define GDN_WARPS 8
#define GDN_RPW 4 /* rows per warp */
#define GDN_ROWS (GDN_WARPS * GDN_RPW)

struct gdn_p {
	const uint8_t *qk;
	int64_t qk_nb1, qk_nb2;
	const uint8_t *v;
	int64_t v_nb1, v_nb2;
	const uint8_t *g;
	int64_t g_nb0, g_nb1;
	const uint8_t *beta;
	int64_t b_nb0, b_nb1;
	float *state;
	const uint8_t *seq;
	int64_t seq_nb0;
	float *d;
	int S, Hk, Hv, T, n_seq, row_blocks;
	float scale;
	int *flag;
};

/* The next token >= t that block y walks (a valid sequence s with
 * s % gy == y), or T. */
__device__ static inline int gdn_next(const struct gdn_p &p, int t, int y, int gy)
{
	for (; t < p.T; t++) {
		int s = ld_seq(p.seq, p.seq_nb0, t);
		if (s >= 0 && s < p.n_seq && s % gy == y)
			return t;
	}
	return t;
}

/* CPL: columns per lane (S <= 32 * CPL). */
template <int CPL>
__global__ void __launch_bounds__(GDN_WARPS * 32) k_gdn(struct gdn_p p)
{
	const int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
	const int h = blockIdx.x / p.row_blocks, rb = blockIdx.x % p.row_blocks;
	const int y = blockIdx.y, gy = gridDim.y;
	const int hk = h % p.Hk, S = p.S;
	const int64_t SS = (int64_t)S * S;
	int row[GDN_RPW];
	bool rok[GDN_RPW];
#pragma unroll
	for (int r = 0; r < GDN_RPW; r++) {
		row[r] = rb * GDN_ROWS + r * GDN_WARPS + wid;
		rok[r] = row[r] < S;
	}
	bool cok[CPL];
#pragma unroll
	for (int c = 0; c < CPL; c++)
		cok[c] = lane + 32 * c < S;

	/* bad sequence ids: reported once, by one block */
	if (blockIdx.x == 0 && y == 0 && threadIdx.x == 0)
		for (int t = 0; t < p.T; t++) {
			int s = ld_seq(p.seq, p.seq_nb0, t);
			if (s < 0 || s >= p.n_seq) {
				atomicOr(p.flag, CU_FLAG_SEQ);
				break;
			}
		}

	float M[GDN_RPW][CPL];
	float *Mp = NULL; /* the state now in registers */
	int cur = -1;
	int t = gdn_next(p, 0, y, gy);
	while (t < p.T) {
		int s = ld_seq(p.seq, p.seq_nb0, t);
		if (s != cur) {
			if (cur >= 0) {
#pragma unroll
				for (int r = 0; r < GDN_RPW; r++)
#pragma unroll
					for (int c = 0; c < CPL; c++)
						if (rok[r] && cok[c])
							Mp[(int64_t)row[r] * S + lane + 32 * c] = M[r][c];
			}
			cur = s;
			Mp = p.state + ((int64_t)s * p.Hv + h) * SS;
#pragma unroll
			for (int r = 0; r < GDN_RPW; r++)
#pragma unroll
				for (int c = 0; c < CPL; c++)
					M[r][c] = rok[r] && cok[c] ? Mp[(int64_t)row[r] * S + lane + 32 * c] : 0.f;
		}
		const uint8_t *qkt = p.qk + (int64_t)t * p.qk_nb2;
		const float *q = (const float *)(qkt + (int64_t)hk * p.qk_nb1);
		const float *k = (const float *)(qkt + (int64_t)(p.Hk + hk) * p.qk_nb1);
		const float *v = (const float *)(p.v + (int64_t)h * p.v_nb1 + (int64_t)t * p.v_nb2);
		float kk[CPL], qq[CPL], vv[GDN_RPW];
#pragma unroll
		for (int c = 0; c < CPL; c++) {
			kk[c] = cok[c] ? k[lane + 32 * c] : 0.f;
			qq[c] = cok[c] ? q[lane + 32 * c] : 0.f;
		}
#pragma unroll
		for (int r = 0; r < GDN_RPW; r++)
			vv[r] = rok[r] ? v[row[r]] : 0.f;
		float decay = expf(*(const float *)(p.g + (int64_t)h * p.g_nb0 + (int64_t)t * p.g_nb1));
		float beta = *(const float *)(p.beta + (int64_t)h * p.b_nb0 + (int64_t)t * p.b_nb1);
		float *o = p.d + ((int64_t)t * p.Hv + h) * S;
		int tn = gdn_next(p, t + 1, y, gy);
#pragma unroll
		for (int r = 0; r < GDN_RPW; r++) {
			float dk = 0.f;
#pragma unroll
			for (int c = 0; c < CPL; c++) {
				M[r][c] *= decay;
				dk += M[r][c] * kk[c];
			}
			dk = warp_sum(dk);
			float dr = (vv[r] - dk) * beta;
			float dq = 0.f;
#pragma unroll
			for (int c = 0; c < CPL; c++) {
				M[r][c] += dr * kk[c];
				dq += M[r][c] * qq[c];
			}
			dq = warp_sum(dq);
			if (lane == 0 && rok[r])
				o[row[r]] = dq * p.scale;
		}
		t = tn;
	}
	if (cur >= 0) {
#pragma unroll
		for (int r = 0; r < GDN_RPW; r++)
#pragma unroll
			for (int c = 0; c < CPL; c++)
				if (rok[r] && cok[c])
					Mp[(int64_t)row[r] * S + lane + 32 * c] = M[r][c];
	}
}

enum alice_status cu_op_gated_delta_net(const struct alice_op_args *a)
{
	struct alice_backend_ctx *ctx = a->ctx;
	const struct alice_tensor *qk = a->src[0], *v = a->src[1], *g = a->src[2], *beta = a->src[3],
				  *state = a->src[4], *seq = a->src[5], *d = a->dst;
	int64_t S = v->ne[0], Hv = v->ne[1], T = v->ne[2], Hk = qk->ne[1] / 2;
	if (qk->ne[0] != S || qk->ne[1] < 2 || qk->ne[1] % 2 || Hv % Hk || qk->ne[2] != T || qk->ne[3] != 1 ||
	    v->ne[3] != 1 || qk->nb[0] != 4 || v->nb[0] != 4)
		return cu_fail(ctx, ALICE_ERR_INVALID, "qk [%lld, %lld, %lld] and v [%lld, %lld, %lld] do not fit",
			       (long long)qk->ne[0], (long long)qk->ne[1], (long long)qk->ne[2], (long long)S, (long long)Hv,
			       (long long)T);
	if (g->ne[0] != Hv || g->ne[1] != T || g->ne[2] * g->ne[3] != 1 || beta->ne[0] != Hv || beta->ne[1] != T ||
	    beta->ne[2] * beta->ne[3] != 1)
		return cu_fail(ctx, ALICE_ERR_INVALID, "g and beta must be [%lld, %lld]", (long long)Hv, (long long)T);
	if (state->ne[0] != S || state->ne[1] != S || state->ne[2] != Hv || !contig_f32(state))
		return cu_fail(ctx, ALICE_ERR_INVALID, "state must be contiguous [%lld, %lld, %lld, n_seq]", (long long)S,
			       (long long)S, (long long)Hv);
	if (d->ne[0] != S || d->ne[1] != Hv || d->ne[2] != T || d->ne[3] != 1 || !contig_f32(d))
		return cu_fail(ctx, ALICE_ERR_INVALID, "dst must be contiguous [%lld, %lld, %lld]", (long long)S,
			       (long long)Hv, (long long)T);
	if (!isfinite(a->node->fp[0]))
		return cu_fail(ctx, ALICE_ERR_INVALID, "scale must be finite");
	if (S > 256)
		return cu_fail(ctx, ALICE_ERR_UNSUPPORTED, "state size %lld > 256", (long long)S);
	int64_t row_blocks = (S + GDN_ROWS - 1) / GDN_ROWS;
	if (Hv * row_blocks > 0x7fffffff || state->ne[3] > 0x7fffffff)
		return cu_fail(ctx, ALICE_ERR_INVALID, "sizes out of range");
	enum alice_status st = check_seq_shape(ctx, seq, T);
	if (st != ALICE_OK)
		return st;
	struct gdn_p p;
	p.qk = tdata(qk);
	p.qk_nb1 = qk->nb[1];
	p.qk_nb2 = qk->nb[2];
	p.v = tdata(v);
	p.v_nb1 = v->nb[1];
	p.v_nb2 = v->nb[2];
	p.g = tdata(g);
	p.g_nb0 = g->nb[0];
	p.g_nb1 = g->nb[1];
	p.beta = tdata(beta);
	p.b_nb0 = beta->nb[0];
	p.b_nb1 = beta->nb[1];
	p.state = (float *)tdata(state);
	p.seq = tdata(seq);
	p.seq_nb0 = seq->nb[0];
	p.d = (float *)tdata(d);
	p.S = (int)S;
	p.Hk = (int)Hk;
	p.Hv = (int)Hv;
	p.T = (int)T;
	p.n_seq = (int)state->ne[3];
	p.row_blocks = (int)row_blocks;
	p.scale = a->node->fp[0];
	p.flag = ctx->dflag;
	int64_t gy = state->ne[3] < T ? state->ne[3] : T;
	if (gy > 65535)
		gy = 65535;
	if (gy < 1)
		gy = 1;
	dim3 grid((unsigned)(Hv * row_blocks), (unsigned)gy);
	if (S <= 32)
		k_gdn<1><<<grid, GDN_WARPS * 32, 0, ctx->stream>>>(p);
	else if (S <= 64)
		k_gdn<2><<<grid, GDN_WARPS * 32, 0, ctx->stream>>>(p);
	else if (S <= 128)
		k_gdn<4><<<grid, GDN_WARPS * 32, 0, ctx->stream>>>(p);
	else
		k_gdn<8><<<grid, GDN_WARPS * 32, 0, ctx->stream>>>(p);
	CUDA_LAUNCH_CHECK(ctx, "gated_delta_net");
	return ALICE_OK;
}
