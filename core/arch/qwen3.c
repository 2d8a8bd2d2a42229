/* qwen3.c — Qwen3 (dense): the Llama decoder with per-head RMSNorm of q and
 * k over head_dim (attn_q_norm / attn_k_norm, before rope), no biases, rope
 * in NEOX mode; tied output when output.weight is absent. */
#include "arch/arch.h"

#define L ALICE_TS_LAYER
#define F32 ALICE_TS_F32
#define OPT ALICE_TS_OPTIONAL

static const struct alice_tensor_spec qwen3_tensors[] = {
	{ALICE_W_TOKEN_EMBD, 0, {ALICE_D_EMBD, ALICE_D_VOCAB}, "token_embd.weight"},
	{ALICE_W_OUTPUT_NORM, F32, {ALICE_D_EMBD, ALICE_D_NONE}, "output_norm.weight"},
	{ALICE_W_OUTPUT, OPT, {ALICE_D_EMBD, ALICE_D_VOCAB}, "output.weight"},
	{ALICE_W_ATTN_NORM, L | F32, {ALICE_D_EMBD, ALICE_D_NONE}, "attn_norm.weight"},
	{ALICE_W_ATTN_Q, L, {ALICE_D_EMBD, ALICE_D_Q}, "attn_q.weight"},
	{ALICE_W_ATTN_K, L, {ALICE_D_EMBD, ALICE_D_K}, "attn_k.weight"},
	{ALICE_W_ATTN_V, L, {ALICE_D_EMBD, ALICE_D_V}, "attn_v.weight"},
	{ALICE_W_ATTN_OUT, L, {ALICE_D_O, ALICE_D_EMBD}, "attn_output.weight"},
	{ALICE_W_ATTN_Q_NORM, L | F32, {ALICE_D_HEAD_K, ALICE_D_NONE}, "attn_q_norm.weight"},
	{ALICE_W_ATTN_K_NORM, L | F32, {ALICE_D_HEAD_K, ALICE_D_NONE}, "attn_k_norm.weight"},
	{ALICE_W_FFN_NORM, L | F32, {ALICE_D_EMBD, ALICE_D_NONE}, "ffn_norm.weight"},
	{ALICE_W_FFN_GATE, L, {ALICE_D_EMBD, ALICE_D_FF}, "ffn_gate.weight"},
	{ALICE_W_FFN_UP, L, {ALICE_D_EMBD, ALICE_D_FF}, "ffn_up.weight"},
	{ALICE_W_FFN_DOWN, L, {ALICE_D_FF, ALICE_D_EMBD}, "ffn_down.weight"},
};

static int32_t qwen3_build(struct alice_gb *gb, const struct alice_step *st)
{
	int n_layer = (int)st->hp->n_layer;
	int32_t x = alice_build_inp_embd(gb, st);
	for (int il = 0; il < n_layer; il++) {
		int32_t cur = alice_build_norm(gb, st, il, ALICE_W_ATTN_NORM, x);
		cur = alice_build_attention(gb, st, il, cur); /* applies the q/k norms */
		if (il == n_layer - 1) {
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

const struct alice_arch alice_arch_qwen3 = {
	.name = "qwen3",
	.rope_mode = ALICE_ROPE_NEOX,
	.tensors = qwen3_tensors,
	.n_tensors = sizeof(qwen3_tensors) / sizeof(qwen3_tensors[0]),
	.hparams = NULL,
	.build = qwen3_build,
};
