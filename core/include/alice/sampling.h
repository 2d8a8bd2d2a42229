/* sampling.h — the per-request logit pipeline: logit bias, penalties,
 * grammar mask, top-k, top-p, min-p, temperature, seeded sampling, logprobs.
 *
 * One struct alice_sampler per request (it owns its RNG state and token
 * history; not thread-safe, use it from one thread at a time). Steps, in the
 * order llama.cpp's default chain applies them:
 *   1. logit_bias: logits[id] += bias; a bias <= -100 (or -inf) bans the token
 *      (OpenAI: "-100 should result in a ban").
 *   2. penalties over the accepted history (alice_sampler_accept):
 *      - repeat_penalty (llama.cpp semantics): every distinct token among the
 *        last penalty_last_n accepted tokens gets logit / rp if the logit is
 *        positive, logit * rp otherwise;
 *      - frequency/presence (OpenAI semantics): logit -= count * frequency
 *        + (count > 0) * presence, count over ALL accepted tokens.
 *      What counts as history is the caller's choice: the server accepts only
 *      generated tokens (OpenAI semantics); accepting prompt tokens too gives
 *      llama.cpp's behaviour.
 *   3. the allowed mask (grammar): one byte per token, 0 = forbidden; the
 *      token's logit becomes -inf. Since bias and penalties keep -inf at
 *      -inf, applying it here equals applying it before everything else.
 *   4. temperature <= 1e-6: greedy argmax (ties to the lowest id); 5-6 skipped.
 *   5. top_k (0 = off) -> top_p (1 = off; smallest prefix of the sorted
 *      tokens whose probability sum reaches top_p) -> min_p (0 = off; keeps
 *      p >= min_p * p_max), each on the temperature-1 distribution of what
 *      the previous step kept; at least one token always survives.
 *   6. temperature: softmax(logit / T) over the survivors, one draw from the
 *      sampler's xoshiro256** generator (seeded from params.seed by
 *      splitmix64; the same seed and inputs give the same tokens). Tokens
 *      whose probability is below e^-30 of the best one's are never drawn.
 *      Every step at T > 0 takes exactly one uniform, even when a single
 *      token survives, so a step's uniform is known before the previous
 *      step's token is (a pipelined engine draws on the device ahead).
 * Logprobs (when params.logprobs): log_softmax of the bias-adjusted logits
 * (step 1 only: the model's distribution as the client biased it, before
 * penalties, mask, truncation and temperature), for the chosen token and the
 * top params.n_probs tokens (ties by id).
 *
 * Cost per step: O(n_vocab) plus O(k log k) for top-k, and for top-p a
 * quickselect of the best 256 tokens, growing x4 only while their mass is
 * short of top_p; a 150k vocabulary is never fully sorted unless the
 * distribution is nearly flat. */
#ifndef ALICE_SAMPLING_H
#define ALICE_SAMPLING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alice/status.h"
#include "alice/temp_sample.h"

#define ALICE_SAMPLING_MAX_TOP 20 /* OpenAI's top_logprobs maximum */

struct alice_logit_bias {
	int32_t token;
	float bias;
};

struct alice_sampling_params {
	float temperature;       /* 0 = greedy; default 1 */
	int32_t top_k;           /* 0 = off (default) */
	float top_p;             /* (0, 1]; 1 = off (default) */
	float min_p;             /* [0, 1]; 0 = off (default) */
	uint64_t seed;           /* RNG seed; default 0 */
	float repeat_penalty;    /* > 0; 1 = off (default) */
	int32_t penalty_last_n;  /* repeat-penalty window; -1 = all history; default 64 */
	float frequency_penalty; /* [-2, 2] in OpenAI; 0 = off (default) */
	float presence_penalty;  /* [-2, 2] in OpenAI; 0 = off (default) */
	const struct alice_logit_bias *logit_bias; /* copied by _create; may be NULL */
	size_t n_logit_bias;
	bool logprobs;           /* fill the logprob fields of the result */
	int32_t n_probs;         /* top alternatives to report, 0..ALICE_SAMPLING_MAX_TOP */
};

struct alice_token_logprob {
	int32_t token;
	float logprob;
};

struct alice_sample_result {
	int32_t token;
	float logprob; /* of token; 0 when !params.logprobs */
	int32_t n_top; /* entries in top (params.n_probs, or fewer if the vocab is smaller) */
	struct alice_token_logprob top[ALICE_SAMPLING_MAX_TOP]; /* by logprob desc, ties by id */
};

struct alice_sampler;

/* The defaults listed above. */
void alice_sampling_params_default(struct alice_sampling_params *p);

/* Validate params against n_vocab and create a sampler (the caller frees it
 * with alice_sampler_free). Out-of-range values and logit_bias token ids fail
 * with ALICE_ERR_INVALID naming the field. */
enum alice_status alice_sampler_create(const struct alice_sampling_params *params, int32_t n_vocab,
				       struct alice_sampler **out, struct alice_error *err);
void alice_sampler_free(struct alice_sampler *s);

