/* qwen2.c — Qwen2 / Qwen2.5: the Llama decoder with q/k/v projection biases
 * and rope in NEOX mode (pairs i, i + n_rot/2); tied output when
 * output.weight is absent. */
#include "arch/arch.h"

static const struct alice_tensor_spec qwen2_tensors[] = {
	ALICE_TS_LLAMA_GLOBAL_ROWS,
	ALICE_TS_LLAMA_ATTN_ROWS,
	ALICE_TS_QKV_BIAS_ROWS(0),
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
