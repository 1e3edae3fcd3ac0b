"""The CLI contract of the core verbs, end to end (in this process: tests/conftest.py), with exact JSON."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT

PROFILE_FIELDS = {"value", "text", "version", "recorded_at", "valid_from", "valid_to", "source", "confidence",
                  "status", "hedged", "attribute", "extracted_value", "ended"}
HISTORY_FIELDS = {"key", "value", "kind", "reason", "version", "recorded_at", "valid_from", "valid_to", "source",
                  "source_ref", "position"}


def test_supersede_correct_retract_reaffirm_contest_through_cli(cli):
    r = cli.json("assert", "u1", "preference.drink", "tea", "--observed-at", "2024-01-01T08:00:00+08:00",
                 "--source-ref", "msg-1", "--session", "s1")
    assert {k: r[k] for k in ("version", "position", "kind", "effect", "replayed")} == {
        "version": 1, "position": 1, "kind": "asserted", "effect": "new", "replayed": False}
    assert cli.json("assert", "u1", "preference.drink", "coffee", "--observed-at", "2024-03-01T00:00:00Z")["effect"] \
        == "supersede"
    assert cli.json("assert", "u1", "preference.drink", "coffee")["kind"] == "reaffirmed"
    assert cli.json("assert", "u1", "preference.drink", "water", "--source", "agent_inference",
                    "--confidence", "0.2")["effect"] == "contest"
    prof = cli.json("profile", "u1")
    assert prof["user_id"] == "u1"
    fact = prof["facts"]["preference.drink"]
    assert set(fact) == PROFILE_FIELDS
    assert (fact["value"], fact["version"], fact["status"], fact["valid_from"], fact["valid_to"]) == (
        "coffee", 2, "contested", "2024-03-01T00:00:00Z", None)
    # a structured fact is shown by its slot's label and its value, the sentence unread
    assert (fact["attribute"], fact["extracted_value"], fact["ended"]) == ("drink", "coffee", False)

    assert cli.json("assert", "u1", "profile.birth_year", "1990", "--observed-at", "2024-01-02T00:00:00Z")[
        "version"] == 1
    c = cli.json("correct", "u1", "profile.birth_year", "1995", "--reason", "typo")
    assert (c["kind"], c["version"]) == ("corrected", 2)
    assert cli.json("profile", "u1")["facts"]["profile.birth_year"]["value"] == 1995  # VALUE parsed as JSON

    t = cli.json("retract", "u1", "preference.drink", "--reason", "forget it")
    assert (t["kind"], t["version"]) == ("retracted", 5)
    assert sorted(cli.json("profile", "u1")["facts"]) == ["profile.birth_year"]

    hist = cli.json("history", "u1", "preference.drink")
    assert all(HISTORY_FIELDS <= set(h) for h in hist)
    assert [(h["version"], h["kind"], h["value"], h["valid_from"], h["valid_to"]) for h in hist] == [
        (1, "asserted", "tea", "2024-01-01T00:00:00Z", "2024-03-01T00:00:00Z"),
        (2, "asserted", "coffee", "2024-03-01T00:00:00Z", "2024-03-01T00:00:00Z"),  # retracted: empty range
        (3, "reaffirmed", "coffee", "2024-03-01T00:00:00Z", None),
        (4, "asserted", "water", hist[3]["valid_from"], None),
        (5, "retracted", None, None, None),
    ]
    assert hist[0]["source_ref"] == "msg-1" and hist[4]["reason"] == "forget it"
    assert [h["position"] for h in hist] == [1, 2, 3, 4, 7]


def test_value_parsing(cli):
    for raw, parsed in [("42", 42), ('"42"', "42"), ("true", True), ('{"a": [1, 2]}', {"a": [1, 2]}),
                        ("hello world", "hello world"), ("NaN", "NaN"), ("[WIP] notes", "[WIP] notes")]:
        cli("assert", "u1", "v.x", raw)
        assert cli.json("profile", "u1")["facts"]["v.x"]["value"] == parsed, raw



def test_human_output_prints_a_memory_as_said(cli):
    # rich's markup and emoji codes are off: neither "[bold]" nor ":thumbs_up:" is rewritten
    said = "I said :thumbs_up: to [bold]the plan[/bold] :smile:"
    code, _, err = cli("assert", "u1", "note.reply", said, "--text", said)
    assert code == 0, err
    for verb in (["profile", "u1"], ["history", "u1"], ["search", "u1", "the plan"]):
        code, out, err = cli(*verb)
        assert code == 0, err
        assert ":thumbs_up:" in out and "[bold]the plan[/bold]" in out and "\U0001f44d" not in out, verb

def test_idempotency_key_through_cli(cli):
    a = cli.json("assert", "u1", "k.a", "1", "--idempotency-key", "abc")
    b = cli.json("assert", "u1", "k.a", "1", "--idempotency-key", "abc")
    assert b["replayed"] is True and (a["event_id"], a["position"]) == (b["event_id"], b["position"])


def test_ingest_sample_end_to_end(cli):
    sample = ROOT / "samples" / "locomo_conv30.json"
    report = cli.json("ingest", str(sample))
    assert {k: v for k, v in report.items() if k != "messages"} == {
        "commands": 169, "recorded": 169, "replayed": 0, "quarantined": 0, "users": {"Jon": 86, "Gina": 83}}
    conv = json.loads(sample.read_text())[0]
    expected = {"Jon": 0, "Gina": 0}
    for sess in conv["observation"].values():
        for speaker, obs in sess.items():
            expected[speaker] += len(obs)
    for speaker, n in expected.items():
        assert len(cli.json("profile", speaker)["facts"]) == n
    jon = cli.json("profile", "Jon")["facts"]
    lost_job = jon["memory.202e6ae625a2"]
    assert lost_job["value"] == "Jon lost his job as a banker the day before the conversation."
    assert lost_job["valid_from"] == "2023-01-20T16:04:00Z" and lost_job["source"] == "user_statement"
    hist = cli.json("history", "Jon", "memory.202e6ae625a2")
    assert [(h["kind"], h["source_ref"]) for h in hist] == [("asserted", "D1:2")]
    again = cli.json("ingest", str(sample))
    assert (again["recorded"], again["replayed"]) == (0, 169)


def test_home_from_environment(tmp_path):
    from tests.conftest import run_cli

    code, _, err = run_cli(["assert", "u1", "k.a", "1"], env={"MEMLEDGER_HOME": str(tmp_path / "envhome")})
    assert code == 0, err
    assert (tmp_path / "envhome" / "events.db").exists()


def test_typer_exit_code_is_propagated():
    """click returns (not raises) a typer.Exit's code without standalone mode; main() must still exit with it."""
    import pytest
    import typer

    from memledger import cli

    @cli.app.command("zz-exit-probe", hidden=True)
    def _probe() -> None:
        raise typer.Exit(3)

    try:
        with pytest.raises(SystemExit) as exc:
            cli.main(["zz-exit-probe"])
        assert exc.value.code == 3
    finally:
        cli.app.registered_commands = [c for c in cli.app.registered_commands if c.name != "zz-exit-probe"]


