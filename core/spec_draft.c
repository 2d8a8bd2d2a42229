/* spec_draft.c — drafting with a smaller model (spec.h). Each engine slot
 * has a sequence in the draft model's context holding the tokens it was
 * last fed; a call keeps the part that still matches the slot's context,
 * feeds the rest in one step, then decodes the draft's argmax one token at
 * a time. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alice/model.h"
#include "alice/spec.h"

#define DRAFT_BATCH 512

struct alice_spec_drafter {
	struct alice_model *m;
	struct alice_context *ctx;
	uint32_t n_seq, n_ctx, n_batch;
	int32_t n_vocab;
	int32_t *toks; /* [n_seq][n_ctx]: what each sequence holds */
	int32_t *len;  /* [n_seq] */
	int32_t *b_tok, *b_pos, *b_seq;
	bool *b_out, *b_solo;
};

void alice_spec_drafter_free(struct alice_spec_drafter *d)
{
	if (!d)
		return;
	alice_context_free(d->ctx);
	free(d->toks);
	free(d->len);
	free(d->b_tok);
	free(d->b_pos);
	free(d->b_seq);
	free(d->b_out);
	free(d->b_solo);
	free(d);
}

enum alice_status alice_spec_drafter_create(struct alice_model *draft, uint32_t n_seq, uint32_t n_ctx,
					    uint32_t n_batch, struct alice_spec_drafter **out, struct alice_error *err)
{
	*out = NULL;
	if (alice_model_is_recurrent(draft))
		return alice_fail(err, ALICE_ERR_INVALID,
				  "the draft model (%s) is recurrent: its state cannot be rewound after a rejected draft",
				  alice_model_arch(draft));
	struct alice_spec_drafter *d = calloc(1, sizeof(*d));
	if (!d)
		return alice_fail(err, ALICE_ERR_NOMEM, "out of memory");
	d->m = draft;
	d->n_seq = n_seq;
	d->n_batch = n_batch ? n_batch : DRAFT_BATCH;
	d->n_vocab = alice_model_n_vocab(draft);
	struct alice_context_params cp;
	alice_context_params_default(&cp);
	cp.n_ctx = n_ctx;
	cp.n_seq = n_seq;
	cp.n_batch = d->n_batch;
	enum alice_status st = alice_context_create(draft, &cp, &d->ctx, err);
	if (st != ALICE_OK) {
		alice_spec_drafter_free(d);
		return st;
	}
	d->n_ctx = alice_context_n_ctx(d->ctx);
	d->toks = malloc((size_t)n_seq * d->n_ctx * sizeof(*d->toks));
	d->len = calloc(n_seq, sizeof(*d->len));
	d->b_tok = malloc((size_t)d->n_batch * sizeof(*d->b_tok));
	d->b_pos = malloc((size_t)d->n_batch * sizeof(*d->b_pos));
	d->b_seq = malloc((size_t)d->n_batch * sizeof(*d->b_seq));
	d->b_out = malloc((size_t)d->n_batch * sizeof(*d->b_out));
	d->b_solo = malloc((size_t)d->n_batch * sizeof(*d->b_solo));
	if (!d->toks || !d->len || !d->b_tok || !d->b_pos || !d->b_seq || !d->b_out || !d->b_solo) {
		alice_spec_drafter_free(d);
		return alice_fail(err, ALICE_ERR_NOMEM, "out of memory");
	}
	*out = d;
	return ALICE_OK;
}

void alice_spec_drafter_keep(struct alice_spec_drafter *d, int32_t seq, int32_t keep)
{
	if (seq < 0 || (uint32_t)seq >= d->n_seq || keep >= d->len[seq])
		return;
	if (keep < 0 || !alice_context_seq_truncate(d->ctx, seq, keep)) {
		alice_context_seq_clear(d->ctx, seq);
		keep = 0;
	}
	d->len[seq] = keep;
}

/* Feed ctx[from, to) to seq (positions from..), logits for the last. The
 * prompt (positions < n_prompt) goes in as the target's prefill chunks do
 * (n_batch tokens from where its cache ends); the tokens after it as solo
 * rows (each a one-row step, like the target's decode and verify rows), at
 * most ALICE_SPEC_MAX_DRAFT + 1 a step so they keep the decode attention. */
