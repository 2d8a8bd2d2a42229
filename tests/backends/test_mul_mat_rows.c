/* test_mul_mat_rows.c — MUL_MAT gives a row the same bits whether it is
 * computed alone (decode: the mat-vec kernels) or among many rows (prefill:
 * the GEMM kernels, 16 weight rows at a time, rows left over by the tiles).
 * Every row is marked as its own sequence (src2 = {1, 0}), so its result may
 * not depend on the launch at all (backend.h; core_test_batch_invariance
 * checks the same end to end). Run at each ISA level and under
 * ALICE_CPU_EXACT=1 (tests/backends/CMakeLists.txt). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "alice/backend.h"
#include "alice/backend_loader.h"
#include "alice/quant.h"

static struct alice_backend *be;
static struct alice_backend_ctx *ctx;

static void setup(void)
{
	struct alice_error err = {{0}};
	cr_assert_eq(alice_backend_open("cpu", NULL, &be, &err), ALICE_OK, "%s", err.msg);
	struct alice_backend_options opt = {.size = sizeof(opt), .device = -1, .n_threads = 2};
	cr_assert_eq(alice_backend_init(be, &opt, &ctx, &err), ALICE_OK, "%s", err.msg);
}

static void teardown(void)
{
	be->vt->free(ctx);
	alice_backend_close(be);
}

static float frand(unsigned *s)
{
	*s = *s * 1103515245u + 12345u;
	return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

/* out[M][N] = w x rows m0 .. m0 + M - 1 of x, every row its own sequence
 * (one_seq: all M rows one sequence) */
static void mul_mat_seq(uint32_t type, const uint8_t *w, int64_t K, int64_t N, const float *x, int64_t M, float *out,
			bool one_seq)
{
	const struct alice_backend_vtable *vt = be->vt;
	size_t rs = alice_row_size(type, K), wbytes = rs * (size_t)N;
	struct alice_buffer *wb = NULL, *ab = NULL;
	cr_assert_eq(vt->buffer_import(ctx, (void *)w, wbytes, &wb), ALICE_OK);
	uint64_t xb = (uint64_t)(K * M) * 4, db = (uint64_t)(N * M) * 4, gb = (uint64_t)(2 * M) * 4;
	cr_assert_eq(vt->buffer_alloc(ctx, xb + db + gb, ALICE_BUFFER_COMPUTE, &ab), ALICE_OK);
	cr_assert_eq(vt->buffer_write(ctx, ab, 0, x, xb), ALICE_OK);
	int32_t *place = malloc((size_t)gb);
	for (int64_t m = 0; m < M; m++) {
		place[2 * m] = one_seq ? (int32_t)M : 1;
		place[2 * m + 1] = one_seq ? (int32_t)m : 0;
	}
	cr_assert_eq(vt->buffer_write(ctx, ab, xb + db, place, gb), ALICE_OK);
	struct alice_tensor t[4];
	memset(t, 0, sizeof(t));
	t[0] = (struct alice_tensor){.type = ALICE_TYPE_F32, .ne = {N, M, 1, 1}, .nb = {4, 4 * N, 4 * N * M, 4 * N * M},
				     .buf = ab, .offset = xb};
	t[1] = (struct alice_tensor){.type = type, .ne = {K, N, 1, 1},
				     .nb = {(int64_t)alice_type_info(type)->type_size, (int64_t)rs, (int64_t)wbytes,
					    (int64_t)wbytes},
				     .buf = wb};
	t[2] = (struct alice_tensor){.type = ALICE_TYPE_F32, .ne = {K, M, 1, 1}, .nb = {4, 4 * K, 4 * K * M, 4 * K * M},
				     .buf = ab};
	t[3] = (struct alice_tensor){.type = ALICE_TYPE_I32, .ne = {2, M, 1, 1}, .nb = {4, 8, 8 * M, 8 * M},
				     .buf = ab, .offset = xb + db};
	struct alice_node node = {.op = ALICE_OP_MUL_MAT, .dst = 0, .src = {1, 2, 3, -1, -1, -1}};
	struct alice_graph g = {.n_tensors = 4, .n_nodes = 1, .tensors = t, .nodes = &node};
	cr_assert_eq(vt->graph_compute(ctx, &g), ALICE_OK, "%s", vt->last_error(ctx));
	cr_assert_eq(vt->buffer_read(ctx, ab, xb, out, db), ALICE_OK);
	vt->buffer_free(ctx, wb);
	vt->buffer_free(ctx, ab);
	free(place);
}

