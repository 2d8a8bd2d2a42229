/* common.c — hyper-parameters every family shares, and the shared graph
 * builders (embedding, norms, attention over the KV cache, gated FFN, head). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "alice/quant.h"
#include "arch/arch.h"

#define HP_MAX_DIM (1u << 20) /* sanity bound on any single dimension */

static enum alice_status get_u32(const struct alice_gguf *g, const char *arch, const char *key,
				 bool required, uint32_t *out, struct alice_error *err)
{
	char full[160];
	snprintf(full, sizeof(full), "%s.%s", arch, key);
	int64_t v;
	enum alice_status st = alice_gguf_get_int(g, full, &v, NULL);
	if (st == ALICE_ERR_NOT_FOUND && !required)
		return ALICE_OK;
	if (st == ALICE_ERR_NOT_FOUND)
		return alice_fail(err, ALICE_ERR_INVALID, "%s: missing hyper-parameter %s",
				  alice_gguf_path(g), full);
	if (st == ALICE_ERR_TYPE)
		return alice_fail(err, ALICE_ERR_UNSUPPORTED,
				  "%s: %s is not a single integer (per-layer values are not supported)",
				  alice_gguf_path(g), full);
	if (st != ALICE_OK || v < 0 || v > (int64_t)UINT32_MAX)
		return alice_fail(err, ALICE_ERR_INVALID, "%s: %s is out of range", alice_gguf_path(g), full);
	*out = (uint32_t)v;
	return ALICE_OK;
}

static enum alice_status get_f32(const struct alice_gguf *g, const char *arch, const char *key,
				 bool required, float *out, struct alice_error *err)
{
	char full[160];
	snprintf(full, sizeof(full), "%s.%s", arch, key);
	double v;
	enum alice_status st = alice_gguf_get_float(g, full, &v, NULL);
	if (st == ALICE_ERR_NOT_FOUND && !required)
		return ALICE_OK;
	if (st == ALICE_ERR_NOT_FOUND)
		return alice_fail(err, ALICE_ERR_INVALID, "%s: missing hyper-parameter %s",
				  alice_gguf_path(g), full);
	if (st != ALICE_OK || !isfinite(v))
		return alice_fail(err, ALICE_ERR_INVALID, "%s: %s is not a finite number", alice_gguf_path(g), full);
	*out = (float)v;
	return ALICE_OK;
}

#define TRY(x)                                 \
	do {                                   \
		enum alice_status st_ = (x);   \
		if (st_ != ALICE_OK)           \
			return st_;            \
	} while (0)

enum alice_status alice_hparams_load(const struct alice_gguf *g, const struct alice_arch *a,
				     int64_t n_vocab_fallback, struct alice_hparams *hp,
				     struct alice_error *err)
{
	const char *an = a->name;
	const char *path = alice_gguf_path(g);
	memset(hp, 0, sizeof(*hp));
	snprintf(hp->arch, sizeof(hp->arch), "%s", an);
	TRY(get_u32(g, an, "context_length", true, &hp->n_ctx_train, err));
	TRY(get_u32(g, an, "embedding_length", true, &hp->n_embd, err));
	TRY(get_u32(g, an, "block_count", true, &hp->n_layer, err));
	TRY(get_u32(g, an, "feed_forward_length", true, &hp->n_ff, err));
	TRY(get_u32(g, an, "attention.head_count", true, &hp->n_head, err));
	hp->n_head_kv = hp->n_head;
	TRY(get_u32(g, an, "attention.head_count_kv", false, &hp->n_head_kv, err));
	if (hp->n_head == 0 || hp->n_head_kv == 0 || hp->n_head % hp->n_head_kv)
		return alice_fail(err, ALICE_ERR_INVALID,
				  "%s: %s.attention.head_count (%u) must be a positive multiple of head_count_kv (%u)",
				  path, an, hp->n_head, hp->n_head_kv);
	hp->head_dim_k = hp->head_dim_v = hp->n_embd / hp->n_head;
	TRY(get_u32(g, an, "attention.key_length", false, &hp->head_dim_k, err));
	TRY(get_u32(g, an, "attention.value_length", false, &hp->head_dim_v, err));
	hp->n_rot = hp->head_dim_k;
	TRY(get_u32(g, an, "rope.dimension_count", false, &hp->n_rot, err));
	TRY(get_f32(g, an, "attention.layer_norm_rms_epsilon", true, &hp->rms_eps, err));
	hp->rope_base = 10000.0f;
	TRY(get_f32(g, an, "rope.freq_base", false, &hp->rope_base, err));

