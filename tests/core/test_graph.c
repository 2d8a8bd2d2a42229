/* test_graph.c — the step-graph builder: shape checks, views, and the
 * liveness placement (no two tensors alive at once share bytes; memory is
 * reused, so an 8B-shaped llama prefill of 512 tokens needs a few hundred MB). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "alice/quant.h"
#include "arch/arch.h"
#include "graph.h"

static struct alice_tensor weight(uint32_t type, int64_t ne0, int64_t ne1)
{
	struct alice_tensor t = {.type = type, .ne = {ne0, ne1, 1, 1}};
	const struct alice_type_info *ti = alice_type_info(type);
	t.nb[0] = ti->type_size;
	t.nb[1] = (int64_t)alice_row_size(type, ne0);
	t.nb[2] = t.nb[1] * ne1;
	t.nb[3] = t.nb[2];
	return t;
}

/* Every INPUT/COMPUTE tensor's [first write, last read] and byte range; any
 * two whose lifetimes overlap must not overlap in memory. A computed
 * tensor's bytes stay its own one node past its last read, so that a
 * backend may run two neighbouring nodes as one launch. */
static void check_no_overlap(const struct alice_gb *gb)
{
	uint32_t nt = gb->n_tensors;
	int32_t *first = malloc(nt * sizeof(int32_t)), *last = malloc(nt * sizeof(int32_t));
	cr_assert(first && last);
	for (uint32_t i = 0; i < nt; i++) {
		first[i] = gb->meta[i].kind == ALICE_GB_INPUT ? -1 : (int32_t)gb->n_nodes + 1;
		last[i] = gb->meta[i].kind == ALICE_GB_INPUT || gb->meta[i].output ? (int32_t)gb->n_nodes : -1;
	}
	for (uint32_t n = 0; n < gb->n_nodes; n++) {
		const struct alice_node *nd = &gb->nodes[n];
		for (int s = -1; s < ALICE_MAX_SRC; s++) {
			int32_t t = s < 0 ? nd->dst : nd->src[s];
			if (t < 0)
				continue;
			int32_t r = gb->meta[t].view_of >= 0 ? gb->meta[t].view_of : t;
			if (first[r] > (int32_t)n)
				first[r] = (int32_t)n;
			if (last[r] < (int32_t)n)
				last[r] = (int32_t)n;
		}
	}
	for (uint32_t a = 0; a < nt; a++) {
		uint8_t ka = gb->meta[a].kind;
		if ((ka != ALICE_GB_COMPUTE && ka != ALICE_GB_INPUT) || last[a] < 0)
			continue;
		for (uint32_t b = a + 1; b < nt; b++) {
			uint8_t kb = gb->meta[b].kind;
			if ((kb != ALICE_GB_COMPUTE && kb != ALICE_GB_INPUT) || last[b] < 0)
				continue;
			int32_t end_a = last[a] + (ka == ALICE_GB_COMPUTE), end_b = last[b] + (kb == ALICE_GB_COMPUTE);
			bool live_together = first[a] <= end_b && first[b] <= end_a;
			uint64_t a0 = gb->tensors[a].offset, a1 = a0 + gb->meta[a].nbytes;
			uint64_t b0 = gb->tensors[b].offset, b1 = b0 + gb->meta[b].nbytes;
			if (live_together)
				cr_assert(a1 <= b0 || b1 <= a0, "tensors %u [%d,%d] and %u [%d,%d] share bytes", a,
					  first[a], last[a], b, first[b], last[b]);
		}
	}
	free(first);
	free(last);
}

