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

// fmt 3 (Q8_0 values, also Q8_1's) and 4 (Q8_K)
float actq_q8(uint fmt, float v, float amax, float mx)
{
	if (fmt == 3u || fmt == 5u) {
		float d = amax / 127.0, id = amax != 0.0 ? div_cr(127.0, amax) : 0.0;
		return round_f16(d) * roundEven(v * id);
	}
	if (amax == 0.0)
		return 0.0;
	float iscale = div_cr(-127.0, mx), d = div_cr(1.0, iscale);
	return d * min(roundEven(iscale * v), 127.0);
}
