// attn.glsl — what attn.comp, attnt.comp and fa.comp share: a virtual
// cell's physical cell (paged cache), the soft-cap's tanh (act.glsl's) and
// which tokens fa.comp takes. Needs the push block
// p (tbl_n, t_off, bs_sh, n_blk) and f_ (the block table).
// the physical cell of virtual cell c, or -1 where the block table maps none
int pcell_or_none(uint c)
{
	if (p.tbl_n == 0u)
		return int(c);
	int b = int(f_[(p.t_off >> 2) + (c >> p.bs_sh)]);
	if (b < 0 || uint(b) >= p.n_blk)
		return -1;
	return int((uint(b) << p.bs_sh) | (c & ((1u << p.bs_sh) - 1u)));
}
// the physical cell of virtual cell c (in a range): an unmapped block is
// reported (its table entry as the detail) and read as block 0
uint pcell(uint c)
{
	int pc = pcell_or_none(c);
	if (pc >= 0)
		return uint(pc);
	report(ST_RANGE, f_[(p.t_off >> 2) + (c >> p.bs_sh)]);
	return c & ((1u << p.bs_sh) - 1u);
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
// token i continues the run of token i - 1
bool rg_cont(int i)
{
	return i > 0 && uint(i) < p.nt && rg1(uint(i)) == rg1(uint(i - 1)) + 1 &&
	       (rg0(uint(i)) == rg0(uint(i - 1)) || rg0(uint(i)) == rg0(uint(i - 1)) + 1);
}
// The run length (up to 16) of token t from c[o + k] = rg_cont(t - 14 + k),
// k = 0 .. 29 (read at once by the workgroup: a serial walk was a chain of
// dependent reads)
#define RUN_LEN(c, o, len) { \
	len = 1u; \
	for (int k_ = 14; k_ >= 0 && len < 16u && c[(o) + uint(k_)]; k_--) \
		len++; \
	for (uint k_ = 15u; k_ < 30u && len < 16u && c[(o) + k_]; k_++) \
		len++; }
