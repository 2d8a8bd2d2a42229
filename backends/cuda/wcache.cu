/* wcache.cu — F16 copies of quantized weights for the prefill GEMM.
 *
 * The F16 path dequantizes a quantized weight into scratch before every
 * GEMM that uses it. For a short prompt that pass is most of the product's
 * time (it writes and rereads 2 bytes a weight where the GEMM's own reads
 * are few), and a step with several prompts repeats it per prompt. Here
 * the first product of a weight keeps its dequantized copy, and later ones
 * multiply it directly: the same F16 values, so the same bits.
 *
 * Memory: the copies take at most ALICE_CUDA_WCACHE_MB (default: a quarter
 * of the device's memory, at most half of what is free at first use;
 * 0 turns the cache off). Weights past the budget keep the per-product
 * pass. Only tensors of weight buffers are kept; an entry is dropped when
 * its bytes are freed, written, cleared or repacked, and all of them when
 * a device allocation would otherwise fail.
 *
 * Groups: the products of one input (Q, K and V; gate and up) keep their
 * copies as one [sum N][K] buffer, members in order, so the prefill
 * multiplies them in one GEMM (matmul.cu); a member alone is found inside
 * its group's buffer. */
#include "common.cuh"

struct cu_wc_entry {
	struct cu_wc_member m[CU_WC_GROUP];
	int n;
	int64_t K;
	__half *h; /* the members' rows in order: [sum N][K] */
	size_t bytes;
};

struct cu_wcache {
	struct cu_wc_entry *e;
	int n, cap;
	size_t used, budget;
	bool budget_set, full_noted;
};

static size_t wc_env_budget(bool *set)
{
	const char *s = getenv("ALICE_CUDA_WCACHE_MB");
	*set = s && *s;
	return *set ? (size_t)strtoull(s, NULL, 10) << 20 : 0;
}

static bool wc_ensure(struct alice_backend_ctx *ctx)
{
	if (ctx->wc)
		return true;
	ctx->wc = (struct cu_wcache *)calloc(1, sizeof(*ctx->wc));
	return ctx->wc != NULL;
}

static bool wc_same(const struct cu_wc_member *a, const struct cu_wc_member *b)
{
	return a->w == b->w && a->nb1 == b->nb1 && a->N == b->N && a->kt == b->kt;
}

const __half *cu_wcache_find(struct alice_backend_ctx *ctx, const uint8_t *w, int64_t nb1, int64_t N, int64_t K,
			     uint32_t kt)
{
	struct cu_wcache *wc = ctx->wc;
	const struct cu_wc_member want = {w, nb1, N, kt};
	for (int i = 0; wc && i < wc->n; i++) {
		const struct cu_wc_entry *x = &wc->e[i];
		int64_t row0 = 0;
		for (int j = 0; j < x->n && x->K == K; j++) {
			if (wc_same(&x->m[j], &want))
				return x->h + row0 * K;
			row0 += x->m[j].N;
		}
	}
	return NULL;
}

const __half *cu_wcache_find_group(struct alice_backend_ctx *ctx, const struct cu_wc_member *m, int n, int64_t K)
{
	struct cu_wcache *wc = ctx->wc;
	for (int i = 0; wc && i < wc->n; i++) {
		const struct cu_wc_entry *x = &wc->e[i];
		bool same = x->n == n && x->K == K;
		for (int j = 0; same && j < n; j++)
			same = wc_same(&x->m[j], &m[j]);
		if (same)
			return x->h;
	}
	return NULL;
}

