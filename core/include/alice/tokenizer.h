/* tokenizer.h — text <-> token ids, exactly as llama.cpp does it.
 *
 * Supported vocabularies (tokenizer.ggml.model):
 *   "llama"  SentencePiece-style (score-driven bigram merges, <0xNN> byte
 *            fallback, spaces as U+2581, optional space prefix)
 *   "gpt2"   byte-level BPE (merge ranks, GPT-2 byte alphabet) with the
 *            pre-tokenizer named by tokenizer.ggml.pre: "default", "gpt-2"
 *            (and llama.cpp's aliases of it), "llama-bpe"/"llama3"/"llama-v3"
 *            (and aliases), "qwen2" (and aliases), "qwen35"
 *   "gemma4" Gemma 4's BPE over raw UTF-8 with U+2581 for spaces and
 *            <0xNN> byte fallback (llama.cpp treats it as a BPE variant)
 * Anything else gives ALICE_ERR_UNSUPPORTED naming the model / pre name.
 *
 * A loaded tokenizer is immutable: encode/decode/piece may be called from any
 * number of threads at once. It borrows the GGUF handle it was loaded from
 * (token strings point into the mapping), so the handle must outlive it.
 *
 * Special tokens: with parse_special=true, text equal to a control or
 * user-defined token (e.g. "<|im_start|>" from a chat template) becomes that
 * token; with parse_special=false only user-defined tokens are matched, so a
 * control token typed by a user ("<|im_end|>") stays ordinary text. */
#ifndef ALICE_TOKENIZER_H
#define ALICE_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "alice/gguf.h"
#include "alice/status.h"

struct alice_tokenizer; /* opaque, immutable after load */

/* Load from GGUF metadata (tokenizer.ggml.*). Borrows g: it must outlive the
 * tokenizer. On failure *out is NULL and err names the file and problem. */
enum alice_status alice_tokenizer_load(const struct alice_gguf *g, struct alice_tokenizer **out,
				       struct alice_error *err);
void alice_tokenizer_free(struct alice_tokenizer *t); /* NULL is a no-op */

int32_t alice_tokenizer_n_vocab(const struct alice_tokenizer *t);
/* Special ids, -1 when the vocabulary has none. */
int32_t alice_tokenizer_bos(const struct alice_tokenizer *t);
int32_t alice_tokenizer_eos(const struct alice_tokenizer *t);
/* End of turn: tokenizer.ggml.eot_token_id, else the first of llama.cpp's
 * known EOT texts present ("<|eot_id|>", "<|im_end|>", "<|end|>",
 * "<end_of_turn>", "<|endoftext|>", ...), in that order of preference. */
int32_t alice_tokenizer_eot(const struct alice_tokenizer *t);
int32_t alice_tokenizer_eom(const struct alice_tokenizer *t);
int32_t alice_tokenizer_unk(const struct alice_tokenizer *t);
int32_t alice_tokenizer_pad(const struct alice_tokenizer *t);
/* Whether encode(add_special=true) prepends BOS / appends EOS
 * (tokenizer.ggml.add_bos_token / add_eos_token, else llama.cpp's default
 * for the vocabulary type: true for SPM, llama-bpe and gemma4). */
bool alice_tokenizer_add_bos(const struct alice_tokenizer *t);
bool alice_tokenizer_add_eos(const struct alice_tokenizer *t);
/* End of generation: eos, eot, eom, FIM pad/repo/file-sep tokens and every
 * token whose text is in llama.cpp's EOG list (<|im_end|>, <|eot_id|>,
 * <end_of_turn>, <|endoftext|>, <|end|>, ...). False for out-of-range ids. */
bool alice_tokenizer_is_eog(const struct alice_tokenizer *t, int32_t id);
/* Control (or unknown) tokens: not rendered unless asked for. */
bool alice_tokenizer_is_control(const struct alice_tokenizer *t, int32_t id);
const char *alice_tokenizer_model_name(const struct alice_tokenizer *t); /* "llama", "gpt2", "gemma4" */
const char *alice_tokenizer_pre_name(const struct alice_tokenizer *t);   /* tokenizer.ggml.pre or "default" */

