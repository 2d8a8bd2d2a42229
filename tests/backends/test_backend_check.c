/* test_backend_check.c — the backend contract of alice/backend_check.h:
 * every op of the enum has a name and an arity, the tensor extent check
 * refuses ne/nb combinations whose byte span does not fit 64 bits (which
 * the unchecked sums of the old CUDA / Vulkan copies wrapped) and accepts
 * the largest that do, and the type, cell-dim and node rules. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "alice/backend_check.h"
#include "alice/backend_log.h"
#include "graph.h"

static char err[512];

/* any non-NULL buffer: the checks never look inside it */
static struct alice_buffer *const fake_buf = (struct alice_buffer *)&err;

static struct alice_tensor tensor(uint32_t type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3)
{
	struct alice_tensor t;
	memset(&t, 0, sizeof(t));
	const struct alice_type_info *ti = alice_type_info(type);
	t.type = type;
	t.ne[0] = ne0;
	t.ne[1] = ne1;
	t.ne[2] = ne2;
	t.ne[3] = ne3;
	t.nb[0] = ti->type_size;
	t.nb[1] = (int64_t)alice_row_size(type, ne0);
	t.nb[2] = t.nb[1] * ne1;
	t.nb[3] = t.nb[2] * ne2;
	t.buf = fake_buf;
	return t;
}

static const struct alice_bc_limits lim = {ALICE_BC_NE_MAX, ALICE_BC_NB_MAX};

static enum alice_status check(const struct alice_tensor *t, uint64_t buf_size)
{
	err[0] = '\0';
	return alice_bc_check_tensor(t, 7, &lim, buf_size, err, sizeof(err));
}

Test(backend_check, every_op_has_a_name_and_an_arity)
{
	for (uint32_t op = 0; op < ALICE_BC_OP_COUNT; op++) {
		struct alice_op_rule r = alice_bc_op_rule(op);
		cr_assert_not_null(r.name, "op %u has no name", op);
		cr_assert_str_neq(alice_bc_op_name(op), "unknown op");
		/* the core names ops with the same table */
		cr_assert_str_eq(alice_op_name(op), r.name);
		for (uint32_t o2 = 0; o2 < op; o2++)
			cr_assert_str_neq(alice_bc_op_name(o2), r.name, "ops %u and %u share a name", o2, op);
		if (op == ALICE_OP_NONE)
			continue;
		cr_assert(r.min_src >= 1 && r.min_src <= r.max_src && r.max_src <= ALICE_MAX_SRC,
			  "%s: sources %d..%d", r.name, r.min_src, r.max_src);
	}
	cr_assert_str_eq(alice_bc_op_name(ALICE_OP_COUNT_V1_6), "unknown op");
	cr_assert_str_eq(alice_bc_op_name(UINT32_MAX), "unknown op");
	cr_assert_null(alice_bc_op_rule(ALICE_OP_COUNT_V1_6).name);
	cr_assert_eq(ALICE_BC_OP_COUNT, ALICE_OP_COUNT_V1_6, "backend_check.h must know every op of backend.h");
}

Test(backend_check, arity_is_what_backend_h_says)
{
	static const struct {
		uint32_t op;
		int lo, hi;
	} want[] = {
		{ALICE_OP_GET_ROWS, 2, 2}, {ALICE_OP_MUL_MAT, 2, 3},  {ALICE_OP_ADD, 2, 2},	{ALICE_OP_MUL, 2, 2},
		{ALICE_OP_SCALE, 1, 1},	   {ALICE_OP_RMS_NORM, 1, 2}, {ALICE_OP_L2_NORM, 1, 1}, {ALICE_OP_ROPE, 2, 3},
		{ALICE_OP_ATTENTION, 4, 5}, {ALICE_OP_KV_WRITE, 2, 2}, {ALICE_OP_GLU, 2, 2},	{ALICE_OP_UNARY, 1, 1},
		{ALICE_OP_SOFTCAP, 1, 1},  {ALICE_OP_COPY, 1, 1},     {ALICE_OP_SSM_CONV, 4, 4},
		{ALICE_OP_GATED_DELTA_NET, 6, 6}, {ALICE_OP_NORM, 1, 3},  {ALICE_OP_TOPK, 1, 1}, {ALICE_OP_SAMPLE_TEMP, 2, 2}, {ALICE_OP_LOGIT_ADJUST, 1, 1}, {ALICE_OP_FEED, 3, 3}, {ALICE_OP_LOGSUMEXP, 1, 2}, {ALICE_OP_TOKEN_MASK, 1, 1},
	};
	cr_assert_eq(sizeof(want) / sizeof(want[0]), ALICE_BC_OP_COUNT - 1);
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		struct alice_op_rule r = alice_bc_op_rule(want[i].op);
		cr_assert_eq(r.min_src, want[i].lo, "%s", r.name);
		cr_assert_eq(r.max_src, want[i].hi, "%s", r.name);
	}
}

