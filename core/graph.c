/* graph.c — the step-graph builder and its liveness-based placement. */
#include "graph.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/backend_check.h"
#include "alice/quant.h"

const char *alice_op_name(uint32_t op)
{
	return alice_bc_op_name(op);
}

void alice_gb_init(struct alice_gb *gb)
{
	memset(gb, 0, sizeof(*gb));
	gb->kv_table = -1;
}

void alice_gb_reset(struct alice_gb *gb)
{
	gb->n_tensors = 0;
	gb->n_nodes = 0;
	gb->failed = false;
	gb->err.msg[0] = 0;
	memset(gb->row_hint, 0, sizeof(gb->row_hint));
	gb->kv_table = -1;
	gb->kv_bs = 0;
}

void alice_gb_set_kv_pages(struct alice_gb *gb, int32_t t, int32_t bs)
{
	gb->kv_table = t;
	gb->kv_bs = bs;
}

int32_t alice_gb_row_regime(struct alice_gb *gb, int which, int32_t rows)
{
	if (which < 0 || which > 1 || rows < 1)
		return alice_gb_error(gb, "graph: row regime %d for %d rows", which, rows);
	int32_t t = alice_gb_input(gb, ALICE_TYPE_I32, 2, rows);
	if (t >= 0) {
		gb->row_hint[which].rows = rows;
		gb->row_hint[which].tensor = t;
	}
	return t;
}

void alice_gb_set_row_max(struct alice_gb *gb, int which, int32_t max_rows)
{
	if (which < 0 || which > 1 || !gb->row_hint[which].rows)
		return;
	int32_t t = gb->row_hint[which].tensor;
	for (uint32_t i = 0; i < gb->n_nodes; i++)
		if (gb->nodes[i].op == ALICE_OP_MUL_MAT && gb->nodes[i].src[2] == t)
			gb->nodes[i].ip[0] = max_rows;
}

void alice_gb_set_attn_seq_max(struct alice_gb *gb, int32_t max_tokens)
{
	for (uint32_t i = 0; i < gb->n_nodes; i++)
		if (gb->nodes[i].op == ALICE_OP_ATTENTION)
			gb->nodes[i].ip[1] = max_tokens;
}

void alice_gb_free(struct alice_gb *gb)
{
	if (!gb)
		return;
	free(gb->tensors);
	free(gb->meta);
	free(gb->nodes);
	alice_gb_init(gb);
}

bool alice_gb_failed(const struct alice_gb *gb)
{
	return gb->failed;
}

int32_t alice_gb_error(struct alice_gb *gb, const char *fmt, ...)
{
	if (!gb->failed) {
		va_list ap;
		va_start(ap, fmt);
		alice_error_vset(&gb->err, fmt, ap);
		va_end(ap);
		gb->failed = true;
	}
	return -1;
}

struct alice_graph alice_gb_graph(const struct alice_gb *gb)
{
	struct alice_graph g = {
		.n_tensors = gb->n_tensors,
		.n_nodes = gb->n_nodes,
		.tensors = gb->tensors,
		.nodes = gb->nodes,
	};
	return g;
}

const struct alice_tensor *alice_gb_tensor(const struct alice_gb *gb, int32_t t)
{
	if (t < 0 || (uint32_t)t >= gb->n_tensors)
		return NULL;
	return &gb->tensors[t];
}

static bool valid(const struct alice_gb *gb, int32_t t)
{
	return t >= 0 && (uint32_t)t < gb->n_tensors;
}

#define T(i) (&gb->tensors[(i)])

bool alice_gb_valid(const struct alice_gb *gb, const int32_t *ts, int n)
{
	if (gb->failed)
		return false;
	for (int i = 0; i < n; i++)
		if (!valid(gb, ts[i]))
			return false;
	return true;
}

/* Bytes spanned by a tensor laid out with its strides. */
static uint64_t span_bytes(const struct alice_tensor *t)
{
	const struct alice_type_info *ti = alice_type_info(t->type);
	uint64_t blk = ti && ti->block_size ? ti->block_size : 1;
	uint64_t last = 0;
	for (int d = 0; d < ALICE_MAX_DIMS; d++) {
		if (t->ne[d] <= 0)
			return 0;
		int64_t n = d == 0 ? (int64_t)(t->ne[0] / (int64_t)blk) : t->ne[d];
		last += (uint64_t)(n - 1) * (uint64_t)t->nb[d];
	}
	return last + (uint64_t)t->nb[0];
}

