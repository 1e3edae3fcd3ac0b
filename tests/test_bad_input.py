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
    # a typo'd year: observed_at is when the source said it, never in the future
    (["assert", "u1", "home.city", "Rome", "--observed-at", "2999-05-01T00:00:00Z"], "observed_at"),
    # outside datetime's range once converted to UTC (was OverflowError, exit 1)
    (["assert", "u1", "k.x", "1", "--observed-at", "0001-01-01T00:00:00+05:00"], "observed_at"),
    (["assert", "u1", "k.x", "1", "--valid-from", "9999-12-31T23:59:59-05:00"], "valid_from"),
    (["session", "start", "u1", "s1", "--observed-at", "2999-01-01T00:00:00Z"], "observed_at"),
    # a retraction's end before the value's start: refused, not taken as a full withdrawal
    (["retract", "u1", "preference.drink", "--valid-to", "2020-01-01T00:00:00Z"], "valid_to"),
    # identifiers stay plaintext in the log: capped, so content cannot hide in them
    (["assert", "u1", "k.x", "1", "--actor", "a" * 513], "actor"),
    (["assert", "u1", "k.x", "1", "--source-ref", "r" * 513], "source_ref"),
    (["session", "log", "u1", "s1", "--role", "user", "--message-id", "m" * 513, "--text", "x"], "--message-id"),
    # 300 levels of lists were stored, then every profile and history read failed (pydantic will not serialise it)
    (["assert", "u1", "k.deep", "[" * 65 + "1" + "]" * 65], "value"),
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


def test_the_deepest_value_stored_can_be_read_back(fresh_ledger):
    deepest: object = 1
    for _ in range(64):
        deepest = [deepest]
    fresh_ledger.assert_fact("u1", "k.deep", deepest)
    assert fresh_ledger.profile("u1").model_dump(mode="json")["facts"]["k.deep"]["value"] == deepest
    assert fresh_ledger.history("u1", "k.deep")[0].model_dump(mode="json")["value"] == deepest
    with pytest.raises(BadInput) as exc:
        fresh_ledger.assert_fact("u1", "k.deeper", [deepest])
    assert exc.value.field == "value" and "64 levels" in exc.value.problem


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


def test_deeply_nested_value_is_bad_input_not_a_crash(fresh_ledger):
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(BadInput) as exc:
        fresh_ledger.assert_fact("u1", "x.deep", deep)
    assert exc.value.field == "value" and "nested too deeply" in exc.value.problem
    assert fresh_ledger.history("u1") == []


def test_deeply_nested_json_on_cli_exits_2(cli):
    code, _, err = cli("assert", "u1", "x.deep", "[" * 50_000 + "]" * 50_000)
    assert code == 2 and "error: VALUE:" in err and "Traceback" not in err
    assert cli.json("history", "u1") == []


@pytest.mark.parametrize("value,kind", [("{bad json", "object"), ('[1, 2', "list")])
def test_a_value_that_opens_json_but_does_not_parse_exits_2(cli, value, kind):
    code, _, err = cli("assert", "u1", "x.broken", value)
    assert code == 2 and f"error: VALUE: opens a JSON {kind} but is not valid JSON" in err, err
    assert cli.json("history", "u1") == []
    code, _, _ = cli("assert", "u1", "x.text", json.dumps(value))  # quoted as a JSON string: the text itself
    assert code == 0 and cli.json("history", "u1")[0]["value"] == value


@pytest.mark.parametrize("kwargs,field", [
    ({"value": "\ud800"}, "value"),
    ({"value": "ok", "text": "bad \udfff text"}, "text"),
    ({"value": "ok", "reason": "\ud83d"}, "reason"),
])
def test_lone_surrogates_are_bad_input(fresh_ledger, kwargs, field):
    with pytest.raises(BadInput) as exc:
        fresh_ledger.assert_fact("u1", "k.x", **kwargs)
    assert exc.value.field == field and "surrogate" in exc.value.problem
    assert fresh_ledger.history("u1") == []


