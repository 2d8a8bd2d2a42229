/* ops_attention.c — fused attention over the KV cache (online softmax over
 * each token's cell range, GQA, soft-cap; F16 or F32 K/V) and KV_WRITE.
 * Work is split over (head, token) pairs. With an F16 K cache, q is rounded
 * to F16 before the q.k dot, as llama.cpp's CPU flash attention does. */
#include <math.h>
#include <string.h>

#include "cpu_internal.h"

struct attn_job {
	const struct alice_tensor *q, *k, *v, *r, *d;
	struct alice_backend_ctx *ctx;
	float scale, cap;
	int64_t group;
	atomic_long ctr;
};

static inline int32_t range_at(const struct alice_tensor *r, int64_t i, int64_t t)
{
	int32_t v;
	memcpy(&v, tensor_data(r) + i * r->nb[0] + t * r->nb[1], 4);
	return v;
}

static void attn_run(void *arg, int ith, int nth)
{
	(void)nth;
	struct attn_job *j = arg;
	const struct cpu_kernels *kk = cpu_k;
	const struct alice_tensor *q = j->q, *k = j->k, *v = j->v, *d = j->d;
	int64_t dk = q->ne[0], dv = v->ne[0], nh = q->ne[1], nt = q->ne[2];
	float *qf = (float *)j->ctx->tdata[ith];
	float *acc = qf + ((dk + 15) & ~15);
	uint16_t *q16 = (uint16_t *)(acc + ((dv + 15) & ~15));
	bool k16 = k->type == ALICE_TYPE_F16, v16 = v->type == ALICE_TYPE_F16;
	long t0, t1;
	while (chunk_next(&j->ctr, (long)(nh * nt), 1, &t0, &t1)) {
		int64_t h = t0 % nh, t = t0 / nh, hk = h / j->group;
		const uint8_t *qr = tensor_data(q) + h * q->nb[1] + t * q->nb[2];
		for (int64_t i = 0; i < dk; i++)
			memcpy(&qf[i], qr + i * q->nb[0], 4);
		if (k16) {
			kk->f32_to_f16(dk, qf, q16);
			kk->f16_to_f32(dk, q16, qf);
		}
		memset(acc, 0, (size_t)dv * 4);
		int32_t c0 = range_at(j->r, 0, t), c1 = range_at(j->r, 1, t);
		float m = -INFINITY, l = 0.0f;
		const uint8_t *kb = tensor_data(k) + hk * k->nb[1];
		const uint8_t *vb = tensor_data(v) + hk * v->nb[1];
		for (int64_t c = c0; c < c1; c++) {
			const uint8_t *kr = kb + c * k->nb[2];
			float s = k16 ? kk->dot_f16_f32(dk, (const uint16_t *)kr, qf)
				      : kk->dot_f32(dk, (const float *)kr, qf);
			s *= j->scale;
			if (j->cap != 0.0f)
				s = j->cap * tanhf(s / j->cap);
			if (s == -INFINITY)
				continue;
			float ms = 1.0f, vs;
			if (s > m) {
				ms = expf(m - s);
				m = s;
				vs = 1.0f;
				kk->scale_f32(dv, ms, acc);
			} else {
				vs = expf(s - m);
			}
			l = l * ms + vs;
			const uint8_t *vr = vb + c * v->nb[2];
			if (v16)
				kk->axpy_f16(dv, vs, (const uint16_t *)vr, acc);
			else
				kk->axpy_f32(dv, vs, (const float *)vr, acc);
		}
		float inv = l > 0.0f ? 1.0f / l : 0.0f;
		uint8_t *dr = tensor_data(d) + h * d->nb[1] + t * d->nb[2];
		for (int64_t i = 0; i < dv; i++) {
			float y = acc[i] * inv;
			memcpy(dr + i * d->nb[0], &y, 4);
		}
	}
}

enum alice_status cpu_op_attention(const struct cpu_op_args *a)
{
	const struct alice_tensor *q = a->src[0], *k = a->src[1], *v = a->src[2], *r = a->src[3],
				  *d = a->dst;
	struct alice_backend_ctx *ctx = a->ctx;
	int64_t dk = q->ne[0], nh = q->ne[1], nt = q->ne[2], nkv = k->ne[1], ncell = k->ne[2];
	if (q->ne[3] != 1 || k->ne[3] != 1 || v->ne[3] != 1 || k->ne[0] != dk || v->ne[1] != nkv ||
	    v->ne[2] != ncell || d->ne[0] != v->ne[0] || d->ne[1] != nh || d->ne[2] != nt ||
	    d->ne[3] != 1 || r->ne[0] != 2 || r->ne[1] != nt)
		return cpu_fail(ctx, ALICE_ERR_INVALID,
				"shapes do not match: q [%lld,%lld,%lld] K [%lld,%lld,%lld] V [%lld,%lld,%lld] ranges [%lld,%lld] dst [%lld,%lld,%lld]",
				(long long)q->ne[0], (long long)q->ne[1], (long long)q->ne[2], (long long)k->ne[0],
				(long long)k->ne[1], (long long)k->ne[2], (long long)v->ne[0], (long long)v->ne[1],
				(long long)v->ne[2], (long long)r->ne[0], (long long)r->ne[1], (long long)d->ne[0],
				(long long)d->ne[1], (long long)d->ne[2]);
	if (nkv < 1 || nh % nkv != 0)
		return cpu_fail(ctx, ALICE_ERR_INVALID, "n_head %lld is not a multiple of n_head_kv %lld",
				(long long)nh, (long long)nkv);
	if (k->nb[0] != (k->type == ALICE_TYPE_F16 ? 2 : 4) || v->nb[0] != (v->type == ALICE_TYPE_F16 ? 2 : 4))
		return cpu_fail(ctx, ALICE_ERR_INVALID, "K and V rows must be contiguous in dim 0");
	for (int64_t t = 0; t < nt; t++) {
		int32_t c0 = range_at(r, 0, t), c1 = range_at(r, 1, t);
		if (c0 < 0 || c1 < c0 || c1 > ncell)
			return cpu_fail(ctx, ALICE_ERR_RANGE, "token %lld: cell range [%d, %d) outside 0..%lld",
					(long long)t, c0, c1, (long long)ncell);
	}
	if (!isfinite(a->node->fp[0]) || !isfinite(a->node->fp[1]) || a->node->fp[1] < 0.0f)
		return cpu_fail(ctx, ALICE_ERR_INVALID, "bad scale %g or soft-cap %g", a->node->fp[0],
				a->node->fp[1]);
	size_t tb = (size_t)(((dk + 15) & ~15) + ((v->ne[0] + 15) & ~15)) * 4 + (size_t)dk * 2 + 64;
	enum alice_status st = cpu_scratch(ctx, 0, tb);
	if (st != ALICE_OK)
		return st;
	struct attn_job j = {.q = q, .k = k, .v = v, .r = r, .d = d, .ctx = ctx, .scale = a->node->fp[0],
			     .cap = a->node->fp[1], .group = nh / nkv};
	atomic_init(&j.ctr, 0);
	cpu_pool_run_dynamic_sized(ctx->pool, attn_run, &j, nh * nt * (dk + v->ne[0]) * (ncell < 16 ? 16 : ncell));
	return ALICE_OK;
}

