/* arch.h — what a model family provides, and the shared builders families
 * compose their step graphs from.
 *
 * An architecture is one file in core/arch/ defining a const struct
 * alice_arch (hyper-parameter hook, tensor table, graph builder) plus one line
 * in registry.c. Nothing else in the core learns an architecture's name: a
 * family's own hyper-parameters live in its private struct (hp->priv, sized
 * by priv_size), its own weight slots and table dimensions are numbered from
 * ALICE_W_ARCH0 / ALICE_D_ARCH0 in its file and resolved by its dim hook,
 * and its table is what the loader binds and what core/synth.c writes, so
 * every registered family can be made as a synthetic model. Private to the core. */
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
	/* Sliding window, set by an arch's hparams hook: a windowed query at p
	 * sees positions > p - n_swa (the context builds st->inp_ranges_swa); 0 = none. */
	uint32_t n_swa;
	/* The family's own hyper-parameters: arch->priv_size zeroed bytes the
	 * loader allocates and arch->hparams fills; NULL when priv_size is 0.
	 * Owned by the hparams (alice_hparams_free). */
	void *priv;
};

/* Weight slots. Globals use alice_weights.global, the rest .layer[il]. The
 * shared slots are listed here; a family numbers its own from ALICE_W_ARCH0
 * in its file (at most ALICE_W_ARCH_SLOTS of them). */
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
	ALICE_W_ARCH0, /* first family-private slot */
	ALICE_W_COUNT = ALICE_W_ARCH0 + 12
};
#define ALICE_W_ARCH_SLOTS (ALICE_W_COUNT - ALICE_W_ARCH0)

/* Symbolic dimensions of the tensor table, resolved from the hparams
 * (alice_dim_value). A family numbers its own from ALICE_D_ARCH0 and
 * resolves them in arch->dim. */
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
	ALICE_D_ARCH0 = 32, /* first family-private dimension */
};

enum alice_tspec_flags {
	ALICE_TS_LAYER = 1u << 0,    /* "blk.N.<name>" for every layer */
	ALICE_TS_OPTIONAL = 1u << 1, /* may be absent */
	ALICE_TS_F32 = 1u << 2,      /* must be F32 (norms, biases, factors); else any supported type */
	/* Only on the layers that attend over a KV cache (arch->layer_has_kv) /
	 * only on those with recurrent state (arch->layer_state); not bound elsewhere. */
	ALICE_TS_KV_LAYERS = 1u << 3,
	ALICE_TS_STATE_LAYERS = 1u << 4,
	/* F32, F16 or BF16, never quantized (llama-quantize keeps BERT's token
	 * types so: the graph copies a row of it to F32); synth writes F32 */
	ALICE_TS_FLOAT = 1u << 5,
};

/* What a synthetic model's tensor holds (core/synth.c, alice-mkmodel). */
enum alice_tinit {
	ALICE_TI_MATRIX = 0, /* N(0, 1/ne0): projections, embeddings */
	ALICE_TI_ONES,       /* N(1, 0.05^2): norm weights */
	ALICE_TI_SMALL,      /* N(0, 0.1^2): biases */
	ALICE_TI_NEGATIVE,   /* N(-1, 0.05^2): decay rates (-exp(A_log)) */
	ALICE_TI_ROPE_FREQS, /* Llama-3.1 rope frequency factors */
};

struct alice_tensor_spec {
	uint8_t slot;      /* enum alice_wslot, or a family slot */
	uint8_t flags;     /* enum alice_tspec_flags */
	uint8_t ne[2];     /* enum alice_dim or a family dim; 1-D tensors use ALICE_D_NONE for ne[1] */
	const char *name;  /* "attn_q.weight" (per layer) or "token_embd.weight" */
	uint8_t init;      /* enum alice_tinit */
};

/* Tensor-table rows of the Llama-style decoder (llama.c, qwen2.c, qwen3.c),
 * spelled once: a table is GLOBAL, [its extras], ATTN, [its extras], FFN. */
#define ALICE_TS_TOKEN_EMBD_ROW {ALICE_W_TOKEN_EMBD, 0, {ALICE_D_EMBD, ALICE_D_VOCAB}, "token_embd.weight", 0}
#define ALICE_TS_OUTPUT_NORM_ROW \
	{ALICE_W_OUTPUT_NORM, ALICE_TS_F32, {ALICE_D_EMBD, ALICE_D_NONE}, "output_norm.weight", ALICE_TI_ONES}
