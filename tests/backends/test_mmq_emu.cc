/* test_mmq_emu.cc — the CUDA prefill GEMM's kernels (backends/cuda/
 * mmq_kernels.cuh) run on the CPU, so CI checks them without a GPU: each
 * block is 128 threads with a barrier for __syncthreads, mma is emulated
 * per warp from its PTX fragment layout (m16n8k32 / m16n8k16 .s8: lane
 * 4 g + t holds A rows g and g + 8 at k 4t.., 16 + 4t..; B column g at the
 * same k; C rows g, g + 8 x columns 2t, 2t + 1), ldmatrix from its
 * lane layout, cp.async is a copy.
 * Every weight type, both tile widths, K in splits: each output
 * within 3e-6 of sum |w x| of the double-precision sum of dequantized
 * weights x activations rounded as the CPU rounds them (the bound of
 * test_mm_prefill.c, which checks the real GPU), and a column's bits the
 * same at M = 130 and M = 40. */
#include <criterion/criterion.h>

#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

extern "C" {
#include "alice/quant.h"
}

/* ---- what the CUDA toolkit would provide ---- */
#define __restrict__
#define __align__(n) __attribute__((aligned(n)))
struct uint2 { uint32_t x, y; };
struct uint4 { uint32_t x, y, z, w; };
static inline uint2 make_uint2(uint32_t a, uint32_t b) { return {a, b}; }
static inline uint4 make_uint4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) { return {a, b, c, d}; }
struct __half { uint16_t h; };
static inline float __half2float(__half h) { return alice_fp16_to_fp32(h.h); }
static inline float __int_as_float(int i)
{
	float f;
	memcpy(&f, &i, 4);
	return f;
}
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
/* per byte: a - b, signed, saturated */
static inline int __vsubss4(int a, int b)
{
	uint32_t r = 0;
	for (int i = 0; i < 4; i++) {
		int v = (int8_t)(a >> 8 * i) - (int8_t)(b >> 8 * i);
		v = v > 127 ? 127 : v < -128 ? -128 : v;
		r |= (uint32_t)(uint8_t)v << 8 * i;
	}
	return (int)r;
}
static inline uint32_t __byte_perm(uint32_t x, uint32_t y, uint32_t s)
{
	uint8_t in[8];
	for (int i = 0; i < 4; i++) {
		in[i] = (uint8_t)(x >> 8 * i);
		in[4 + i] = (uint8_t)(y >> 8 * i);
	}
	uint32_t r = 0;
	for (int n = 0; n < 4; n++)
		r |= (uint32_t)in[(s >> 4 * n) & 7] << 8 * n;
	return r;
}

/* ---- the block: 128 threads ---- */
struct dim3e { unsigned x = 0, y = 0, z = 0; };
static thread_local dim3e threadIdx, blockIdx;
static std::barrier<> *g_block;
static std::barrier<> *g_warp[4];
#define __syncthreads() g_block->arrive_and_wait()
static inline void pdl_wait(void) {}
static inline void pdl_trigger(void) {}
static inline uint32_t ld_b2(const uint8_t *p)
{
	uint16_t h[2];
	memcpy(h, p, 4);
	return (uint32_t)h[0] | ((uint32_t)h[1] << 16);
}
/* kquant.cuh's term, the same operations */
static inline float kq_acc(float acc, float d, float dmin, float d8, int sumi, int summ)
{
	float t = fmaf(d * d8, (float)sumi, -((dmin * d8) * (float)summ));
	return acc + t;
}
alignas(16) static uint8_t mq_emu_dyn[160 * 1024];
static inline void cp_async4(void *sp, const void *gp) { memcpy(sp, gp, 4); }
static inline void cp_async16(void *sp, const void *gp, bool valid)
{
	if (valid)
		memcpy(sp, gp, 16);
	else
		memset(sp, 0, 16);
}
static inline void cp_commit(void) {}
static inline void cp_wait1(void) {}

