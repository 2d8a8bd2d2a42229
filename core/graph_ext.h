/* graph_ext.h — graph-builder helpers for the ops graph.c has no helper
 * for: soft-capping, L2 norm, rope with IMROPE sections, and the recurrent
 * ops of Qwen 3.5 (SSM_CONV, GATED_DELTA_NET). Same conventions as graph.h:
 * each returns a tensor index or -1 (gb's error set), shapes are checked. */
#ifndef ALICE_CORE_GRAPH_EXT_H
#define ALICE_CORE_GRAPH_EXT_H

#include <stdint.h>

#include "graph.h"

/* cap * tanh(x / cap) */
int32_t alice_gb_softcap(struct alice_gb *gb, int32_t x, float cap);
/* x / max(||x||, eps) over dim 0 (x may be a strided view) */
int32_t alice_gb_l2_norm(struct alice_gb *gb, int32_t x, float eps);
/* IMROPE rope of x [head_dim, n_head, T]; pos I32 [4 * T] (t, h, w, e). */
int32_t alice_gb_rope_imrope(struct alice_gb *gb, int32_t x, int32_t pos, int n_dims, const int32_t sections[4],
			     float freq_base, float freq_scale);
/* Causal depthwise conv with per-sequence state, updated in place (backend.h
 * ALICE_OP_SSM_CONV): x [C, T], w [K, C], state [K-1, C, n_seq], seq I32 [T]. */
int32_t alice_gb_ssm_conv(struct alice_gb *gb, int32_t x, int32_t w, int32_t state, int32_t seq);
/* Gated delta rule (ALICE_OP_GATED_DELTA_NET): qk [S, 2*H_k, T], v [S, H_v, T],
 * g and beta [H_v, T], state [S, S, H_v, n_seq] (in place), seq I32 [T]. */
int32_t alice_gb_gated_delta_net(struct alice_gb *gb, int32_t qk, int32_t v, int32_t g, int32_t beta, int32_t state,
				 int32_t seq, float scale);

#endif
