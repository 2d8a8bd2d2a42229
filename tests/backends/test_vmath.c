/* test_vmath.c — the vector forms of ggml's expf emulation (backends/cpu/
 * vmath.h: 8 and 16 lanes) give v_expf's bits lane by lane, or mark the
 * lane for the scalar form; the SiLU GLU and the tiled attention softmax
 * rely on it to keep llama.cpp's rounding. Inputs: every 4099th float bit
 * pattern (all exponents, both signs, NaN and infinity among them) and the
 * softmax range [-110, 0] densely. Skipped where the CPU lacks the ISA. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "../../backends/cpu/vmath.h"

#if defined(__x86_64__) && defined(__GNUC__)

static bool same(float a, float b)
{
	return memcmp(&a, &b, 4) == 0 || (isnan(a) && isnan(b));
}

/* the next 16 inputs: the bit-pattern walk, then the dense softmax range */
static void inputs(uint64_t k, float *x)
{
	for (int l = 0; l < 16; l++) {
		uint64_t i = k * 16 + (uint64_t)l;
		if (i < (1ull << 20)) {
			uint32_t bits = (uint32_t)(i * 4099u);
			memcpy(&x[l], &bits, 4);
		} else {
			x[l] = -110.0f * (float)(i - (1ull << 20)) / (float)(1 << 20);
		}
	}
}

#define N_VEC ((2ull << 20) / 16)

__attribute__((target("avx2,fma"))) static void check_y(long *bad, long *slow_lanes)
{
	for (uint64_t k = 0; k < N_VEC; k++) {
		float x[16], y[8];
		inputs(k, x);
		for (int h = 0; h < 2; h++) {
			int slow;
			_mm256_storeu_ps(y, v_expf_y(_mm256_loadu_ps(x + 8 * h), &slow));
			for (int l = 0; l < 8; l++) {
				if (slow >> l & 1) {
					(*slow_lanes)++;
					continue;
				}
				if (!same(y[l], v_expf(x[8 * h + l])) && (*bad)++ < 5)
					cr_log_error("8 lanes: x = %a: %a, scalar %a", x[8 * h + l], y[l], v_expf(x[8 * h + l]));
			}
		}
	}
}

__attribute__((target("avx512f,avx2,fma"))) static void check_z(long *bad, long *slow_lanes)
{
	for (uint64_t k = 0; k < N_VEC; k++) {
		float x[16], y[16];
		__mmask16 slow;
		inputs(k, x);
		_mm512_storeu_ps(y, v_expf_z(_mm512_loadu_ps(x), &slow));
		for (int l = 0; l < 16; l++) {
			if (slow >> l & 1) {
				(*slow_lanes)++;
				continue;
			}
			if (!same(y[l], v_expf(x[l])) && (*bad)++ < 5)
				cr_log_error("16 lanes: x = %a: %a, scalar %a", x[l], y[l], v_expf(x[l]));
		}
	}
}

Test(vmath, expf_8_lanes)
{
	__builtin_cpu_init();
	if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma"))
		cr_skip_test("no AVX2 + FMA here");
	long bad = 0, slow = 0;
	check_y(&bad, &slow);
	cr_assert_eq(bad, 0, "%ld lanes differ from v_expf", bad);
	/* the lanes below the normal range go to the scalar form, not all */
	cr_assert(slow > 0 && slow < (long)(N_VEC * 16) / 2, "%ld lanes marked slow", slow);
}

Test(vmath, expf_16_lanes)
{
	__builtin_cpu_init();
	if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("fma"))
		cr_skip_test("no AVX-512F here");
	long bad = 0, slow = 0;
	check_z(&bad, &slow);
	cr_assert_eq(bad, 0, "%ld lanes differ from v_expf", bad);
	cr_assert(slow > 0 && slow < (long)(N_VEC * 16) / 2, "%ld lanes marked slow", slow);
}

#else
Test(vmath, expf_vector_forms)
{
	cr_skip_test("the vector forms are x86-64 only");
}
#endif
