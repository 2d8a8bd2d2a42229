/* rope.cu — rotary embedding: NORMAL (pairs 2i, 2i+1), NEOX (pairs i,
 * i + n_dims/2) and IMROPE (NEOX pairing; pair i takes the t/h/w/e position
 * by the interleaved sections rule). theta_i = pos * freq_scale *
 * base^(-2i/n_dims) / factor[i]; dims past n_dims are copied. */
#include "rope.cuh"

/* blockIdx.y picks one of up to two tensors rotated with the same
 * positions and parameters (q and k of one layer). */
struct rope_job {
	uint8_t *d;
	struct cu_view dv;
	const uint8_t *x;
	struct cu_view xv;
};

/* Optional cache writes fused into the rope launch (cu_rope_kv): the
 * rotated k (job 1) also goes to cell ids[t] of the K cache, and
 * blockIdx.y == 2 copies v into the V cache. */
struct kv_fuse {
	uint8_t *kc, *vc;
	struct cu_view kcv, vcv, vsv;
	uint32_t kt, vt;
	const uint8_t *vs, *ids;
	int64_t inb0, n_cells;
	int *flag;
};

__device__ static inline bool kv_cell(const struct kv_fuse &kv, int64_t t, int64_t &cell, bool report)
{
	int32_t c = *(const int32_t *)(kv.ids + t * kv.inb0);
	if (c < 0 || c >= kv.n_cells) {
		if (report)
			atomicOr(kv.flag, CU_FLAG_CELL); /* dropped, never written outside the cache */
		return false;
	}
	cell = c;
	return true;
}

template <bool KV>
__global__ void k_rope(struct rope_job j0, struct rope_job j1, const int32_t *__restrict__ pos, int64_t pnb0,
		       const float *__restrict__ ff, int64_t fnb0, struct rope_params p, struct kv_fuse kv)
{
	pdl_wait();
	pdl_trigger();
	if (KV && blockIdx.y == 2) {
		/* v [dv, n_kv, T] into the V cache */
		int64_t f = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
		int64_t dv = kv.vsv.ne[0], nh = kv.vsv.ne[1];
		if (f >= dv * nh * kv.vsv.ne[2])
			return;
		int64_t e = f % dv, h = (f / dv) % nh, t = f / (dv * nh), cell;
		if (!kv_cell(kv, t, cell, e == 0 && h == 0))
			return;
		float v = *(const float *)(kv.vs + e * kv.vsv.nb[0] + h * kv.vsv.nb[1] + t * kv.vsv.nb[2]);
		st_float(kv.vc + e * kv.vcv.nb[0] + h * kv.vcv.nb[1] + cell * kv.vcv.nb[2], kv.vt, v);
		return;
	}
	const struct rope_job &jb = blockIdx.y ? j1 : j0;
	const bool tocache = KV && blockIdx.y == 1;
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
		int64_t e = p.n_dims + 2 * (i - nd2), cell = 0;
		bool ok = tocache && kv_cell(kv, t, cell, i == nd2 && h == 0 && p.n_dims == 0);
		for (int64_t k = e; k < e + 2 && k < xv.ne[0]; k++) {
			float v = *(const float *)(xr + k * xv.nb[0]);
			*(float *)(dr + k * dv.nb[0]) = v;
			if (ok)
				st_float(kv.kc + k * kv.kcv.nb[0] + h * kv.kcv.nb[1] + cell * kv.kcv.nb[2], kv.kt, v);
		}
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
	float c, s;
	rope_cs(p, i, pv, ff, fnb0, &c, &s);
	int64_t e0, e1;
	if (p.mode == ALICE_ROPE_NORMAL) {
		e0 = 2 * i;
		e1 = 2 * i + 1;
	} else {
		e0 = i;
		e1 = i + nd2;
	}
	float x0 = *(const float *)(xr + e0 * xv.nb[0]), x1 = *(const float *)(xr + e1 * xv.nb[0]);
	float y0, y1;
	rope_rot(x0, x1, c, s, &y0, &y1);
	*(float *)(dr + e0 * dv.nb[0]) = y0;
	*(float *)(dr + e1 * dv.nb[0]) = y1;
	int64_t cell;
	if (tocache && kv_cell(kv, t, cell, i == 0 && h == 0)) {
		uint8_t *kr = kv.kc + h * kv.kcv.nb[1] + cell * kv.kcv.nb[2];
		st_float(kr + e0 * kv.kcv.nb[0], kv.kt, y0);
		st_float(kr + e1 * kv.kcv.nb[0], kv.kt, y1);
	}
}