static int32_t push_tensor(struct alice_gb *gb, const struct alice_tensor *t, uint8_t kind)
{
	if (gb->failed)
		return -1;
	if (gb->n_tensors == gb->cap_tensors) {
		uint32_t cap = gb->cap_tensors ? gb->cap_tensors * 2 : 256;
		struct alice_tensor *nt = realloc(gb->tensors, cap * sizeof(*nt));
		if (!nt)
			return alice_gb_error(gb, "graph: out of memory");
		gb->tensors = nt;
		struct alice_gb_meta *nm = realloc(gb->meta, cap * sizeof(*nm));
		if (!nm)
			return alice_gb_error(gb, "graph: out of memory");
		gb->meta = nm;
		gb->cap_tensors = cap;
	}
	int32_t i = (int32_t)gb->n_tensors++;
	gb->tensors[i] = *t;
	gb->meta[i] = (struct alice_gb_meta){.kind = kind, .view_of = -1, .nbytes = span_bytes(t)};
	return i;
}

static int32_t push_node(struct alice_gb *gb, uint32_t op, int32_t dst, int32_t s0, int32_t s1,
			 int32_t s2, int32_t s3)
{
	if (gb->failed || dst < 0)
		return -1;
	if (gb->n_nodes == gb->cap_nodes) {
		uint32_t cap = gb->cap_nodes ? gb->cap_nodes * 2 : 256;
		struct alice_node *nn = realloc(gb->nodes, cap * sizeof(*nn));
		if (!nn)
			return alice_gb_error(gb, "graph: out of memory");
		gb->nodes = nn;
		gb->cap_nodes = cap;
	}
	struct alice_node *n = &gb->nodes[gb->n_nodes++];
	memset(n, 0, sizeof(*n));
	n->op = op;
	n->dst = dst;
	for (int i = 0; i < ALICE_MAX_SRC; i++)
		n->src[i] = -1;
	n->src[0] = s0;
	n->src[1] = s1;
	n->src[2] = s2;
	n->src[3] = s3;
	return dst;
}

static struct alice_node *last_node(struct alice_gb *gb)
{
	return &gb->nodes[gb->n_nodes - 1];
}

static void contiguous_strides(struct alice_tensor *t)
{
	const struct alice_type_info *ti = alice_type_info(t->type);
	uint64_t blk = ti && ti->block_size ? ti->block_size : 1;
	t->nb[0] = ti ? ti->type_size : 4;
	t->nb[1] = (int64_t)((uint64_t)t->nb[0] * ((uint64_t)t->ne[0] / blk));
	t->nb[2] = t->nb[1] * t->ne[1];
	t->nb[3] = t->nb[2] * t->ne[2];
}

int32_t alice_gb_external(struct alice_gb *gb, const struct alice_tensor *t)
{
	return push_tensor(gb, t, ALICE_GB_EXTERNAL);
}

static int32_t new_kind(struct alice_gb *gb, uint32_t type, int64_t ne0, int64_t ne1, int64_t ne2,
			int64_t ne3, uint8_t kind)
{
	if (gb->failed)
		return -1;
	const struct alice_type_info *ti = alice_type_info(type);
	if (!ti || ne0 <= 0 || ne1 <= 0 || ne2 <= 0 || ne3 <= 0 || ne0 % (int64_t)ti->block_size)
		return alice_gb_error(gb, "graph: bad new tensor (type %u, %lld x %lld x %lld x %lld)",
				      type, (long long)ne0, (long long)ne1, (long long)ne2, (long long)ne3);
	struct alice_tensor t = {.type = type, .ne = {ne0, ne1, ne2, ne3}};
	contiguous_strides(&t);
	return push_tensor(gb, &t, kind);
}

int32_t alice_gb_new(struct alice_gb *gb, uint32_t type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3)
{
	return new_kind(gb, type, ne0, ne1, ne2, ne3, ALICE_GB_COMPUTE);
}

int32_t alice_gb_new_like(struct alice_gb *gb, int32_t x)
{
	if (!valid(gb, x))
		return -1;
	const struct alice_tensor *t = T(x);
	return alice_gb_new(gb, ALICE_TYPE_F32, t->ne[0], t->ne[1], t->ne[2], t->ne[3]);
}

int32_t alice_gb_input(struct alice_gb *gb, uint32_t type, int64_t ne0, int64_t ne1)
{
	return new_kind(gb, type, ne0, ne1, 1, 1, ALICE_GB_INPUT);
}

void alice_gb_set_output(struct alice_gb *gb, int32_t t)
{
	if (!valid(gb, t))
		return;
	int32_t r = gb->meta[t].view_of >= 0 ? gb->meta[t].view_of : t;
	gb->meta[r].output = true;
}

