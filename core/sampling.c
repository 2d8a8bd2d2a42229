/* sampling.c — the per-request logit pipeline (see alice/sampling.h). */
#include "alice/sampling.h"
#include "alice/sbuf.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alice/temp_sample.h"
#include "alice/vexp.h"

struct cand {
	int32_t id;
	float l; /* logit */
	float w; /* unnormalised probability, where a step needs it */
};

/* Tokens more than this many (temperature-scaled) nats below the best have
 * a relative probability under e^-30 ~ 1e-13 and are dropped before any
 * step: they could never pass min-p or top-p (< 1), and their total mass in
 * a 150k vocabulary is < 2e-8. This keeps peaked distributions cheap. */
#define NEGLIGIBLE_NATS 30.0f

struct alice_sampler {
	struct alice_sampling_params p;
	struct alice_logit_bias *bias; /* own copy of p.logit_bias */
	int32_t n_vocab;
	float *work;       /* n_vocab: the logits being transformed */
	struct cand *cand; /* n_vocab: surviving candidates */
	int32_t *hist;     /* accepted tokens */
	size_t n_hist, cap_hist;
	int32_t *counts;   /* n_vocab, only with frequency/presence penalties */
	int32_t *distinct; /* tokens whose count is > 0 */
	size_t n_distinct, cap_distinct;
	uint32_t *stamp;   /* n_vocab, only with repeat_penalty: dedupes the window */
	uint32_t stamp_gen;
	uint64_t rng[4];
	bool lp_device; /* logprobs come from the backend (alice_sampler_logprobs_top) */
};

/* ---- RNG: xoshiro256** seeded by splitmix64 -------------------------------- */

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static uint64_t rng_next(uint64_t s[4])
{
	uint64_t r = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return r;
}

/* uniform in [0, 1) with 53 random bits */
static double rng_uniform(uint64_t s[4])
{
	return (double)(rng_next(s) >> 11) * 0x1.0p-53;
}

static void rng_seed(uint64_t s[4], uint64_t seed)
{
	uint64_t x = seed;
	for (int i = 0; i < 4; i++)
		s[i] = splitmix64(&x);
}

/* ---- params ------------------------------------------------------------ */

void alice_sampling_params_default(struct alice_sampling_params *p)
{
	memset(p, 0, sizeof(*p));
	p->temperature = 1.0f;
	p->top_p = 1.0f;
	p->repeat_penalty = 1.0f;
	p->penalty_last_n = 64;
}

static enum alice_status validate(const struct alice_sampling_params *p, int32_t n_vocab,
				  struct alice_error *err)
{
	if (n_vocab <= 0)
		return alice_fail(err, ALICE_ERR_INVALID, "sampling: n_vocab %d must be > 0", n_vocab);
	if (!isfinite(p->temperature) || p->temperature < 0)
		return alice_fail(err, ALICE_ERR_INVALID, "sampling: temperature %g must be >= 0",
				  (double)p->temperature);
	if (p->top_k < 0)
		return alice_fail(err, ALICE_ERR_INVALID, "sampling: top_k %d must be >= 0", p->top_k);
	if (!(p->top_p >= 0 && p->top_p <= 1))
		return alice_fail(err, ALICE_ERR_INVALID, "sampling: top_p %g must be in [0, 1]",
				  (double)p->top_p);
	if (!(p->min_p >= 0 && p->min_p <= 1))
		return alice_fail(err, ALICE_ERR_INVALID, "sampling: min_p %g must be in [0, 1]",
				  (double)p->min_p);
	if (!isfinite(p->repeat_penalty) || p->repeat_penalty <= 0)
		return alice_fail(err, ALICE_ERR_INVALID, "sampling: repeat_penalty %g must be > 0",
				  (double)p->repeat_penalty);
	if (p->penalty_last_n < -1)
		return alice_fail(err, ALICE_ERR_INVALID, "sampling: penalty_last_n %d must be >= -1",
				  p->penalty_last_n);
	if (!isfinite(p->frequency_penalty))
		return alice_fail(err, ALICE_ERR_INVALID, "sampling: frequency_penalty must be finite");
	if (!isfinite(p->presence_penalty))
		return alice_fail(err, ALICE_ERR_INVALID, "sampling: presence_penalty must be finite");
	if (p->n_probs < 0 || p->n_probs > ALICE_SAMPLING_MAX_TOP)
		return alice_fail(err, ALICE_ERR_INVALID, "sampling: n_probs %d must be in [0, %d]",
				  p->n_probs, ALICE_SAMPLING_MAX_TOP);
	if (p->n_logit_bias && !p->logit_bias)
		return alice_fail(err, ALICE_ERR_INVALID, "sampling: logit_bias is NULL");
	for (size_t i = 0; i < p->n_logit_bias; i++) {
		const struct alice_logit_bias *b = &p->logit_bias[i];
		if (b->token < 0 || b->token >= n_vocab)
			return alice_fail(err, ALICE_ERR_INVALID,
					  "sampling: logit_bias token %d out of range [0, %d)", b->token,
					  n_vocab);
		if (isnan(b->bias) || b->bias == INFINITY)
			return alice_fail(err, ALICE_ERR_INVALID,
					  "sampling: logit_bias of token %d must be finite or -inf",
					  b->token);
	}
	return ALICE_OK;
}

