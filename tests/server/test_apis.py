#!/usr/bin/env python3
"""The Responses API (/v1/responses) and Anthropic's Messages API
(/v1/messages, /v1/messages/count_tokens) of alice-llm-server, and the chat
page at /, over real HTTP on the bundled tiny-tolstoy model (stdlib only).

Both APIs are translators onto the chat pipeline, so at temperature 0 their
text must equal /v1/chat/completions' for the same conversation; beside that:
response shapes and usage, the exact streamed event order (named SSE events,
sequence numbers, deltas adding up to the final text), stop_reason /
stop_sequence, max_output_tokens -> incomplete, text.format json_schema,
store / previous_response_id / GET /v1/responses/{id} and the LRU bound
(--responses-store), errors in each API's shape (Anthropic's for /v1/messages,
router errors included), x-api-key, a client that drops a stream cancels its
generation, and the page (served, --no-webui).

Tool round trips run on the qwen3 fixture (its template teaches Hermes
<tool_call> JSON; the chat route's tool calling parses them): a forced call
(tool_choice required / any) becomes a function_call output item / tool_use
block with valid arguments, streamed (function_call_arguments.* events,
input_json_delta) as not, and the call plus its result go back in
(function_call + function_call_output items, previous_response_id +
function_call_output, tool_use + tool_result blocks).

usage: test_apis.py SERVER_BINARY BACKEND_LIB_DIR FIXTURES_DIR
"""
import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_server as ts  # noqa: E402

check = ts.check
CHAT = "/v1/chat/completions"
RESP = "/v1/responses"
MSGS = "/v1/messages"


def named_sse(raw):
    """Strict framing of named events: b'event: NAME\\ndata: JSON\\n\\n'.
    Returns [(name, obj)] or (None, why)."""
    out = []
    pos = 0
    while pos < len(raw):
        end = raw.find(b"\n\n", pos)
        if end < 0:
            return None, f"unterminated event at byte {pos}"
        lines = raw[pos:end].split(b"\n")
        if raw.startswith(b": keep-alive", pos):  # the server's heartbeat comment while queued
            pos = end + 2
            continue
        if len(lines) != 2 or not lines[0].startswith(b"event: ") or not lines[1].startswith(b"data: "):
            return None, f"bad event at byte {pos}: {raw[pos:end][:80]!r}"
        out.append((lines[0][7:].decode(), json.loads(lines[1][6:])))
        pos = end + 2
    return out, ""


def chat_text(s, messages, max_tokens):
    st, js, _ = s.post(CHAT, {"messages": messages, "temperature": 0, "max_tokens": max_tokens})
    return js["choices"][0]["message"]["content"] if st == 200 else None


def is_anthropic_error(js, etype="invalid_request_error"):
    return (isinstance(js, dict) and js.get("type") == "error" and isinstance(js.get("error"), dict)
            and js["error"].get("type") == etype and isinstance(js["error"].get("message"), str))


# ---- Responses ----

