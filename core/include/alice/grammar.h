/* grammar.h — GBNF grammars for constrained decoding.
 *
 * Four objects:
 *  - struct alice_grammar: a parsed, checked GBNF grammar (text -> rules).
 *    Immutable after parse; shareable between threads and requests; reference
 *    counted (alice_grammar_retain / alice_grammar_free).
 *  - struct alice_grammar_vocab: a byte trie over a tokenizer's token pieces,
 *    built once per vocabulary. Immutable; shareable between threads.
 *  - struct alice_grammar_state: one request's position in the grammar (a set
 *    of pushdown stacks over Unicode code points, plus a pending partial UTF-8
 *    character). It owns private caches (a lazily built byte-level DFA and the
 *    last masks), so a state is used from one thread at a time; give each
 *    request (or each beam) its own state via _create or _clone.
 *  - struct alice_grammar_constraint: what a generation loop (the engine, the
 *    CLI) holds per sequence: a state, the vocab's trie and the tokenizer, so
 *    that mask and accept speak token ids. Create it per request and hand it
 *    to struct alice_engine_request.grammar, or drive it yourself.
 *
 * GBNF accepted here (the llama.cpp dialect):
 *   name ::= alternatives     names: [A-Za-z0-9-]+; `root` is required
 *   "lit"  [a-z0-9_] [^"\\]  .  ( group )  a | b  x*  x+  x?  x{m}  x{m,}  x{m,n}
 *   escapes in literals and classes: \n \r \t \\ \" \[ \] \xNN \uNNNN \UNNNNNNNN
 *   # comments run to the end of the line.
 *   A newline ends a rule, except right after `::=` or `|`, and anywhere inside
 *   ( ... ). Rules may be referenced before they are defined.
 * Rejected with an error (line:column, 1-based, column in bytes): undefined or
 * duplicate rules, missing root, empty grammar, unterminated literals/classes/
 * groups, bad escapes, empty class `[]`, invalid ranges and repetition bounds,
 * left recursion (direct or through nullable rules; the message names the
 * rule), rules reachable from root that can never finish, nesting deeper than
 * ALICE_GRAMMAR_MAX_DEPTH, and grammars that expand to too many elements.
 *
 * Matching: tokens are byte strings; bytes are decoded as UTF-8 and matched
 * code point by code point. A token may end inside a character: it is accepted
 * iff its bytes are a valid UTF-8 prefix of some code point the grammar can
 * take next. Invalid UTF-8 (stray continuation bytes, overlongs, surrogates,
 * > U+10FFFF) never matches.
 *
 * Stop semantics for the engine, per step:
 *   mask = alice_grammar_state_mask(...)  (EOG tokens allowed iff can_end)
 *   after sampling: alice_grammar_state_accept_bytes(piece) or, for EOG, stop.
 *   if alice_grammar_state_must_end(): stop now (nothing else can follow).
 */
#ifndef ALICE_GRAMMAR_H
#define ALICE_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alice/status.h"

#define ALICE_GRAMMAR_MAX_DEPTH 200        /* nesting of ( ) in grammar text */
#define ALICE_GRAMMAR_MAX_ELEMENTS 2000000 /* after expanding repetitions */
#define ALICE_GRAMMAR_MAX_STACKS 4096      /* live stacks in one state */

struct alice_grammar;
struct alice_grammar_state;
struct alice_grammar_vocab;

/* Where a parse error is (1-based line and byte column); 0/0 when the error
 * has no position (out of memory, missing root, ...). */
struct alice_grammar_errpos {
	int line;
	int col;
};

/* Parse `len` bytes of GBNF. On success *out is a new grammar the caller
 * frees with alice_grammar_free. On failure returns ALICE_ERR_INVALID (or
 * ALICE_ERR_NOMEM), err->msg reads "line L:C: problem near '...'", and pos
 * (optional) receives the position. Never crashes on any input. */
enum alice_status alice_grammar_parse(const char *text, size_t len, struct alice_grammar **out,
				      struct alice_error *err, struct alice_grammar_errpos *pos);
/* Drop one reference (the parse's, or one taken by alice_grammar_retain);
 * the last one frees. NULL is a no-op. */
void alice_grammar_free(struct alice_grammar *g);
/* Take one more reference (thread-safe); returns g. */
struct alice_grammar *alice_grammar_retain(struct alice_grammar *g);
/* Bytes of the GBNF text the grammar was compiled from (for size caps). */
size_t alice_grammar_source_bytes(const struct alice_grammar *g);
/* Number of rules after expansion (user rules + generated helper rules). */
size_t alice_grammar_rule_count(const struct alice_grammar *g);

/* A state at the start of `g` (g is borrowed; it must outlive the state). */
enum alice_status alice_grammar_state_create(const struct alice_grammar *g,
					     struct alice_grammar_state **out,
					     struct alice_error *err);
/* A new independent state at the same position as `st` (caches not copied). */
enum alice_status alice_grammar_state_clone(const struct alice_grammar_state *st,
					    struct alice_grammar_state **out,
					    struct alice_error *err);
void alice_grammar_state_free(struct alice_grammar_state *st);