enum alice_status alice_sampler_create(const struct alice_sampling_params *params, int32_t n_vocab,
				       struct alice_sampler **out, struct alice_error *err)
{
	if (!params || !out)
		return alice_fail(err, ALICE_ERR_INVALID, "sampling: no params or output");
	*out = NULL;
	enum alice_status st = validate(params, n_vocab, err);
	if (st != ALICE_OK)
		return st;
	struct alice_sampler *s = calloc(1, sizeof(*s));
	if (!s)
		goto fail_nomem;
	s->p = *params;
	s->n_vocab = n_vocab;
	if (params->n_logit_bias) {
		s->bias = malloc(params->n_logit_bias * sizeof(*s->bias));
		if (!s->bias)
			goto fail_nomem;
		memcpy(s->bias, params->logit_bias, params->n_logit_bias * sizeof(*s->bias));
	}
	s->p.logit_bias = s->bias;
	s->work = malloc((size_t)n_vocab * sizeof(*s->work));
	s->cand = malloc((size_t)n_vocab * sizeof(*s->cand));
	if (!s->work || !s->cand)
		goto fail_nomem;
	if (params->frequency_penalty != 0 || params->presence_penalty != 0) {
		s->counts = calloc((size_t)n_vocab, sizeof(*s->counts));
		if (!s->counts)
			goto fail_nomem;
	}
	if (params->repeat_penalty != 1 && params->penalty_last_n != 0) {
		s->stamp = calloc((size_t)n_vocab, sizeof(*s->stamp));
		if (!s->stamp)
			goto fail_nomem;
	}
	rng_seed(s->rng, params->seed);
	*out = s;
	return ALICE_OK;
fail_nomem:
	alice_sampler_free(s);
	return alice_fail(err, ALICE_ERR_NOMEM, "sampling: out of memory (n_vocab %d)", n_vocab);
}

void alice_sampler_free(struct alice_sampler *s)
{
	if (!s)
		return;
	free(s->bias);
	free(s->work);
	free(s->cand);
	free(s->hist);
	free(s->counts);
	free(s->distinct);
	free(s->stamp);
	free(s);
}

void alice_sampler_reset(struct alice_sampler *s)
{
	if (!s)
		return;
	if (s->counts)
		for (size_t i = 0; i < s->n_distinct; i++)
			s->counts[s->distinct[i]] = 0;
	s->n_distinct = 0;
	s->n_hist = 0;
	rng_seed(s->rng, s->p.seed);
}

enum alice_status alice_sampler_accept(struct alice_sampler *s, int32_t token, struct alice_error *err)
{
	if (!s)
		return alice_fail(err, ALICE_ERR_INVALID, "sampling: no sampler");
	if (token < 0 || token >= s->n_vocab)
		return alice_fail(err, ALICE_ERR_INVALID, "sampling: accepted token %d out of range [0, %d)",
				  token, s->n_vocab);
	if (!alice_grow((void **)&s->hist, &s->cap_hist, s->n_hist + 1, sizeof(*s->hist)))
		return alice_fail(err, ALICE_ERR_NOMEM, "sampling: out of memory");
	if (s->counts && s->counts[token] == 0) {
		if (!alice_grow((void **)&s->distinct, &s->cap_distinct, s->n_distinct + 1, sizeof(*s->distinct)))
			return alice_fail(err, ALICE_ERR_NOMEM, "sampling: out of memory");
		s->distinct[s->n_distinct++] = token;
	}
	if (s->counts)
		s->counts[token]++;
	s->hist[s->n_hist++] = token;
	return ALICE_OK;
}

