/* bert.c — BERT encoders (BERT, bge, e5, MiniLM as llama.cpp's converter
 * writes them): token + token-type (always type 0, "sentence A") + absolute
 * position embeddings, LayerNorm; then post-norm blocks: x = LN(x +
 * attention(x)), x = LN(x + down(GELU(up(x)))), every projection with a
 * bias; bidirectional attention without rope. No lm_head: the context
 * runs it only for embeddings (arch->encoder), and its output is the last
 * block's hidden state, which the engine pools. */
#include <math.h>

#include "alice/quant.h"
#include "arch/arch.h"

enum {
	BERT_W_TOKEN_TYPES = ALICE_W_ARCH0,
	BERT_W_POS_EMBD,
	BERT_W_EMBD_NORM,
	BERT_W_EMBD_NORM_B,
	BERT_W_ATTN_OUT_B,
	BERT_W_ATTN_OUT_NORM,
	BERT_W_ATTN_OUT_NORM_B,
	BERT_W_FFN_UP_B,
	BERT_W_FFN_DOWN_B,
	BERT_W_OUT_NORM,
	BERT_W_OUT_NORM_B,
};

enum {
	BERT_D_TYPES = ALICE_D_ARCH0, /* tokenizer.ggml.token_type_count */
	BERT_D_CTX,                   /* context_length: rows of position_embd */
};

struct bert_hp {
	uint32_t n_token_types;
};

#define F32_ROW(slot, layer, name, init) {(slot), (layer) | ALICE_TS_F32, {ALICE_D_EMBD, ALICE_D_NONE}, (name), (init)}

static const struct alice_tensor_spec bert_tensors[] = {
	ALICE_TS_TOKEN_EMBD_ROW,
	{BERT_W_TOKEN_TYPES, ALICE_TS_FLOAT, {ALICE_D_EMBD, BERT_D_TYPES}, "token_types.weight", 0},
	{BERT_W_POS_EMBD, 0, {ALICE_D_EMBD, BERT_D_CTX}, "position_embd.weight", 0},
	F32_ROW(BERT_W_EMBD_NORM, 0, "token_embd_norm.weight", ALICE_TI_ONES),
	F32_ROW(BERT_W_EMBD_NORM_B, 0, "token_embd_norm.bias", ALICE_TI_SMALL),
	ALICE_TS_LLAMA_QKVO_ROWS,
	ALICE_TS_QKV_BIAS_ROWS(0),
	F32_ROW(BERT_W_ATTN_OUT_B, ALICE_TS_LAYER, "attn_output.bias", ALICE_TI_SMALL),
	F32_ROW(BERT_W_ATTN_OUT_NORM, ALICE_TS_LAYER, "attn_output_norm.weight", ALICE_TI_ONES),
	F32_ROW(BERT_W_ATTN_OUT_NORM_B, ALICE_TS_LAYER, "attn_output_norm.bias", ALICE_TI_SMALL),
	{ALICE_W_FFN_UP, ALICE_TS_LAYER, {ALICE_D_EMBD, ALICE_D_FF}, "ffn_up.weight", 0},
	{BERT_W_FFN_UP_B, ALICE_TS_LAYER | ALICE_TS_F32, {ALICE_D_FF, ALICE_D_NONE}, "ffn_up.bias", ALICE_TI_SMALL},
	{ALICE_W_FFN_DOWN, ALICE_TS_LAYER, {ALICE_D_FF, ALICE_D_EMBD}, "ffn_down.weight", 0},
	F32_ROW(BERT_W_FFN_DOWN_B, ALICE_TS_LAYER, "ffn_down.bias", ALICE_TI_SMALL),
	F32_ROW(BERT_W_OUT_NORM, ALICE_TS_LAYER, "layer_output_norm.weight", ALICE_TI_ONES),
	F32_ROW(BERT_W_OUT_NORM_B, ALICE_TS_LAYER, "layer_output_norm.bias", ALICE_TI_SMALL),
};

static enum alice_status bert_hparams(const struct alice_gguf *g, struct alice_hparams *hp, struct alice_error *err)
{
	struct bert_hp *p = hp->priv;
	const char *path = alice_gguf_path(g);
	double eps = 0.0;
	if (alice_gguf_get_float(g, "bert.attention.layer_norm_epsilon", &eps, NULL) != ALICE_OK || !(eps > 0.0) ||
	    !isfinite(eps))
		return alice_fail(err, ALICE_ERR_INVALID,
				  "%s: bert.attention.layer_norm_epsilon is missing or not a positive number", path);
	hp->rms_eps = (float)eps; /* the LayerNorm epsilon */
	bool causal = false;
	if (alice_gguf_get_bool(g, "bert.attention.causal", &causal, NULL) == ALICE_OK && causal)
		return alice_fail(err, ALICE_ERR_UNSUPPORTED, "%s: bert.attention.causal = true is not supported", path);
	int64_t types = 2; /* BERT's "sentence A / B" when the file does not say */
	if (alice_gguf_get_int(g, "tokenizer.ggml.token_type_count", &types, NULL) == ALICE_OK &&
	    (types < 1 || types > 1024))
		return alice_fail(err, ALICE_ERR_INVALID, "%s: tokenizer.ggml.token_type_count = %lld is out of range",
				  path, (long long)types);
	p->n_token_types = (uint32_t)types;
	if (hp->n_head_kv != hp->n_head)
		return alice_fail(err, ALICE_ERR_UNSUPPORTED, "%s: a BERT model with head_count_kv != head_count", path);
	return ALICE_OK;
}

