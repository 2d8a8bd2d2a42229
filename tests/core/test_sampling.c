/* test_sampling.c — the logit pipeline: each step alone on hand-made
 * distributions, determinism, and frequency statistics over many draws.
 * Statistical bounds: a frequency over N draws with probability p has
 * sigma = sqrt(p(1-p)/N); checks allow 5 sigma (false-alarm rate < 1e-6 per
 * check for an unbiased sampler; the seeds are fixed, so runs are repeatable). */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alice/sampling.h"
#include "alice/temp_sample.h"
#include "support/topk_ref.h"

static struct alice_sampler *mk(const struct alice_sampling_params *p, int32_t n_vocab)
{
	struct alice_sampler *s = NULL;
	struct alice_error err = {{0}};
	cr_assert_eq(alice_sampler_create(p, n_vocab, &s, &err), ALICE_OK, "%s", err.msg);
	return s;
}

static int32_t draw(struct alice_sampler *s, const float *logits, const uint8_t *mask)
{
	struct alice_sample_result r;
	struct alice_error err = {{0}};
	cr_assert_eq(alice_sampler_sample(s, logits, mask, &r, &err), ALICE_OK, "%s", err.msg);
	return r.token;
}

/* deterministic test data: a small LCG, Laplace-ish logits */
static uint64_t lcg_state = 12345;
static double lcg_uniform(void)
{
	lcg_state = lcg_state * 6364136223846793005ULL + 1442695040888963407ULL;
	return (double)(lcg_state >> 11) * 0x1.0p-53;
}
static void random_logits(float *l, int32_t n, float scale)
{
	for (int32_t i = 0; i < n; i++) {
		double u = lcg_uniform() - 0.5;
		l[i] = (float)(-scale * copysign(log(1 - 2 * fabs(u) + 1e-300), u));
	}
}

static int32_t argmax(const float *l, int32_t n)
{
	int32_t b = 0;
	for (int32_t i = 1; i < n; i++)
		if (l[i] > l[b])
			b = i;
	return b;
}

static void expect_freq(long count, long n, double p, const char *what)
{
	double f = (double)count / (double)n, sigma = sqrt(p * (1 - p) / (double)n);
	cr_expect(fabs(f - p) <= 5 * sigma + 1e-12, "%s: frequency %.5f, expected %.5f (5 sigma = %.5f)", what,
		  f, p, 5 * sigma);
}

Test(sampling, params_validation)
{
	struct alice_sampling_params p;
	struct alice_sampler *s = NULL;
	struct alice_error err = {{0}};
	alice_sampling_params_default(&p);
	cr_expect_eq(p.temperature, 1.0f);
	cr_expect_eq(p.top_p, 1.0f);
	cr_expect_eq(p.penalty_last_n, 64);
	cr_expect_eq(alice_sampler_create(&p, 0, &s, &err), ALICE_ERR_INVALID);
	static const char *const fields[] = {"temperature", "temperature", "top_k", "top_p", "min_p",
					     "repeat_penalty", "penalty_last_n", "frequency_penalty", "n_probs"};
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		alice_sampling_params_default(&p);
		switch (i) {
		case 0: p.temperature = -1; break;
		case 1: p.temperature = NAN; break;
		case 2: p.top_k = -1; break;
		case 3: p.top_p = 1.5f; break;
		case 4: p.min_p = -0.1f; break;
		case 5: p.repeat_penalty = 0; break;
		case 6: p.penalty_last_n = -2; break;
		case 7: p.frequency_penalty = INFINITY; break;
		default: p.n_probs = 21; break;
		}
		err.msg[0] = 0;
		cr_expect_eq(alice_sampler_create(&p, 10, &s, &err), ALICE_ERR_INVALID, "%s", fields[i]);
		cr_expect(strstr(err.msg, fields[i]), "%s: %s", fields[i], err.msg);
		cr_expect_null(s);
	}
	alice_sampling_params_default(&p);
	struct alice_logit_bias b[] = {{10, 1.0f}};
	p.logit_bias = b;
	p.n_logit_bias = 1;
	cr_expect_eq(alice_sampler_create(&p, 10, &s, &err), ALICE_ERR_INVALID);
	cr_expect(strstr(err.msg, "logit_bias"), "%s", err.msg);
	b[0] = (struct alice_logit_bias){3, INFINITY};
	cr_expect_eq(alice_sampler_create(&p, 10, &s, &err), ALICE_ERR_INVALID);
	alice_sampler_free(NULL);
}

Test(sampling, greedy_argmax_ties_to_lowest_id)
{
	struct alice_sampling_params p;
	alice_sampling_params_default(&p);
	p.temperature = 0;
	struct alice_sampler *s = mk(&p, 6);
	float l[6] = {1, 3, 2, 3, -INFINITY, NAN};
	cr_expect_eq(draw(s, l, NULL), 1);
	uint8_t mask[6] = {1, 0, 1, 1, 1, 1};
	cr_expect_eq(draw(s, l, mask), 3);
	float all_bad[6] = {NAN, -INFINITY, NAN, NAN, NAN, NAN};
	struct alice_sample_result r;
	struct alice_error err = {{0}};
	cr_expect_eq(alice_sampler_sample(s, all_bad, NULL, &r, &err), ALICE_ERR_INVALID);
	cr_expect(strstr(err.msg, "no token"), "%s", err.msg);
	alice_sampler_free(s);
}