/* ATTENTION's block table (1.4, src4): block size, virtual extent, and
 * what a malformed table is refused for. */
Test(backend_check, attention_block_table)
{
	struct alice_tensor k = tensor(ALICE_TYPE_F16, 64, 2, 96, 1);
	struct alice_tensor tb = tensor(ALICE_TYPE_I32, 10, 1, 1, 1);
	struct alice_node n;
	memset(&n, 0, sizeof(n));
	n.op = ALICE_OP_ATTENTION;
	struct alice_bc_attn_pages pg;
	cr_assert_eq(alice_bc_attention_pages(&n, &k, NULL, &pg, err, sizeof(err)), ALICE_OK);
	cr_assert_eq(pg.n_vcells, 96, "no table: the identity over K's cells");
	cr_assert_eq(pg.bs, 1);
	n.ip[0] = 16;
	cr_assert_eq(alice_bc_attention_pages(&n, &k, &tb, &pg, err, sizeof(err)), ALICE_OK, "%s", err);
	cr_assert_eq(pg.bs_log2, 4);
	cr_assert_eq(pg.n_vcells, 160, "the ranges index 10 blocks of 16 virtual cells");
	cr_assert_eq(pg.n_blocks, 6);
	n.ip[0] = 24;
	cr_assert_eq(alice_bc_attention_pages(&n, &k, &tb, &pg, err, sizeof(err)), ALICE_ERR_INVALID, "not a power of two");
	n.ip[0] = 64;
	cr_assert_eq(alice_bc_attention_pages(&n, &k, &tb, &pg, err, sizeof(err)), ALICE_ERR_INVALID, "96 cells are not whole blocks");
	n.ip[0] = 16;
	tb.type = ALICE_TYPE_F32;
	cr_assert_eq(alice_bc_attention_pages(&n, &k, &tb, &pg, err, sizeof(err)), ALICE_ERR_INVALID);
	tb.type = ALICE_TYPE_I32;
	tb.nb[0] = 8;
	cr_assert_eq(alice_bc_attention_pages(&n, &k, &tb, &pg, err, sizeof(err)), ALICE_ERR_INVALID, "not contiguous");
}

Test(backend_check, extent_of_plain_and_block_tensors)
{
	struct alice_tensor t = tensor(ALICE_TYPE_F32, 8, 3, 2, 1);
	uint64_t e = 0;
	cr_assert(alice_bc_tensor_extent(&t, &e));
	cr_assert_eq(e, 8 * 3 * 2 * 4);
	/* a strided view: the last element's end, not ne * size */
	t.nb[1] = 100;
	t.nb[2] = 1000;
	cr_assert(alice_bc_tensor_extent(&t, &e));
	cr_assert_eq(e, 1000 + 2 * 100 + 7 * 4 + 4);
	struct alice_tensor q = tensor(ALICE_TYPE_Q4_0, 64, 5, 1, 1);
	cr_assert(alice_bc_tensor_extent(&q, &e));
	cr_assert_eq(e, 5 * alice_row_size(ALICE_TYPE_Q4_0, 64));
	cr_assert_eq(check(&q, e), ALICE_OK, "%s", err);
	cr_assert_eq(check(&q, e - 1), ALICE_ERR_RANGE);
	q.offset = 1;
	cr_assert_eq(check(&q, e), ALICE_ERR_RANGE);
	cr_assert_eq(check(&q, e + 1), ALICE_OK, "%s", err);
}

/* (ne[1] - 1) * nb[1] = 2^20 * 2^44 = 2^64: an unchecked sum wraps to 0,
 * and a 16-byte buffer would seem to hold a tensor spanning 2^64 bytes. */
