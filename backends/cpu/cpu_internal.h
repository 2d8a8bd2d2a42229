/* cpu_internal.h — shared between the CPU backend's files (nothing here is
 * exported from the .so): the context, buffers, the thread pool, the op
 * functions and the SIMD kernel table chosen at run time. */
#ifndef ALICE_CPU_INTERNAL_H
#define ALICE_CPU_INTERNAL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alice/backend.h"
#include "alice/backend_check.h"
#include "alice/quant.h"

#define CPU_HIDDEN __attribute__((visibility("hidden")))
#define CPU_MAX_THREADS 256
#define CPU_OP_COUNT ALICE_OP_COUNT_V1_6 /* ops this backend knows (backend.h 1.6) */
#define QK8 32
#define QKK 256

/* ---- thread pool (threadpool.c) ---- */
struct cpu_pool;
typedef void (*cpu_task_fn)(void *arg, int ith, int nth);
struct cpu_pool *cpu_pool_create(int n_threads);
void cpu_pool_free(struct cpu_pool *p);
int cpu_pool_size(const struct cpu_pool *p);
/* The step is over: workers sleep now rather than spin for the next task
 * (the next cpu_pool_run wakes them). */
void cpu_pool_idle(struct cpu_pool *p);
/* Runs fn(arg, ith, nth) on every thread (the caller is thread 0); returns
 * when all are done. */
void cpu_pool_run(struct cpu_pool *p, cpu_task_fn fn, void *arg);
/* For tasks whose threads take all their work from a shared counter (so any
 * subset of threads finishes it): a thread that has not started by the time
 * the caller is done skips the job, so a descheduled worker (oversubscribed
 * machine) never holds up the step. */
void cpu_pool_run_dynamic(struct cpu_pool *p, cpu_task_fn fn, void *arg);
/* The same, but on the calling thread alone when `work` (elements touched)
 * is too small to pay for waking the others (most decode-step ops). */
void cpu_pool_run_sized(struct cpu_pool *p, cpu_task_fn fn, void *arg, int64_t work);
void cpu_pool_run_dynamic_sized(struct cpu_pool *p, cpu_task_fn fn, void *arg, int64_t work);
/* Physical cores (unique core ids), at least 1. */
int cpu_physical_cores(void);

/* ---- buffers and context (cpu.c) ---- */
struct alice_buffer {
	uint8_t *data;
	uint64_t size;
	bool owned;
};

struct alice_backend_ctx {
	struct cpu_pool *pool;
	int n_threads;
	char err[512];
	/* scratch shared by one op's threads: converted activations etc. */
	uint8_t *wdata;
	size_t wsize;
	/* per-thread scratch (dequantized rows, attention accumulators) */
	uint8_t *tdata[CPU_MAX_THREADS];
	size_t tsize;
	/* ALICE_CPU_PROFILE=1: CPU seconds of the calling thread and call
	 * counts per op (and per weight type for MUL_MAT), logged at free */
	bool profile;
	double prof_s[CPU_OP_COUNT + ALICE_TYPE_COUNT];
	long prof_n[CPU_OP_COUNT + ALICE_TYPE_COUNT];
};

enum alice_status cpu_fail(struct alice_backend_ctx *ctx, enum alice_status st, const char *fmt, ...)
	__attribute__((format(printf, 3, 4))) CPU_HIDDEN;
/* Make ctx->wdata at least `bytes` and every ctx->tdata[i] at least tbytes. */
enum alice_status cpu_scratch(struct alice_backend_ctx *ctx, size_t bytes, size_t tbytes) CPU_HIDDEN;

static inline uint8_t *tensor_data(const struct alice_tensor *t)
{
	return t->buf->data + t->offset;
}

