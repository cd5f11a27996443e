"""Train the demo K3 (float32, autograd, CPU), resumable, then export it in the released layout.

    python tools/train-demo/train.py [--data DIR] [--work DIR] [--out assets/demo]

DIR (default $K3_TRAIN_DIR or /var/tmp/k3-train-demo) holds what tools/train-demo/data.ts wrote.
Checkpoints go to WORK (default DIR/run) every few minutes, through a temporary file; running the
same command again resumes from the last one with the same data order, so an interrupted run ends
where an uninterrupted one would. The last QAT_SHARE of the steps see every weight as it will be
stored (bf16 truncation for the trunk, MXFP4 for the routed experts, straight-through gradients).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn.functional as Fn
from torch.func import functional_call

from checkpoint import export_model, load_model, stored_dtype
from demo_config import demo_config
from model import K3, KDA, LatentMoE
from quant import bf16_truncate, mxfp4_round, straight_through

SEED = 20261201
SEQ = 512
BATCH = 8
STEPS = 1200
WARMUP = 100
LR = 2e-3
LR_FLOOR = 0.1
WEIGHT_DECAY = 0.05
QAT_SHARE = 0.12
BIAS_RATE = 1e-3          # load balancing by the selection bias, no gradient (§6.10: the bias only selects)
EVAL_EVERY = 100
EVAL_BATCHES = 8
CHECKPOINT_SECONDS = 300


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class Corpus:
    """Documents back to back (uint16 ids) with their starts; a sample starts at a document start."""

    def __init__(self, data_dir: str, split: str):
        self.ids = np.fromfile(os.path.join(data_dir, f"{split}.u16"), dtype="<u2")
        self.starts = np.fromfile(os.path.join(data_dir, f"{split}-docs.u32"), dtype="<u4").astype(np.int64)
        self.kinds = np.fromfile(os.path.join(data_dir, f"{split}-kinds.u8"), dtype=np.uint8)
        if self.starts[-1] != len(self.ids) or len(self.kinds) != len(self.starts) - 1:
            raise SystemExit(f"{data_dir}: {split} files disagree")

    def window(self, doc: int, length: int) -> np.ndarray:
        """`length` ids from the start of document `doc`, continuing into the next documents."""
        start = self.starts[doc]
        out = self.ids[start : start + length]
        if len(out) < length:  # wrap to the first document
            out = np.concatenate([out, self.ids[: length - len(out)]])
        return out

    def batch(self, rng: np.random.Generator, batch: int, length: int) -> torch.Tensor:
        docs = rng.integers(0, len(self.starts) - 1, size=batch)
        return torch.from_numpy(np.stack([self.window(int(d), length) for d in docs]).astype(np.int64))


def init_weights(model: K3, seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    c = model.c
    out_scale = 1.0 / math.sqrt(2 * c.L)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("layernorm.weight", "_norm.weight", "model.norm.weight", "o_norm.weight")):
                p.fill_(1.0)
            elif name.endswith("A_log"):
                p.zero_()
            elif name.endswith("dt_bias"):
                p.copy_(-6.0 * torch.rand(p.shape, generator=g))   # retention from ~0.99 to ~0.08
            elif "_conv1d" in name:
                p.uniform_(-0.5, 0.5, generator=g)
            elif name.endswith(("o_proj.weight", "down_proj.weight", "experts_w2", "routed_expert_up_proj.weight")):
                p.normal_(0.0, 0.02 * out_scale, generator=g)
            else:
                p.normal_(0.0, 0.02, generator=g)


def stored_view(model: K3) -> dict[str, torch.Tensor]:
    """Every parameter as the export will store it, with straight-through gradients."""
    out = {}
    for name, p in model.named_parameters():
        if ".experts_" in name:
            out[name] = straight_through(p, mxfp4_round(p))
        elif stored_dtype(name) == "BF16":
            out[name] = straight_through(p, bf16_truncate(p))
        else:
            out[name] = p
    return out


def loss_of(model: K3, ids: torch.Tensor, qat: bool) -> torch.Tensor:
    x, y = ids[:, :-1], ids[:, 1:]
    logits = functional_call(model, stored_view(model), (x,)) if qat else model(x)
    return Fn.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


@torch.no_grad()
def evaluate(model: K3, corpus: Corpus, batches: int, qat: bool) -> float:
    rng = np.random.default_rng(SEED + 1)   # the same held-out windows every time
    total = 0.0
    for _ in range(batches):
        total += loss_of(model, corpus.batch(rng, BATCH, SEQ + 1), qat).item()
    return total / batches


def unigram_loss(train: Corpus, heldout: Corpus, vocab: int) -> float:
    """Cross-entropy of held-out ids under the training set's add-one unigram distribution."""
    counts = np.bincount(train.ids, minlength=vocab).astype(np.float64) + 1.0
    logp = np.log(counts / counts.sum())
    return float(-logp[heldout.ids].mean())


def lr_at(step: int) -> float:
    if step < WARMUP:
        return LR * (step + 1) / WARMUP
    t = (step - WARMUP) / max(1, STEPS - WARMUP)
    return LR * (LR_FLOOR + (1 - LR_FLOOR) * 0.5 * (1 + math.cos(math.pi * t)))


def balance_routing(model: K3) -> None:
    for m in model.modules():
        if isinstance(m, LatentMoE) and m.last_load is not None:
            load = m.last_load.to(torch.float32)
            m.gate.e_score_correction_bias += BIAS_RATE * torch.sign(load.mean() - load)


