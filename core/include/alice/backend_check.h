/* backend_check.h — the backend contract of backend.h, written once: op
 * names, how many sources each op takes, the type rules, the KV_WRITE cell
 * dim, and the overflow-safe check of a tensor's extent against its buffer.
 *
 * Header-only (static inline, no core symbols): a backend .so links nothing
 * from the core, and this header compiles as C11 and as CUDA C++. It reads
 * the type table of quant.h, which every backend compiles in. The core uses
 * the op names too (core/graph.c).
 *
 * What stays in a backend is only what is its own: the limits it passes to
 * alice_bc_check_tensor (largest ne / nb), alignment, and the shapes its
 * kernels handle. Messages go to a caller-owned buffer (a backend's ctx->err). */
#ifndef ALICE_BACKEND_CHECK_H
#define ALICE_BACKEND_CHECK_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "alice/backend.h"
#include "alice/quant.h"
#ifdef __cplusplus
}
#endif

/* The ops this header knows (backend.h 1.3). */
#define ALICE_BC_OP_COUNT ALICE_OP_COUNT_V1_6

/* What the contract says of one op: its name and its number of sources
 * (src[0..min_src) are required, none past max_src). */
struct alice_op_rule {
	const char *name; /* NULL: not an op */
	int min_src, max_src;
};

static inline struct alice_op_rule alice_bc_rule_of(const char *name, int min_src, int max_src)
{
	struct alice_op_rule r;
	r.name = name;
	r.min_src = min_src;
	r.max_src = max_src;
	return r;
}

/* The rule of op (name NULL for an id that is no op). A switch, not a
 * table, so that the compiler names an enum member missing here. */
static inline struct alice_op_rule alice_bc_op_rule(uint32_t op)
{
	switch ((enum alice_op)op) {
	case ALICE_OP_NONE: return alice_bc_rule_of("NONE", 0, 0);
	case ALICE_OP_GET_ROWS: return alice_bc_rule_of("GET_ROWS", 2, 2);
	case ALICE_OP_MUL_MAT: return alice_bc_rule_of("MUL_MAT", 2, 3);
	case ALICE_OP_ADD: return alice_bc_rule_of("ADD", 2, 2);
	case ALICE_OP_MUL: return alice_bc_rule_of("MUL", 2, 2);
	case ALICE_OP_SCALE: return alice_bc_rule_of("SCALE", 1, 1);
	case ALICE_OP_RMS_NORM: return alice_bc_rule_of("RMS_NORM", 1, 2);
	case ALICE_OP_L2_NORM: return alice_bc_rule_of("L2_NORM", 1, 1);
	case ALICE_OP_ROPE: return alice_bc_rule_of("ROPE", 2, 3);
	case ALICE_OP_ATTENTION: return alice_bc_rule_of("ATTENTION", 4, 5);
	case ALICE_OP_KV_WRITE: return alice_bc_rule_of("KV_WRITE", 2, 2);
	case ALICE_OP_GLU: return alice_bc_rule_of("GLU", 2, 2);
	case ALICE_OP_UNARY: return alice_bc_rule_of("UNARY", 1, 1);
	case ALICE_OP_SOFTCAP: return alice_bc_rule_of("SOFTCAP", 1, 1);
	case ALICE_OP_COPY: return alice_bc_rule_of("COPY", 1, 1);
	case ALICE_OP_SSM_CONV: return alice_bc_rule_of("SSM_CONV", 4, 4);
	case ALICE_OP_GATED_DELTA_NET: return alice_bc_rule_of("GATED_DELTA_NET", 6, 6);
	case ALICE_OP_NORM: return alice_bc_rule_of("NORM", 1, 3);
	case ALICE_OP_TOPK: return alice_bc_rule_of("TOPK", 1, 1);
	case ALICE_OP_SAMPLE_TEMP: return alice_bc_rule_of("SAMPLE_TEMP", 2, 2);
	case ALICE_OP_LOGIT_ADJUST: return alice_bc_rule_of("LOGIT_ADJUST", 1, 1);
	case ALICE_OP_FEED: return alice_bc_rule_of("FEED", 3, 3);
	case ALICE_OP_LOGSUMEXP: return alice_bc_rule_of("LOGSUMEXP", 1, 2);
	case ALICE_OP_TOKEN_MASK: return alice_bc_rule_of("TOKEN_MASK", 1, 1);
	case ALICE_OP_COUNT_V1_6: break;
	}
	return alice_bc_rule_of(NULL, 0, 0);
}

/* "MUL_MAT", or "unknown op". */
static inline const char *alice_bc_op_name(uint32_t op)
{
	const char *n = alice_bc_op_rule(op).name;
	return n ? n : "unknown op";
}

