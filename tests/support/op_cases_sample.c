/* op_cases_sample.c — the sampling ops' cases of the op test
 * (tests/backends/test_ops.c): TOPK, SAMPLE_TEMP, LOGIT_ADJUST, FEED,
 * LOGSUMEXP, TOKEN_MASK, each with its exact reference. */
#include "support/op_cases_sample.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/quant.h"
#include "alice/temp_sample.h"
#include "support/topk_ref.h"

/* TOPK: rows of several widths, with ties (values on a coarse grid), NaN,
 * +inf and -inf entries, an all-NaN row; K from 1 to the maximum. The
 * reference sorts each row (higher first, ties to the lower index); the
 * comparison is exact (bound 0): ids and value bits. */
void build_topk(struct tcase **cs, int *n, struct rng *r)
{
	struct { int64_t n, rows; int k; int grid; } v[] = {
		{1000, 3, 1, 0}, {1000, 5, 40, 16}, {32000, 4, 128, 0}, {152064, 2, 128, 64},
		{129, 7, 128, 4}, {5000, 64, 64, 0}, {300, 2, 128, 1},
		/* k = 1 (a greedy step: the argmax kernel, split and not) */
		{128256, 1, 1, 0}, {152064, 3, 1, 64}, {50000, 64, 1, 2}, {70000, 300, 1, 0},
	};
	for (size_t s = 0; s < sizeof(v) / sizeof(v[0]); s++) {
		struct tcase *c = new_case(cs, n, "TOPK k=%d [%lld,%lld]%s", v[s].k, (long long)v[s].n,
					   (long long)v[s].rows, v[s].grid ? " ties" : "");
		c->node.op = ALICE_OP_TOPK;
		c->node.ip[0] = v[s].k;
		tc_tensor(c, ALICE_TYPE_I32, 2, v[s].k, v[s].rows, 1, 0);
		int x = tc_tensor(c, ALICE_TYPE_F32, v[s].n, v[s].rows, 1, 1, 0);
		c->node.src[0] = x;
		fill_gauss(c, x, r, 4.0);
		float *xs = malloc((size_t)v[s].n * sizeof(float));
		int32_t *pairs = malloc((size_t)v[s].k * 2 * sizeof(int32_t));
		double *ref = alloc_ref(c);
		for (int64_t row = 0; row < v[s].rows; row++) {
			for (int64_t i = 0; i < v[s].n; i++) {
				float f = (float)get_el(c, x, i + v[s].n * row);
				if (v[s].grid) /* few distinct values: many ties */
					f = roundf(f * (float)v[s].grid / 8.0f);
				uint64_t u = rng_u64(r) % 1000;
				f = u == 0 ? NAN : u == 1 ? INFINITY : u == 2 ? -INFINITY : f;
				if (row == 1 && v[s].rows > 2) /* a row that is all NaN */
					f = NAN;
				set_el(c, x, i + v[s].n * row, f);
				xs[i] = f;
			}
			if (topk_ref(xs, (int32_t)v[s].n, v[s].k, pairs) != 0) {
				fprintf(stderr, "build_topk: out of memory\n");
				abort();
			}
			for (int j = 0; j < 2 * v[s].k; j++)
				ref[j + 2 * v[s].k * row] = pairs[j];
		}
		free(xs);
		free(pairs);
		c->bound = 0; /* exact */
		c->core = false;
	}
}

/* The walk's cum after token j (alice_ts_draw's order: whole blocks
 * before j's block by their sums, then its tokens one by one). */
static double ts_cum_at(const float *w, const double *bs, int32_t j)
{
	const int32_t b = j / ALICE_TS_BLOCK;
	double cum = 0;
	for (int32_t k = 0; k < b; k++)
		cum += bs[k];
	for (int32_t i = b * ALICE_TS_BLOCK; i <= j; i++)
		cum += w[i];
	return cum;
}

/* SAMPLE_TEMP: rows drawn at several temperatures (0: skipped), a row with
 * one live token, an all -inf row, ties, NaN and +inf; with "edges", each
 * draw's r puts u = r * z within a few ulps of the walk's cum at a token
 * (a block's last one every third row), where a backend that finds the
 * token by other sums must fall back to the walk's order. The reference is
 * alice/temp_sample.h itself (the sampler's code); exact. */
