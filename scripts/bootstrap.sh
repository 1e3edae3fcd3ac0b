#!/usr/bin/env bash
# Set up ./.venv with everything memledger needs, from the project's own files. Idempotent.
# torch is installed first, pinned to the CPU build (2.13.0) that these machines carry: letting
# sentence-transformers pull "torch" on its own would download a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
. .venv/bin/activate
python -m pip install -q --upgrade pip
python -m pip install -q "torch==2.13.0"
python -m pip install -q -e ".[test]"