/* mma: every lane posts its fragments, then computes its own C entries */
struct warp_frags { uint32_t a[32][4], b[32][2]; };
static warp_frags g_frag[4];
static inline int sbyte(uint32_t w, int i) { return (int8_t)(w >> 8 * i); }
static void mma_emu(int *c, int kk)
{
	const int w = threadIdx.x >> 5, l = threadIdx.x & 31, g = l >> 2, t = l & 3;
	g_warp[w]->arrive_and_wait();
	for (int e = 0; e < 4; e++) {
		const int row = g + 8 * (e >> 1), col = 2 * t + (e & 1);
		int s = 0;
		for (int k = 0; k < kk; k++) {
			const int la = (row % 8) * 4 + (k % 16) / 4, ra = (row >= 8) + (k >= 16 ? 2 : 0);
			const int lb = col * 4 + (k % 16) / 4, rb = k >= 16;
			s += sbyte(g_frag[w].a[la][ra], k % 4) * sbyte(g_frag[w].b[lb][rb], k % 4);
		}
		c[e] += s;
	}
	g_warp[w]->arrive_and_wait();
}
static void mma_k32(int *c, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1)
{
	const int w = threadIdx.x >> 5, l = threadIdx.x & 31;
	g_frag[w].a[l][0] = a0, g_frag[w].a[l][1] = a1, g_frag[w].a[l][2] = a2, g_frag[w].a[l][3] = a3;
	g_frag[w].b[l][0] = b0, g_frag[w].b[l][1] = b1;
	mma_emu(c, 32);
}
static void mma_k16(int *c, uint32_t a0, uint32_t a1, uint32_t b0)
{
	const int w = threadIdx.x >> 5, l = threadIdx.x & 31;
	g_frag[w].a[l][0] = a0, g_frag[w].a[l][1] = a1, g_frag[w].b[l][0] = b0;
	mma_emu(c, 16);
}

/* ldmatrix: every lane posts its row address, then takes bytes 4t .. 4t + 3
 * of row g of each matrix (lanes 8 q .. 8 q + 7 address matrix q) */
static const int8_t *g_ldsm[4][32];
static void ldsm_emu(const void *p, uint32_t *r, int nm)
{
	const int w = threadIdx.x >> 5, l = threadIdx.x & 31;
	g_ldsm[w][l] = (const int8_t *)p;
	g_warp[w]->arrive_and_wait();
	for (int q = 0; q < nm; q++)
		memcpy(&r[q], g_ldsm[w][8 * q + (l >> 2)] + 4 * (l & 3), 4);
	g_warp[w]->arrive_and_wait();
}
static void ldsm_x4(const void *p, uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3)
{
	uint32_t r[4];
	ldsm_emu(p, r, 4);
	r0 = r[0], r1 = r[1], r2 = r[2], r3 = r[3];
}
static void ldsm_x2(const void *p, uint32_t &r0, uint32_t &r1)
{
	uint32_t r[2];
	ldsm_emu(p, r, 2);
	r0 = r[0], r1 = r[1];
}

#define MQ_HOST_EMU
#include "../../backends/cuda/mmq_kernels.cuh"

/* S splits of K as mmq.cu makes them (S == 1: none), then the reduce */
template <int T, int BN>
static void launch(const uint8_t *w, int64_t wnb1, int64_t N, const int8_t *xq, const float *xd, const float *xs,
		   int64_t K, int64_t M, float *dst, int64_t dcs, int64_t S = 1)
{
	static_assert(sizeof(mq_smem<T, 64>) <= sizeof(mq_emu_dyn), "dynamic shared memory");
	const unsigned gx = (unsigned)((M + BN - 1) / BN), gy = (unsigned)((N + MQ_BM - 1) / MQ_BM);
	const int64_t nch = (K + 255) / 256, cps = (nch + S - 1) / S;
	S = (nch + cps - 1) / cps;
	std::vector<float> part(S > 1 ? S * N * M : 0);
	float *out = S > 1 ? part.data() : dst;
	const int64_t ocs = S > 1 ? N : dcs, zs = S > 1 ? N * M : 0;
	for (unsigned bz = 0; bz < (unsigned)S; bz++)
		for (unsigned by = 0; by < gy; by++)
			for (unsigned bx = 0; bx < gx; bx++) {
				std::barrier<> bb(128), w0(32), w1(32), w2(32), w3(32);
				g_block = &bb;
				g_warp[0] = &w0, g_warp[1] = &w1, g_warp[2] = &w2, g_warp[3] = &w3;
				std::vector<std::thread> th;
				for (unsigned t = 0; t < 128; t++)
					th.emplace_back([=]() {
						threadIdx.x = t;
						blockIdx.x = bx;
						blockIdx.y = by;
						blockIdx.z = bz;
						k_mmq<T, BN>(w, wnb1, N, xq, xd, xs, K, M, out, ocs, cps, zs);
					});
				for (auto &x : th)
					x.join();
			}
	if (S == 1)
		return;
	for (unsigned b = 0; b < (unsigned)((N * M + 127) / 128); b++)
		for (unsigned t = 0; t < 128; t++) {
			threadIdx.x = t;
			blockIdx.x = b;
			k_mmq_reduce(part.data(), (int)S, N, M, dst, dcs);
		}
}