	/* Rope scaling: linear -> positions * 1/factor; yarn/longrope not yet. */
	char key[160];
	snprintf(key, sizeof(key), "%s.rope.scaling.type", an);
	struct alice_gguf_str stype = {0};
	if (alice_gguf_get_str(g, key, &stype, NULL) == ALICE_OK) {
		bool linear = stype.len == 6 && !memcmp(stype.ptr, "linear", 6);
		bool none = stype.len == 4 && !memcmp(stype.ptr, "none", 4);
		if (!linear && !none)
			return alice_fail(err, ALICE_ERR_UNSUPPORTED,
					  "%s: %s = \"%.*s\" is not supported yet (supported: none, linear)", path,
					  key, (int)(stype.len > 32 ? 32 : stype.len), stype.ptr);
	}
	float factor = 0.0f;
	TRY(get_f32(g, an, "rope.scaling.factor", false, &factor, err));
	if (factor == 0.0f)
		TRY(get_f32(g, an, "rope.scale_linear", false, &factor, err));
	if (factor < 0.0f)
		return alice_fail(err, ALICE_ERR_INVALID, "%s: %s.rope.scaling.factor is negative", path, an);
	hp->rope_freq_scale = factor == 0.0f ? 1.0f : 1.0f / factor;

	uint32_t n_vocab = 0;
	TRY(get_u32(g, an, "vocab_size", false, &n_vocab, err));
	if (n_vocab == 0 && n_vocab_fallback > 0 && n_vocab_fallback <= (int64_t)INT32_MAX)
		n_vocab = (uint32_t)n_vocab_fallback;
	hp->n_vocab = n_vocab;

	uint32_t dims[] = {hp->n_embd, hp->n_layer, hp->n_ff, hp->n_head, hp->head_dim_k, hp->head_dim_v};
	const char *names[] = {"embedding_length", "block_count", "feed_forward_length",
			       "attention.head_count", "attention.key_length", "attention.value_length"};
	for (size_t i = 0; i < sizeof(dims) / sizeof(dims[0]); i++)
		if (dims[i] == 0 || dims[i] > HP_MAX_DIM)
			return alice_fail(err, ALICE_ERR_INVALID, "%s: %s.%s = %u is out of range", path, an,
					  names[i], dims[i]);
	if (hp->n_vocab == 0 || hp->n_vocab > (1u << 24))
		return alice_fail(err, ALICE_ERR_INVALID, "%s: vocabulary size %u is out of range", path, hp->n_vocab);
	if (hp->n_rot == 0 || hp->n_rot % 2 || hp->n_rot > hp->head_dim_k)
		return alice_fail(err, ALICE_ERR_INVALID,
				  "%s: %s.rope.dimension_count = %u must be even and <= the head size %u", path,
				  an, hp->n_rot, hp->head_dim_k);
	if (!(hp->rms_eps > 0.0f) || !(hp->rope_base > 0.0f))
		return alice_fail(err, ALICE_ERR_INVALID, "%s: rms epsilon and rope base must be positive", path);
	hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim_k);
	TRY(get_f32(g, an, "attention.scale", false, &hp->attn_scale, err));
	if (hp->attn_scale == 0.0f)
		hp->attn_scale = 1.0f / sqrtf((float)hp->head_dim_k);
	hp->rope_mode = a->rope_mode;
	if (a->hparams)
		TRY(a->hparams(g, hp, err));
	return ALICE_OK;
}

