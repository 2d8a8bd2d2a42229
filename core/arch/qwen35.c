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

#include "arch/arch.h"
#include "graph_ext.h"

#define L ALICE_TS_LAYER
#define F32 ALICE_TS_F32
#define OPT ALICE_TS_OPTIONAL

static const struct alice_tensor_spec qwen35_tensors[] = {
	{ALICE_W_TOKEN_EMBD, 0, {ALICE_D_EMBD, ALICE_D_VOCAB}, "token_embd.weight"},
	{ALICE_W_OUTPUT_NORM, F32, {ALICE_D_EMBD, ALICE_D_NONE}, "output_norm.weight"},
	{ALICE_W_OUTPUT, OPT, {ALICE_D_EMBD, ALICE_D_VOCAB}, "output.weight"},
	{ALICE_W_ATTN_NORM, L | F32, {ALICE_D_EMBD, ALICE_D_NONE}, "attn_norm.weight"},
	{ALICE_W_ATTN_POST_NORM, L | F32, {ALICE_D_EMBD, ALICE_D_NONE}, "post_attention_norm.weight"},
	/* full-attention layers (checked per layer in the builder) */
	{ALICE_W_ATTN_Q, L | OPT, {ALICE_D_EMBD, ALICE_D_Q_GATED}, "attn_q.weight"},
	{ALICE_W_ATTN_K, L | OPT, {ALICE_D_EMBD, ALICE_D_K}, "attn_k.weight"},
	{ALICE_W_ATTN_V, L | OPT, {ALICE_D_EMBD, ALICE_D_V}, "attn_v.weight"},
	{ALICE_W_ATTN_OUT, L | OPT, {ALICE_D_O, ALICE_D_EMBD}, "attn_output.weight"},
	{ALICE_W_ATTN_Q_NORM, L | OPT | F32, {ALICE_D_HEAD_K, ALICE_D_NONE}, "attn_q_norm.weight"},
	{ALICE_W_ATTN_K_NORM, L | OPT | F32, {ALICE_D_HEAD_K, ALICE_D_NONE}, "attn_k_norm.weight"},
	/* linear-attention layers */
	{ALICE_W_ATTN_QKV, L | OPT, {ALICE_D_EMBD, ALICE_D_SSM_CONV_DIM}, "attn_qkv.weight"},
	{ALICE_W_ATTN_GATE, L | OPT, {ALICE_D_EMBD, ALICE_D_SSM_INNER}, "attn_gate.weight"},
	{ALICE_W_SSM_CONV1D, L | OPT | F32, {ALICE_D_SSM_CONV_K, ALICE_D_SSM_CONV_DIM}, "ssm_conv1d.weight"},
	{ALICE_W_SSM_DT_B, L | OPT | F32, {ALICE_D_SSM_HEADS_V, ALICE_D_NONE}, "ssm_dt.bias"},
	{ALICE_W_SSM_A, L | OPT | F32, {ALICE_D_SSM_HEADS_V, ALICE_D_NONE}, "ssm_a"},
	{ALICE_W_SSM_BETA, L | OPT, {ALICE_D_EMBD, ALICE_D_SSM_HEADS_V}, "ssm_beta.weight"},
	{ALICE_W_SSM_ALPHA, L | OPT, {ALICE_D_EMBD, ALICE_D_SSM_HEADS_V}, "ssm_alpha.weight"},
	{ALICE_W_SSM_NORM, L | OPT | F32, {ALICE_D_SSM_HEAD_V, ALICE_D_NONE}, "ssm_norm.weight"},
	{ALICE_W_SSM_OUT, L | OPT, {ALICE_D_SSM_INNER, ALICE_D_EMBD}, "ssm_out.weight"},
	{ALICE_W_FFN_GATE, L, {ALICE_D_EMBD, ALICE_D_FF}, "ffn_gate.weight"},
	{ALICE_W_FFN_UP, L, {ALICE_D_EMBD, ALICE_D_FF}, "ffn_up.weight"},
	{ALICE_W_FFN_DOWN, L, {ALICE_D_FF, ALICE_D_EMBD}, "ffn_down.weight"},
};

static const int linear_slots[] = {ALICE_W_ATTN_QKV, ALICE_W_ATTN_GATE, ALICE_W_SSM_CONV1D, ALICE_W_SSM_DT_B,
				   ALICE_W_SSM_A,    ALICE_W_SSM_BETA,  ALICE_W_SSM_ALPHA,  ALICE_W_SSM_NORM,
				   ALICE_W_SSM_OUT};