/* ---- candidate ordering -------------------------------------------------- */

/* a ranks before b: higher logit, ties to the lower id (a total order) */
static inline bool better(const struct cand *a, const struct cand *b)
{
	return a->l > b->l || (a->l == b->l && a->id < b->id);
}

static int cmp_cand(const void *pa, const void *pb)
{
	const struct cand *a = pa, *b = pb;
	return better(a, b) ? -1 : better(b, a) ? 1 : 0;
}

static inline void swap_cand(struct cand *a, struct cand *b)
{
	struct cand t = *a;
	*a = *b;
	*b = t;
}

/* Partition c[lo..hi] (inclusive) around a median-of-three pivot: returns
 * the pivot's final index; better candidates lie before it, worse after. */
static size_t partition(struct cand *c, size_t lo, size_t hi)
{
	size_t mid = lo + (hi - lo) / 2;
	if (better(&c[mid], &c[lo]))
		swap_cand(&c[mid], &c[lo]);
	if (better(&c[hi], &c[lo]))
		swap_cand(&c[hi], &c[lo]);
	if (better(&c[mid], &c[hi]))
		swap_cand(&c[mid], &c[hi]);
	/* now c[hi] is the median of the three */
	struct cand pivot = c[hi];
	size_t store = lo;
	for (size_t i = lo; i < hi; i++)
		if (better(&c[i], &pivot))
			swap_cand(&c[i], &c[store++]);
	swap_cand(&c[store], &c[hi]);
	return store;
}

/* Rearrange c[0..n) so that c[0..k) holds the best k (in no order); 1 <= k <= n. */
static void select_top(struct cand *c, size_t n, size_t k)
{
	size_t lo = 0, hi = n - 1, want = k - 1;
	while (lo < hi) {
		size_t p = partition(c, lo, hi);
		if (p == want)
			return;
		if (p > want)
			hi = p - 1;
		else
			lo = p + 1;
	}
}

static void sort_top(struct cand *c, size_t n, size_t k)
{
	if (k < n)
		select_top(c, n, k);
	qsort(c, k, sizeof(*c), cmp_cand);
}

/* ---- the step -------------------------------------------------------------- */


static void apply_bias(const struct alice_sampler *s, float *work)
{
	for (size_t i = 0; i < s->p.n_logit_bias; i++) {
		const struct alice_logit_bias *b = &s->bias[i];
		work[b->token] = b->bias <= -100 ? -INFINITY : alice_ts_clean(work[b->token] + b->bias);
	}
}

/* frequency * count + presence: one expression (and so one rounding) for
 * the host path and the device records */
__attribute__((noinline)) static float penalty_of(const struct alice_sampler *s, int32_t t)
{
	return (float)s->counts[t] * s->p.frequency_penalty + s->p.presence_penalty;
}

static void apply_penalties(struct alice_sampler *s, float *work)
{
	if (s->stamp && s->n_hist) {
		size_t from = 0;
		if (s->p.penalty_last_n >= 0 && (size_t)s->p.penalty_last_n < s->n_hist)
			from = s->n_hist - (size_t)s->p.penalty_last_n;
		if (++s->stamp_gen == 0) { /* wrapped: stale stamps could match */
			memset(s->stamp, 0, (size_t)s->n_vocab * sizeof(*s->stamp));
			s->stamp_gen = 1;
		}
		float rp = s->p.repeat_penalty;
		for (size_t i = from; i < s->n_hist; i++) {
			int32_t t = s->hist[i];
			if (s->stamp[t] == s->stamp_gen)
				continue;
			s->stamp[t] = s->stamp_gen;
			work[t] = alice_ts_clean(work[t] > 0 ? work[t] / rp : work[t] * rp);
		}
	}
	if (s->counts) {
		for (size_t i = 0; i < s->n_distinct; i++) {
			int32_t t = s->distinct[i];
			float pen = penalty_of(s, t);
			work[t] = alice_ts_clean(work[t] - pen); /* stays finite (or -inf) */
		}
	}
}

