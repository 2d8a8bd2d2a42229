/* vk_pack.c — tensor_pack: Q8_0 and Q6_K weights rewritten in place, after
 * upload, into the layouts the CUDA backend uses (backends/cuda/pack_layout.cuh),
 * so the mat-vec reads every field with aligned 16-byte or word loads where
 * the 34- and 210-byte blocks are only 2-byte aligned (on the H100 the Q6_K
 * mat-vec took 25 us a 1B ffn_down, 4x the bytes' time). Same bytes per row,
 * no second copy; shaders read them as the types Q8_0P / Q6_KP
 * (dequant.glsl, mv.comp), which give the original's values.
 *
 * Q8_0P: each run of 8 blocks (256 values, 272 bytes): their 256 quants, then
 * their 8 fp16 scales. Q6_KP: each run of 8 super-blocks (2048 values, 1680
 * bytes): 8 x 192 quant bytes (ql, qh), 8 x 16 scales, 8 fp16 d's. Rows hold
 * whole runs, so a view of whole rows stays valid. */
#include <string.h>

#include "vk_internal.h"

/* Dense rows of whole runs of 8 blocks (QK values, BY bytes each), 16-byte
 * aligned, in memory we may write (not an imported file mapping). */
static bool packable(const struct alice_tensor *t, int64_t qk, int64_t by)
{
	return alice_bc_rows_of_runs(t, qk, by) && t->buf && !t->buf->imported &&
	       ((t->buf->base + t->offset) & 15) == 0;
}

enum alice_status vk_tensor_pack(struct alice_backend_ctx *ctx, struct alice_tensor *t)
{
	if (!ctx || !t)
		return ALICE_ERR_INVALID;
	if (t->flags & ALICE_TENSOR_PACKED)
		return ALICE_OK;
	const bool q80 = t->type == ALICE_TYPE_Q8_0 && packable(t, 32, 34);
	const bool q6k = t->type == ALICE_TYPE_Q6_K && packable(t, 256, 210);
	if (!q80 && !q6k)
		return ALICE_OK;
	if (ctx->lost)
		return vk_fail(ctx, ALICE_ERR_BACKEND, "the Vulkan device was lost");
	const int64_t runs = vk_nelem(t) / (q80 ? 256 : 2048);
	struct vk_bind b;
	if (runs > 0x7fffffff || vk_bind_tensor(ctx, t, &b) != ALICE_OK || (b.rel & 15)) {
		ctx->err[0] = '\0'; /* a tensor beyond one binding stays as written */
		return ALICE_OK;
	}
	enum alice_status st = vk_launch_quiesce(ctx);
	if (st != ALICE_OK)
		return st;
	/* one dispatch as its own step: logged, recorded, submitted, waited for */
	vk_prof_start(ctx);
	vk_rec_forget(ctx);
	ctx->g_keep = false;
	ctx->log_n = 0;
	ctx->npend = 0;
	ctx->bar_next = false;
	struct {
		uint32_t off, n_runs;
	} pc = {b.rel, (uint32_t)runs};
	st = vk_dispatch(ctx, q80 ? "pack_q80" : "pack_q6k", &b, 1, &pc, sizeof(pc), (uint32_t)runs);
	if (st == ALICE_OK)
		st = vk_rec_prepare(ctx);
	if (st == ALICE_OK)
		st = vk_launch_submit(ctx, true, NULL, 0);
	if (st == ALICE_OK)
		st = vk_graph_wait(ctx);
	vk_rec_forget(ctx); /* the next graph records its own */
	if (st != ALICE_OK)
		return st;
	t->flags |= ALICE_TENSOR_PACKED;
	return ALICE_OK;
}
