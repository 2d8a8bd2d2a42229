/* rope.cu — rotary embedding: NORMAL (pairs 2i, 2i+1), NEOX (pairs i,
 * i + n_dims/2) and IMROPE (NEOX pairing; pair i takes the t/h/w/e position
 * by the interleaved sections rule). theta_i = pos * freq_scale *
 * base^(-2i/n_dims) / factor[i]; dims past n_dims are copied. */
#include "common.cuh"

struct rope_params {
	int n_dims, mode;
	int sect[4];
	float base, scale;
	int64_t n_tokens;
};

/* blockIdx.y picks one of up to two tensors rotated with the same
 * positions and parameters (q and k of one layer). */
struct rope_job {
	uint8_t *d;
	struct cu_view dv;
	const uint8_t *x;
	struct cu_view xv;
};

__global__ void k_rope(struct rope_job j0, struct rope_job j1, const int32_t *__restrict__ pos, int64_t pnb0,
		       const float *__restrict__ ff, int64_t fnb0, struct rope_params p)
{
	const struct rope_job &jb = blockIdx.y ? j1 : j0;
	uint8_t *__restrict__ d = jb.d;
	const uint8_t *__restrict__ x = jb.x;
	const struct cu_view &dv = jb.dv, &xv = jb.xv;
	/* one thread per (pair or copied element pair slot, head, token) */
	int64_t half = xv.ne[0] / 2 + (xv.ne[0] & 1);
	int64_t f = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	int64_t tot = half * xv.ne[1] * xv.ne[2] * xv.ne[3];
	if (f >= tot)
		return;
	int64_t i = f % half, r = f / half;
	int64_t h = r % xv.ne[1], t = (r / xv.ne[1]) % xv.ne[2], i3 = r / (xv.ne[1] * xv.ne[2]);
	const uint8_t *xr = x + h * xv.nb[1] + t * xv.nb[2] + i3 * xv.nb[3];
	uint8_t *dr = d + h * dv.nb[1] + t * dv.nb[2] + i3 * dv.nb[3];
	int nd2 = p.n_dims / 2;
	if (i >= nd2) {
		/* copy the tail: this thread copies elements n_dims + 2(i - nd2) and +1 */
		int64_t e = p.n_dims + 2 * (i - nd2);
		for (int64_t k = e; k < e + 2 && k < xv.ne[0]; k++)
			*(float *)(dr + k * dv.nb[0]) = *(const float *)(xr + k * xv.nb[0]);
		return;
	}
	const uint8_t *pb = (const uint8_t *)pos;
	float pv;
	if (p.mode == ALICE_ROPE_IMROPE) {
		int sd = p.sect[0] + p.sect[1] + p.sect[2] + p.sect[3];
		int sector = sd > 0 ? (int)(i % sd) : 0;
		int axis;
		if (sector % 3 == 1 && sector < 3 * p.sect[1])
			axis = 1;
		else if (sector % 3 == 2 && sector < 3 * p.sect[2])
			axis = 2;
		else if (sector % 3 == 0 && sector < 3 * p.sect[0])
			axis = 0;
		else
			axis = 3;
		pv = (float)*(const int32_t *)(pb + (t + axis * p.n_tokens) * pnb0);
	} else {
		pv = (float)*(const int32_t *)(pb + t * pnb0);
	}
	float theta = pv * p.scale * powf(p.base, -2.f * (float)i / (float)p.n_dims);
	if (ff)
		theta /= *(const float *)((const uint8_t *)ff + i * fnb0);
	float c, s;
	sincosf(theta, &s, &c);
	int64_t e0, e1;
	if (p.mode == ALICE_ROPE_NORMAL) {
		e0 = 2 * i;
		e1 = 2 * i + 1;
	} else {
		e0 = i;
		e1 = i + nd2;
	}
	float x0 = *(const float *)(xr + e0 * xv.nb[0]), x1 = *(const float *)(xr + e1 * xv.nb[0]);
	*(float *)(dr + e0 * dv.nb[0]) = x0 * c - x1 * s;
	*(float *)(dr + e1 * dv.nb[0]) = x0 * s + x1 * c;
}