Test(sampling, same_seed_same_tokens_and_reset)
{
	enum { NV = 1000, N = 500 };
	float *l = malloc(NV * sizeof(float));
	random_logits(l, NV, 1.0f);
	struct alice_sampling_params p;
	alice_sampling_params_default(&p);
	p.seed = 42;
	struct alice_sampler *a = mk(&p, NV), *b = mk(&p, NV);
	p.seed = 43;
	struct alice_sampler *c = mk(&p, NV);
	int32_t first[N];
	int diff = 0;
	for (int i = 0; i < N; i++) {
		first[i] = draw(a, l, NULL);
		cr_assert_eq(first[i], draw(b, l, NULL), "step %d", i);
		diff += first[i] != draw(c, l, NULL);
	}
	cr_expect_gt(diff, N / 2, "seed 43 gave the same tokens as seed 42 (%d differ)", diff);
	alice_sampler_reset(a);
	for (int i = 0; i < N; i++)
		cr_assert_eq(draw(a, l, NULL), first[i], "after reset, step %d", i);
	alice_sampler_free(a);
	alice_sampler_free(b);
	alice_sampler_free(c);
	free(l);
}

Test(sampling, top_k_1_and_tiny_top_p_are_greedy)
{
	enum { NV = 5000 };
	float *l = malloc(NV * sizeof(float));
	struct alice_sampling_params p;
	for (int mode = 0; mode < 2; mode++) {
		alice_sampling_params_default(&p);
		p.temperature = 1.5f;
		if (mode == 0)
			p.top_k = 1;
		else
			p.top_p = 1e-6f;
		for (int t = 0; t < 50; t++) {
			p.seed = (uint64_t)t;
			struct alice_sampler *s = mk(&p, NV);
			random_logits(l, NV, 0.2f);
			if (t % 5 == 0) /* a tie for first place: the lower id wins */
				l[NV - 1] = l[7] = l[argmax(l, NV)] + 1;
			int32_t want = argmax(l, NV);
			for (int k = 0; k < 5; k++)
				cr_assert_eq(draw(s, l, NULL), want, "mode %d trial %d", mode, t);
			alice_sampler_free(s);
		}
	}
	free(l);
}

/* probs 0.5, 0.3, 0.15, 0.05 */
static void four(float *l)
{
	l[0] = logf(0.5f);
	l[1] = logf(0.3f);
	l[2] = logf(0.15f);
	l[3] = logf(0.05f);
}

static void histogram(struct alice_sampling_params *p, const float *l, int32_t nv, long n, long *hist)
{
	struct alice_sampler *s = mk(p, nv);
	memset(hist, 0, (size_t)nv * sizeof(*hist));
	for (long i = 0; i < n; i++)
		hist[draw(s, l, NULL)]++;
	alice_sampler_free(s);
}

Test(sampling, temperature_one_matches_softmax)
{
	float l[4];
	long h[4];
	four(l);
	struct alice_sampling_params p;
	alice_sampling_params_default(&p);
	p.seed = 7;
	const long N = 200000;
	histogram(&p, l, 4, N, h);
	const double want[4] = {0.5, 0.3, 0.15, 0.05};
	for (int i = 0; i < 4; i++)
		expect_freq(h[i], N, want[i], "T=1");
}

Test(sampling, temperature_scales_the_distribution)
{
	float l[4];
	long h[4];
	four(l);
	struct alice_sampling_params p;
	alice_sampling_params_default(&p);
	const long N = 200000;
	const float temps[] = {0.5f, 2.0f};
	for (int t = 0; t < 2; t++) {
		p.temperature = temps[t];
		p.seed = 100 + (uint64_t)t;
		histogram(&p, l, 4, N, h);
		double q[4] = {0.5, 0.3, 0.15, 0.05}, z = 0;
		for (int i = 0; i < 4; i++)
			z += q[i] = pow(q[i], 1.0 / temps[t]);
		for (int i = 0; i < 4; i++)
			expect_freq(h[i], N, q[i] / z, temps[t] < 1 ? "T=0.5" : "T=2");
	}
}

