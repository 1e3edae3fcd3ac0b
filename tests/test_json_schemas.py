"""docs/schemas/ holds a JSON Schema per ``--json`` output, generated from the models (memledger/json_schemas.py):
the committed files must equal what the models generate, and the recorded outputs must validate against them."""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator

from memledger.json_schemas import OUTPUTS, render
from tests.conftest import ROOT
from tests.json_contract import GOLDEN

SCHEMAS = ROOT / "docs" / "schemas"
# which schema each recorded output of tests/json_contract.py's scenario must satisfy
RECORDED = {
    "write:ingest": "ingest", "write:assert-tea": "receipt", "write:assert-coffee": "receipt",
    "write:correct": "receipt", "write:assert-health": "receipt", "write:assert-city": "receipt",
    "write:retract-city": "receipt", "write:contest": "receipt", "write:session-start": "session-receipt",
    "write:session-log": "session-receipt", "write:session-card": "session-receipt",
    "write:session-summarize": "session-receipt", "profile-jon": "profile", "profile-gina": "profile",
    "history-jon": "history", "history-drink": "history", "search-job": "search", "search-source": "search",
    "believed-observed": "beliefs", "believed-future": "beliefs", "true-at": "beliefs", "diff-observed": "diff",
    "audit-drink": "audit", "audit-ref": "audit", "session-gaps": "session-gaps", "session-search": "session-search",
    "resume": "resume", "context": "context", "context-sensitive": "context", "export": "export", "verify": "verify",
    "write:assert-hedged": "receipt", "write:assert-quarantined": "receipt", "write:assert-scheduled": "receipt",
    "quarantine": "quarantine", "due": "due", "stats-jon": "stats", "stats": "stats",
    "profile-jon-hygiene": "profile", "context-hygiene": "context", "write:retract-source": "retract-source",
    "write:forget": "forget", "history-forgotten": "history",
}


def load(name: str) -> dict:
    return json.loads((SCHEMAS / f"{name}.schema.json").read_text())


@pytest.mark.parametrize("name", sorted(OUTPUTS))
def test_committed_schema_equals_the_models(name):
    path = SCHEMAS / f"{name}.schema.json"
    assert path.exists(), f"{path} missing: run python -m memledger.json_schemas"
    assert path.read_text() == render(name), f"{path} is stale: run python -m memledger.json_schemas"


def test_no_schema_file_without_a_model():
    assert sorted(p.name for p in SCHEMAS.glob("*.schema.json")) == sorted(f"{n}.schema.json" for n in OUTPUTS)


def test_every_recorded_output_validates_against_its_schema():
    recorded = json.loads(GOLDEN.read_text())
    assert set(recorded) == set(RECORDED)
    for name, out in recorded.items():
        errors = list(Draft202012Validator(load(RECORDED[name])).iter_errors(out))
        assert not errors, f"{name}: {errors[0].message} at {list(errors[0].absolute_path)}"


def test_a_schema_rejects_a_wrong_shape():
    v = Draft202012Validator(load("profile"))
    assert not v.is_valid({"user_id": "u1"})  # facts missing
    assert not v.is_valid({"user_id": "u1", "facts": {"k": {"value": 1}}})  # a fact without its fields


def test_errors_are_json_with_json(cli):
    code, out, err = cli("assert", "u1", "Bad Key", "x", "--json")
    assert (code, out) == (2, "")
    last = json.loads(err.strip().splitlines()[-1])
    assert last == {"error": {"field": "key", "problem": "'Bad Key' is not a dotted key",
                              "fix": "use dot-separated segments of letters, digits, '_' or '-' (no spaces), "
                                     "e.g. preference.drink"}, "exit": 2}
    assert Draft202012Validator(load("error")).is_valid(last)
    code, out, err = cli("profile", "--json")  # a usage error: the missing argument is named
    assert code == 2
    assert json.loads(err.strip().splitlines()[-1])["error"]["field"] == "user"
    code, out, err = cli("assert", "u1", "Bad Key", "x")  # without --json: the sentence only
    assert code == 2 and err.strip().splitlines()[-1].startswith("error: key:")
