/* qwen35.c — Qwen 3.5 hybrid: gated DeltaNet (linear attention) layers,
 * with every full_attention_interval-th layer ((il+1) % interval == 0) a
 * gated full-attention layer. Each layer: attn_norm -> mixer -> residual ->
 * post_attention_norm -> SwiGLU FFN -> residual; tied output when
 * output.weight is absent.
 *
 * Linear layer: qkv = attn_qkv(x) -> causal depthwise conv (ssm_conv1d,
 * per-sequence conv state) -> SiLU -> q, k (L2-normalised, ssm_n_group
 * heads) and v (ssm_dt_rank heads); decay g = ssm_a * softplus(ssm_alpha(x)
 * + ssm_dt.bias), beta = sigmoid(ssm_beta(x)); gated delta rule with the
 * per-sequence state, output scaled by 1/sqrt(head size); RMSNorm
 * (ssm_norm) gated by silu(attn_gate(x)); ssm_out.
 *
 * Attention layer: attn_q gives query and output gate interleaved per head;
 * per-head RMSNorm of q and k; interleaved M-RoPE (IMROPE) over the first
 * rope.dimension_count dims with rope.dimension_sections (for text every
 * position component is the token position); attention; * sigmoid(gate);
 * attn_output. */
#include <math.h>
#include <stdio.h>

#include "alice/quant.h"
#include "arch/arch.h"

/* qwen35's own hyper-parameters (hp->priv) */
struct qwen35_hp {
	int32_t rope_sections[4];    /* IMROPE sections t, h, w, e (rope dimension pairs) */
	uint32_t ssm_d_conv;         /* conv kernel of the recurrent layers */
	uint32_t ssm_d_state;        /* head size of the delta-rule k/v heads */
	uint32_t ssm_n_group;        /* k heads */
	uint32_t ssm_dt_rank;        /* v heads */
	uint32_t ssm_d_inner;        /* v heads * head size */
	uint32_t full_attn_interval; /* layer il is full attention when (il+1) % interval == 0 */
};

static const struct qwen35_hp *priv(const struct alice_hparams *hp)
{
	return hp->priv;
}

/* qwen35's own weight slots (the recurrent layers') */
enum {
	Q35_W_ATTN_QKV = ALICE_W_ARCH0, /* fused q|k|v projection */
	Q35_W_ATTN_GATE,                /* z gate */
	Q35_W_SSM_CONV1D,
	Q35_W_SSM_DT_B,
	Q35_W_SSM_A,
	Q35_W_SSM_BETA,
	Q35_W_SSM_ALPHA,
	Q35_W_SSM_NORM,
	Q35_W_SSM_OUT,
	Q35_W_END
};
_Static_assert((int)Q35_W_END <= (int)ALICE_W_COUNT, "qwen35: too many family weight slots");

/* qwen35's own table dimensions */
enum {
	Q35_D_Q_GATED = ALICE_D_ARCH0, /* 2 * n_head * head_dim_k (query and output gate per head) */
	Q35_D_CONV_K,                  /* ssm_d_conv */
	Q35_D_CONV_DIM,                /* 2 * ssm_n_group * ssm_d_state + ssm_d_inner */
	Q35_D_INNER,                   /* ssm_d_inner */
	Q35_D_HEADS_V,                 /* ssm_dt_rank */
	Q35_D_HEAD_V,                  /* ssm_d_inner / ssm_dt_rank */
};

static int64_t conv_dim(const struct qwen35_hp *p)
{
	return 2 * (int64_t)p->ssm_n_group * p->ssm_d_state + p->ssm_d_inner;
}

static int64_t qwen35_dim(const struct alice_hparams *hp, uint8_t dim)
{
	const struct qwen35_hp *p = priv(hp);
	switch (dim) {
	case Q35_D_Q_GATED: return 2 * (int64_t)hp->n_head * hp->head_dim_k;
	case Q35_D_CONV_K: return p->ssm_d_conv;
	case Q35_D_CONV_DIM: return conv_dim(p);
	case Q35_D_INNER: return p->ssm_d_inner;
	case Q35_D_HEADS_V: return p->ssm_dt_rank;
	case Q35_D_HEAD_V: return p->ssm_dt_rank ? (int64_t)(p->ssm_d_inner / p->ssm_dt_rank) : -1;
	}
	return -1;
}

#define L ALICE_TS_LAYER
#define F32 ALICE_TS_F32
#define KV (ALICE_TS_LAYER | ALICE_TS_KV_LAYERS)     /* full-attention layers */
#define REC (ALICE_TS_LAYER | ALICE_TS_STATE_LAYERS) /* linear-attention layers */

