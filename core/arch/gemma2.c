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
#include "graph_ext.h"

#define L ALICE_TS_LAYER
#define F32 ALICE_TS_F32
#define OPT ALICE_TS_OPTIONAL

static const struct alice_tensor_spec gemma2_tensors[] = {
	{ALICE_W_TOKEN_EMBD, 0, {ALICE_D_EMBD, ALICE_D_VOCAB}, "token_embd.weight"},
	{ALICE_W_OUTPUT_NORM, F32, {ALICE_D_EMBD, ALICE_D_NONE}, "output_norm.weight"},
	{ALICE_W_ATTN_NORM, L | F32, {ALICE_D_EMBD, ALICE_D_NONE}, "attn_norm.weight"},
	{ALICE_W_ATTN_Q, L, {ALICE_D_EMBD, ALICE_D_Q}, "attn_q.weight"},
	{ALICE_W_ATTN_K, L, {ALICE_D_EMBD, ALICE_D_K}, "attn_k.weight"},
	{ALICE_W_ATTN_V, L, {ALICE_D_EMBD, ALICE_D_V}, "attn_v.weight"},
	{ALICE_W_ATTN_OUT, L, {ALICE_D_O, ALICE_D_EMBD}, "attn_output.weight"},
	{ALICE_W_ATTN_POST_NORM, L | F32, {ALICE_D_EMBD, ALICE_D_NONE}, "post_attention_norm.weight"},
	{ALICE_W_FFN_NORM, L | F32, {ALICE_D_EMBD, ALICE_D_NONE}, "ffn_norm.weight"},
	{ALICE_W_FFN_GATE, L, {ALICE_D_EMBD, ALICE_D_FF}, "ffn_gate.weight"},
	{ALICE_W_FFN_UP, L, {ALICE_D_EMBD, ALICE_D_FF}, "ffn_up.weight"},
	{ALICE_W_FFN_DOWN, L, {ALICE_D_FF, ALICE_D_EMBD}, "ffn_down.weight"},
	{ALICE_W_FFN_POST_NORM, L | F32, {ALICE_D_EMBD, ALICE_D_NONE}, "post_ffw_norm.weight"},
};

static enum alice_status gemma2_hparams(const struct alice_gguf *g, struct alice_hparams *hp, struct alice_error *err)
{
	const char *path = alice_gguf_path(g);
	double v;
	int64_t iv;
	/* llama.cpp's defaults when the keys are absent */
	hp->attn_softcap = 50.0f;
	hp->final_softcap = 30.0f;
	if (alice_gguf_get_float(g, "gemma2.attn_logit_softcapping", &v, NULL) == ALICE_OK)
		hp->attn_softcap = (float)v;
	if (alice_gguf_get_float(g, "gemma2.final_logit_softcapping", &v, NULL) == ALICE_OK)
		hp->final_softcap = (float)v;
	if (!(hp->attn_softcap > 0.0f) || !(hp->final_softcap > 0.0f) || !isfinite(hp->attn_softcap) ||
	    !isfinite(hp->final_softcap))
		return alice_fail(err, ALICE_ERR_INVALID, "%s: gemma2 soft-caps must be positive (attn %g, final %g)", path,
				  hp->attn_softcap, hp->final_softcap);
	hp->n_swa = 4096; /* Gemma 2's window when the key is absent (as llama.cpp) */
	hp->swa_period = 2;
	if (alice_gguf_get_int(g, "gemma2.attention.sliding_window_pattern", &iv, NULL) == ALICE_OK) {
		if (iv < 0 || iv > 1024)
			return alice_fail(err, ALICE_ERR_INVALID,
					  "%s: gemma2.attention.sliding_window_pattern = %lld is out of range", path,
					  (long long)iv);
		hp->swa_period = (uint32_t)iv;
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
	uint32_t p = hp->swa_period;
	bool swa = st->inp_ranges_swa >= 0 && (p == 0 || (uint32_t)il % p < p - 1);
	int32_t o = alice_gb_attention(gb, q, kc, vc, swa ? st->inp_ranges_swa : st->inp_ranges, 1.0f, hp->attn_softcap);
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
		cur = alice_build_norm(gb, st, il, ALICE_W_ATTN_POST_NORM, cur);
		x = alice_gb_add(gb, cur, x);
		cur = alice_build_norm(gb, st, il, ALICE_W_FFN_NORM, x);
		cur = alice_build_ffn_glu(gb, st, il, cur, ALICE_ACT_GELU_TANH);
		cur = alice_build_norm(gb, st, il, ALICE_W_FFN_POST_NORM, cur);
		x = alice_gb_add(gb, cur, x);
	}
	int32_t logits = alice_build_lm_head(gb, st, x);
	/* as llama.cpp: scale by 1/cap, tanh, scale by cap */
	logits = alice_gb_scale(gb, logits, 1.0f / hp->final_softcap, 0.0f);
	logits = alice_gb_softcap(gb, logits, 1.0f);
	return alice_gb_scale(gb, logits, hp->final_softcap, 0.0f);
}

const struct alice_arch alice_arch_gemma2 = {
	.name = "gemma2",
	.rope_mode = ALICE_ROPE_NEOX,
	.tensors = gemma2_tensors,
	.n_tensors = sizeof(gemma2_tensors) / sizeof(gemma2_tensors[0]),
	.hparams = gemma2_hparams,
	.build = gemma2_build,
};
