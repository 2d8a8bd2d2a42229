/* ops_elementwise.c — ADD/MUL (src1 broadcasts where its ne is 1, or more
 * generally by index modulo its ne), SCALE, SOFTCAP, GLU, UNARY and COPY
 * (F32/F16/BF16 either side, any strides). Rows (dims 1..3) are split
 * across threads; every access goes through the byte strides.
 *
 * Two activations round as llama.cpp's CPU backend does (the parity
 * references were made with it; see tests/core/test_parity.c):
 *  - SiLU (unary and GLU): elements 0 .. (ne0 & ~15) - 1 of each row go
 *    through ggml's AVX-512 vector form x / (1 + v_expf(-x)), the rest of
 *    the row through libm expf, as its 16-lane loop and scalar tail do;
 *  - GELU_TANH (unary and GLU): ggml's F16 table: the input rounded to F16,
 *    the tanh formula evaluated on that, the result rounded to F16 (0 below
 *    -10, the identity above 10). */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "cpu_internal.h"
#include "vmath.h"

/* The dense loops below are written to be vectorized; -O2's "very cheap"
 * vectorizer model leaves them scalar (as ops_attention.c). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif

#if defined(__x86_64__) && defined(__GNUC__)
/* v_silu on 8 lanes (same bits); false where a lane needs ldexpf (then the
 * caller takes the scalar form) */
__attribute__((target("avx2,fma"))) static inline bool v_silu8(const float *xp, float *out)
{
	const __m256 x = _mm256_loadu_ps(xp);
	int slow;
	__m256 e = v_expf_y(_mm256_sub_ps(_mm256_setzero_ps(), x), &slow);
	if (slow)
		return false;
	_mm256_storeu_ps(out, _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e)));
	return true;
}
#endif

static float gelu_table[1 << 16];
static pthread_once_t gelu_once = PTHREAD_ONCE_INIT;

static void gelu_table_init(void)
{
	for (uint32_t h = 0; h < (1u << 16); h++) {
		float x = alice_fp16_to_fp32((uint16_t)h);
		float g = 0.5f * x * (1.0f + tanhf(0.79788456080286535587989211986876f * x * fmaf(0.044715f * x, x, 1.0f)));
		gelu_table[h] = alice_fp16_to_fp32(alice_fp32_to_fp16(g));
	}
}

static inline __attribute__((always_inline)) float gelu_f16(float x)
{
	if (x <= -10.0f)
		return 0.0f;
	if (x >= 10.0f)
		return x;
	return gelu_table[alice_fp32_to_fp16(x)];
}

/* vec: element i lies in the 16-lane part of its row (SiLU's vector form) */
static inline __attribute__((always_inline)) float act_apply(int act, float x, bool vec)
{
	switch (act) {
	case ALICE_ACT_SILU: return vec ? v_silu(x) : x / (1.0f + expf(-x));
	case ALICE_ACT_GELU_TANH: return gelu_f16(x);
	case ALICE_ACT_SIGMOID: return 1.0f / (1.0f + expf(-x));
	case ALICE_ACT_SOFTPLUS: return x > 20.0f ? x : logf(1.0f + expf(x)); /* as ggml (not log1pf) */
	case ALICE_ACT_EXP: return expf(x);
	case ALICE_ACT_NEG: return -x;
	case ALICE_ACT_RELU: return x > 0.0f ? x : 0.0f;
	case ALICE_ACT_GELU_ERF: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
	default: return x;
	}
}

static inline float ld_f(const uint8_t *p)
{
	float v;
	memcpy(&v, p, 4);
	return v;
}

static inline const uint8_t *at(const struct alice_tensor *t, int64_t i1, int64_t i2, int64_t i3)
{
	return tensor_data(t) + (i1 % t->ne[1]) * t->nb[1] + (i2 % t->ne[2]) * t->nb[2] +
	       (i3 % t->ne[3]) * t->nb[3];
}

struct ew_job {
	const struct alice_node *n;
	const struct alice_tensor *s0, *s1, *d;
};