/* Advance by `n` bytes (a token's piece). ALICE_ERR_INVALID when the grammar
 * rejects them (the state is then unchanged); ALICE_ERR_RANGE when the
 * grammar is too ambiguous (more than ALICE_GRAMMAR_MAX_STACKS stacks). */
enum alice_status alice_grammar_state_accept_bytes(struct alice_grammar_state *st,
						   const void *bytes, size_t n,
						   struct alice_error *err);
/* Would accept_bytes succeed? Does not move the state (may fill caches). */
bool alice_grammar_state_check_bytes(struct alice_grammar_state *st, const void *bytes, size_t n);
/* The grammar accepts the text so far: EOS/stop may be sampled. */
bool alice_grammar_state_can_end(const struct alice_grammar_state *st);
/* Only the end is possible: no byte can follow. The engine must stop. */
bool alice_grammar_state_must_end(const struct alice_grammar_state *st);

/* Token kinds for alice_grammar_vocab_build. */
enum alice_grammar_token_kind {
	ALICE_GRAMMAR_TOKEN_TEXT = 0,    /* its piece bytes are matched by the grammar */
	ALICE_GRAMMAR_TOKEN_CONTROL = 1, /* never allowed under a grammar */
	ALICE_GRAMMAR_TOKEN_EOG = 2,     /* end of generation: allowed iff can_end */
};

/* Build the trie over `n` tokens: pieces[i] points to lens[i] bytes (the
 * decoded piece). kinds (optional, n entries of enum alice_grammar_token_kind)
 * marks control and end-of-generation tokens; NULL means all text. Empty text
 * pieces are never allowed (they would not advance). Inputs are copied; the
 * caller frees the vocab with alice_grammar_vocab_free. */
enum alice_status alice_grammar_vocab_build(const char *const *pieces, const size_t *lens,
					    const uint8_t *kinds, size_t n,
					    struct alice_grammar_vocab **out,
					    struct alice_error *err);
/* The trie over a tokenizer's whole vocabulary: each token's decoded bytes
 * (alice_tokenizer_token_bytes), end-of-generation tokens as EOG, other
 * control tokens as CONTROL. Build it once per model; it borrows nothing. */
struct alice_tokenizer;
enum alice_status alice_grammar_vocab_from_tokenizer(const struct alice_tokenizer *tok,
						     struct alice_grammar_vocab **out,
						     struct alice_error *err);
void alice_grammar_vocab_free(struct alice_grammar_vocab *v);
size_t alice_grammar_vocab_size(const struct alice_grammar_vocab *v);
size_t alice_grammar_vocab_trie_nodes(const struct alice_grammar_vocab *v);

/* Fill mask[0..vocab_size) with 1 for tokens allowed at `st`, 0 otherwise.
 * Walks the trie once, pruning rejected prefixes; the last few masks are
 * cached per state (keyed by the vocab's address: a vocab must outlive the
 * states it is used with). An all-zero mask means the vocabulary cannot spell
 * anything the grammar accepts here: the engine should fail the request.
 * Errors: ALICE_ERR_RANGE (grammar too ambiguous: too many stacks, or more
 * than a fixed budget of matcher work in one call: 2^19 units of stacks
 * scanned plus items expanded, ~10 ms; accept/check get that per 64 bytes),
 * ALICE_ERR_NOMEM.
 * Cost on the 128k llama-bpe vocab with a JSON grammar (alice-grammar-bench):
 * ~0.5-0.7 ms inside a string, < 0.1 ms elsewhere, ~2 us for a cached state. */
enum alice_status alice_grammar_state_mask(struct alice_grammar_state *st,
					   const struct alice_grammar_vocab *v, uint8_t *mask,
					   struct alice_error *err);

/* ---- the per-sequence constraint (grammar_constraint.c) ----
 *
 * create: a state at the start of g (the constraint takes its own reference
 * to g, so the caller may free its own at once); v and tok are borrowed and
 * must outlive the constraint (both live as long as the model). v must have
 * been built from tok. The caller frees the constraint, unless it handed it
 * to alice_engine_submit successfully (then the engine does). */
struct alice_grammar_constraint;
enum alice_status alice_grammar_constraint_create(struct alice_grammar *g, const struct alice_grammar_vocab *v,
						  const struct alice_tokenizer *tok,
						  struct alice_grammar_constraint **out,
						  struct alice_error *err);
void alice_grammar_constraint_free(struct alice_grammar_constraint *c); /* NULL is a no-op */
/* Fill mask[0..n_vocab): 1 = the token may come next, 0 = not (EOG tokens
 * are allowed iff the grammar can end here). n_vocab must be the vocab's
 * size. Errors as alice_grammar_state_mask. */
enum alice_status alice_grammar_constraint_mask(struct alice_grammar_constraint *c, uint8_t *mask,
						int32_t n_vocab, struct alice_error *err);
/* Advance by the sampled token (not an EOG token: that ends the sequence).
 * *must_end is set when nothing may follow (the sequence must stop now).
 * ALICE_ERR_INVALID when the grammar rejects the token's bytes,
 * ALICE_ERR_RANGE for a bad id or a grammar too ambiguous. */
enum alice_status alice_grammar_constraint_accept(struct alice_grammar_constraint *c, int32_t token,
						  bool *must_end, struct alice_error *err);

#endif
