// act.glsl — the activations of GLU / UNARY (ALICE_ACT_*), shared by ew.comp
// and the gate/up mat-vec that applies its GLU (mv.comp, GLU): one
// definition, so both give the same bits.
// tanh that neither overflows for large |x| nor loses precision near 0
float tanh_s(float x)
{
	if (abs(x) < 0.5)
		return tanh(x);
	float e = exp(-2.0 * abs(x));
	return sign(x) * (1.0 - e) / (1.0 + e);
}

float act(uint a, float x)
{
	switch (a) {
	case 0u: return x / (1.0 + exp(-x));
	case 1u: return 0.5 * x * (1.0 + tanh_s(0.7978845608028654 * x * (1.0 + 0.044715 * x * x)));
	case 2u: return 1.0 / (1.0 + exp(-x));
	case 3u: return x > 20.0 ? x : log(1.0 + exp(x));
	case 4u: return exp(x);
	case 5u: return -x;
	case 6u: return x > 0.0 ? x : 0.0;
	case 7u: {
		// erf by Abramowitz-Stegun 7.1.26 is too coarse; use a high-precision rational form
		float z = x * 0.70710678118654752;
		float t = 1.0 / (1.0 + 0.5 * abs(z));
		float y = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
			t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
			t * (-0.82215223 + t * 0.17087277)))))))));
		float e = z >= 0.0 ? 1.0 - y : y - 1.0;
		return 0.5 * x * (1.0 + e);
	}
	}
	return x;
}