/* Encode len bytes of text (any bytes; invalid UTF-8 is handled as llama.cpp
 * does). Appends to the caller-owned growable array *tokens (malloc'd; may
 * be NULL with *n_tokens 0 on entry; caller frees). add_special: BOS/EOS as
 * the metadata says; parse_special: see the header comment. */
enum alice_status alice_tokenizer_encode(const struct alice_tokenizer *t, const char *text, size_t len,
					 bool add_special, bool parse_special, int32_t **tokens,
					 size_t *n_tokens, struct alice_error *err);

/* The bytes token id detokenizes to (llama_token_to_piece, lstrip 0): control
 * and unknown tokens give their text if render_special, else nothing. Writes
 * at most cap bytes (no NUL) and returns the full length; 0 for bad ids. */
size_t alice_tokenizer_piece(const struct alice_tokenizer *t, int32_t id, bool render_special, char *buf,
			     size_t cap);
/* Zero-copy form for grammar masking: pointer to the token's decoded bytes
 * (render_special=true form) owned by t; *is_special tells whether the token
 * is control/unknown (renders as nothing in normal text). NULL for bad ids. */
const char *alice_tokenizer_token_bytes(const struct alice_tokenizer *t, int32_t id, size_t *len,
					bool *is_special);
/* The raw vocabulary string (not NUL-terminated, owned by t / the GGUF
 * mapping); NULL for bad ids. */
const char *alice_tokenizer_token_text(const struct alice_tokenizer *t, int32_t id, size_t *len);
/* Id of an exact vocabulary string, or -1. */
int32_t alice_tokenizer_find(const struct alice_tokenizer *t, const char *text, size_t len);

/* Detokenize a whole sequence like llama_detokenize(remove_special=false,
 * unparse_special=render_special): pieces concatenated, the first token's one
 * leading space dropped when the vocabulary adds a space prefix (SPM), and
 * llama.cpp's clean-up of spaces before punctuation / contractions for the
 * BPE vocabularies that ask for it (gpt-2, llama-bpe, gemma4). *out is
 * malloc'd and NUL-terminated (caller frees); bytes may be invalid UTF-8 when
 * the ids end inside a character. Bad ids give ALICE_ERR_RANGE. */
enum alice_status alice_tokenizer_decode(const struct alice_tokenizer *t, const int32_t *ids, size_t n,
					 bool render_special, char **out, size_t *out_len,
					 struct alice_error *err);

/* A valid UTF-8 copy of n bytes under the project's one repair policy (the
 * detok stream's): each maximal invalid subpart, and an unfinished character
 * at the end, becomes one U+FFFD — what Python's errors="replace" and the
 * WHATWG decoder produce. NUL-terminated; the caller frees; NULL when out
 * of memory. out_len may be NULL. */
char *alice_utf8_repair(const char *s, size_t n, size_t *out_len);

/* Incremental detokenizer for streaming generated tokens. Emits the token
 * pieces (as llama-server streams them: no first-space removal, no space
 * clean-up) but only ever whole UTF-8 characters: an incomplete sequence is
 * kept until the next token completes it; bytes that can never form a valid
 * character become U+FFFD (one per maximal invalid subpart); flush emits
 * what is left (an unfinished sequence as one U+FFFD). Concatenating every
 * push and the flush gives the pieces' bytes whenever they are valid UTF-8.
 * One stream per sequence; not thread-safe; borrows t. */
struct alice_detok_stream;
enum alice_status alice_detok_stream_create(const struct alice_tokenizer *t, bool render_special,
					    struct alice_detok_stream **out, struct alice_error *err);
void alice_detok_stream_free(struct alice_detok_stream *s); /* NULL is a no-op */
/* Feed one id. *text (owned by the stream, NUL-terminated, valid until the
 * next call) gets the complete UTF-8 text to emit now, possibly empty.
 * Bad ids: ALICE_ERR_RANGE. */
enum alice_status alice_detok_stream_push(struct alice_detok_stream *s, int32_t id, const char **text,
					  size_t *len, struct alice_error *err);
/* End of the sequence: the remaining text (see above; NUL-terminated, static
 * storage); the stream is reset for a new sequence. */
void alice_detok_stream_flush(struct alice_detok_stream *s, const char **text, size_t *len);

#endif
