/* tool_call_internal.h — what the parse (tool_call.c) and the grammar
 * (tool_grammar.c) of tool calls must agree on. */
#ifndef ALICE_TOOL_CALL_INTERNAL_H
#define ALICE_TOOL_CALL_INTERNAL_H

#include <stdbool.h>

struct json_object;

/* A QWEN35 parameter is written as raw text (not JSON) when its schema's
 * type is "string" or a list naming "string". */
bool alice_tool_schema_is_string(struct json_object *param_schema);

#endif
