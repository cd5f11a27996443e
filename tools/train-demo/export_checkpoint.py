"""Export a training checkpoint as it stands (no QAT, no evaluation): for looking at a model mid-run.

    python tools/train-demo/export_checkpoint.py OUT_DIR [--data DIR] [--checkpoint PATH]
"""
from __future__ import annotations

import argparse
import json
import os

import torch

from checkpoint import export_model
from demo_config import demo_config
from model import K3

ap = argparse.ArgumentParser()
ap.add_argument("out")
ap.add_argument("--data", default=os.environ.get("K3_TRAIN_DIR", "/var/tmp/k3-train-demo"))
ap.add_argument("--checkpoint", default=None)
args = ap.parse_args()
manifest = json.load(open(os.path.join(args.data, "manifest.json")))
saved = torch.load(args.checkpoint or os.path.join(args.data, "run", "checkpoint.pt"), weights_only=False)
model = K3(demo_config(int(manifest["tokenizer"]["vocab_size"])))
model.load_state_dict(saved["model"])
tok = os.path.join(args.data, "tokenizer")
extra = {n: open(os.path.join(tok, n), "rb").read() for n in ("tiktoken.model", "tokenizer_config.json")}
export_model(model, args.out, note=f"interim export at step {saved['step']}", extra_files=extra)
print(f"exported step {saved['step']} to {args.out}")