def test_jsonl_policy_refusal_names_the_line_and_writes_nothing(cli, tmp_path):
    """A JSONL command refused by the policy (not by validation) printed no line number."""
    f = tmp_path / "cmds.jsonl"
    f.write_text('{"user_id": "u1", "key": "preference.drink", "value": "tea", "observed_at": "2024-01-01T09:00:00Z"}'
                 '\n\n{"op": "retract", "user_id": "u1", "key": "preference.drink", '
                 '"valid_to": "2023-01-01T00:00:00Z"}\n', encoding="utf-8")
    code, out, err = cli("ingest", str(f), "--format", "jsonl")
    assert code == 2 and err.startswith("error: line 3: valid_to: 2023-01-01T00:00:00+00:00 is not after"), err
    assert cli.json("history", "u1") == []  # one batch: nothing of it was saved


def test_version_flag(cli):
    from importlib.metadata import version

    code, out, _err = cli("--version")
    assert (code, out.strip()) == (0, f"memledger {version('memledger')}")


def test_locomo_dates_read_by_strptime_match_dateparser():
    """LoCoMo's "1:56 pm on 8 May, 2023" is read by strptime (dateparser's first call costs ~0.5 s of an ingest):
    every date string of the shipped sample gives dateparser's instant, and other wordings still reach dateparser."""
    from datetime import timezone

    import dateparser

    from memledger.ingest import _locomo_instant, parse_locomo_time

    data = json.loads((ROOT / "samples" / "locomo_conv30.json").read_text(encoding="utf-8"))
    convs = data if isinstance(data, list) else [data]
    texts = {c["conversation"][k] for c in convs for k in c["conversation"] if k.endswith("date_time")}
    texts |= {"12:05 am on 1 January, 2024", "12:30 PM on 3 MAY, 2023", " 9:07 pm on 29 February, 2024 "}
    assert len(texts) > 10
    for text in texts:
        expected = dateparser.parse(text, languages=["en"], settings={"TIMEZONE": "UTC",
                                                                       "RETURN_AS_TIMEZONE_AWARE": True})
        assert parse_locomo_time(text, "date_time") == expected.astimezone(timezone.utc).isoformat(), text
    _locomo_instant.cache_clear()
    assert parse_locomo_time("May 8, 2023 1:56 pm", "date_time") == "2023-05-08T13:56:00+00:00"  # dateparser's