/* ---- type rules ---- */

/* Weight types MUL_MAT and GET_ROWS take (every backend handles all). */
static inline bool alice_bc_weight_type_ok(uint32_t type)
{
	switch (type) {
	case ALICE_TYPE_F32: case ALICE_TYPE_F16: case ALICE_TYPE_BF16:
	case ALICE_TYPE_Q4_0: case ALICE_TYPE_Q4_1: case ALICE_TYPE_Q5_0: case ALICE_TYPE_Q5_1:
	case ALICE_TYPE_Q8_0: case ALICE_TYPE_Q2_K: case ALICE_TYPE_Q3_K: case ALICE_TYPE_Q4_K:
	case ALICE_TYPE_Q5_K: case ALICE_TYPE_Q6_K: case ALICE_TYPE_IQ4_NL: case ALICE_TYPE_IQ4_XS:
	case ALICE_TYPE_MXFP4: case ALICE_TYPE_Q1_0:
		return true;
	default:
		return false;
	}
}

static inline bool alice_bc_act_ok(int act)
{
	return act >= ALICE_ACT_SILU && act <= ALICE_ACT_GELU_ERF;
}

static inline bool alice_bc_is_f32(const struct alice_tensor *t)
{
	return t && t->type == ALICE_TYPE_F32;
}

static inline bool alice_bc_is_i32(const struct alice_tensor *t)
{
	return t && t->type == ALICE_TYPE_I32;
}

static inline bool alice_bc_is_f16_f32(uint32_t type)
{
	return type == ALICE_TYPE_F16 || type == ALICE_TYPE_F32;
}

static inline bool alice_bc_is_float_type(uint32_t type)
{
	return alice_bc_is_f16_f32(type) || type == ALICE_TYPE_BF16;
}

/* The type combinations (and type-like params: activation, rope mode) of
 * backend.h's op comments. s: the node's sources, NULL where absent (the
 * required ones present: see alice_bc_node_tensors). */
