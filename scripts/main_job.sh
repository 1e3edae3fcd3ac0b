#!/usr/bin/env bash
# The main job on the embedded default (SQLite): set up, ingest the shipped LoCoMo sample (conv-30, CC BY-NC 4.0,
# see samples/README.md) into a fresh ledger, print a speaker's profile and one fact's history, then show a change
# of mind and a correction on top of it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
export HF_HUB_OFFLINE=1
HOME_DIR=${MEMLEDGER_HOME:-$(mktemp -d)/ledger}
ml() { .venv/bin/memledger --home "$HOME_DIR" "$@"; }
echo "== ledger at $HOME_DIR"
ml ingest samples/locomo_conv30.json
ml ingest samples/locomo_conv30.json   # the same file again records nothing new
ml profile Jon | head -20
# "Jon lost his job as a banker the day before the conversation." (session 1, turn D1:2)
ml history Jon memory.202e6ae625a2
echo "== a change of mind, then a correction"
ml assert Jon preference.drink '"tea"' --observed-at 2023-01-20T16:04:00Z --source-ref D1:1
ml assert Jon preference.drink '"coffee"' --observed-at 2023-03-01T10:00:00Z
ml correct Jon preference.drink '"espresso"' --reason "misheard: espresso, not coffee"
ml history Jon preference.drink