static void mul_mat(uint32_t type, const uint8_t *w, int64_t K, int64_t N, const float *x, int64_t M, float *out)
{
	mul_mat_seq(type, w, K, N, x, M, out, false);
}

static void check_type(uint32_t type, int64_t K, int64_t N, int64_t M)
{
	size_t rs = alice_row_size(type, K);
	uint8_t *w = malloc(rs * (size_t)N);
	float *row = malloc((size_t)K * 4), *x = malloc((size_t)(K * M) * 4);
	float *all = malloc((size_t)(N * M) * 4), *one = malloc((size_t)N * 4);
	unsigned s = 7u + type;
	for (int64_t n = 0; n < N; n++) {
		for (int64_t k = 0; k < K; k++)
			row[k] = frand(&s);
		cr_assert(alice_quantize(type, row, w + rs * (size_t)n, K), "quantize %s", alice_type_name(type));
	}
	for (int64_t i = 0; i < K * M; i++)
		x[i] = 3.0f * frand(&s);
	mul_mat(type, w, K, N, x, M, all);
	for (int64_t m = 0; m < M; m++) {
		mul_mat(type, w, K, N, x + m * K, 1, one);
		for (int64_t n = 0; n < N; n++)
			cr_expect(!memcmp(&one[n], &all[m * N + n], 4), "%s K=%lld N=%lld M=%lld: row %lld col %lld: %.9g alone, %.9g among %lld",
				  alice_type_name(type), (long long)K, (long long)N, (long long)M, (long long)m,
				  (long long)n, (double)one[n], (double)all[m * N + n], (long long)M);
	}
	free(w);
	free(row);
	free(x);
	free(all);
	free(one);
}

/* N = 40: two 16-row GEMM tiles and 8 rows left to the mat-vec; M = 13:
 * several row tiles and a remainder */
Test(mul_mat_rows, quantized_types_same_bits_alone_and_in_a_batch, .init = setup, .fini = teardown)
{
	const uint32_t types[] = {ALICE_TYPE_Q4_K, ALICE_TYPE_Q6_K, ALICE_TYPE_Q8_0, ALICE_TYPE_Q4_0,
				  ALICE_TYPE_Q5_K, ALICE_TYPE_Q3_K, ALICE_TYPE_Q2_K};
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		check_type(types[i], 512, 40, 13);
		check_type(types[i], 256, 16, 4);
	}
	check_type(ALICE_TYPE_Q4_0, 96, 40, 5); /* an odd number of blocks */
	check_type(ALICE_TYPE_Q8_0, 96, 40, 5);
	check_type(ALICE_TYPE_Q4_0, 224, 40, 5); /* groups of 4 blocks and 3 left over */
	check_type(ALICE_TYPE_Q8_0, 224, 40, 5);
}

Test(mul_mat_rows, float_types_same_bits_alone_and_in_a_batch, .init = setup, .fini = teardown)
{
	const uint32_t types[] = {ALICE_TYPE_F16, ALICE_TYPE_BF16, ALICE_TYPE_F32};
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		check_type(types[i], 512, 40, 13);
		check_type(types[i], 80, 36, 5); /* K % 64 tails */
	}
}

/* The AVX-512 horizontal sum of llama.cpp's tinyBLAS: halves i + 8, i + 4,
 * then (0 + 2) + (1 + 3). */
static float red16(const float *a)
{
	float t8[8], t4[4];
	for (int i = 0; i < 8; i++)
		t8[i] = a[i + 8] + a[i];
	for (int i = 0; i < 4; i++)
		t4[i] = t8[i + 4] + t8[i];
	return (t4[0] + t4[2]) + (t4[1] + t4[3]);
}

/* A sequence's rows in llama.cpp's gemm order (mm_order.h), whichever tile
 * computes them: F16 one fma chain per lane over 16-element steps; BF16
 * vdpbf16ps (lane j adds product 2j + 1, then 2j, of each 32-element step;
 * BF16 products are exact in float), both then red16. */