static enum alice_status rope_check(const struct cu_args *a, struct rope_params *p)
{
	struct alice_backend_ctx *ctx = a->ctx;
	const struct alice_tensor *d = a->dst, *x = a->src[0], *pos = a->src[1], *ff = a->src[2];
	const struct alice_node *nd = a->node;
	for (int i = 0; i < 4; i++)
		if (d->ne[i] != x->ne[i])
			return cu_fail(ctx, ALICE_ERR_INVALID, "dst and src0 shapes differ");
	p->n_dims = nd->ip[0];
	p->mode = nd->ip[1];
	for (int i = 0; i < 4; i++)
		p->sect[i] = nd->ip[2 + i];
	p->base = nd->fp[0];
	p->scale = nd->fp[1];
	p->n_tokens = x->ne[2];
	if (p->n_dims <= 0 || p->n_dims % 2 || p->n_dims > x->ne[0])
		return cu_fail(ctx, ALICE_ERR_INVALID, "ROPE: n_dims %d (head_dim %lld)", p->n_dims, (long long)x->ne[0]);
	if (p->mode != ALICE_ROPE_NORMAL && p->mode != ALICE_ROPE_NEOX && p->mode != ALICE_ROPE_IMROPE)
		return cu_fail(ctx, ALICE_ERR_UNSUPPORTED, "ROPE: mode %d", p->mode);
	int64_t need = p->mode == ALICE_ROPE_IMROPE ? 4 * x->ne[2] : x->ne[2];
	if (tnelem(pos) < need || x->ne[3] != 1)
		return cu_fail(ctx, ALICE_ERR_INVALID, "ROPE: %lld positions for %lld tokens", (long long)tnelem(pos),
			       (long long)x->ne[2]);
	if (ff && tnelem(ff) < p->n_dims / 2)
		return cu_fail(ctx, ALICE_ERR_INVALID, "ROPE: frequency factors must have n_dims/2 elements");
	if (p->mode == ALICE_ROPE_IMROPE)
		for (int i = 0; i < 4; i++)
			if (p->sect[i] < 0)
				return cu_fail(ctx, ALICE_ERR_INVALID, "ROPE: negative section");
	return ALICE_OK;
}

static struct rope_job rope_job_of(const struct cu_args *a)
{
	struct rope_job j = { tdata(a->dst), cu_view_of(a->dst), tdata(a->src[0]), cu_view_of(a->src[0]) };
	return j;
}

/* a[0..n), n = 1 or 2 nodes with the same positions, factors and params. */
enum alice_status cu_rope_multi(const struct cu_args *a, int n)
{
	struct alice_backend_ctx *ctx = a->ctx;
	struct rope_params p;
	enum alice_status st = rope_check(&a[0], &p);
	if (st != ALICE_OK)
		return st;
	int64_t tot = 0;
	for (int i = 0; i < n; i++) {
		const struct alice_tensor *x = a[i].src[0];
		int64_t half = x->ne[0] / 2 + (x->ne[0] & 1);
		int64_t t = half * x->ne[1] * x->ne[2] * x->ne[3];
		tot = t > tot ? t : tot;
	}
	const struct alice_tensor *pos = a->src[1], *ff = a->src[2];
	struct rope_job j0 = rope_job_of(&a[0]), j1 = n > 1 ? rope_job_of(&a[1]) : j0;
	dim3 grid(cu_blocks(tot, 256), (unsigned)n);
	k_rope<<<grid, 256, 0, ctx->stream>>>(j0, j1, (const int32_t *)tdata(pos), pos->nb[0],
					       ff ? (const float *)tdata(ff) : NULL, ff ? ff->nb[0] : 0, p);
	CUDA_LAUNCH_CHECK(ctx, "rope");
	return ALICE_OK;
}

enum alice_status cu_op_rope(const struct cu_args *a)
{
	return cu_rope_multi(a, 1);
}

bool cu_rope_pairable(const struct cu_args *a, const struct cu_args *b)
{
	const struct alice_node *x = a->node, *y = b->node;
	if (y->op != ALICE_OP_ROPE || x->src[1] != y->src[1] || x->src[2] != y->src[2] ||
	    memcmp(x->ip, y->ip, sizeof(x->ip)) || memcmp(x->fp, y->fp, sizeof(x->fp)) || y->src[0] == x->dst)
		return false;
	const struct alice_tensor *ad = a->dst, *bx = b->src[0];
	/* b must not read what a writes */
	if (ad->buf == bx->buf && ad->offset < bx->offset + (uint64_t)(bx->ne[3] * bx->nb[3]) &&
	    bx->offset < ad->offset + (uint64_t)(ad->ne[3] * ad->nb[3]))
		return false;
	struct rope_params tmp;
	return rope_check(b, &tmp) == ALICE_OK;
}
