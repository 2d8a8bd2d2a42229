/* builders.c — the shared graph builders families compose their steps
 * from (embedding, norms, attention over the KV cache, gated FFN, head) and
 * the Llama-style decoder step built from them. */
#include "alice/quant.h"
#include "arch/arch.h"

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
	if (st->embd)
		return x;
	int slot = has_weight(st, -1, ALICE_W_OUTPUT) ? ALICE_W_OUTPUT : ALICE_W_TOKEN_EMBD;
	return alice_gb_mul_mat(gb, alice_build_weight(gb, st, -1, slot), x);
}

int32_t alice_build_prenorm_decoder(struct alice_gb *gb, const struct alice_step *st, alice_mixer_fn mixer)
{
	int n_layer = (int)st->hp->n_layer;
	int32_t x = alice_build_inp_embd(gb, st);
	for (int il = 0; il < n_layer; il++) {
		int32_t cur = alice_build_norm(gb, st, il, ALICE_W_ATTN_NORM, x);
		cur = mixer(gb, st, il, cur);
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

int32_t alice_build_llama_decoder(struct alice_gb *gb, const struct alice_step *st)
{
	return alice_build_prenorm_decoder(gb, st, alice_build_attention);
}