__half *cu_wcache_add_group(struct alice_backend_ctx *ctx, const struct alice_tensor *const *t,
			    const struct cu_wc_member *m, int n, int64_t K)
{
	if (n < 1 || n > CU_WC_GROUP || !wc_ensure(ctx))
		return NULL;
	for (int j = 0; j < n; j++)
		if (!t[j]->buf || t[j]->buf->usage != ALICE_BUFFER_WEIGHTS)
			return NULL;
	struct cu_wcache *wc = ctx->wc;
	if (!wc->budget_set) {
		bool env;
		wc->budget = wc_env_budget(&env);
		if (!env) {
			size_t fr = 0, tot = 0;
			if (cudaMemGetInfo(&fr, &tot) != cudaSuccess) {
				cudaGetLastError();
				fr = tot = 0;
			}
			wc->budget = tot / 4 < fr / 2 ? tot / 4 : fr / 2;
		}
		wc->budget_set = true;
		if (wc->budget)
			cu_log(1, "cuda backend: F16 copies of quantized weights for prefill, up to %.0f MiB (ALICE_CUDA_WCACHE_MB)",
			       wc->budget / 1048576.0);
	}
	/* a member's copy made alone before gives way to the group's */
	if (n > 1)
		for (int j = 0; j < n; j++)
			if (cu_wcache_find(ctx, m[j].w, m[j].nb1, m[j].N, K, m[j].kt))
				cu_wcache_drop(ctx, m[j].w, 1);
	size_t bytes = 0;
	for (int j = 0; j < n; j++)
		bytes += (size_t)m[j].N * (size_t)K * 2;
	if (wc->used + bytes > wc->budget) {
		if (wc->budget && !wc->full_noted)
			cu_log(1, "cuda backend: F16 weight copies at %.0f of %.0f MiB; further weights are dequantized per product",
			       wc->used / 1048576.0, wc->budget / 1048576.0);
		wc->full_noted = true;
		return NULL;
	}
	if (wc->n == wc->cap) {
		int cap = wc->cap ? 2 * wc->cap : 64;
		struct cu_wc_entry *ne = (struct cu_wc_entry *)realloc(wc->e, (size_t)cap * sizeof(*ne));
		if (!ne)
			return NULL;
		wc->e = ne;
		wc->cap = cap;
	}
	__half *h = NULL;
	if (cudaMalloc((void **)&h, bytes) != cudaSuccess) {
		cudaGetLastError();
		wc->budget = wc->used; /* the device is fuller than the budget assumed */
		return NULL;
	}
	struct cu_wc_entry *x = &wc->e[wc->n++];
	memset(x, 0, sizeof(*x));
	for (int j = 0; j < n; j++)
		x->m[j] = m[j];
	x->n = n;
	x->K = K;
	x->h = h;
	x->bytes = bytes;
	wc->used += bytes;
	return h;
}

__half *cu_wcache_add(struct alice_backend_ctx *ctx, const struct alice_tensor *t, const uint8_t *w, int64_t nb1,
		      int64_t N, int64_t K, uint32_t kt)
{
	const struct cu_wc_member m = {w, nb1, N, kt};
	return cu_wcache_add_group(ctx, &t, &m, 1, K);
}

/* The entries with a member whose weight bytes overlap [lo, lo + len).
 * Work in flight may still read them: the stream is drained first. */
void cu_wcache_drop(struct alice_backend_ctx *ctx, const uint8_t *lo, uint64_t len)
{
	struct cu_wcache *wc = ctx->wc;
	if (!wc)
		return;
	bool synced = false;
	int k = 0;
	for (int i = 0; i < wc->n; i++) {
		struct cu_wc_entry *x = &wc->e[i];
		bool hit = false;
		for (int j = 0; j < x->n; j++)
			hit = hit || (x->m[j].w < lo + len && lo < x->m[j].w + (uint64_t)x->m[j].N * (uint64_t)x->m[j].nb1);
		if (hit) {
			if (!synced)
				cudaStreamSynchronize(ctx->stream);
			synced = true;
			cudaFree(x->h);
			wc->used -= x->bytes;
			continue;
		}
		wc->e[k++] = *x;
	}
	wc->n = k;
	cudaGetLastError();
}

bool cu_wcache_release(struct alice_backend_ctx *ctx)
{
	struct cu_wcache *wc = ctx->wc;
	if (!wc || wc->n == 0)
		return false;
	cudaStreamSynchronize(ctx->stream);
	for (int i = 0; i < wc->n; i++)
		cudaFree(wc->e[i].h);
	cudaGetLastError();
	wc->n = 0;
	wc->used = 0;
	wc->budget = 0; /* memory is short: no more copies */
	cu_log(1, "cuda backend: F16 weight copies released (device memory needed elsewhere)");
	return true;
}

void cu_wcache_free(struct alice_backend_ctx *ctx)
{
	struct cu_wcache *wc = ctx->wc;
	if (!wc)
		return;
	for (int i = 0; i < wc->n; i++)
		cudaFree(wc->e[i].h);
	cudaGetLastError();
	free(wc->e);
	free(wc);
	ctx->wc = NULL;
}