void build_sample_temp(struct tcase **cs, int *n, struct rng *r)
{
	struct { int64_t n, rows; float grid; bool edge; } v[] = {
		{1000, 6, 0, false},   {32000, 5, 2, false}, {128256, 4, 0, false}, {152064, 3, 0, false},
		{300, 8, 1, false},    {4097, 64, 0, false}, {4097, 40, 0, true},    {128256, 24, 0, true},
		{32000, 16, 4, true},
	};
	const float temps[] = {0.8f, 1.0f, 0.0f, 0.3f, 1.7f, 0.05f, 2.0f, 0.8f};
	for (size_t s = 0; s < sizeof(v) / sizeof(v[0]); s++) {
		int64_t nv = v[s].n, rows = v[s].rows;
		struct tcase *c = new_case(cs, n, "SAMPLE_TEMP [%lld,%lld]%s%s", (long long)nv, (long long)rows,
					   v[s].grid ? " ties" : "", v[s].edge ? " edges" : "");
		c->node.op = ALICE_OP_SAMPLE_TEMP;
		tc_tensor(c, ALICE_TYPE_I32, 2, rows, 1, 1, 0);
		int x = tc_tensor(c, ALICE_TYPE_F32, nv, rows, 1, 1, 0);
		int p = tc_tensor(c, ALICE_TYPE_I32, 4, rows, 1, 1, 0);
		c->node.src[0] = x;
		c->node.src[1] = p;
		fill_gauss(c, x, r, 3.0);
		float *w = malloc((size_t)nv * sizeof(float));
		double *bs = malloc((size_t)(nv / ALICE_TS_BLOCK + 1) * sizeof(double));
		double *ref = alloc_ref(c);
		for (int64_t row = 0; row < rows; row++) {
			float t = temps[row % 8];
			for (int64_t i = 0; i < nv; i++) {
				float f = (float)get_el(c, x, i + nv * row);
				if (v[s].grid)
					f = roundf(f * v[s].grid);
				uint64_t u = rng_u64(r) % 2000;
				f = u == 0 ? NAN : u == 1 ? -INFINITY : u == 2 && row == 3 ? INFINITY : f;
				if (row == 1) /* one live token: the rest far below */
					f = i == nv / 2 ? 50.0f : f - 100.0f;
				if (row == 5 && rows > 5) /* nothing can be drawn */
					f = -INFINITY;
				set_el(c, x, i + nv * row, f);
				w[i] = f != f ? -INFINITY : f > FLT_MAX ? FLT_MAX : f;
			}
			double u01 = (double)(rng_u64(r) >> 11) * 0x1.0p-53;
			int32_t tok = -1, used = 0;
			float mx = -INFINITY;
			for (int64_t i = 0; i < nv; i++)
				mx = w[i] > mx ? w[i] : mx;
			if (t > 0 && mx > -INFINITY) {
				int32_t live, last;
				double z = alice_ts_weigh(w, (int32_t)nv, mx, alice_ts_floor(mx, t), 1.0f / t, bs, &live, &last);
				if (v[s].edge && live > 1) {
					int32_t j = (int32_t)(rng_u64(r) % (uint64_t)nv);
					if (row % 3 == 0) /* a block's last token */
						j = j / ALICE_TS_BLOCK * ALICE_TS_BLOCK + ALICE_TS_BLOCK - 1 < nv
							    ? j / ALICE_TS_BLOCK * ALICE_TS_BLOCK + ALICE_TS_BLOCK - 1
							    : (int32_t)nv - 1;
					u01 = ts_cum_at(w, bs, j) / z;
					for (int k = (int)(row % 5) - 2; k != 0; k += k > 0 ? -1 : 1)
						u01 = nextafter(u01, k > 0 ? 1.0 : 0.0);
					u01 = u01 < 1 ? u01 : nextafter(1.0, 0.0);
				}
				if (live == 1) {
					tok = alice_ts_single(w, (int32_t)nv);
				} else {
					tok = alice_ts_draw(w, (int32_t)nv, bs, last, u01 * z);
					used = 1;
				}
			}
			uint64_t ub;
			memcpy(&ub, &u01, 8);
			int32_t tb;
			memcpy(&tb, &t, 4);
			int32_t *pp = (int32_t *)(c->host[p] + row * c->t[p].nb[1]);
			pp[0] = tb;
			pp[1] = (int32_t)(uint32_t)ub;
			pp[2] = (int32_t)(uint32_t)(ub >> 32);
			pp[3] = 0;
			ref[2 * row] = tok;
			ref[2 * row + 1] = used;
		}
		free(w);
		free(bs);
		c->bound = 0; /* exact */
		c->core = false;
	}
}