Test(sampling, top_k_top_p_min_p_cut_and_renormalise)
{
	float l[4];
	long h[4];
	four(l);
	struct alice_sampling_params p;
	const long N = 100000;

	alice_sampling_params_default(&p);
	p.top_k = 2;
	p.seed = 1;
	histogram(&p, l, 4, N, h);
	cr_expect_eq(h[2] + h[3], 0);
	expect_freq(h[0], N, 0.5 / 0.8, "top_k=2");

	alice_sampling_params_default(&p);
	p.top_p = 0.75f; /* 0.5 < 0.75 <= 0.8: tokens 0 and 1 */
	p.seed = 2;
	histogram(&p, l, 4, N, h);
	cr_expect_eq(h[2] + h[3], 0);
	expect_freq(h[0], N, 0.5 / 0.8, "top_p=0.75");

	alice_sampling_params_default(&p);
	p.top_p = 0.9f; /* 0.8 < 0.9 <= 0.95: tokens 0..2 */
	p.seed = 3;
	histogram(&p, l, 4, N, h);
	cr_expect_eq(h[3], 0);
	expect_freq(h[2], N, 0.15 / 0.95, "top_p=0.9");

	alice_sampling_params_default(&p);
	p.min_p = 0.2f; /* keeps p >= 0.1: tokens 0..2 */
	p.seed = 4;
	histogram(&p, l, 4, N, h);
	cr_expect_eq(h[3], 0);
	expect_freq(h[2], N, 0.15 / 0.95, "min_p=0.2");

	alice_sampling_params_default(&p);
	p.min_p = 0.7f; /* keeps p >= 0.35: token 0 only */
	p.seed = 5;
	histogram(&p, l, 4, N, h);
	cr_expect_eq(h[0], N);

	/* chained: top_k 3 then min_p 0.5 (p >= 0.25 of the kept mass) */
	alice_sampling_params_default(&p);
	p.top_k = 3;
	p.min_p = 0.5f;
	p.seed = 6;
	histogram(&p, l, 4, N, h);
	cr_expect_eq(h[2] + h[3], 0);
	expect_freq(h[1], N, 0.3 / 0.8, "top_k=3 min_p=0.5");
}

static int cmp_desc(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;
	return x > y ? -1 : x < y ? 1 : 0;
}

/* Large vocabulary: top-p must keep exactly the prefix a full sort gives. */
Test(sampling, top_p_on_large_vocab_matches_full_sort)
{
	enum { NV = 151936 };
	float *l = malloc(NV * sizeof(float)), *sorted = malloc(NV * sizeof(float));
	const float tps[] = {0.5f, 0.9f, 0.99f};
	const float scales[] = {4.0f, 1.0f, 0.05f}; /* peaked, moderate, nearly flat */
	for (int si = 0; si < 3; si++) {
		random_logits(l, NV, scales[si]);
		memcpy(sorted, l, NV * sizeof(float));
		qsort(sorted, NV, sizeof(float), cmp_desc);
		double z = 0;
		for (int i = 0; i < NV; i++)
			z += exp((double)sorted[i] - sorted[0]);
		for (int ti = 0; ti < 3; ti++) {
			double cum = 0;
			int keep = 0;
			while (keep < NV) {
				cum += exp((double)sorted[keep] - sorted[0]);
				keep++;
				if (cum >= tps[ti] * z)
					break;
			}
			float thr = sorted[keep - 1]; /* logits >= thr are allowed */
			struct alice_sampling_params p;
			alice_sampling_params_default(&p);
			p.top_p = tps[ti];
			p.seed = (uint64_t)(si * 10 + ti);
			struct alice_sampler *s = mk(&p, NV);
			float lo = INFINITY;
			for (int d = 0; d < 200; d++) {
				int32_t t = draw(s, l, NULL);
				cr_assert_geq(l[t], thr, "scale %g top_p %g: token %d below the cut (keep %d)",
					      scales[si], tps[ti], t, keep);
				if (l[t] < lo)
					lo = l[t];
			}
			/* with a small kept set the draws reach its tail too */
			if (keep <= 3)
				cr_expect_leq(lo, thr, "scale %g top_p %g never drew the last kept token",
					      scales[si], tps[ti]);
			alice_sampler_free(s);
		}
	}
	free(l);
	free(sorted);
}

Test(sampling, top_k_on_large_vocab)
{
	enum { NV = 151936, K = 40 };
	float *l = malloc(NV * sizeof(float)), *sorted = malloc(NV * sizeof(float));
	random_logits(l, NV, 0.01f); /* nearly flat: the draw reaches the whole top 40 */
	memcpy(sorted, l, NV * sizeof(float));
	qsort(sorted, NV, sizeof(float), cmp_desc);
	struct alice_sampling_params p;
	alice_sampling_params_default(&p);
	p.top_k = K;
	p.seed = 9;
	struct alice_sampler *s = mk(&p, NV);
	int seen_last = 0;
	for (int d = 0; d < 2000; d++) {
		int32_t t = draw(s, l, NULL);
		cr_assert_geq(l[t], sorted[K - 1]);
		seen_last += l[t] == sorted[K - 1];
	}
	cr_expect_gt(seen_last, 0, "the 40th token was never drawn in 2000 draws");
	alice_sampler_free(s);
	free(l);
	free(sorted);
}

