/* arch.h — what a model family provides, and the shared builders families
 * compose their step graphs from.
 *
 * An architecture is one file in core/arch/ defining a const struct
 * alice_arch (hyper-parameter hook, tensor table, graph builder) plus one line
 * in registry.c. Nothing else in the core learns an architecture's name.
 * Private to the core. */
#ifndef ALICE_CORE_ARCH_H
#define ALICE_CORE_ARCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alice/backend.h"
#include "alice/gguf.h"
#include "alice/status.h"
#include "graph.h"

struct alice_hparams {
	char arch[32];
	uint32_t n_ctx_train;
	uint32_t n_embd;
	uint32_t n_layer;
	uint32_t n_ff;
	uint32_t n_head;
	uint32_t n_head_kv;
	uint32_t head_dim_k; /* attention.key_length */
	uint32_t head_dim_v; /* attention.value_length */
	uint32_t n_rot;      /* rope.dimension_count */
	uint32_t n_vocab;
	float rms_eps;
	float rope_base;
	float rope_freq_scale; /* 1/factor for linear scaling, else 1 */
	float attn_scale;      /* on q.k; default 1/sqrt(head_dim_k) */
	int rope_mode;         /* enum alice_rope_mode */

	/* Family extras, set by an arch's hparams hook (0 = unused). */
	float attn_softcap;      /* soft-cap of attention logits (gemma2) */
	float final_softcap;     /* soft-cap of the output logits (gemma2) */
	uint32_t n_swa;          /* sliding window: a query at p sees positions > p - n_swa; 0 = none */
	uint32_t swa_period;     /* layer il is windowed when il % period < period - 1 (0: every layer) */
	int32_t rope_sections[4];/* IMROPE sections t, h, w, e (rope dimension pairs) */
	uint32_t ssm_d_conv;     /* recurrent layers (qwen35): conv kernel */
	uint32_t ssm_d_state;    /* head size of the delta-rule k/v heads */
	uint32_t ssm_n_group;    /* k heads */
	uint32_t ssm_dt_rank;    /* v heads */
	uint32_t ssm_d_inner;    /* v heads * head size */
	uint32_t full_attn_interval; /* layer il is full attention when (il+1) % interval == 0 */
};

/* Weight slots. Globals use alice_weights.global, the rest .layer[il]. */
enum alice_wslot {
	ALICE_W_TOKEN_EMBD,
	ALICE_W_OUTPUT_NORM,
	ALICE_W_OUTPUT,
	ALICE_W_ROPE_FREQS,
	ALICE_W_ATTN_NORM,
	ALICE_W_ATTN_Q,
	ALICE_W_ATTN_K,
	ALICE_W_ATTN_V,
	ALICE_W_ATTN_OUT,
	ALICE_W_ATTN_Q_B,
	ALICE_W_ATTN_K_B,
	ALICE_W_ATTN_V_B,
	ALICE_W_ATTN_Q_NORM,
	ALICE_W_ATTN_K_NORM,
	ALICE_W_FFN_NORM,
	ALICE_W_FFN_GATE,
	ALICE_W_FFN_UP,
	ALICE_W_FFN_DOWN,
	ALICE_W_ATTN_POST_NORM, /* gemma2 post_attention_norm; qwen35 uses it as the pre-FFN norm */
	ALICE_W_FFN_POST_NORM,
	ALICE_W_ATTN_QKV,       /* fused q|k|v projection of a recurrent layer */
	ALICE_W_ATTN_GATE,      /* z gate of a recurrent layer */
	ALICE_W_SSM_CONV1D,
	ALICE_W_SSM_DT_B,
	ALICE_W_SSM_A,
	ALICE_W_SSM_BETA,
	ALICE_W_SSM_ALPHA,
	ALICE_W_SSM_NORM,
	ALICE_W_SSM_OUT,
	ALICE_W_COUNT
};

/* Symbolic dimensions of the tensor table, resolved from the hparams. */
enum alice_dim {
	ALICE_D_NONE = 0, /* 1 (unused dim) */
	ALICE_D_EMBD,     /* n_embd */
	ALICE_D_FF,       /* n_ff */
	ALICE_D_VOCAB,    /* n_vocab */
	ALICE_D_Q,        /* n_head * head_dim_k */
	ALICE_D_K,        /* n_head_kv * head_dim_k */
	ALICE_D_V,        /* n_head_kv * head_dim_v */
	ALICE_D_O,        /* n_head * head_dim_v */
	ALICE_D_HEAD_K,   /* head_dim_k */
	ALICE_D_ROT_HALF, /* n_rot / 2 */
	ALICE_D_Q_GATED,  /* 2 * n_head * head_dim_k (query and output gate per head) */
	ALICE_D_SSM_CONV_K,   /* ssm_d_conv */
	ALICE_D_SSM_CONV_DIM, /* 2 * ssm_n_group * ssm_d_state + ssm_d_inner */
	ALICE_D_SSM_INNER,    /* ssm_d_inner */
	ALICE_D_SSM_HEADS_V,  /* ssm_dt_rank */
	ALICE_D_SSM_HEAD_V,   /* ssm_d_inner / ssm_dt_rank */
};