int64_t alice_dim_value(const struct alice_hparams *hp, uint8_t dim)
{
	switch (dim) {
	case ALICE_D_NONE: return 1;
	case ALICE_D_EMBD: return hp->n_embd;
	case ALICE_D_FF: return hp->n_ff;
	case ALICE_D_VOCAB: return hp->n_vocab;
	case ALICE_D_Q: return (int64_t)hp->n_head * hp->head_dim_k;
	case ALICE_D_K: return (int64_t)hp->n_head_kv * hp->head_dim_k;
	case ALICE_D_V: return (int64_t)hp->n_head_kv * hp->head_dim_v;
	case ALICE_D_O: return (int64_t)hp->n_head * hp->head_dim_v;
	case ALICE_D_HEAD_K: return hp->head_dim_k;
	case ALICE_D_ROT_HALF: return hp->n_rot / 2;
	case ALICE_D_Q_GATED: return 2 * (int64_t)hp->n_head * hp->head_dim_k;
	case ALICE_D_SSM_CONV_K: return hp->ssm_d_conv;
	case ALICE_D_SSM_CONV_DIM: return 2 * (int64_t)hp->ssm_n_group * hp->ssm_d_state + hp->ssm_d_inner;
	case ALICE_D_SSM_INNER: return hp->ssm_d_inner;
	case ALICE_D_SSM_HEADS_V: return hp->ssm_dt_rank;
	case ALICE_D_SSM_HEAD_V: return hp->ssm_dt_rank ? (int64_t)(hp->ssm_d_inner / hp->ssm_dt_rank) : -1;
	}
	return -1;
}

/* ---- builders ---- */

int32_t alice_build_weight(struct alice_gb *gb, const struct alice_step *st, int il, int slot)
{
	int32_t idx = il < 0 ? st->w->global[slot] : st->w->layer[il][slot];
	if (idx < 0)
		return -1;
	return alice_gb_external(gb, &st->w->tensors[idx]);
}

static bool has_weight(const struct alice_step *st, int il, int slot)
{
	return (il < 0 ? st->w->global[slot] : st->w->layer[il][slot]) >= 0;
}

int32_t alice_build_inp_embd(struct alice_gb *gb, const struct alice_step *st)
{
	int32_t e = alice_build_weight(gb, st, -1, ALICE_W_TOKEN_EMBD);
	if (e < 0)
		return alice_gb_error(gb, "model has no token_embd.weight");
	return alice_gb_get_rows(gb, e, st->inp_tokens);
}

int32_t alice_build_norm(struct alice_gb *gb, const struct alice_step *st, int il, int slot, int32_t x)
{
	int32_t w = alice_build_weight(gb, st, il, slot);
	if (w < 0)
		return alice_gb_error(gb, "layer %d: norm weight (slot %d) missing", il, slot);
	return alice_gb_rms_norm(gb, x, w, st->hp->rms_eps);
}

/* projection (+ bias when the layer has one) */
static int32_t proj(struct alice_gb *gb, const struct alice_step *st, int il, int wslot, int bslot, int32_t x)
{
	int32_t y = alice_gb_mul_mat(gb, alice_build_weight(gb, st, il, wslot), x);
	if (bslot >= 0 && has_weight(st, il, bslot))
		y = alice_gb_add(gb, y, alice_build_weight(gb, st, il, bslot));
	return y;
}