static inline bool alice_bc_types_ok(const struct alice_node *n, const struct alice_tensor *dst,
				     const struct alice_tensor *const *s)
{
	switch (n->op) {
	case ALICE_OP_GET_ROWS:
		return alice_bc_weight_type_ok(s[0]->type) && alice_bc_is_i32(s[1]) && alice_bc_is_f32(dst);
	case ALICE_OP_MUL_MAT:
		return alice_bc_weight_type_ok(s[0]->type) && alice_bc_is_f32(s[1]) && alice_bc_is_f32(dst);
	case ALICE_OP_ADD:
	case ALICE_OP_MUL:
		return alice_bc_is_f32(s[0]) && alice_bc_is_f32(s[1]) && alice_bc_is_f32(dst);
	case ALICE_OP_GLU:
		return alice_bc_is_f32(s[0]) && alice_bc_is_f32(s[1]) && alice_bc_is_f32(dst) &&
		       alice_bc_act_ok(n->ip[0]);
	case ALICE_OP_UNARY:
		return alice_bc_is_f32(s[0]) && alice_bc_is_f32(dst) && alice_bc_act_ok(n->ip[0]);
	case ALICE_OP_SCALE:
	case ALICE_OP_L2_NORM:
	case ALICE_OP_SOFTCAP:
		return alice_bc_is_f32(s[0]) && alice_bc_is_f32(dst);
	case ALICE_OP_RMS_NORM:
		return alice_bc_is_f32(s[0]) && alice_bc_is_f32(dst) && (!s[1] || alice_bc_is_f32(s[1]));
	case ALICE_OP_NORM:
		return alice_bc_is_f32(s[0]) && alice_bc_is_f32(dst) && (!s[1] || alice_bc_is_f32(s[1])) &&
		       (!s[2] || alice_bc_is_f32(s[2]));
	case ALICE_OP_ROPE:
		return alice_bc_is_f32(s[0]) && alice_bc_is_i32(s[1]) && alice_bc_is_f32(dst) &&
		       (!s[2] || alice_bc_is_f32(s[2])) &&
		       (n->ip[1] == ALICE_ROPE_NORMAL || n->ip[1] == ALICE_ROPE_NEOX || n->ip[1] == ALICE_ROPE_IMROPE);
	case ALICE_OP_ATTENTION:
		return alice_bc_is_f32(s[0]) && alice_bc_is_f16_f32(s[1]->type) && alice_bc_is_f16_f32(s[2]->type) &&
		       alice_bc_is_i32(s[3]) && alice_bc_is_f32(dst) &&
		       (!s[4] || (alice_bc_is_i32(s[4]) && n->ip[0] >= 1 && n->ip[0] <= 65536 && (n->ip[0] & (n->ip[0] - 1)) == 0));
	case ALICE_OP_KV_WRITE:
		return alice_bc_is_f32(s[0]) && alice_bc_is_i32(s[1]) && alice_bc_is_f16_f32(dst->type);
	case ALICE_OP_COPY:
		return alice_bc_is_float_type(s[0]->type) && alice_bc_is_float_type(dst->type);
	case ALICE_OP_SSM_CONV: /* x, w, state, seq */
		return alice_bc_is_f32(s[0]) && alice_bc_is_f32(s[1]) && alice_bc_is_f32(s[2]) && alice_bc_is_i32(s[3]) &&
		       alice_bc_is_f32(dst);
	case ALICE_OP_GATED_DELTA_NET: /* qk, v, g, beta, state, seq */
		return alice_bc_is_f32(s[0]) && alice_bc_is_f32(s[1]) && alice_bc_is_f32(s[2]) && alice_bc_is_f32(s[3]) &&
		       alice_bc_is_f32(s[4]) && alice_bc_is_i32(s[5]) && alice_bc_is_f32(dst);
	case ALICE_OP_TOPK:
		return alice_bc_is_f32(s[0]) && alice_bc_is_i32(dst) && n->ip[0] >= 1 && n->ip[0] <= ALICE_TOPK_MAX &&
		       n->ip[0] <= s[0]->ne[0] && s[0]->nb[0] == 4 && dst->ne[0] == 2 && dst->ne[1] == n->ip[0] &&
		       dst->ne[2] == s[0]->ne[1] && s[0]->ne[2] == 1 && s[0]->ne[3] == 1;
	case ALICE_OP_SAMPLE_TEMP:
		return alice_bc_is_f32(s[0]) && alice_bc_is_i32(s[1]) && alice_bc_is_i32(dst) && s[0]->nb[0] == 4 &&
		       s[0]->ne[0] <= ALICE_SAMPLE_TEMP_MAX && s[0]->ne[2] == 1 && s[0]->ne[3] == 1 &&
		       s[1]->ne[0] == 4 && s[1]->ne[1] == s[0]->ne[1] && s[1]->nb[0] == 4 && s[1]->nb[1] == 16 &&
		       dst->ne[0] == 2 && dst->ne[1] == s[0]->ne[1] && dst->nb[0] == 4 && dst->nb[1] == 8;
	case ALICE_OP_LOGIT_ADJUST:
		return alice_bc_is_f32(dst) && alice_bc_is_i32(s[0]) && dst->nb[0] == 4 && dst->ne[2] == 1 &&
		       dst->ne[3] == 1 && s[0]->ne[0] == 6 && s[0]->ne[1] >= 1 && s[0]->nb[0] == 4 && s[0]->nb[1] == 24;
	case ALICE_OP_FEED:
		return alice_bc_is_i32(dst) && alice_bc_is_i32(s[0]) && alice_bc_is_i32(s[1]) && alice_bc_is_i32(s[2]) &&
		       dst->nb[0] == 4 && s[0]->nb[0] == 4 && s[1]->nb[0] == 4 && s[2]->nb[0] == 4 &&
		       dst->ne[1] == 1 && dst->ne[2] == 1 && dst->ne[3] == 1 && s[0]->ne[0] == dst->ne[0] && s[1]->ne[0] == dst->ne[0] &&
		       s[2]->ne[1] == 1 && s[2]->ne[2] == 1 && s[2]->ne[3] == 1;
	case ALICE_OP_TOKEN_MASK:
		return alice_bc_is_f32(dst) && alice_bc_is_i32(s[0]) && dst->nb[0] == 4 && dst->ne[2] == 1 &&
		       dst->ne[3] == 1 && s[0]->ne[0] == 1 + (dst->ne[0] + 31) / 32 && s[0]->ne[1] >= 1 &&
		       s[0]->nb[0] == 4 && s[0]->nb[1] == 4 * s[0]->ne[0];
	case ALICE_OP_LOGSUMEXP:
		return alice_bc_is_f32(s[0]) && alice_bc_is_i32(dst) && s[0]->nb[0] == 4 && s[0]->ne[2] == 1 &&
		       s[0]->ne[3] == 1 && dst->ne[0] == 4 && dst->ne[1] == s[0]->ne[1] && dst->nb[0] == 4 &&
		       dst->nb[1] == 16 &&
		       (!s[1] || (alice_bc_is_i32(s[1]) && s[1]->ne[0] == 2 && s[1]->ne[1] == s[0]->ne[1] &&
				  s[1]->nb[0] == 4 && s[1]->nb[1] == 8));
	default:
		return false;
	}
}

