// actq.glsl — how MUL_MAT activations are rounded for a weight type's dot
// (actq.comp, and addnorm.comp where a norm's output goes straight to the
// mat-vecs): fp16 values, and the Q8_0 / Q8_K value of one element given its
// block's absolute maximum (amax) and, for Q8_K, the signed element holding
// it (mx). Both shaders call these, so the two paths round alike.
// a / b correctly rounded in nearly every case (Vulkan allows 2.5 ulp for
// '/'): q corrected by the residual a - q b, taken exactly from Dekker's
// split product (fma may be a multiply and an add, as on lavapipe, where
// the residual then came out wrong and a rounding tie flipped)
float div_cr(float a, float b)
{
	precise float q = a / b;
	precise float p = q * b;
	precise float cq = 4097.0 * q, qh = cq - (cq - q), ql = q - qh;
	precise float cb = 4097.0 * b, bh = cb - (cb - b), bl = b - bh;
	precise float e = ((qh * bh - p) + qh * bl + ql * bh) + ql * bl;
	precise float r = (a - p) - e;
	precise float res = q + r / b;
	return res;
}

float round_f16(float x) { return unpackHalf2x16(f32_to_f16(x)).x; }

// fmt 3 (Q8_0 values, also Q8_1's) and 4 (Q8_K): a block's scale d and
// multiplier id from its absolute maximum (amax) and the signed element
// holding it (mx), then an element's value (mv.comp takes them apart to
// compute the scales once a block)
void q8_scales(uint fmt, float amax, float mx, out float d, out float id)
{
	if (fmt == 3u || fmt == 5u) {
		d = round_f16(amax / 127.0);
		id = amax != 0.0 ? div_cr(127.0, amax) : 0.0;
		return;
	}
	id = amax != 0.0 ? div_cr(-127.0, mx) : 0.0;
	d = amax != 0.0 ? div_cr(1.0, id) : 0.0;
}
float q8_val(uint fmt, float v, float amax, float d, float id)
{
	if (fmt == 3u || fmt == 5u)
		return d * roundEven(v * id);
	return amax == 0.0 ? 0.0 : d * min(roundEven(id * v), 127.0);
}
float actq_q8(uint fmt, float v, float amax, float mx)
{
	float d, id;
	q8_scales(fmt, amax, mx, d, id);
	return q8_val(fmt, v, amax, d, id);
}

#ifndef ACTQ_NO_BLK
// The absolute maximum of a block of bs threads (bs 32 or 256 beginning at
// thread tid - bi) and the signed element holding it first (mx): what a
// scan in order keeps (NaN never becomes the maximum). Subgroup maxima where
// subgroups are 32 wide (a 256 block: 8 of them, combined in order), else a
// shared-memory tree. The includer declares s_av[256] and s_ix[256] and
// calls it in uniform control flow (bs is uniform).
void blk_amax(uint tid, uint bi, uint bs, float v, out float amax, out float mx)
{
	float av = abs(v);
	av = av > 0.0 ? av : 0.0;
	uint neg = v < 0.0 ? 0x10000u : 0u; // the sign beside the index
#if USE_SUBGROUP
	if (gl_SubgroupSize == 32u && (bs == 32u || bs == 256u)) {
		float m = subgroupMax(av);
		uint i = subgroupMin(av == m ? bi : 0xffffu);
		bool ng = subgroupOr(bi == i && neg != 0u ? 1u : 0u) != 0u;
		if (bs == 32u) {
			amax = m;
			mx = ng ? -m : m;
			return;
		}
		if (subgroupElect()) {
			s_av[gl_SubgroupID] = m;
			s_ix[gl_SubgroupID] = ng ? 0x10000u : 0u;
		}
		barrier();
		amax = s_av[0];
		uint sx = s_ix[0];
		for (uint j = 1u; j < 8u; j++)
			if (s_av[j] > amax) { // later subgroups hold later elements: ties keep the first
				amax = s_av[j];
				sx = s_ix[j];
			}
		mx = sx != 0u ? -amax : amax;
		barrier();
		return;
	}
#endif
	s_av[tid] = av;
	s_ix[tid] = bi | neg;
	barrier();
	for (uint st = bs >> 1; st > 0u; st >>= 1) {
		if (bi < st) {
			float o = s_av[tid + st];
			if (o > s_av[tid] || (o == s_av[tid] && (s_ix[tid + st] & 0xffffu) < (s_ix[tid] & 0xffffu))) {
				s_av[tid] = o;
				s_ix[tid] = s_ix[tid + st];
			}
		}
		barrier();
	}
	uint base = tid - bi;
	amax = s_av[base];
	mx = (s_ix[base] & 0x10000u) != 0u ? -amax : amax;
	barrier();
}
#endif