def test_non_string_user_id_names_the_type(fresh_ledger):
    with pytest.raises(BadInput) as exc:
        fresh_ledger.assert_fact(5, "k.x", 1)  # type: ignore[arg-type]
    assert exc.value.field == "user_id" and "got int" in exc.value.problem


def test_non_string_key_names_the_type_not_emptiness(fresh_ledger):
    head = fresh_ledger.head()
    with pytest.raises(BadInput) as exc:
        fresh_ledger.record([{"user_id": "u", "key": 5, "value": 1}])
    assert (exc.value.field, exc.value.problem, fresh_ledger.head()) == ("commands[0].key", "must be a string, got int",
                                                                          head)


@pytest.mark.parametrize("user_id", ["\ufffd\ufffd", "Jon\ufffd"])
def test_a_user_id_left_by_invalid_utf8_is_refused(fresh_ledger, user_id):
    with pytest.raises(BadInput) as exc:
        fresh_ledger.assert_fact(user_id, "k.x", 1)
    assert exc.value.field == "user_id" and "not valid UTF-8" in exc.value.problem
    assert fresh_ledger.history("Jon") == []


@pytest.mark.parametrize("session_id", ["s\ufffd", "\ufffd"])
def test_a_session_id_left_by_invalid_utf8_is_refused_like_a_user_id(fresh_ledger, session_id):
    with pytest.raises(BadInput) as exc:
        fresh_ledger.log_message("Jon", session_id, role="user", message_id="m1", text="hello")
    assert exc.value.field == "session_id" and "not valid UTF-8" in exc.value.problem
    assert fresh_ledger.head() == 0


def test_oversized_value_and_key_are_refused_with_short_messages(fresh_ledger):
    with pytest.raises(BadInput) as exc:
        fresh_ledger.assert_fact("u1", "k.big", "x" * 1_000_001)
    assert exc.value.field == "value" and "1000000 bytes" in exc.value.problem
    with pytest.raises(BadInput) as exc:
        fresh_ledger.assert_fact("u1", "k" * 5000, 1)
    assert exc.value.field == "key" and len(str(exc.value)) < 200
    assert fresh_ledger.history("u1") == []


def test_home_that_is_a_file_exits_2(tmp_path):
    from tests.conftest import run_cli

    f = tmp_path / "afile"
    f.write_text("not a directory")
    code, _, err = run_cli(["--home", str(f), "profile", "u1"])
    assert code == 2 and "error: --home:" in err and "Traceback" not in err
    assert f.read_text() == "not a directory"


@pytest.mark.parametrize("args, field", [
    (["believed", "u1", "--as-of", "9999-12-31T23:59:59-05:00"], "as_of"),
    (["believed", "u1", "--as-of", "0001-01-01T00:30:00+01:00"], "as_of"),
    (["true-at", "u1", "--valid-at", "9999-12-31T00:00:00Z"], "valid_at"),
    (["context", "u1", "--now", "9999-12-31T23:59:59-05:00"], "now"),
    (["resume", "u1", "--now", "0001-01-01T00:00:00+05:00"], "--now"),
])
def test_instants_beyond_the_calendar_exit_2_naming_the_field(cli, args, field):
    """Near year 1 or 9999 converting to UTC overflowed datetime: exit 1 with "OverflowError"."""
    cli("assert", "u1", "preference.drink", "tea")
    code, out, err = cli(*args)
    assert (code, out) == (2, "")
    assert err.startswith(f"error: {field}: ") and "outside the supported range" in err, err


def test_observed_at_a_few_seconds_ahead_is_clock_skew_not_an_error(fresh_ledger):
    from datetime import timedelta

    from ledger.timeutil import now_utc

    ahead = now_utc() + timedelta(seconds=30)  # within MAX_CLOCK_SKEW (5 minutes)
    r = fresh_ledger.assert_fact("u1", "k.x", 1, observed_at=ahead)
    assert fresh_ledger.history("u1")[0].observed_at == ahead and r.version == 1
    with pytest.raises(BadInput) as exc:
        fresh_ledger.assert_fact("u1", "k.x", 2, observed_at=now_utc() + timedelta(minutes=6))
    assert exc.value.field == "observed_at"