def test_responses_basic(s):
    body = {"model": "x", "instructions": "You are terse.", "input": "Who is Pierre?", "temperature": 0,
            "max_output_tokens": 12}
    st, js, h = s.post(RESP, body)
    ok = check("responses 200 object=response", st == 200 and js["object"] == "response"
               and js["id"].startswith("resp_"), js)
    if not ok:
        return
    out = js["output"]
    check("responses output: one assistant message with output_text",
          len(out) == 1 and out[0]["type"] == "message" and out[0]["role"] == "assistant"
          and out[0]["content"][0]["type"] == "output_text", out)
    text = out[0]["content"][0]["text"]
    want = chat_text(s, [{"role": "system", "content": "You are terse."},
                         {"role": "user", "content": "Who is Pierre?"}], 12)
    check("responses text == chat completion text (instructions = system message)", text == want, (text, want))
    u = js["usage"]
    check("responses usage input/output/total", u["input_tokens"] > 0 and 0 < u["output_tokens"] <= 12
          and u["total_tokens"] == u["input_tokens"] + u["output_tokens"], u)
    inc = u["output_tokens"] == 12
    check("status incomplete (max_output_tokens) iff the cap was reached",
          js["status"] == ("incomplete" if inc else "completed")
          and (js["incomplete_details"] == {"reason": "max_output_tokens"} if inc else js["incomplete_details"] is None),
          (js["status"], js["incomplete_details"], u))
    check("responses echo instructions / max_output_tokens", js["instructions"] == "You are terse."
          and js["max_output_tokens"] == 12 and js["store"] is True, js)
    # the same as a list of message items with input_text parts
    st, js2, _ = s.post(RESP, {"input": [{"role": "system", "content": "You are terse."},
                                         {"type": "message", "role": "user",
                                          "content": [{"type": "input_text", "text": "Who is "},
                                                      {"type": "input_text", "text": "Pierre?"}]}],
                               "temperature": 0, "max_output_tokens": 12})
    check("responses: message items with input_text parts == string input",
          st == 200 and js2["output"][0]["content"][0]["text"] == text, js2)


def test_responses_stream(s):
    body = {"input": "Tell me about Natasha.", "temperature": 0, "max_output_tokens": 10}
    st, full, _ = s.post(RESP, body)
    head, raw, _ = ts.raw_stream(s.port, RESP, dict(body, stream=True))
    check("responses stream 200 text/event-stream", head.startswith("HTTP/1.1 200")
          and "text/event-stream" in head.lower(), head)
    evs, err = named_sse(raw)
    if not check("responses stream framing (event: + data: lines)", evs is not None, err):
        return
    names = [n for n, _ in evs]
    core = [n for n in names if n != "response.output_text.delta"]
    final = "response.incomplete" if full["status"] == "incomplete" else "response.completed"
    want = ["response.created", "response.in_progress", "response.output_item.added",
            "response.content_part.added", "response.output_text.done", "response.content_part.done",
            "response.output_item.done", final]
    check("responses stream event order", core == want and names[4:-4] == ["response.output_text.delta"] * (len(names) - 8),
          names)
    check("event name == data.type", all(n == o["type"] for n, o in evs), names)
    check("sequence_number 0, 1, 2, ...", [o["sequence_number"] for _, o in evs] == list(range(len(evs))))
    deltas = "".join(o["delta"] for n, o in evs if n == "response.output_text.delta")
    done = next(o for n, o in evs if n == "response.output_text.done")["text"]
    last = evs[-1][1]["response"]
    text = full["output"][0]["content"][0]["text"]
    check("deltas == output_text.done == final response text == non-stream text",
          deltas == done == last["output"][0]["content"][0]["text"] == text, (deltas, done, text))
    check("created in_progress without usage; final with usage",
          evs[0][1]["response"]["status"] == "in_progress" and evs[0][1]["response"]["usage"] is None
          and last["usage"]["output_tokens"] == full["usage"]["output_tokens"], (evs[0], last))
    item_ids = {o.get("item_id") for n, o in evs if "item_id" in o}
    check("one item id across the part events", len(item_ids) == 1, item_ids)