static float gemm_order_ref(uint32_t type, const uint8_t *wrow, const float *x, int64_t K)
{
	float acc[16] = {0};
	if (type == ALICE_TYPE_F16) {
		const uint16_t *h = (const uint16_t *)wrow;
		for (int64_t l = 0; l + 16 <= K; l += 16)
			for (int j = 0; j < 16; j++)
				acc[j] = fmaf(alice_fp16_to_fp32(h[l + j]), alice_fp16_to_fp32(alice_fp32_to_fp16(x[l + j])),
					      acc[j]);
		return red16(acc);
	}
	const uint16_t *b = (const uint16_t *)wrow;
	for (int64_t l = 0; l + 32 <= K; l += 32)
		for (int j = 0; j < 16; j++) {
			float xo = alice_bf16_to_fp32(alice_fp32_to_bf16(x[l + 2 * j + 1]));
			float xe = alice_bf16_to_fp32(alice_fp32_to_bf16(x[l + 2 * j]));
			float a = acc[j] + alice_bf16_to_fp32(b[l + 2 * j + 1]) * xo;
			acc[j] = a + alice_bf16_to_fp32(b[l + 2 * j]) * xe;
		}
	return red16(acc);
}

Test(mul_mat_rows, float_sequence_rows_in_the_gemm_order, .init = setup, .fini = teardown)
{
	const uint32_t types[] = {ALICE_TYPE_F16, ALICE_TYPE_BF16};
	/* K = 2080: more than one of the AVX2 tiles' K chunks, the last partial */
	const int64_t Ks[] = {512, 2080}, N = 40, Ms[] = {2, 5, 13, 16};
	for (size_t ti = 0; ti < 2; ti++)
		for (size_t ci = 0; ci < 8; ci++) {
			uint32_t type = types[ti];
			int64_t K = Ks[ci / 4], M = Ms[ci % 4];
			size_t rs = alice_row_size(type, K);
			uint8_t *w = malloc(rs * (size_t)N);
			float *row = malloc((size_t)K * 4), *x = malloc((size_t)(K * M) * 4), *out = malloc((size_t)(N * M) * 4);
			unsigned s = 11u + type;
			for (int64_t n = 0; n < N; n++) {
				for (int64_t k = 0; k < K; k++)
					row[k] = frand(&s);
				cr_assert(alice_quantize(type, row, w + rs * (size_t)n, K));
			}
			for (int64_t i = 0; i < K * M; i++)
				x[i] = 3.0f * frand(&s);
			mul_mat_seq(type, w, K, N, x, M, out, true);
			for (int64_t m = 0; m < M; m++)
				for (int64_t n = 0; n < N; n++) {
					float ref = gemm_order_ref(type, w + rs * (size_t)n, x + m * K, K);
					cr_expect(!memcmp(&ref, &out[m * N + n], 4),
						  "%s K=%lld M=%lld: row %lld col %lld: %.9g, gemm order %.9g", alice_type_name(type),
						  (long long)K, (long long)M, (long long)m, (long long)n,
						  (double)out[m * N + n], (double)ref);
				}
			free(w);
			free(row);
			free(x);
			free(out);
		}
}

/* ---- llama.cpp's orders for Q4_K and Q6_K (its x86 build: Q4_K weights
 * with N % 8 == 0 repacked, Q6_K through ggml's AVX2 vec_dot). Integer sums
 * are exact however they are formed; these specs fix which integers become
 * floats and in which order those are added. ---- */
struct q8k_ref {
	float d;
	const int8_t *q;
	int16_t bs[16];
};

static struct q8k_ref q8k_at(const uint8_t *a)
{
	struct q8k_ref r;
	memcpy(&r.d, a, 4);
	r.q = (const int8_t *)(a + 4);
	memcpy(r.bs, a + 4 + 256, 32);
	return r;
}

static float hsum8_ref(const float *a)
{
	float t[4];
	for (int i = 0; i < 4; i++)
		t[i] = a[i + 4] + a[i];
	return (t[0] + t[2]) + (t[1] + t[3]);
}

static void q4k_sm(const uint8_t *s12, int j, int *sc, int *mn)
{
	if (j < 4) {
		*sc = s12[j] & 63;
		*mn = s12[j + 4] & 63;
	} else {
		*sc = (s12[j + 4] & 0xF) | ((s12[j - 4] >> 6) << 4);
		*mn = (s12[j + 4] >> 4) | ((s12[j] >> 6) << 4);
	}
}

