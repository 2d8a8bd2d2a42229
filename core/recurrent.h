/* recurrent.h — per-sequence recurrent state of a context (conv and
 * delta-rule state of Qwen 3.5's linear-attention layers, or any layer an
 * arch declares through alice_arch.layer_state). Private to the core.
 *
 * Layout: one CACHE buffer; c->rs[il * ALICE_LAYER_STATES + k] is F32
 * [ne0, ne1, ne2, n_seq] (contiguous), so sequence s owns one contiguous
 * slice of each tensor. Unused slots have buf NULL and ne 0. */
#ifndef ALICE_CORE_RECURRENT_H
#define ALICE_CORE_RECURRENT_H

#include <stdbool.h>
#include <stdint.h>

#include "alice/status.h"

struct alice_model;
struct alice_context;

bool alice_rs_model_has_state(const struct alice_model *m);
/* Allocate and zero the state (no-op when the arch has none). */
enum alice_status alice_rs_create(struct alice_context *c, struct alice_error *err);
void alice_rs_free(struct alice_context *c);
/* Zero sequence seq's state (logged if the backend fails). */
void alice_rs_clear_seq(struct alice_context *c, int32_t seq);

#endif
