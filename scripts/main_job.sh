#!/usr/bin/env bash
# The main job on the embedded default (SQLite): set up, ingest the shipped LoCoMo sample (conv-30, CC BY-NC 4.0,
# see samples/README.md) into a fresh ledger, print a speaker's profile, ingest it again through remember (free text,
# slot resolution) into a second ledger and show one slot's history, then a change of mind and a correction.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
export HF_HUB_OFFLINE=1
HOME_DIR=${MEMLEDGER_HOME:-$(mktemp -d)/ledger}
ml() { .venv/bin/memledger --home "$HOME_DIR" "$@"; }
ml2() { .venv/bin/memledger --home "$HOME_DIR-free" "$@"; }   # a second ledger: the same file through remember
echo "== ledger at $HOME_DIR"
ml ingest samples/locomo_conv30.json
ml ingest samples/locomo_conv30.json   # the same file again records nothing new
ml profile Jon | head -20
echo "== free text: each observation through remember (slot resolution, docs/resolution.md); loads the model"
ml2 ingest samples/locomo_conv30.json --resolve
# "Jon lost his job as a banker the day before the conversation." (session 1, turn D1:2) lands in the occupation slot
ml2 history Jon work.occupation
ml2 remember Jon "Jon works as a dance teacher now" --observed-at 2023-08-01T10:00:00Z
ml2 profile Jon | grep work.occupation   # the slot holds the latest statement; `audit` says why
echo "== a change of mind, then a correction"
ml assert Jon preference.drink '"tea"' --observed-at 2023-01-20T16:04:00Z --source-ref D1:1
ml assert Jon preference.drink '"coffee"' --observed-at 2023-03-01T10:00:00Z
ml correct Jon preference.drink '"espresso"' --reason "misheard: espresso, not coffee"
ml history Jon preference.drink