static int q4k_q(const uint8_t *blk, int e)
{
	uint8_t b = blk[16 + 32 * (e / 64) + e % 32];
	return (e % 64) < 32 ? b & 0xF : b >> 4;
}

enum q4k_order { Q4K_GEMV, Q4K_GEMM, Q4K_LANES };

/* GEMV: acc = fma(S_b, d_w d_a) per superblock, the mins M_b in a second
 * chain, acc - accm; GEMM (a sequence's rows in groups of 4): the same per
 * pair of sub-blocks; LANES (vec_dot, N % 8 != 0): lane l sums elements
 * 4l..4l+3 of every 32 times their scale, one fma per superblock, the mins
 * in 4 lanes, hsum8(acc) + ((m0 + m2) + (m1 + m3)). */
static float q4k_ref(enum q4k_order o, const uint8_t *w, const uint8_t *act, int64_t K)
{
	float acc = 0.0f, accm = 0.0f, lanes[8] = {0}, ml[4] = {0};
	for (int64_t i = 0; i < K / 256; i++) {
		const uint8_t *b = w + i * 144;
		struct q8k_ref a = q8k_at(act + i * 292);
		float dw = alice_fp16_to_fp32((uint16_t)(b[0] | b[1] << 8));
		float dm = alice_fp16_to_fp32((uint16_t)(b[2] | b[3] << 8));
		int32_t S = 0, Mb = 0, ln[8] = {0}, pm[4] = {0};
		for (int sub = 0; sub < 8; sub++) {
			int sc, mn, t = 0;
			q4k_sm(b + 4, sub, &sc, &mn);
			for (int e = 32 * sub; e < 32 * sub + 32; e++) {
				t += q4k_q(b, e) * a.q[e];
				ln[(e % 32) / 4] += sc * q4k_q(b, e) * a.q[e];
			}
			S += sc * t;
			Mb += mn * (a.bs[2 * sub] + a.bs[2 * sub + 1]);
			pm[sub / 2] += mn * (a.bs[2 * sub] + a.bs[2 * sub + 1]);
			if (o == Q4K_GEMM && sub % 2) {
				acc = fmaf((float)S, dw * a.d, acc);
				accm = fmaf((float)Mb, dm * a.d, accm);
				S = Mb = 0;
			}
		}
		if (o == Q4K_GEMV) {
			acc = fmaf((float)S, dw * a.d, acc);
			accm = fmaf((float)Mb, dm * a.d, accm);
		}
		for (int l = 0; l < 8; l++)
			lanes[l] = fmaf(a.d * dw, (float)ln[l], lanes[l]);
		for (int l = 0; l < 4; l++)
			ml[l] = fmaf(-a.d * dm, (float)pm[l], ml[l]);
	}
	return o == Q4K_LANES ? hsum8_ref(lanes) + ((ml[0] + ml[2]) + (ml[1] + ml[3])) : acc - accm;
}

/* ggml's AVX2 Q6_K vec_dot: lane l of a superblock = its 6-bit values
 * (unsigned, 0..63) times the activations over elements 4l..4l+3 of every
 * 32 with their 16-element scales, minus 32 (sc[2l] bsum[2l] + sc[2l+1]
 * bsum[2l+1]); acc_l = fma(d_a d_w, lane, acc_l); hsum8. */
static float q6k_ref(const uint8_t *w, const uint8_t *act, int64_t K)
{
	float acc[8] = {0};
	for (int64_t i = 0; i < K / 256; i++) {
		const uint8_t *b = w + i * 210, *ql = b, *qh = b + 128;
		const int8_t *sc = (const int8_t *)(b + 192);
		struct q8k_ref a = q8k_at(act + i * 292);
		int32_t L[8] = {0};
		for (int e = 0; e < 256; e++) {
			int h = e / 128, c = (e % 128) / 32, j = e % 32;
			uint8_t lo = ql[64 * h + 32 * (c % 2) + j];
			int q = (c < 2 ? lo & 0xF : lo >> 4) | (((qh[32 * h + j] >> (2 * c)) & 3) << 4);
			L[j % 32 / 4] += q * a.q[e] * sc[e / 16];
		}
		float d = a.d * alice_fp16_to_fp32((uint16_t)(b[208] | b[209] << 8));
		for (int l = 0; l < 8; l++) {
			L[l] -= 32 * (a.bs[2 * l] * sc[2 * l] + a.bs[2 * l + 1] * sc[2 * l + 1]);
			acc[l] = fmaf(d, (float)L[l], acc[l]);
		}
	}
	return hsum8_ref(acc);
}

