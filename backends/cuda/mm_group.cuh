/* mm_group.cuh — a prefill's products of one input as one GEMM (part of
 * matmul.cu's translation unit: it uses that file's GEMM path, rounding
 * and row-regime helpers; included there once). */
#ifndef ALICE_CUDA_MM_GROUP_CUH
#define ALICE_CUDA_MM_GROUP_CUH

/* ---- one prefill GEMM for the products of one input ----
 * Q, K and V (gate and up) read the same activations. On a run of one
 * sequence's rows they multiply their F16 copies, kept as one buffer
 * (wcache.cu groups), in one GEMM into scratch; one pass then puts each
 * member's rows in its dst (after gate/up with the GLU folded in: also
 * h = act(gate) * up, as the GLU op computes it). Taken where the
 * members' own GEMMs would leave the GPU short of work (gemm_group_pays:
 * Q/K/V of a short prompt), which one GEMM fills better, with a third of
 * the launches. One GEMM over the members' rows may take
 * another cuBLAS kernel than each alone, so this is the product's shape
 * for such groups whether launch fusion is on or not (ALICE_CUDA_FUSE
 * compares bits); ALICE_CUDA_GEMM_GROUP=0 multiplies them one by one. */

/* a member of a GEMM group: quantized weights that take the rounded F16
 * path (not the integer GEMM at this M), one matrix, contiguous dst rows */
static bool gemm_group_member(const struct alice_op_args *a, int64_t M)
{
	const struct alice_tensor *w = a->src[0], *d = a->dst;
	const uint32_t t = w->type;
	return !mm_plain_odd(w) && act_rounds(w) && !gemm_f32(t) && t != ALICE_TYPE_F16 && !gemm_split(w) &&
	       !cu_mmq_ok(w, tdata(w), M) && w->ne[2] * w->ne[3] == 1 && d->nb[0] == 4 && d->ne[0] == w->ne[1] &&
	       cu_packed_view_ok(w);
}

struct mm_scatter {
	float *d[CU_WC_GROUP];
	int64_t dcs[CU_WC_GROUP], row0[CU_WC_GROUP + 1];
	float *h; /* GLU: h [row0[1], M] = act(Y rows of member 0) * (rows of member 1) */
	int64_t hrs, hcs;
	int act;
};

/* Y [Ntot, Mp] (column-major) to the members' dsts: block (x, c) takes
 * 256 rows of column c */
__global__ void k_mm_scatter(const float *__restrict__ Y, struct mm_scatter sc, int Ntot)
{
	pdl_wait();
	pdl_trigger();
	const int r = blockIdx.x * blockDim.x + threadIdx.x;
	if (r >= Ntot)
		return;
	const int64_t c = blockIdx.y;
	const float v = Y[r + c * Ntot];
	/* members by constant index: a parameter array indexed at run time
	 * would be copied to local memory by every thread */
	if (r < sc.row0[1])
		sc.d[0][r + c * sc.dcs[0]] = v;
	else if (r < sc.row0[2])
		sc.d[1][(r - sc.row0[1]) + c * sc.dcs[1]] = v;
	else
		sc.d[2][(r - sc.row0[2]) + c * sc.dcs[2]] = v;
	if (sc.h && r < sc.row0[1])
		sc.h[r * sc.hrs + c * sc.hcs] = act_apply(sc.act, v) * Y[sc.row0[1] + r + c * Ntot];
}

/* One GEMM pays where the members' own GEMMs would leave the GPU short of
 * work: their 64 x 64 output tiles together fewer than two per SM (Q, K
 * and V of a short prompt; measured: gate and up of a 1B model at 114
 * rows take as long as one GEMM as two, and the extra pass loses). */
static bool gemm_group_pays(const struct alice_op_args *a, int n, int64_t Mp)
{
	int64_t tiles = 0;
	for (int i = 0; i < n; i++)
		tiles += (a[i].src[0]->ne[1] + 63) / 64 * ((Mp + 63) / 64);
	return tiles < 2 * (int64_t)a[0].ctx->n_sm;
}

/* The group's F16 copy (made now on first use), or NULL. */
static const __half *gemm_group_copy(struct alice_backend_ctx *ctx, const struct alice_op_args *a, int n)
{
	struct cu_wc_member m[CU_WC_GROUP];
	const struct alice_tensor *t[CU_WC_GROUP];
	const int64_t K = a[0].src[0]->ne[0];
	for (int i = 0; i < n; i++) {
		t[i] = a[i].src[0];
		m[i] = (struct cu_wc_member){tdata(t[i]), t[i]->nb[1], t[i]->ne[1], cu_ktype(t[i])};
	}
	const __half *h = cu_wcache_find_group(ctx, m, n, K);
	if (h)
		return h;
	__half *d = cu_wcache_add_group(ctx, t, m, n, K);
	if (!d)
		return NULL;
	int64_t row0 = 0;
	bool ok = true;
	for (int i = 0; i < n && ok; i++) {
		__half *o = d + row0 * K;
		auto l = [&]<int T>() { launch_dequant_t<T, __half>(ctx->stream, m[i].w, m[i].nb1, o, m[i].N, K); };
		ok = dispatch_type(m[i].kt, l) && cudaPeekAtLastError() == cudaSuccess;
		row0 += m[i].N;
	}
	if (!ok) {
		cu_wcache_drop(ctx, m[0].w, 1);
		return NULL;
	}
	cu_log(0, "cuda backend: one F16 copy for %d products of one input (%lld rows, K %lld), one GEMM per run of rows",
	       n, (long long)row0, (long long)K);
	return d;
}