static inline int64_t tensor_nelem(const struct alice_tensor *t)
{
	return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

static inline bool tensor_same_shape(const struct alice_tensor *a, const struct alice_tensor *b)
{
	return a->ne[0] == b->ne[0] && a->ne[1] == b->ne[1] && a->ne[2] == b->ne[2] &&
	       a->ne[3] == b->ne[3];
}

/* Next chunk for dynamic scheduling; returns false when none is left. */
static inline bool chunk_next(atomic_long *ctr, long total, long step, long *b, long *e)
{
	long s = atomic_fetch_add_explicit(ctr, step, memory_order_relaxed);
	if (s >= total)
		return false;
	*b = s;
	*e = s + step < total ? s + step : total;
	return true;
}

/* ---- ops: each checks its node and returns a status (cpu_fail on error) ---- */

typedef enum alice_status (*cpu_op_fn)(const struct alice_op_args *a);
enum alice_status cpu_op_mul_mat(const struct alice_op_args *a) CPU_HIDDEN;
enum alice_status cpu_op_get_rows(const struct alice_op_args *a) CPU_HIDDEN;
enum alice_status cpu_op_rms_norm(const struct alice_op_args *a) CPU_HIDDEN;
enum alice_status cpu_op_l2_norm(const struct alice_op_args *a) CPU_HIDDEN;
enum alice_status cpu_op_layer_norm(const struct alice_op_args *a) CPU_HIDDEN;
enum alice_status cpu_op_rope(const struct alice_op_args *a) CPU_HIDDEN;
enum alice_status cpu_op_attention(const struct alice_op_args *a) CPU_HIDDEN;
enum alice_status cpu_op_kv_write(const struct alice_op_args *a) CPU_HIDDEN;
enum alice_status cpu_op_binary(const struct alice_op_args *a) CPU_HIDDEN; /* ADD, MUL */
enum alice_status cpu_op_scale(const struct alice_op_args *a) CPU_HIDDEN;
enum alice_status cpu_op_softcap(const struct alice_op_args *a) CPU_HIDDEN;
enum alice_status cpu_op_glu(const struct alice_op_args *a) CPU_HIDDEN;
enum alice_status cpu_op_unary(const struct alice_op_args *a) CPU_HIDDEN;
enum alice_status cpu_op_copy(const struct alice_op_args *a) CPU_HIDDEN;
enum alice_status cpu_op_ssm_conv(const struct alice_op_args *a) CPU_HIDDEN;        /* ops_ssm.c */
enum alice_status cpu_op_gated_delta_net(const struct alice_op_args *a) CPU_HIDDEN;
enum alice_status cpu_op_topk(const struct alice_op_args *a) CPU_HIDDEN;              /* ops_sample.c */
enum alice_status cpu_op_sample_temp(const struct alice_op_args *a) CPU_HIDDEN;
enum alice_status cpu_op_logit_adjust(const struct alice_op_args *a) CPU_HIDDEN;
enum alice_status cpu_op_feed(const struct alice_op_args *a) CPU_HIDDEN;
enum alice_status cpu_op_logsumexp(const struct alice_op_args *a) CPU_HIDDEN;
enum alice_status cpu_op_token_mask(const struct alice_op_args *a) CPU_HIDDEN;


/* ---- activation formats for the dot products (llama.cpp-compatible
 * rounding: activations are rounded like the weight type's partner) ---- */
struct act_q8_0 {
	float d;     /* fp16-rounded scale */
	float s;     /* fp16-rounded d * sum(q) (for the Q4_1/Q5_1 min term) */
	int8_t q[QK8];
};

struct act_q8_k {
	float d;
	int8_t q[QKK];
	int16_t bsums[QKK / 16];
};

/* Activation rows packed for the GEMM kernels, per group of 16 rows and
 * block; rows past the end of the op are zero where a kernel reads them
 * (cpu_op_mul_mat).
 * Q8_0 (VNNI, vec_avx512.c): pair p = rows 2p, 2p+1: q[p] = both rows' 32
 * values (signed), c[p] = -128 x the sum of each 4 of them (the term that
 * weights read as w + 128 add), d2[p] = row 2p's d x 8, row 2p+1's d x 8.
 * Q8_K (AMX, vec_amx.c): q[kk * 64 + 4 * m + t] = row m's q[4 * kk + t]. */
struct apack_q8_0 {
	int8_t q[8][64];
	int32_t c[8][16];
	float d2[8][16];
};

/* Q8_K rows for the Q6_K VNNI GEMM (vec_avx512.c, cpu_kernels.q6_k_pairs):
 * pair p = rows 2p, 2p+1: q[p][g] = both rows' 32 values of group g,
 * bs[p] = both rows' 16 bsums, d2[p] = row 2p's d x 8, row 2p+1's d x 8. */
struct apack_q6p {
	int8_t q[8][8][64];
	int16_t bs[8][32];
	float d2[8][16];
};

struct apack_q8_k {
	int8_t q[64 * 64];
	float d[16];
	/* [p][2m + i] = row m's sum of q over the 32-element sub-block 2p + i */
	int16_t bsp[4][32];
};

enum act_fmt {
	ACT_F32 = 0,
	ACT_F16,
	ACT_BF16,
	ACT_Q8_0,
	ACT_Q8_K,
};

/* ---- kernels (vec_*.c), one table per ISA ---- */
typedef void (*vec_dot_fn)(int64_t k, const void *w, const void *act, float *out);
/* The same for 4 activation rows `stride` bytes apart (prefill): the weight
 * row is decoded once per block for all four. */
typedef void (*vec_dot4_fn)(int64_t k, const void *w, const void *act, size_t stride, float *out);
/* 4 weight rows `wstride` bytes apart with one activation row (decode):
 * one pass of activation loads serves four independent accumulators. */
typedef void (*vec_dotr4_fn)(int64_t k, const void *w, size_t wstride, const void *act, float *out);
/* n weight rows `wstride` apart with one activation row (decode), row r's
 * result at out + r * os bytes: the activation side laid out once for the
 * whole run (optional, preferred over dotr4; same arithmetic as dot). */
typedef void (*vec_dotn_fn)(int64_t k, const void *w, size_t wstride, int64_t n, const void *act, uint8_t *out,
			    size_t os);
/* 16 weight rows `wstride` apart x M packed activation rows (struct apack_*,
 * ceil(M/16) groups): out + n * os_n + m * os_m (bytes) for m < M. Same
 * arithmetic as the type's dot/dotx (bit for bit); grp[m] != 0 (grp may be
 * NULL) marks rows in llama.cpp's grouped regime (cpu_row_grouped). scratch:
 * cpu_gemm_scratch(k). */
typedef void (*vec_gemm_fn)(int64_t k, const void *w, size_t wstride, const void *apack, int64_t M, uint8_t *out,
			    size_t os_n, size_t os_m, void *scratch, const uint8_t *grp);
/* llama.cpp's repacked Q4_K/Q2_K kernels take a sequence's rows in groups of
 * 4 (its gemm order) and the last count % 4 rows with its gemv order. */
static inline bool cpu_row_grouped(int32_t count, int32_t index)
{
	return count >= 4 && index < count - count % 4;
}

/* Q4_0's default order (vec_kgemm512.c, vec_kgemm2.c): block b's term goes
 * to chain b % 4; the row's result is (c0 + c1) + (c2 + c3). */
static inline float q40_chains(const float *c)
{
	return (c[0] + c[1]) + (c[2] + c[3]);
}

static inline size_t cpu_gemm_scratch(int64_t k)
{
	return (size_t)k * 32 + (size_t)(k / QKK) * (16 + 4 + 2) * 64 + (size_t)(k / QK8) * 64 + 20480;
}

/* One weight row x one activation row, told the row's place: the rows its
 * sequence has in the op and the row's index among them (MUL_MAT src2),
 * and the weight's row count nw: for types whose llama.cpp order depends on
 * them (vec_llorder.c). */
typedef void (*vec_dotx_fn)(int64_t k, const void *w, const void *act, int32_t count, int32_t index, int64_t nw,
			    float *out);

struct cpu_kernels {
	const char *isa;
	float (*dot_f32)(int64_t n, const float *a, const float *b);
	/* f16 x f32 and acc += s * f16 row (attention with an F16 cache) */
	float (*dot_f16_f32)(int64_t n, const uint16_t *a, const float *b);
	void (*axpy_f16)(int64_t n, float s, const uint16_t *x, float *acc);
	void (*axpy_f32)(int64_t n, float s, const float *x, float *acc);
	void (*scale_f32)(int64_t n, float s, float *x);
	void (*f16_to_f32)(int64_t n, const uint16_t *src, float *dst);
	void (*f32_to_f16)(int64_t n, const float *src, uint16_t *dst);
	/* x rounded to BF16 (alice_fp32_to_bf16): as floats into y and/or as
	 * BF16 into yb (either may be NULL) */
	void (*round_bf16)(int64_t n, const float *x, float *y, uint16_t *yb);
	void (*quant_q8_0)(int64_t n, const float *x, struct act_q8_0 *y);
	void (*quant_q8_k)(int64_t n, const float *x, struct act_q8_k *y);
	/* Per weight type: the dot of one weight row with one activation row in
	 * format act_of[type]; NULL = generic path (dequantize + dot_f32). */
	vec_dot_fn dot[ALICE_TYPE_COUNT];
	vec_dot4_fn dot4[ALICE_TYPE_COUNT]; /* optional, same format as dot */
	vec_dotr4_fn dotr4[ALICE_TYPE_COUNT]; /* optional, same format as dot */
	vec_dotn_fn dotn[ALICE_TYPE_COUNT];   /* optional, same format as dot */
	int64_t dotr4_max[ALICE_TYPE_COUNT];  /* weight bytes up to which dotr4 is used (0: any) */
	vec_gemm_fn gemm[ALICE_TYPE_COUNT];   /* optional (prefill), packed activations */
	bool q6_k_pairs;                      /* gemm[Q6_K] reads struct apack_q6p */
	/* row `lane` of a 16-row group into gemm[Q8_0]'s struct apack_q8_0 */
	void (*pack_q8_0)(const struct act_q8_0 *a, int64_t nb, struct apack_q8_0 *g, int lane);
	/* gemm[type] reads the converted activation rows in place (one after
	 * another, act_of[type] format) instead of a struct apack_* */
	bool gemm_rows[ALICE_TYPE_COUNT];
	vec_dotx_fn dotx[ALICE_TYPE_COUNT];   /* optional: preferred over dot (vec_llorder.c) */
};

extern const struct cpu_kernels *cpu_k CPU_HIDDEN; /* chosen at init */
void cpu_kernels_scalar(struct cpu_kernels *k) CPU_HIDDEN;
/* Fill in the ISA's kernels over what k has; call only when the CPU has the
 * ISA (vec_scalar.c checks cpuid first: these files are built for it). */
#if defined(__x86_64__) || defined(__i386__)
void cpu_kernels_avx2_dots(struct cpu_kernels *k) CPU_HIDDEN;
/* vnni: the CPU has AVX-VNNI (VEX vpdpbusd on ymm) */
void cpu_kernels_avx2(struct cpu_kernels *k, bool vnni) CPU_HIDDEN;
void cpu_kernels_avx512(struct cpu_kernels *k) CPU_HIDDEN;
void cpu_kernels_amx(struct cpu_kernels *k) CPU_HIDDEN; /* avx512 + AMX-INT8 */
/* AVX-512 VNNI K-quant GEMMs (vec_kgemm512.c); exact: ALICE_CPU_EXACT */
void cpu_kernels_kgemm512(struct cpu_kernels *k, bool exact) CPU_HIDDEN;
/* the same on AVX2 (vec_kgemm2.c): Q4_K mat-vec and GEMM in that order */
void cpu_kernels_kgemm2(struct cpu_kernels *k, bool exact, bool vnni) CPU_HIDDEN;
/* one Q4_K row in llama.cpp's repacked gemv order (AVX2; vec_llorder.c's
 * exact Q4_K takes it and the next for N % 8 == 0) */
void cpu_q4k_gemv_avx2(int64_t k, const void *w, const void *act, float *out) CPU_HIDDEN;
/* the same row in llama.cpp's repacked gemm order (a row of a group of 4) */
void cpu_q4k_gemm_row_avx2(int64_t k, const void *w, const void *act, float *out) CPU_HIDDEN;
#endif
#if defined(__aarch64__)
void cpu_kernels_neon(struct cpu_kernels *k) CPU_HIDDEN;
#endif
void cpu_kernels_select(void) CPU_HIDDEN;
/* "avx2 avx512f ... amx_int8": the SIMD features this CPU and OS offer */
void cpu_flags_string(char *out, size_t len) CPU_HIDDEN;
/* llama.cpp-order dots for Q2_K, Q3_K, Q5_K, IQ4_XS, Q4_0 (vec_llorder.c):
 * set their dotx/dot, clear their dot4/dotr4/gemm; avx2: AVX2 kernels. */
void cpu_kernels_llorder(struct cpu_kernels *k, bool avx2) CPU_HIDDEN;

/* The activation format the weight type pairs with (llama.cpp's vec_dot_type). */
enum act_fmt cpu_act_of(uint32_t type) CPU_HIDDEN;

#endif