static const struct alice_tensor_spec qwen35_tensors[] = {
	ALICE_TS_LLAMA_GLOBAL_ROWS,
	ALICE_TS_ATTN_NORM_ROW,
	ALICE_TS_FFN_NORM_ROW("post_attention_norm.weight"), /* the pre-FFN norm */
	{ALICE_W_ATTN_Q, KV, {ALICE_D_EMBD, Q35_D_Q_GATED}, "attn_q.weight", 0},
	{ALICE_W_ATTN_K, KV, {ALICE_D_EMBD, ALICE_D_K}, "attn_k.weight", 0},
	{ALICE_W_ATTN_V, KV, {ALICE_D_EMBD, ALICE_D_V}, "attn_v.weight", 0},
	{ALICE_W_ATTN_OUT, KV, {ALICE_D_O, ALICE_D_EMBD}, "attn_output.weight", 0},
	ALICE_TS_QK_NORM_ROWS(ALICE_TS_KV_LAYERS),
	{Q35_W_ATTN_QKV, REC, {ALICE_D_EMBD, Q35_D_CONV_DIM}, "attn_qkv.weight", 0},
	{Q35_W_ATTN_GATE, REC, {ALICE_D_EMBD, Q35_D_INNER}, "attn_gate.weight", 0},
	{Q35_W_SSM_CONV1D, REC | F32, {Q35_D_CONV_K, Q35_D_CONV_DIM}, "ssm_conv1d.weight", 0},
	{Q35_W_SSM_DT_B, REC | F32, {Q35_D_HEADS_V, ALICE_D_NONE}, "ssm_dt.bias", ALICE_TI_SMALL},
	{Q35_W_SSM_A, REC | F32, {Q35_D_HEADS_V, ALICE_D_NONE}, "ssm_a", ALICE_TI_NEGATIVE},
	{Q35_W_SSM_BETA, REC, {ALICE_D_EMBD, Q35_D_HEADS_V}, "ssm_beta.weight", 0},
	{Q35_W_SSM_ALPHA, REC, {ALICE_D_EMBD, Q35_D_HEADS_V}, "ssm_alpha.weight", 0},
	{Q35_W_SSM_NORM, REC | F32, {Q35_D_HEAD_V, ALICE_D_NONE}, "ssm_norm.weight", ALICE_TI_ONES},
	{Q35_W_SSM_OUT, REC, {Q35_D_INNER, ALICE_D_EMBD}, "ssm_out.weight", 0},
	ALICE_TS_GLU_ROWS,
};

static bool is_recurrent(const struct alice_hparams *hp, int il)
{
	return (uint32_t)(il + 1) % priv(hp)->full_attn_interval != 0;
}

#define KEY(name) "qwen35." name

static enum alice_status get_dim(const struct alice_gguf *g, const char *key, bool required, uint32_t *out,
				 struct alice_error *err)
{
	int64_t v;
	enum alice_status st = alice_gguf_get_int(g, key, &v, NULL);
	if (st == ALICE_ERR_NOT_FOUND && !required)
		return ALICE_OK;
	if (st == ALICE_ERR_NOT_FOUND)
		return alice_fail(err, ALICE_ERR_INVALID, "%s: missing hyper-parameter %s", alice_gguf_path(g), key);
	if (st != ALICE_OK || v <= 0 || v > (1 << 20))
		return alice_fail(err, ALICE_ERR_INVALID, "%s: %s is not a positive integer <= 2^20", alice_gguf_path(g),
				  key);
	*out = (uint32_t)v;
	return ALICE_OK;
}

