/* gemma2.c — Gemma 2: embeddings scaled by sqrt(n_embd); RMSNorm before and
 * after attention and FFN (post norms), rope NEOX, q scaled after rope,
 * attention logits soft-capped, sliding-window attention on even layers
 * (llama.cpp's pattern 2: layer il is windowed when il % 2 == 0; the
 * optional attention.sliding_window_pattern key sets another period), GELU
 * (tanh) gated FFN, tied output, final logits soft-capped. Norm weights are
 * stored as used (the converter already added Gemma's +1). */
#include <math.h>
#include <stdio.h>

#include "arch/arch.h"

/* gemma2's own hyper-parameters (hp->priv) */
struct gemma2_hp {
	float attn_softcap;  /* soft-cap of attention logits */
	float final_softcap; /* soft-cap of the output logits */
	uint32_t swa_period; /* layer il is windowed when il % period < period - 1 (0: every layer) */
};

static const struct gemma2_hp *priv(const struct alice_hparams *hp)
{
	return hp->priv;
}

/* gemma2's own weight slots */
enum {
	G2_W_ATTN_POST_NORM = ALICE_W_ARCH0,
	G2_W_FFN_POST_NORM,
};

#define POST_NORM_ROW(slot, name) \
	{(slot), ALICE_TS_LAYER | ALICE_TS_F32, {ALICE_D_EMBD, ALICE_D_NONE}, (name), ALICE_TI_ONES}

static const struct alice_tensor_spec gemma2_tensors[] = {
	ALICE_TS_TOKEN_EMBD_ROW,
	ALICE_TS_OUTPUT_NORM_ROW,
	ALICE_TS_LLAMA_ATTN_ROWS,
	POST_NORM_ROW(G2_W_ATTN_POST_NORM, "post_attention_norm.weight"),
	ALICE_TS_LLAMA_FFN_ROWS,
	POST_NORM_ROW(G2_W_FFN_POST_NORM, "post_ffw_norm.weight"),
};

static enum alice_status gemma2_hparams(const struct alice_gguf *g, struct alice_hparams *hp, struct alice_error *err)
{
	const char *path = alice_gguf_path(g);
	struct gemma2_hp *p = hp->priv;
	double v;
	int64_t iv;
	/* llama.cpp's defaults when the keys are absent */
	p->attn_softcap = 50.0f;
	p->final_softcap = 30.0f;
	if (alice_gguf_get_float(g, "gemma2.attn_logit_softcapping", &v, NULL) == ALICE_OK)
		p->attn_softcap = (float)v;
	if (alice_gguf_get_float(g, "gemma2.final_logit_softcapping", &v, NULL) == ALICE_OK)
		p->final_softcap = (float)v;
	if (!(p->attn_softcap > 0.0f) || !(p->final_softcap > 0.0f) || !isfinite(p->attn_softcap) ||
	    !isfinite(p->final_softcap))
		return alice_fail(err, ALICE_ERR_INVALID, "%s: gemma2 soft-caps must be positive (attn %g, final %g)", path,
				  p->attn_softcap, p->final_softcap);
	hp->n_swa = 4096; /* Gemma 2's window when the key is absent (as llama.cpp) */
	p->swa_period = 2;
	if (alice_gguf_get_int(g, "gemma2.attention.sliding_window_pattern", &iv, NULL) == ALICE_OK) {
		if (iv < 0 || iv > 1024)
			return alice_fail(err, ALICE_ERR_INVALID,
					  "%s: gemma2.attention.sliding_window_pattern = %lld is out of range", path,
					  (long long)iv);
		p->swa_period = (uint32_t)iv;
	}
	if (alice_gguf_get_int(g, "gemma2.attention.sliding_window", &iv, NULL) == ALICE_OK) {
		if (iv < 0 || iv > (1 << 24))
			return alice_fail(err, ALICE_ERR_INVALID, "%s: gemma2.attention.sliding_window = %lld is out of range",
					  path, (long long)iv);
		hp->n_swa = (uint32_t)iv;
	}
	/* q is scaled explicitly (after rope), attention itself uses scale 1.
	 * llama.cpp picks 1/sqrt(n_embd/n_head) for the 27B (46 layers). */
	hp->attn_scale = hp->n_layer == 46 ? 1.0f / sqrtf((float)(hp->n_embd / hp->n_head))
					   : 1.0f / sqrtf((float)hp->head_dim_k);
	return ALICE_OK;
}

/* cap * tanh(x / cap) (ALICE_OP_SOFTCAP) */
static int32_t softcap(struct alice_gb *gb, int32_t x, float cap)
{
	if (!alice_gb_valid(gb, &x, 1))
		return -1;
	if (!(cap > 0.0f))
		return alice_gb_error(gb, "graph: SOFTCAP: cap %g must be positive", cap);
	int32_t d = alice_gb_new_like(gb, x);
	struct alice_node *n = alice_gb_node(gb, ALICE_OP_SOFTCAP, d, &x, 1);
	if (!n)
		return -1;
	n->fp[0] = cap;
	return d;
}