def test_refusals_do_not_speak_pydantic(cli, tmp_path):
    """Refusals name what was given and what is wrong, as the rest of the CLI does; never pydantic's "Value error,"
    or "Input should be" phrasing."""
    cases = [
        (["assert", "u1", "a.b", "x", "--confidence", "2"], "error: confidence: must be a number between 0 and 1"),
        (["assert", "u1", "a.b", "x", "--source", "bogus"],
         "error: source: 'bogus' is not 'user_statement', 'agent_inference', 'external_import' or "
         "'system_feedback' (use one of user_statement, agent_inference, external_import, system_feedback)"),
        (["session", "log", "u1", "s1", "--role", "bogus", "--message-id", "m", "--text", "t"],
         "error: role: 'bogus' is not 'user', 'assistant', 'system' or 'tool'"),
        (["session", "card", "u1", "s1", "--status", "bogus"], "error: status: 'bogus' is not 'open' or 'done'"),
    ]
    lines = tmp_path / "bad.jsonl"
    lines.write_text('{"user_id": "u1", "key": "a.b", "value": 1, "confidence": "x"}\n')
    cases.append((["ingest", str(lines), "--format", "jsonl"], "error: line 1: confidence: 'x' is not a valid number"))
    roles = tmp_path / "role.jsonl"
    roles.write_text('{"user_id": "u1", "key": "a.b", "value": 1, "role": "bogus"}\n')
    cases.append((["ingest", str(roles), "--format", "jsonl"], "error: line 1: role: 'bogus' is not an object (give an "
                                                               "object such as {\"role\": \"planner\""))
    cases.append((["assert", "u1", "a.b", "x", "--confidence", "abc"], "Usage: memledger assert"))
    for args, expected in cases:
        code, out, err = cli(*args)
        assert code == 2, (args, err)
        assert err.startswith(expected), (args, err)
        assert "Input should" not in err and "Value error" not in err
    assert "Invalid value for '--confidence': is not a number" in cli("assert", "u1", "a.b", "x", "--confidence", "abc")[2]
    assert cli.json("profile", "u1")["facts"] == {}  # nothing written


def test_values_texts_and_identifiers_refuse_empty_and_control_characters(cli):
    cases = [
        (["assert", "u1", "a.b", ""], "error: value: is an empty string (give the fact's value; to remove a fact "
                                      "use retract)"),
        (["assert", "u1", "a.b", "   "], "error: value: is an empty string"),
        (["assert", "u1", "a.b", "x\x1b[2Jy"], "error: value: contains the control character '\\x1b' at position 1"),
        (["assert", "u1", "a.b", '{"k\\u0000": 1}'], "error: value: contains the control character '\\x00'"),
        (["assert", "u1", "a.b", "ok", "--text", "a\rb"], "error: text: contains the control character '\\r'"),
        (["assert", "u1", "a.b", "ok", "--actor", "a\x01"], "error: actor: contains the control character '\\x01'"),
        (["assert", "u1", "a.b", "ok", "--source-ref", "m\x07"], "error: source_ref: contains the control character"),
        (["assert", "u1", "Preference.Food", "x"],
         "error: key: 'Preference.Food' has capital letters, and new keys are lowercase (use 'preference.food')"),
    ]
    for args, expected in cases:
        code, out, err = cli(*args)
        assert code == 2, (args, err)
        assert err.startswith(expected), (args, err)
    assert cli.json("profile", "u1")["facts"] == {}  # nothing written
    # tab and newline are text, not control
    assert cli("assert", "u1", "a.b", "line1\nline2\tcol", "--text", "two\nlines")[0] == 0
    assert cli.json("profile", "u1")["facts"]["a.b"]["value"] == "line1\nline2\tcol"


