#!/usr/bin/env bash
# From a fresh clone to a working dist/k3, as root or as an ordinary user: the pinned Bun and
# Zig (toolchain.env) go into .toolchain/ inside the clone, never into the system Python or the
# global npm prefix (which a user cannot write, and which Debian's PEP 668 marker protects).
# A Bun or Zig of the pinned version already on PATH is linked instead of installed again.
# Then the locked packages, the build, and a first generation with the demo model.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=../toolchain.env
source toolchain.env

tc="$PWD/.toolchain"
mkdir -p "$tc/bin"

say() { echo "setup: $*" >&2; }
fail() { echo "setup: $*" >&2; exit 1; }
bun_is_pinned() { [ -x "$1" ] && [ "$("$1" --version 2>/dev/null || true)" = "$BUN_VERSION" ]; }
zig_is_pinned() { [ -x "$1" ] && [ "$("$1" version 2>/dev/null || true)" = "$ZIG_VERSION" ]; }

if ! bun_is_pinned "$tc/bin/bun"; then
  found="$(command -v bun || true)"
  if [ -n "$found" ] && bun_is_pinned "$found"; then
    ln -sfn "$(readlink -f "$found")" "$tc/bin/bun"
  else
    command -v npm >/dev/null 2>&1 || fail "npm is needed to fetch bun $BUN_VERSION (Debian/Ubuntu: apt install npm)"
    say "installing bun $BUN_VERSION from the npm registry into .toolchain/npm"
    npm install --prefix "$tc/npm" --no-save --no-package-lock --no-audit --no-fund "bun@$BUN_VERSION" >&2
    ln -sfn "$(readlink -f "$tc/npm/node_modules/.bin/bun")" "$tc/bin/bun"
  fi
  bun_is_pinned "$tc/bin/bun" || fail "bun $BUN_VERSION did not install: $("$tc/bin/bun" --version 2>&1 | head -1)"
fi

if ! zig_is_pinned "$tc/bin/zig"; then
  # The PyPI package `ziglang` carries the zig binary; `pip install --target` puts it in the clone.
  pyzig() { "$1" -c 'import os, ziglang; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))' 2>/dev/null; }
  command -v python3 >/dev/null 2>&1 || fail "python3 is needed to fetch zig $ZIG_VERSION from PyPI"
  found="$(pyzig python3 || true)"
  if [ -n "$found" ] && zig_is_pinned "$found"; then
    ln -sfn "$found" "$tc/bin/zig"
  else
    say "installing zig $ZIG_VERSION from PyPI into .toolchain/python"
    rm -rf "$tc/python"
    if python3 -m pip --version >/dev/null 2>&1; then
      python3 -m pip install --quiet --disable-pip-version-check --target "$tc/python" "ziglang==$ZIG_VERSION" >&2
    elif python3 -m venv "$tc/venv" >/dev/null 2>&1; then
      "$tc/venv/bin/python" -m pip install --quiet --disable-pip-version-check --target "$tc/python" "ziglang==$ZIG_VERSION" >&2
    else
      fail "python3 has neither pip nor venv (Debian/Ubuntu: apt install python3-pip)"
    fi
    ln -sfn "$tc/python/ziglang/zig" "$tc/bin/zig"
  fi
  zig_is_pinned "$tc/bin/zig" || fail "zig $ZIG_VERSION did not install: $("$tc/bin/zig" version 2>&1 | head -1)"
fi

"$tc/bin/bun" install --frozen-lockfile >&2
"$tc/bin/bun" run build
./dist/k3 --version
# A first real generation: the demo Kimi K3 (9 layers, trained here) built into the executable.
./dist/k3 demo