static int32_t gemma2_attention(struct alice_gb *gb, const struct alice_step *st, int il, int32_t x)
{
	const struct alice_hparams *hp = st->hp;
	const int64_t T = st->n_tokens;
	int32_t q = alice_gb_mul_mat(gb, alice_build_weight(gb, st, il, ALICE_W_ATTN_Q), x);
	int32_t k = alice_gb_mul_mat(gb, alice_build_weight(gb, st, il, ALICE_W_ATTN_K), x);
	int32_t v = alice_gb_mul_mat(gb, alice_build_weight(gb, st, il, ALICE_W_ATTN_V), x);
	q = alice_gb_reshape(gb, q, hp->head_dim_k, hp->n_head, T, 1);
	k = alice_gb_reshape(gb, k, hp->head_dim_k, hp->n_head_kv, T, 1);
	v = alice_gb_reshape(gb, v, hp->head_dim_v, hp->n_head_kv, T, 1);
	q = alice_gb_rope(gb, q, st->inp_pos, -1, (int)hp->n_rot, hp->rope_mode, hp->rope_base, hp->rope_freq_scale);
	k = alice_gb_rope(gb, k, st->inp_pos, -1, (int)hp->n_rot, hp->rope_mode, hp->rope_base, hp->rope_freq_scale);
	q = alice_gb_scale(gb, q, hp->attn_scale, 0.0f);
	int32_t kc = alice_gb_kv_write(gb, alice_gb_external(gb, &st->k_cache[il]), k, st->inp_cells);
	int32_t vc = alice_gb_kv_write(gb, alice_gb_external(gb, &st->v_cache[il]), v, st->inp_cells);
	uint32_t p = priv(hp)->swa_period;
	bool swa = st->inp_ranges_swa >= 0 && (p == 0 || (uint32_t)il % p < p - 1);
	int32_t o = alice_gb_attention(gb, q, kc, vc, swa ? st->inp_ranges_swa : st->inp_ranges, 1.0f,
				       priv(hp)->attn_softcap);
	o = alice_gb_reshape(gb, o, (int64_t)hp->head_dim_v * hp->n_head, T, 1, 1);
	return alice_gb_mul_mat(gb, alice_build_weight(gb, st, il, ALICE_W_ATTN_OUT), o);
}

static int32_t gemma2_build(struct alice_gb *gb, const struct alice_step *st)
{
	const struct alice_hparams *hp = st->hp;
	int n_layer = (int)hp->n_layer;
	int32_t x = alice_build_inp_embd(gb, st);
	x = alice_gb_scale(gb, x, sqrtf((float)hp->n_embd), 0.0f);
	for (int il = 0; il < n_layer; il++) {
		int32_t cur = alice_build_norm(gb, st, il, ALICE_W_ATTN_NORM, x);
		cur = gemma2_attention(gb, st, il, cur);
		if (il == n_layer - 1) {
			cur = alice_build_out_rows(gb, st, cur);
			x = alice_build_out_rows(gb, st, x);
		}
		cur = alice_build_norm(gb, st, il, G2_W_ATTN_POST_NORM, cur);
		x = alice_gb_add(gb, cur, x);
		cur = alice_build_norm(gb, st, il, ALICE_W_FFN_NORM, x);
		cur = alice_build_ffn_glu(gb, st, il, cur, ALICE_ACT_GELU_TANH);
		cur = alice_build_norm(gb, st, il, G2_W_FFN_POST_NORM, cur);
		x = alice_gb_add(gb, cur, x);
	}
	int32_t logits = alice_build_lm_head(gb, st, x);
	if (st->embd) /* the hidden state: no soft-cap */
		return logits;
	/* as llama.cpp: scale by 1/cap, tanh, scale by cap */
	float cap = priv(hp)->final_softcap;
	logits = alice_gb_scale(gb, logits, 1.0f / cap, 0.0f);
	logits = softcap(gb, logits, 1.0f);
	return alice_gb_scale(gb, logits, cap, 0.0f);
}

const struct alice_arch alice_arch_gemma2 = {
	.name = "gemma2",
	.rope_mode = ALICE_ROPE_NEOX,
	.tensors = gemma2_tensors,
	.n_tensors = sizeof(gemma2_tensors) / sizeof(gemma2_tensors[0]),
	.hparams = gemma2_hparams,
	.build = gemma2_build,
	.priv_size = sizeof(struct gemma2_hp),
	/* a window shorter than a test prompt, so it is exercised */
	.synth_kv = "attn_logit_softcapping=50.0 final_logit_softcapping=30.0 attention.sliding_window=4",
};
