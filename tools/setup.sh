#!/usr/bin/env bash
# From a fresh clone to a working dist/k3: install the pinned Bun and Zig if missing
# (toolchain.env), install the locked packages, build, and generate with the shipped tiny model.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=../toolchain.env
source toolchain.env

if ! command -v bun >/dev/null 2>&1 || [ "$(bun --version)" != "$BUN_VERSION" ]; then
  echo "setup: installing bun $BUN_VERSION from the npm registry" >&2
  npm install -g "bun@$BUN_VERSION" >&2
fi
if [ "$(python3 -m ziglang version 2>/dev/null || true)" != "$ZIG_VERSION" ]; then
  echo "setup: installing zig $ZIG_VERSION from PyPI" >&2
  python3 -m pip install --quiet "ziglang==$ZIG_VERSION" >&2
fi

bun install --frozen-lockfile >&2
bun run build
./dist/k3 --version
# A first real generation: the tiny 13-layer Kimi K3 model built into the executable.
./dist/k3 demo