/* LOGIT_ADJUST: records of every flag combination on rows with NaN and
 * +inf (cleaned where edited), overflow to +inf (cleaned to FLT_MAX), bans,
 * repeat penalties above and below 1, negative penalties, records past
 * the count (stale: ignored) and out of range (skipped); unedited values
 * stay as they were. The reference is alice_ts_adjust (the sampler's
 * rule); exact, bit for bit. */
void build_logit_adjust(struct tcase **cs, int *n, struct rng *r)
{
	struct { int64_t n, rows; int recs, cap; } v[] = {{1000, 3, 200, 256}, {128256, 4, 1500, 2048}, {50, 2, 0, 8}};
	for (size_t s = 0; s < sizeof(v) / sizeof(v[0]); s++) {
		int64_t nv = v[s].n, rows = v[s].rows;
		struct tcase *c = new_case(cs, n, "LOGIT_ADJUST [%lld,%lld] %d records", (long long)nv, (long long)rows,
					   v[s].recs);
		c->node.op = ALICE_OP_LOGIT_ADJUST;
		int x = tc_tensor(c, ALICE_TYPE_F32, nv, rows, 1, 1, 0); /* dst, in place */
		int rc = tc_tensor(c, ALICE_TYPE_I32, 6, v[s].cap, 1, 1, 0);
		c->node.dst = x;
		c->node.src[0] = rc;
		fill_gauss(c, x, r, 3.0);
		double *ref = alloc_ref(c);
		bool *used = calloc((size_t)(nv * rows), 1);
		int32_t *rec = (int32_t *)c->host[rc];
		for (int i = 0; i < 6 * v[s].cap; i++) /* stale records past the count */
			rec[i] = (int32_t)(rng_u64(r) % 7);
		int k = 0;
		for (int i = 0; i < v[s].recs; i++) {
			int64_t row = (int64_t)(rng_u64(r) % (uint64_t)rows), tok = (int64_t)(rng_u64(r) % (uint64_t)nv);
			if (used[row * nv + tok])
				continue;
			used[row * nv + tok] = true;
			uint64_t u = rng_u64(r);
			uint32_t fl = (uint32_t)(u % 16);
			float bias = (float)((double)(int)(u >> 8 & 0xff) / 16.0 - 8.0);
			float rp = (u >> 16 & 1) ? 1.3f : 0.7f, pen = (float)((double)(int)(u >> 20 & 0xff) / 64.0 - 2.0);
			float x0 = (float)get_el(c, x, tok + nv * row);
			if (u % 97 == 0)
				x0 = NAN;
			else if (u % 89 == 0)
				x0 = INFINITY;
			else if (u % 83 == 0) { /* x + bias overflows */
				x0 = 3e38f;
				bias = 3e38f;
				fl |= ALICE_ADJ_BIAS;
			}
			set_el(c, x, tok + nv * row, x0);
			int32_t *e = rec + 6 * (1 + k++);
			e[0] = (int32_t)row;
			e[1] = (int32_t)tok;
			e[2] = (int32_t)fl;
			memcpy(&e[3], &bias, 4);
			memcpy(&e[4], &rp, 4);
			memcpy(&e[5], &pen, 4);
		}
		if (k + 2 < v[s].cap) { /* out of range: skipped */
			int32_t *e = rec + 6 * (1 + k++);
			e[0] = (int32_t)rows;
			e[1] = 0;
			e[2] = ALICE_ADJ_BAN;
			e = rec + 6 * (1 + k++);
			e[0] = 0;
			e[1] = (int32_t)nv;
			e[2] = ALICE_ADJ_BAN;
		}
		rec[0] = k;
		for (int64_t i = 0; i < nv * rows; i++)
			ref[i] = get_el(c, x, i);
		for (int i = 1; i <= k; i++) {
			const int32_t *e = rec + 6 * i;
			if (e[0] >= rows || e[1] >= nv)
				continue;
			float bias, rp, pen;
			memcpy(&bias, &e[3], 4);
			memcpy(&rp, &e[4], 4);
			memcpy(&pen, &e[5], 4);
			int64_t at = e[1] + nv * e[0];
			ref[at] = alice_ts_adjust(alice_ts_clean((float)ref[at]), (uint32_t)e[2], bias, rp, pen);
		}
		free(used);
		c->bits = true;
		c->core = false;
	}
}