Test(backend_check, extent_that_wraps_is_refused)
{
	struct alice_tensor t = tensor(ALICE_TYPE_F32, 1, ((int64_t)1 << 20) + 1, 1, 1);
	t.nb[1] = (int64_t)1 << 44;
	t.nb[2] = t.nb[3] = 0;
	uint64_t e;
	cr_assert_not(alice_bc_tensor_extent(&t, &e));
	cr_assert_eq(alice_bc_extent(&t), UINT64_MAX);
	cr_assert_eq(check(&t, 16), ALICE_ERR_INVALID);
	cr_assert(strstr(err, "extent overflows"), "%s", err);
	cr_assert_eq(check(&t, UINT64_MAX), ALICE_ERR_INVALID);

	/* the largest ne and nb of every dim at once */
	struct alice_tensor m = tensor(ALICE_TYPE_F32, 1, 1, 1, 1);
	for (int d = 1; d < ALICE_MAX_DIMS; d++) {
		m.ne[d] = ALICE_BC_NE_MAX;
		m.nb[d] = ALICE_BC_NB_MAX;
	}
	cr_assert_not(alice_bc_tensor_extent(&m, &e));
	cr_assert_eq(check(&m, UINT64_MAX), ALICE_ERR_INVALID);
}

/* 2^63 + (2^63 - 2^44) + 4 = 2^64 - 2^44 + 4 bytes: fits, and is accepted
 * by a buffer of 2^64 - 1 bytes; one more step of dim 3 does not fit. */
Test(backend_check, largest_extent_that_fits_is_accepted)
{
	struct alice_tensor t = tensor(ALICE_TYPE_F32, 1, ((int64_t)1 << 19) + 1, (int64_t)1 << 19, 1);
	t.nb[1] = (int64_t)1 << 44;
	t.nb[2] = (int64_t)1 << 44;
	t.nb[3] = (int64_t)1 << 44;
	uint64_t e = 0;
	cr_assert(alice_bc_tensor_extent(&t, &e));
	cr_assert_eq(e, UINT64_MAX - ((uint64_t)1 << 44) + 5);
	cr_assert_eq(check(&t, UINT64_MAX), ALICE_OK, "%s", err);
	cr_assert_eq(check(&t, e - 1), ALICE_ERR_RANGE);
	t.ne[3] = 2;
	cr_assert_not(alice_bc_tensor_extent(&t, &e));
	cr_assert_eq(check(&t, UINT64_MAX), ALICE_ERR_INVALID);
}

Test(backend_check, tensor_rules)
{
	struct alice_tensor t = tensor(ALICE_TYPE_F32, 4, 4, 1, 1);
	cr_assert_eq(check(&t, 64), ALICE_OK, "%s", err);
	struct alice_tensor u = t;
	u.ne[2] = 0;
	cr_assert_eq(check(&u, 64), ALICE_ERR_INVALID);
	u = t;
	u.nb[1] = -16;
	cr_assert_eq(check(&u, 64), ALICE_ERR_INVALID);
	u = t;
	u.ne[1] = ALICE_BC_NE_MAX + 1;
	cr_assert_eq(check(&u, UINT64_MAX), ALICE_ERR_INVALID);
	u = t;
	u.nb[1] = ALICE_BC_NB_MAX + 1;
	cr_assert_eq(check(&u, UINT64_MAX), ALICE_ERR_INVALID);
	/* a backend's own, tighter limits */
	struct alice_bc_limits small = {3, 1 << 10};
	cr_assert_eq(alice_bc_check_tensor(&t, 0, &small, 64, err, sizeof(err)), ALICE_ERR_INVALID);
	/* 2^48 elements pass, one more dim step does not */
	u = tensor(ALICE_TYPE_F32, 1, (int64_t)1 << 24, (int64_t)1 << 24, 1);
	u.nb[1] = u.nb[2] = u.nb[3] = 0;
	cr_assert_eq(check(&u, 64), ALICE_OK, "%s", err);
	u.ne[3] = 2;
	cr_assert_eq(check(&u, 64), ALICE_ERR_INVALID);
	cr_assert(strstr(err, "too many elements"), "%s", err);
	u = t;
	u.buf = NULL;
	cr_assert_eq(check(&u, 64), ALICE_ERR_INVALID);
	u = t;
	u.type = 16; /* IQ2_XXS: known to ggml, not supported */
	cr_assert_eq(check(&u, 64), ALICE_ERR_UNSUPPORTED);
	u = t;
	u.type = 1000;
	cr_assert_eq(check(&u, 64), ALICE_ERR_UNSUPPORTED);
	/* block rows must be whole blocks, packed */
	struct alice_tensor q = tensor(ALICE_TYPE_Q4_K, 256, 2, 1, 1);
	cr_assert_eq(check(&q, 4096), ALICE_OK, "%s", err);
	q.ne[0] = 255;
	cr_assert_eq(check(&q, 4096), ALICE_ERR_INVALID);
	q = tensor(ALICE_TYPE_Q4_K, 256, 2, 1, 1);
	q.nb[0] = 2;
	cr_assert_eq(check(&q, 4096), ALICE_ERR_INVALID);
}

