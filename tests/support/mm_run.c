/* mm_run.c — see mm_run.h. */
#include "support/mm_run.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alice/quant.h"

uint64_t mm_rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

float mm_rng_gauss(uint64_t *s)
{
	double a = 0;
	for (int i = 0; i < 4; i++)
		a += (double)(mm_rng_next(s) >> 11) / 9007199254740992.0;
	return (float)((a - 2.0) * 1.7);
}

size_t mm_backend_names(char (*names)[ALICE_BACKEND_NAME_MAX], size_t cap)
{
	size_t np = 0, n = 0;
	struct alice_backend_listing *list = NULL;
	if (alice_backend_list(NULL, &list, &n, NULL) == ALICE_OK)
		for (size_t i = 0; i < n && np < cap; i++)
			if (!list[i].shadowed)
				snprintf(names[np++], ALICE_BACKEND_NAME_MAX, "%s", list[i].name);
	alice_backend_list_free(list);
	return np;
}

void mm_run_open(struct mm_run *r, const char *backend)
{
	struct alice_error err = {{0}};
	memset(r, 0, sizeof(*r));
	enum alice_status st = alice_backend_open(backend, NULL, &r->be, &err);
	if (st == ALICE_ERR_UNSUPPORTED && strstr(err.msg, "cannot run here"))
		cr_skip_test("%s: skipped: %s", backend, err.msg);
	cr_assert_eq(st, ALICE_OK, "open %s: %s", backend, err.msg);
	r->vt = r->be->vt;
	cr_assert_eq(alice_backend_init(r->be, NULL, &r->ctx, &err), ALICE_OK, "%s", err.msg);
}

void mm_run_close(struct mm_run *r)
{
	r->vt->free(r->ctx);
	alice_backend_close(r->be);
}

void mm_set_tensor(struct alice_tensor *t, uint32_t type, int64_t ne0, int64_t ne1, struct alice_buffer *buf,
		   uint64_t off)
{
	memset(t, 0, sizeof(*t));
	t->type = type;
	t->ne[0] = ne0;
	t->ne[1] = ne1;
	t->ne[2] = t->ne[3] = 1;
	t->nb[0] = alice_type_info(type)->type_size;
	t->nb[1] = (int64_t)alice_row_size(type, ne0);
	t->nb[2] = t->nb[3] = t->nb[1] * ne1;
	t->buf = buf;
	t->offset = off;
}

void mm_node_mul_mat(struct alice_node *nd)
{
	memset(nd, 0, sizeof(*nd));
	nd->op = ALICE_OP_MUL_MAT;
	nd->dst = 0;
	nd->src[0] = 1;
	nd->src[1] = 2;
	for (int i = 2; i < ALICE_MAX_SRC; i++)
		nd->src[i] = -1;
}

void mm_run_mul_mat(struct mm_run *r, uint32_t type, const uint8_t *w, int64_t K, int64_t N, const float *x,
		    int64_t M, float *dst, bool each_own_seq)
{
	size_t wb = alice_row_size(type, K) * (size_t)N, xb = (size_t)(K * M) * 4, db = (size_t)(N * M) * 4;
	size_t ib = each_own_seq ? (size_t)(2 * M) * 4 : 0;
	size_t o_w = 0, o_x = (wb + 255) & ~(size_t)255, o_d = o_x + ((xb + 255) & ~(size_t)255);
	size_t o_i = o_d + ((db + 255) & ~(size_t)255), total = o_i + ib;
	struct alice_buffer *buf = NULL;
	cr_assert_eq(r->vt->buffer_alloc(r->ctx, total, ALICE_BUFFER_COMPUTE, &buf), ALICE_OK, "%s",
		     r->vt->last_error(r->ctx));
	cr_assert_eq(r->vt->buffer_write(r->ctx, buf, o_w, w, wb), ALICE_OK);
	cr_assert_eq(r->vt->buffer_write(r->ctx, buf, o_x, x, xb), ALICE_OK);
	struct alice_tensor t[4];
	mm_set_tensor(&t[0], ALICE_TYPE_F32, N, M, buf, o_d);
	mm_set_tensor(&t[1], type, K, N, buf, o_w);
	mm_set_tensor(&t[2], ALICE_TYPE_F32, K, M, buf, o_x);
	if (r->pack && ALICE_VT_HAS(r->vt, tensor_pack))
		cr_assert_eq(r->vt->tensor_pack(r->ctx, &t[1]), ALICE_OK, "tensor_pack: %s", r->vt->last_error(r->ctx));
	struct alice_node nd;
	mm_node_mul_mat(&nd);
	if (each_own_seq) {
		int32_t *ids = malloc(ib);
		cr_assert_not_null(ids);
		for (int64_t m = 0; m < M; m++) {
			ids[2 * m] = 1; /* one row in its sequence */
			ids[2 * m + 1] = 0;
		}
		cr_assert_eq(r->vt->buffer_write(r->ctx, buf, o_i, ids, ib), ALICE_OK);
		free(ids);
		mm_set_tensor(&t[3], ALICE_TYPE_I32, 2, M, buf, o_i);
		nd.src[2] = 3;
		nd.ip[0] = 1;
	}
	struct alice_graph g = {.n_tensors = each_own_seq ? 4 : 3, .n_nodes = 1, .tensors = t, .nodes = &nd};
	cr_assert(r->vt->supports_op(r->ctx, &g, &nd), "MUL_MAT %s not supported", alice_type_name(type));
	cr_assert_eq(r->vt->graph_compute(r->ctx, &g), ALICE_OK, "%s", r->vt->last_error(r->ctx));
	cr_assert_eq(r->vt->buffer_read(r->ctx, buf, o_d, dst, db), ALICE_OK);
	r->vt->buffer_free(r->ctx, buf);
}
