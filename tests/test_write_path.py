"""One write path: every event a store records goes through ``Store.write`` (the key check, the erased-user refusal,
the caller's check, the save, read-your-writes), and one retry policy re-runs a lost race (docs/ARCHITECTURE.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from ledger.errors import BadInput, ConflictError
from ledger.retry import MAX_RETRIES, on_conflict
from tests.conftest import ROOT

#: the calls that save events to the log
SAVES = {"save", "save_events", "execute"}


def _saves_outside_write(path: Path) -> list[int]:
    """Lines of ``path`` that save events (``<x>.app.save/save_events/execute(...)``) outside an argument of a
    ``<x>.write(...)`` call."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    parents: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    bad = []
    for node in ast.walk(tree):
        f = getattr(node, "func", None)
        if not (isinstance(node, ast.Call) and isinstance(f, ast.Attribute) and f.attr in SAVES
                and isinstance(f.value, ast.Attribute) and f.value.attr == "app"):
            continue
        up, inside = parents.get(node), False
        while up is not None:
            if isinstance(up, ast.Call) and isinstance(up.func, ast.Attribute) and up.func.attr == "write":
                inside = True
                break
            if isinstance(up, ast.FunctionDef) and up.name == "save":  # a save() closure handed to write
                inside = True
                break
            up = parents.get(up)
        if not inside:
            bad.append(node.lineno)
    return bad


def test_every_save_of_the_faces_goes_through_store_write():
    found = {str(p.relative_to(ROOT)): lines for p in sorted((ROOT / "memledger").rglob("*.py"))
             if (lines := _saves_outside_write(p))}
    assert found == {}


def test_the_check_finds_a_save_outside_the_write_path(tmp_path):
    p = tmp_path / "m.py"
    p.write_text("def f(ml, e):\n    ml.app.save(e)\n    ml.write({'u'}, lambda: ml.app.save(e))\n")
    assert _saves_outside_write(p) == [2]


def test_no_capability_calls_a_private_write():
    hits = [str(p.relative_to(ROOT)) for p in (ROOT / "memledger").rglob("*.py") if "._execute(" in p.read_text()]
    assert hits == []


def test_a_session_write_for_an_erased_user_is_refused_and_writes_nothing(fresh_ledger):
    ml = fresh_ledger
    ml.assert_fact("gone", "preference.drink", "tea")
    ml.erase("gone")
    head = ml.head()
    with pytest.raises(BadInput) as err:
        ml.log_message("gone", "s1", role="user", message_id="m1", text="hello")
    assert err.value.field == "user_id" and ml.head() == head


def test_one_retry_policy_reruns_a_lost_race_then_gives_up():
    from eventsourcing.persistence import RecordConflictError

    calls = []

    def lose_twice(n: int) -> str:
        calls.append(n)
        if n < 2:
            raise RecordConflictError("taken")
        return "saved"

    assert on_conflict(lose_twice, "fact(s)") == "saved" and calls == [0, 1, 2]

    def always_lose(n: int) -> str:
        raise RecordConflictError("taken")

    with pytest.raises(ConflictError) as err:
        on_conflict(always_lose, "session(s)")
    assert f"gave up after {MAX_RETRIES + 1} attempts" in str(err.value) and "session(s)" in str(err.value)


def test_a_refusal_inside_an_attempt_is_not_retried():
    calls = []

    def refuse(n: int) -> str:
        calls.append(n)
        raise BadInput("value", "is wrong", "fix it")

    with pytest.raises(BadInput):
        on_conflict(refuse, "fact(s)")
    assert calls == [0]