Test(backend_check, buffer_range)
{
	cr_assert_eq(alice_bc_check_range(true, 100, 0, 100, "w", err, sizeof(err)), ALICE_OK);
	cr_assert_eq(alice_bc_check_range(true, 100, 100, 0, "w", err, sizeof(err)), ALICE_OK);
	cr_assert_eq(alice_bc_check_range(true, 100, 1, 100, "w", err, sizeof(err)), ALICE_ERR_RANGE);
	cr_assert_eq(alice_bc_check_range(true, 100, UINT64_MAX, 2, "w", err, sizeof(err)), ALICE_ERR_RANGE);
	cr_assert_eq(alice_bc_check_range(true, 100, 2, UINT64_MAX, "w", err, sizeof(err)), ALICE_ERR_RANGE);
	cr_assert_eq(alice_bc_check_range(false, 100, 0, 1, "buffer_read", err, sizeof(err)), ALICE_ERR_INVALID);
	cr_assert_str_eq(err, "buffer_read: NULL buffer");
}

Test(backend_check, type_rules)
{
	struct alice_tensor w = tensor(ALICE_TYPE_Q4_K, 256, 4, 1, 1), x = tensor(ALICE_TYPE_F32, 256, 1, 1, 1),
			    y = tensor(ALICE_TYPE_F32, 4, 1, 1, 1), ids = tensor(ALICE_TYPE_I32, 1, 1, 1, 1);
	const struct alice_tensor *s[ALICE_MAX_SRC] = {&w, &x};
	struct alice_node n;
	memset(&n, 0, sizeof(n));
	n.op = ALICE_OP_MUL_MAT;
	cr_assert(alice_bc_types_ok(&n, &y, s));
	s[0] = &ids;
	cr_assert_not(alice_bc_types_ok(&n, &y, s));
	s[0] = &x;
	s[1] = &x;
	n.op = ALICE_OP_GLU;
	n.ip[0] = ALICE_ACT_SILU;
	cr_assert(alice_bc_types_ok(&n, &y, s));
	n.ip[0] = ALICE_ACT_GELU_ERF + 1;
	cr_assert_not(alice_bc_types_ok(&n, &y, s));
	cr_assert_eq(alice_bc_types_fail(&n, &y, s, err, sizeof(err)), ALICE_ERR_UNSUPPORTED);
	cr_assert(strstr(err, "dst F32, src0 F32, src1 F32"), "%s", err);
	n.op = ALICE_OP_ROPE;
	s[1] = &ids;
	n.ip[1] = ALICE_ROPE_NEOX;
	cr_assert(alice_bc_types_ok(&n, &y, s));
	n.ip[1] = 1;
	cr_assert_not(alice_bc_types_ok(&n, &y, s));
	for (uint32_t t = 0; t < ALICE_TYPE_COUNT; t++)
		if (alice_bc_weight_type_ok(t))
			cr_assert(alice_type_info(t) && alice_type_info(t)->supported, "weight type %u", t);
	cr_assert_not(alice_bc_weight_type_ok(ALICE_TYPE_I32));
	cr_assert_not(alice_bc_weight_type_ok(ALICE_TYPE_Q8_K));
}

