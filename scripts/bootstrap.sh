#!/usr/bin/env bash
# Set up ./.venv with everything memledger needs, from the project's own files. Idempotent, and quiet: pip's output
# goes to .venv/bootstrap.log and is printed only if an install fails.
# torch is installed first, pinned to the CPU build (2.13.0) that these machines carry: letting
# sentence-transformers pull "torch" on its own would download a multi-GB CUDA build.
# A venv already installed from this very pyproject.toml is left alone (a stamp holds the file's hash): reinstalling
# while another process runs the venv's `memledger` could make that process lose its entry point.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
stamp=".venv/.memledger-installed"
want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && .venv/bin/python -c "import memledger" 2>/dev/null; then
  exit 0
fi
log=.venv/bootstrap.log
if ! { .venv/bin/python -m pip install -q --upgrade pip \
       && .venv/bin/python -m pip install -q "torch==2.13.0" \
       && .venv/bin/python -m pip install -q -e ".[test]"; } >"$log" 2>&1; then
  cat "$log" >&2
  echo "bootstrap: installing into .venv failed (log above, also in $log)" >&2
  exit 1
fi
echo "$want" > "$stamp"