/* Forget the history and restart the RNG from the seed. */
void alice_sampler_reset(struct alice_sampler *s);

/* Record a token into the penalty history (see the header comment). */
enum alice_status alice_sampler_accept(struct alice_sampler *s, int32_t token, struct alice_error *err);

/* One step: logits has n_vocab floats (not modified); allowed_mask is NULL
 * (all allowed) or n_vocab bytes, 0 = forbidden. Fails with ALICE_ERR_INVALID
 * when no token can be sampled (all forbidden/banned/NaN). Does not accept the
 * token: call alice_sampler_accept with it. */
enum alice_status alice_sampler_sample(struct alice_sampler *s, const float *logits,
				       const uint8_t *allowed_mask, struct alice_sample_result *out,
				       struct alice_error *err);

/* A step's logit bias and penalties as per-token edits of the cleaned row,
 * for the backend's LOGIT_ADJUST op (backend.h): at most one record per
 * token, its edits applied in this order, each result cleaned
 * (alice/temp_sample.h), with the same float operations as the sampler. */
struct alice_logit_adj { /* flags: ALICE_ADJ_* (alice/temp_sample.h) */
	int32_t token;
	uint32_t flags;
	float bias, rp, pen;
};
/* The edits this step of s would make before choosing (none without bias
 * and penalties) into out[cap]; how many, or -1 when they do not fit or a
 * token has two bias entries (the whole row is then read). A row takes at
 * most ALICE_ADJ_ROW_MAX on the device. */
#define ALICE_ADJ_ROW_MAX 1024
int32_t alice_sampler_adjustments(const struct alice_sampler *s, struct alice_logit_adj *out, int32_t cap);

/* Whether a step of s depends only on the best k logits (so the backend
 * can pick them and the whole row need not be read): no logprobs, greedy
 * or 1 <= top_k <= k, and no bias or penalties unless adjusted (the backend
 * applied alice_sampler_adjustments to the row first). */
bool alice_sampler_top_ok(const struct alice_sampler *s, int32_t k, bool adjusted);

/* Whether the next step's row is set up the same before this step's token
 * is known: no logprobs, and no penalties (their records depend on the
 * tokens so far; a logit bias does not), so a pipelined engine may launch
 * it before this step's pick reaches the host. */
bool alice_sampler_pipeline_ok(const struct alice_sampler *s);

/* Logprobs from the backend (its LOGSUMEXP op and best k entries): when s
 * asks logprobs, has no penalties (the row the backend edits is then the
 * bias-adjusted row logprobs are of) and n_probs <= k, switch s so that
 * top_ok / temp_ok no longer refuse the logprobs, and return true; the
 * caller then fills each step's with alice_sampler_logprobs_top. */
bool alice_sampler_device_logprobs(struct alice_sampler *s, int32_t k);
/* A step's logprobs (out->logprob, out->top) from the row's best k entries
 * (TOPK), the row's max mx and LOGSUMEXP sum (temp_sample.h), and the
 * chosen token's value: what alice_sampler_sample would report. */
enum alice_status alice_sampler_logprobs_top(const struct alice_sampler *s, const int32_t *top, int32_t k, float mx,
					     double sum, float chosen, struct alice_sample_result *out,
					     struct alice_error *err);

/* The same step as alice_sampler_sample (same token, same RNG use) from the
 * row's best k entries: top holds k (id, value bits) pairs, best first, ties
 * to the lower id, values cleaned (backend.h's TOPK), of the row adjusted
 * as `adjusted` says. Needs top_ok(s, k, adjusted). */
enum alice_status alice_sampler_sample_top(struct alice_sampler *s, const int32_t *top, int32_t k, bool adjusted,
					   struct alice_sample_result *out, struct alice_error *err);

/* Whether a step of s is a plain draw at temperature T from the whole row
 * (no truncation or logprobs; no bias or penalties unless adjusted, as for
 * top_ok), which the backend's SAMPLE_TEMP op makes as this sampler would
 * (alice/temp_sample.h). */
bool alice_sampler_temp_ok(const struct alice_sampler *s, bool adjusted);
/* That step's op parameters: T, and the uniform its draw would use (the
 * RNG does not advance), or with ahead > 0 the uniform of the draw that
 * many steps later (steps still in flight each take one). */
void alice_sampler_temp_params(const struct alice_sampler *s, int32_t ahead, float *t, double *r);
/* The backend drew token (used: whether it needed the uniform; the RNG
 * advances by one either way, as alice_sampler_sample's does). token < 0:
 * nothing could be sampled (ALICE_ERR_INVALID). */
enum alice_status alice_sampler_temp_done(struct alice_sampler *s, int32_t token, bool used,
					  struct alice_sample_result *out, struct alice_error *err);

/* Steps 1-3 only (bias, penalties, mask): write the n_vocab transformed
 * logits to out (-inf = excluded). For tests and diagnostics. */
enum alice_status alice_sampler_transform(struct alice_sampler *s, const float *logits,
					  const uint8_t *allowed_mask, float *out, struct alice_error *err);

#endif
