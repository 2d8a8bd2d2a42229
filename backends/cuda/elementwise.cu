/* elementwise.cu — ADD, MUL (with broadcast), SCALE, SOFTCAP, GLU, UNARY,
 * COPY and KV_WRITE. Every tensor may be a strided 4-D view: a thread maps
 * its flat dst index to 4-D indices and each operand's byte offset. */
#include "common.cuh"

#define EW_THREADS 256

/* 4-D indices of flat index i over ne */
struct idx4 {
	int64_t i[4];
};

__device__ static inline idx4 unflat(const int64_t *ne, int64_t f)
{
	idx4 r;
	r.i[0] = f % ne[0];
	f /= ne[0];
	r.i[1] = f % ne[1];
	f /= ne[1];
	r.i[2] = f % ne[2];
	r.i[3] = f / ne[2];
	return r;
}

__device__ static inline int64_t off_of(const struct cu_view &v, const idx4 &x)
{
	return x.i[0] * v.nb[0] + x.i[1] * v.nb[1] + x.i[2] * v.nb[2] + x.i[3] * v.nb[3];
}

/* b broadcasts: index modulo its ne */
__device__ static inline int64_t off_bcast(const struct cu_view &v, const idx4 &x)
{
	return (x.i[0] % v.ne[0]) * v.nb[0] + (x.i[1] % v.ne[1]) * v.nb[1] + (x.i[2] % v.ne[2]) * v.nb[2] +
	       (x.i[3] % v.ne[3]) * v.nb[3];
}

enum ew_kind { EW_ADD, EW_MUL, EW_SCALE, EW_SOFTCAP, EW_GLU, EW_UNARY };

template <int K>
__global__ void k_ew(uint8_t *__restrict__ d, struct cu_view dv, const uint8_t *__restrict__ a, struct cu_view av,
		     const uint8_t *__restrict__ b, struct cu_view bv, float p0, float p1, int act, int64_t n)
{
	pdl_wait();
	pdl_trigger();
	int64_t f = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (f >= n)
		return;
	idx4 x = unflat(dv.ne, f);
	float va = *(const float *)(a + off_of(av, x));
	float r;
	if constexpr (K == EW_ADD)
		r = va + *(const float *)(b + off_bcast(bv, x));
	else if constexpr (K == EW_MUL)
		r = va * *(const float *)(b + off_bcast(bv, x));
	else if constexpr (K == EW_SCALE)
		r = va * p0 + p1;
	else if constexpr (K == EW_SOFTCAP)
		r = p0 * tanhf(va / p0);
	else if constexpr (K == EW_GLU)
		r = act_apply(act, va) * *(const float *)(b + off_of(bv, x));
	else
		r = act_apply(act, va);
	*(float *)(d + off_of(dv, x)) = r;
}

static bool same_shape(const struct alice_tensor *a, const struct alice_tensor *b)
{
	return a->ne[0] == b->ne[0] && a->ne[1] == b->ne[1] && a->ne[2] == b->ne[2] && a->ne[3] == b->ne[3];
}

template <int K>
static enum alice_status launch_ew(const struct alice_op_args *a, float p0, float p1, int act)
{
	struct alice_backend_ctx *ctx = a->ctx;
	const struct alice_tensor *d = a->dst, *s0 = a->src[0], *s1 = a->src[1];
	if (!same_shape(d, s0))
		return cu_fail(ctx, ALICE_ERR_INVALID, "dst and src0 shapes differ");
	struct cu_view bv = s1 ? cu_view_of(s1) : cu_view_of(s0);
	if (K == EW_ADD || K == EW_MUL) {
		for (int i = 0; i < 4; i++)
			if (s1->ne[i] != 1 && s1->ne[i] != s0->ne[i])
				return cu_fail(ctx, ALICE_ERR_INVALID, "src1 does not broadcast in dim %d", i);
	} else if (K == EW_GLU) {
		if (!same_shape(s0, s1))
			return cu_fail(ctx, ALICE_ERR_INVALID, "GLU operands differ in shape");
	}
	int64_t n = tnelem(d);
	cu_launch(k_ew<K>, cu_blocks(n, EW_THREADS), EW_THREADS, ctx->stream, tdata(d), cu_view_of(d), tdata(s0),
		  cu_view_of(s0), s1 ? tdata(s1) : tdata(s0), bv, p0, p1, act, n);
	CUDA_LAUNCH_CHECK(ctx, "elementwise");
	return ALICE_OK;
}

enum alice_status cu_op_binary(const struct alice_op_args *a)
{
	return a->node->op == ALICE_OP_ADD ? launch_ew<EW_ADD>(a, 0, 0, 0) : launch_ew<EW_MUL>(a, 0, 0, 0);
}

enum alice_status cu_op_scale(const struct alice_op_args *a)
{
	return launch_ew<EW_SCALE>(a, a->node->fp[0], a->node->fp[1], 0);
}

enum alice_status cu_op_softcap(const struct alice_op_args *a)
{
	if (a->node->fp[0] == 0.f)
		return cu_fail(a->ctx, ALICE_ERR_INVALID, "SOFTCAP with a cap of 0");
	return launch_ew<EW_SOFTCAP>(a, a->node->fp[0], 0, 0);
}

enum alice_status cu_op_glu(const struct alice_op_args *a)
{
	return launch_ew<EW_GLU>(a, 0, 0, a->node->ip[0]);
}

enum alice_status cu_op_unary(const struct alice_op_args *a)
{
	return launch_ew<EW_UNARY>(a, 0, 0, a->node->ip[0]);
}

/* ---- COPY: element by element between F32/F16/BF16 views ---- */

