/* recurrent.c — allocation and clearing of per-sequence recurrent state. */
#include "recurrent.h"

#include <stdlib.h>
#include <string.h>

#include "alice/log.h"
#include "alice/quant.h"
#include "model_internal.h"

#define RS_MAX_ELEMS ((int64_t)1 << 40)

static int layer_states(const struct alice_model *m, int il, int64_t ne[ALICE_LAYER_STATES][3])
{
	if (!m->arch->layer_state)
		return 0;
	memset(ne, 0, sizeof(int64_t) * ALICE_LAYER_STATES * 3);
	int n = m->arch->layer_state(&m->hp, il, ne);
	return n < 0 ? 0 : (n > ALICE_LAYER_STATES ? ALICE_LAYER_STATES : n);
}

bool alice_rs_model_has_state(const struct alice_model *m)
{
	int64_t ne[ALICE_LAYER_STATES][3];
	for (uint32_t il = 0; il < m->hp.n_layer; il++)
		if (layer_states(m, (int)il, ne) > 0)
			return true;
	return false;
}

enum alice_status alice_rs_create(struct alice_context *c, struct alice_error *err)
{
	const struct alice_model *m = c->m;
	if (!alice_rs_model_has_state(m))
		return ALICE_OK;
	const struct alice_backend_vtable *vt = m->be->vt;
	uint32_t nl = m->hp.n_layer;
	c->rs = calloc((size_t)nl * ALICE_LAYER_STATES, sizeof(*c->rs));
	if (!c->rs)
		return alice_fail(err, ALICE_ERR_NOMEM, "out of memory");
	uint64_t off = 0;
	for (uint32_t il = 0; il < nl; il++) {
		int64_t ne[ALICE_LAYER_STATES][3];
		int n = layer_states(m, (int)il, ne);
		for (int k = 0; k < n; k++) {
			struct alice_tensor *t = &c->rs[il * ALICE_LAYER_STATES + k];
			int64_t per_seq = ne[k][0] * ne[k][1] * ne[k][2];
			if (ne[k][0] <= 0 || ne[k][1] <= 0 || ne[k][2] <= 0 || per_seq > RS_MAX_ELEMS / c->n_seq)
				return alice_fail(err, ALICE_ERR_INVALID, "layer %u: bad recurrent state shape [%lld, %lld, %lld]",
						  il, (long long)ne[k][0], (long long)ne[k][1], (long long)ne[k][2]);
			t->type = ALICE_TYPE_F32;
			t->ne[0] = ne[k][0];
			t->ne[1] = ne[k][1];
			t->ne[2] = ne[k][2];
			t->ne[3] = c->n_seq;
			t->nb[0] = 4;
			t->nb[1] = 4 * t->ne[0];
			t->nb[2] = t->nb[1] * t->ne[1];
			t->nb[3] = t->nb[2] * t->ne[2];
			t->offset = off;
			off = (off + (uint64_t)t->nb[3] * (uint64_t)c->n_seq + 255) / 256 * 256;
		}
	}
	if (vt->buffer_alloc(m->bctx, off, ALICE_BUFFER_CACHE, &c->rs_buf) != ALICE_OK)
		return alice_fail(err, ALICE_ERR_BACKEND, "backend %s: cannot allocate %llu bytes of recurrent state: %s",
				  m->be->name, (unsigned long long)off, vt->last_error(m->bctx));
	if (vt->buffer_clear(m->bctx, c->rs_buf, 0, off) != ALICE_OK)
		return alice_fail(err, ALICE_ERR_BACKEND, "backend %s: clearing the recurrent state failed: %s",
				  m->be->name, vt->last_error(m->bctx));
	for (uint32_t i = 0; i < nl * ALICE_LAYER_STATES; i++)
		if (c->rs[i].ne[0] > 0)
			c->rs[i].buf = c->rs_buf;
	alice_log(ALICE_LOG_INFO, "context: recurrent state %.2f MB (%u sequences)", (double)off / 1e6, c->n_seq);
	return ALICE_OK;
}

void alice_rs_free(struct alice_context *c)
{
	if (c->rs_buf)
		c->m->be->vt->buffer_free(c->m->bctx, c->rs_buf);
	c->rs_buf = NULL;
	free(c->rs);
	c->rs = NULL;
}

void alice_rs_clear_seq(struct alice_context *c, int32_t seq)
{
	if (!c->rs || seq < 0 || (uint32_t)seq >= c->n_seq)
		return;
	const struct alice_backend_vtable *vt = c->m->be->vt;
	for (uint32_t i = 0; i < c->m->hp.n_layer * ALICE_LAYER_STATES; i++) {
		const struct alice_tensor *t = &c->rs[i];
		if (!t->buf)
			continue;
		uint64_t per_seq = (uint64_t)t->nb[3];
		if (vt->buffer_clear(c->m->bctx, c->rs_buf, t->offset + per_seq * (uint64_t)seq, per_seq) != ALICE_OK)
			alice_log(ALICE_LOG_ERROR, "backend %s: clearing the recurrent state of sequence %d failed: %s",
				  c->m->be->name, seq, vt->last_error(c->m->bctx));
	}
}
