"""Bad input is refused at the boundary: exit 2, a message naming the field, and the store byte-identical."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from ledger import BadInput


def snapshot(home: Path) -> dict[str, str]:
    """sha256 of every file of an embedded store (WAL/SHM sidecars excluded: SQLite deletes them on close)."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(home.iterdir())
        if p.is_file() and not p.name.endswith(("-wal", "-shm", "-journal"))
    }


CASES = [
    (["assert", "u1", "bad key", "x"], "key"),
    (["assert", "u1", "k.x", "1", "--observed-at", "2024-01-01T00:00:00"], "observed_at"),
    (["assert", "u1", "k.x", "1", "--valid-from", "yesterday"], "valid_from"),
    (["assert", "", "k.x", "1"], "user_id"),
    (["assert", "  ", "k.x", "1"], "user_id"),
    (["assert", "u1", "k.x", "1", "--source", "rumour"], "source"),
    (["assert", "u1", "k.x", "1", "--confidence", "1.5"], "confidence"),
    (["assert", "u1", "k.x", "1", "--valid-from", "2024-02-01T00:00:00Z", "--valid-to", "2024-01-01T00:00:00Z"],
     "valid_to"),
    (["correct", "u1", "k.none", "1"], "key"),
    (["retract", "u1", "k.none"], "key"),
    (["assert", "u1", "preference.drink", "milk", "--idempotency-key", "first"], "idempotency_key"),
]


@pytest.mark.parametrize("args,field", CASES, ids=[c[1] + "-" + c[0][0] for c in CASES])
def test_cli_refuses_and_store_is_unchanged(cli, store_args, backend, args, field):
    assert cli("assert", "u1", "preference.drink", "tea", "--idempotency-key", "first")[0] == 0
    before = snapshot(store_args["home"]) if backend == "sqlite" else None
    history_before = cli.json("history", "u1")
    code, out, err = cli(*args)
    assert code == 2, (out, err)
    assert f"error: {field}:" in err
    assert "Traceback" not in err
    if before is not None:
        assert snapshot(store_args["home"]) == before
    assert cli.json("history", "u1") == history_before


def test_value_that_is_not_json_is_refused(fresh_ledger):
    with pytest.raises(BadInput) as exc:
        fresh_ledger.assert_fact("u1", "k.x", {1, 2})
    assert exc.value.field == "value"
    with pytest.raises(BadInput) as exc:
        fresh_ledger.assert_fact("u1", "k.x", float("nan"))
    assert exc.value.field == "value"
    assert fresh_ledger.history("u1") == []


def test_naive_datetime_object_refused(fresh_ledger):
    from datetime import datetime

    with pytest.raises(BadInput) as exc:
        fresh_ledger.assert_fact("u1", "k.x", 1, valid_from=datetime(2024, 1, 1))
    assert exc.value.field == "valid_from"


def test_jsonl_with_one_bad_line_writes_nothing(cli, tmp_path):
    f = tmp_path / "cmds.jsonl"
    f.write_text(
        json.dumps({"user_id": "u1", "key": "a.b", "value": 1}) + "\n"
        + json.dumps({"user_id": "u1", "key": "a c", "value": 2}) + "\n",
        encoding="utf-8",
    )
    code, _, err = cli("ingest", str(f), "--format", "jsonl")
    assert code == 2 and "line 2: key" in err
    assert cli.json("history", "u1") == []
    f.write_text('{"user_id": "u1", "key": "a.b", "value": 1}\n{not json\n', encoding="utf-8")
    code, _, err = cli("ingest", str(f), "--format", "jsonl")
    assert code == 2 and "line 2" in err
    code, _, err = cli("ingest", str(tmp_path / "missing.json"))
    assert code == 2 and "FILE" in err
    code, _, err = cli("ingest", str(f), "--format", "csv")
    assert code == 2 and "--format" in err