int32_t alice_build_attention(struct alice_gb *gb, const struct alice_step *st, int il, int32_t x)
{
	const struct alice_hparams *hp = st->hp;
	const int64_t T = st->n_tokens;
	int32_t q = proj(gb, st, il, ALICE_W_ATTN_Q, ALICE_W_ATTN_Q_B, x);
	int32_t k = proj(gb, st, il, ALICE_W_ATTN_K, ALICE_W_ATTN_K_B, x);
	int32_t v = proj(gb, st, il, ALICE_W_ATTN_V, ALICE_W_ATTN_V_B, x);
	q = alice_gb_reshape(gb, q, hp->head_dim_k, hp->n_head, T, 1);
	k = alice_gb_reshape(gb, k, hp->head_dim_k, hp->n_head_kv, T, 1);
	v = alice_gb_reshape(gb, v, hp->head_dim_v, hp->n_head_kv, T, 1);
	if (has_weight(st, il, ALICE_W_ATTN_Q_NORM))
		q = alice_build_norm(gb, st, il, ALICE_W_ATTN_Q_NORM, q);
	if (has_weight(st, il, ALICE_W_ATTN_K_NORM))
		k = alice_build_norm(gb, st, il, ALICE_W_ATTN_K_NORM, k);
	int32_t ff = -1;
	if (has_weight(st, -1, ALICE_W_ROPE_FREQS))
		ff = alice_build_weight(gb, st, -1, ALICE_W_ROPE_FREQS);
	q = alice_gb_rope(gb, q, st->inp_pos, ff, (int)hp->n_rot, hp->rope_mode, hp->rope_base, hp->rope_freq_scale);
	k = alice_gb_rope(gb, k, st->inp_pos, ff, (int)hp->n_rot, hp->rope_mode, hp->rope_base, hp->rope_freq_scale);
	int32_t kc = alice_gb_external(gb, &st->k_cache[il]);
	int32_t vc = alice_gb_external(gb, &st->v_cache[il]);
	kc = alice_gb_kv_write(gb, kc, k, st->inp_cells);
	vc = alice_gb_kv_write(gb, vc, v, st->inp_cells);
	int32_t o = alice_gb_attention(gb, q, kc, vc, st->inp_ranges, hp->attn_scale, 0.0f);
	o = alice_gb_reshape(gb, o, (int64_t)hp->head_dim_v * hp->n_head, T, 1, 1);
	return alice_gb_mul_mat(gb, alice_build_weight(gb, st, il, ALICE_W_ATTN_OUT), o);
}

int32_t alice_build_ffn_glu(struct alice_gb *gb, const struct alice_step *st, int il, int32_t x, int act)
{
	int32_t g = alice_gb_mul_mat(gb, alice_build_weight(gb, st, il, ALICE_W_FFN_GATE), x);
	int32_t u = alice_gb_mul_mat(gb, alice_build_weight(gb, st, il, ALICE_W_FFN_UP), x);
	int32_t h = alice_gb_glu(gb, g, u, act);
	return alice_gb_mul_mat(gb, alice_build_weight(gb, st, il, ALICE_W_FFN_DOWN), h);
}

int32_t alice_build_out_rows(struct alice_gb *gb, const struct alice_step *st, int32_t x)
{
	if (st->n_out == st->n_tokens) /* the model passes identity ids then */
		return x;
	return alice_gb_get_rows(gb, x, st->inp_out);
}

int32_t alice_build_lm_head(struct alice_gb *gb, const struct alice_step *st, int32_t x)
{
	x = alice_build_norm(gb, st, -1, ALICE_W_OUTPUT_NORM, x);
	int slot = has_weight(st, -1, ALICE_W_OUTPUT) ? ALICE_W_OUTPUT : ALICE_W_TOKEN_EMBD;
	return alice_gb_mul_mat(gb, alice_build_weight(gb, st, -1, slot), x);
}

int32_t alice_build_llama_decoder(struct alice_gb *gb, const struct alice_step *st)
{
	int n_layer = (int)st->hp->n_layer;
	int32_t x = alice_build_inp_embd(gb, st);
	for (int il = 0; il < n_layer; il++) {
		int32_t cur = alice_build_norm(gb, st, il, ALICE_W_ATTN_NORM, x);
		cur = alice_build_attention(gb, st, il, cur);
		if (il == n_layer - 1) { /* only the rows that want logits go on */
			cur = alice_build_out_rows(gb, st, cur);
			x = alice_build_out_rows(gb, st, x);
		}
		x = alice_gb_add(gb, cur, x);
		cur = alice_build_norm(gb, st, il, ALICE_W_FFN_NORM, x);
		cur = alice_build_ffn_glu(gb, st, il, cur, ALICE_ACT_SILU);
		x = alice_gb_add(gb, cur, x);
	}
	return alice_build_lm_head(gb, st, x);
}