def test_an_existing_capitalised_key_stays_usable(store_args, monkeypatch):
    """Keys created before the lowercase rule stay readable, supersedable and retractable."""
    import ledger.domain

    from memledger import MemoryLedger

    with MemoryLedger(**store_args) as ml:
        monkeypatch.setattr(ledger.domain, "new_key_allowed", lambda key: True)  # a store from before the rule
        ml.assert_fact("u1", "Preference.Food", "sushi", observed_at="2024-01-01T00:00:00Z")
        monkeypatch.undo()
        assert ml.assert_fact("u1", "Preference.Food", "ramen").effect == "supersede"
        assert ml.profile("u1").facts["Preference.Food"].value == "ramen"
        assert [h.value for h in ml.history("u1", "Preference.Food")] == ["sushi", "ramen"]
        assert ml.retract_fact("u1", "Preference.Food", reason="forget it").kind == "retracted"
        assert ml.profile("u1").facts == {}
        with pytest.raises(BadInput, match="new keys are lowercase"):
            ml.assert_fact("u1", "Preference.Drink", "tea")


def test_a_nul_character_is_refused_everywhere_and_the_store_keeps_working(cli, store_args, tmp_path):
    """PostgreSQL text cannot hold NUL: one accepted NUL used to be appended to the log, then fail every catch-up
    (every later command exited 1, and their events were appended anyway). Refused at the boundary instead."""
    from memledger import MemoryLedger

    code, _out, err = cli("assert", "u1", "a.b", '"a\\u0000b"')  # a JSON value (argv itself cannot hold NUL)
    assert code == 2 and "value: contains the control character '\\x00'" in err, err
    lines = tmp_path / "nul.jsonl"
    lines.write_text('{"user_id": "u1", "key": "a.c", "value": 1, "text": "a\\u0000b"}\n')
    code, _out, err = cli("ingest", str(lines), "--format", "jsonl")
    assert code == 2 and "line 1: text: contains the control character '\\x00'" in err, err
    with MemoryLedger(**store_args) as ml:
        for call in (lambda: ml.log_message("u1", "s1", role="user", message_id="m1", text="a\x00b"),
                     lambda: ml.session_start("u1", "s2", task="t\x00"),
                     lambda: ml.assert_fact("u1", "a.d", "x", actor="a\x00")):
            with pytest.raises(BadInput, match="contains the control character '\\\\x00'"):
                call()
    assert cli("assert", "u1", "a.b", "fine")[0] == 0
    assert cli.json("profile", "u1")["facts"]["a.b"]["value"] == "fine"
    assert [r["position"] for r in cli.json("history", "u1")] == [1]
    assert cli("verify")[0] == 0


def test_numbers_that_mean_nothing_are_refused(cli, store_args):
    from memledger import MemoryLedger

    cli("assert", "u1", "a.b", "x")
    for args, expected in [
        (["profile", "u1", "--timeout", "-5", "--after", "1"], "error: timeout: -5.0 is not a number of seconds"),
        (["resume", "u1", "--expiry-hours", "nan"], "error: expiry_hours: nan is not a positive number of hours"),
        (["resume", "u1", "--expiry-hours", "inf"], "error: expiry_hours: inf is not a positive number of hours"),
        (["session", "gaps", "u1", "--recent", "-1"], "error: --recent: -1 is not a number of sessions"),
    ]:
        code, _out, err = cli(*args)
        assert (code, err.splitlines()[0]) == (2, err.splitlines()[0]) and err.startswith(expected), (args, err)
    with MemoryLedger(**store_args) as ml:
        with pytest.raises(BadInput, match="non-string object key 1"):
            ml.assert_fact("u1", "a.c", {1: "a"})  # json would have turned the key into "1" silently
        with pytest.raises(BadInput, match="confidence: True is not a number"):
            ml.assert_fact("u1", "a.c", "x", confidence=True)
        assert list(ml.profile("u1").facts) == ["a.b"]