def test_responses_store(s):
    st, a, _ = s.post(RESP, {"input": "Who is Pierre?", "temperature": 0, "max_output_tokens": 8})
    if not check("first response 200", st == 200, a):
        return
    st, g, _ = s.req("GET", f"{RESP}/{a['id']}")
    check("GET /v1/responses/{id} returns the stored response", st == 200 and g == a, (st, g))
    st, b, _ = s.post(RESP, {"input": "And Natasha?", "previous_response_id": a["id"], "temperature": 0,
                             "max_output_tokens": 8})
    ok = check("previous_response_id 200", st == 200 and b["previous_response_id"] == a["id"], b)
    if ok:
        a_text = a["output"][0]["content"][0]["text"]
        want = chat_text(s, [{"role": "user", "content": "Who is Pierre?"},
                             {"role": "assistant", "content": a_text},
                             {"role": "user", "content": "And Natasha?"}], 8)
        check("continued response == chat with the whole conversation",
              b["output"][0]["content"][0]["text"] == want, (b["output"], want))
        check("continued response's input counts the earlier turns",
              b["usage"]["input_tokens"] > a["usage"]["input_tokens"] + a["usage"]["output_tokens"], b["usage"])
    # instructions are not carried over (as OpenAI): a new system message each time
    st, c, _ = s.post(RESP, {"input": "Bye.", "store": False, "temperature": 0, "max_output_tokens": 4})
    check("store false: 200 but not stored", st == 200 and c["store"] is False
          and s.req("GET", f"{RESP}/{c['id']}")[0] == 404, c)
    st, js, _ = s.post(RESP, {"input": "x", "previous_response_id": c["id"]})
    check("previous_response_id of an unstored response: 400 previous_response_not_found",
          st == 400 and ts.is_error(js, "previous_response_id") and js["error"]["code"] == "previous_response_not_found",
          (st, js))
    st, js, _ = s.req("GET", f"{RESP}/resp_doesnotexist")
    check("GET unknown response: 404", st == 404 and ts.is_error(js), (st, js))


def test_responses_lru():
    s = ts.Server("--responses-store", "2")
    try:
        ids = []
        for i in range(3):
            st, js, _ = s.post(RESP, {"input": f"Line {i}", "max_output_tokens": 2})
            ids.append(js["id"])
        check("--responses-store 2: the oldest of 3 is dropped", s.req("GET", f"{RESP}/{ids[0]}")[0] == 404
              and s.req("GET", f"{RESP}/{ids[1]}")[0] == 200 and s.req("GET", f"{RESP}/{ids[2]}")[0] == 200)
        s.req("GET", f"{RESP}/{ids[1]}")  # a use: ids[2] is now the least recent
        st, js, _ = s.post(RESP, {"input": "Line 3", "max_output_tokens": 2})
        check("a lookup counts as a use (LRU, not FIFO)", s.req("GET", f"{RESP}/{ids[1]}")[0] == 200
              and s.req("GET", f"{RESP}/{ids[2]}")[0] == 404)
    finally:
        s.stop()
    s = ts.Server("--responses-store", "0")
    try:
        st, js, _ = s.post(RESP, {"input": "x", "max_output_tokens": 2})
        check("--responses-store 0 keeps nothing", st == 200 and s.req("GET", f"{RESP}/{js['id']}")[0] == 404)
    finally:
        s.stop()