#define ALICE_TS_OUTPUT_ROW {ALICE_W_OUTPUT, ALICE_TS_OPTIONAL, {ALICE_D_EMBD, ALICE_D_VOCAB}, "output.weight", 0}
#define ALICE_TS_LLAMA_GLOBAL_ROWS ALICE_TS_TOKEN_EMBD_ROW, ALICE_TS_OUTPUT_NORM_ROW, ALICE_TS_OUTPUT_ROW
#define ALICE_TS_ATTN_NORM_ROW \
	{ALICE_W_ATTN_NORM, ALICE_TS_LAYER | ALICE_TS_F32, {ALICE_D_EMBD, ALICE_D_NONE}, "attn_norm.weight", ALICE_TI_ONES}
#define ALICE_TS_LLAMA_QKVO_ROWS \
	{ALICE_W_ATTN_Q, ALICE_TS_LAYER, {ALICE_D_EMBD, ALICE_D_Q}, "attn_q.weight", 0}, \
	{ALICE_W_ATTN_K, ALICE_TS_LAYER, {ALICE_D_EMBD, ALICE_D_K}, "attn_k.weight", 0}, \
	{ALICE_W_ATTN_V, ALICE_TS_LAYER, {ALICE_D_EMBD, ALICE_D_V}, "attn_v.weight", 0}, \
	{ALICE_W_ATTN_OUT, ALICE_TS_LAYER, {ALICE_D_O, ALICE_D_EMBD}, "attn_output.weight", 0}
#define ALICE_TS_LLAMA_ATTN_ROWS ALICE_TS_ATTN_NORM_ROW, ALICE_TS_LLAMA_QKVO_ROWS
#define ALICE_TS_QKV_BIAS_ROWS(extra) \
	{ALICE_W_ATTN_Q_B, ALICE_TS_LAYER | ALICE_TS_F32 | (extra), {ALICE_D_Q, ALICE_D_NONE}, "attn_q.bias", ALICE_TI_SMALL}, \
	{ALICE_W_ATTN_K_B, ALICE_TS_LAYER | ALICE_TS_F32 | (extra), {ALICE_D_K, ALICE_D_NONE}, "attn_k.bias", ALICE_TI_SMALL}, \
	{ALICE_W_ATTN_V_B, ALICE_TS_LAYER | ALICE_TS_F32 | (extra), {ALICE_D_V, ALICE_D_NONE}, "attn_v.bias", ALICE_TI_SMALL}
#define ALICE_TS_QK_NORM_ROWS(extra) \
	{ALICE_W_ATTN_Q_NORM, ALICE_TS_LAYER | ALICE_TS_F32 | (extra), {ALICE_D_HEAD_K, ALICE_D_NONE}, "attn_q_norm.weight", \
	 ALICE_TI_ONES}, \
	{ALICE_W_ATTN_K_NORM, ALICE_TS_LAYER | ALICE_TS_F32 | (extra), {ALICE_D_HEAD_K, ALICE_D_NONE}, "attn_k_norm.weight", \
	 ALICE_TI_ONES}
#define ALICE_TS_FFN_NORM_ROW(gguf_name) \
	{ALICE_W_FFN_NORM, ALICE_TS_LAYER | ALICE_TS_F32, {ALICE_D_EMBD, ALICE_D_NONE}, gguf_name, ALICE_TI_ONES}
#define ALICE_TS_GLU_ROWS \
	{ALICE_W_FFN_GATE, ALICE_TS_LAYER, {ALICE_D_EMBD, ALICE_D_FF}, "ffn_gate.weight", 0}, \
	{ALICE_W_FFN_UP, ALICE_TS_LAYER, {ALICE_D_EMBD, ALICE_D_FF}, "ffn_up.weight", 0}, \
	{ALICE_W_FFN_DOWN, ALICE_TS_LAYER, {ALICE_D_FF, ALICE_D_EMBD}, "ffn_down.weight", 0}