enum alice_tspec_flags {
	ALICE_TS_LAYER = 1u << 0,    /* "blk.N.<name>" for every layer */
	ALICE_TS_OPTIONAL = 1u << 1, /* may be absent */
	ALICE_TS_F32 = 1u << 2,      /* must be F32 (norms, biases, factors); else any supported type */
};

struct alice_tensor_spec {
	uint8_t slot;      /* enum alice_wslot */
	uint8_t flags;     /* enum alice_tspec_flags */
	uint8_t ne[2];     /* enum alice_dim; 1-D tensors use ALICE_D_NONE for ne[1] */
	const char *name;  /* "attn_q.weight" (per layer) or "token_embd.weight" */
};

/* Tensor-table rows of the Llama-style decoder (llama.c, qwen2.c, qwen3.c),
 * spelled once: a table is GLOBAL, [its extras], ATTN, [its extras], FFN. */
#define ALICE_TS_LLAMA_GLOBAL_ROWS \
	{ALICE_W_TOKEN_EMBD, 0, {ALICE_D_EMBD, ALICE_D_VOCAB}, "token_embd.weight"}, \
	{ALICE_W_OUTPUT_NORM, ALICE_TS_F32, {ALICE_D_EMBD, ALICE_D_NONE}, "output_norm.weight"}, \
	{ALICE_W_OUTPUT, ALICE_TS_OPTIONAL, {ALICE_D_EMBD, ALICE_D_VOCAB}, "output.weight"}
#define ALICE_TS_LLAMA_ATTN_ROWS \
	{ALICE_W_ATTN_NORM, ALICE_TS_LAYER | ALICE_TS_F32, {ALICE_D_EMBD, ALICE_D_NONE}, "attn_norm.weight"}, \
	{ALICE_W_ATTN_Q, ALICE_TS_LAYER, {ALICE_D_EMBD, ALICE_D_Q}, "attn_q.weight"}, \
	{ALICE_W_ATTN_K, ALICE_TS_LAYER, {ALICE_D_EMBD, ALICE_D_K}, "attn_k.weight"}, \
	{ALICE_W_ATTN_V, ALICE_TS_LAYER, {ALICE_D_EMBD, ALICE_D_V}, "attn_v.weight"}, \
	{ALICE_W_ATTN_OUT, ALICE_TS_LAYER, {ALICE_D_O, ALICE_D_EMBD}, "attn_output.weight"}
#define ALICE_TS_LLAMA_FFN_ROWS \
	{ALICE_W_FFN_NORM, ALICE_TS_LAYER | ALICE_TS_F32, {ALICE_D_EMBD, ALICE_D_NONE}, "ffn_norm.weight"}, \
	{ALICE_W_FFN_GATE, ALICE_TS_LAYER, {ALICE_D_EMBD, ALICE_D_FF}, "ffn_gate.weight"}, \
	{ALICE_W_FFN_UP, ALICE_TS_LAYER, {ALICE_D_EMBD, ALICE_D_FF}, "ffn_up.weight"}, \
	{ALICE_W_FFN_DOWN, ALICE_TS_LAYER, {ALICE_D_FF, ALICE_D_EMBD}, "ffn_down.weight"}

/* Bound weights: tensors[] as the backend sees them, slots index it (-1 absent). */
struct alice_weights {
	const struct alice_tensor *tensors;
	int32_t global[ALICE_W_COUNT];
	int32_t (*layer)[ALICE_W_COUNT]; /* [n_layer] */
};

#define ALICE_LAYER_STATES 2 /* recurrent state tensors per layer, at most */

/* One step's inputs, as the arch builder sees them. The gb indices of the
 * inputs are created by the model before calling build. */