Test(graph, shape_errors_are_reported)
{
	struct alice_gb gb;
	alice_gb_init(&gb);
	struct alice_tensor w = weight(ALICE_TYPE_F16, 64, 32);
	int32_t wi = alice_gb_external(&gb, &w);
	int32_t x = alice_gb_input(&gb, ALICE_TYPE_F32, 48, 4);
	cr_expect_lt(alice_gb_mul_mat(&gb, wi, x), 0);
	cr_expect(alice_gb_failed(&gb));
	cr_expect(strstr(gb.err.msg, "MUL_MAT") != NULL, "%s", gb.err.msg);
	/* once failed, later ops return -1 too */
	cr_expect_lt(alice_gb_add(&gb, x, x), 0);
	struct alice_error err = {0};
	uint64_t size;
	cr_expect_neq(alice_gb_plan(&gb, &size, &err), ALICE_OK);
	alice_gb_free(&gb);

	alice_gb_init(&gb);
	x = alice_gb_input(&gb, ALICE_TYPE_F32, 64, 4);
	int32_t b = alice_gb_input(&gb, ALICE_TYPE_F32, 32, 1);
	cr_expect_lt(alice_gb_add(&gb, x, b), 0, "32 does not broadcast to 64");
	alice_gb_reset(&gb);
	x = alice_gb_input(&gb, ALICE_TYPE_F32, 64, 4);
	cr_expect_lt(alice_gb_reshape(&gb, x, 64, 3, 1, 1), 0, "element count changes");
	alice_gb_reset(&gb);
	x = alice_gb_input(&gb, ALICE_TYPE_F32, 64, 4);
	int64_t ne[4] = {64, 5, 1, 1}, nb[4] = {4, 256, 1280, 1280};
	cr_expect_lt(alice_gb_view(&gb, x, ne, nb, 0), 0, "view past the end");
	alice_gb_free(&gb);
}

Test(graph, views_share_their_base)
{
	struct alice_gb gb;
	alice_gb_init(&gb);
	int32_t x = alice_gb_input(&gb, ALICE_TYPE_F32, 64, 8);
	int32_t y = alice_gb_scale(&gb, x, 2.0f, 0.0f);
	int32_t v = alice_gb_reshape(&gb, y, 16, 4, 8, 1);
	int32_t z = alice_gb_scale(&gb, v, 0.5f, 0.0f);
	alice_gb_set_output(&gb, z);
	struct alice_error err = {0};
	uint64_t size = 0;
	cr_assert_eq(alice_gb_plan(&gb, &size, &err), ALICE_OK, "%s", err.msg);
	cr_expect_eq(gb.tensors[v].offset, gb.tensors[y].offset);
	cr_expect_eq(gb.meta[v].view_of, y);
	cr_expect_eq(gb.tensors[v].nb[1], 64);
	cr_expect_eq(gb.tensors[v].nb[2], 256);
	check_no_overlap(&gb);
	alice_gb_free(&gb);
}

/* A chain a -> b -> c -> ... of equal tensors needs only ~3 of them live. */
Test(graph, memory_is_reused)
{
	struct alice_gb gb;
	alice_gb_init(&gb);
	int32_t x = alice_gb_input(&gb, ALICE_TYPE_F32, 1024, 256); /* 1 MiB */
	for (int i = 0; i < 50; i++)
		x = alice_gb_scale(&gb, x, 1.0f, 1.0f);
	alice_gb_set_output(&gb, x);
	struct alice_error err = {0};
	uint64_t size = 0;
	cr_assert_eq(alice_gb_plan(&gb, &size, &err), ALICE_OK, "%s", err.msg);
	/* the input, the node's output, its source and the source before
	 * (freed one node late so neighbours can run as one launch) */
	cr_expect_leq(size, 4u << 20, "50 MiB of temporaries placed in %llu bytes", (unsigned long long)size);
	check_no_overlap(&gb);
	alice_gb_free(&gb);
}

/* The llama builder on Llama-3.1-8B's shape (Q4_K weights, 512-token
 * prefill, one logits row, 4096-cell cache): placement stays small. */
