/* graph_ext.c — op helpers beyond graph.c's (see graph_ext.h). */
#include "graph_ext.h"

#include "alice/quant.h"

static const struct alice_tensor *tt(struct alice_gb *gb, int32_t t)
{
	return alice_gb_tensor(gb, t);
}

static bool ok_all(struct alice_gb *gb, const int32_t *ts, int n)
{
	if (alice_gb_failed(gb))
		return false;
	for (int i = 0; i < n; i++)
		if (!tt(gb, ts[i]))
			return false;
	return true;
}

static int64_t nel(const struct alice_tensor *t)
{
	return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

static bool f32(const struct alice_tensor *t)
{
	return t->type == ALICE_TYPE_F32;
}

static int32_t like(struct alice_gb *gb, int32_t x)
{
	const struct alice_tensor *t = tt(gb, x);
	return alice_gb_new(gb, ALICE_TYPE_F32, t->ne[0], t->ne[1], t->ne[2], t->ne[3]);
}

int32_t alice_gb_softcap(struct alice_gb *gb, int32_t x, float cap)
{
	if (!ok_all(gb, &x, 1))
		return -1;
	if (!(cap > 0.0f))
		return alice_gb_error(gb, "graph: SOFTCAP: cap %g must be positive", cap);
	int32_t d = like(gb, x);
	struct alice_node *n = alice_gb_node(gb, ALICE_OP_SOFTCAP, d, &x, 1);
	if (!n)
		return -1;
	n->fp[0] = cap;
	return d;
}

int32_t alice_gb_l2_norm(struct alice_gb *gb, int32_t x, float eps)
{
	if (!ok_all(gb, &x, 1))
		return -1;
	if (!f32(tt(gb, x)))
		return alice_gb_error(gb, "graph: L2_NORM: x must be F32");
	int32_t d = like(gb, x);
	struct alice_node *n = alice_gb_node(gb, ALICE_OP_L2_NORM, d, &x, 1);
	if (!n)
		return -1;
	n->fp[0] = eps;
	return d;
}

int32_t alice_gb_rope_imrope(struct alice_gb *gb, int32_t x, int32_t pos, int n_dims, const int32_t sections[4],
			     float freq_base, float freq_scale)
{
	int32_t ts[2] = {x, pos};
	if (!ok_all(gb, ts, 2))
		return -1;
	const struct alice_tensor *tx = tt(gb, x), *tp = tt(gb, pos);
	if (n_dims <= 0 || n_dims % 2 || n_dims > tx->ne[0])
		return alice_gb_error(gb, "graph: ROPE: n_dims %d must be even and <= head_dim %lld", n_dims,
				      (long long)tx->ne[0]);
	if (tp->type != ALICE_TYPE_I32 || nel(tp) != 4 * tx->ne[2] || tx->ne[3] != 1)
		return alice_gb_error(gb, "graph: ROPE: IMROPE positions must be I32 [4 * n_tokens]");
	int sum = 0;
	for (int i = 0; i < 4; i++) {
		if (sections[i] < 0)
			return alice_gb_error(gb, "graph: ROPE: negative IMROPE section");
		sum += sections[i];
	}
	if (sum <= 0)
		return alice_gb_error(gb, "graph: ROPE: IMROPE sections sum to 0");
	int32_t d = like(gb, x);
	int32_t src[3] = {x, pos, -1};
	struct alice_node *n = alice_gb_node(gb, ALICE_OP_ROPE, d, src, 3);
	if (!n)
		return -1;
	n->ip[0] = n_dims;
	n->ip[1] = ALICE_ROPE_IMROPE;
	for (int i = 0; i < 4; i++)
		n->ip[2 + i] = sections[i];
	n->fp[0] = freq_base;
	n->fp[1] = freq_scale;
	return d;
}

int32_t alice_gb_ssm_conv(struct alice_gb *gb, int32_t x, int32_t w, int32_t state, int32_t seq)
{
	int32_t src[4] = {x, w, state, seq};
	if (!ok_all(gb, src, 4))
		return -1;
	const struct alice_tensor *tx = tt(gb, x), *tw = tt(gb, w), *ts = tt(gb, state), *tq = tt(gb, seq);
	int64_t C = tx->ne[0], T = tx->ne[1], K = tw->ne[0];
	if (!f32(tx) || !f32(tw) || !f32(ts) || tq->type != ALICE_TYPE_I32)
		return alice_gb_error(gb, "graph: SSM_CONV: x, w, state must be F32 and seq I32");
	if (tx->ne[2] * tx->ne[3] != 1 || K < 2 || tw->ne[1] != C || nel(tw) != K * C || ts->ne[0] != K - 1 ||
	    ts->ne[1] != C || ts->ne[2] != 1 || nel(tq) != T)
		return alice_gb_error(gb,
				      "graph: SSM_CONV: shapes x [%lld, %lld], w [%lld, %lld], state [%lld, %lld, %lld] "
				      "do not fit",
				      (long long)C, (long long)T, (long long)tw->ne[0], (long long)tw->ne[1],
				      (long long)ts->ne[0], (long long)ts->ne[1], (long long)ts->ne[2]);
	int32_t d = alice_gb_new(gb, ALICE_TYPE_F32, C, T, 1, 1);
	return alice_gb_node(gb, ALICE_OP_SSM_CONV, d, src, 4) ? d : -1;
}

int32_t alice_gb_gated_delta_net(struct alice_gb *gb, int32_t qk, int32_t v, int32_t g, int32_t beta, int32_t state,
				 int32_t seq, float scale)
{
	int32_t src[6] = {qk, v, g, beta, state, seq};
	if (!ok_all(gb, src, 6))
		return -1;
	const struct alice_tensor *tqk = tt(gb, qk), *tv = tt(gb, v), *tg = tt(gb, g), *tb = tt(gb, beta),
				  *ts = tt(gb, state), *tq = tt(gb, seq);
	int64_t S = tv->ne[0], Hv = tv->ne[1], T = tv->ne[2], Hk2 = tqk->ne[1];
	if (!f32(tqk) || !f32(tv) || !f32(tg) || !f32(tb) || !f32(ts) || tq->type != ALICE_TYPE_I32)
		return alice_gb_error(gb, "graph: GATED_DELTA_NET: inputs must be F32 and seq I32");
	if (tqk->ne[0] != S || Hk2 < 2 || Hk2 % 2 || Hv % (Hk2 / 2) || tqk->ne[2] != T || tqk->ne[3] != 1 ||
	    tv->ne[3] != 1 || tg->ne[0] != Hv || tg->ne[1] != T || nel(tg) != Hv * T || tb->ne[0] != Hv ||
	    tb->ne[1] != T || nel(tb) != Hv * T || ts->ne[0] != S || ts->ne[1] != S || ts->ne[2] != Hv ||
	    nel(tq) != T)
		return alice_gb_error(gb,
				      "graph: GATED_DELTA_NET: shapes qk [%lld, %lld, %lld], v [%lld, %lld, %lld], "
				      "state [%lld, %lld, %lld] do not fit",
				      (long long)tqk->ne[0], (long long)Hk2, (long long)tqk->ne[2], (long long)S,
				      (long long)Hv, (long long)T, (long long)ts->ne[0], (long long)ts->ne[1],
				      (long long)ts->ne[2]);
	int32_t d = alice_gb_new(gb, ALICE_TYPE_F32, S, Hv, T, 1);
	struct alice_node *n = alice_gb_node(gb, ALICE_OP_GATED_DELTA_NET, d, src, 6);
	if (!n)
		return -1;
	n->fp[0] = scale;
	return d;
}
