/* vk_ops_ssm.c — the recurrent ops of backend.h 1.1 (ssm.comp): SSM_CONV
 * and GATED_DELTA_NET. Both update their state source in place, so the
 * state's binding is marked written for the barrier tracking; sequence ids
 * are checked by the shader (status buffer). Shape checks as the CPU
 * reference makes them. */
#include <math.h>
#include <string.h>

#include "vk_internal.h"

struct ssm_push {
	uint32_t C, T, K, n_seq;
	uint32_t x_off, x_nb0, x_nb1, w_off;
	uint32_t st_off, sq_off, sq_nb0, d_off;
	uint32_t Hk, Hv, qk_nb1, qk_nb2;
	uint32_t v_nb1, v_nb2, g_nb0, g_nb1;
	uint32_t b_nb0, b_nb1, v_off, g_off;
	uint32_t b_off;
	float scale;
};

static bool contiguous_f32(const struct alice_tensor *t)
{
	return t->nb[0] == 4 && t->nb[1] == 4 * t->ne[0] && t->nb[2] == t->nb[1] * t->ne[1] &&
	       t->nb[3] == t->nb[2] * t->ne[2];
}

static bool seq_ok(const struct alice_tensor *seq, int64_t T)
{
	return vk_nelem(seq) == T && seq->ne[0] == T;
}

enum alice_status vk_op_ssm_conv(const struct alice_op_args *a)
{
	struct alice_backend_ctx *ctx = a->ctx;
	const struct alice_tensor *x = a->src[0], *w = a->src[1], *state = a->src[2], *seq = a->src[3], *d = a->dst;
	int64_t C = x->ne[0], T = x->ne[1], K = w->ne[0];
	if (x->ne[2] * x->ne[3] != 1 || K < 2 || w->ne[1] != C || w->ne[2] * w->ne[3] != 1 || !contiguous_f32(w))
		return vk_fail(ctx, ALICE_ERR_INVALID, "x [%lld, %lld] and w [%lld, %lld] (contiguous) do not fit",
			       (long long)C, (long long)T, (long long)w->ne[0], (long long)w->ne[1]);
	if (state->ne[0] != K - 1 || state->ne[1] != C || state->ne[2] != 1 || !contiguous_f32(state))
		return vk_fail(ctx, ALICE_ERR_INVALID, "state must be contiguous [%lld, %lld, 1, n_seq]", (long long)(K - 1),
			       (long long)C);
	if (d->ne[0] != C || d->ne[1] != T || d->ne[2] * d->ne[3] != 1 || !contiguous_f32(d))
		return vk_fail(ctx, ALICE_ERR_INVALID, "dst must be contiguous [%lld, %lld]", (long long)C, (long long)T);
	if (x->nb[0] != 4)
		return vk_fail(ctx, ALICE_ERR_INVALID, "x rows must be contiguous");
	if (!seq_ok(seq, T))
		return vk_fail(ctx, ALICE_ERR_INVALID, "seq: %lld ids for %lld tokens", (long long)vk_nelem(seq), (long long)T);
	struct vk_bind b[5];
	enum alice_status st = vk_bind_tensor(ctx, d, &b[0]);
	for (int i = 0; i < 4 && st == ALICE_OK; i++)
		st = vk_bind_tensor(ctx, a->src[i], &b[i + 1]);
	if (st != ALICE_OK)
		return st;
	struct ssm_push p = {
		.C = (uint32_t)C, .T = (uint32_t)T, .K = (uint32_t)K, .n_seq = (uint32_t)state->ne[3],
		.x_off = b[1].rel, .x_nb0 = (uint32_t)x->nb[0], .x_nb1 = (uint32_t)x->nb[1], .w_off = b[2].rel,
		.st_off = b[3].rel, .sq_off = b[4].rel, .sq_nb0 = (uint32_t)seq->nb[0], .d_off = b[0].rel,
	};
	/* the state (src2, slot 3) is updated in place */
	return vk_dispatch_rw(ctx, "ssmconv", b, 5, 1u << 3, &p, sizeof(p), (uint32_t)((C + 63) / 64));
}

