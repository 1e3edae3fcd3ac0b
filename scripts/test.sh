#!/usr/bin/env bash
# Set up and run the whole test suite (SQLite always; PostgreSQL too when a server answers on MEMLEDGER_TEST_DSN,
# default postgresql://postgres@127.0.0.1:5432/test).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
export HF_HUB_OFFLINE=1
# --durations: the slowest tests are printed at the end, to keep CI time in view (it must stay under 45 minutes).
# -n auto: one worker per core (pytest-xdist); --dist loadfile keeps each file's tests in one worker, so a file's
# module fixtures (a loaded model, a server) are built once. MEMLEDGER_TEST_WORKERS=0 runs in this process alone.
exec .venv/bin/python -m pytest -q --durations=25 -n "${MEMLEDGER_TEST_WORKERS:-auto}" --dist loadfile "$@"