Test(backend_check, node_tensors)
{
	struct alice_tensor t[3] = {tensor(ALICE_TYPE_F32, 4, 1, 1, 1), tensor(ALICE_TYPE_F32, 4, 1, 1, 1),
				    tensor(ALICE_TYPE_F32, 4, 1, 1, 1)};
	struct alice_node n;
	memset(&n, 0, sizeof(n));
	for (int i = 0; i < ALICE_MAX_SRC; i++)
		n.src[i] = -1;
	struct alice_graph g = {3, 1, t, &n};
	const struct alice_tensor *dst, *src[ALICE_MAX_SRC];
	n.op = ALICE_OP_ADD;
	n.dst = 2;
	n.src[0] = 0;
	n.src[1] = 1;
	cr_assert_eq(alice_bc_node_tensors(&g, &n, "test", &dst, src, err, sizeof(err)), ALICE_OK, "%s", err);
	cr_assert(dst == &t[2] && src[0] == &t[0] && src[1] == &t[1] && !src[2]);
	n.src[2] = 0;
	cr_assert_eq(alice_bc_node_tensors(&g, &n, "test", &dst, src, err, sizeof(err)), ALICE_ERR_INVALID);
	n.src[2] = -1;
	n.src[1] = -1;
	cr_assert_eq(alice_bc_node_tensors(&g, &n, "test", &dst, src, err, sizeof(err)), ALICE_ERR_INVALID);
	cr_assert_str_eq(err, "src[1] is required");
	n.src[1] = 3;
	cr_assert_eq(alice_bc_node_tensors(&g, &n, "test", &dst, src, err, sizeof(err)), ALICE_ERR_INVALID);
	n.src[1] = 1;
	n.dst = -1;
	cr_assert_eq(alice_bc_node_tensors(&g, &n, "test", &dst, src, err, sizeof(err)), ALICE_ERR_INVALID);
	n.dst = 2;
	n.op = ALICE_OP_NONE;
	cr_assert_eq(alice_bc_node_tensors(&g, &n, "test", &dst, src, err, sizeof(err)), ALICE_ERR_UNSUPPORTED);
	n.op = ALICE_OP_COUNT_V1_6;
	cr_assert_eq(alice_bc_node_tensors(&g, &n, "test", &dst, src, err, sizeof(err)), ALICE_ERR_UNSUPPORTED);
	cr_assert_str_eq(err, "op 24 is not supported by the test backend");
}

Test(backend_check, kv_write_cell_dim)
{
	struct alice_tensor cache = tensor(ALICE_TYPE_F16, 8, 2, 100, 1);
	cr_assert_eq(alice_bc_cell_dim(&cache, 16), 2);
	struct alice_tensor flat = tensor(ALICE_TYPE_F32, 16, 3, 1, 1);
	cr_assert_eq(alice_bc_cell_dim(&flat, 16), 1);
	struct alice_tensor ones = tensor(ALICE_TYPE_F32, 16, 1, 1, 5);
	cr_assert_eq(alice_bc_cell_dim(&ones, 16), 3);
	cr_assert_eq(alice_bc_cell_dim(&cache, 12), -1);

	struct alice_tensor idx = tensor(ALICE_TYPE_I32, 3, 1, 1, 1);
	struct alice_bc_kv_layout kl;
	cr_assert_eq(alice_bc_kv_layout_of(&flat, &idx, &cache, &kl, err, sizeof(err)), ALICE_OK, "%s", err);
	cr_assert(kl.n == 3 && kl.e == 16 && kl.ds == 1 && kl.dd == 2);
	struct alice_tensor idx2 = tensor(ALICE_TYPE_I32, 2, 1, 1, 1);
	cr_assert_eq(alice_bc_kv_layout_of(&flat, &idx2, &cache, &kl, err, sizeof(err)), ALICE_ERR_INVALID);
	struct alice_tensor past = tensor(ALICE_TYPE_F16, 8, 2, 100, 2); /* dims past the cell dim */
	cr_assert_eq(alice_bc_kv_layout_of(&flat, &idx, &past, &kl, err, sizeof(err)), ALICE_ERR_INVALID);
}

Test(backend_check, node_prefix_keeps_the_message_within_its_buffer)
{
	char small[24];
	snprintf(small, sizeof(small), "boom");
	alice_bc_prefix_node(small, sizeof(small), 3, ALICE_OP_MUL_MAT);
	cr_assert_str_eq(small, "node 3 (MUL_MAT): boom");
	char tiny[24];
	memset(tiny, 'x', sizeof(tiny) - 1);
	tiny[sizeof(tiny) - 1] = '\0';
	alice_bc_prefix_node(tiny, sizeof(tiny), 12, ALICE_OP_ATTENTION);
	cr_assert_eq(strlen(tiny), sizeof(tiny) - 1);
	cr_assert(strncmp(tiny, "node 12 (ATTENTION): ", 21) == 0, "%s", tiny);
}