/* log-sum-exp of the bias-adjusted logits and their top n (for logprobs). */
static double fill_logprobs(const struct alice_sampler *s, const float *w, struct alice_sample_result *out)
{
	float mx = -INFINITY;
	for (int32_t i = 0; i < s->n_vocab; i++)
		if (w[i] > mx)
			mx = w[i];
	/* the rest adds < 1e-13 relative; the order is the LOGSUMEXP op's */
	double sum = mx > -INFINITY ? alice_ts_lse_sum(w, s->n_vocab, mx) : 0;
	double lse = (double)mx + log(sum);

	/* top n by insertion into a small sorted array */
	int32_t n = s->p.n_probs < s->n_vocab ? s->p.n_probs : s->n_vocab, have = 0;
	struct cand top[ALICE_SAMPLING_MAX_TOP];
	for (int32_t i = 0; i < s->n_vocab && n > 0; i++) {
		struct cand c = {i, w[i], 0};
		if (have == n && !better(&c, &top[have - 1]))
			continue;
		int32_t j = have < n ? have++ : n - 1;
		while (j > 0 && better(&c, &top[j - 1])) {
			top[j] = top[j - 1];
			j--;
		}
		top[j] = c;
	}
	out->n_top = have;
	for (int32_t i = 0; i < have; i++) {
		out->top[i].token = top[i].id;
		out->top[i].logprob = (float)((double)top[i].l - lse);
	}
	return lse;
}

enum alice_status alice_sampler_transform(struct alice_sampler *s, const float *logits,
					  const uint8_t *allowed_mask, float *out, struct alice_error *err)
{
	if (!s || !logits || !out)
		return alice_fail(err, ALICE_ERR_INVALID, "sampling: NULL argument");
	for (int32_t i = 0; i < s->n_vocab; i++)
		out[i] = alice_ts_clean(logits[i]);
	apply_bias(s, out);
	apply_penalties(s, out);
	if (allowed_mask)
		for (int32_t i = 0; i < s->n_vocab; i++)
			if (!allowed_mask[i])
				out[i] = -INFINITY;
	return ALICE_OK;
}

/* Set c[i].w = exp((l - max) / t) and return their sum (m >= 1). */
static double weigh(struct cand *c, size_t m, float t)
{
	float mx = c[0].l;
	for (size_t i = 1; i < m; i++)
		if (c[i].l > mx)
			mx = c[i].l;
	const float inv_t = 1.0f / t;
	double z = 0;
	for (size_t i = 0; i < m; i++) {
		c[i].w = alice_exp_neg((c[i].l - mx) * inv_t);
		z += c[i].w;
	}
	return z;
}

/* max of w[0..n) (-inf for none): 8 running maxima, a loop that vectorises
 * (a max does not depend on the order) */
static float vocab_max(const float *w, int32_t n)
{
	float m8[8];
	for (int k = 0; k < 8; k++)
		m8[k] = -INFINITY;
	int32_t i = 0;
	for (; i + 8 <= n; i += 8)
		for (int k = 0; k < 8; k++)
			m8[k] = alice_fsel(w[i + k] > m8[k], w[i + k], m8[k]);
	float m = -INFINITY;
	for (; i < n; i++)
		m = w[i] > m ? w[i] : m;
	for (int k = 0; k < 8; k++)
		m = m8[k] > m ? m8[k] : m;
	return m;
}

/* ---- the whole vocabulary, untruncated (temperature only): temp_sample.h's
 * rule, the weights in w in place; tokens below `floor` weigh 0, as they
 * would be absent from the candidates. */
static int32_t sample_full(struct alice_sampler *s, float *w, float mx, float floor)
{
	double *bs = (double *)s->cand; /* n_vocab * 12 bytes: room for the block sums */
	int32_t n_live, last;
	const double z = alice_ts_weigh(w, s->n_vocab, mx, floor, 1.0f / s->p.temperature, bs, &n_live, &last);
	if (n_live == 1) { /* nothing to draw; the uniform is taken all the same */
		rng_next(s->rng);
		return alice_ts_single(w, s->n_vocab);
	}
	return alice_ts_draw(w, s->n_vocab, bs, last, rng_uniform(s->rng) * z);
}

/* top-p over c[0..m): the smallest set of best tokens whose mass reaches
 * top_p. Unsorted input takes a weighted quickselect (expected O(m), no full
 * sort however flat the distribution); the kept set ends up in c[0..result). */
