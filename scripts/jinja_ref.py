#!/usr/bin/env python3
"""Render a chat template the way Hugging Face transformers does, with Python's
jinja2: the reference alice-template (core/jinja/) is compared against.

  jinja_ref.py --template F.jinja --context C.json [--now 2026-01-15T10:30:00]

Output on stdout byte for byte; a template error exits 1 with
"<ExceptionName>: <message>" on stderr (the form of the goldens' .err files)."""
import argparse, datetime, json, sys

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class GenerationTag(jinja2.ext.Extension):
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.Scope(body, lineno=lineno)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--template", required=True)
    ap.add_argument("--context", required=True)
    ap.add_argument("--now", default=None)
    a = ap.parse_args()
    now = datetime.datetime.fromisoformat(a.now) if a.now else datetime.datetime.now()

    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationTag, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: now.strftime(fmt)
    with open(a.template, encoding="utf-8") as f:
        src = f.read()
    with open(a.context, encoding="utf-8") as f:
        ctx = json.load(f)
    try:
        out = env.from_string(src).render(**ctx)
    except Exception as e:  # the goldens record any failure of the render
        sys.stderr.write(f"{type(e).__name__}: {e}\n")
        return 1
    sys.stdout.buffer.write(out.encode("utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