int32_t alice_gb_view(struct alice_gb *gb, int32_t src, const int64_t ne[4], const int64_t nb[4],
		      uint64_t offset)
{
	if (gb->failed || !valid(gb, src))
		return -1;
	int32_t base = gb->meta[src].view_of >= 0 ? gb->meta[src].view_of : src;
	uint64_t offs = gb->meta[src].view_offs + offset;
	struct alice_tensor t = *T(src);
	memcpy(t.ne, ne, sizeof(t.ne));
	memcpy(t.nb, nb, sizeof(t.nb));
	t.offset = T(base)->offset + offs;
	uint64_t span = span_bytes(&t);
	if (span == 0 || offs + span > gb->meta[base].nbytes)
		return alice_gb_error(gb, "graph: view of %llu bytes at %llu exceeds its tensor (%llu bytes)",
				      (unsigned long long)span, (unsigned long long)offs,
				      (unsigned long long)gb->meta[base].nbytes);
	int32_t v = push_tensor(gb, &t, ALICE_GB_VIEW);
	if (v >= 0) {
		gb->meta[v].view_of = base;
		gb->meta[v].view_offs = offs;
		gb->meta[v].nbytes = span;
	}
	return v;
}

bool alice_gb_is_contiguous(const struct alice_gb *gb, int32_t t)
{
	if (!valid(gb, t))
		return false;
	struct alice_tensor c = *T(t);
	contiguous_strides(&c);
	for (int d = 0; d < ALICE_MAX_DIMS; d++)
		if (T(t)->ne[d] > 1 && T(t)->nb[d] != c.nb[d])
			return false;
	return true;
}

