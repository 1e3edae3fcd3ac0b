"""The ``--json`` contract of every read verb (and the write receipts), recorded on the shipped sample.

``run_scenario`` drives the CLI through a fixed script on a fresh embedded store and returns every ``--json``
output by name; ``mask`` blanks what differs from run to run (system times, event ids, checksums of rows that hold
them). ``tests/test_json_contract.py`` compares a run with ``tests/fixtures/json_contract.json``; regenerate that
file only for a deliberate, documented contract change: ``python -m tests.json_contract --update``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "fixtures" / "json_contract.json"
SAMPLE = str(ROOT / "samples" / "locomo_conv30.json")
NOW = "2023-03-10T12:00:00+00:00"

# (name, argv) in order; names that start with "write:" are write receipts, the rest are reads.
SCRIPT: list[tuple[str, list[str]]] = [
    ("write:ingest", ["ingest", SAMPLE, "--json"]),
    ("write:assert-tea", ["assert", "Jon", "preference.drink", "tea", "--observed-at", "2023-01-20T16:04:00Z",
                          "--source-ref", "D1:1", "--session", "conv-30:session_1", "--json"]),
    ("write:assert-coffee", ["assert", "Jon", "preference.drink", "coffee", "--observed-at",
                             "2023-03-01T10:00:00Z", "--json"]),
    ("write:correct", ["correct", "Jon", "preference.drink", "espresso", "--reason", "misheard",
                       "--observed-at", "2023-03-02T00:00:00Z", "--json"]),
    ("write:assert-health", ["assert", "Jon", "health.condition", "diabetes", "--sensitivity", "health",
                             "--observed-at", "2023-02-01T00:00:00Z", "--json"]),
    ("write:assert-city", ["assert", "Jon", "profile.city", "Paris", "--observed-at", "2023-01-05T00:00:00Z",
                           "--json"]),
    ("write:retract-city", ["retract", "Jon", "profile.city", "--reason", "moved away", "--observed-at",
                            "2023-02-20T00:00:00Z", "--json"]),
    ("write:contest", ["assert", "Jon", "preference.drink", "water", "--source", "agent_inference",
                       "--confidence", "0.2", "--observed-at", "2023-03-03T00:00:00Z", "--json"]),
    ("write:session-start", ["session", "start", "Jon", "s9", "--task", "plan the studio opening",
                             "--observed-at", "2023-03-05T09:00:00Z", "--json"]),
    ("write:session-log", ["session", "log", "Jon", "s9", "--role", "user", "--message-id", "s9-m1", "--text",
                           "Let's open the studio next Friday.", "--observed-at", "2023-03-05T09:01:00Z",
                           "--json"]),
    ("write:session-card", ["session", "card", "Jon", "s9", "--progress", "venue chosen", "--add-decision",
                            "open on Friday", "--add-question", "who DJs?", "--observed-at",
                            "2023-03-05T09:02:00Z", "--json"]),
    ("write:session-summarize", ["session", "summarize", "Jon", "s9", "--text", "Jon plans the opening.",
                                 "--observed-at", "2023-03-05T09:03:00Z", "--json"]),
    ("profile-jon", ["profile", "Jon", "--json"]),
    ("profile-gina", ["profile", "Gina", "--json"]),
    ("history-jon", ["history", "Jon", "--json"]),
    ("history-drink", ["history", "Jon", "preference.drink", "--json"]),
    ("search-job", ["search", "Jon", "lost job banker", "-k", "5", "--json"]),
    ("search-source", ["search", "Jon", "drink", "-k", "3", "--source", "agent_inference", "--json"]),
    ("believed-observed", ["believed", "Jon", "--as-of", "2023-02-15T00:00:00Z", "--axis", "observed", "--json"]),
    ("believed-future", ["believed", "Jon", "--as-of", "2100-01-01T00:00:00Z", "--valid-at",
                         "2023-02-15T00:00:00Z", "--json"]),
    ("true-at", ["true-at", "Jon", "--valid-at", "2023-02-15T00:00:00Z", "--json"]),
    ("diff-observed", ["diff", "Jon", "--from", "2023-02-01T00:00:00Z", "--to", "2023-04-01T00:00:00Z",
                       "--axis", "observed", "--json"]),
    ("audit-drink", ["audit", "Jon", "preference.drink", "--json"]),
    ("audit-ref", ["audit", "Jon", "--source-ref", "D1:2", "--json"]),
    ("session-gaps", ["session", "gaps", "Jon", "--json"]),
    ("session-search", ["session", "search", "Jon", "dance studio", "-k", "3", "--json"]),
    ("resume", ["resume", "Jon", "--now", NOW, "--json"]),
    ("context", ["context", "Jon", "--session", "s9", "--query", "what does Jon drink", "--now", NOW,
                 "--budget", "600", "--json"]),
    ("context-sensitive", ["context", "Jon", "--query", "health", "--now", NOW, "--budget", "400",
                           "--allow-sensitive", "health", "--purpose", "contract test", "--json"]),
    ("write:assert-hedged", ["assert", "Jon", "preference.music", "jazz", "--text", "I think I like jazz",
                             "--observed-at", "2023-03-06T00:00:00Z", "--json"]),
    ("write:assert-quarantined", ["assert", "Jon", "profile.age", "130", "--observed-at", "2023-03-06T00:00:00Z",
                                  "--session", "s9", "--json"]),
    ("write:assert-scheduled", ["assert", "Jon", "plan.opening", "studio opening", "--valid-from",
                                "2100-01-01T00:00:00Z", "--observed-at", "2023-03-06T00:00:00Z", "--json"]),
    ("quarantine", ["quarantine", "Jon", "--now", NOW, "--json"]),
    ("due", ["due", "Jon", "--now", NOW, "--json"]),
    ("stats-jon", ["stats", "Jon", "--now", NOW, "--json"]),
    ("stats", ["stats", "--now", NOW, "--json"]),
    ("profile-jon-hygiene", ["profile", "Jon", "--json"]),
    ("context-hygiene", ["context", "Jon", "--now", NOW, "--budget", "400", "--min-confidence", "0.5", "--json"]),
    ("write:retract-source", ["retract-source", "Jon", "D6:4", "--json"]),
    ("write:forget", ["forget", "Jon", "health.condition", "--yes", "--actor", "contract test", "--json"]),
    ("history-forgotten", ["history", "Jon", "health.condition", "--json"]),
    ("export", ["export", "Jon", "--json"]),
    ("verify", ["verify", "--json"]),
]

# Keys whose values are system times, random ids or digests of rows holding them: blanked by `mask`.
VARYING_KEYS = {"event_id", "event_ids", "checksum", "replay_checksum"}
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
INSTANT = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$")
# Every instant the scenario passes in is before 2024 or the far-future 2100; an instant from this century's
# clock (recorded_at, believed_since, exported_at, a default "now") is read off the machine's clock.
CLOCK_YEARS = range(2025, 2100)


def mask(data: Any) -> Any:
    """``data`` with every value under a VARYING_KEYS key, every bare UUID and every instant read off the clock
    replaced by ``"<masked>"``."""
    if isinstance(data, dict):
        return {k: ("<masked>" if k in VARYING_KEYS and data[k] is not None else mask(v)) for k, v in data.items()}
    if isinstance(data, list):
        return [mask(v) for v in data]
    if isinstance(data, str) and (UUID.match(data) or (INSTANT.match(data) and int(data[:4]) in CLOCK_YEARS)):
        return "<masked>"
    return data


def run_scenario(home: Path, module: str | None = None) -> dict[str, Any]:
    """Run SCRIPT on ``--home HOME``; return ``{name: masked JSON}``. The CLI runs in this process
    (tests/conftest.py ``run_cli``), or as ``python -m <module>`` processes when a module is named.

    Raises AssertionError naming the step when a command exits non-zero or prints no JSON.
    """
    overrides = {"HF_HUB_OFFLINE": "1", "MEMLEDGER_EMBEDDER": "hash", "MEMLEDGER_CJK_EMBEDDER": "none"}
    outputs: dict[str, Any] = {}
    for name, argv in SCRIPT:
        if module is None:
            from tests.conftest import run_cli

            code, out, err = run_cli(["--home", str(home), *argv], env=overrides)
        else:
            proc = subprocess.run([sys.executable, "-m", module, "--home", str(home), *argv], capture_output=True,
                                  text=True, cwd=ROOT, env={**os.environ, **overrides}, timeout=300)
            code, out, err = proc.returncode, proc.stdout, proc.stderr
        assert code == 0, f"{name}: exit {code}: {err}"
        outputs[name] = mask(json.loads(out))
    return outputs


if __name__ == "__main__":  # python -m tests.json_contract [--update] [--module memledger]
    import tempfile

    module = sys.argv[sys.argv.index("--module") + 1] if "--module" in sys.argv else None
    with tempfile.TemporaryDirectory() as tmp:
        result = run_scenario(Path(tmp) / "ledger", module)
    text = json.dumps(result, ensure_ascii=False, indent=1, sort_keys=True) + "\n"
    if "--update" in sys.argv:
        GOLDEN.write_text(text)
        print(f"wrote {GOLDEN}")
    else:
        sys.stdout.write(text)