Test(sampling, penalties_change_exactly_the_right_logits)
{
	enum { NV = 10 };
	const float l[NV] = {2, -2, 1, 0.5f, 3, 1.5f, -1, 0, 4, 0.25f};
	float out[NV];
	struct alice_error err = {{0}};
	struct alice_sampling_params p;

	/* repeat penalty over the last 3 tokens of history [8, 0, 1, 0, 6] */
	alice_sampling_params_default(&p);
	p.repeat_penalty = 2;
	p.penalty_last_n = 3;
	struct alice_sampler *s = mk(&p, NV);
	const int32_t hist[] = {8, 0, 1, 0, 6};
	for (int i = 0; i < 5; i++)
		cr_assert_eq(alice_sampler_accept(s, hist[i], &err), ALICE_OK);
	cr_assert_eq(alice_sampler_transform(s, l, NULL, out, &err), ALICE_OK);
	for (int i = 0; i < NV; i++) {
		float want = l[i];
		if (i == 0) /* once, although it occurs twice in the window */
			want = 1;
		if (i == 1)
			want = -4;
		if (i == 6)
			want = -2;
		cr_expect_eq(out[i], want, "repeat: logit %d = %g, want %g", i, out[i], want);
	}
	alice_sampler_reset(s);
	cr_assert_eq(alice_sampler_transform(s, l, NULL, out, &err), ALICE_OK);
	cr_expect_arr_eq(out, l, sizeof(l), "reset must clear the history");
	alice_sampler_free(s);

	/* penalty_last_n -1: the whole history (token 8 too); 0: off */
	p.penalty_last_n = -1;
	s = mk(&p, NV);
	for (int i = 0; i < 5; i++)
		cr_assert_eq(alice_sampler_accept(s, hist[i], &err), ALICE_OK);
	cr_assert_eq(alice_sampler_transform(s, l, NULL, out, &err), ALICE_OK);
	cr_expect_eq(out[8], 2);
	cr_expect_eq(out[0], 1);
	alice_sampler_free(s);
	p.penalty_last_n = 0;
	s = mk(&p, NV);
	cr_assert_eq(alice_sampler_accept(s, 8, &err), ALICE_OK);
	cr_assert_eq(alice_sampler_transform(s, l, NULL, out, &err), ALICE_OK);
	cr_expect_arr_eq(out, l, sizeof(l));
	alice_sampler_free(s);

	/* OpenAI frequency/presence over all accepted tokens */
	alice_sampling_params_default(&p);
	p.frequency_penalty = 0.5f;
	p.presence_penalty = 1.0f;
	s = mk(&p, NV);
	const int32_t h2[] = {5, 5, 7, 5};
	for (int i = 0; i < 4; i++)
		cr_assert_eq(alice_sampler_accept(s, h2[i], &err), ALICE_OK);
	cr_assert_eq(alice_sampler_transform(s, l, NULL, out, &err), ALICE_OK);
	for (int i = 0; i < NV; i++) {
		float want = l[i];
		if (i == 5)
			want = 1.5f - 3 * 0.5f - 1.0f;
		if (i == 7)
			want = 0 - 0.5f - 1.0f;
		cr_expect_eq(out[i], want, "freq/presence: logit %d = %g, want %g", i, out[i], want);
	}
	cr_expect_eq(alice_sampler_accept(s, NV, &err), ALICE_ERR_INVALID);
	cr_expect_eq(alice_sampler_accept(s, -1, &err), ALICE_ERR_INVALID);
	alice_sampler_free(s);
}

Test(sampling, logit_bias_shifts_and_bans)
{
	enum { NV = 5 };
	const float l[NV] = {1, 2, 3, 4, 5};
	float out[NV];
	struct alice_error err = {{0}};
	struct alice_sampling_params p;
	alice_sampling_params_default(&p);
	struct alice_logit_bias b[] = {{4, -100}, {3, -INFINITY}, {0, 2.5f}};
	p.logit_bias = b;
	p.n_logit_bias = 3;
	struct alice_sampler *s = mk(&p, NV);
	b[0].bias = 0; /* the sampler keeps its own copy */
	cr_assert_eq(alice_sampler_transform(s, l, NULL, out, &err), ALICE_OK);
	cr_expect(isinf(out[4]) && out[4] < 0);
	cr_expect(isinf(out[3]) && out[3] < 0);
	cr_expect_eq(out[0], 3.5f);
	cr_expect_eq(out[1], 2);
	cr_expect_eq(out[2], 3);
	long hist[NV] = {0};
	for (int i = 0; i < 20000; i++)
		hist[draw(s, l, NULL)]++;
	cr_expect_eq(hist[3] + hist[4], 0, "banned tokens were sampled");
	cr_expect_gt(hist[0], 0);
	alice_sampler_free(s);

	alice_sampling_params_default(&p);
	p.temperature = 0;
	p.logit_bias = b;
	p.n_logit_bias = 1;
	b[0] = (struct alice_logit_bias){4, -100};
	s = mk(&p, NV);
	cr_expect_eq(draw(s, l, NULL), 3);
	alice_sampler_free(s);
}