static enum alice_status rope_check(const struct alice_op_args *a, struct rope_params *p)
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

static struct rope_job rope_job_of(const struct alice_op_args *a)
{
	struct rope_job j = { tdata(a->dst), cu_view_of(a->dst), tdata(a->src[0]), cu_view_of(a->src[0]) };
	return j;
}

/* a[0..n), n = 1 or 2 nodes with the same positions, factors and params. */
enum alice_status cu_rope_multi(const struct alice_op_args *a, int n)
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
	struct kv_fuse kv;
	memset(&kv, 0, sizeof(kv));
	cu_launch(k_rope<false>, grid, 256, ctx->stream, j0, j1, (const int32_t *)tdata(pos), pos->nb[0],
		  ff ? (const float *)tdata(ff) : (const float *)NULL, ff ? ff->nb[0] : 0, p, kv);
	CUDA_LAUNCH_CHECK(ctx, "rope");
	return ALICE_OK;
}

enum alice_status cu_op_rope(const struct alice_op_args *a)
{
	return cu_rope_multi(a, 1);
}

/* The same data: graph builders add a weight (the rope frequencies) as a
 * new tensor each time a layer uses it, so ids differ where views agree. */
static bool same_view(const struct alice_tensor *a, const struct alice_tensor *b)
{
	if (!a || !b)
		return a == b;
	return a->buf == b->buf && a->offset == b->offset && a->type == b->type && !memcmp(a->ne, b->ne, sizeof(a->ne)) &&
	       !memcmp(a->nb, b->nb, sizeof(a->nb));
}