struct alice_step {
	const struct alice_hparams *hp;
	const struct alice_weights *w;
	const struct alice_tensor *k_cache; /* [n_layer]: [head_dim_k, n_head_kv, n_cells] */
	const struct alice_tensor *v_cache; /* [n_layer]: [head_dim_v, n_head_kv, n_cells] */
	int32_t n_tokens;
	int32_t n_out;
	int32_t inp_tokens; /* I32 [n_tokens] */
	int32_t inp_pos;    /* I32 [n_tokens] */
	int32_t inp_ranges; /* I32 [2, n_tokens] attended cells [start, end) */
	int32_t inp_cells;  /* I32 [n_tokens] cache cell of each token */
	int32_t inp_out;    /* I32 [n_out] rows whose logits are wanted */
	/* (IMROPE: inp_pos is I32 [4 * n_tokens]: t, h, w positions = the token
	 * position, e = 0, as llama.cpp does for text.) */
	int32_t inp_seq;        /* I32 [n_tokens] sequence of each token */
	int32_t inp_ranges_swa; /* I32 [2, n_tokens] ranges limited to the window (hp->n_swa > 0), else -1 */
	/* Recurrent state (arch->layer_state): state[il * ALICE_LAYER_STATES + k],
	 * F32 with the sequence as its last dim; buf NULL / ne 0 where a layer has none. */
	const struct alice_tensor *state;
};

struct alice_arch {
	const char *name; /* general.architecture */
	int rope_mode;    /* enum alice_rope_mode */
	const struct alice_tensor_spec *tensors;
	size_t n_tensors;
	/* Family-specific keys after the common ones; NULL = none. */
	enum alice_status (*hparams)(const struct alice_gguf *g, struct alice_hparams *hp,
				     struct alice_error *err);
	/* Returns the logits tensor, F32 [n_vocab, n_out]; -1 with gb's error set. */
	int32_t (*build)(struct alice_gb *gb, const struct alice_step *st);
	/* Optional (NULL = no recurrent state): per-sequence state of layer il.
	 * Fills ne[k][0..2] (F32 elements; the context adds the sequence dim) for
	 * k < the returned count (<= ALICE_LAYER_STATES); 0 = none for this layer.
	 * The context zeroes a sequence's state on seq_clear. */
	int (*layer_state)(const struct alice_hparams *hp, int il, int64_t ne[ALICE_LAYER_STATES][3]);
	/* Optional (NULL = every layer): does layer il attend over a KV cache?
	 * Layers without one get k_cache/v_cache entries with buf NULL. */
	bool (*layer_has_kv)(const struct alice_hparams *hp, int il);
};

/* ---- registry (registry.c) ---- */
const struct alice_arch *alice_arch_find(const char *name);
/* "llama, qwen2, qwen3" */
const char *alice_arch_supported_list(void);

/* ---- hyper-parameters (common.c) ---- */
/* Reads <arch>.* keys as llama.cpp does; n_vocab_fallback is used when
 * <arch>.vocab_size is absent. Errors name the file and key. */
enum alice_status alice_hparams_load(const struct alice_gguf *g, const struct alice_arch *a,
				     int64_t n_vocab_fallback, struct alice_hparams *hp,
				     struct alice_error *err);
int64_t alice_dim_value(const struct alice_hparams *hp, uint8_t dim);

/* ---- shared builders (common.c) ---- */
/* The graph tensor of weight `slot` of layer il (il < 0: global); -1 if absent. */
int32_t alice_build_weight(struct alice_gb *gb, const struct alice_step *st, int il, int slot);
/* token embeddings: F32 [n_embd, n_tokens] */
int32_t alice_build_inp_embd(struct alice_gb *gb, const struct alice_step *st);
/* rms_norm(x) * w(slot) */
int32_t alice_build_norm(struct alice_gb *gb, const struct alice_step *st, int il, int slot, int32_t x);
/* Self-attention of layer il on normed input x [n_embd, n_tokens]:
 * q/k/v projections (+ biases and per-head q/k norms where the layer has
 * them) -> rope -> KV_WRITE into the cache -> ATTENTION over each token's
 * cell range -> output projection. Returns [n_embd, n_tokens]. */
int32_t alice_build_attention(struct alice_gb *gb, const struct alice_step *st, int il, int32_t x);
/* down(act(gate(x)) * up(x)); act = ALICE_ACT_SILU (SwiGLU) or GELU (GeGLU). */
int32_t alice_build_ffn_glu(struct alice_gb *gb, const struct alice_step *st, int il, int32_t x, int act);
/* Keep only the rows whose logits are wanted: get_rows(x, inp_out). */
int32_t alice_build_out_rows(struct alice_gb *gb, const struct alice_step *st, int32_t x);
/* output_norm -> output (or the tied token_embd) -> logits [n_vocab, n_out]. */
int32_t alice_build_lm_head(struct alice_gb *gb, const struct alice_step *st, int32_t x);

/* The Llama-style pre-norm decoder step (llama, qwen2, qwen3): per layer
 * x += attention(norm(x)); x += SwiGLU FFN(norm(x)); then the head. The
 * family differences live in the tensor table: alice_build_attention adds
 * q/k/v biases and per-head q/k norms where a layer has them. */
int32_t alice_build_llama_decoder(struct alice_gb *gb, const struct alice_step *st);

#endif