static size_t truncate_top_p(struct cand *c, size_t m, bool *sorted, float top_p)
{
	const double z = weigh(c, m, 1.0f);
	double need = (double)top_p * z;
	size_t lo = 0, hi = m;
	if (*sorted)
		lo = hi = 0; /* walk from the start below */
	for (;;) {
		if (*sorted || hi - lo <= 32) {
			if (!*sorted)
				qsort(c + lo, hi - lo, sizeof(*c), cmp_cand);
			size_t end = *sorted ? m : hi;
			double cum = 0;
			for (size_t i = lo; i < end; i++) {
				cum += c[i].w;
				if (cum >= need)
					return i + 1;
			}
			return end; /* rounding left the sum short: keep all */
		}
		size_t p = partition(c, lo, hi - 1);
		double up = 0; /* mass of c[lo..p] */
		for (size_t i = lo; i <= p; i++)
			up += c[i].w;
		if (up >= need) {
			if (p + 1 < hi)
				hi = p + 1;
			else if (up - c[p].w >= need)
				hi = p; /* the pivot was the worst and is not needed */
			else
				return p + 1;
		} else {
			need -= up;
			lo = p + 1;
		}
	}
}

/* min-p: keep p >= min_p * p_max, i.e. logit >= max + ln(min_p); keeps order. */
static size_t truncate_min_p(struct cand *c, size_t m, bool sorted, float min_p)
{
	float mx = c[0].l;
	if (!sorted)
		for (size_t i = 1; i < m; i++)
			if (c[i].l > mx)
				mx = c[i].l;
	const float thr = mx + logf(min_p);
	size_t keep = 0;
	for (size_t i = 0; i < m; i++)
		if (c[i].l >= thr)
			c[keep++] = c[i];
	return keep; /* >= 1: the maximum always passes */
}

/* The candidates of w (finite, not negligible). Small top-k keeps only the
 * best k while scanning (sorted insertion: cheap, few tokens beat the k-th). */
static size_t gather(const struct alice_sampler *s, const float *w, struct cand *c, bool *sorted)
{
	const int32_t nv = s->n_vocab;
	const size_t k = (size_t)s->p.top_k;
	size_t m = 0;
	*sorted = false;
	const float mx = vocab_max(w, nv);
	if (!(mx > -INFINITY))
		return 0;
	const float t = s->p.temperature > 1 ? s->p.temperature : 1;
	const float floor = mx - NEGLIGIBLE_NATS * t;
	if (k > 0 && k <= 128) {
		for (int32_t i = 0; i < nv; i++) {
			if (!(w[i] >= floor))
				continue;
			struct cand x = {i, w[i], 0};
			if (m == k && !better(&x, &c[k - 1]))
				continue;
			size_t j = m < k ? m++ : k - 1;
			while (j > 0 && better(&x, &c[j - 1])) {
				c[j] = c[j - 1];
				j--;
			}
			c[j] = x;
		}
		*sorted = true;
		return m;
	}
	for (int32_t i = 0; i < nv; i++)
		if (w[i] >= floor)
			c[m++] = (struct cand){i, w[i], 0};
	if (k > 0 && k < m) {
		sort_top(c, m, k);
		m = k;
		*sorted = true;
	}
	return m;
}

/* top-k (in gather) -> top-p -> min-p -> temperature -> one draw; m >= 1. */
static int32_t sample_candidates(struct alice_sampler *s, struct cand *c, size_t m, bool sorted)
{
	if (s->p.top_p < 1)
		m = truncate_top_p(c, m, &sorted, s->p.top_p);
	if (s->p.min_p > 0)
		m = truncate_min_p(c, m, sorted, s->p.min_p);
	if (m == 1) { /* nothing to draw; the uniform is taken all the same */
		rng_next(s->rng);
		return c[0].id;
	}
	const double z = weigh(c, m, s->p.temperature);
	const double u = rng_uniform(s->rng) * z;
	double cum = 0;
	for (size_t i = 0; i < m; i++) {
		cum += c[i].w;
		if (u < cum)
			return c[i].id;
	}
	return c[m - 1].id; /* u landed in the rounding slack */
}

enum alice_status alice_sampler_sample(struct alice_sampler *s, const float *logits,
				       const uint8_t *allowed_mask, struct alice_sample_result *out,
				       struct alice_error *err)
{
	if (!s || !logits || !out)
		return alice_fail(err, ALICE_ERR_INVALID, "sampling: NULL argument");
	memset(out, 0, sizeof(*out));
	const int32_t nv = s->n_vocab;
	float *w = s->work;
	for (int32_t i = 0; i < nv; i++)
		w[i] = alice_ts_clean(logits[i]);
	apply_bias(s, w);