static int64_t bert_dim(const struct alice_hparams *hp, uint8_t dim)
{
	const struct bert_hp *p = hp->priv;
	switch (dim) {
	case BERT_D_TYPES: return p->n_token_types;
	case BERT_D_CTX: return hp->n_ctx_train;
	}
	return -1;
}

static int32_t w_(struct alice_gb *gb, const struct alice_step *st, int il, int slot)
{
	return alice_build_weight(gb, st, il, slot);
}

/* LayerNorm of x with weight slot w and bias slot b. */
static int32_t layer_norm(struct alice_gb *gb, const struct alice_step *st, int il, int w, int b, int32_t x)
{
	return alice_gb_layer_norm(gb, x, w_(gb, st, il, w), w_(gb, st, il, b), st->hp->rms_eps);
}

static int32_t linear(struct alice_gb *gb, const struct alice_step *st, int il, int w, int b, int32_t x)
{
	return alice_gb_add(gb, alice_gb_mul_mat(gb, w_(gb, st, il, w), x), w_(gb, st, il, b));
}

/* Self-attention without rope; each token's range (the context's, for an
 * encoder) is its whole sequence. */
static int32_t bert_attention(struct alice_gb *gb, const struct alice_step *st, int il, int32_t x)
{
	const struct alice_hparams *hp = st->hp;
	const int64_t T = st->n_tokens;
	int32_t q = linear(gb, st, il, ALICE_W_ATTN_Q, ALICE_W_ATTN_Q_B, x);
	int32_t k = linear(gb, st, il, ALICE_W_ATTN_K, ALICE_W_ATTN_K_B, x);
	int32_t v = linear(gb, st, il, ALICE_W_ATTN_V, ALICE_W_ATTN_V_B, x);
	q = alice_gb_reshape(gb, q, hp->head_dim_k, hp->n_head, T, 1);
	k = alice_gb_reshape(gb, k, hp->head_dim_k, hp->n_head_kv, T, 1);
	v = alice_gb_reshape(gb, v, hp->head_dim_v, hp->n_head_kv, T, 1);
	int32_t kc = alice_gb_kv_write(gb, alice_gb_external(gb, &st->k_cache[il]), k, st->inp_cells);
	int32_t vc = alice_gb_kv_write(gb, alice_gb_external(gb, &st->v_cache[il]), v, st->inp_cells);
	int32_t o = alice_gb_attention(gb, q, kc, vc, st->inp_ranges, hp->attn_scale, 0.0f);
	o = alice_gb_reshape(gb, o, (int64_t)hp->head_dim_v * hp->n_head, T, 1, 1);
	return linear(gb, st, il, ALICE_W_ATTN_OUT, BERT_W_ATTN_OUT_B, o);
}

static int32_t bert_build(struct alice_gb *gb, const struct alice_step *st)
{
	const struct alice_hparams *hp = st->hp;
	if (!st->embd)
		return alice_gb_error(gb, "bert: an encoder has no lm_head; it runs only for embeddings");
	int32_t x = alice_build_inp_embd(gb, st);
	/* token type 0 for every token: row 0 of token_types */
	int32_t tt = w_(gb, st, -1, BERT_W_TOKEN_TYPES);
	const struct alice_tensor *ttt = alice_gb_tensor(gb, tt);
	if (ttt) {
		int64_t ne[4] = {hp->n_embd, 1, 1, 1}, nb[4] = {ttt->nb[0], ttt->nb[1], ttt->nb[1], ttt->nb[1]};
		int32_t row0 = alice_gb_copy(gb, alice_gb_view(gb, tt, ne, nb, 0), ALICE_TYPE_F32);
		x = alice_gb_add(gb, x, row0);
	}
	x = alice_gb_add(gb, alice_gb_get_rows(gb, w_(gb, st, -1, BERT_W_POS_EMBD), st->inp_pos), x);
	x = layer_norm(gb, st, -1, BERT_W_EMBD_NORM, BERT_W_EMBD_NORM_B, x);
	int n_layer = (int)hp->n_layer;
	for (int il = 0; il < n_layer; il++) {
		int32_t cur = bert_attention(gb, st, il, x);
		if (il == n_layer - 1) {
			cur = alice_build_out_rows(gb, st, cur);
			x = alice_build_out_rows(gb, st, x);
		}
		cur = alice_gb_add(gb, cur, x);
		cur = layer_norm(gb, st, il, BERT_W_ATTN_OUT_NORM, BERT_W_ATTN_OUT_NORM_B, cur);
		int32_t ffn_in = cur;
		cur = linear(gb, st, il, ALICE_W_FFN_UP, BERT_W_FFN_UP_B, cur);
		cur = alice_gb_unary(gb, cur, ALICE_ACT_GELU_TANH);
		cur = linear(gb, st, il, ALICE_W_FFN_DOWN, BERT_W_FFN_DOWN_B, cur);
		cur = alice_gb_add(gb, cur, ffn_in);
		x = layer_norm(gb, st, il, BERT_W_OUT_NORM, BERT_W_OUT_NORM_B, cur);
	}
	return x;
}

const struct alice_arch alice_arch_bert = {
	.name = "bert",
	.rope_mode = ALICE_ROPE_NORMAL, /* unused: no rope */
	.tensors = bert_tensors,
	.n_tensors = sizeof(bert_tensors) / sizeof(bert_tensors[0]),
	.hparams = bert_hparams,
	.build = bert_build,
	.priv_size = sizeof(struct bert_hp),
	.dim = bert_dim,
	.encoder = true,
	.synth_kv = "attention.head_count_kv=4 attention.layer_norm_epsilon=1e-12 context_length=512 pooling_type=1",
};