def test_damaged_search_files_never_fail_a_write_or_a_search(tmp_path):
    from tests.conftest import CLI

    home = tmp_path / "h"
    cli = CLI({"home": home})
    assert cli("remember", "alice", "I drink green tea every morning")[0] == 0
    assert cli("search", "alice", "tea")[0] == 0  # writes the index files
    (home / "vectors" / "embeddings.db").write_bytes(b"\x00garbage" * 1024)
    lex = next((home / "vectors").glob("*/serving/*.lex"))
    lex.unlink()
    lex.mkdir()  # a directory in the way of alice's index file
    code, out, err = cli("remember", "alice", "These days I drink hot chocolate instead", "--json")
    assert code == 0, err
    assert json.loads(out)["decision"] == "supersede"
    assert "embedding cache" in err and "were not saved" in err and "Traceback" not in err
    hits = cli.json("search", "alice", "what do I drink")
    assert [h["text"] for h in hits] == ["These days I drink hot chocolate instead"]
    assert len(cli.json("history", "alice")) == 2  # one remember, one supersede: nothing written twice
    (home / "vectors" / "embeddings.db").unlink()
    (home / "vectors" / "embeddings.db").mkdir()
    code, out, err = cli("remember", "alice", "I play tennis on Sundays")
    assert code == 1 and "cannot be opened" in err and "embeddings.db" in err and "Traceback" not in err


def test_a_damaged_store_file_is_named_with_what_to_do_and_projections_come_back_from_the_log(tmp_path):
    """garbage in events.db, projections.db or keys.db gave "DatabaseError: file is not a database"
    naming no file. Each is now named with its fix (exit 1, no traceback); the projections, which only the log
    makes, come back when their file is moved aside as the message says."""
    import shutil

    from tests.conftest import CLI

    good = tmp_path / "good"
    assert CLI({"home": good})("assert", "u1", "preference.drink", "tea")[0] == 0
    fixes = {"events.db": "restore it from a backup", "keys.db": "restore it from a backup",
             "projections.db": "move it aside"}
    for name, fix in fixes.items():
        home = tmp_path / name.replace(".", "_")
        shutil.copytree(good, home)
        for suffix in ("-wal", "-shm"):
            (home / (name + suffix)).unlink(missing_ok=True)
        (home / name).write_bytes(b"not a database " * 600)
        code, out, err = CLI({"home": home})("profile", "u1")
        assert code == 1 and "Traceback" not in err, (name, err)
        assert f"{home / name}: not a readable SQLite database" in err and fix in err, (name, err)
        if name == "projections.db":
            aside = tmp_path / "aside"
            aside.mkdir()
            for f in home.glob("projections.db*"):
                f.rename(aside / f.name)
            assert CLI({"home": home}).json("profile", "u1")["facts"]["preference.drink"]["value"] == "tea"


def test_an_emptied_log_is_refused_before_it_takes_new_positions(tmp_path):
    """a 0-byte events.db was taken for a new log; the next assert got position 1, which the
    projections (already further) never applied, and profile kept answering from the lost log's rows. Opening now
    refuses a log that ends before its projections (nothing written), with both positions and the ways out."""
    import shutil

    from tests.conftest import CLI

    good = tmp_path / "good"
    cli = CLI({"home": good})
    for value in ("tea", "coffee"):
        assert cli("assert", "u1", "preference.drink", value)[0] == 0
    home = tmp_path / "emptied"
    shutil.copytree(good, home)
    for suffix in ("", "-wal", "-shm"):
        (home / f"events.db{suffix}").unlink(missing_ok=True)
    (home / "events.db").write_bytes(b"")
    emptied = CLI({"home": home})
    for verb in (("assert", "u1", "k.new", "v"), ("profile", "u1")):
        code, out, err = emptied(*verb, "--json")
        assert code == 1 and "Traceback" not in err, err
        error = json.loads(err.strip().splitlines()[-1])["error"]
        assert error["field"] == str(home / "events.db")
        assert "ends at position 0, but the projections have reached position 2" in error["problem"]
        assert "restore it from a backup" in error["fix"] and "move projections.db aside" in error["fix"]
    (home / "aside").mkdir()
    for f in home.glob("projections.db*"):
        f.rename(home / "aside" / f.name)
    assert emptied.json("profile", "u1")["facts"] == {}  # kept on purpose: the projections follow the log
    assert emptied("assert", "u1", "k.new", "v")[0] == 0 and emptied.json("history", "u1")[0]["position"] == 1