static enum alice_status feed(struct alice_spec_drafter *d, int32_t seq, const int32_t *ctx, int32_t from,
			      int32_t to, int32_t n_prompt, struct alice_error *err)
{
	int32_t *held = d->toks + (size_t)seq * d->n_ctx;
	while (from < to) {
		const bool solo = from >= n_prompt;
		int32_t end = solo ? to : (n_prompt < to ? n_prompt : to);
		int32_t cap = (int32_t)d->n_batch;
		if (solo && cap > ALICE_SPEC_MAX_DRAFT + 1)
			cap = ALICE_SPEC_MAX_DRAFT + 1;
		int32_t n = end - from < cap ? end - from : cap;
		for (int32_t i = 0; i < n; i++) {
			d->b_tok[i] = ctx[from + i];
			d->b_pos[i] = from + i;
			d->b_seq[i] = seq;
			d->b_out[i] = i == n - 1;
			d->b_solo[i] = solo;
		}
		struct alice_batch b = {n, d->b_tok, d->b_pos, d->b_seq, d->b_out, solo ? d->b_solo : NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
		enum alice_status st = alice_context_decode(d->ctx, &b, err);
		if (st != ALICE_OK) {
			alice_context_seq_clear(d->ctx, seq);
			d->len[seq] = 0;
			return st;
		}
		memcpy(held + from, ctx + from, (size_t)n * sizeof(*ctx));
		from += n;
		d->len[seq] = from;
	}
	return ALICE_OK;
}

/* argmax (ties to the lowest id); *sure: its softmax probability is at
 * least p_min. The sum of exp(l - best) stops as soon as it passes 1/p_min
 * (an unsure draft, the common case for an unrelated draft model, costs a
 * few blocks, not a pass over the vocabulary). */
static int32_t top1(const float *l, int32_t n, float p_min, bool *sure)
{
	int32_t best = 0;
	for (int32_t i = 1; i < n; i++)
		if (l[i] > l[best])
			best = i;
	*sure = true;
	if (p_min <= 0)
		return best;
	const double limit = 1.0 / (double)p_min;
	double sum = 0;
	for (int32_t i0 = 0; i0 < n; i0 += 1024) {
		int32_t i1 = i0 + 1024 < n ? i0 + 1024 : n;
		for (int32_t i = i0; i < i1; i++)
			sum += exp((double)l[i] - (double)l[best]);
		if (sum > limit) {
			*sure = false;
			break;
		}
	}
	return best;
}

int32_t alice_spec_drafter_draft(struct alice_spec_drafter *d, int32_t seq, const int32_t *ctx, int32_t len,
				 int32_t n_prompt, int32_t n_max, float p_min, int32_t *out, struct alice_error *err)
{
	if (seq < 0 || (uint32_t)seq >= d->n_seq || len < 1) {
		alice_fail(err, ALICE_ERR_RANGE, "draft: sequence %d / length %d out of range", seq, len);
		return -1;
	}
	if (n_max > (int32_t)d->n_ctx - len)
		n_max = (int32_t)d->n_ctx - len;
	if (n_max < 1)
		return 0;
	/* keep what still matches, but feed at least the last token: its
	 * logits start the draft */
	const int32_t *held = d->toks + (size_t)seq * d->n_ctx;
	int32_t keep = 0;
	while (keep < d->len[seq] && keep < len - 1 && held[keep] == ctx[keep])
		keep++;
	if (!alice_context_seq_truncate(d->ctx, seq, keep)) {
		alice_context_seq_clear(d->ctx, seq);
		keep = 0;
	}
	d->len[seq] = keep;
	if (feed(d, seq, ctx, keep, len, n_prompt, err) != ALICE_OK)
		return -1;
	int32_t k = 0;
	for (;;) {
		bool sure;
		int32_t t = top1(alice_context_logits(d->ctx, 0), d->n_vocab, p_min, &sure);
		if (!sure)
			break;
		out[k++] = t;
		if (k >= n_max)
			break;
		/* the drafted token, as if it were context (positions len + k - 1) */
		int32_t pos = len + k - 1;
		d->b_tok[0] = t;
		d->b_pos[0] = pos;
		d->b_seq[0] = seq;
		d->b_out[0] = true;
		struct alice_batch b = {1, d->b_tok, d->b_pos, d->b_seq, d->b_out, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
		if (alice_context_decode(d->ctx, &b, err) != ALICE_OK) {
			alice_context_seq_clear(d->ctx, seq);
			d->len[seq] = 0;
			return -1;
		}
		d->toks[(size_t)seq * d->n_ctx + pos] = t;
		d->len[seq] = pos + 1;
	}
	return k;
}