def test_jsonl_files_that_are_not_utf8_json_lines_are_bad_input(cli, tmp_path):
    binary = tmp_path / "bin.jsonl"
    binary.write_bytes(b'{"user_id": "u1"}\n\x93\xff\xfe garbage\n')
    deep = tmp_path / "deep.jsonl"
    deep.write_text('{"user_id": "u1", "key": "a.b", "value": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    for path, expected in [(binary, f"error: FILE: '{binary}' is not UTF-8 text (byte 18)"),
                           (deep, "error: line 1: is JSON nested too deeply to be stored")]:
        code, _out, err = cli("ingest", str(path), "--format", "jsonl")
        assert code == 2 and err.startswith(expected), err
    bom = tmp_path / "bom.jsonl"  # a byte-order mark (Windows editors) is not an error
    bom.write_bytes('\ufeff{"user_id": "u1", "key": "a.b", "value": 1}\n'.encode("utf-8"))
    assert cli("ingest", str(bom), "--format", "jsonl")[0] == 0
    assert cli.json("profile", "u1")["facts"]["a.b"]["value"] == 1


def test_a_jsonl_line_naming_a_field_twice_is_refused(cli, tmp_path):
    """json.loads keeps the last of two equal keys silently: a line with user_id twice was recorded for the second."""
    dup = tmp_path / "dup.jsonl"
    dup.write_text('{"user_id": "u1", "key": "a.b", "value": 1, "user_id": "u2"}\n'
                   '{"user_id": "u1", "key": "a.c", "value": {"k": 1, "k": 2}}\n')
    code, _out, err = cli("ingest", str(dup), "--format", "jsonl")
    assert code == 2 and err.startswith("error: line 1: has the field 'user_id' twice")
    dup.write_text('{"user_id": "u1", "key": "a.c", "value": {"k": 1, "k": 2}}\n')
    code, _out, err = cli("ingest", str(dup), "--format", "jsonl")
    assert code == 2 and err.startswith("error: line 1: has the field 'k' twice")
    assert cli.json("profile", "u1")["facts"] == {} and cli.json("profile", "u2")["facts"] == {}


def test_a_batch_over_the_size_limits_is_refused_before_anything_is_written(fresh_ledger) -> None:
    """psycopg's pipeline can deadlock on a very large save (ledger/schemas.py MAX_BATCH_COMMANDS): refused, named."""
    from ledger.errors import BadInput
    from ledger.schemas import MAX_BATCH_BYTES, MAX_BATCH_COMMANDS

    ml = fresh_ledger
    with pytest.raises(BadInput) as info:
        ml.record([{"user_id": "u1", "key": f"k.n{i}", "value": i} for i in range(MAX_BATCH_COMMANDS + 1)])
    assert info.value.field == "commands" and f"at most {MAX_BATCH_COMMANDS}" in info.value.fix
    big = "x" * 900_000
    with pytest.raises(BadInput) as info:
        ml.record([{"user_id": "u1", "key": f"k.b{i}", "value": big} for i in range(MAX_BATCH_BYTES // 900_000 + 1)])
    assert info.value.field == "commands" and "bytes" in info.value.problem
    with pytest.raises(BadInput) as info:
        ml.record_session([{"op": "log", "user_id": "u1", "session_id": "s", "role": "user", "message_id": f"m{i}",
                            "text": "hi"} for i in range(MAX_BATCH_COMMANDS + 1)])
    assert info.value.field == "commands"
    assert ml.head() == 0  # nothing written
    assert len(ml.record([{"user_id": "u1", "key": f"k.n{i}", "value": i} for i in range(MAX_BATCH_COMMANDS)])) \
        == MAX_BATCH_COMMANDS  # the limit itself is accepted


@pytest.mark.parametrize("args,field", [
    (["remember", "u1", "I have asthma", "--sensitivity", "Not A Label!"], "sensitivity"),
    (["export", "u1", "--agent", " "], "--agent"),
    (["forget", "u1", "--run", "r1"], "--yes"),  # a scope forgotten only with --yes, as a key is
])
def test_new_flags_refuse_bad_input_with_exit_2_and_nothing_written(cli, args, field):
    cli("assert", "u1", "k.kept", "1", "--run", "r1")
    before = cli.json("history", "u1")
    code, _, err = cli(*args)
    assert code == 2 and "Traceback" not in err and field in err.splitlines()[-1], err
    assert cli.json("history", "u1") == before
