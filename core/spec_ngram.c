/* spec_ngram.c — prompt-lookup drafting (spec.h): text that repeats
 * (code, quotes, structured output, a document being edited) continues the
 * way it did last time. Also the speculation parameters' checks. */
#include <string.h>

#include "alice/spec.h"

void alice_spec_params_default(struct alice_spec_params *p)
{
	memset(p, 0, sizeof(*p));
	p->n_max = ALICE_SPEC_MAX_DRAFT;
	p->p_min = 0.75f;
	p->ngram_n = 3;
}

enum alice_status alice_spec_params_check(struct alice_spec_params *p, struct alice_error *err)
{
	if (p->n_max == 0)
		p->n_max = ALICE_SPEC_MAX_DRAFT;
	if (p->ngram_n == 0)
		p->ngram_n = 3;
	if (p->n_max > ALICE_SPEC_MAX_DRAFT)
		return alice_fail(err, ALICE_ERR_INVALID, "draft-max %u is out of range 1..%d", p->n_max,
				  ALICE_SPEC_MAX_DRAFT);
	if (p->n_min > p->n_max)
		return alice_fail(err, ALICE_ERR_INVALID, "draft-min %u is larger than draft-max %u", p->n_min,
				  p->n_max);
	if (!(p->p_min >= 0.0f && p->p_min <= 1.0f))
		return alice_fail(err, ALICE_ERR_INVALID, "draft-p-min %g is out of range [0, 1]", (double)p->p_min);
	if (p->ngram_n > 16)
		return alice_fail(err, ALICE_ERR_INVALID, "spec-ngram %u is out of range 1..16", p->ngram_n);
	if ((p->mode == ALICE_SPEC_DRAFT) != (p->draft != NULL))
		return alice_fail(err, ALICE_ERR_INVALID, "a draft model goes with speculation mode 'draft' only");
	return ALICE_OK;
}

int32_t alice_spec_ngram_draft(const int32_t *ctx, int32_t len, int32_t n, int32_t n_max, int32_t *out)
{
	if (n < 1 || n_max < 1 || len <= n)
		return 0;
	const int32_t *tail = ctx + len - n;
	/* latest start first: recent text predicts best */
	for (int32_t at = len - n - 1; at >= 0; at--) {
		if (ctx[at] != tail[0] || memcmp(ctx + at, tail, (size_t)n * sizeof(*ctx)) != 0)
			continue;
		int32_t k = 0;
		for (int32_t i = at + n; i < len && k < n_max; i++)
			out[k++] = ctx[i];
		return k;
	}
	return 0;
}