/* ---- messages ---- */

static inline enum alice_status alice_bc_vfail(char *err, size_t err_len, enum alice_status st, const char *fmt,
					       va_list ap)
{
	if (err && err_len)
		vsnprintf(err, err_len, fmt, ap);
	return st;
}

#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static inline enum alice_status alice_bc_fail(char *err, size_t err_len, enum alice_status st, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	alice_bc_vfail(err, err_len, st, fmt, ap);
	va_end(ap);
	return st;
}

/* err = "node I (OP): " + err, cut to err_len. */
static inline void alice_bc_prefix_node(char *err, size_t err_len, uint32_t i, uint32_t op)
{
	char pre[64];
	int np = snprintf(pre, sizeof(pre), "node %u (%s): ", i, alice_bc_op_name(op));
	if (np < 0 || !err_len)
		return;
	size_t room = err_len - 1, p = (size_t)np < room ? (size_t)np : room, len = strnlen(err, room);
	size_t keep = len < room - p ? len : room - p;
	memmove(err + p, err, keep);
	memcpy(err, pre, p);
	err[p + keep] = '\0';
}

/* The failure of alice_bc_types_ok: names every tensor's type and the params. */
static inline enum alice_status alice_bc_types_fail(const struct alice_node *n, const struct alice_tensor *dst,
						    const struct alice_tensor *const *s, char *err, size_t err_len)
{
	char types[160];
	int w = snprintf(types, sizeof(types), "dst %s", alice_type_name(dst->type));
	for (int i = 0; i < ALICE_MAX_SRC && w > 0 && (size_t)w < sizeof(types); i++)
		if (s[i])
			w += snprintf(types + w, sizeof(types) - (size_t)w, ", src%d %s", i, alice_type_name(s[i]->type));
	return alice_bc_fail(err, err_len, ALICE_ERR_UNSUPPORTED, "unsupported types or params (%s; ip[0]=%d ip[1]=%d)",
			     types, n->ip[0], n->ip[1]);
}

/* ---- a node's tensors ---- */

/* Resolves node n's dst and sources in g (src[i] NULL where n->src[i] < 0)
 * and checks the op is one of the contract's with the sources its rule
 * asks for. backend: its name, for the message of an unknown op. */
static inline enum alice_status alice_bc_node_tensors(const struct alice_graph *g, const struct alice_node *n,
						      const char *backend, const struct alice_tensor **dst,
						      const struct alice_tensor **src, char *err, size_t err_len)
{
	*dst = NULL;
	for (int i = 0; i < ALICE_MAX_SRC; i++)
		src[i] = NULL;
	struct alice_op_rule r = alice_bc_op_rule(n->op);
	if (n->op == ALICE_OP_NONE || !r.name)
		return alice_bc_fail(err, err_len, ALICE_ERR_UNSUPPORTED, "op %u is not supported by the %s backend", n->op,
				     backend);
	if (n->dst < 0 || (uint32_t)n->dst >= g->n_tensors)
		return alice_bc_fail(err, err_len, ALICE_ERR_INVALID, "dst tensor index %d out of range", n->dst);
	*dst = &g->tensors[n->dst];
	int nsrc = 0;
	for (int i = 0; i < ALICE_MAX_SRC; i++) {
		if (n->src[i] < 0)
			continue;
		if ((uint32_t)n->src[i] >= g->n_tensors)
			return alice_bc_fail(err, err_len, ALICE_ERR_INVALID, "src[%d] tensor index %d out of range", i,
					     n->src[i]);
		src[i] = &g->tensors[n->src[i]];
		nsrc = i + 1;
	}
	for (int i = 0; i < r.min_src; i++)
		if (!src[i])
			return alice_bc_fail(err, err_len, ALICE_ERR_INVALID, "src[%d] is required", i);
	if (nsrc > r.max_src)
		return alice_bc_fail(err, err_len, ALICE_ERR_INVALID, "too many sources (%d, at most %d)", nsrc, r.max_src);
	return ALICE_OK;
}

/* A node's operands as every backend's op functions take them; ctx is the
 * backend's own context (opaque here). */
struct alice_op_args {
	struct alice_backend_ctx *ctx;
	const struct alice_node *node;
	const struct alice_tensor *dst;
	const struct alice_tensor *src[ALICE_MAX_SRC];
};

/* Fill a for node n of g (alice_bc_node_tensors); `have`: whether the
 * backend implements n->op, for the message of one it does not. */
