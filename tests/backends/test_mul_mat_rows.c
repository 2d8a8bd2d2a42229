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