static enum alice_status qwen35_hparams(const struct alice_gguf *g, struct alice_hparams *hp, struct alice_error *err)
{
	const char *path = alice_gguf_path(g);
	struct qwen35_hp *p = hp->priv;
	enum alice_status st;
	if ((st = get_dim(g, KEY("ssm.conv_kernel"), true, &p->ssm_d_conv, err)) != ALICE_OK ||
	    (st = get_dim(g, KEY("ssm.state_size"), true, &p->ssm_d_state, err)) != ALICE_OK ||
	    (st = get_dim(g, KEY("ssm.group_count"), true, &p->ssm_n_group, err)) != ALICE_OK ||
	    (st = get_dim(g, KEY("ssm.time_step_rank"), true, &p->ssm_dt_rank, err)) != ALICE_OK ||
	    (st = get_dim(g, KEY("ssm.inner_size"), true, &p->ssm_d_inner, err)) != ALICE_OK)
		return st;
	p->full_attn_interval = 4; /* llama.cpp's default */
	if ((st = get_dim(g, KEY("full_attention_interval"), false, &p->full_attn_interval, err)) != ALICE_OK)
		return st;
	if (p->ssm_d_conv < 2 || p->ssm_dt_rank % p->ssm_n_group ||
	    p->ssm_d_inner != (uint64_t)p->ssm_d_state * p->ssm_dt_rank)
		return alice_fail(err, ALICE_ERR_INVALID,
				  "%s: qwen35 ssm dims inconsistent (conv_kernel %u >= 2, time_step_rank %u a multiple of "
				  "group_count %u, inner_size %u = state_size %u * time_step_rank)",
				  path, p->ssm_d_conv, p->ssm_dt_rank, p->ssm_n_group, p->ssm_d_inner, p->ssm_d_state);
	if (hp->head_dim_k != hp->head_dim_v)
		return alice_fail(err, ALICE_ERR_INVALID, "%s: qwen35 needs key_length == value_length (%u, %u)", path,
				  hp->head_dim_k, hp->head_dim_v);
	struct alice_gguf_arr arr;
	if (alice_gguf_get_arr(g, KEY("rope.dimension_sections"), &arr, NULL) != ALICE_OK || arr.n < 1 || arr.n > 4)
		return alice_fail(err, ALICE_ERR_INVALID, "%s: missing or malformed %s (1 to 4 integers)", path,
				  KEY("rope.dimension_sections"));
	int sum = 0;
	for (uint64_t i = 0; i < 4; i++) {
		int64_t v = 0;
		if (i < arr.n && alice_gguf_arr_int(&arr, i, &v) != ALICE_OK)
			return alice_fail(err, ALICE_ERR_INVALID, "%s: %s[%llu] is not an integer", path,
					  KEY("rope.dimension_sections"), (unsigned long long)i);
		if (v < 0 || v > (int64_t)hp->n_rot)
			return alice_fail(err, ALICE_ERR_INVALID, "%s: %s[%llu] = %lld is out of range", path,
					  KEY("rope.dimension_sections"), (unsigned long long)i, (long long)v);
		p->rope_sections[i] = (int32_t)v;
		sum += (int)v;
	}
	if (sum <= 0)
		return alice_fail(err, ALICE_ERR_INVALID, "%s: %s sum to 0", path, KEY("rope.dimension_sections"));
	return ALICE_OK;
}

static int qwen35_layer_state(const struct alice_hparams *hp, int il, int64_t ne[ALICE_LAYER_STATES][3])
{
	if (!is_recurrent(hp, il))
		return 0;
	const struct qwen35_hp *p = priv(hp);
	ne[0][0] = p->ssm_d_conv - 1; /* the previous inputs of each conv channel */
	ne[0][1] = conv_dim(p);
	ne[0][2] = 1;
	ne[1][0] = p->ssm_d_state; /* one S x S delta-rule matrix per value head */
	ne[1][1] = p->ssm_d_state;
	ne[1][2] = p->ssm_dt_rank;
	return 2;
}

static bool qwen35_layer_has_kv(const struct alice_hparams *hp, int il)
{
	return !is_recurrent(hp, il);
}

/* ---- qwen35's ops (backend.h): shapes checked, as graph.c's helpers ---- */