/* ---- KV_WRITE ----
 * E = elements of src0 / n (n = number of cell indices). The cell dim of a
 * tensor is the first dim of size > 1 (or dim 3) whose lower dims hold
 * exactly E elements; row i of src0 goes to cell idx[i] of dst, element by
 * element in index order. */

static int cell_dim(const struct alice_tensor *t, int64_t e)
{
	int64_t p = 1;
	for (int d = 0; d < ALICE_MAX_DIMS; d++) {
		if (p == e) {
			while (d < ALICE_MAX_DIMS - 1 && t->ne[d] == 1)
				d++;
			return d;
		}
		p *= t->ne[d];
	}
	return -1;
}

struct kvw_job {
	const struct alice_tensor *s, *idx, *d;
	int ds, dd;
	int64_t e, n;
};

static void kvw_run(void *arg, int ith, int nth)
{
	struct kvw_job *j = arg;
	const struct alice_tensor *s = j->s, *d = j->d;
	bool f16 = d->type == ALICE_TYPE_F16;
	for (int64_t i = ith; i < j->n; i += nth) {
		int32_t cell;
		memcpy(&cell, tensor_data(j->idx) + i * j->idx->nb[0], 4);
		/* row i of src0: unravel i over src0's dims >= ds */
		const uint8_t *sp = tensor_data(s);
		int64_t rem = i;
		for (int k = j->ds; k < ALICE_MAX_DIMS; k++) {
			sp += (rem % s->ne[k]) * s->nb[k];
			rem /= s->ne[k];
		}
		uint8_t *dp = tensor_data(d) + (int64_t)cell * d->nb[j->dd];
		for (int64_t e = 0; e < j->e; e++) {
			const uint8_t *sv = sp;
			uint8_t *dvp = dp;
			int64_t r1 = e, r2 = e;
			for (int k = 0; k < j->ds; k++) {
				sv += (r1 % s->ne[k]) * s->nb[k];
				r1 /= s->ne[k];
			}
			for (int k = 0; k < j->dd; k++) {
				dvp += (r2 % d->ne[k]) * d->nb[k];
				r2 /= d->ne[k];
			}
			float v;
			memcpy(&v, sv, 4);
			if (f16) {
				uint16_t h = alice_fp32_to_fp16(v);
				memcpy(dvp, &h, 2);
			} else {
				memcpy(dvp, &v, 4);
			}
		}
	}
}

enum alice_status cpu_op_kv_write(const struct cpu_op_args *a)
{
	const struct alice_tensor *s = a->src[0], *idx = a->src[1], *d = a->dst;
	int64_t n = idx->ne[0];
	if (idx->ne[1] * idx->ne[2] * idx->ne[3] != 1 || n < 1 || tensor_nelem(s) % n != 0)
		return cpu_fail(a->ctx, ALICE_ERR_INVALID, "%lld cell indices for %lld source elements",
				(long long)tensor_nelem(idx), (long long)tensor_nelem(s));
	int64_t e = tensor_nelem(s) / n;
	int ds = cell_dim(s, e), dd = cell_dim(d, e);
	if (ds < 0 || dd < 0)
		return cpu_fail(a->ctx, ALICE_ERR_INVALID, "rows of %lld elements do not line up with the dims of src0 / dst",
				(long long)e);
	int64_t ncell = 1;
	for (int k = dd; k < ALICE_MAX_DIMS; k++)
		ncell *= d->ne[k];
	if (ncell != d->ne[dd])
		return cpu_fail(a->ctx, ALICE_ERR_INVALID, "dst has dims past its cell dim %d", dd);
	for (int64_t i = 0; i < n; i++) {
		int32_t c;
		memcpy(&c, tensor_data(idx) + i * idx->nb[0], 4);
		if (c < 0 || c >= d->ne[dd])
			return cpu_fail(a->ctx, ALICE_ERR_RANGE, "cell index %d (row %lld) outside 0..%lld", c,
					(long long)i, (long long)d->ne[dd] - 1);
	}
	struct kvw_job j = {.s = s, .idx = idx, .d = d, .ds = ds, .dd = dd, .e = e, .n = n};
	cpu_pool_run_sized(a->ctx->pool, kvw_run, &j, n * e);
	return ALICE_OK;
}
