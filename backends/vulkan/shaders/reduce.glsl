// reduce.glsl — workgroup sums and maxima: subgroup arithmetic when the
// device has it (USE_SUBGROUP=1 variant), else a shared-memory tree.
// Call from uniform control flow. Needs WG (a power of two) defined.
#if USE_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
shared float red_[WG];
float wg_sum(float v)
{
	v = subgroupAdd(v);
	if (subgroupElect())
		red_[gl_SubgroupID] = v;
	barrier();
	float s = 0.0;
	for (uint i = 0u; i < gl_NumSubgroups; i++)
		s += red_[i];
	barrier();
	return s;
}
float wg_max(float v)
{
	v = subgroupMax(v);
	if (subgroupElect())
		red_[gl_SubgroupID] = v;
	barrier();
	float s = red_[0];
	for (uint i = 1u; i < gl_NumSubgroups; i++)
		s = max(s, red_[i]);
	barrier();
	return s;
}
#else
shared float red_[WG];
float wg_sum(float v)
{
	uint t = gl_LocalInvocationID.x;
	red_[t] = v;
	barrier();
	for (uint s = WG / 2u; s > 0u; s >>= 1) {
		if (t < s)
			red_[t] += red_[t + s];
		barrier();
	}
	float r = red_[0];
	barrier();
	return r;
}
float wg_max(float v)
{
	uint t = gl_LocalInvocationID.x;
	red_[t] = v;
	barrier();
	for (uint s = WG / 2u; s > 0u; s >>= 1) {
		if (t < s)
			red_[t] = max(red_[t], red_[t + s]);
		barrier();
	}
	float r = red_[0];
	barrier();
	return r;
}
#endif