/* fast: built with AVX2 + FMA (v_silu8) */
static inline __attribute__((always_inline)) void ew_rows(struct ew_job *j, int ith, int nth, bool fast)
{
	const struct alice_tensor *s0 = j->s0, *s1 = j->s1, *d = j->d;
	uint32_t op = j->n->op;
	int act = j->n->ip[0];
	float p0 = j->n->fp[0], p1 = j->n->fp[1];
	int64_t ne0 = d->ne[0], rows = d->ne[1] * d->ne[2] * d->ne[3], vend = ne0 & ~(int64_t)15;
	for (int64_t r = ith; r < rows; r += nth) {
		int64_t i1 = r % d->ne[1], i2 = (r / d->ne[1]) % d->ne[2], i3 = r / (d->ne[1] * d->ne[2]);
		const uint8_t *a = at(s0, i1, i2, i3);
		const uint8_t *b = s1 ? at(s1, i1, i2, i3) : NULL;
		uint8_t *o = (uint8_t *)at(d, i1, i2, i3);
		int64_t nb1 = s1 ? s1->ne[0] : 1;
		/* dense rows, src1 a whole row or one value: the same operations
		 * per element without the per-element switch, modulo and strides */
		if (s0->nb[0] == 4 && d->nb[0] == 4 && (!s1 || s1->nb[0] == 4) &&
		    (op == ALICE_OP_ADD || op == ALICE_OP_MUL || op == ALICE_OP_GLU) && (nb1 == ne0 || (nb1 == 1 && op != ALICE_OP_GLU))) {
			const float *af = (const float *)a, *bf = (const float *)b;
			float *of = (float *)o;
			if (op == ALICE_OP_GLU) {
				int64_t i = 0;
#if defined(__x86_64__) && defined(__GNUC__)
				if (fast && act == ALICE_ACT_SILU)
					for (float t[8]; i < vend; i += 8) {
						if (!v_silu8(af + i, t))
							for (int l = 0; l < 8; l++)
								t[l] = v_silu(af[i + l]);
						for (int l = 0; l < 8; l++)
							of[i + l] = t[l] * bf[i + l];
					}
#endif
				for (; i < ne0; i++)
					of[i] = act_apply(act, af[i], i < vend) * bf[i];
			}
			else if (op == ALICE_OP_ADD && nb1 == ne0)
				for (int64_t i = 0; i < ne0; i++)
					of[i] = af[i] + bf[i];
			else if (op == ALICE_OP_ADD)
				for (int64_t i = 0; i < ne0; i++)
					of[i] = af[i] + bf[0];
			else if (nb1 == ne0)
				for (int64_t i = 0; i < ne0; i++)
					of[i] = af[i] * bf[i];
			else
				for (int64_t i = 0; i < ne0; i++)
					of[i] = af[i] * bf[0];
			continue;
		}
		for (int64_t i = 0; i < ne0; i++) {
			float x = ld_f(a + i * s0->nb[0]), y;
			switch (op) {
			case ALICE_OP_ADD: y = x + ld_f(b + (i % nb1) * s1->nb[0]); break;
			case ALICE_OP_MUL: y = x * ld_f(b + (i % nb1) * s1->nb[0]); break;
			case ALICE_OP_SCALE: y = x * p0 + p1; break;
			case ALICE_OP_SOFTCAP: y = p0 * tanhf(x / p0); break;
			case ALICE_OP_GLU: y = act_apply(act, x, i < vend) * ld_f(b + i * s1->nb[0]); break;
			default: y = act_apply(act, x, i < vend); break;
			}
			memcpy(o + i * d->nb[0], &y, 4);
		}
	}
}

/* built twice: fmaf (v_expf) must be an instruction, not a libm call */
static void ew_run_generic(void *arg, int ith, int nth)
{
	ew_rows(arg, ith, nth, false);
}

#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx2,fma"))) static void ew_run_fma(void *arg, int ith, int nth)
{
	ew_rows(arg, ith, nth, true);
}
#endif

static cpu_task_fn ew_pick(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		return ew_run_fma;
#endif
	return ew_run_generic;
}

static enum alice_status ew(const struct alice_op_args *a)
{
	struct ew_job j = {.n = a->node, .s0 = a->src[0], .s1 = a->src[1], .d = a->dst};
	if (!tensor_same_shape(j.s0, j.d))
		return cpu_fail(a->ctx, ALICE_ERR_INVALID, "dst shape differs from src0");
	if ((a->node->op == ALICE_OP_GLU || a->node->op == ALICE_OP_UNARY) && a->node->ip[0] == ALICE_ACT_GELU_TANH)
		pthread_once(&gelu_once, gelu_table_init);
	cpu_pool_run_sized(a->ctx->pool, ew_pick(), &j, tensor_nelem(j.d));
	return ALICE_OK;
}

