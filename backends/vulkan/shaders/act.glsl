// act.glsl — the activations of GLU / UNARY (ALICE_ACT_*), shared by ew.comp
// and the gate/up mat-vec that applies its GLU (mv.comp, GLU): one
// definition, so both give the same bits.
// tanh that neither overflows for large |x| nor loses precision near 0
float tanh_s(float x)
{
	if (abs(x) < 0.5)
		return tanh(x);
	precise float e = exp(-2.0 * abs(x));
	precise float r = sign(x) * (1.0 - e) / (1.0 + e);
	return r;
}

float act(uint a, float x)
{
	precise float r;
	switch (a) {
	case 0u: r = x / (1.0 + exp(-x)); return r;
	case 1u: r = 0.5 * x * (1.0 + tanh_s(0.7978845608028654 * x * (1.0 + 0.044715 * x * x))); return r;
	case 2u: r = 1.0 / (1.0 + exp(-x)); return r;
	case 3u: r = x > 20.0 ? x : log(1.0 + exp(x)); return r;
	case 4u: r = exp(x); return r;
	case 5u: r = -x; return r;
	case 6u: r = x > 0.0 ? x : 0.0; return r;
	case 7u: {
		// erf by Abramowitz-Stegun 7.1.26 is too coarse; use a high-precision rational form
		precise float z = x * 0.70710678118654752;
		precise float t = 1.0 / (1.0 + 0.5 * abs(z));
		precise float y = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
			t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
			t * (-0.82215223 + t * 0.17087277)))))))));
		precise float e = z >= 0.0 ? 1.0 - y : y - 1.0;
		r = 0.5 * x * (1.0 + e);
		return r;
	}
	}
	return x;
}