/* FEED: tokens from the host where the index is -1, else the pick at the
 * index (the first and last element included); exact. */
void build_feed(struct tcase **cs, int *n, struct rng *r)
{
	struct { int64_t n, m; } v[] = {{1, 2}, {64, 256}, {300, 33000}};
	for (size_t s = 0; s < sizeof(v) / sizeof(v[0]); s++) {
		struct tcase *c = new_case(cs, n, "FEED %lld tokens of %lld picks", (long long)v[s].n, (long long)v[s].m);
		c->node.op = ALICE_OP_FEED;
		int d = tc_tensor(c, ALICE_TYPE_I32, v[s].n, 1, 1, 1, 0);
		int h = tc_tensor(c, ALICE_TYPE_I32, v[s].n, 1, 1, 1, 0);
		int ix = tc_tensor(c, ALICE_TYPE_I32, v[s].n, 1, 1, 1, 0);
		int pk = tc_tensor(c, ALICE_TYPE_I32, v[s].m, 1, 1, 1, 0);
		c->node.dst = d;
		c->node.src[0] = h;
		c->node.src[1] = ix;
		c->node.src[2] = pk;
		int32_t *hp = (int32_t *)c->host[h], *ip = (int32_t *)c->host[ix], *pp = (int32_t *)c->host[pk];
		for (int64_t i = 0; i < v[s].m; i++)
			pp[i] = (int32_t)(rng_u64(r) % 200000);
		double *ref = alloc_ref(c);
		for (int64_t i = 0; i < v[s].n; i++) {
			hp[i] = (int32_t)(rng_u64(r) % 200000);
			uint64_t u = rng_u64(r);
			ip[i] = i == 0 ? (int32_t)(v[s].m - 1) : i == 1 ? 0 : u % 3 == 0 ? -1 : (int32_t)(u % (uint64_t)v[s].m);
			ref[i] = ip[i] < 0 ? hp[i] : pp[ip[i]];
		}
		c->bound = 0; /* exact */
		c->core = false;
	}
}

/* LOGSUMEXP: rows of a 152k and a small vocabulary with NaN, +inf (the
 * max becomes FLT_MAX), -inf, a row whose values lie far below its max,
 * an all -inf row; tokens inside, -1 and past the row. The reference is
 * alice_ts_lse_sum (the sampler's code); exact, bit for bit. */