Test(sampling, mask_is_respected)
{
	enum { NV = 2000 };
	float *l = malloc(NV * sizeof(float));
	uint8_t *mask = calloc(NV, 1);
	random_logits(l, NV, 2.0f);
	const int32_t allowed[] = {3, 500, 1999, 1024};
	for (int i = 0; i < 4; i++)
		mask[allowed[i]] = 1;
	struct alice_sampling_params p;
	alice_sampling_params_default(&p);
	p.temperature = 5; /* flat enough that all four appear */
	p.seed = 11;
	struct alice_sampler *s = mk(&p, NV);
	int seen[4] = {0};
	for (int d = 0; d < 4000; d++) {
		int32_t t = draw(s, l, mask);
		int k = -1;
		for (int i = 0; i < 4; i++)
			if (t == allowed[i])
				k = i;
		cr_assert_geq(k, 0, "token %d is masked", t);
		seen[k] = 1;
	}
	cr_expect(seen[0] && seen[1] && seen[2] && seen[3]);
	memset(mask, 0, NV);
	struct alice_sample_result r;
	struct alice_error err = {{0}};
	cr_expect_eq(alice_sampler_sample(s, l, mask, &r, &err), ALICE_ERR_INVALID);
	alice_sampler_free(s);
	/* greedy picks the best allowed token */
	p.temperature = 0;
	s = mk(&p, NV);
	mask[3] = mask[500] = 1;
	cr_expect_eq(draw(s, l, mask), l[3] >= l[500] ? 3 : 500);
	alice_sampler_free(s);
	free(mask);
	free(l);
}

Test(sampling, logprobs_from_the_biased_distribution)
{
	enum { NV = 20 };
	float l[NV];
	random_logits(l, NV, 2.0f);
	struct alice_sampling_params p;
	alice_sampling_params_default(&p);
	p.logprobs = true;
	p.n_probs = NV;
	p.top_k = 3;
	p.temperature = 0.7f;
	p.repeat_penalty = 3; /* penalties must not change the reported logprobs */
	struct alice_logit_bias b[] = {{5, 1.5f}};
	p.logit_bias = b;
	p.n_logit_bias = 1;
	struct alice_sampler *s = mk(&p, NV);
	struct alice_error err = {{0}};
	cr_assert_eq(alice_sampler_accept(s, 5, &err), ALICE_OK);
	float biased[NV];
	memcpy(biased, l, sizeof(l));
	biased[5] += 1.5f;
	double mx = -INFINITY, z = 0;
	for (int i = 0; i < NV; i++)
		mx = fmax(mx, biased[i]);
	for (int i = 0; i < NV; i++)
		z += exp(biased[i] - mx);
	double lse = mx + log(z);
	for (int step = 0; step < 50; step++) {
		struct alice_sample_result r;
		cr_assert_eq(alice_sampler_sample(s, l, NULL, &r, &err), ALICE_OK);
		cr_assert_eq(r.n_top, NV);
		double sum = 0;
		for (int i = 0; i < r.n_top; i++) {
			sum += exp(r.top[i].logprob);
			if (i)
				cr_expect_geq(r.top[i - 1].logprob, r.top[i].logprob);
			cr_expect_float_eq(r.top[i].logprob, biased[r.top[i].token] - lse, 1e-5);
		}
		cr_expect_float_eq(sum, 1.0, 1e-5, "probabilities sum to %g", sum);
		cr_expect_float_eq(r.logprob, biased[r.token] - lse, 1e-5);
	}
	alice_sampler_free(s);

	/* fewer alternatives than the vocabulary: the best n, ties by id */
	float t[6] = {1, 5, 5, 2, 4, 0};
	p.n_probs = 3;
	p.n_logit_bias = 0;
	p.temperature = 0;
	s = mk(&p, 6);
	struct alice_sample_result r;
	cr_assert_eq(alice_sampler_sample(s, t, NULL, &r, &err), ALICE_OK);
	cr_expect_eq(r.token, 1);
	cr_assert_eq(r.n_top, 3);
	cr_expect_eq(r.top[0].token, 1);
	cr_expect_eq(r.top[1].token, 2);
	cr_expect_eq(r.top[2].token, 4);
	cr_expect_eq(r.top[0].logprob, r.logprob);
	alice_sampler_free(s);
}

/* Ties: 1000 equal logits, top_p 0.5 keeps exactly ids 0..499. */
Test(sampling, top_p_with_ties_keeps_the_lowest_ids)
{
	enum { NV = 1000 };
	float l[NV] = {0};
	struct alice_sampling_params p;
	alice_sampling_params_default(&p);
	p.top_p = 0.5f;
	p.seed = 5;
	struct alice_sampler *s = mk(&p, NV);
	int32_t hi = 0;
	for (int d = 0; d < 5000; d++) {
		int32_t t = draw(s, l, NULL);
		cr_assert_lt(t, 500, "token %d beyond the top-p cut", t);
		hi = t > hi ? t : hi;
	}
	cr_expect_gt(hi, 480);
	alice_sampler_free(s);
}