def test_a_directory_in_place_of_a_store_file_or_a_damaged_page_is_said_with_what_to_do(tmp_path):
    import shutil
    import sqlite3

    from eventsourcing.persistence import DatabaseError as LogDatabaseError
    from eventsourcing.persistence import OperationalError as LogOperationalError

    from memledger.cli import _damaged_store
    from tests.conftest import CLI

    good = tmp_path / "good"
    assert CLI({"home": good})("assert", "u1", "preference.drink", "tea")[0] == 0
    for name in ("events.db", "projections.db", "keys.db"):
        home = tmp_path / f"dir_{name}"
        shutil.copytree(good, home)
        for f in home.glob(f"{name}*"):
            f.unlink()
        (home / name).mkdir()
        code, out, err = CLI({"home": home})("profile", "u1")
        assert code == 1 and "Traceback" not in err, err
        assert f"{home / name}: is a directory, not the store's database file" in err, err
    # a damaged page met after the open's checks: SQLite names no file; the message says how to find it
    problem, fix = _damaged_store(sqlite3.DatabaseError("database disk image is malformed"))
    assert "damaged (SQLite: database disk image is malformed)" in problem and "integrity_check" in fix
    assert _damaged_store(LogDatabaseError("file is not a database")) is not None
    for other in (sqlite3.OperationalError("database is locked"), LogOperationalError("x"), ValueError("x")):
        assert _damaged_store(other) is None


def test_table_cells_mark_a_cut_value(cli):
    long = " ".join(["word"] * 40) + " END"
    assert cli("assert", "u1", "note.long", json.dumps(long))[0] == 0
    code, out, err = cli("profile", "u1")
    assert code == 0, err
    assert "\u2026" in out and "END" not in out and out.count("word") == 15  # a quote, 15 words, "wor…"
    code, out, _ = cli("history", "u1")
    assert "\u2026" in out and "END" not in out
    assert cli.json("profile", "u1")["facts"]["note.long"]["value"] == long  # --json has it whole


def test_unlink_refuses_a_negative_version_by_name(cli):
    assert cli("remember", "u1", "I drink green tea every morning")[0] == 0
    for bad in ("-1", "0"):
        code, _, err = cli("unlink", "u1", "preference.drink", bad, "--json")
        assert code == 2, err
        e = json.loads(err.strip().splitlines()[-1])["error"]
        assert (e["field"], e["problem"]) == ("version", f"{bad} is not a version number")
    code, _, err = cli("unlink", "u1", "preference.drink", "1", "--jsn")  # a mistyped option is still refused
    assert code == 2 and "--jsn" in err
    assert len(cli.json("history", "u1")) == 1  # nothing written


def test_remember_reads_a_long_text_from_standard_input(tmp_path):
    # a text beyond the command line's limit (about 128 KiB on Linux) comes in on stdin with TEXT "-"
    from tests.conftest import CLI

    cli = CLI({"home": tmp_path / "h"})
    text = "我今天去了北京的公司开会。" * 4000 + "我住在杭州。"
    code, out, err = cli("remember", "alice", "-", "--json", input=text)
    assert code == 0, err
    key = json.loads(out)["key"]
    assert [h["text"] for h in cli.json("history", "alice", key)] == [text]
    code, out, err = cli("remember", "alice", "-", input="\u200b")
    assert code == 2 and "text: is empty" in err and "Traceback" not in err
    assert len(cli.json("history", "alice")) == 1  # nothing written
    # a byte-order mark is no part of the text; bytes that are not UTF-8 are refused, naming TEXT
    key = json.loads(cli("remember", "bob", "-", "--json", input="\ufeff我住在杭州。")[1])["key"]
    assert [h["text"] for h in cli.json("history", "bob", key)] == ["我住在杭州。"]
    proc = subprocess.run([sys.executable, "-m", "memledger", "--home", str(tmp_path / "h"), "remember", "carol", "-"],
                          input=b"\xff\xfe\x80 not utf-8", capture_output=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 2 and b"not UTF-8" in proc.stderr and b"Traceback" not in proc.stderr