static uint64_t g_seed = 0x2545f4914f6cdd1dull;
static uint64_t rnd(void)
{
	g_seed ^= g_seed << 13;
	g_seed ^= g_seed >> 7;
	g_seed ^= g_seed << 17;
	return g_seed;
}
static float gauss(void)
{
	double a = 0;
	for (int i = 0; i < 4; i++)
		a += (double)(rnd() >> 11) / 9007199254740992.0;
	return (float)((a - 2.0) * 1.7);
}

/* activations as cu_xq_quant leaves them: int8 [M][K], d [M][K/32] (Q8_K:
 * the block's d for each of its 32s), Q8_1 sums s [M][K/32]; xr: the
 * rounded values */
static void quant_acts(bool kq, const std::vector<float> &x, int64_t K, int64_t M, std::vector<int8_t> &q,
		       std::vector<float> &d, std::vector<float> &s, std::vector<float> &xr)
{
	if (!kq) {
		for (int64_t b = 0; b < K / 32 * M; b++) {
			const float *v = &x[32 * b];
			float amax = 0.0f;
			for (int j = 0; j < 32; j++)
				amax = fmaxf(amax, fabsf(v[j]));
			float dd = amax / 127.0f, id = amax != 0.0f ? 127.0f / amax : 0.0f;
			float dh = alice_fp16_to_fp32(alice_fp32_to_fp16(dd));
			int sum = 0;
			for (int j = 0; j < 32; j++) {
				int qi = (int)nearbyintf(v[j] * id);
				sum += qi;
				q[32 * b + j] = (int8_t)qi;
				xr[32 * b + j] = dh * (float)qi;
			}
			d[b] = dh;
			s[b] = alice_fp16_to_fp32(alice_fp32_to_fp16(dd * (float)sum));
		}
		return;
	}
	std::vector<uint8_t> blk(alice_row_size(ALICE_TYPE_Q8_K, K));
	for (int64_t m = 0; m < M; m++) {
		cr_assert(alice_quantize(ALICE_TYPE_Q8_K, &x[m * K], blk.data(), K));
		alice_dequantize(ALICE_TYPE_Q8_K, blk.data(), &xr[m * K], K);
		for (int64_t b = 0; b < K / 256; b++) { /* Q8_K: float d, int8 qs[256], bsums */
			float db;
			memcpy(&db, blk.data() + b * 292, 4);
			for (int j = 0; j < 8; j++)
				d[m * (K / 32) + b * 8 + j] = db;
			memcpy(&q[m * K + b * 256], blk.data() + b * 292 + 4, 256);
		}
	}
}

