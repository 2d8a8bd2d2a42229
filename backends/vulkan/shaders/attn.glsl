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

// A token's cell range [rg0, rg1) (src3, e_), and whether fa.comp takes it:
// its sequence's run of consecutive tokens in the op (each range ending one
// cell after the previous one's and starting at the same cell or one later)
// has at least 16 tokens. Decided per token, never by the step's size, so a
// decode token's result does not depend on a prefill sharing its step.
int rg0(uint t) { return e_i(p.r_off + t * p.r_nb1); }
int rg1(uint t) { return e_i(p.r_off + p.r_nb0 + t * p.r_nb1); }
bool rg_cont(uint i) { return rg1(i) == rg1(i - 1u) + 1 && (rg0(i) == rg0(i - 1u) || rg0(i) == rg0(i - 1u) + 1); }
bool fa_token(uint t)
{
	uint len = 1u;
	for (uint i = t; i > 0u && len < 16u && rg_cont(i); i--)
		len++;
	for (uint i = t + 1u; i < p.nt && len < 16u && rg_cont(i); i++)
		len++;
	return len >= 16u;
}
