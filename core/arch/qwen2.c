/* qwen2.c — Qwen2 / Qwen2.5: the Llama decoder with q/k/v projection biases
 * and rope in NEOX mode (pairs i, i + n_rot/2); tied output when
 * output.weight is absent. */
#include "arch/arch.h"

#define L ALICE_TS_LAYER
#define F32 ALICE_TS_F32

static const struct alice_tensor_spec qwen2_tensors[] = {
	ALICE_TS_LLAMA_GLOBAL_ROWS,
	ALICE_TS_LLAMA_ATTN_ROWS,
	{ALICE_W_ATTN_Q_B, L | F32, {ALICE_D_Q, ALICE_D_NONE}, "attn_q.bias"},
	{ALICE_W_ATTN_K_B, L | F32, {ALICE_D_K, ALICE_D_NONE}, "attn_k.bias"},
	{ALICE_W_ATTN_V_B, L | F32, {ALICE_D_V, ALICE_D_NONE}, "attn_v.bias"},
	ALICE_TS_LLAMA_FFN_ROWS,
};

const struct alice_arch alice_arch_qwen2 = {
	.name = "qwen2",
	.rope_mode = ALICE_ROPE_NEOX,
	.tensors = qwen2_tensors,
	.n_tensors = sizeof(qwen2_tensors) / sizeof(qwen2_tensors[0]),
	.hparams = NULL,
	.build = alice_build_llama_decoder, /* alice_build_attention adds the biases */
};