template <int T>
static int check(int64_t K, int64_t N)
{
	constexpr bool q81 = T == ALICE_TYPE_Q4_1 || T == ALICE_TYPE_Q5_1;
	const bool kq = mq_type<T>::fam != MQ_B32;
	const int64_t M = 130, M2 = 40;
	const size_t rs = alice_row_size(T, K);
	uint8_t *w = (uint8_t *)aligned_alloc(256, (rs * N + 255) / 256 * 256);
	std::vector<float> wd(K * N), x(K * M), xr(K * M), d(K / 32 * M), s(K / 32 * M);
	std::vector<int8_t> q(K * M);
	for (int64_t n = 0; n < N; n++) {
		uint8_t *row = w + n * rs;
		for (int64_t k = 0; k < K; k++)
			wd[n * K + k] = gauss();
		if (alice_type_info(T)->can_quantize) {
			cr_assert(alice_quantize(T, &wd[n * K], row, K));
		} else { /* IQ4_XS / IQ4_NL: random blocks with a sane fp16 d */
			for (size_t i = 0; i < rs; i++)
				row[i] = (uint8_t)rnd();
			for (size_t b = 0; b < rs; b += alice_type_info(T)->type_size) {
				uint16_t h = alice_fp32_to_fp16(0.002f * (float)(1 + (rnd() & 7)));
				memcpy(row + b, &h, 2);
			}
		}
		alice_dequantize(T, row, &wd[n * K], K);
	}
	for (auto &v : x)
		v = gauss();
	quant_acts(kq, x, K, M, q, d, s, xr);
	int bad = 0;
	/* variants: 32- / 64-column tiles, and K in 2 splits (64-column) */
	for (int variant = 0; variant < 3; variant++) {
		std::vector<float> full(N * M), part(N * M);
		auto go = [&](int64_t mm, float *dst) {
			if (variant)
				launch<T, 64>(w, rs, N, q.data(), d.data(), s.data(), K, mm, dst, N, variant == 2 ? 2 : 1);
			else
				launch<T, 32>(w, rs, N, q.data(), d.data(), s.data(), K, mm, dst, N);
		};
		go(M, full.data());
		go(M2, part.data());
		double worst = 0.0;
		int64_t over = 0, diff = 0;
		for (int64_t m = 0; m < M; m++)
			for (int64_t n = 0; n < N; n++) {
				double ref = 0.0, mag = 0.0;
				for (int64_t k = 0; k < K; k++) {
					double t = (double)wd[n * K + k] * xr[m * K + k];
					ref += t;
					mag += fabs(t);
				}
				for (int64_t b = 0; q81 && b < K / 32; b++) { /* m_w s_x, not m_w sum x */
					uint16_t h;
					memcpy(&h, w + n * rs + b * alice_type_info(T)->type_size + 2, 2);
					double sx = 0.0;
					for (int64_t k = 32 * b; k < 32 * b + 32; k++)
						sx += xr[m * K + k];
					ref += alice_fp16_to_fp32(h) * (s[m * (K / 32) + b] - sx);
				}
				double e = fabs(full[m * N + n] - ref) / (mag > 0 ? mag : 1.0);
				worst = e > worst ? e : worst;
				over += !(e <= 3e-6);
			}
		for (int64_t i = 0; i < N * M2; i++)
			diff += memcmp(&full[i], &part[i], 4) != 0;
		if (over || diff) {
			bad++;
			cr_log_error("%s K=%lld N=%lld, %d-column tiles%s: %lld outputs off (worst %.3g of sum |w x|), "
				     "%lld differ between M = %lld and %lld",
				     alice_type_name(T), (long long)K, (long long)N, variant ? 64 : 32,
				     variant == 2 ? ", K in 2 splits" : "", (long long)over, worst, (long long)diff,
				     (long long)M, (long long)M2);
		}
	}
	free(w);
	return bad;
}

Test(mmq_emu, every_type_every_variant, .timeout = 600)
{
	int bad = 0;
	/* K: whole chunks, several chunks, and (32-blocks) a partial last
	 * chunk; N: a partial row tile */
	bad += check<ALICE_TYPE_Q4_K>(512, 100);
	bad += check<ALICE_TYPE_Q4_K>(768, 64); /* 3 chunks: splits of 2 and 1 */
	bad += check<ALICE_TYPE_Q5_K>(256, 70);
	bad += check<ALICE_TYPE_Q6_K>(512, 70);
	bad += check<ALICE_TYPE_Q3_K>(256, 64);
	bad += check<ALICE_TYPE_Q2_K>(256, 64);
	bad += check<ALICE_TYPE_IQ4_XS>(256, 64);
	bad += check<ALICE_TYPE_Q8_0>(288, 100);
	bad += check<ALICE_TYPE_Q4_0>(96, 64);
	bad += check<ALICE_TYPE_Q4_1>(256, 64);
	bad += check<ALICE_TYPE_Q5_0>(288, 64);
	bad += check<ALICE_TYPE_Q5_1>(256, 64);
	bad += check<ALICE_TYPE_IQ4_NL>(256, 64);
	cr_assert_eq(bad, 0, "%d type/variant runs of the emulated prefill GEMM are wrong", bad);
}
