// attn.glsl — what attn.comp and attnt.comp share: a virtual cell's
// physical cell (paged cache) and the soft-cap's tanh (act.glsl's). Needs the push block
// p (tbl_n, t_off, bs_sh, n_blk) and f_ (the block table).
// the physical cell of virtual cell c (in a range)
uint pcell(uint c)
{
	if (p.tbl_n == 0u)
		return c;
	int b = int(f_[(p.t_off >> 2) + (c >> p.bs_sh)]);
	if (b < 0 || uint(b) >= p.n_blk) {
		report(ST_RANGE, uint(b));
		b = 0;
	}
	return (uint(b) << p.bs_sh) | (c & ((1u << p.bs_sh) - 1u));
}

// the soft-cap's tanh (tanh_s), one definition with the activations'
#include "act.glsl"