	double lse = 0;
	if (s->p.logprobs)
		lse = fill_logprobs(s, w, out);

	apply_penalties(s, w);
	if (allowed_mask)
		for (int32_t i = 0; i < nv; i++)
			if (!allowed_mask[i])
				w[i] = -INFINITY;

	int32_t token = -1;
	/* a temperature this small is greedy in all but ties, and 1/T would overflow */
	if (s->p.temperature <= 1e-6f) {
		const float best = vocab_max(w, nv);
		for (int32_t i = 0; i < nv && best > -INFINITY; i++)
			if (w[i] == best) {
				token = i;
				break;
			}
	} else if (s->p.top_k == 0 && s->p.top_p >= 1 && s->p.min_p <= 0) {
		const float mx = vocab_max(w, nv);
		if (mx > -INFINITY) {
			token = sample_full(s, w, mx, alice_ts_floor(mx, s->p.temperature));
		}
	} else {
		bool sorted;
		size_t m = gather(s, w, s->cand, &sorted);
		if (m > 0)
			token = sample_candidates(s, s->cand, m, sorted);
	}
	if (token < 0)
		return alice_fail(err, ALICE_ERR_INVALID,
				  "sampling: no token can be sampled (all masked, banned or NaN)");
	out->token = token;
	if (s->p.logprobs) {
		/* the chosen token's bias-adjusted logit, recomputed (w was changed) */
		float l = alice_ts_clean(logits[token]);
		for (size_t i = 0; i < s->p.n_logit_bias; i++)
			if (s->bias[i].token == token)
				l = s->bias[i].bias <= -100 ? -INFINITY : alice_ts_clean(l + s->bias[i].bias);
		out->logprob = (float)((double)l - lse);
	}
	return ALICE_OK;
}

/* The record of token t among out[0, n), or a new one (NULL when full). */
static struct alice_logit_adj *adj_rec(struct alice_logit_adj *out, int32_t *n, int32_t cap, int32_t t)
{
	for (int32_t i = 0; i < *n; i++)
		if (out[i].token == t)
			return &out[i];
	if (*n >= cap)
		return NULL;
	out[*n] = (struct alice_logit_adj){t, 0, 0, 1, 0};
	return &out[(*n)++];
}

int32_t alice_sampler_adjustments(const struct alice_sampler *s, struct alice_logit_adj *out, int32_t cap)
{
	int32_t n = 0;
	for (size_t i = 0; i < s->p.n_logit_bias; i++) { /* apply_bias */
		const struct alice_logit_bias *b = &s->bias[i];
		struct alice_logit_adj *a = adj_rec(out, &n, cap, b->token);
		if (!a || a->flags)
			return -1;
		a->flags = b->bias <= -100 ? ALICE_ADJ_BAN : ALICE_ADJ_BIAS;
		a->bias = b->bias;
	}
	if (s->stamp && s->n_hist) { /* apply_penalties: the window, each token once */
		size_t from = 0;
		if (s->p.penalty_last_n >= 0 && (size_t)s->p.penalty_last_n < s->n_hist)
			from = s->n_hist - (size_t)s->p.penalty_last_n;
		for (size_t i = from; i < s->n_hist; i++) {
			struct alice_logit_adj *a = adj_rec(out, &n, cap, s->hist[i]);
			if (!a)
				return -1;
			a->flags |= ALICE_ADJ_REPEAT;
			a->rp = s->p.repeat_penalty;
		}
	}
	if (s->counts)
		for (size_t i = 0; i < s->n_distinct; i++) {
			int32_t t = s->distinct[i];
			struct alice_logit_adj *a = adj_rec(out, &n, cap, t);
			if (!a)
				return -1;
			a->flags |= ALICE_ADJ_PENALTY;
			a->pen = penalty_of(s, t);
		}
	return n;
}

/* bias or penalties change this sampler's rows */
static bool has_adjust(const struct alice_sampler *s)
{
	return s->p.n_logit_bias || s->stamp || s->counts;
}

/* the step's logprobs are not asked, or come from the backend */
static bool lp_ok(const struct alice_sampler *s)
{
	return !s->p.logprobs || s->lp_device;
}