/* a backend's context, as far as its fail function sees it */
struct alice_backend_ctx {
	char err[32];
};
ALICE_BACKEND_DEFINE_FAIL(static, fake_fail)

static int logged_level;
static char logged[600];
static void record_log(int level, const char *msg)
{
	logged_level = level;
	snprintf(logged, sizeof(logged), "%s", msg);
}

static const struct alice_backend_host *test_host;
ALICE_BACKEND_DEFINE_LOG(static, fake_log, test_host)

Test(backend_check, log_and_fail_helpers)
{
	struct alice_backend_ctx c;
	cr_assert_eq(fake_fail(&c, ALICE_ERR_RANGE, "value %d is out of range of this", 12345), ALICE_ERR_RANGE);
	cr_assert_str_eq(c.err, "value 12345 is out of range of ");
	static const struct alice_backend_host host = {ALICE_BACKEND_ABI_MAJOR, ALICE_BACKEND_ABI_MINOR,
						       sizeof(struct alice_backend_host), record_log};
	static const struct alice_backend_host other = {ALICE_BACKEND_ABI_MAJOR + 1, 0,
							sizeof(struct alice_backend_host), record_log};
	cr_assert_null(alice_backend_host_accept(&other));
	cr_assert_null(alice_backend_host_accept(NULL));
	test_host = alice_backend_host_accept(&host);
	fake_log(2, "hello %s", "there");
	cr_assert_eq(logged_level, 2);
	cr_assert_str_eq(logged, "hello there");
	test_host = NULL;
	fake_log(1, "dropped");
	cr_assert_str_eq(logged, "hello there");
}

Test(backend_check, shape_rules)
{
	struct alice_tensor w = tensor(ALICE_TYPE_Q8_0, 64, 10, 1, 1), x = tensor(ALICE_TYPE_F32, 64, 3, 2, 1),
			    d = tensor(ALICE_TYPE_F32, 10, 3, 2, 1);
	cr_assert_eq(alice_bc_mul_mat_shape(&w, &x, &d, err, sizeof(err)), ALICE_OK, "%s", err);
	x.ne[0] = 32;
	cr_assert_eq(alice_bc_mul_mat_shape(&w, &x, &d, err, sizeof(err)), ALICE_ERR_INVALID);
	cr_assert(strstr(err, "shapes do not match"), "%s", err);

	struct alice_tensor tab = tensor(ALICE_TYPE_F16, 8, 50, 1, 1), ids = tensor(ALICE_TYPE_I32, 4, 2, 1, 1),
			    rows = tensor(ALICE_TYPE_F32, 8, 4, 2, 1);
	cr_assert_eq(alice_bc_get_rows_shape(&tab, &ids, &rows, err, sizeof(err)), ALICE_OK, "%s", err);
	rows.ne[2] = 1;
	cr_assert_eq(alice_bc_get_rows_shape(&tab, &ids, &rows, err, sizeof(err)), ALICE_ERR_INVALID);

	struct alice_tensor q = tensor(ALICE_TYPE_F32, 16, 4, 3, 1), k = tensor(ALICE_TYPE_F16, 16, 2, 9, 1),
			    v = tensor(ALICE_TYPE_F16, 8, 2, 9, 1), r = tensor(ALICE_TYPE_I32, 2, 3, 1, 1),
			    o = tensor(ALICE_TYPE_F32, 8, 4, 3, 1);
	cr_assert_eq(alice_bc_attention_shape(&q, &k, &v, &r, &o, err, sizeof(err)), ALICE_OK, "%s", err);
	q.ne[1] = 3; /* not a multiple of the 2 kv heads */
	o.ne[1] = 3;
	cr_assert_eq(alice_bc_attention_shape(&q, &k, &v, &r, &o, err, sizeof(err)), ALICE_ERR_INVALID);
	cr_assert(strstr(err, "multiple of n_head_kv"), "%s", err);
	q.ne[1] = o.ne[1] = 4;
	k.nb[0] = 4; /* F16 rows must be packed */
	cr_assert_eq(alice_bc_attention_shape(&q, &k, &v, &r, &o, err, sizeof(err)), ALICE_ERR_INVALID);
	k.nb[0] = 2;
	r.ne[0] = 3;
	cr_assert_eq(alice_bc_attention_shape(&q, &k, &v, &r, &o, err, sizeof(err)), ALICE_ERR_INVALID);
}