def test_responses_format_and_errors(s):
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
              "additionalProperties": False}
    st, js, _ = s.post(RESP, {"input": "Answer in JSON.", "max_output_tokens": 40, "temperature": 0,
                              "text": {"format": {"type": "json_schema", "name": "answer", "schema": schema}}})
    try:
        parsed = json.loads(js["output"][0]["content"][0]["text"])
    except (ValueError, KeyError, TypeError):
        parsed = None
    check("text.format json_schema constrains the output",
          st == 200 and isinstance(parsed, dict) and isinstance(parsed.get("ok"), bool), js)
    check("text.format echoed", js and js.get("text", {}).get("format", {}).get("name") == "answer")
    cases = [
        ({"max_output_tokens": 4}, "input", "missing input"),
        ({"input": 5}, "input", "input of the wrong type"),
        ({"input": [{"type": "message", "role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
         "input", "an input_image part"),
        ({"input": [{"type": "web_search_call"}]}, "input", "an unknown item type"),
        ({"input": [{"role": "robot", "content": "x"}]}, "input", "an unknown role"),
        ({"input": "x", "max_output_tokens": 0}, "max_output_tokens", "max_output_tokens 0"),
        ({"input": "x", "temperature": 9}, "temperature", "temperature 9"),
        ({"input": "x", "tools": [{"type": "web_search"}]}, "tools", "a non-function tool"),
        ({"input": "x", "text": {"format": {"type": "yaml"}}}, "text.format", "an unknown text.format"),
        ({"input": "x", "store": "yes"}, "store", "store not a boolean"),
    ]
    for body, param, what in cases:
        st, js, _ = s.post(RESP, body)
        check(f"responses 400 for {what} (param {param})", st == 400 and ts.is_error(js, param), (st, js))


def test_responses_disconnect(s):
    # a string of at least 1200 characters: the grammar allows no early end
    long = {"type": "object", "properties": {"s": {"type": "string", "minLength": 1200}}, "required": ["s"]}
    body = {"input": "Tell me a long story.", "max_output_tokens": 480, "stream": True, "temperature": 1,
            "text": {"format": {"type": "json_schema", "name": "story", "schema": long}}}
    head, rest, sock = ts.raw_stream(s.port, RESP, body, read_all=False)
    while b"response.output_text.delta" not in rest:
        chunk = sock.recv(4096)
        if not chunk:
            break
        rest += chunk
    busy = ts.slots_busy(s)
    sock.close()
    t = ts.wait_idle(s, 5)
    check("responses stream: a dropped client frees its slot", busy == 1 and t is not None and t < 2, (busy, t))
    time.sleep(0.1)
    lines = [l for l in s.logtext().splitlines() if "POST /v1/responses 499" in l]
    n = int(lines[-1].split("completion=")[1].split()[0]) if lines else -1
    check("responses stream: the generation is cancelled (logged 499, early)", 0 <= n < 400, lines)


# ---- Messages ----

def test_messages_basic(s):
    body = {"model": "claude-x", "system": [{"type": "text", "text": "You are terse."}], "max_tokens": 12,
            "temperature": 0, "messages": [{"role": "user", "content": [{"type": "text", "text": "Who is Pierre?"}]}]}
    st, js, h = s.post(MSGS, body, headers={"anthropic-version": "2023-06-01"})
    ok = check("messages 200 type=message", st == 200 and js["type"] == "message" and js["role"] == "assistant"
               and js["id"].startswith("msg_"), js)
    if not ok:
        return
    text = js["content"][0]["text"]
    want = chat_text(s, [{"role": "system", "content": "You are terse."},
                         {"role": "user", "content": "Who is Pierre?"}], 12)
    check("messages text == chat completion text", js["content"][0]["type"] == "text" and text == want,
          (text, want))
    u = js["usage"]
    check("messages stop_reason max_tokens iff output_tokens == max_tokens",
          js["stop_reason"] == ("max_tokens" if u["output_tokens"] == 12 else "end_turn")
          and js["stop_sequence"] is None, js)
    st, ct, _ = s.post(MSGS + "/count_tokens", {k: v for k, v in body.items() if k != "max_tokens"})
    check("count_tokens == the request's usage.input_tokens", st == 200 and ct == {"input_tokens": u["input_tokens"]},
          (ct, u))
    # stop_sequences: cut at a word of the greedy text
    words = [w for w in text.split(" ") if len(w) >= 3]
    if words:
        stop = words[min(1, len(words) - 1)]
        st, js2, _ = s.post(MSGS, dict(body, stop_sequences=[stop]))
        check("stop_sequences: stop_reason stop_sequence, the text before it",
              st == 200 and js2["stop_reason"] == "stop_sequence" and js2["stop_sequence"] == stop
              and js2["content"][0]["text"] == text[:text.index(stop)], (stop, js2))


def test_messages_stream(s):
    body = {"max_tokens": 10, "temperature": 0, "messages": [{"role": "user", "content": "Tell me about Natasha."}]}
    st, full, _ = s.post(MSGS, body)
    head, raw, _ = ts.raw_stream(s.port, MSGS, dict(body, stream=True))
    evs, err = named_sse(raw)
    if not check("messages stream framing", head.startswith("HTTP/1.1 200") and evs is not None, (head, err)):
        return
    names = [n for n, _ in evs]
    nd = len(names) - 6
    check("messages stream event order", names == ["message_start", "content_block_start", "ping"]
          + ["content_block_delta"] * nd + ["content_block_stop", "message_delta", "message_stop"], names)
    check("event name == data.type", all(n == o["type"] for n, o in evs))
    text = "".join(o["delta"]["text"] for n, o in evs if n == "content_block_delta"
                   if o["delta"]["type"] == "text_delta")
    check("streamed deltas == non-stream text", text == full["content"][0]["text"], (text, full))
    start, delta = evs[0][1]["message"], evs[-2][1]
    check("message_start: usage.input_tokens, no stop_reason yet", start["usage"]["input_tokens"] ==
          full["usage"]["input_tokens"] and start["stop_reason"] is None and start["content"] == [], start)
    check("message_delta: stop_reason and output_tokens", delta["delta"]["stop_reason"] == full["stop_reason"]
          and delta["usage"]["output_tokens"] == full["usage"]["output_tokens"], delta)


def test_messages_errors(s):
    cases = [
        ({"messages": [{"role": "user", "content": "x"}]}, "missing max_tokens"),
        ({"max_tokens": 4}, "missing messages"),
        ({"max_tokens": 4, "messages": [{"role": "system", "content": "x"}]}, "a system role in messages"),
        ({"max_tokens": 4, "messages": [{"role": "user", "content": [{"type": "image", "source": {}}]}]},
         "an image block"),
        ({"max_tokens": 0, "messages": [{"role": "user", "content": "x"}]}, "max_tokens 0"),
        ({"max_tokens": 4, "stop_sequences": ["a", "b", "c", "d", "e"], "messages": [{"role": "user", "content": "x"}]},
         "five stop sequences"),
        ({"max_tokens": 4, "tool_choice": {"type": "sometimes"}, "messages": [{"role": "user", "content": "x"}]},
         "a bad tool_choice"),
    ]
    for body, what in cases:
        st, js, _ = s.post(MSGS, body)
        check(f"messages 400 in Anthropic's shape for {what}", st == 400 and is_anthropic_error(js), (st, js))
    st, js, _ = s.post(MSGS, "{not json")
    check("messages: invalid JSON, Anthropic's shape", st == 400 and is_anthropic_error(js), js)
    st, js, _ = s.req("GET", MSGS)
    check("messages: the router's 405 in Anthropic's shape", st == 405 and is_anthropic_error(js), (st, js))
    st, js, _ = s.post(MSGS + "/count_tokens", {"messages": "x"})
    check("count_tokens 400 in Anthropic's shape", st == 400 and is_anthropic_error(js), js)


def test_api_key():
    s = ts.Server("--api-key", "sekret")
    try:
        body = {"max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}
        st, js, _ = s.post(MSGS, body)
        check("messages without a key: 401 authentication_error (Anthropic's shape)",
              st == 401 and is_anthropic_error(js, "authentication_error"), (st, js))
        st, js, _ = s.post(MSGS, body, headers={"x-api-key": "wrong"})
        check("wrong x-api-key: 401", st == 401 and is_anthropic_error(js, "authentication_error"), (st, js))
        st, js, _ = s.post(MSGS, body, headers={"x-api-key": "sekret", "anthropic-version": "2023-06-01"})
        check("x-api-key accepted", st == 200, (st, js))
        st, js, _ = s.post(MSGS, body, headers={"Authorization": "Bearer sekret"})
        check("Bearer accepted on /v1/messages", st == 200, (st, js))
        st, js, _ = s.post(RESP, {"input": "hi", "max_output_tokens": 2}, headers={"x-api-key": "sekret"})
        check("x-api-key accepted on /v1/responses", st == 200, (st, js))
        st, js, _ = s.post(RESP, {"input": "hi"})
        check("/v1/responses without a key: 401 in OpenAI's shape", st == 401 and ts.is_error(js), (st, js))
        st, js, h = s.req("GET", "/")
        check("the chat page needs no key", st == 200 and h["content-type"].startswith("text/html"), st)
    finally:
        s.stop()


# ---- hostile bodies ----

def test_type_confusion(s):
    """Every field of a valid body replaced by values of every JSON type, and
    nested items / blocks likewise: a 200 or a 4xx in the API's shape, never
    a crash or a 500."""
    weird = [None, True, -1, 0, 2.5, "", "x" * 300, [], [1, "a", None], {}, {"type": "text"}, {"a": {"b": []}}]
    resp = {"input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
                      {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
                      {"type": "function_call_output", "call_id": "c1", "output": "ok"}],
            "instructions": "be brief", "max_output_tokens": 2, "temperature": 0, "top_p": 1, "store": False,
            "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}}], "tool_choice": "auto",
            "text": {"format": {"type": "text"}}, "previous_response_id": None, "stream": False}
    msgs = {"system": [{"type": "text", "text": "be brief"}], "max_tokens": 2, "temperature": 0,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]},
                         {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}]},
                         {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}],
            "tools": [{"name": "f", "input_schema": {"type": "object"}}], "tool_choice": {"type": "auto"},
            "stop_sequences": ["zz"], "top_k": 5}
    bad = []
    n = 0
    for path, base, shape_ok in ((RESP, resp, ts.is_error), (MSGS, msgs, is_anthropic_error),
                                 (MSGS + "/count_tokens", msgs, is_anthropic_error)):
        bodies = []
        for k in base:
            for w in weird:
                bodies.append(dict(base, **{k: w}))
        first = "input" if path == RESP else "messages"
        for i in range(len(base[first])):
            for k in base[first][i]:
                for w in weird:
                    items = json.loads(json.dumps(base[first]))
                    items[i][k] = w
                    bodies.append(dict(base, **{first: items}))
        for b in bodies:
            st, js, _ = s.post(path, b)
            n += 1
            if not (st == 200 or (400 <= st < 500 and (shape_ok(js) if path != RESP else ts.is_error(js)))):
                bad.append((path, b, st, js))
    check(f"{n} type-confused bodies: each a 200 or a 4xx in the API's shape", not bad, bad[:3])
    check("the server is healthy after them", s.req("GET", "/health")[0] == 200)