static inline enum alice_status alice_bc_node_args(struct alice_backend_ctx *ctx, const struct alice_graph *g,
						   const struct alice_node *n, const char *backend, int have,
						   struct alice_op_args *a, char *err, size_t err_len)
{
	a->ctx = ctx;
	a->node = n;
	enum alice_status st = alice_bc_node_tensors(g, n, backend, &a->dst, a->src, err, err_len);
	if (st == ALICE_OK && !have)
		return alice_bc_fail(err, err_len, ALICE_ERR_UNSUPPORTED, "op %u is not supported by the %s backend", n->op,
				     backend);
	return st;
}

/* ---- a tensor against its buffer ---- */

/* The largest ne and nb a backend takes per dim (its own limits). */
struct alice_bc_limits {
	int64_t ne_max, nb_max;
};

/* The ne/nb bounds a tensor may have at most under any backend: 2^40
 * elements and 2^44 bytes of stride per dim, 2^48 elements in all. */
#define ALICE_BC_NE_MAX ((int64_t)1 << 40)
#define ALICE_BC_NB_MAX ((int64_t)1 << 44)
#define ALICE_BC_NELEM_MAX ((int64_t)1 << 48)

/* *out += a * b; false (and *out untouched) if it does not fit 64 bits. */
static inline bool alice_bc_add_mul(uint64_t *out, uint64_t a, uint64_t b)
{
	if (b && a > (UINT64_MAX - *out) / b)
		return false;
	*out += a * b;
	return true;
}

/* Bytes from a tensor's first byte to one past its last: the last row's
 * bytes (block types: the packed row, nb[0] is the block size) plus
 * (ne[d] - 1) * nb[d] of every dim. False if the type is unknown, a dim is
 * < 1 or a stride < 0, or the sum does not fit 64 bits. */
static inline bool alice_bc_tensor_extent(const struct alice_tensor *t, uint64_t *extent)
{
	const struct alice_type_info *ti = alice_type_info(t->type);
	if (!ti || !ti->type_size || !ti->block_size)
		return false;
	uint64_t e = 0;
	for (int d = 0; d < ALICE_MAX_DIMS; d++)
		if (t->ne[d] < 1 || t->nb[d] < 0)
			return false;
	for (int d = 1; d < ALICE_MAX_DIMS; d++)
		if (!alice_bc_add_mul(&e, (uint64_t)(t->ne[d] - 1), (uint64_t)t->nb[d]))
			return false;
	if (ti->block_size > 1) {
		if (t->ne[0] % ti->block_size)
			return false;
		if (!alice_bc_add_mul(&e, (uint64_t)(t->ne[0] / ti->block_size), ti->type_size))
			return false;
	} else if (!alice_bc_add_mul(&e, (uint64_t)(t->ne[0] - 1), (uint64_t)t->nb[0]) ||
		   !alice_bc_add_mul(&e, 1, ti->type_size)) {
		return false;
	}
	*extent = e;
	return true;
}

/* The extent of a tensor already checked (UINT64_MAX if it is not valid). */
static inline uint64_t alice_bc_extent(const struct alice_tensor *t)
{
	uint64_t e;
	return alice_bc_tensor_extent(t, &e) ? e : UINT64_MAX;
}

/* tensor_pack's runs of 8 blocks (qk values, by bytes each): dense rows of
 * whole runs (so a view of whole rows stays valid); the caller checks the
 * data's alignment. */
static inline bool alice_bc_rows_of_runs(const struct alice_tensor *t, int64_t qk, int64_t by)
{
	const int64_t K = t->ne[0];
	if (K % (8 * qk) != 0 || t->nb[0] != by || t->nb[1] != K / qk * by)
		return false;
	for (int d = 2; d < 4; d++)
		if (t->nb[d] != t->nb[d - 1] * t->ne[d - 1])
			return false;
	return true;
}

/* Type, shape, strides and bounds of tensor idx of a graph: a supported
 * type, a buffer (buf_size: its bytes), 1 <= ne[d] <= lim->ne_max,
 * 0 <= nb[d] <= lim->nb_max, at most ALICE_BC_NELEM_MAX elements, block
 * rows packed (ne[0] a multiple of the block, nb[0] its bytes), and every
 * byte inside the buffer, with no sum wrapping around 64 bits. */