enum alice_status cpu_op_binary(const struct alice_op_args *a)
{
	const struct alice_tensor *s0 = a->src[0], *s1 = a->src[1];
	for (int d = 0; d < ALICE_MAX_DIMS; d++)
		if (s0->ne[d] % s1->ne[d] != 0)
			return cpu_fail(a->ctx, ALICE_ERR_INVALID,
					"src1 does not broadcast over src0 in dim %d (%lld vs %lld)", d,
					(long long)s1->ne[d], (long long)s0->ne[d]);
	return ew(a);
}

enum alice_status cpu_op_scale(const struct alice_op_args *a)
{
	return ew(a);
}

enum alice_status cpu_op_softcap(const struct alice_op_args *a)
{
	if (!(a->node->fp[0] != 0.0f) || !isfinite(a->node->fp[0]))
		return cpu_fail(a->ctx, ALICE_ERR_INVALID, "soft-cap %g must be finite and non-zero",
				a->node->fp[0]);
	return ew(a);
}

enum alice_status cpu_op_glu(const struct alice_op_args *a)
{
	if (!tensor_same_shape(a->src[0], a->src[1]))
		return cpu_fail(a->ctx, ALICE_ERR_INVALID, "GLU: src1 shape differs from src0");
	return ew(a);
}

enum alice_status cpu_op_unary(const struct alice_op_args *a)
{
	return ew(a);
}

/* ---- COPY ---- */

static inline float ld_any(uint32_t type, const uint8_t *p)
{
	if (type == ALICE_TYPE_F32)
		return ld_f(p);
	uint16_t h;
	memcpy(&h, p, 2);
	return type == ALICE_TYPE_F16 ? alice_fp16_to_fp32(h) : alice_bf16_to_fp32(h);
}

static inline void st_any(uint32_t type, uint8_t *p, float v)
{
	if (type == ALICE_TYPE_F32) {
		memcpy(p, &v, 4);
		return;
	}
	uint16_t h = type == ALICE_TYPE_F16 ? alice_fp32_to_fp16(v) : alice_fp32_to_bf16(v);
	memcpy(p, &h, 2);
}

static inline const uint8_t *at_flat(const struct alice_tensor *t, int64_t i)
{
	const uint8_t *p = tensor_data(t);
	for (int d = 0; d < ALICE_MAX_DIMS; d++) {
		p += (i % t->ne[d]) * t->nb[d];
		i /= t->ne[d];
	}
	return p;
}

struct cp_job {
	const struct alice_tensor *s, *d;
};

static void cp_run(void *arg, int ith, int nth)
{
	struct cp_job *j = arg;
	const struct alice_tensor *s = j->s, *d = j->d;
	int64_t ne0 = s->ne[0], rows = tensor_nelem(s) / ne0;
	bool same = tensor_same_shape(s, d);
	for (int64_t r = ith; r < rows; r += nth) {
		if (same) {
			int64_t i1 = r % s->ne[1], i2 = (r / s->ne[1]) % s->ne[2], i3 = r / (s->ne[1] * s->ne[2]);
			const uint8_t *a = at(s, i1, i2, i3);
			uint8_t *o = (uint8_t *)at(d, i1, i2, i3);
			if (s->type == d->type && s->nb[0] == d->nb[0] &&
			    s->nb[0] == (int64_t)alice_type_info(s->type)->type_size) {
				memcpy(o, a, (size_t)(ne0 * s->nb[0]));
				continue;
			}
			for (int64_t i = 0; i < ne0; i++)
				st_any(d->type, o + i * d->nb[0], ld_any(s->type, a + i * s->nb[0]));
		} else {
			for (int64_t i = r * ne0; i < (r + 1) * ne0; i++)
				st_any(d->type, (uint8_t *)at_flat(d, i), ld_any(s->type, at_flat(s, i)));
		}
	}
}

enum alice_status cpu_op_copy(const struct alice_op_args *a)
{
	if (tensor_nelem(a->src[0]) != tensor_nelem(a->dst))
		return cpu_fail(a->ctx, ALICE_ERR_INVALID, "COPY: %lld elements into %lld",
				(long long)tensor_nelem(a->src[0]), (long long)tensor_nelem(a->dst));
	struct cp_job j = {.s = a->src[0], .d = a->dst};
	cpu_pool_run_sized(a->ctx->pool, cp_run, &j, tensor_nelem(j.d));
	return ALICE_OK;
}