static const int attn_slots[] = {ALICE_W_ATTN_Q,   ALICE_W_ATTN_K,	  ALICE_W_ATTN_V,
				 ALICE_W_ATTN_OUT, ALICE_W_ATTN_Q_NORM, ALICE_W_ATTN_K_NORM};

static bool is_recurrent(const struct alice_hparams *hp, int il)
{
	return (uint32_t)(il + 1) % hp->full_attn_interval != 0;
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
	enum alice_status st;
	if ((st = get_dim(g, KEY("ssm.conv_kernel"), true, &hp->ssm_d_conv, err)) != ALICE_OK ||
	    (st = get_dim(g, KEY("ssm.state_size"), true, &hp->ssm_d_state, err)) != ALICE_OK ||
	    (st = get_dim(g, KEY("ssm.group_count"), true, &hp->ssm_n_group, err)) != ALICE_OK ||
	    (st = get_dim(g, KEY("ssm.time_step_rank"), true, &hp->ssm_dt_rank, err)) != ALICE_OK ||
	    (st = get_dim(g, KEY("ssm.inner_size"), true, &hp->ssm_d_inner, err)) != ALICE_OK)
		return st;
	hp->full_attn_interval = 4; /* llama.cpp's default */
	if ((st = get_dim(g, KEY("full_attention_interval"), false, &hp->full_attn_interval, err)) != ALICE_OK)
		return st;
	if (hp->ssm_d_conv < 2 || hp->ssm_dt_rank % hp->ssm_n_group ||
	    hp->ssm_d_inner != (uint64_t)hp->ssm_d_state * hp->ssm_dt_rank)
		return alice_fail(err, ALICE_ERR_INVALID,
				  "%s: qwen35 ssm dims inconsistent (conv_kernel %u >= 2, time_step_rank %u a multiple of "
				  "group_count %u, inner_size %u = state_size %u * time_step_rank)",
				  path, hp->ssm_d_conv, hp->ssm_dt_rank, hp->ssm_n_group, hp->ssm_d_inner, hp->ssm_d_state);
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
		hp->rope_sections[i] = (int32_t)v;
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
	int64_t conv_dim = 2 * (int64_t)hp->ssm_n_group * hp->ssm_d_state + hp->ssm_d_inner;
	ne[0][0] = hp->ssm_d_conv - 1; /* the previous inputs of each conv channel */
	ne[0][1] = conv_dim;
	ne[0][2] = 1;
	ne[1][0] = hp->ssm_d_state; /* one S x S delta-rule matrix per value head */
	ne[1][1] = hp->ssm_d_state;
	ne[1][2] = hp->ssm_dt_rank;
	return 2;
}

static bool qwen35_layer_has_kv(const struct alice_hparams *hp, int il)
{
	return !is_recurrent(hp, il);
}

static int32_t w_(struct alice_gb *gb, const struct alice_step *st, int il, int slot)
{
	return alice_build_weight(gb, st, il, slot);
}