static inline enum alice_status alice_bc_check_tensor(const struct alice_tensor *t, int idx,
						      const struct alice_bc_limits *lim, uint64_t buf_size, char *err,
						      size_t err_len)
{
	const struct alice_type_info *ti = alice_type_info(t->type);
	if (!ti || !ti->supported)
		return alice_bc_fail(err, err_len, ALICE_ERR_UNSUPPORTED, "tensor %d: type %s (%u) is not supported", idx,
				     alice_type_name(t->type), t->type);
	if (!t->buf)
		return alice_bc_fail(err, err_len, ALICE_ERR_INVALID, "tensor %d has no buffer", idx);
	for (int d = 0; d < ALICE_MAX_DIMS; d++)
		if (t->ne[d] < 1 || t->ne[d] > lim->ne_max || t->nb[d] < 0 || t->nb[d] > lim->nb_max)
			return alice_bc_fail(err, err_len, ALICE_ERR_INVALID, "tensor %d: bad ne/nb in dim %d (%lld, %lld)",
					     idx, d, (long long)t->ne[d], (long long)t->nb[d]);
	uint64_t nel = 1;
	for (int d = 0; d < ALICE_MAX_DIMS; d++) {
		if ((uint64_t)t->ne[d] > (uint64_t)ALICE_BC_NELEM_MAX / nel)
			return alice_bc_fail(err, err_len, ALICE_ERR_INVALID, "tensor %d: too many elements", idx);
		nel *= (uint64_t)t->ne[d];
	}
	if (ti->block_size > 1 && (t->ne[0] % ti->block_size != 0 || t->nb[0] != (int64_t)ti->type_size))
		return alice_bc_fail(err, err_len, ALICE_ERR_INVALID,
				     "tensor %d: %s rows need ne[0] %% %u == 0 and nb[0] == %u (got %lld, %lld)", idx,
				     ti->name, ti->block_size, ti->type_size, (long long)t->ne[0], (long long)t->nb[0]);
	uint64_t extent;
	if (!alice_bc_tensor_extent(t, &extent))
		return alice_bc_fail(err, err_len, ALICE_ERR_INVALID, "tensor %d: extent overflows", idx);
	if (t->offset > buf_size || extent > buf_size - t->offset)
		return alice_bc_fail(err, err_len, ALICE_ERR_RANGE,
				     "tensor %d: [%llu, +%llu) is outside its buffer of %llu bytes", idx,
				     (unsigned long long)t->offset, (unsigned long long)extent,
				     (unsigned long long)buf_size);
	return ALICE_OK;
}

/* buffer_write / read / clear: [offset, offset + size) inside buf_size bytes. */
static inline enum alice_status alice_bc_check_range(bool have_buf, uint64_t buf_size, uint64_t offset,
						     uint64_t size, const char *what, char *err, size_t err_len)
{
	if (!have_buf)
		return alice_bc_fail(err, err_len, ALICE_ERR_INVALID, "%s: NULL buffer", what);
	if (offset > buf_size || size > buf_size - offset)
		return alice_bc_fail(err, err_len, ALICE_ERR_RANGE, "%s: [%llu, +%llu) is outside the buffer of %llu bytes",
				     what, (unsigned long long)offset, (unsigned long long)size,
				     (unsigned long long)buf_size);
	return ALICE_OK;
}

/* ---- KV_WRITE ---- */

/* The cell dim of a tensor for rows of e elements (backend.h, KV_WRITE):
 * the first dim of size > 1 whose lower dims hold exactly e elements (the
 * last dim if every later one is 1); -1 if none. */
static inline int alice_bc_cell_dim(const struct alice_tensor *t, int64_t e)
{
	int64_t p = 1;
	for (int d = 0; d < ALICE_MAX_DIMS; d++) {
		if (p == e) {
			while (d < ALICE_MAX_DIMS - 1 && t->ne[d] == 1)
				d++;
			return d;
		}
		p *= t->ne[d];
	}
	return -1;
}

