"""Expected outputs of the demo model for `bun test`, produced by the torch model on the exported
files (so the engine is checked against a third implementation on learned weights).

    python tools/train-demo/make_fixtures.py [--model assets/demo] [--prompts DIR/heldout-prompt-ids.json]

For every held-out prompt (text prompts and rendered chat requests, ids from
tools/train-demo/prompt-ids.ts): greedy ids by incremental decode, ties to the lowest id (TEXT_GEN
after a text prompt; after a chat prompt the whole reply, up to and including its stop id, at most
REPLY_GEN), the top-1 minus top-2 logit gap at each step, and the logits of the first and the last
step as raw float32. Writes test/fixtures/demo/{expected.json, logits_first.f32, logits_last.f32}.

The §8.5 budget bounds |engine - torch| for each logit, so two logits can swap places between
the two implementations only when their gap is under twice the budget (NEAR_TIE): the test
compares ids up to the first such step (`compare_steps`), and the generator reports how many
prompts were cut.
"""
from __future__ import annotations

import argparse
import json
import math
import os

import numpy as np
import torch

from checkpoint import load_model
from model import greedy

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
TEXT_GEN = 32
REPLY_GEN = 200
NEAR_TIE = 2.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.path.join(ROOT, "assets", "demo"))
    ap.add_argument("--prompts", default=os.path.join(os.environ.get("K3_TRAIN_DIR", "/var/tmp/k3-train-demo"), "heldout-prompt-ids.json"))
    ap.add_argument("--out", default=os.path.join(ROOT, "test", "fixtures", "demo"))
    args = ap.parse_args()
    torch.set_num_threads(int(os.environ.get("K3_TORCH_THREADS", "2")))
    model = load_model(args.model)
    c = model.c
    rel = 1.2e-7 * math.sqrt(c.E) * 50
    prompts = json.load(open(args.prompts))
    cases, first, last = [], [], []
    cut = 0
    for kind in ("text", "chat"):
        for i, p in enumerate(prompts[kind]):
            stop = {c.V - 256 + 1, c.V - 256 + 2} if kind == "chat" else None   # [EOS], <|end_of_msg|>
            ids, logits = greedy(model, p["ids"], TEXT_GEN if kind == "text" else REPLY_GEN, stop=stop)
            gen = len(ids)
            top2 = torch.topk(logits, 2, dim=-1).values
            gaps = (top2[:, 0] - top2[:, 1]).tolist()
            bound = rel * float(logits.abs().max())
            compare = next((s for s, g in enumerate(gaps) if g < NEAR_TIE * bound), gen)
            cut += compare < gen
            source = {"text": p["text"]} if kind == "text" else {"request": p["request"]}
            cases.append({"kind": kind, "index": i, **source, "prompt_ids": p["ids"], "generated_ids": ids, "top2_gaps": gaps,
                          "compare_steps": compare, "max_abs_logit": float(logits.abs().max())})
            first.append(logits[0].numpy())
            last.append(logits[-1].numpy())
    os.makedirs(args.out, exist_ok=True)
    np.stack(first).astype("<f4").tofile(os.path.join(args.out, "logits_first.f32"))
    np.stack(last).astype("<f4").tofile(os.path.join(args.out, "logits_last.f32"))
    doc = {
        "model": "assets/demo", "producer": "tools/train-demo/make_fixtures.py (torch, float32, incremental greedy)",
        "text_gen": TEXT_GEN, "reply_gen": REPLY_GEN, "vocab": c.V,
        "tolerance": {"rule": "max|engine - torch| <= rel * max|torch| per logits row (model.md 8.5, w = E)", "w": c.E, "rel": rel},
        "near_tie": f"ids are compared up to the first step whose top-2 gap is under {NEAR_TIE} x the budget",
        "logits_files": {"first": "logits_first.f32", "last": "logits_last.f32", "shape": [len(cases), c.V]},
        "cases": cases,
    }
    with open(os.path.join(args.out, "expected.json"), "w") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    steps = sum(len(x["generated_ids"]) for x in cases)
    print(f"{len(cases)} prompts, {steps} greedy ids in all; {cut} cut at a near-tie; smallest gap {min(min(x['top2_gaps']) for x in cases):.4f}")


if __name__ == "__main__":
    main()