Test(sampling, infinite_logits)
{
	struct alice_sampling_params p;
	alice_sampling_params_default(&p);
	p.temperature = 0.8f;
	p.top_p = 0.9f;
	struct alice_sampler *s = mk(&p, 4);
	float l[4] = {1, INFINITY, 2, NAN};
	for (int i = 0; i < 100; i++)
		cr_assert_eq(draw(s, l, NULL), 1);
	alice_sampler_free(s);
	/* bias and penalties cannot push +inf/FLT_MAX to inf (inf - inf = NaN) */
	struct alice_logit_bias big[] = {{1, 50}, {2, 1e38f}};
	p.logit_bias = big;
	p.n_logit_bias = 2;
	p.repeat_penalty = 0.5f;
	p.presence_penalty = -2e38f;
	p.logprobs = true;
	p.n_probs = 2;
	s = mk(&p, 4);
	struct alice_error err = {{0}};
	cr_assert_eq(alice_sampler_accept(s, 1, &err), ALICE_OK);
	cr_assert_eq(alice_sampler_accept(s, 2, &err), ALICE_OK);
	float tr[4];
	cr_assert_eq(alice_sampler_transform(s, l, NULL, tr, &err), ALICE_OK);
	cr_expect_eq(tr[1], FLT_MAX);
	cr_expect_eq(tr[2], FLT_MAX);
	for (int i = 0; i < 100; i++) {
		struct alice_sample_result r;
		cr_assert_eq(alice_sampler_sample(s, l, NULL, &r, &err), ALICE_OK);
		cr_assert(r.token == 1 || r.token == 2);
		cr_assert(isfinite(r.logprob), "logprob %g", r.logprob);
	}
	alice_sampler_free(s);
	alice_sampling_params_default(&p);
	p.temperature = 1e-30f; /* effectively greedy, no 1/T overflow */
	s = mk(&p, 4);
	float m[4] = {1, 3, 2, 3};
	for (int i = 0; i < 100; i++)
		cr_assert_eq(draw(s, m, NULL), 1);
	alice_sampler_free(s);
}

/* Random parameter sets and hostile logits: the sampled token is always one
 * that the mask allows and whose transformed logit is not -inf. */
Test(sampling, random_params_and_logits)
{
	enum { NV = 300 };
	float l[NV], tr[NV];
	uint8_t mask[NV];
	struct alice_error err = {{0}};
	for (int iter = 0; iter < 400; iter++) {
		struct alice_sampling_params p;
		alice_sampling_params_default(&p);
		p.temperature = lcg_uniform() < 0.2 ? 0 : (float)(lcg_uniform() * 3);
		p.top_k = lcg_uniform() < 0.5 ? 0 : (int32_t)(lcg_uniform() * 400);
		p.top_p = lcg_uniform() < 0.5 ? 1 : (float)lcg_uniform();
		p.min_p = lcg_uniform() < 0.5 ? 0 : (float)lcg_uniform();
		p.repeat_penalty = lcg_uniform() < 0.5 ? 1 : (float)(0.5 + lcg_uniform());
		p.penalty_last_n = (int32_t)(lcg_uniform() * 10) - 1;
		p.frequency_penalty = (float)(lcg_uniform() * 4 - 2);
		p.presence_penalty = (float)(lcg_uniform() * 4 - 2);
		p.logprobs = lcg_uniform() < 0.5;
		p.n_probs = (int32_t)(lcg_uniform() * 21);
		p.seed = (uint64_t)iter;
		struct alice_logit_bias b[3];
		for (int i = 0; i < 3; i++)
			b[i] = (struct alice_logit_bias){(int32_t)(lcg_uniform() * NV), (float)(lcg_uniform() * 300 - 150)};
		p.logit_bias = b;
		p.n_logit_bias = 3;
		struct alice_sampler *s = mk(&p, NV);
		for (int step = 0; step < 10; step++) {
			random_logits(l, NV, (float)(lcg_uniform() * 10));
			for (int i = 0; i < NV; i++) {
				double u = lcg_uniform();
				if (u < 0.02)
					l[i] = NAN;
				else if (u < 0.04)
					l[i] = -INFINITY;
				else if (u < 0.045)
					l[i] = INFINITY;
				mask[i] = lcg_uniform() < 0.7;
			}
			const uint8_t *mk_ = step & 1 ? mask : NULL;
			struct alice_sample_result r;
			cr_assert_eq(alice_sampler_transform(s, l, mk_, tr, &err), ALICE_OK);
			int any = 0;
			for (int i = 0; i < NV; i++)
				any |= tr[i] > -INFINITY;
			enum alice_status st = alice_sampler_sample(s, l, mk_, &r, &err);
			if (!any) {
				cr_assert_eq(st, ALICE_ERR_INVALID);
				continue;
			}
			cr_assert_eq(st, ALICE_OK, "%s", err.msg);
			cr_assert(r.token >= 0 && r.token < NV);
			cr_assert(tr[r.token] > -INFINITY, "iter %d: token %d was excluded", iter, r.token);
			if (mk_)
				cr_assert(mask[r.token]);
			if (p.logprobs) {
				cr_assert(r.logprob <= 1e-6f, "logprob %g", r.logprob);
				cr_assert_eq(r.n_top, p.n_probs);
			}
			cr_assert_eq(alice_sampler_accept(s, r.token, &err), ALICE_OK);
		}
		alice_sampler_free(s);
	}
}