# ---- tools (qwen3 fixture) ----

WX = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                       "days": {"type": "integer", "minimum": 1, "maximum": 3}},
      "required": ["city", "days"], "additionalProperties": False}


def valid_args(a):
    return (isinstance(a, dict) and set(a) == {"city", "days"} and isinstance(a["city"], str)
            and len(a["city"]) <= 12 and isinstance(a["days"], int) and 1 <= a["days"] <= 3)


def test_responses_tools(s):
    tools = [{"type": "function", "name": "wx", "description": "weather", "parameters": WX}]
    body = {"input": "Weather in Oslo?", "tools": tools, "tool_choice": "required", "temperature": 0,
            "max_output_tokens": 120}
    st, js, _ = s.post(RESP, body)
    calls = [o for o in (js or {}).get("output", []) if o["type"] == "function_call"] if st == 200 else []
    ok = check("responses tools: a forced call is a function_call item", st == 200 and len(calls) == 1
               and calls[0]["name"] == "wx" and calls[0]["call_id"].startswith("call_")
               and calls[0]["status"] == "completed", (st, js))
    if not ok:
        return
    call = calls[0]
    try:
        args = json.loads(call["arguments"])
    except ValueError:
        args = None
    check("responses tools: arguments valid against the schema", valid_args(args), call["arguments"])
    check("responses tools: no empty message item beside the call",
          all(o["type"] != "message" or o["content"][0]["text"] for o in js["output"]), js["output"])
    # streamed: the same call through output_item / function_call_arguments events
    head, raw, _ = ts.raw_stream(s.port, RESP, dict(body, stream=True))
    evs, err = named_sse(raw)
    if check("responses tools stream framing", evs is not None, err):
        names = [n for n, _ in evs]
        check("responses tools stream: function call events in order",
              names[:2] == ["response.created", "response.in_progress"] and names[-1] == "response.completed"
              and ["response.output_item.added", "response.function_call_arguments.delta",
                   "response.function_call_arguments.done", "response.output_item.done"] == names[-5:-1], names)
        done = next((o for n, o in evs if n == "response.function_call_arguments.done"), {})
        final = evs[-1][1]["response"]["output"]
        check("responses tools stream == non-stream (arguments, name)",
              done.get("arguments") == call["arguments"] and final[-1]["name"] == "wx"
              and final[-1]["arguments"] == call["arguments"], (done, final, call))
    # round trip: the call and its result as input items
    result = json.dumps({"temp_c": 21})
    st, js2, _ = s.post(RESP, {"input": [{"role": "user", "content": "Weather in Oslo?"}, call,
                                         {"type": "function_call_output", "call_id": call["call_id"], "output": result}],
                               "tools": tools, "temperature": 0, "max_output_tokens": 8})
    check("responses tools: function_call + function_call_output items are accepted", st == 200
          and js2["status"] in ("completed", "incomplete"), (st, js2))
    # the same through previous_response_id: the stored response holds the call
    st, js3, _ = s.post(RESP, {"previous_response_id": js["id"], "tools": tools, "temperature": 0,
                               "max_output_tokens": 8,
                               "input": [{"type": "function_call_output", "call_id": call["call_id"], "output": result}]})
    def gist(r):  # the output without its ids
        return [(o["type"], o["content"][0]["text"] if o["type"] == "message" else (o["name"], o["arguments"]))
                for o in r["output"]]
    check("responses tools: previous_response_id + function_call_output == the explicit history",
          st == 200 and gist(js3) == gist(js2) and js3["usage"]["input_tokens"] == js2["usage"]["input_tokens"],
          (js3, js2))
    st, ap, _ = s.post("/apply-template", {"messages": [
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": call["call_id"], "type": "function",
                                                               "function": {"name": "wx", "arguments": call["arguments"]}}]},
        {"role": "tool", "tool_call_id": call["call_id"], "content": result}]})
    check("responses tools: the tool result reaches the prompt (as the chat route renders it)",
          st == 200 and "temp_c" in ap["prompt"] and js2["usage"]["input_tokens"] > js["usage"]["input_tokens"],
          (st, ap))