void build_logsumexp(struct tcase **cs, int *n, struct rng *r)
{
	struct { int64_t n, rows; bool tok; } v[] = {{152064, 4, true}, {1000, 5, false}, {4096, 64, true}};
	for (size_t s = 0; s < sizeof(v) / sizeof(v[0]); s++) {
		int64_t nv = v[s].n, rows = v[s].rows;
		struct tcase *c = new_case(cs, n, "LOGSUMEXP [%lld,%lld]%s", (long long)nv, (long long)rows,
					   v[s].tok ? " with tokens" : "");
		c->node.op = ALICE_OP_LOGSUMEXP;
		int d = tc_tensor(c, ALICE_TYPE_I32, 4, rows, 1, 1, 0);
		int x = tc_tensor(c, ALICE_TYPE_F32, nv, rows, 1, 1, 0);
		int tk = v[s].tok ? tc_tensor(c, ALICE_TYPE_I32, 2, rows, 1, 1, 0) : -1;
		c->node.dst = d;
		c->node.src[0] = x;
		c->node.src[1] = tk;
		fill_gauss(c, x, r, 3.0);
		double *ref = alloc_ref(c);
		float *row = malloc((size_t)nv * sizeof(float));
		for (int64_t q = 0; q < rows; q++) {
			for (int64_t i = 0; i < nv; i++) {
				float f = (float)get_el(c, x, i + nv * q);
				uint64_t u = rng_u64(r) % 997;
				f = u == 0 ? NAN : u == 1 ? -INFINITY : f;
				if (q == 1 && i % 3 == 0) /* spread: many tokens below max - 30 */
					f *= 40.0f;
				if (q == 2 && rows > 3)
					f = -INFINITY;
				if (q == 3 && i == 17)
					f = INFINITY;
				set_el(c, x, i + nv * q, f);
				row[i] = f;
			}
			int32_t tok = q % 3 == 0 ? (int32_t)(rng_u64(r) % (uint64_t)nv) : q % 3 == 1 ? -1 : (int32_t)nv;
			if (tk >= 0) {
				set_el(c, tk, 2 * q, tok);
				set_el(c, tk, 2 * q + 1, 1);
			}
			float mx = -INFINITY;
			for (int64_t i = 0; i < nv; i++)
				mx = alice_ts_clean(row[i]) > mx ? alice_ts_clean(row[i]) : mx;
			double sum = mx > -INFINITY ? alice_ts_lse_sum(row, (int32_t)nv, mx) : 0.0;
			float val = tk >= 0 && tok >= 0 && tok < nv ? alice_ts_clean(row[tok]) : 0.0f;
			int32_t o[4];
			uint64_t sb;
			memcpy(&sb, &sum, 8);
			memcpy(&o[0], &mx, 4);
			o[1] = (int32_t)(uint32_t)sb;
			o[2] = (int32_t)(uint32_t)(sb >> 32);
			memcpy(&o[3], &val, 4);
			for (int k = 0; k < 4; k++)
				ref[4 * q + k] = o[k];
		}
		free(row);
		c->bound = 0; /* exact */
		c->core = false;
	}
}

/* TOKEN_MASK: records for some rows (random bits, one allowing nothing,
 * one allowing everything), a row past dst (skipped), stale records past
 * the count (ignored), a vocabulary not a multiple of 32; exact. */
void build_token_mask(struct tcase **cs, int *n, struct rng *r)
{
	struct { int64_t n, rows; int recs, cap; } v[] = {{1000, 4, 3, 5}, {128256, 6, 4, 8}, {33, 3, 2, 2}};
	for (size_t s = 0; s < sizeof(v) / sizeof(v[0]); s++) {
		int64_t nv = v[s].n, rows = v[s].rows, W = 1 + (nv + 31) / 32;
		struct tcase *c = new_case(cs, n, "TOKEN_MASK [%lld,%lld] %d records", (long long)nv, (long long)rows,
					   v[s].recs);
		c->node.op = ALICE_OP_TOKEN_MASK;
		int x = tc_tensor(c, ALICE_TYPE_F32, nv, rows, 1, 1, 0);
		int rc = tc_tensor(c, ALICE_TYPE_I32, W, v[s].cap + 1, 1, 1, 0);
		c->node.dst = x;
		c->node.src[0] = rc;
		fill_gauss(c, x, r, 3.0);
		double *ref = alloc_ref(c);
		for (int64_t i = 0; i < nv * rows; i++)
			ref[i] = get_el(c, x, i);
		int32_t *rec = (int32_t *)c->host[rc];
		for (int64_t i = 0; i < W * (v[s].cap + 1); i++) /* stale records: would mask row 0 */
			rec[i] = 0;
		rec[0] = v[s].recs;
		for (int k = 1; k <= v[s].recs; k++) {
			int32_t *e = rec + W * k;
			e[0] = k == v[s].recs && v[s].recs > 2 ? (int32_t)rows : k; /* the last past dst */
			for (int64_t w = 1; w < W; w++)
				e[w] = k == 1 ? 0 : k == 2 ? -1 : (int32_t)(uint32_t)rng_u64(r);
			if (e[0] >= rows)
				continue;
			for (int64_t t = 0; t < nv; t++)
				if (!(((uint32_t)e[1 + t / 32] >> (t % 32)) & 1u))
					ref[t + nv * e[0]] = -INFINITY;
		}
		c->bits = true;
		c->core = false;
	}
}