static void best_k(const float *l, int32_t n, int32_t k, int32_t *top)
{
	cr_assert_eq(topk_ref(l, n, k, top), 0, "out of memory");
}

/* The device path (alice_sampler_sample_top on a row's best entries, as
 * backend.h's TOPK gives them) picks the same token, with the same RNG use,
 * as sampling the whole row, whenever top_ok says it may be used. */
Test(sampling, top_entries_decide_like_the_whole_row)
{
	enum { K = 128, NMAX = 5000 };
	static float l[NMAX];
	static int32_t top[2 * K];
	int used = 0;
	for (int trial = 0; trial < 400; trial++) {
		int32_t n = 130 + (int32_t)(lcg_uniform() * (NMAX - 130));
		random_logits(l, n, 1.0f + 4.0f * (float)lcg_uniform());
		if (trial % 3 == 0) /* a coarse grid: many ties */
			for (int32_t i = 0; i < n; i++)
				l[i] = roundf(l[i] * 2.0f);
		if (trial % 5 == 0) /* non-finite entries */
			for (int k = 0; k < 6; k++)
				l[(int32_t)(lcg_uniform() * n)] = k % 3 == 0 ? NAN : k % 3 == 1 ? INFINITY : -INFINITY;
		struct alice_sampling_params p;
		alice_sampling_params_default(&p);
		p.seed = (uint64_t)trial * 7919u;
		double u = lcg_uniform();
		p.temperature = u < 0.2 ? 0.0f : (float)(0.1 + 2.0 * lcg_uniform());
		p.top_k = 1 + (int32_t)(lcg_uniform() * (trial % 4 == 0 ? 200 : 128));
		if (lcg_uniform() < 0.5)
			p.top_p = (float)(0.5 + 0.5 * lcg_uniform());
		if (lcg_uniform() < 0.5)
			p.min_p = (float)(0.2 * lcg_uniform());
		struct alice_sampler *a = mk(&p, n), *b = mk(&p, n);
		if (!alice_sampler_top_ok(b, K, false)) {
			cr_assert(p.top_k > K && p.temperature > 1e-6f, "top_ok refused a plain top-k %d", p.top_k);
			alice_sampler_free(a);
			alice_sampler_free(b);
			continue;
		}
		used++;
		best_k(l, n, K, top);
		for (int step = 0; step < 6; step++) { /* the RNG advances alike */
			struct alice_sample_result r;
			struct alice_error err = {{0}};
			cr_assert_eq(alice_sampler_sample_top(b, top, K, false, &r, &err), ALICE_OK, "%s", err.msg);
			cr_assert_eq(r.token, draw(a, l, NULL), "trial %d step %d: T %g top_k %d top_p %g min_p %g", trial,
				     step, (double)p.temperature, p.top_k, (double)p.top_p, (double)p.min_p);
		}
		alice_sampler_free(a);
		alice_sampler_free(b);
	}
	cr_expect_gt(used, 300);

	/* what needs the whole row is refused */
	struct alice_sampling_params p;
	alice_sampling_params_default(&p);
	p.top_k = 40;
	struct alice_sampler *s = mk(&p, 1000);
	cr_expect(alice_sampler_top_ok(s, K, false));
	cr_expect_not(alice_sampler_top_ok(s, 20, false), "top_k beyond the entries given");
	alice_sampler_free(s);
	p.top_k = 0; /* temperature 1 over the whole vocabulary */
	s = mk(&p, 1000);
	cr_expect_not(alice_sampler_top_ok(s, K, false));
	alice_sampler_free(s);
	struct alice_sampling_params q[4];
	for (int i = 0; i < 4; i++) {
		alice_sampling_params_default(&q[i]);
		q[i].temperature = 0;
	}
	struct alice_logit_bias bias = {3, 2.0f};
	q[0].logit_bias = &bias;
	q[0].n_logit_bias = 1;
	q[1].repeat_penalty = 1.1f;
	q[2].presence_penalty = 0.5f;
	q[3].logprobs = true;
	for (int i = 0; i < 4; i++) {
		s = mk(&q[i], 1000);
		cr_expect_not(alice_sampler_top_ok(s, K, false), "case %d needs the whole row", i);
		alice_sampler_free(s);
	}
	/* an all-NaN row: nothing can be sampled, as from the whole row */
	for (int32_t i = 0; i < 200; i++)
		l[i] = NAN;
	best_k(l, 200, K, top);
	s = mk(&q[3], 200);
	alice_sampling_params_default(&p);
	p.temperature = 0;
	struct alice_sampler *g = mk(&p, 200);
	struct alice_sample_result r;
	struct alice_error err = {{0}};
	cr_expect_eq(alice_sampler_sample_top(g, top, K, false, &r, &err), ALICE_ERR_INVALID);
	alice_sampler_free(g);
	alice_sampler_free(s);
}