#define ALICE_TS_LLAMA_FFN_ROWS ALICE_TS_FFN_NORM_ROW("ffn_norm.weight"), ALICE_TS_GLU_ROWS

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
	int32_t inp_ranges; /* I32 [2, n_tokens] attended (virtual) cells [start, end) */
	int32_t inp_cells;  /* I32 [n_tokens] (physical) cache cell of each token, for KV_WRITE */
	/* (the paged cache: every alice_gb_attention gets the context's block
	 * table as src4, graph.h alice_gb_set_kv_pages) */
	int32_t inp_out;    /* I32 [n_out] rows whose logits are wanted */
	/* (IMROPE: inp_pos is I32 [4 * n_tokens]: t, h, w positions = the token
	 * position, e = 0, as llama.cpp does for text.) */
	int32_t inp_seq;        /* I32 [n_tokens] sequence of each token */
	int32_t inp_ranges_swa; /* I32 [2, n_tokens] ranges limited to the window (hp->n_swa > 0), else -1 */
	/* Recurrent state (arch->layer_state): state[il * ALICE_LAYER_STATES + k],
	 * F32 with the sequence as its last dim; buf NULL / ne 0 where a layer has none. */
	const struct alice_tensor *state;
	/* Embeddings step: the builder returns the final hidden state F32
	 * [n_embd, n_out] (a decoder's after its output norm, no lm_head)
	 * instead of the logits. */
	bool embd;
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
	/* Bytes of the family's private hyper-parameters (hp->priv); 0 = none. */
	size_t priv_size;
	/* Optional (NULL = no family dims): the size of family dimension dim
	 * (>= ALICE_D_ARCH0) of its tensor table; -1 = not one of its dims. */
	int64_t (*dim)(const struct alice_hparams *hp, uint8_t dim);
	/* Family metadata of a small synthetic model, "key=value ..." with keys
	 * after "<arch>." (core/synth.c: alice-mkmodel --arch, the registry
	 * test); NULL = the common keys suffice. */
	const char *synth_kv;
	/* An encoder (BERT): bidirectional attention (a token attends every
	 * token of its sequence, so a sequence is decoded whole in one step,
	 * and no KV is reused across requests) and no lm_head: it runs only
	 * as an embeddings model. */
	bool encoder;
};

/* ---- registry (registry.c) ---- */
const struct alice_arch *alice_arch_find(const char *name);
/* The i-th registered architecture (registry order); NULL past the end. */
const struct alice_arch *alice_arch_at(size_t i);
/* "llama, qwen2, qwen3, ..." */
const char *alice_arch_supported_list(void);

/* ---- hyper-parameters (hparams.c) ---- */
/* Reads <arch>.* keys as llama.cpp does, then the family's through
 * a->hparams; n_vocab_fallback is used when <arch>.vocab_size is absent.
 * Errors name the file and key. On success the caller frees with
 * alice_hparams_free (on failure nothing is left to free). */
enum alice_status alice_hparams_load(const struct alice_gguf *g, const struct alice_arch *a,
				     int64_t n_vocab_fallback, struct alice_hparams *hp,
				     struct alice_error *err);
void alice_hparams_free(struct alice_hparams *hp);
/* The size of tensor-table dimension dim (a shared one, or a's own through
 * a->dim); -1 if unknown. */
int64_t alice_dim_value(const struct alice_arch *a, const struct alice_hparams *hp, uint8_t dim);
/* Does spec sp have a tensor on layer il (il < 0: a global spec)? Layer
 * kinds come from ALICE_TS_KV_LAYERS / ALICE_TS_STATE_LAYERS. */
bool alice_arch_spec_on_layer(const struct alice_arch *a, const struct alice_hparams *hp,
			      const struct alice_tensor_spec *sp, int il);

/* ---- shared builders (builders.c) ---- */
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
/* output_norm -> output (or the tied token_embd) -> logits [n_vocab, n_out];
 * an embeddings step (st->embd) stops after output_norm: [n_embd, n_out]. */
int32_t alice_build_lm_head(struct alice_gb *gb, const struct alice_step *st, int32_t x);

/* The token mixer of layer il (attention or a recurrent layer) on normed
 * input x [n_embd, n_tokens]; returns [n_embd, n_tokens]. */
typedef int32_t (*alice_mixer_fn)(struct alice_gb *gb, const struct alice_step *st, int il, int32_t x);
/* A pre-norm decoder step: per layer x += mixer(attn_norm(x)); x +=
 * SwiGLU FFN(ffn_norm(x)); then the head. */
int32_t alice_build_prenorm_decoder(struct alice_gb *gb, const struct alice_step *st, alice_mixer_fn mixer);
/* The Llama-style pre-norm decoder step (llama, qwen2, qwen3): per layer
 * x += attention(norm(x)); x += SwiGLU FFN(norm(x)); then the head. The
 * family differences live in the tensor table: alice_build_attention adds
 * q/k/v biases and per-head q/k norms where a layer has them. */
int32_t alice_build_llama_decoder(struct alice_gb *gb, const struct alice_step *st);

#endif
