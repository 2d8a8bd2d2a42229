/* qwen3.c — Qwen3 (dense): the Llama decoder with per-head RMSNorm of q and
 * k over head_dim (attn_q_norm / attn_k_norm, before rope), no biases, rope
 * in NEOX mode; tied output when output.weight is absent. */
#include "arch/arch.h"

static const struct alice_tensor_spec qwen3_tensors[] = {
	ALICE_TS_LLAMA_GLOBAL_ROWS,
	ALICE_TS_LLAMA_ATTN_ROWS,
	ALICE_TS_QK_NORM_ROWS(0),
	ALICE_TS_LLAMA_FFN_ROWS,
};

const struct alice_arch alice_arch_qwen3 = {
	.name = "qwen3",
	.rope_mode = ALICE_ROPE_NEOX,
	.tensors = qwen3_tensors,
	.n_tensors = sizeof(qwen3_tensors) / sizeof(qwen3_tensors[0]),
	.hparams = NULL,
	.build = alice_build_llama_decoder, /* alice_build_attention applies the q/k norms */
};
