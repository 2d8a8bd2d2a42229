/* llama.c — the Llama family (Llama 1/2/3, Mistral-style): pre-norm
 * decoder, RMSNorm, rope in NORMAL mode (pairs 2i, 2i+1) with optional
 * frequency factors (rope_freqs.weight: Llama-3.1 scaling), GQA attention,
 * SwiGLU FFN, output tied to token_embd when output.weight is absent. */
#include "arch/arch.h"

static const struct alice_tensor_spec llama_tensors[] = {
	ALICE_TS_LLAMA_GLOBAL_ROWS,
	{ALICE_W_ROPE_FREQS, ALICE_TS_OPTIONAL | ALICE_TS_F32, {ALICE_D_ROT_HALF, ALICE_D_NONE}, "rope_freqs.weight",
	 ALICE_TI_ROPE_FREQS},
	ALICE_TS_LLAMA_ATTN_ROWS,
	/* some Llama-family finetunes carry q/k/v biases; llama.cpp accepts them */
	ALICE_TS_QKV_BIAS_ROWS(ALICE_TS_OPTIONAL),
	ALICE_TS_LLAMA_FFN_ROWS,
};

const struct alice_arch alice_arch_llama = {
	.name = "llama",
	.rope_mode = ALICE_ROPE_NORMAL,
	.tensors = llama_tensors,
	.n_tensors = sizeof(llama_tensors) / sizeof(llama_tensors[0]),
	.hparams = NULL,
	.build = alice_build_llama_decoder,
};