def manifest_sha256(data_dir: str) -> str:
    import hashlib
    with open(os.path.join(data_dir, "manifest.json"), "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def save(path: str, payload: dict) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    torch.save(payload, tmp)
    os.replace(tmp, path)


def main() -> None:
    global STEPS
    ap = argparse.ArgumentParser()
    default_dir = os.environ.get("K3_TRAIN_DIR", "/var/tmp/k3-train-demo")
    ap.add_argument("--data", default=default_dir)
    ap.add_argument("--work", default=None)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "assets", "demo"))
    ap.add_argument("--threads", type=int, default=int(os.environ.get("K3_TORCH_THREADS", "2")))
    ap.add_argument("--steps", type=int, default=STEPS)
    ap.add_argument("--bench", type=int, default=0, help="time this many steps on the real data and stop")
    args = ap.parse_args()
    STEPS = args.steps
    torch.set_num_threads(args.threads)
    work = args.work or os.path.join(args.data, "run")
    os.makedirs(work, exist_ok=True)
    manifest = json.load(open(os.path.join(args.data, "manifest.json")))
    vocab = int(manifest["tokenizer"]["vocab_size"])
    train, heldout = Corpus(args.data, "train"), Corpus(args.data, "heldout")
    torch.manual_seed(SEED)
    model = K3(demo_config(vocab))
    init_weights(model, SEED)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=LR, betas=(0.9, 0.95), eps=1e-8)
    rng = np.random.default_rng(SEED)
    step, history, seconds_before = 0, [], 0.0
    ckpt = os.path.join(work, "checkpoint.pt")
    if os.path.exists(ckpt) and not args.bench:
        saved = torch.load(ckpt, weights_only=False)
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["opt"])
        rng.bit_generator.state = saved["rng"]
        step, history, seconds_before = saved["step"], saved["history"], saved["seconds"]
        log(f"resumed from {ckpt} at step {step}/{STEPS}")
    params = sum(p.numel() for p in model.parameters())
    log(f"demo K3: {params / 1e6:.2f}M parameters, vocab {vocab}, {len(train.ids) / 1e6:.1f}M training ids, "
        f"{STEPS} steps of {BATCH}x{SEQ} ids, QAT from step {int(STEPS * (1 - QAT_SHARE))}, {args.threads} threads")
    qat_from = int(STEPS * (1 - QAT_SHARE))
    t0 = time.time()
    last_save = t0
    while step < STEPS:
        qat = step >= qat_from
        for group in opt.param_groups:
            group["lr"] = lr_at(step)
        ids = train.batch(rng, BATCH, SEQ + 1)
        ts = time.time()
        loss = loss_of(model, ids, qat)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        balance_routing(model)
        step += 1
        dt = time.time() - ts
        if args.bench:
            log(f"step {step}: loss {loss.item():.3f}, {dt:.2f} s, {BATCH * SEQ / dt:.0f} ids/s")
            if step >= args.bench:
                return
            continue
        elapsed = seconds_before + time.time() - t0
        if step % 10 == 0 or step == 1:
            rate = BATCH * SEQ / dt
            log(f"step {step}/{STEPS} loss {loss.item():.3f} lr {lr_at(step):.2e}{' qat' if qat else ''} "
                f"{rate:.0f} ids/s, {elapsed / 60:.1f} min elapsed, ~{(STEPS - step) * dt / 60:.0f} min left")
        if step % EVAL_EVERY == 0 or step == STEPS:
            model.eval()
            held = evaluate(model, heldout, EVAL_BATCHES, qat)
            model.train()
            history.append({"step": step, "train_loss": loss.item(), "heldout_loss": held, "minutes": elapsed / 60})
            log(f"  held-out loss {held:.4f}")
        if time.time() - last_save > CHECKPOINT_SECONDS or step == STEPS:
            save(ckpt, {"model": model.state_dict(), "opt": opt.state_dict(), "rng": rng.bit_generator.state,
                        "step": step, "history": history, "seconds": seconds_before + time.time() - t0})
            last_save = time.time()
    finish(model, args, train, heldout, vocab, history, manifest)


def finish(model: K3, args, train: Corpus, heldout: Corpus, vocab: int, history: list, manifest: dict) -> None:
    """Export, read the export back, and report float, exported and unigram held-out losses."""
    model.eval()
    float_loss = evaluate(model, heldout, EVAL_BATCHES * 4, qat=False)
    out = os.path.abspath(args.out)
    tokenizer_dir = os.path.join(args.data, "tokenizer")
    extra = {name: open(os.path.join(tokenizer_dir, name), "rb").read() for name in ("tiktoken.model", "tokenizer_config.json")}
    files = export_model(model, out, note="the k3 demo model, trained by tools/train-demo (see its README)", extra_files=extra)
    exported = load_model(out)
    exported_loss = evaluate(exported, heldout, EVAL_BATCHES * 4, qat=False)
    report = {
        "steps": STEPS, "batch": BATCH, "seq": SEQ, "seed": SEED,
        "parameters": sum(p.numel() for p in model.parameters()),
        "heldout_loss_float": float_loss, "heldout_loss_exported": exported_loss,
        "heldout_loss_unigram": unigram_loss(train, heldout, vocab),
        "data_manifest_sha256": manifest_sha256(args.data), "history": history,
        "minutes": history[-1]["minutes"] if history else None, "files": files,
    }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "train-report.json")
    with open(path + ".tmp", "w") as f:
        json.dump(report, f, indent=1)
    os.replace(path + ".tmp", path)
    log(f"held-out loss: float {float_loss:.4f}, exported {exported_loss:.4f}, unigram {report['heldout_loss_unigram']:.4f}; wrote {out}")


if __name__ == "__main__":
    main()