bool alice_sampler_device_logprobs(struct alice_sampler *s, int32_t k)
{
	/* the bias-adjusted row is the row the backend edits when there are
	 * no penalties; its best k entries hold the top n */
	s->lp_device = s->p.logprobs && !s->stamp && !s->counts && s->p.n_probs <= k;
	return s->lp_device;
}

enum alice_status alice_sampler_logprobs_top(const struct alice_sampler *s, const int32_t *top, int32_t k, float mx,
					     double sum, float chosen, struct alice_sample_result *out,
					     struct alice_error *err)
{
	if (!s->lp_device || !top || s->p.n_probs > k)
		return alice_fail(err, ALICE_ERR_INVALID, "sampling: logprobs from the device were not set up");
	const double lse = (double)mx + log(sum);
	int32_t n = s->p.n_probs < s->n_vocab ? s->p.n_probs : s->n_vocab;
	out->n_top = n;
	for (int32_t i = 0; i < n; i++) {
		float l;
		memcpy(&l, &top[2 * i + 1], sizeof(l));
		out->top[i].token = top[2 * i];
		out->top[i].logprob = (float)((double)l - lse);
	}
	out->logprob = (float)((double)chosen - lse);
	return ALICE_OK;
}

bool alice_sampler_pipeline_ok(const struct alice_sampler *s)
{
	return s && lp_ok(s) && !s->stamp && !s->counts;
}

bool alice_sampler_top_ok(const struct alice_sampler *s, int32_t k, bool adjusted)
{
	return s && k >= 1 && (adjusted || !has_adjust(s)) && lp_ok(s) &&
	       (s->p.temperature <= 1e-6f || (s->p.top_k >= 1 && s->p.top_k <= k && s->p.top_k <= 128));
}

enum alice_status alice_sampler_sample_top(struct alice_sampler *s, const int32_t *top, int32_t k, bool adjusted,
					   struct alice_sample_result *out, struct alice_error *err)
{
	if (!s || !top || !out || !alice_sampler_top_ok(s, k, adjusted))
		return alice_fail(err, ALICE_ERR_INVALID, "sampling: the best %d logits cannot decide this step", k);
	memset(out, 0, sizeof(*out));
	float mx;
	memcpy(&mx, &top[1], sizeof(mx));
	if (!(mx > -INFINITY))
		return alice_fail(err, ALICE_ERR_INVALID,
				  "sampling: no token can be sampled (all masked, banned or NaN)");
	if (s->p.temperature <= 1e-6f) { /* the first index of the maximum */
		out->token = top[0];
		return ALICE_OK;
	}
	/* gather()'s candidates: the best top_k of those at or above the floor */
	const float t = s->p.temperature > 1 ? s->p.temperature : 1;
	const float floor = mx - NEGLIGIBLE_NATS * t;
	size_t m = 0;
	for (int32_t i = 0; i < s->p.top_k; i++) {
		float l;
		memcpy(&l, &top[2 * i + 1], sizeof(l));
		if (!(l >= floor))
			break;
		s->cand[m++] = (struct cand){top[2 * i], l, 0};
	}
	out->token = sample_candidates(s, s->cand, m, true);
	return ALICE_OK;
}

bool alice_sampler_temp_ok(const struct alice_sampler *s, bool adjusted)
{
	return s && (adjusted || !has_adjust(s)) && lp_ok(s) && s->p.temperature > 1e-6f &&
	       s->p.top_k == 0 && s->p.top_p >= 1 && s->p.min_p <= 0;
}

void alice_sampler_temp_params(const struct alice_sampler *s, int32_t ahead, float *t, double *r)
{
	uint64_t st[4];
	memcpy(st, s->rng, sizeof(st));
	for (int32_t i = 0; i < ahead; i++)
		rng_next(st);
	*t = s->p.temperature;
	*r = rng_uniform(st);
}

enum alice_status alice_sampler_temp_done(struct alice_sampler *s, int32_t token, bool used,
					  struct alice_sample_result *out, struct alice_error *err)
{
	memset(out, 0, sizeof(*out));
	if (token < 0 || token >= s->n_vocab)
		return alice_fail(err, ALICE_ERR_INVALID,
				  "sampling: no token can be sampled (all masked, banned or NaN)");
	(void)used; /* a draw takes its uniform whether or not it needed it */
	rng_next(s->rng);
	out->token = token;
	return ALICE_OK;
}