__global__ void k_copy(uint8_t *__restrict__ d, struct cu_view dv, uint32_t dt, const uint8_t *__restrict__ s,
		       struct cu_view sv, uint32_t st, int64_t n)
{
	int64_t f = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (f >= n)
		return;
	/* same element order on both sides: flat index over each one's own shape */
	st_float(d + view_off(dv, f), dt, ld_float(s + view_off(sv, f), st));
}

enum alice_status cu_op_copy(const struct alice_op_args *a)
{
	struct alice_backend_ctx *ctx = a->ctx;
	const struct alice_tensor *d = a->dst, *s = a->src[0];
	int64_t n = tnelem(d);
	if (n != tnelem(s))
		return cu_fail(ctx, ALICE_ERR_INVALID, "COPY: %lld elements into %lld", (long long)tnelem(s),
			       (long long)n);
	k_copy<<<cu_blocks(n, EW_THREADS), EW_THREADS, 0, ctx->stream>>>(tdata(d), cu_view_of(d), d->type, tdata(s),
									   cu_view_of(s), s->type, n);
	CUDA_LAUNCH_CHECK(ctx, "copy");
	return ALICE_OK;
}

/* ---- KV_WRITE: row i of src0 (per_cell elements) into cell ids[i];
 * blockIdx.y picks one of up to two caches written with the same cell ids
 * (K and V of one layer) ---- */

struct kv_job {
	uint8_t *d;
	struct cu_view dv;
	uint32_t dt;
	const uint8_t *s;
	struct cu_view sv;
	int64_t per_cell, n_cells;
};

__global__ void k_kv_write(struct kv_job j0, struct kv_job j1, const uint8_t *__restrict__ ids, int64_t inb0, int64_t n,
			   int *__restrict__ flag)
{
	pdl_wait();
	pdl_trigger();
	const struct kv_job &j = blockIdx.y ? j1 : j0;
	int64_t f = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (f >= j.per_cell * n)
		return;
	int64_t row = f / j.per_cell, e = f % j.per_cell;
	int32_t cell = *(const int32_t *)(ids + row * inb0);
	if (cell < 0 || cell >= j.n_cells) {
		if (e == 0)
			atomicOr(flag, CU_FLAG_CELL);
		return;
	} /* out-of-range cells are dropped, never written outside the cache */
	float v = *(const float *)(j.s + view_off(j.sv, f));
	int64_t e0 = e % j.dv.ne[0], e1 = e / j.dv.ne[0];
	st_float(j.d + e0 * j.dv.nb[0] + e1 * j.dv.nb[1] + (int64_t)cell * j.dv.nb[2], j.dt, v);
}

static enum alice_status kv_check(const struct alice_op_args *a)
{
	const struct alice_tensor *d = a->dst, *s = a->src[0], *ids = a->src[1];
	int64_t per_cell = d->ne[0] * d->ne[1], n = ids->ne[0];
	if (d->ne[3] != 1 || tnelem(s) != per_cell * n || ids->ne[1] * ids->ne[2] * ids->ne[3] != 1)
		return cu_fail(a->ctx, ALICE_ERR_INVALID,
			       "KV_WRITE: cache [%lld, %lld, %lld] and %lld rows of %lld elements do not match",
			       (long long)d->ne[0], (long long)d->ne[1], (long long)d->ne[2], (long long)n,
			       (long long)(n ? tnelem(s) / n : 0));
	return ALICE_OK;
}

static struct kv_job kv_job_of(const struct alice_op_args *a)
{
	const struct alice_tensor *d = a->dst, *s = a->src[0];
	struct kv_job j = { tdata(d), cu_view_of(d), d->type, tdata(s), cu_view_of(s), d->ne[0] * d->ne[1], d->ne[2] };
	return j;
}

enum alice_status cu_kv_write_multi(const struct alice_op_args *a, int n)
{
	struct alice_backend_ctx *ctx = a->ctx;
	int64_t tot = 0, nr = a->src[1]->ne[0];
	for (int i = 0; i < n; i++) {
		enum alice_status st = kv_check(&a[i]);
		if (st != ALICE_OK)
			return st;
		int64_t t = a[i].dst->ne[0] * a[i].dst->ne[1] * nr;
		tot = t > tot ? t : tot;
	}
	if (tot == 0)
		return ALICE_OK;
	struct kv_job j0 = kv_job_of(&a[0]), j1 = n > 1 ? kv_job_of(&a[1]) : j0;
	dim3 grid(cu_blocks(tot, EW_THREADS), (unsigned)n);
	cu_launch(k_kv_write, grid, EW_THREADS, ctx->stream, j0, j1, (const uint8_t *)tdata(a->src[1]), a->src[1]->nb[0], nr,
		  ctx->dflag);
	CUDA_LAUNCH_CHECK(ctx, "kv_write");
	return ALICE_OK;
}

enum alice_status cu_op_kv_write(const struct alice_op_args *a)
{
	return cu_kv_write_multi(a, 1);
}

bool cu_kv_pairable(const struct alice_op_args *a, const struct alice_op_args *b)
{
	/* same cell ids; b's rows are not a's cache, and the caches differ */
	return b->node->op == ALICE_OP_KV_WRITE && b->node->src[1] == a->node->src[1] &&
	       b->node->src[0] != a->node->dst && b->node->dst != a->node->dst && a->dst->buf && b->dst->buf &&
	       !(a->dst->buf == b->src[0]->buf && a->dst->offset == b->src[0]->offset) &&
	       !(a->dst->buf == b->dst->buf && a->dst->offset == b->dst->offset) && kv_check(b) == ALICE_OK;
}
