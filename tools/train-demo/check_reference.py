"""The torch model against tools/reference on the existing fixtures (run once before training;
its output is recorded in tools/train-demo/reference-check.txt).

For tiny13 and nested14: the 20 greedy ids (incremental and full recompute, chunked and plain
KDA), the 32 teacher-forced argmaxes, the 320-id long prompt's 20 greedy ids, and the logits of
prompt [3, 7, 11, 5, 9] and of every teacher-forced position, gated by model.md §8.5:
max |torch - reference| <= 1.2e-7 * sqrt(E) * 50 * max |reference|.
"""
from __future__ import annotations

import json
import math
import os
import sys

import numpy as np
import torch

from checkpoint import load_model
from model import greedy, kda_recurrence_chunked, kda_recurrence_loop

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def f32_file(path: str, shape) -> torch.Tensor:
    return torch.from_numpy(np.fromfile(path, dtype="<f4").reshape(shape).copy())


def check_model(name: str) -> bool:
    d = os.path.join(ROOT, "test", "fixtures", name)
    exp = json.load(open(os.path.join(d, "expected.json")))
    model = load_model(d)
    E = model.c.E
    rel = 1.2e-7 * math.sqrt(E) * 50
    ok = True

    def report(label: str, good: bool, detail: str) -> None:
        nonlocal ok
        ok &= good
        print(f"  {'ok  ' if good else 'FAIL'} {label}: {detail}")

    print(f"{name}: E={E}, L={model.c.L}, V={model.c.V}, budget rel {rel:.3e}")
    prompt = exp["prompt_ids"]
    for chunked in (True, False):
        model.set_chunked(chunked)
        ids_inc, logits_inc = greedy(model, prompt, 20, incremental=True)
        ids_rec, _ = greedy(model, prompt, 20, incremental=False)
        tag = "chunked" if chunked else "loop"
        report(f"greedy incremental ({tag} KDA for prefill)", ids_inc == exp["generated_ids"], str(ids_inc))
        report(f"greedy full recompute ({tag} KDA)", ids_rec == exp["generated_ids_recompute"], "same 20 ids" if ids_rec == exp["generated_ids_recompute"] else str(ids_rec))
    want_greedy = f32_file(os.path.join(d, exp["greedy_logits_file"]), exp["greedy_logits_shape"])
    diff = (logits_inc - want_greedy).abs().max().item()
    bound = rel * want_greedy.abs().max().item()
    report("greedy-step logits [20, V]", diff <= bound, f"max |diff| {diff:.3e} <= {bound:.3e} ({bound / max(diff, 1e-30):.0f}x inside)")

    tf = exp["tf"]
    with torch.no_grad():
        for chunked in (True, False):
            model.set_chunked(chunked)
            logits_tf = model(torch.tensor([tf["ids"]]))[0]
            am = logits_tf.argmax(dim=-1).tolist()
            report(f"teacher-forced argmax, 32 positions ({'chunked' if chunked else 'loop'})", am == tf["argmax"], "equal" if am == tf["argmax"] else str(am))
        want_tf = f32_file(os.path.join(d, tf["logits_file"]), tf["logits_shape"])
        per_pos = ((logits_tf - want_tf).abs().amax(dim=-1) / want_tf.abs().amax(dim=-1)).max().item()
        report("teacher-forced logits, worst position (relative)", per_pos <= rel, f"{per_pos:.3e} <= {rel:.3e}")
        step0 = model(torch.tensor([exp["logits_prompt_ids"]]))[0, -1]
        want0 = f32_file(os.path.join(d, exp["logits_file"]), exp["logits_shape"])
        diff0 = (step0 - want0).abs().max().item()
        bound0 = rel * want0.abs().max().item()
        report("logits of [3, 7, 11, 5, 9]", diff0 <= bound0, f"max |diff| {diff0:.3e} <= {bound0:.3e} ({bound0 / max(diff0, 1e-30):.0f}x inside); argmax {int(step0.argmax())} (reference {exp['logits_argmax']})")
    model.set_chunked(True)
    long = exp["long"]
    ids_long, _ = greedy(model, long["prompt_ids"], 20, incremental=True)
    report("long prompt (320 ids), greedy 20", ids_long == long["generated_ids"], "equal" if ids_long == long["generated_ids"] else str(ids_long))
    return ok


def check_chunked_recurrence() -> bool:
    """The chunked KDA form against the plain loop, in float64, on adversarial decays."""
    g = torch.Generator().manual_seed(7)
    B, T, H, D = 2, 45, 3, 16
    q = torch.randn(B, T, H, D, generator=g, dtype=torch.float64)
    k = torch.nn.functional.normalize(torch.randn(B, T, H, D, generator=g, dtype=torch.float64), dim=-1)
    v = torch.randn(B, T, H, D, generator=g, dtype=torch.float64)
    # log decays across the whole allowed range [-5, 0], including long runs at -5
    gdec = -5 * torch.rand(B, T, H, D, generator=g, dtype=torch.float64)
    gdec[:, 10:30] = -5.0
    beta = torch.rand(B, T, H, generator=g, dtype=torch.float64)
    S0 = torch.randn(B, H, D, D, generator=g, dtype=torch.float64)
    o1, s1 = kda_recurrence_loop(q, k, v, gdec, beta, S0)
    worst = 0.0
    for chunk in (4, 16, 32):
        o2, s2 = kda_recurrence_chunked(q, k, v, gdec, beta, S0, chunk=chunk)
        worst = max(worst, (o1 - o2).abs().max().item() / o1.abs().max().item(), (s1 - s2).abs().max().item() / s1.abs().max().item())
    good = worst < 1e-10
    print(f"chunked KDA vs plain loop (float64, chunks 4/16/32, decays to -5): worst relative diff {worst:.2e} {'ok' if good else 'FAIL'}")
    return good


if __name__ == "__main__":
    torch.set_num_threads(int(os.environ.get("K3_TORCH_THREADS", "2")))
    print(f"torch {torch.__version__}")
    results = [check_chunked_recurrence()] + [check_model(n) for n in ("tiny13", "nested14")]
    print("all checks passed" if all(results) else "SOME CHECKS FAILED")
    sys.exit(0 if all(results) else 1)
