// rope.glsl — the rotation of pair k at position th (rope.comp, and
// ropekv.comp with the cache writes): theta_i = pos * s^i by repeated float
// multiplication, as the CPU backend computes it, so positions round alike.
const float TWO_PI_HI = 6.28318548202514648;    // float(2 pi)
const float TWO_PI_LO = -1.7484556000744487e-7; // 2 pi - TWO_PI_HI

// (precise: a compiler may not fuse products into adds differently in the
// two shaders that use these)
vec2 rope_cs(float th, uint k, float theta_scale, float ff, float fscale)
{
	precise float t = th;
	for (uint j = 0u; j < k; j++)
		t *= theta_scale;
	precise float a = fscale * (t / ff);
	// reduce to [-pi, pi] so the device's cos/sin stay accurate
	precise float q = round(a / 6.28318530717958648);
	precise float ar = fma(-q, TWO_PI_HI, a);
	ar = fma(-q, TWO_PI_LO, ar);
	return vec2(cos(ar), sin(ar));
}

// the pair (x0, x1) rotated by (cos, sin)
vec2 rope_rot(float x0, float x1, vec2 cs)
{
	precise float y0 = x0 * cs.x - x1 * cs.y, y1 = x0 * cs.y + x1 * cs.x;
	return vec2(y0, y1);
}