bool cu_rope_pairable(const struct alice_op_args *a, const struct alice_op_args *b)
{
	const struct alice_node *x = a->node, *y = b->node;
	if (y->op != ALICE_OP_ROPE || !same_view(a->src[1], b->src[1]) || !same_view(a->src[2], b->src[2]) ||
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

/* ROPE q, ROPE k, KV_WRITE (K cache <- rotated k), KV_WRITE (V cache <- v)
 * as one launch: a[0..4) are those nodes in that order. */
bool cu_rope_kv_fusable(const struct alice_op_args *a)
{
	if (!cu_rope_pairable(&a[0], &a[1]) || a[2].node->op != ALICE_OP_KV_WRITE || a[3].node->op != ALICE_OP_KV_WRITE ||
	    a[2].node->src[0] != a[1].node->dst || !cu_kv_pairable(&a[2], &a[3]) || a[3].node->src[0] == a[0].node->dst ||
	    a[3].node->src[0] == a[1].node->dst)
		return false;
	const struct alice_tensor *k = a[1].dst, *kc = a[2].dst, *v = a[3].src[0], *vc = a[3].dst, *ids = a[2].src[1];
	int64_t T = k->ne[2];
	/* rows of k / v are cache cells: [d, n_kv, T] against caches [d, n_kv, n_cells] */
	return k->ne[0] == kc->ne[0] && k->ne[1] == kc->ne[1] && k->ne[3] == 1 && v->ne[0] == vc->ne[0] &&
	       v->ne[1] == vc->ne[1] && v->ne[2] == T && v->ne[3] == 1 && ids->ne[0] == T && kc->ne[3] == 1 &&
	       vc->ne[3] == 1 && (kc->type == ALICE_TYPE_F16 || kc->type == ALICE_TYPE_F32) &&
	       (vc->type == ALICE_TYPE_F16 || vc->type == ALICE_TYPE_F32);
}

enum alice_status cu_rope_kv(const struct alice_op_args *a)
{
	struct alice_backend_ctx *ctx = a->ctx;
	struct rope_params p;
	enum alice_status st = rope_check(&a[0], &p);
	if (st != ALICE_OK)
		return st;
	int64_t tot = 0;
	for (int i = 0; i < 2; i++) {
		const struct alice_tensor *x = a[i].src[0];
		int64_t half = x->ne[0] / 2 + (x->ne[0] & 1);
		int64_t t = half * x->ne[1] * x->ne[2] * x->ne[3];
		tot = t > tot ? t : tot;
	}
	const struct alice_tensor *v = a[3].src[0], *ids = a[2].src[1];
	int64_t tv = v->ne[0] * v->ne[1] * v->ne[2];
	tot = tv > tot ? tv : tot;
	struct kv_fuse kv;
	kv.kc = tdata(a[2].dst);
	kv.kcv = cu_view_of(a[2].dst);
	kv.kt = a[2].dst->type;
	kv.vc = tdata(a[3].dst);
	kv.vcv = cu_view_of(a[3].dst);
	kv.vt = a[3].dst->type;
	kv.vs = tdata(v);
	kv.vsv = cu_view_of(v);
	kv.ids = tdata(ids);
	kv.inb0 = ids->nb[0];
	kv.n_cells = a[2].dst->ne[2];
	kv.flag = ctx->dflag;
	if (a[3].dst->ne[2] != kv.n_cells)
		return cu_fail(ctx, ALICE_ERR_INVALID, "KV_WRITE: K and V caches differ in cells");
	const struct alice_tensor *pos = a->src[1], *ff = a->src[2];
	struct rope_job j0 = rope_job_of(&a[0]), j1 = rope_job_of(&a[1]);
	dim3 grid(cu_blocks(tot, 256), 3);
	cu_launch(k_rope<true>, grid, 256, ctx->stream, j0, j1, (const int32_t *)tdata(pos), pos->nb[0],
		  ff ? (const float *)tdata(ff) : (const float *)NULL, ff ? ff->nb[0] : 0, p, kv);
	CUDA_LAUNCH_CHECK(ctx, "rope+kv_write");
	return ALICE_OK;
}

/* x is exactly the contiguous [hd, heads, 1] view of the product d */
static bool views_product(const struct alice_tensor *x, const struct alice_tensor *d)
{
	return x->buf == d->buf && x->offset == d->offset && x->nb[0] == 4 && x->nb[1] == 4 * x->ne[0] &&
	       x->ne[0] * x->ne[1] == d->ne[0] && x->ne[2] == 1 && x->ne[3] == 1 && d->nb[0] == 4 && d->ne[1] == 1 &&
	       d->type == ALICE_TYPE_F32 && x->type == ALICE_TYPE_F32;
}

bool cu_rope_mv_fusable(const struct alice_op_args *mm, const struct alice_op_args *r, struct mmv_rope *out)
{
	if (!cu_rope_kv_fusable(r))
		return false;
	struct rope_params p;
	const struct alice_tensor *q = r[0].src[0], *k = r[1].src[0], *v = r[3].src[0];
	const struct alice_tensor *qd = r[0].dst, *kd = r[1].dst, *pos = r[0].src[1], *ff = r[0].src[2];
	/* NORMAL pairs (rows 2i, 2i + 1: one warp's) of one token, read from the products themselves */
	if (r[0].node->ip[1] != ALICE_ROPE_NORMAL || rope_check(&r[0], &p) != ALICE_OK || !views_product(q, mm[0].dst) ||
	    !views_product(k, mm[1].dst) || !views_product(v, mm[2].dst) || k->ne[0] != q->ne[0] || q->ne[0] % 2 ||
	    qd->nb[0] % 4 || kd->nb[0] % 4 || qd->type != ALICE_TYPE_F32 || kd->type != ALICE_TYPE_F32 ||
	    r[2].dst->ne[2] != r[3].dst->ne[2])
		return false;
	const struct alice_tensor *kc = r[2].dst, *vc = r[3].dst, *ids = r[2].src[1];
	memset(out, 0, sizeof(*out));
	out->qd = tdata(qd);
	out->kd = tdata(kd);
	out->kc = tdata(kc);
	out->vc = tdata(vc);
	out->qnb0 = qd->nb[0];
	out->qnb1 = qd->nb[1];
	out->knb0 = kd->nb[0];
	out->knb1 = kd->nb[1];
	out->kcnb0 = kc->nb[0];
	out->kcnb1 = kc->nb[1];
	out->kcnb2 = kc->nb[2];
	out->vcnb0 = vc->nb[0];
	out->vcnb1 = vc->nb[1];
	out->vcnb2 = vc->nb[2];
	out->kt = kc->type;
	out->vt = vc->type;
	out->hd = q->ne[0];
	out->hdv = v->ne[0];
	out->pos = (const int32_t *)tdata(pos);
	out->ids = (const int32_t *)tdata(ids);
	out->ff = ff ? (const float *)tdata(ff) : NULL;
	out->fnb0 = ff ? ff->nb[0] : 0;
	out->n_cells = kc->ne[2];
	out->flag = r[0].ctx->dflag;
	out->p = p;
	out->on = 1;
	return true;
}