static bool env_on(const char *v)
{
	const char *e = getenv(v);
	return e && *e && strcmp(e, "0") != 0;
}

/* Q4_K / Q6_K outputs against the specs: M = 9 rows of one sequence (two
 * groups of 4 and one left over) and the same rows each its own sequence.
 * Default kernels: Q4_K every row in the gemv order (Q6_K's default AVX2
 * order is its own). ALICE_CPU_EXACT=1: Q4_K grouped rows in the gemm
 * order, Q6_K in ggml's, and (at the AVX2 tables, named by ALICE_CPU_ISA)
 * Q4_K with N % 8 != 0 in vec_dot's lanes. */
Test(mul_mat_rows, q4_k_q6_k_rows_in_llama_cpp_orders, .init = setup, .fini = teardown)
{
#if !defined(__x86_64__)
	cr_skip_test("llama.cpp's x86 orders: x86-64 only");
#endif
	const char *isa = getenv("ALICE_CPU_ISA");
	if (isa && strcmp(isa, "scalar") == 0)
		cr_skip_test("the scalar table keeps its own orders");
	const bool exact = env_on("ALICE_CPU_EXACT"), avx2 = isa && strncmp(isa, "avx", 3) == 0 && strcmp(isa, "avx512");
	const int64_t K = 1024, M = 9;
	const struct {
		uint32_t type;
		int64_t N;
	} cases[] = {{ALICE_TYPE_Q4_K, 40}, {ALICE_TYPE_Q4_K, 36}, {ALICE_TYPE_Q6_K, 40}};
	int checked = 0;
	for (size_t ci = 0; ci < sizeof(cases) / sizeof(cases[0]); ci++) {
		uint32_t type = cases[ci].type;
		int64_t N = cases[ci].N;
		bool q6 = type == ALICE_TYPE_Q6_K, lanes = N % 8 != 0;
		if ((q6 && !exact) || (lanes && exact && !avx2))
			continue;
		size_t rs = alice_row_size(type, K), ra = alice_row_size(ALICE_TYPE_Q8_K, K);
		uint8_t *w = malloc(rs * (size_t)N), *aq = malloc(ra * (size_t)M);
		float *row = malloc((size_t)K * 4), *x = malloc((size_t)(K * M) * 4), *out = malloc((size_t)(N * M) * 4);
		unsigned s = 23u + (unsigned)ci;
		for (int64_t n = 0; n < N; n++) {
			for (int64_t k = 0; k < K; k++)
				row[k] = frand(&s);
			cr_assert(alice_quantize(type, row, w + rs * (size_t)n, K));
		}
		for (int64_t m = 0; m < M; m++) {
			for (int64_t k = 0; k < K; k++)
				x[m * K + k] = 3.0f * frand(&s);
			cr_assert(alice_quantize(ALICE_TYPE_Q8_K, x + m * K, aq + ra * (size_t)m, K));
		}
		for (int one = 0; one < 2; one++) {
			mul_mat_seq(type, w, K, N, x, M, out, one);
			for (int64_t m = 0; m < M; m++) {
				bool grouped = one && m < M - M % 4;
				enum q4k_order o = exact && lanes ? Q4K_LANES : exact && grouped ? Q4K_GEMM : Q4K_GEMV;
				for (int64_t n = 0; n < N; n++) {
					const uint8_t *wr = w + rs * (size_t)n, *ar = aq + ra * (size_t)m;
					float ref = q6 ? q6k_ref(wr, ar, K) : q4k_ref(o, wr, ar, K);
					cr_expect(!memcmp(&ref, &out[m * N + n], 4),
						  "%s N=%lld, %s: row %lld col %lld: %.9g, llama.cpp's order %.9g",
						  alice_type_name(type), (long long)N, one ? "one sequence" : "rows alone",
						  (long long)m, (long long)n, (double)out[m * N + n], (double)ref);
					checked++;
				}
			}
		}
		free(w);
		free(aq);
		free(row);
		free(x);
		free(out);
	}
	cr_expect_gt(checked, 0);
}