/* The backend-drawn path (alice_sampler_temp_params, the op's rule from
 * alice/temp_sample.h, alice_sampler_temp_done) gives the whole-row
 * sampler's tokens and RNG use, step after step, including rows with a
 * single live token (no draw, the uniform taken all the same). */
Test(sampling, backend_draw_equals_the_sampler)
{
	enum { NMAX = 9000 };
	static float l[NMAX], w[NMAX];
	static double bs[NMAX / ALICE_TS_BLOCK + 1];
	for (int trial = 0; trial < 200; trial++) {
		int32_t n = 2 + (int32_t)(lcg_uniform() * (NMAX - 2));
		struct alice_sampling_params p;
		alice_sampling_params_default(&p);
		p.seed = (uint64_t)trial * 104729u;
		p.temperature = (float)(0.05 + 2.0 * lcg_uniform());
		struct alice_sampler *a = mk(&p, n), *b = mk(&p, n);
		cr_assert(alice_sampler_temp_ok(b, false));
		for (int step = 0; step < 5; step++) {
			random_logits(l, n, 1.0f + 6.0f * (float)lcg_uniform());
			if (step == 2) /* one live token: no draw, one uniform taken all the same */
				for (int32_t i = 0; i < n; i++)
					l[i] = i == n / 3 ? 100.0f : l[i] - 200.0f;
			float t;
			double r;
			alice_sampler_temp_params(b, 0, &t, &r);
			float mx = -INFINITY;
			for (int32_t i = 0; i < n; i++) {
				w[i] = l[i];
				mx = w[i] > mx ? w[i] : mx;
			}
			int32_t live, last, tok;
			double z = alice_ts_weigh(w, n, mx, alice_ts_floor(mx, t), 1.0f / t, bs, &live, &last);
			bool used = live > 1;
			tok = used ? alice_ts_draw(w, n, bs, last, r * z) : alice_ts_single(w, n);
			struct alice_sample_result res;
			struct alice_error err = {{0}};
			cr_assert_eq(alice_sampler_temp_done(b, tok, used, &res, &err), ALICE_OK, "%s", err.msg);
			cr_assert_eq(res.token, draw(a, l, NULL), "trial %d step %d (T %g, n %d)", trial, step, (double)t, n);
		}
		alice_sampler_free(a);
		alice_sampler_free(b);
	}
	struct alice_sampling_params p;
	alice_sampling_params_default(&p);
	p.top_k = 40; /* truncated: not a whole-row draw */
	struct alice_sampler *s = mk(&p, 100);
	cr_expect_not(alice_sampler_temp_ok(s, false));
	alice_sampler_free(s);
	p.top_k = 0;
	p.temperature = 0; /* greedy */
	s = mk(&p, 100);
	cr_expect_not(alice_sampler_temp_ok(s, false));
	alice_sampler_free(s);
}

/* Every step at T > 0 takes one uniform, whether the draw needed it (many
 * live tokens) or not (one survivor: forced by the mask, top_k 1, or a
 * dominant logit), so temp_params(ahead = n) names the uniform of the step
 * n draws later before their tokens are known (the pipelined engine). */
Test(sampling, every_draw_takes_one_uniform)
{
	enum { N = 300 };
	static float l[N];
	static uint8_t mask[N];
	for (int mode = 0; mode < 4; mode++) {
		struct alice_sampling_params p;
		alice_sampling_params_default(&p);
		p.seed = 77u + (uint64_t)mode;
		p.temperature = 0.9f;
		p.top_k = mode == 1 ? 1 : 0;
		p.top_p = mode == 3 ? 0.5f : 1.0f;
		struct alice_sampler *s = mk(&p, N);
		float t0;
		double ahead[6];
		for (int i = 0; i < 6; i++)
			alice_sampler_temp_params(s, i, &t0, &ahead[i]);
		for (int step = 0; step < 6; step++) {
			float t;
			double r;
			alice_sampler_temp_params(s, 0, &t, &r);
			cr_assert_eq(r, ahead[step], "mode %d step %d: the uniform differs from the one named ahead", mode,
				     step);
			random_logits(l, N, 3.0f);
			for (int32_t i = 0; i < N; i++)
				mask[i] = mode != 0 || step % 2 == 0 || i == 7; /* mode 0: odd steps forced */
			if (mode == 2 && step % 2)
				l[11] = 1000.0f; /* one survivor above the e^-30 floor */
			draw(s, l, mask);
		}
		alice_sampler_free(s);
	}
}