static int64_t nelem(const struct alice_tensor *t)
{
	return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

int32_t alice_gb_reshape(struct alice_gb *gb, int32_t src, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3)
{
	if (gb->failed || !valid(gb, src))
		return -1;
	if (!alice_gb_is_contiguous(gb, src))
		return alice_gb_error(gb, "graph: reshape of a non-contiguous tensor");
	if (ne0 * ne1 * ne2 * ne3 != nelem(T(src)))
		return alice_gb_error(gb, "graph: reshape changes the element count (%lld -> %lld)",
				      (long long)nelem(T(src)), (long long)(ne0 * ne1 * ne2 * ne3));
	struct alice_tensor t = {.type = T(src)->type, .ne = {ne0, ne1, ne2, ne3}};
	contiguous_strides(&t);
	return alice_gb_view(gb, src, t.ne, t.nb, 0);
}

/* ---- ops ---- */

static bool check(struct alice_gb *gb, bool ok, const char *op, const char *what)
{
	if (!ok && !gb->failed)
		alice_gb_error(gb, "graph: %s: %s", op, what);
	return ok;
}

static bool all_valid(struct alice_gb *gb, int32_t a, int32_t b)
{
	return !gb->failed && valid(gb, a) && (b == -2 || valid(gb, b));
}

int32_t alice_gb_get_rows(struct alice_gb *gb, int32_t src, int32_t ids)
{
	if (!all_valid(gb, src, ids))
		return -1;
	if (!check(gb, T(ids)->type == ALICE_TYPE_I32 && T(ids)->ne[1] == 1, "GET_ROWS", "ids must be I32 [n]"))
		return -1;
	int32_t d = alice_gb_new(gb, ALICE_TYPE_F32, T(src)->ne[0], T(ids)->ne[0], 1, 1);
	return push_node(gb, ALICE_OP_GET_ROWS, d, src, ids, -1, -1);
}

int32_t alice_gb_mul_mat(struct alice_gb *gb, int32_t w, int32_t x)
{
	if (!all_valid(gb, w, x))
		return -1;
	const struct alice_tensor *tw = T(w), *tx = T(x);
	if (!check(gb, tw->ne[0] == tx->ne[0], "MUL_MAT", "inner dimensions differ"))
		return alice_gb_error(gb, "graph: MUL_MAT: K %lld vs %lld", (long long)tw->ne[0],
				      (long long)tx->ne[0]);
	if (!check(gb, tx->type == ALICE_TYPE_F32, "MUL_MAT", "activations must be F32"))
		return -1;
	if (!check(gb, (tw->ne[2] == 1 || tw->ne[2] == tx->ne[2]) && (tw->ne[3] == 1 || tw->ne[3] == tx->ne[3]),
		   "MUL_MAT", "batch dims do not broadcast"))
		return -1;
	int32_t d = alice_gb_new(gb, ALICE_TYPE_F32, tw->ne[1], tx->ne[1], tx->ne[2], tx->ne[3]);
	int32_t regime = -1; /* llama.cpp's per-sequence kernel choice, see backend.h */
	for (int k = 0; k < 2 && regime < 0; k++)
		if (gb->row_hint[k].rows && gb->row_hint[k].rows == tx->ne[1] && tx->ne[2] == 1 && tx->ne[3] == 1)
			regime = gb->row_hint[k].tensor;
	return push_node(gb, ALICE_OP_MUL_MAT, d, w, x, regime, -1);
}

static int32_t binary(struct alice_gb *gb, uint32_t op, int32_t a, int32_t b)
{
	if (!all_valid(gb, a, b))
		return -1;
	for (int i = 0; i < ALICE_MAX_DIMS; i++)
		if (T(b)->ne[i] != 1 && T(b)->ne[i] != T(a)->ne[i])
			return alice_gb_error(gb, "graph: %s: dim %d: %lld does not broadcast to %lld",
					      alice_op_name(op), i, (long long)T(b)->ne[i], (long long)T(a)->ne[i]);
	int32_t d = alice_gb_new(gb, ALICE_TYPE_F32, T(a)->ne[0], T(a)->ne[1], T(a)->ne[2], T(a)->ne[3]);
	return push_node(gb, op, d, a, b, -1, -1);
}

int32_t alice_gb_add(struct alice_gb *gb, int32_t a, int32_t b)
{
	return binary(gb, ALICE_OP_ADD, a, b);
}

int32_t alice_gb_mul(struct alice_gb *gb, int32_t a, int32_t b)
{
	return binary(gb, ALICE_OP_MUL, a, b);
}

int32_t alice_gb_scale(struct alice_gb *gb, int32_t a, float s, float bias)
{
	if (!all_valid(gb, a, -2))
		return -1;
	int32_t d = alice_gb_new(gb, ALICE_TYPE_F32, T(a)->ne[0], T(a)->ne[1], T(a)->ne[2], T(a)->ne[3]);
	if (push_node(gb, ALICE_OP_SCALE, d, a, -1, -1, -1) < 0)
		return -1;
	last_node(gb)->fp[0] = s;
	last_node(gb)->fp[1] = bias;
	return d;
}

int32_t alice_gb_rms_norm(struct alice_gb *gb, int32_t x, int32_t w, float eps)
{
	if (!all_valid(gb, x, w < 0 ? -2 : w))
		return -1;
	if (w >= 0 && !check(gb, T(w)->ne[0] == T(x)->ne[0] && nelem(T(w)) == T(w)->ne[0] &&
				      T(w)->type == ALICE_TYPE_F32,
			     "RMS_NORM", "weight must be F32 [ne0 of x]"))
		return -1;
	int32_t d = alice_gb_new(gb, ALICE_TYPE_F32, T(x)->ne[0], T(x)->ne[1], T(x)->ne[2], T(x)->ne[3]);
	if (push_node(gb, ALICE_OP_RMS_NORM, d, x, w, -1, -1) < 0)
		return -1;
	last_node(gb)->fp[0] = eps;
	return d;
}

int32_t alice_gb_layer_norm(struct alice_gb *gb, int32_t x, int32_t w, int32_t b, float eps)
{
	if (!all_valid(gb, x, w < 0 ? -2 : w) || (b >= 0 && !valid(gb, b)))
		return -1;
	int32_t wb[2] = {w, b};
	for (int i = 0; i < 2; i++)
		if (wb[i] >= 0 && !check(gb, T(wb[i])->ne[0] == T(x)->ne[0] && nelem(T(wb[i])) == T(wb[i])->ne[0] &&
						     T(wb[i])->type == ALICE_TYPE_F32,
					 "NORM", "weight and bias must be F32 [ne0 of x]"))
			return -1;
	int32_t d = alice_gb_new(gb, ALICE_TYPE_F32, T(x)->ne[0], T(x)->ne[1], T(x)->ne[2], T(x)->ne[3]);
	if (push_node(gb, ALICE_OP_NORM, d, x, w, b, -1) < 0)
		return -1;
	last_node(gb)->fp[0] = eps;
	return d;
}

int32_t alice_gb_rope(struct alice_gb *gb, int32_t x, int32_t pos, int32_t ff, int n_dims, int mode,
		      float freq_base, float freq_scale)
{
	if (!all_valid(gb, x, pos) || (ff >= 0 && !valid(gb, ff)))
		return -1;
	const struct alice_tensor *tx = T(x);
	if (!check(gb, n_dims > 0 && n_dims % 2 == 0 && n_dims <= tx->ne[0], "ROPE",
		   "n_dims must be even and <= head_dim"))
		return -1;
	if (!check(gb, T(pos)->type == ALICE_TYPE_I32 && T(pos)->ne[0] == tx->ne[2], "ROPE",
		   "positions must be I32 [n_tokens]"))
		return -1;
	if (ff >= 0 && !check(gb, T(ff)->type == ALICE_TYPE_F32 && nelem(T(ff)) == n_dims / 2, "ROPE",
			      "frequency factors must be F32 [n_dims/2]"))
		return -1;
	int32_t d = alice_gb_new(gb, ALICE_TYPE_F32, tx->ne[0], tx->ne[1], tx->ne[2], tx->ne[3]);
	if (push_node(gb, ALICE_OP_ROPE, d, x, pos, ff, -1) < 0)
		return -1;
	struct alice_node *n = last_node(gb);
	n->ip[0] = n_dims;
	n->ip[1] = mode;
	n->fp[0] = freq_base;
	n->fp[1] = freq_scale;
	return d;
}

int32_t alice_gb_attention(struct alice_gb *gb, int32_t q, int32_t k, int32_t v, int32_t ranges,
			   float scale, float softcap)
{
	if (!all_valid(gb, q, k) || !all_valid(gb, v, ranges))
		return -1;
	const struct alice_tensor *tq = T(q), *tk = T(k), *tv = T(v), *tr = T(ranges);
	if (!check(gb, tq->ne[0] == tk->ne[0] && tk->ne[1] == tv->ne[1] && tk->ne[2] == tv->ne[2] &&
			       tk->ne[1] > 0 && tq->ne[1] % tk->ne[1] == 0,
		   "ATTENTION", "q/k/v shapes do not match (d_k, heads, cells)"))
		return -1;
	if (!check(gb, tr->type == ALICE_TYPE_I32 && tr->ne[0] == 2 && tr->ne[1] == tq->ne[2], "ATTENTION",
		   "ranges must be I32 [2, n_tokens]"))
		return -1;
	int32_t d = alice_gb_new(gb, ALICE_TYPE_F32, tv->ne[0], tq->ne[1], tq->ne[2], 1);
	if (push_node(gb, ALICE_OP_ATTENTION, d, q, k, v, ranges) < 0)
		return -1;
	last_node(gb)->fp[0] = scale;
	last_node(gb)->fp[1] = softcap;
	if (gb->kv_table >= 0) {
		last_node(gb)->src[4] = gb->kv_table;
		last_node(gb)->ip[0] = gb->kv_bs;
	}
	return d;
}

int32_t alice_gb_kv_write(struct alice_gb *gb, int32_t cache, int32_t rows, int32_t cells)
{
	if (!all_valid(gb, cache, rows) || !valid(gb, cells))
		return -1;
	const struct alice_tensor *tc = T(cache), *tr = T(rows);
	/* cache [d, heads, n_cells]: one cell holds ne0*ne1 elements */
	int64_t per_cell = tc->ne[0] * tc->ne[1];
	int64_t n = T(cells)->ne[0];
	if (!check(gb, tc->ne[3] == 1 && tr->type == ALICE_TYPE_F32 && nelem(tr) == per_cell * n &&
			       T(cells)->type == ALICE_TYPE_I32,
		   "KV_WRITE", "rows must be F32 with one cache cell's elements per cell index"))
		return -1;
	if (push_node(gb, ALICE_OP_KV_WRITE, cache, rows, cells, -1, -1) < 0)
		return -1;
	return cache;
}

int32_t alice_gb_glu(struct alice_gb *gb, int32_t a, int32_t b, int act)
{
	if (!all_valid(gb, a, b))
		return -1;
	for (int i = 0; i < ALICE_MAX_DIMS; i++)
		if (!check(gb, T(a)->ne[i] == T(b)->ne[i], "GLU", "operands differ in shape"))
			return -1;
	int32_t d = alice_gb_new(gb, ALICE_TYPE_F32, T(a)->ne[0], T(a)->ne[1], T(a)->ne[2], T(a)->ne[3]);
	if (push_node(gb, ALICE_OP_GLU, d, a, b, -1, -1) < 0)
		return -1;
	last_node(gb)->ip[0] = act;
	return d;
}

int32_t alice_gb_unary(struct alice_gb *gb, int32_t a, int act)
{
	if (!all_valid(gb, a, -2))
		return -1;
	int32_t d = alice_gb_new(gb, ALICE_TYPE_F32, T(a)->ne[0], T(a)->ne[1], T(a)->ne[2], T(a)->ne[3]);
	if (push_node(gb, ALICE_OP_UNARY, d, a, -1, -1, -1) < 0)
		return -1;
	last_node(gb)->ip[0] = act;
	return d;
}

struct alice_node *alice_gb_node(struct alice_gb *gb, uint32_t op, int32_t dst, const int32_t *src, int n_src)
{
	if (gb->failed || !valid(gb, dst))
		return NULL;
	if (n_src < 0 || n_src > ALICE_MAX_SRC) {
		alice_gb_error(gb, "graph: %s: %d sources", alice_op_name(op), n_src);
		return NULL;
	}
	for (int i = 0; i < n_src; i++)
		if (src[i] != -1 && !valid(gb, src[i]))
			return NULL;
	if (push_node(gb, op, dst, -1, -1, -1, -1) < 0)
		return NULL;
	struct alice_node *n = last_node(gb);
	for (int i = 0; i < n_src; i++)
		n->src[i] = src[i];
	return n;
}

int32_t alice_gb_copy(struct alice_gb *gb, int32_t src, uint32_t type)
{
	if (!all_valid(gb, src, -2))
		return -1;
	int32_t d = alice_gb_new(gb, type, T(src)->ne[0], T(src)->ne[1], T(src)->ne[2], T(src)->ne[3]);
	return push_node(gb, ALICE_OP_COPY, d, src, -1, -1, -1);
}

int32_t alice_gb_topk(struct alice_gb *gb, int32_t x, int32_t k, int32_t into)
{
	if (!all_valid(gb, x, -2))
		return -1;
	if (k < 1 || k > ALICE_TOPK_MAX || k > T(x)->ne[0] || T(x)->ne[2] != 1 || T(x)->ne[3] != 1)
		return alice_gb_error(gb, "topk: %d of a [%lld, %lld] tensor", k, (long long)T(x)->ne[0],
				      (long long)T(x)->ne[1]);
	if (into >= 0 && (!valid(gb, into) || T(into)->type != ALICE_TYPE_I32 || T(into)->ne[0] != 2 ||
			  T(into)->ne[1] != k || T(into)->ne[2] != T(x)->ne[1]))
		return alice_gb_error(gb, "topk: the output tensor is not I32 [2, %d, %lld]", k, (long long)T(x)->ne[1]);
	int32_t d = into >= 0 ? into : alice_gb_new(gb, ALICE_TYPE_I32, 2, k, T(x)->ne[1], 1);
	if (push_node(gb, ALICE_OP_TOPK, d, x, -1, -1, -1) < 0)
		return -1;
	last_node(gb)->ip[0] = k;
	return d;
}

int32_t alice_gb_sample_temp(struct alice_gb *gb, int32_t x, int32_t params, int32_t into)
{
	if (!all_valid(gb, x, params))
		return -1;
	if (into >= 0 && (!valid(gb, into) || T(into)->type != ALICE_TYPE_I32 || T(into)->ne[0] != 2 ||
			  T(into)->ne[1] != T(x)->ne[1]))
		return alice_gb_error(gb, "sample_temp: the output tensor is not I32 [2, %lld]", (long long)T(x)->ne[1]);
	int32_t d = into >= 0 ? into : alice_gb_new(gb, ALICE_TYPE_I32, 2, T(x)->ne[1], 1, 1);
	return push_node(gb, ALICE_OP_SAMPLE_TEMP, d, x, params, -1, -1);
}

int32_t alice_gb_token_mask(struct alice_gb *gb, int32_t x, int32_t recs)
{
	if (!all_valid(gb, x, recs))
		return -1;
	if (T(x)->type != ALICE_TYPE_F32 || T(recs)->type != ALICE_TYPE_I32 ||
	    T(recs)->ne[0] != 1 + (T(x)->ne[0] + 31) / 32)
		return alice_gb_error(gb, "token_mask: logits must be F32 rows, records I32 [1 + n/32, L]");
	return push_node(gb, ALICE_OP_TOKEN_MASK, x, recs, -1, -1, -1);
}

int32_t alice_gb_logsumexp(struct alice_gb *gb, int32_t x, int32_t tokens)
{
	if (!all_valid(gb, x, tokens < 0 ? -2 : tokens))
		return -1;
	int32_t d = alice_gb_new(gb, ALICE_TYPE_I32, 4, T(x)->ne[1], 1, 1);
	return push_node(gb, ALICE_OP_LOGSUMEXP, d, x, tokens, -1, -1);
}

int32_t alice_gb_feed(struct alice_gb *gb, int32_t host, int32_t idx, int32_t picks)
{
	if (!all_valid(gb, host, idx) || !all_valid(gb, picks, -2))
		return -1;
	if (T(host)->type != ALICE_TYPE_I32 || T(idx)->type != ALICE_TYPE_I32 || T(picks)->type != ALICE_TYPE_I32 ||
	    T(idx)->ne[0] != T(host)->ne[0])
		return alice_gb_error(gb, "feed: tokens, indices and picks must be I32, the first two of one length");
	int32_t d = alice_gb_new(gb, ALICE_TYPE_I32, T(host)->ne[0], 1, 1, 1);
	return push_node(gb, ALICE_OP_FEED, d, host, idx, picks, -1);
}

int32_t alice_gb_logit_adjust(struct alice_gb *gb, int32_t x, int32_t recs)
{
	if (!all_valid(gb, x, recs))
		return -1;
	if (T(x)->type != ALICE_TYPE_F32 || T(x)->ne[2] != 1 || T(x)->ne[3] != 1 || T(recs)->type != ALICE_TYPE_I32 ||
	    T(recs)->ne[0] != 6)
		return alice_gb_error(gb, "logit_adjust: logits must be F32 rows, records I32 [6, L]");
	return push_node(gb, ALICE_OP_LOGIT_ADJUST, x, recs, -1, -1, -1);
}

/* ---- placement ---- */

struct free_block {
	uint64_t offs, size;
};

struct placer {
	struct free_block *blocks;
	uint32_t n, cap;
	uint64_t top;
};

static uint64_t align_up(uint64_t x)
{
	return (x + ALICE_GB_ALIGN - 1) / ALICE_GB_ALIGN * ALICE_GB_ALIGN;
}

static bool placer_alloc(struct placer *p, uint64_t size, uint64_t *offs)
{
	size = align_up(size ? size : 1);
	int32_t best = -1;
	for (uint32_t i = 0; i < p->n; i++)
		if (p->blocks[i].size >= size && (best < 0 || p->blocks[i].size < p->blocks[best].size))
			best = (int32_t)i;
	if (best >= 0) {
		*offs = p->blocks[best].offs;
		p->blocks[best].offs += size;
		p->blocks[best].size -= size;
		if (p->blocks[best].size == 0) {
			memmove(&p->blocks[best], &p->blocks[best + 1], (p->n - (uint32_t)best - 1) * sizeof(*p->blocks));
			p->n--;
		}
		return true;
	}
	/* Grow: reuse a free block touching the top. */
	if (p->n && p->blocks[p->n - 1].offs + p->blocks[p->n - 1].size == p->top) {
		*offs = p->blocks[p->n - 1].offs;
		p->top = *offs + size;
		p->n--;
		return true;
	}
	*offs = p->top;
	p->top += size;
	return true;
}

static bool placer_free(struct placer *p, uint64_t offs, uint64_t size)
{
	size = align_up(size ? size : 1);
	uint32_t i = 0;
	while (i < p->n && p->blocks[i].offs < offs)
		i++;
	/* merge with previous / next */
	bool merged = false;
	if (i > 0 && p->blocks[i - 1].offs + p->blocks[i - 1].size == offs) {
		p->blocks[i - 1].size += size;
		merged = true;
		if (i < p->n && p->blocks[i - 1].offs + p->blocks[i - 1].size == p->blocks[i].offs) {
			p->blocks[i - 1].size += p->blocks[i].size;
			memmove(&p->blocks[i], &p->blocks[i + 1], (p->n - i - 1) * sizeof(*p->blocks));
			p->n--;
		}
	} else if (i < p->n && offs + size == p->blocks[i].offs) {
		p->blocks[i].offs = offs;
		p->blocks[i].size += size;
		merged = true;
	}
	if (merged)
		return true;
	if (p->n == p->cap) {
		uint32_t cap = p->cap ? p->cap * 2 : 64;
		struct free_block *nb = realloc(p->blocks, cap * sizeof(*nb));
		if (!nb)
			return false;
		p->blocks = nb;
		p->cap = cap;
	}
	memmove(&p->blocks[i + 1], &p->blocks[i], (p->n - i) * sizeof(*p->blocks));
	p->blocks[i] = (struct free_block){offs, size};
	p->n++;
	return true;
}

static int32_t root_of(const struct alice_gb *gb, int32_t t)
{
	return gb->meta[t].view_of >= 0 ? gb->meta[t].view_of : t;
}

/* Free the tensors pend lists (marked 3 in state). */
static enum alice_status free_pending(struct alice_gb *gb, struct placer *p, int32_t *pend, uint8_t *state)
{
	for (int s = 0; s <= ALICE_MAX_SRC; s++) {
		int32_t c = pend[s];
		if (c < 0 || state[c] != 3)
			continue;
		if (!placer_free(p, gb->tensors[c].offset, gb->meta[c].nbytes))
			return ALICE_ERR_NOMEM;
		state[c] = 2;
		pend[s] = -1;
	}
	return ALICE_OK;
}

enum alice_status alice_gb_plan(struct alice_gb *gb, uint64_t *size, struct alice_error *err)
{
	if (gb->failed)
		return alice_fail(err, ALICE_ERR_INVALID, "%s", gb->err.msg);
	enum alice_status st = ALICE_OK;
	uint32_t nt = gb->n_tensors;
	int32_t *last = malloc((size_t)nt * sizeof(*last));
	uint8_t *state = calloc(nt, 1); /* 0 unplaced, 1 placed, 2 freed, 3 to free */
	struct placer p = {0};
	int32_t pend[ALICE_MAX_SRC + 1];
	for (int s = 0; s <= ALICE_MAX_SRC; s++)
		pend[s] = -1;
	if (!last || !state) {
		st = alice_fail(err, ALICE_ERR_NOMEM, "graph: out of memory");
		goto out_free;
	}
	for (uint32_t i = 0; i < nt; i++)
		last[i] = gb->meta[i].output ? (int32_t)gb->n_nodes : -1;
	for (uint32_t n = 0; n < gb->n_nodes; n++) {
		const struct alice_node *nd = &gb->nodes[n];
		for (int s = 0; s < ALICE_MAX_SRC; s++)
			if (nd->src[s] >= 0) {
				int32_t r = root_of(gb, nd->src[s]);
				if (last[r] < (int32_t)n)
					last[r] = (int32_t)n;
			}
		int32_t r = root_of(gb, nd->dst);
		if (last[r] < (int32_t)n)
			last[r] = (int32_t)n;
	}
	/* Inputs first, alive for the whole step. */
	for (uint32_t i = 0; i < nt; i++)
		if (gb->meta[i].kind == ALICE_GB_INPUT) {
			uint64_t o;
			placer_alloc(&p, gb->meta[i].nbytes, &o);
			gb->tensors[i].offset = o;
			state[i] = 1;
		}
	for (uint32_t n = 0; n < gb->n_nodes; n++) {
		const struct alice_node *nd = &gb->nodes[n];
		for (int s = 0; s < ALICE_MAX_SRC; s++) {
			if (nd->src[s] < 0)
				continue;
			int32_t r = root_of(gb, nd->src[s]);
			if (gb->meta[r].kind == ALICE_GB_COMPUTE && state[r] != 1) {
				st = alice_fail(err, ALICE_ERR_INVALID,
						"graph: node %u (%s) reads tensor %d before it is written", n,
						alice_op_name(nd->op), nd->src[s]);
				goto out_free;
			}
		}
		int32_t r = root_of(gb, nd->dst);
		if (gb->meta[r].kind == ALICE_GB_COMPUTE && state[r] == 0) {
			uint64_t o;
			placer_alloc(&p, gb->meta[r].nbytes, &o);
			gb->tensors[r].offset = o;
			state[r] = 1;
		}
		/* Free what the previous node read (and wrote) for the last time:
		 * one node late, so no node's output sits where its predecessor
		 * read, and a backend may run two neighbours as one launch (q and
		 * k rotations; the placer would put k's output over q's input). */
		if ((st = free_pending(gb, &p, pend, state)) != ALICE_OK)
			goto out_nomem;
		for (int s = 0; s < ALICE_MAX_SRC; s++)
			pend[s] = nd->src[s] >= 0 ? root_of(gb, nd->src[s]) : -1;
		pend[ALICE_MAX_SRC] = r;
		for (int s = 0; s <= ALICE_MAX_SRC; s++) {
			int32_t c = pend[s];
			if (c < 0 || gb->meta[c].kind != ALICE_GB_COMPUTE || state[c] != 1 || last[c] != (int32_t)n)
				pend[s] = -1;
			else
				state[c] = 3; /* freed after the next node's output is placed */
		}
	}
	/* Views follow their base. */
	for (uint32_t i = 0; i < nt; i++)
		if (gb->meta[i].kind == ALICE_GB_VIEW) {
			int32_t b = gb->meta[i].view_of;
			gb->tensors[i].offset = gb->tensors[b].offset + gb->meta[i].view_offs;
		}
	*size = p.top ? p.top : ALICE_GB_ALIGN;
	goto out_free;
out_nomem:
	st = alice_fail(err, ALICE_ERR_NOMEM, "graph: out of memory");
out_free:
	free(p.blocks);
	free(state);
	free(last);
	return st;
}

void alice_gb_bind(struct alice_gb *gb, struct alice_buffer *buf)
{
	for (uint32_t i = 0; i < gb->n_tensors; i++) {
		uint8_t k = gb->meta[i].kind;
		if (k == ALICE_GB_INPUT || k == ALICE_GB_COMPUTE)
			gb->tensors[i].buf = buf;
		else if (k == ALICE_GB_VIEW && gb->meta[gb->meta[i].view_of].kind != ALICE_GB_EXTERNAL)
			gb->tensors[i].buf = buf;
	}
}
