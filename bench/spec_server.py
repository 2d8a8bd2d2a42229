#!/usr/bin/env python3
"""Speculative decoding through a running alice-llm-server, one client
(stdlib only): greedy /v1/completions of fixed prose prompts, back to back;
prints the decode tokens/s the server reports (usage.tokens_per_second,
first to last token) and drafted / accepted tokens. Run it against servers
started with and without --model-draft / --spec ngram (bench/RESULTS.md).

  spec_server.py --port P [--max-tokens 128] [--rounds 3]
"""
import argparse
import http.client
import json

PROMPTS = [
    "Prince Andrew looked at the sky and thought",
    "The old count said to Natasha",
    "Pierre went to the window and",
    "In the morning the army",
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    for rnd in range(a.rounds):
        toks = ms = drafted = accepted = 0
        for p in PROMPTS:
            c = http.client.HTTPConnection("127.0.0.1", a.port, timeout=600)
            body = {"prompt": p, "max_tokens": a.max_tokens, "temperature": 0,
                    "logit_bias": {"0": -100, "2": -100}}
            c.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
            u = json.loads(c.getresponse().read())["usage"]
            c.close()
            toks += u["completion_tokens"] - 1
            ms += u["decode_ms"]
            drafted += u.get("draft_tokens", 0)
            accepted += u.get("draft_accepted_tokens", 0)
        tps = toks * 1000.0 / ms if ms else 0
        acc = 100.0 * accepted / drafted if drafted else 0
        print(f"round {rnd}: decode {tps:.1f} t/s, drafted {drafted}, accepted {accepted} ({acc:.1f}%)")


if __name__ == "__main__":
    main()