static inline int64_t alice_bc_nelem(const struct alice_tensor *t)
{
	return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

/* How a KV_WRITE lays rows into cells: n cell indices, rows of e elements,
 * the cell dim ds of src0 and dd of dst. */
struct alice_bc_kv_layout {
	int64_t n, e;
	int ds, dd;
};

/* KV_WRITE's shape rules (backend.h): idx I32 [n], elements(s) = n * e,
 * s and d have a cell dim for rows of e, and d has no dims past its own. */
static inline enum alice_status alice_bc_kv_layout_of(const struct alice_tensor *s, const struct alice_tensor *idx,
						      const struct alice_tensor *d, struct alice_bc_kv_layout *out,
						      char *err, size_t err_len)
{
	out->n = out->e = 0;
	out->ds = out->dd = -1;
	int64_t n = idx->ne[0];
	if (idx->ne[1] * idx->ne[2] * idx->ne[3] != 1 || n < 1 || alice_bc_nelem(s) % n != 0)
		return alice_bc_fail(err, err_len, ALICE_ERR_INVALID, "%lld cell indices for %lld source elements",
				     (long long)alice_bc_nelem(idx), (long long)alice_bc_nelem(s));
	int64_t e = alice_bc_nelem(s) / n;
	int ds = alice_bc_cell_dim(s, e), dd = alice_bc_cell_dim(d, e);
	if (ds < 0 || dd < 0)
		return alice_bc_fail(err, err_len, ALICE_ERR_INVALID,
				     "rows of %lld elements do not line up with the dims of src0 / dst", (long long)e);
	int64_t ncell = 1;
	for (int k = dd; k < ALICE_MAX_DIMS; k++)
		ncell *= d->ne[k];
	if (ncell != d->ne[dd])
		return alice_bc_fail(err, err_len, ALICE_ERR_INVALID, "dst has dims past its cell dim %d", dd);
	out->n = n;
	out->e = e;
	out->ds = ds;
	out->dd = dd;
	return ALICE_OK;
}

/* ---- shape rules of backend.h (a backend adds the limits of its kernels) ---- */

/* MUL_MAT: w [K, N, b2, b3], x [K, M, B2, B3] with B2 % b2 == B3 % b3 == 0,
 * dst [N, M, B2, B3]. */
static inline enum alice_status alice_bc_mul_mat_shape(const struct alice_tensor *w, const struct alice_tensor *x,
						       const struct alice_tensor *d, char *err, size_t err_len)
{
	if (x->ne[0] == w->ne[0] && d->ne[0] == w->ne[1] && d->ne[1] == x->ne[1] && d->ne[2] == x->ne[2] &&
	    d->ne[3] == x->ne[3] && x->ne[2] % w->ne[2] == 0 && x->ne[3] % w->ne[3] == 0)
		return ALICE_OK;
	return alice_bc_fail(
		err, err_len, ALICE_ERR_INVALID,
		"shapes do not match: w [%lld,%lld,%lld,%lld] x [%lld,%lld,%lld,%lld] dst [%lld,%lld,%lld,%lld]",
		(long long)w->ne[0], (long long)w->ne[1], (long long)w->ne[2], (long long)w->ne[3], (long long)x->ne[0],
		(long long)x->ne[1], (long long)x->ne[2], (long long)x->ne[3], (long long)d->ne[0], (long long)d->ne[1],
		(long long)d->ne[2], (long long)d->ne[3]);
}

/* GET_ROWS: src [ne0, rows], ids [n, a, b], dst [ne0, n, a, b]. */
static inline enum alice_status alice_bc_get_rows_shape(const struct alice_tensor *s, const struct alice_tensor *ids,
							const struct alice_tensor *d, char *err, size_t err_len)
{
	if (s->ne[2] == 1 && s->ne[3] == 1 && ids->ne[3] == 1 && d->ne[0] == s->ne[0] && d->ne[1] == ids->ne[0] &&
	    d->ne[2] == ids->ne[1] && d->ne[3] == ids->ne[2])
		return ALICE_OK;
	return alice_bc_fail(
		err, err_len, ALICE_ERR_INVALID,
		"shapes do not match: src [%lld,%lld,%lld,%lld] ids [%lld,%lld,%lld] dst [%lld,%lld,%lld,%lld]",
		(long long)s->ne[0], (long long)s->ne[1], (long long)s->ne[2], (long long)s->ne[3], (long long)ids->ne[0],
		(long long)ids->ne[1], (long long)ids->ne[2], (long long)d->ne[0], (long long)d->ne[1], (long long)d->ne[2],
		(long long)d->ne[3]);
}

/* ATTENTION: q [d_k, n_head, T], K [d_k, n_head_kv, C], V [d_v, n_head_kv, C]
 * with n_head a multiple of n_head_kv, ranges [2, T], dst [d_v, n_head, T];
 * K and V rows contiguous in dim 0. */
static inline enum alice_status alice_bc_attention_shape(const struct alice_tensor *q, const struct alice_tensor *k,
							 const struct alice_tensor *v, const struct alice_tensor *r,
							 const struct alice_tensor *d, char *err, size_t err_len)
{
	int64_t dk = q->ne[0], nh = q->ne[1], nt = q->ne[2], nkv = k->ne[1], ncell = k->ne[2];
	if (q->ne[3] != 1 || k->ne[3] != 1 || v->ne[3] != 1 || k->ne[0] != dk || v->ne[1] != nkv || v->ne[2] != ncell ||
	    d->ne[0] != v->ne[0] || d->ne[1] != nh || d->ne[2] != nt || d->ne[3] != 1 || r->ne[0] != 2 || r->ne[1] != nt)
		return alice_bc_fail(err, err_len, ALICE_ERR_INVALID,
				     "shapes do not match: q [%lld,%lld,%lld] K [%lld,%lld,%lld] V [%lld,%lld,%lld] "
				     "ranges [%lld,%lld] dst [%lld,%lld,%lld]",
				     (long long)q->ne[0], (long long)q->ne[1], (long long)q->ne[2], (long long)k->ne[0],
				     (long long)k->ne[1], (long long)k->ne[2], (long long)v->ne[0], (long long)v->ne[1],
				     (long long)v->ne[2], (long long)r->ne[0], (long long)r->ne[1], (long long)d->ne[0],
				     (long long)d->ne[1], (long long)d->ne[2]);
	if (nkv < 1 || nh % nkv != 0)
		return alice_bc_fail(err, err_len, ALICE_ERR_INVALID, "n_head %lld is not a multiple of n_head_kv %lld",
				     (long long)nh, (long long)nkv);
	if (k->nb[0] != (k->type == ALICE_TYPE_F16 ? 2 : 4) || v->nb[0] != (v->type == ALICE_TYPE_F16 ? 2 : 4))
		return alice_bc_fail(err, err_len, ALICE_ERR_INVALID, "K and V rows must be contiguous in dim 0");
	return ALICE_OK;
}

/* ATTENTION's block table (1.4, optional src4; backend.h): checks it
 * against K (n_cells) and gives the block size (1 without a table: then
 * the identity) and the extent of the virtual cell space the ranges index
 * (n_cells without a table). */
struct alice_bc_attn_pages {
	int64_t bs;       /* cells per block, a power of two */
	int bs_log2;
	int64_t n_vcells; /* virtual cells: ranges must lie in [0, n_vcells) */
	int64_t n_blocks; /* physical blocks: n_cells / bs; table entries must be below */
};

static inline enum alice_status alice_bc_attention_pages(const struct alice_node *n, const struct alice_tensor *k,
							 const struct alice_tensor *tbl, struct alice_bc_attn_pages *pg,
							 char *err, size_t err_len)
{
	pg->bs = 1;
	pg->bs_log2 = 0;
	pg->n_vcells = k->ne[2];
	pg->n_blocks = k->ne[2];
	if (!tbl)
		return ALICE_OK;
	int64_t bs = n->ip[0];
	if (bs < 1 || bs > 65536 || (bs & (bs - 1)) != 0)
		return alice_bc_fail(err, err_len, ALICE_ERR_INVALID, "block size %lld is not a power of two in 1..65536",
				     (long long)bs);
	if (tbl->type != ALICE_TYPE_I32 || tbl->nb[0] != 4 || tbl->ne[1] != 1 || tbl->ne[2] != 1 || tbl->ne[3] != 1)
		return alice_bc_fail(err, err_len, ALICE_ERR_INVALID, "the block table must be contiguous I32 [n_blk]");
	if (k->ne[2] % bs != 0)
		return alice_bc_fail(err, err_len, ALICE_ERR_INVALID, "%lld cells are not whole blocks of %lld",
				     (long long)k->ne[2], (long long)bs);
	if (tbl->ne[0] > INT32_MAX / bs)
		return alice_bc_fail(err, err_len, ALICE_ERR_RANGE, "a block table of %lld blocks of %lld cells is too large",
				     (long long)tbl->ne[0], (long long)bs);
	pg->bs = bs;
	while (((int64_t)1 << pg->bs_log2) < bs)
		pg->bs_log2++;
	pg->n_vcells = tbl->ne[0] * bs;
	pg->n_blocks = k->ne[2] / bs;
	return ALICE_OK;
}

/* ---- a node, start to end ---- */

/* A backend's check of one tensor (alice_bc_check_tensor with its limits, plus its own). */
typedef enum alice_status (*alice_bc_tensor_check_fn)(struct alice_backend_ctx *ctx, const struct alice_tensor *t,
						      int idx);

/* After alice_bc_node_tensors: every tensor of node n through check (dst
 * first), then the type rules. */
static inline enum alice_status alice_bc_check_node(struct alice_backend_ctx *ctx, alice_bc_tensor_check_fn check,
						    const struct alice_node *n, const struct alice_tensor *dst,
						    const struct alice_tensor *const *src, char *err, size_t err_len)
{
	enum alice_status st = check(ctx, dst, n->dst);
	for (int i = 0; i < ALICE_MAX_SRC && st == ALICE_OK; i++)
		if (src[i])
			st = check(ctx, src[i], n->src[i]);
	if (st != ALICE_OK)
		return st;
	if (!alice_bc_types_ok(n, dst, src))
		return alice_bc_types_fail(n, dst, src, err, err_len);
	return ALICE_OK;
}

#endif