/* Columns [m0, m0 + Mp) of the group's products: one GEMM. */
static enum alice_status gemm_group(struct alice_backend_ctx *ctx, const struct alice_op_args *a, int n,
				    const struct alice_op_args *glu, const __half *wh, int64_t m0, int64_t Mp)
{
	const struct alice_tensor *x = a[0].src[1], *w0 = a[0].src[0];
	const int64_t K = w0->ne[0];
	struct mm_scatter sc;
	memset(&sc, 0, sizeof(sc));
	int64_t Ntot = 0;
	for (int i = 0; i < n; i++) {
		sc.row0[i] = Ntot;
		sc.dcs[i] = a[i].dst->nb[1] / 4;
		sc.d[i] = (float *)tdata(a[i].dst) + m0 * sc.dcs[i];
		Ntot += a[i].src[0]->ne[1];
	}
	for (int i = n; i <= CU_WC_GROUP; i++)
		sc.row0[i] = Ntot;
	if (glu) {
		sc.hrs = glu->dst->nb[0] / 4;
		sc.hcs = glu->dst->nb[1] / 4;
		sc.h = (float *)tdata(glu->dst) + m0 * sc.hcs;
		sc.act = glu->node->ip[0];
	}
	if (ctx->xq_off < align256((size_t)(Ntot * Mp) * 4) ||
	    ctx->scratch_size < ctx->xq_off + align256((size_t)(K * Mp) * 2))
		return cu_fail(ctx, ALICE_ERR_BACKEND, "MUL_MAT: scratch not sized for a group of %lld rows, M %lld",
			       (long long)Ntot, (long long)Mp);
	/* the rounded F16 activations, staged where the members' own products
	 * would look for them */
	const uint8_t *xb = tdata(x) + m0 * x->nb[1];
	__half *xs = (__half *)cu_xq_q(ctx);
	const int xh_code = 1000 + (int)act_round_of(w0->type);
	if (!cu_xq_has(ctx, xb, x->nb[0], x->nb[1], K, Mp, xh_code)) {
		launch_act_round(ctx->stream, w0->type, xb, x->nb[0], x->nb[1], K, Mp, xs);
		CUDA_LAUNCH_CHECK(ctx, "act");
		cu_xq_set(ctx, xb, x->nb[0], x->nb[1], K, Mp, xh_code, ctx->xq_cur);
	}
	float *Y = (float *)ctx->scratch;
	const float one = 1.f, zero = 0.f;
	const double t_blas = ctx->steps ? cu_now_us() : 0; /* ALICE_CUDA_PROFILE=2 */
	cublasStatus_t cs = cublasGemmEx(ctx->cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int)Ntot, (int)Mp, (int)K, &one, wh,
					 CUDA_R_16F, (int)K, xs, CUDA_R_16F, (int)K, &zero, Y, CUDA_R_32F, (int)Ntot,
					 CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
	if (ctx->steps)
		cu_steps_blas(ctx->steps, cu_now_us() - t_blas);
	if (cs != CUBLAS_STATUS_SUCCESS)
		return cu_fail(ctx, ALICE_ERR_BACKEND, "cublasGemmEx failed: %s (N %lld, M %lld, K %lld)",
			       cublasGetStatusString(cs), (long long)Ntot, (long long)Mp, (long long)K);
	cu_launch(k_mm_scatter, dim3((unsigned)((Ntot + 255) / 256), (unsigned)Mp), 256, ctx->stream, (const float *)Y,
		  sc, (int)Ntot);
	CUDA_LAUNCH_CHECK(ctx, "mm_scatter");
	return ALICE_OK;
}

/* Member a's product on columns [m0, m0 + Mp) (unbatched activations). */
static enum alice_status mm_cols(const struct alice_op_args *a, int64_t m0, int64_t Mp, bool mmv)
{
	const struct alice_tensor *w = a->src[0], *x = a->src[1], *d = a->dst;
	const int64_t dcs = d->nb[1] / 4;
	return mm_block(a->ctx, w, tdata(w), tdata(x) + m0 * x->nb[1], x->nb[0], x->nb[1],
			(float *)tdata(d) + m0 * dcs, d->nb[0] / 4, dcs, Mp, mmv);
}