Test(graph, llama_8b_prefill_fits)
{
	extern const struct alice_arch alice_arch_llama;
	struct alice_hparams hp = {.n_ctx_train = 8192, .n_embd = 4096, .n_layer = 32, .n_ff = 14336,
				   .n_head = 32, .n_head_kv = 8, .head_dim_k = 128, .head_dim_v = 128,
				   .n_rot = 128, .n_vocab = 128256, .rms_eps = 1e-5f, .rope_base = 500000.0f,
				   .rope_freq_scale = 1.0f, .attn_scale = 0.088388f, .rope_mode = ALICE_ROPE_NORMAL};
	const struct alice_arch *a = &alice_arch_llama;
	size_t n_w = a->n_tensors * hp.n_layer;
	struct alice_tensor *tensors = calloc(n_w, sizeof(*tensors));
	int32_t(*layers)[ALICE_W_COUNT] = calloc(hp.n_layer, sizeof(*layers));
	cr_assert(tensors && layers);
	struct alice_weights w = {.tensors = tensors, .layer = layers};
	for (int s = 0; s < ALICE_W_COUNT; s++)
		w.global[s] = -1;
	for (uint32_t il = 0; il < hp.n_layer; il++)
		for (int s = 0; s < ALICE_W_COUNT; s++)
			layers[il][s] = -1;
	uint32_t n = 0;
	for (size_t i = 0; i < a->n_tensors; i++) {
		const struct alice_tensor_spec *sp = &a->tensors[i];
		if ((sp->flags & ALICE_TS_OPTIONAL) && sp->slot != ALICE_W_OUTPUT)
			continue;
		uint32_t type = (sp->flags & ALICE_TS_F32) ? ALICE_TYPE_F32 : ALICE_TYPE_Q4_K;
		struct alice_tensor t = weight(type, alice_dim_value(a, &hp, sp->ne[0]), alice_dim_value(a, &hp, sp->ne[1]));
		if (sp->flags & ALICE_TS_LAYER) {
			for (uint32_t il = 0; il < hp.n_layer; il++) {
				tensors[n] = t;
				layers[il][sp->slot] = (int32_t)n++;
			}
		} else {
			tensors[n] = t;
			w.global[sp->slot] = (int32_t)n++;
		}
	}
	struct alice_tensor *kc = calloc(hp.n_layer, sizeof(*kc)), *vc = calloc(hp.n_layer, sizeof(*vc));
	cr_assert(kc && vc);
	for (uint32_t il = 0; il < hp.n_layer; il++) {
		kc[il] = weight(ALICE_TYPE_F16, 128, 8);
		kc[il].ne[2] = 4096;
		kc[il].nb[2] = kc[il].nb[1] * 8;
		kc[il].nb[3] = kc[il].nb[2] * 4096;
		vc[il] = kc[il];
	}
	struct alice_gb gb;
	alice_gb_init(&gb);
	const int T = 512;
	struct alice_step st = {.hp = &hp, .w = &w, .k_cache = kc, .v_cache = vc, .n_tokens = T, .n_out = 1};
	st.inp_tokens = alice_gb_input(&gb, ALICE_TYPE_I32, T, 1);
	st.inp_pos = alice_gb_input(&gb, ALICE_TYPE_I32, T, 1);
	st.inp_ranges = alice_gb_input(&gb, ALICE_TYPE_I32, 2, T);
	st.inp_cells = alice_gb_input(&gb, ALICE_TYPE_I32, T, 1);
	st.inp_out = alice_gb_input(&gb, ALICE_TYPE_I32, 1, 1);
	int32_t logits = a->build(&gb, &st);
	cr_assert_geq(logits, 0, "%s", gb.err.msg);
	cr_expect_eq(gb.tensors[logits].ne[0], 128256);
	cr_expect_eq(gb.tensors[logits].ne[1], 1);
	alice_gb_set_output(&gb, logits);
	struct alice_error err = {0};
	uint64_t size = 0;
	cr_assert_eq(alice_gb_plan(&gb, &size, &err), ALICE_OK, "%s", err.msg);
	uint64_t total = 0;
	for (uint32_t i = 0; i < gb.n_tensors; i++)
		if (gb.meta[i].kind == ALICE_GB_COMPUTE)
			total += gb.meta[i].nbytes;
	cr_log_info("llama-8B 512-token prefill: %u nodes, %.1f MB of intermediates placed in %.1f MB", gb.n_nodes,
		    (double)total / 1e6, (double)size / 1e6);
	cr_expect_lt(size, 300u * 1000 * 1000, "compute buffer %.1f MB", (double)size / 1e6);
	cr_expect_gt(total, 10 * size, "memory is reused across layers");
	check_no_overlap(&gb);
	alice_gb_free(&gb);
	free(kc);
	free(vc);
	free(tensors);
	free(layers);
}