enum alice_status vk_op_gated_delta_net(const struct alice_op_args *a)
{
	struct alice_backend_ctx *ctx = a->ctx;
	const struct alice_tensor *qk = a->src[0], *v = a->src[1], *g = a->src[2], *beta = a->src[3],
				  *state = a->src[4], *seq = a->src[5], *d = a->dst;
	int64_t S = v->ne[0], Hv = v->ne[1], T = v->ne[2], Hk = qk->ne[1] / 2;
	if (qk->ne[0] != S || qk->ne[1] < 2 || qk->ne[1] % 2 || Hv % Hk || qk->ne[2] != T || qk->ne[3] != 1 ||
	    v->ne[3] != 1 || qk->nb[0] != 4 || v->nb[0] != 4)
		return vk_fail(ctx, ALICE_ERR_INVALID, "qk [%lld, %lld, %lld] and v [%lld, %lld, %lld] do not fit",
			       (long long)qk->ne[0], (long long)qk->ne[1], (long long)qk->ne[2], (long long)S, (long long)Hv,
			       (long long)T);
	if (g->ne[0] != Hv || g->ne[1] != T || g->ne[2] * g->ne[3] != 1 || beta->ne[0] != Hv || beta->ne[1] != T ||
	    beta->ne[2] * beta->ne[3] != 1)
		return vk_fail(ctx, ALICE_ERR_INVALID, "g and beta must be [%lld, %lld]", (long long)Hv, (long long)T);
	if (state->ne[0] != S || state->ne[1] != S || state->ne[2] != Hv || !contiguous_f32(state))
		return vk_fail(ctx, ALICE_ERR_INVALID, "state must be contiguous [%lld, %lld, %lld, n_seq]", (long long)S,
			       (long long)S, (long long)Hv);
	if (d->ne[0] != S || d->ne[1] != Hv || d->ne[2] != T || d->ne[3] != 1 || !contiguous_f32(d))
		return vk_fail(ctx, ALICE_ERR_INVALID, "dst must be contiguous [%lld, %lld, %lld]", (long long)S,
			       (long long)Hv, (long long)T);
	if (!isfinite(a->node->fp[0]))
		return vk_fail(ctx, ALICE_ERR_INVALID, "scale must be finite");
	if (!seq_ok(seq, T))
		return vk_fail(ctx, ALICE_ERR_INVALID, "seq: %lld ids for %lld tokens", (long long)vk_nelem(seq), (long long)T);
	struct vk_bind b[7];
	enum alice_status st = vk_bind_tensor(ctx, d, &b[0]);
	for (int i = 0; i < 6 && st == ALICE_OK; i++)
		st = vk_bind_tensor(ctx, a->src[i], &b[i + 1]);
	if (st != ALICE_OK)
		return st;
	uint64_t items = (uint64_t)S * (uint64_t)Hv * (uint64_t)state->ne[3];
	struct ssm_push p = {
		.C = (uint32_t)S, .T = (uint32_t)T, .n_seq = (uint32_t)state->ne[3],
		.x_off = b[1].rel, .st_off = b[5].rel, .sq_off = b[6].rel, .sq_nb0 = (uint32_t)seq->nb[0],
		.d_off = b[0].rel, .Hk = (uint32_t)Hk, .Hv = (uint32_t)Hv, .qk_nb1 = (uint32_t)qk->nb[1],
		.qk_nb2 = (uint32_t)qk->nb[2], .v_nb1 = (uint32_t)v->nb[1], .v_nb2 = (uint32_t)v->nb[2],
		.g_nb0 = (uint32_t)g->nb[0], .g_nb1 = (uint32_t)g->nb[1], .b_nb0 = (uint32_t)beta->nb[0],
		.b_nb1 = (uint32_t)beta->nb[1], .v_off = b[2].rel, .g_off = b[3].rel, .b_off = b[4].rel,
		.scale = a->node->fp[0],
	};
	/* the state (src4, slot 5) is updated in place */
	return vk_dispatch_rw(ctx, "gdn", b, 7, 1u << 5, &p, sizeof(p), (uint32_t)((items + 63) / 64));
}
