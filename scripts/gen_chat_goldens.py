#!/usr/bin/env python3
"""Generate the chat-template golden files in tests/data/chat/.

For each family alice-llm renders natively (core/chat.c) this renders the
family's official Jinja template (the one stored in the fixture GGUF's
`tokenizer.chat_template`, read with the tiny GGUF reader below) over the
inputs in tests/data/chat/cases.json and writes <family>__<case>.txt.
Not a build dependency: needs python3-jinja2 and ../shared/fixtures only when
the goldens are regenerated.

Deliberate, documented adjustments (the same ones core/chat.c makes):
- the leading BOS text is removed: the tokenizer adds BOS itself, so the
  rendered text must not contain it (later BOS texts, e.g. Llama 2's per-turn
  "<s>", stay);
- families without a system role (mistral, gemma) raise on a system message;
  llama.cpp's built-in formatter folds it into the first user turn instead
  (mistral: "<sys>\n<user>", gemma: "<trim(sys)>\n\n<trim(user)>"), and so do we: the
  script folds the same way and then renders the official template;
- qwen3.5 with a generation prompt: the template appends "<think>\n", which
  llama.cpp's built-in formatter (the fixture refs' `chat` text) does not; we
  follow the refs, so that suffix is removed from those goldens.

Usage: scripts/gen_chat_goldens.py [--fixtures DIR]
"""
import argparse
import json
import os
import struct
import sys

import jinja2

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "chat")

# family -> (fixture model file or None, bos text, eos text, has system role)
FAMILIES = {
    "chatml": (None, "", "<|im_end|>", True),
    "qwen2": ("qwen2-Q4_K_M.gguf", "", "<|endoftext|>", True),
    "qwen3": ("qwen3-BF16.gguf", "", "<|endoftext|>", True),
    "qwen3.5": ("qwen35-F16.gguf", "", "<|endoftext|>", True),
    "llama3": ("llama3-bpe-F16.gguf", "<|begin_of_text|>", "<|end_of_text|>", True),
    "llama2": ("llama2-spm-F16.gguf", "<s>", "</s>", True),
    "mistral": ("llama-spm-Q8_0.gguf", "<s>", "</s>", False),
    "gemma": ("gemma2-F32.gguf", "<bos>", "<eos>", False),
}

# The plain ChatML template (no default system message, no trimming).
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + "
          "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
          "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")


def gguf_chat_template(path):
    """Return tokenizer.chat_template of a GGUF file (v2/v3, little endian)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"GGUF":
        raise ValueError(f"{path}: not a GGUF file")
    pos = 8
    n_tensors, n_kv = struct.unpack_from("<QQ", data, pos)
    pos += 16
    scalar = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def rd_str(p):
        (ln,) = struct.unpack_from("<Q", data, p)
        return data[p + 8:p + 8 + ln], p + 8 + ln

    def skip(t, p):
        if t in scalar:
            return p + scalar[t]
        if t == 8:
            return rd_str(p)[1]
        if t == 9:
            et, cnt = struct.unpack_from("<IQ", data, p)
            p += 12
            if et in scalar:
                return p + scalar[et] * cnt
            for _ in range(cnt):
                p = skip(et, p)
            return p
        raise ValueError(f"bad GGUF type {t}")

    for _ in range(n_kv):
        key, pos = rd_str(pos)
        (t,) = struct.unpack_from("<I", data, pos)
        pos += 4
        if key == b"tokenizer.chat_template" and t == 8:
            return rd_str(pos)[0].decode("utf-8")
        pos = skip(t, pos)
    raise KeyError(f"{path}: no tokenizer.chat_template")


def raise_exception(msg):
    raise jinja2.exceptions.TemplateError(msg)


def fold_system(family, messages):
    """llama.cpp-style folding of system messages for families without one."""
    out, pending = [], []
    for m in messages:
        if m["role"] == "system":
            pending.append(m["content"].strip() if family == "gemma" else m["content"])
            continue
        if pending and m["role"] == "user":
            if family == "gemma":
                m = {"role": "user", "content": "\n\n".join(pending) + "\n\n" + m["content"].strip()}
            else:
                m = {"role": "user", "content": "".join(p + "\n" for p in pending) + m["content"]}
            pending = []
        out.append(m)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixtures", default=os.path.join(ROOT, "..", "shared", "fixtures"))
    args = ap.parse_args()
    with open(os.path.join(OUT, "cases.json")) as f:
        cases = json.load(f)["cases"]
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True,
                             undefined=jinja2.StrictUndefined)
    env.globals["raise_exception"] = raise_exception
    # the templates test `enable_thinking is defined`, `tools` etc.: lenient there
    env_lenient = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    env_lenient.globals["raise_exception"] = raise_exception
    written = 0
    for fam, (model, bos, eos, has_sys) in FAMILIES.items():
        src = CHATML if model is None else gguf_chat_template(
            os.path.join(args.fixtures, "models", model))
        tmpl = env_lenient.from_string(src)
        for case in cases:
            msgs = case["messages"]
            if not has_sys:
                msgs = fold_system(fam, msgs)
            text = tmpl.render(messages=msgs, add_generation_prompt=case["add_generation_prompt"],
                               bos_token=bos, eos_token=eos)
            if bos and text.startswith(bos):
                text = text[len(bos):]
            if fam == "qwen3.5" and case["add_generation_prompt"]:
                assert text.endswith("<think>\n"), (fam, case["id"])
                text = text[:-len("<think>\n")]
            with open(os.path.join(OUT, f"{fam}__{case['id']}.txt"), "w", newline="") as f:
                f.write(text)
            written += 1
    print(f"wrote {written} goldens to {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
