/* spec.h — speculative decoding: who proposes the drafted tokens, and how
 * many (engine.h verifies them).
 *
 * A step of a speculating request feeds its last token plus k drafted tokens
 * as k+1 rows of one sequence, each computed as a one-token decode (batch
 * "solo" rows, model.h), so row j's logits are those a plain decode would
 * give at that position, bit for bit. Row j is sampled with the request's
 * own sampler (grammar mask, bias, penalties, truncation, temperature, its
 * seeded RNG) exactly as without speculation; drafted token j+1 is accepted
 * when that sample equals it, and the first sample that differs is the
 * step's last token. Every draft here is deterministic (q is a point mass:
 * the n-gram continuation, or the draft model's argmax), for which this is
 * the standard rejection rule: accept x with probability min(1, p(x)/1) =
 * p(x), else draw from p with x removed. So the output is the very sequence
 * the request would have produced without speculation, sampled or greedy;
 * speculation changes only how many target steps it takes. KV cells of
 * rejected positions are dropped (alice_context_seq_truncate) and rewritten
 * later. Recurrent models (state cannot be rewound) never speculate. */
#ifndef ALICE_SPEC_H
#define ALICE_SPEC_H

#include <stdint.h>

#include "alice/status.h"

/* a verify run (drafts + 1 rows of one sequence) stays under every backend's
 * multi-token attention regime (CUDA's flash kernel takes runs of 16+, the
 * CPU's tiled order 64+), so its rows are computed as decode rows are */
#define ALICE_SPEC_MAX_DRAFT 14

enum alice_spec_mode {
	ALICE_SPEC_NONE = 0,
	ALICE_SPEC_NGRAM, /* prompt lookup: continue an earlier occurrence of the context's last n tokens */
	ALICE_SPEC_DRAFT, /* a smaller model with the same vocabulary drafts greedily */
};

struct alice_model;

struct alice_spec_params {
	enum alice_spec_mode mode;
	struct alice_model *draft; /* ALICE_SPEC_DRAFT: borrowed, outlives the engine */
	uint32_t n_max;   /* drafted tokens per step, 1..ALICE_SPEC_MAX_DRAFT; 0 = 14 */
	uint32_t n_min;   /* a shorter draft is not verified; 0 = any */
	float p_min;      /* draft model: stop drafting below this top probability; default 0.75 */
	uint32_t ngram_n; /* n-gram match length, 1..16; 0 = 3 */
};

void alice_spec_params_default(struct alice_spec_params *p);

/* Check params (n_max, n_min, p_min, ngram_n ranges; a draft model iff
 * mode is DRAFT); fills the zero defaults. ALICE_ERR_INVALID names the field. */
enum alice_status alice_spec_params_check(struct alice_spec_params *p, struct alice_error *err);

/* Prompt lookup: the most recent earlier occurrence of the last n tokens of
 * ctx[0, len) and up to n_max tokens that followed it, into out. Returns
 * how many (0: no match). */
int32_t alice_spec_ngram_draft(const int32_t *ctx, int32_t len, int32_t n, int32_t n_max, int32_t *out);

/* Can `draft` draft for `target`: same vocabulary size, the same token
 * texts and the same special ids (BOS, EOS, EOT, ...)? If not, the message
 * names both files and the first difference. */
enum alice_status alice_spec_check_vocab(const struct alice_model *target, const char *target_path,
					 const struct alice_model *draft, const char *draft_path,
					 struct alice_error *err);


/* A draft model's own context: one sequence per engine slot, kept in step
 * with the slot's tokens (only what changed since the last call is fed). */
struct alice_spec_drafter;

/* The model is borrowed. ALICE_ERR_INVALID for a recurrent draft model
 * (its state cannot be rewound after a rejected draft). */
enum alice_status alice_spec_drafter_create(struct alice_model *draft, uint32_t n_seq, uint32_t n_ctx,
					    uint32_t n_batch, struct alice_spec_drafter **out, struct alice_error *err);
void alice_spec_drafter_free(struct alice_spec_drafter *d); /* NULL is a no-op */
/* A request starts on seq keeping the target's first keep positions:
 * the draft keeps no more, so it recomputes the rest as the target does. */
void alice_spec_drafter_keep(struct alice_spec_drafter *d, int32_t seq, int32_t keep);

/* Greedy draft of up to n_max tokens continuing ctx[0, len) on sequence
 * seq, stopping early when the draft's top probability falls below p_min.
 * ctx[0, n_prompt) is the request's prompt: the draft computes it in the
 * target's prefill chunks (n_batch tokens) and the tokens after it as
 * one-row steps, as the target does, so a model drafting for itself holds
 * the target's K/V bit for bit. Returns how many went to out, or -1 when
 * the draft model failed (err). */
int32_t alice_spec_drafter_draft(struct alice_spec_drafter *d, int32_t seq, const int32_t *ctx, int32_t len,
				 int32_t n_prompt, int32_t n_max, float p_min, int32_t *out, struct alice_error *err);

#endif