static int32_t linear_attention(struct alice_gb *gb, const struct alice_step *st, int il, int32_t x)
{
	const struct alice_hparams *hp = st->hp;
	const int64_t T = st->n_tokens, S = hp->ssm_d_state, Hk = hp->ssm_n_group, Hv = hp->ssm_dt_rank;
	const int64_t conv_dim = 2 * Hk * S + hp->ssm_d_inner;
	const struct alice_tensor *cs = &st->state[il * ALICE_LAYER_STATES], *ds = cs + 1;
	if (!st->state || !cs->buf || !ds->buf)
		return alice_gb_error(gb, "layer %d: recurrent state missing", il);

	int32_t qkv = alice_gb_mul_mat(gb, w_(gb, st, il, ALICE_W_ATTN_QKV), x);
	int32_t z = alice_gb_mul_mat(gb, w_(gb, st, il, ALICE_W_ATTN_GATE), x);
	int32_t beta = alice_gb_unary(gb, alice_gb_mul_mat(gb, w_(gb, st, il, ALICE_W_SSM_BETA), x), ALICE_ACT_SIGMOID);
	int32_t a = alice_gb_mul_mat(gb, w_(gb, st, il, ALICE_W_SSM_ALPHA), x);
	a = alice_gb_unary(gb, alice_gb_add(gb, a, w_(gb, st, il, ALICE_W_SSM_DT_B)), ALICE_ACT_SOFTPLUS);
	int32_t g = alice_gb_mul(gb, a, w_(gb, st, il, ALICE_W_SSM_A)); /* -exp(A_log) * softplus(...) */

	int32_t conv = alice_gb_ssm_conv(gb, qkv, w_(gb, st, il, ALICE_W_SSM_CONV1D), alice_gb_external(gb, cs),
					 st->inp_seq);
	conv = alice_gb_unary(gb, conv, ALICE_ACT_SILU);
	/* channels: q (Hk heads), k (Hk heads), v (Hv heads), S each */
	const int64_t nb[4] = {4, 4 * S, 4 * conv_dim, 4 * conv_dim * T};
	const int64_t ne_qk[4] = {S, 2 * Hk, T, 1}, ne_v[4] = {S, Hv, T, 1};
	int32_t qk = alice_gb_l2_norm(gb, alice_gb_view(gb, conv, ne_qk, nb, 0), hp->rms_eps);
	int32_t v = alice_gb_view(gb, conv, ne_v, nb, (uint64_t)(2 * Hk * S) * 4);
	int32_t o = alice_gb_gated_delta_net(gb, qk, v, g, beta, alice_gb_external(gb, ds), st->inp_seq,
					     1.0f / sqrtf((float)S));
	o = alice_gb_rms_norm(gb, o, w_(gb, st, il, ALICE_W_SSM_NORM), hp->rms_eps);
	z = alice_gb_unary(gb, alice_gb_reshape(gb, z, S, Hv, T, 1), ALICE_ACT_SILU);
	o = alice_gb_reshape(gb, alice_gb_mul(gb, o, z), S * Hv, T, 1, 1);
	return alice_gb_mul_mat(gb, w_(gb, st, il, ALICE_W_SSM_OUT), o);
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
	q = alice_gb_rope_imrope(gb, q, st->inp_pos, (int)hp->n_rot, hp->rope_sections, hp->rope_base,
				 hp->rope_freq_scale);
	k = alice_gb_rope_imrope(gb, k, st->inp_pos, (int)hp->n_rot, hp->rope_sections, hp->rope_base,
				 hp->rope_freq_scale);
	int32_t kc = alice_gb_kv_write(gb, alice_gb_external(gb, &st->k_cache[il]), k, st->inp_cells);
	int32_t vc = alice_gb_kv_write(gb, alice_gb_external(gb, &st->v_cache[il]), v, st->inp_cells);
	int32_t o = alice_gb_attention(gb, q, kc, vc, st->inp_ranges, hp->attn_scale, 0.0f);
	o = alice_gb_mul(gb, o, alice_gb_unary(gb, gate, ALICE_ACT_SIGMOID));
	o = alice_gb_reshape(gb, o, hp->head_dim_v * H, T, 1, 1);
	return alice_gb_mul_mat(gb, w_(gb, st, il, ALICE_W_ATTN_OUT), o);
}

/* The layer has every tensor its kind needs (the table marks both kinds optional). */
static bool layer_complete(struct alice_gb *gb, const struct alice_step *st, int il, bool recurrent)
{
	const int *slots = recurrent ? linear_slots : attn_slots;
	size_t n = recurrent ? sizeof(linear_slots) / sizeof(linear_slots[0]) : sizeof(attn_slots) / sizeof(attn_slots[0]);
	for (size_t i = 0; i < n; i++) {
		if (st->w->layer[il][slots[i]] >= 0)
			continue;
		const char *name = "?";
		for (size_t k = 0; k < sizeof(qwen35_tensors) / sizeof(qwen35_tensors[0]); k++)
			if (qwen35_tensors[k].slot == slots[i] && (qwen35_tensors[k].flags & ALICE_TS_LAYER))
				name = qwen35_tensors[k].name;
		alice_gb_error(gb, "qwen35: layer %d (%s) lacks tensor blk.%d.%s", il,
			       recurrent ? "linear attention" : "full attention", il, name);
		return false;
	}
	return true;
}

static int32_t qwen35_build(struct alice_gb *gb, const struct alice_step *st)
{
	int n_layer = (int)st->hp->n_layer;
	int32_t x = alice_build_inp_embd(gb, st);
	for (int il = 0; il < n_layer; il++) {
		bool rec = is_recurrent(st->hp, il);
		if (!layer_complete(gb, st, il, rec))
			return -1;
		int32_t cur = alice_build_norm(gb, st, il, ALICE_W_ATTN_NORM, x);
		cur = rec ? linear_attention(gb, st, il, cur) : gated_attention(gb, st, il, cur);
		if (il == n_layer - 1) {
			cur = alice_build_out_rows(gb, st, cur);
			x = alice_build_out_rows(gb, st, x);
		}
		x = alice_gb_add(gb, cur, x);
		cur = alice_build_norm(gb, st, il, ALICE_W_ATTN_POST_NORM, x);
		cur = alice_build_ffn_glu(gb, st, il, cur, ALICE_ACT_SILU);
		x = alice_gb_add(gb, cur, x);
	}
	return alice_build_lm_head(gb, st, x);
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
};
