// sample.glsl — a logit as every sampling op sees it (alice_ts_clean):
// NaN -> -inf, +inf -> FLT_MAX (TOPK, LOGIT_ADJUST, SAMPLE_TEMP, LOGSUMEXP).
#define NEG_INF uintBitsToFloat(0xff800000u)
#define FLT_MAX_ 3.402823466e+38
float clean_(float x)
{
	if (isnan(x))
		return NEG_INF;
	return x < FLT_MAX_ ? x : FLT_MAX_;
}