def test_messages_tools(s):
    tools = [{"name": "wx", "description": "weather", "input_schema": WX}]
    body = {"max_tokens": 120, "temperature": 0, "tools": tools, "tool_choice": {"type": "any"},
            "messages": [{"role": "user", "content": "Weather in Oslo?"}]}
    st, js, _ = s.post(MSGS, body)
    uses = [b for b in (js or {}).get("content", []) if b["type"] == "tool_use"] if st == 200 else []
    ok = check("messages tools: tool_choice any -> a tool_use block, stop_reason tool_use",
               st == 200 and len(uses) == 1 and uses[0]["name"] == "wx" and js["stop_reason"] == "tool_use"
               and uses[0]["id"].startswith("toolu_"), (st, js))
    if not ok:
        return
    use = uses[0]
    check("messages tools: input is an object valid against input_schema", valid_args(use["input"]), use)
    head, raw, _ = ts.raw_stream(s.port, MSGS, dict(body, stream=True))
    evs, err = named_sse(raw)
    if check("messages tools stream framing", evs is not None, err):
        starts = [o["content_block"] for n, o in evs if n == "content_block_start"]
        partial = "".join(o["delta"]["partial_json"] for n, o in evs
                          if n == "content_block_delta" and o["delta"]["type"] == "input_json_delta")
        delta = next((o for n, o in evs if n == "message_delta"), {})
        check("messages tools stream: a tool_use block whose input_json_delta == the non-stream input",
              any(b["type"] == "tool_use" and b["name"] == "wx" for b in starts)
              and json.loads(partial or "null") == use["input"]
              and delta.get("delta", {}).get("stop_reason") == "tool_use", (starts, partial, delta))
        names = [n for n, _ in evs]
        check("messages tools stream: starts and stops pair up, message_stop last",
              names.count("content_block_start") == names.count("content_block_stop") and names[-1] == "message_stop",
              names)
    # round trip: tool_use in the assistant turn, tool_result in the next user turn
    st, js2, _ = s.post(MSGS, {"max_tokens": 8, "temperature": 0, "tools": tools, "messages": [
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": [{"type": "text", "text": "Let me look."}, use]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"],
                                      "content": [{"type": "text", "text": "21 C, clear"}]}]}]})
    check("messages tools: tool_use + tool_result round trip", st == 200 and js2["type"] == "message", (st, js2))
    st, n1, _ = s.post(MSGS + "/count_tokens", {"tools": tools, "messages": [
        {"role": "user", "content": "Weather in Oslo?"},
        {"role": "assistant", "content": [use]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": "21 C, clear"}]}]})
    st2, n0, _ = s.post(MSGS + "/count_tokens", {"tools": tools, "messages": [{"role": "user", "content": "Weather in Oslo?"}]})
    check("messages tools: the call and its result count as input tokens", st == 200 and st2 == 200
          and n1["input_tokens"] > n0["input_tokens"] + 5, (n0, n1))


def test_tools(fixtures):
    model = os.path.join(fixtures, "models", "qwen3-BF16.gguf")
    s = ts.Server("--model", model, "--ctx-size", "1024", "--no-prefix-cache")
    try:
        for t in (test_responses_tools, test_messages_tools):
            try:
                t(s)
            except Exception as ex:
                check(f"{t.__name__} raised", False, repr(ex))
    finally:
        s.stop()


# ---- the page ----

def test_webui(s):
    st, _, h = s.req("GET", "/")
    c = http_get_raw(s.port, "/")
    check("GET / serves the embedded chat page", st == 200 and h["content-type"] == "text/html; charset=utf-8"
          and b"<textarea" in c and b"/v1/chat/completions" in c, (st, h))
    check("the page is locked to this origin (CSP connect-src 'self')",
          "connect-src 'self'" in h.get("content-security-policy", ""), h)
    check("the page never uses innerHTML", b"innerHTML" not in c.replace(b"never innerHTML", b""))
    s2 = ts.Server("--no-webui")
    try:
        st, js, _ = s2.req("GET", "/")
        check("--no-webui: / is a 404 with a hint", st == 404 and ts.is_error(js) and "--no-webui" in js["error"]["message"],
              (st, js))
    finally:
        s2.stop()


def http_get_raw(port, path):
    so = socket.create_connection(("127.0.0.1", port), timeout=30)
    so.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    buf = b""
    while True:
        d = so.recv(65536)
        if not d:
            break
        buf += d
    so.close()
    return buf.partition(b"\r\n\r\n")[2]


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    ts.configure(sys.argv[1:3])
    s = ts.Server()
    try:
        for t in (test_responses_basic, test_responses_stream, test_responses_store, test_responses_format_and_errors,
                  test_responses_disconnect, test_type_confusion, test_messages_basic, test_messages_stream, test_messages_errors,
                  test_webui):
            try:
                t(s)
            except Exception as ex:  # a crash in one group is a failure, not an abort
                check(f"{t.__name__} raised", False, repr(ex))
    finally:
        rc = s.stop()
        check("server exits 0 on SIGTERM", rc == 0, rc)
    for t in (test_responses_lru, test_api_key, lambda: test_tools(sys.argv[3])):
        try:
            t()
        except Exception as ex:
            check(f"{getattr(t, '__name__', 'tools')} raised", False, repr(ex))
    print(f"{ts.passed} passed, {ts.failed} failed")
    sys.exit(1 if ts.failed else 0)


if __name__ == "__main__":
    main()
