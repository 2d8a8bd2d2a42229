/* lexer.h — the token stream of a template (internal to core/jinja/). */
#ifndef ALICE_JINJA_LEXER_H
#define ALICE_JINJA_LEXER_H

#include "jinja/jinja_internal.h"

enum jtt { JTT_EOF, JTT_TEXT, JTT_VAR_BEGIN, JTT_VAR_END, JTT_BLOCK_BEGIN, JTT_BLOCK_END,
	   JTT_NAME, JTT_STRING, JTT_INT, JTT_FLOAT, JTT_OP };
struct jtok {
	enum jtt type;
	int line;
	struct jstr *s; /* text, name, string value, operator */
	int64_t i;
	double f;
};

/* Tokens in the arena (*ntok of them, the last JTT_EOF); jumps to jb with err
 * set on a lexical error. */
struct jtok *jinja_lex(struct jarena *a, const char *src, size_t len, size_t *ntok,
		       struct alice_error *err, jmp_buf *jb);

#endif