/* a[0..n) as one group: GEMM runs grouped, mat-vec columns between them
 * as the members' own products (or their fused mat-vec where launch
 * fusion is on). glu (a gate/up pair's GLU, with fusion on): folded in
 * when every part can take it; *glu_done says whether it was. */
static enum alice_status gemm_multi(const struct alice_op_args *a, int n, const struct alice_op_args *glu,
				    bool *glu_done)
{
	struct alice_backend_ctx *ctx = a[0].ctx;
	const struct alice_tensor *x = a[0].src[1], *rg = a[0].src[2];
	const int64_t M = x->ne[1];
	*glu_done = false;
	const int32_t *reg = NULL;
	if (rg) {
		enum alice_status st = mm_regime_check(ctx, x, rg, M, &reg);
		if (st != ALICE_OK)
			return st;
	}
	/* mat-vec parts fuse as the decode's members do: one dst column stride */
	bool fuse = ctx->fuse && mm_x_dense(x);
	for (int i = 1; i < n; i++)
		fuse = fuse && a[i].dst->nb[1] == a[0].dst->nb[1] && cu_ktype(a[i].src[0]) == cu_ktype(a[0].src[0]);
	/* which runs take one GEMM: a function of the run's own length */
	auto grouped = [&](int64_t Mp) {
		bool ok = gemm_group_pays(a, n, Mp);
		for (int i = 0; i < n && ok; i++)
			ok = gemm_group_member(&a[i], Mp);
		return ok;
	};
	const __half *wh = NULL;
	bool any_group = false, all_group = true, any_mmv = false;
	for (int64_t m = 0, e; m < M; m = e) {
		const bool run = mm_next_part(reg, M, m, &e);
		any_mmv = any_mmv || !run;
		if (run) {
			const bool gp = grouped(e - m);
			any_group = any_group || gp;
			all_group = all_group && gp;
		}
	}
	if (any_group)
		wh = gemm_group_copy(ctx, a, n);
	*glu_done = glu && all_group && (!any_group || wh) && (!any_mmv || fuse);
	for (int64_t m = 0, e; m < M; m = e) {
		const bool run = mm_next_part(reg, M, m, &e);
		enum alice_status st = ALICE_OK;
		if (run && wh && grouped(e - m))
			st = gemm_group(ctx, a, n, *glu_done ? glu : NULL, wh, m, e - m);
		else if (!run && fuse)
			st = mmv_multi(a, n, *glu_done ? glu : NULL, m, e - m);
		else
			for (int i = 0; i < n && st == ALICE_OK; i++)
				st = mm_cols(&a[i], m, e - m, !run);
		if (st != ALICE_OK)
			return st;
	}
	return ALICE_OK;
}

/* How many of the consecutive MUL_MATs a[0..n) run as one group: the
 * decode's mat-vecs with launch fusion on (cu_mul_mat_fusable), else
 * products of one input and one row regime, each a single matrix of one
 * K with the same activation rounding, none reading what an earlier one
 * writes. */
int cu_mul_mat_group(const struct alice_op_args *a, int n, bool fuse)
{
	if (mm_use_mmv(&a[0]))
		return fuse ? cu_mul_mat_fusable(a, n) : 1;
	const struct alice_tensor *w0 = a[0].src[0], *x = a[0].src[1];
	if (!a[0].ctx->gemm_group || x->ne[2] * x->ne[3] != 1 || w0->ne[2] * w0->ne[3] != 1 || !act_rounds(w0))
		return 1;
	int k = 1;
	while (k < n && k < CU_WC_GROUP) {
		const struct alice_tensor *w = a[k].src[0], *d = a[k].dst;
		if (a[k].node->src[1] != a[0].node->src[1] || a[k].node->src[2] != a[0].node->src[2] ||
		    w->ne[0] != w0->ne[0] || w->ne[2] * w->ne[3] != 1 || !act_rounds(w) ||
		    act_round_of(w->type) != act_round_of(w0->type) || d->ne[1] != x->ne[1])
			break;
		if (reads_earlier(a, k))
			break;
		k++;
	}
	return k;
}

/* scratch for a group of products with sumN output rows in all */
size_t cu_mul_mat_group_scratch(const struct alice_op_args *a, int64_t sumN)
{
	return mm_use_mmv(a) || !a->ctx->gemm_group ? 0 : align256((size_t)(sumN * a->src[1]->ne[1]) * 4);
}

/* glu: the GLU node after a gate/up pair (n == 2), computed in the same
 * launch where it can be (*glu_done); NULL for none. */
enum alice_status cu_mul_mat_multi(const struct alice_op_args *a, int n, const struct alice_op_args *glu,
				   bool *glu_done)
{
	*glu_done = false;
	if (n == 1)
		return cu_op_mul_mat(a);
	if (!mm_use_mmv(&a[0]))
		return gemm_multi(a, n, glu, glu_done);
	*glu_done = glu != NULL;
	return mmv_multi(a, n, glu, 0, a[0].src[1]->ne[1]);
}

#endif