static int64_t nel(const struct alice_tensor *t)
{
	return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

static bool f32(const struct alice_tensor *t)
{
	return t->type == ALICE_TYPE_F32;
}

/* x / max(||x||, eps) over dim 0 (x may be a strided view) */
static int32_t l2_norm(struct alice_gb *gb, int32_t x, float eps)
{
	if (!alice_gb_valid(gb, &x, 1))
		return -1;
	if (!f32(alice_gb_tensor(gb, x)))
		return alice_gb_error(gb, "graph: L2_NORM: x must be F32");
	int32_t d = alice_gb_new_like(gb, x);
	struct alice_node *n = alice_gb_node(gb, ALICE_OP_L2_NORM, d, &x, 1);
	if (!n)
		return -1;
	n->fp[0] = eps;
	return d;
}

/* IMROPE rope of x [head_dim, n_head, T]; pos I32 [4 * T] (t, h, w, e). */
static int32_t rope_imrope(struct alice_gb *gb, int32_t x, int32_t pos, int n_dims, const int32_t sections[4],
			   float freq_base, float freq_scale)
{
	int32_t ts[2] = {x, pos};
	if (!alice_gb_valid(gb, ts, 2))
		return -1;
	const struct alice_tensor *tx = alice_gb_tensor(gb, x), *tp = alice_gb_tensor(gb, pos);
	if (n_dims <= 0 || n_dims % 2 || n_dims > tx->ne[0])
		return alice_gb_error(gb, "graph: ROPE: n_dims %d must be even and <= head_dim %lld", n_dims,
				      (long long)tx->ne[0]);
	if (tp->type != ALICE_TYPE_I32 || nel(tp) != 4 * tx->ne[2] || tx->ne[3] != 1)
		return alice_gb_error(gb, "graph: ROPE: IMROPE positions must be I32 [4 * n_tokens]");
	int sum = 0;
	for (int i = 0; i < 4; i++) {
		if (sections[i] < 0)
			return alice_gb_error(gb, "graph: ROPE: negative IMROPE section");
		sum += sections[i];
	}
	if (sum <= 0)
		return alice_gb_error(gb, "graph: ROPE: IMROPE sections sum to 0");
	int32_t d = alice_gb_new_like(gb, x);
	int32_t src[3] = {x, pos, -1};
	struct alice_node *n = alice_gb_node(gb, ALICE_OP_ROPE, d, src, 3);
	if (!n)
		return -1;
	n->ip[0] = n_dims;
	n->ip[1] = ALICE_ROPE_IMROPE;
	for (int i = 0; i < 4; i++)
		n->ip[2 + i] = sections[i];
	n->fp[0] = freq_base;
	n->fp[1] = freq_scale;
	return d;
}

/* Causal depthwise conv with per-sequence state, updated in place
 * (ALICE_OP_SSM_CONV): x [C, T], w [K, C], state [K-1, C, n_seq], seq I32 [T]. */
static int32_t ssm_conv(struct alice_gb *gb, int32_t x, int32_t w, int32_t state, int32_t seq)
{
	int32_t src[4] = {x, w, state, seq};
	if (!alice_gb_valid(gb, src, 4))
		return -1;
	const struct alice_tensor *tx = alice_gb_tensor(gb, x), *tw = alice_gb_tensor(gb, w), *ts = alice_gb_tensor(gb, state), *tq = alice_gb_tensor(gb, seq);
	int64_t C = tx->ne[0], T = tx->ne[1], K = tw->ne[0];
	if (!f32(tx) || !f32(tw) || !f32(ts) || tq->type != ALICE_TYPE_I32)
		return alice_gb_error(gb, "graph: SSM_CONV: x, w, state must be F32 and seq I32");
	if (tx->ne[2] * tx->ne[3] != 1 || K < 2 || tw->ne[1] != C || nel(tw) != K * C || ts->ne[0] != K - 1 ||
	    ts->ne[1] != C || ts->ne[2] != 1 || nel(tq) != T)
		return alice_gb_error(gb,
				      "graph: SSM_CONV: shapes x [%lld, %lld], w [%lld, %lld], state [%lld, %lld, %lld] "
				      "do not fit",
				      (long long)C, (long long)T, (long long)tw->ne[0], (long long)tw->ne[1],
				      (long long)ts->ne[0], (long long)ts->ne[1], (long long)ts->ne[2]);
	int32_t d = alice_gb_new(gb, ALICE_TYPE_F32, C, T, 1, 1);
	return alice_gb_node(gb, ALICE_OP_SSM_CONV, d, src, 4) ? d : -1;
}

/* Gated delta rule (ALICE_OP_GATED_DELTA_NET): qk [S, 2*H_k, T], v [S, H_v, T],
 * g and beta [H_v, T], state [S, S, H_v, n_seq] (in place), seq I32 [T]. */
static int32_t gated_delta_net(struct alice_gb *gb, int32_t qk, int32_t v, int32_t g, int32_t beta, int32_t state,
				 int32_t seq, float scale)
{
	int32_t src[6] = {qk, v, g, beta, state, seq};
	if (!alice_gb_valid(gb, src, 6))
		return -1;
	const struct alice_tensor *tqk = alice_gb_tensor(gb, qk), *tv = alice_gb_tensor(gb, v), *tg = alice_gb_tensor(gb, g), *tb = alice_gb_tensor(gb, beta),
				  *ts = alice_gb_tensor(gb, state), *tq = alice_gb_tensor(gb, seq);
	int64_t S = tv->ne[0], Hv = tv->ne[1], T = tv->ne[2], Hk2 = tqk->ne[1];
	if (!f32(tqk) || !f32(tv) || !f32(tg) || !f32(tb) || !f32(ts) || tq->type != ALICE_TYPE_I32)
		return alice_gb_error(gb, "graph: GATED_DELTA_NET: inputs must be F32 and seq I32");
	if (tqk->ne[0] != S || Hk2 < 2 || Hk2 % 2 || Hv % (Hk2 / 2) || tqk->ne[2] != T || tqk->ne[3] != 1 ||
	    tv->ne[3] != 1 || tg->ne[0] != Hv || tg->ne[1] != T || nel(tg) != Hv * T || tb->ne[0] != Hv ||
	    tb->ne[1] != T || nel(tb) != Hv * T || ts->ne[0] != S || ts->ne[1] != S || ts->ne[2] != Hv ||
	    nel(tq) != T)
		return alice_gb_error(gb,
				      "graph: GATED_DELTA_NET: shapes qk [%lld, %lld, %lld], v [%lld, %lld, %lld], "
				      "state [%lld, %lld, %lld] do not fit",
				      (long long)tqk->ne[0], (long long)Hk2, (long long)tqk->ne[2], (long long)S,
				      (long long)Hv, (long long)T, (long long)ts->ne[0], (long long)ts->ne[1],
				      (long long)ts->ne[2]);
	int32_t d = alice_gb_new(gb, ALICE_TYPE_F32, S, Hv, T, 1);
	struct alice_node *n = alice_gb_node(gb, ALICE_OP_GATED_DELTA_NET, d, src, 6);
	if (!n)
		return -1;
	n->fp[0] = scale;
	return d;
}

/* ---- the step ---- */

static int32_t w_(struct alice_gb *gb, const struct alice_step *st, int il, int slot)
{
	return alice_build_weight(gb, st, il, slot);
}

static int32_t linear_attention(struct alice_gb *gb, const struct alice_step *st, int il, int32_t x)
{
	const struct alice_hparams *hp = st->hp;
	const struct qwen35_hp *p = priv(hp);
	const int64_t T = st->n_tokens, S = p->ssm_d_state, Hk = p->ssm_n_group, Hv = p->ssm_dt_rank;
	const int64_t C = conv_dim(p);
	const struct alice_tensor *cs = &st->state[il * ALICE_LAYER_STATES], *ds = cs + 1;
	if (!st->state || !cs->buf || !ds->buf)
		return alice_gb_error(gb, "layer %d: recurrent state missing", il);

	int32_t qkv = alice_gb_mul_mat(gb, w_(gb, st, il, Q35_W_ATTN_QKV), x);
	int32_t z = alice_gb_mul_mat(gb, w_(gb, st, il, Q35_W_ATTN_GATE), x);
	int32_t beta = alice_gb_unary(gb, alice_gb_mul_mat(gb, w_(gb, st, il, Q35_W_SSM_BETA), x), ALICE_ACT_SIGMOID);
	int32_t a = alice_gb_mul_mat(gb, w_(gb, st, il, Q35_W_SSM_ALPHA), x);
	a = alice_gb_unary(gb, alice_gb_add(gb, a, w_(gb, st, il, Q35_W_SSM_DT_B)), ALICE_ACT_SOFTPLUS);
	int32_t g = alice_gb_mul(gb, a, w_(gb, st, il, Q35_W_SSM_A)); /* -exp(A_log) * softplus(...) */

	int32_t conv = ssm_conv(gb, qkv, w_(gb, st, il, Q35_W_SSM_CONV1D), alice_gb_external(gb, cs),
					 st->inp_seq);
	conv = alice_gb_unary(gb, conv, ALICE_ACT_SILU);
	/* channels: q (Hk heads), k (Hk heads), v (Hv heads), S each */
	const int64_t nb[4] = {4, 4 * S, 4 * C, 4 * C * T};
	const int64_t ne_qk[4] = {S, 2 * Hk, T, 1}, ne_v[4] = {S, Hv, T, 1};
	int32_t qk = l2_norm(gb, alice_gb_view(gb, conv, ne_qk, nb, 0), hp->rms_eps);
	int32_t v = alice_gb_view(gb, conv, ne_v, nb, (uint64_t)(2 * Hk * S) * 4);
	int32_t o = gated_delta_net(gb, qk, v, g, beta, alice_gb_external(gb, ds), st->inp_seq,
					     1.0f / sqrtf((float)S));
	o = alice_gb_rms_norm(gb, o, w_(gb, st, il, Q35_W_SSM_NORM), hp->rms_eps);
	z = alice_gb_unary(gb, alice_gb_reshape(gb, z, S, Hv, T, 1), ALICE_ACT_SILU);
	o = alice_gb_reshape(gb, alice_gb_mul(gb, o, z), S * Hv, T, 1, 1);
	return alice_gb_mul_mat(gb, w_(gb, st, il, Q35_W_SSM_OUT), o);
}

static int32_t gated_attention(struct alice_gb *gb, const struct alice_step *st, int il, int32_t x)
{
	const struct alice_hparams *hp = st->hp;
	const int64_t T = st->n_tokens, D = hp->head_dim_k, H = hp->n_head;
	int32_t qg = alice_gb_mul_mat(gb, w_(gb, st, il, ALICE_W_ATTN_Q), x);
	/* per head: D query values, then D gate values */
	const int64_t ne[4] = {D, H, T, 1}, nb[4] = {4, 8 * D, 8 * D * H, 8 * D * H * T};
	int32_t q = alice_gb_view(gb, qg, ne, nb, 0);
	int32_t gate = alice_gb_view(gb, qg, ne, nb, (uint64_t)D * 4);
	q = alice_gb_rms_norm(gb, q, w_(gb, st, il, ALICE_W_ATTN_Q_NORM), hp->rms_eps);
	int32_t k = alice_gb_mul_mat(gb, w_(gb, st, il, ALICE_W_ATTN_K), x);
	k = alice_gb_rms_norm(gb, alice_gb_reshape(gb, k, D, hp->n_head_kv, T, 1), w_(gb, st, il, ALICE_W_ATTN_K_NORM),
			      hp->rms_eps);
	int32_t v = alice_gb_mul_mat(gb, w_(gb, st, il, ALICE_W_ATTN_V), x);
	v = alice_gb_reshape(gb, v, hp->head_dim_v, hp->n_head_kv, T, 1);
	q = rope_imrope(gb, q, st->inp_pos, (int)hp->n_rot, priv(hp)->rope_sections, hp->rope_base,
				 hp->rope_freq_scale);
	k = rope_imrope(gb, k, st->inp_pos, (int)hp->n_rot, priv(hp)->rope_sections, hp->rope_base,
				 hp->rope_freq_scale);
	int32_t kc = alice_gb_kv_write(gb, alice_gb_external(gb, &st->k_cache[il]), k, st->inp_cells);
	int32_t vc = alice_gb_kv_write(gb, alice_gb_external(gb, &st->v_cache[il]), v, st->inp_cells);
	int32_t o = alice_gb_attention(gb, q, kc, vc, st->inp_ranges, hp->attn_scale, 0.0f);
	o = alice_gb_mul(gb, o, alice_gb_unary(gb, gate, ALICE_ACT_SIGMOID));
	o = alice_gb_reshape(gb, o, hp->head_dim_v * H, T, 1, 1);
	return alice_gb_mul_mat(gb, w_(gb, st, il, ALICE_W_ATTN_OUT), o);
}

/* Each layer's mixer: gated DeltaNet or gated full attention. */
static int32_t qwen35_mixer(struct alice_gb *gb, const struct alice_step *st, int il, int32_t x)
{
	return is_recurrent(st->hp, il) ? linear_attention(gb, st, il, x) : gated_attention(gb, st, il, x);
}

static int32_t qwen35_build(struct alice_gb *gb, const struct alice_step *st)
{
	return alice_build_prenorm_decoder(gb, st, qwen35_mixer);
}

const struct alice_arch alice_arch_qwen35 = {
	.name = "qwen35",
	.rope_mode = ALICE_ROPE_IMROPE,
	.tensors = qwen35_tensors,
	.n_tensors = sizeof(qwen35_tensors) / sizeof(qwen35_tensors[0]),
	.hparams = qwen35_hparams,
	.build = qwen35_build,
	.layer_state = qwen35_layer_state,
	.layer_has_kv = qwen35_layer_has_kv,
	.priv_size = sizeof(struct qwen35_hp),
	.dim = qwen35_dim,
	/* 2 layers: a linear-attention one, then a full-attention one */
	.synth_kv = "full_attention_interval=2 ssm.conv_kernel=4 ssm.state_size=16 ssm.group_count=2 "
		    "ssm.time_step_rank=4 ssm.inner_size=64 rope.dimension_sections=3,3,2,0",
};
