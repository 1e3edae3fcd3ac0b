"""``memledger import mem0`` and ``memledger import langgraph`` (memledger/importers/): what is carried over, with
its original times and ids, what is not and why, nothing new on a re-run, and bad files refused with exit 2."""

from __future__ import annotations

import json
import sqlite3

import pytest

from memledger.importers.mem0 import fact_key

EXPORT = {"results": [
    {"id": "a1", "memory": "Likes oat flat whites", "hash": "x", "metadata": {"topic": "drink"},
     "created_at": "2024-07-20T10:05:33.123456-07:00", "updated_at": "2024-08-01T09:00:00-07:00",
     "user_id": "alice", "agent_id": "barista"},
    {"id": "a2", "memory": "Lives in Lisbon", "created_at": "2024-07-21T10:00:00+00:00", "updated_at": None,
     "user_id": "alice"},
    {"id": "b1", "memory": "Allergic to peanuts", "created_at": "2024-07-22T10:00:00+00:00", "user_id": "bob",
     "run_id": "trip-1"},
    {"id": "c1", "memory": "An agent's note", "created_at": "2024-07-22T10:00:00+00:00", "agent_id": "x"},
    {"id": "c2", "memory": "A run's note", "created_at": "2024-07-22T10:00:00+00:00", "run_id": "r"},
    {"id": "d1", "memory": "A naive time", "created_at": "2024-07-22T10:00:00", "user_id": "bob"},
]}
HISTORY = [
    ("h1", "a1", None, "Likes black coffee", "ADD", "2024-07-20T10:05:33.123456-07:00", None, 0, None, "user"),
    ("h2", "a1", "Likes black coffee", "Likes oat flat whites", "UPDATE", "2024-07-20T10:05:33.123456-07:00",
     "2024-08-01T09:00:00-07:00", 0, None, "user"),
    ("h3", "z9", None, "gone", "ADD", "2024-07-20T10:05:33-07:00", None, 0, None, "user"),
    ("h4", "z9", "gone", None, "DELETE", "2024-07-20T10:05:33-07:00", "2024-07-25T10:05:33-07:00", 1, None, "user"),
]


@pytest.fixture
def mem0_files(tmp_path):
    export = tmp_path / "export.json"
    export.write_text(json.dumps(EXPORT), encoding="utf-8")
    db = tmp_path / "history.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE history (id TEXT PRIMARY KEY, memory_id TEXT, old_memory TEXT, new_memory TEXT, "
                "event TEXT, created_at DATETIME, updated_at DATETIME, is_deleted INTEGER, actor_id TEXT, role TEXT)")
    con.executemany("INSERT INTO history VALUES (?,?,?,?,?,?,?,?,?,?)", HISTORY)
    con.commit()
    con.close()
    return export, db


def test_mem0_memories_arrive_with_their_history_times_and_scopes(cli, mem0_files):
    export, db = mem0_files
    report = cli.json("import", "mem0", str(export), "--history", str(db))
    assert (report["items"], report["commands"], report["recorded"], report["replayed"]) == (6, 5, 5, 0)
    assert report["users"] == {"alice": 3, "bob": 1}
    assert report["agents"] == {"x": 1}  # an agent's memory without a user: that agent's own
    assert {s["item"]: s["reason"].split(":")[0] for s in report["skipped"]} == {
        "c2": "no user_id and no agent_id", "d1": "created_at",
        "z9": "in the history only (deleted before the export)"}
    own = cli.json("history", "-", fact_key("c1"), "--agent", "x")
    assert [(v["value"], v["actor"], v["valid_from"], v["source_ref"]) for v in own] == [
        ("An agent's note", "x", "2024-07-22T10:00:00Z", "mem0:c1")]
    versions = cli.json("history", "alice", fact_key("a1"))
    assert [(v["value"], v["valid_from"], v["status"]) for v in versions] == [
        ("Likes black coffee", "2024-07-20T17:05:33.123456Z", "superseded"),
        ({"memory": "Likes oat flat whites", "metadata": {"topic": "drink"}}, "2024-08-01T16:00:00Z",
         "current")]
    assert versions[-1]["source_ref"] == "mem0:a1" and versions[-1]["actor"] == "barista"
    assert versions[-1]["source"] == "agent_inference"
    bob = cli.json("history", "bob", fact_key("b1"))
    assert (bob[0]["session_id"], bob[0]["valid_from"]) == ("trip-1", "2024-07-22T10:00:00Z")
    again = cli.json("import", "mem0", str(export), "--history", str(db))
    assert (again["recorded"], again["replayed"]) == (0, 5)  # nothing new on a re-run
    code, text, _ = cli("import", "mem0", str(export), "--history", str(db))
    assert code == 0 and "0 recorded, 5 already recorded (alice: 3, bob: 1; agents' own memories: x: 1)" in text


def test_mem0_import_is_read_by_the_mem0_compatible_api(cli, mem0_files, store_args):
    from memledger.compat.mem0 import Memory

    export, _ = mem0_files
    assert cli.json("import", "mem0", str(export), "--source", "user_statement")["recorded"] == 4
    with Memory(**store_args) as m:
        got = {r["memory"]: r.get("metadata") for r in m.get_all(filters={"user_id": "alice"})["results"]}
        own = [(r["memory"], r["agent_id"], "user_id" in r) for r in m.get_all(agent_id="x")["results"]]
    assert got == {"Likes oat flat whites": {"topic": "drink"}, "Lives in Lisbon": None}
    assert own == [("An agent's note", "x", False)]


def test_langgraph_items_arrive_under_the_same_namespace_and_key(cli, tmp_path, store_args):
    pytest.importorskip("langgraph.store.base")
    from memledger import MemoryLedger
    from memledger.integrations.langgraph import MemledgerStore

    lines = [{"namespace": ["alice", "memories"], "key": "pref-1", "value": {"content": "Prefers aisle seats"},
              "created_at": "2024-05-01T08:00:00+00:00", "updated_at": "2024-06-01T08:00:00+00:00"},
             {"namespace": ["bob"], "key": "k", "value": None, "created_at": "2024-05-01T08:00:00+00:00"},
             {"namespace": ["alice", "memories"], "key": "pref-1", "value": {"content": "Prefers window seats"},
              "created_at": "2024-05-01T08:00:00+00:00", "updated_at": "2024-07-01T08:00:00+00:00"}]
    path = tmp_path / "items.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n", encoding="utf-8")
    report = cli.json("import", "langgraph", str(path))
    assert (report["items"], report["recorded"]) == (3, 1)
    assert [s["item"] for s in report["skipped"]] == ["line 2", "line 1"]  # no value; an earlier put of the item
    with MemoryLedger(**store_args) as ml:
        item = MemledgerStore(ml).get(("alice", "memories"), "pref-1")
    assert item.value == {"content": "Prefers window seats"}
    assert cli.json("import", "langgraph", str(path))["replayed"] == 1


@pytest.mark.parametrize("verb,content,field", [
    ("mem0", None, "path"),  # no such file
    ("mem0", "not json", "path"),
    ("mem0", '{"memories": []}', "path"),
    ("mem0", '{"results": [{"id": "x", "memory": "m"}]}', "path"),  # nothing can be carried over
    ("langgraph", '{"namespace": ["u"], "key": "k", "value": {"a": 1}}\nnot json\n', "line 2"),
    ("langgraph", '{"namespace": [], "key": "k", "value": {}}\n', "path"),
])
def test_a_bad_file_is_refused_naming_the_field_and_nothing_is_written(cli, tmp_path, verb, content, field):
    path = tmp_path / "in.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    code, out, err = cli("import", verb, str(path))
    assert code == 2 and err.startswith(f"error: {field}:") and "Traceback" not in err, err
    assert cli.json("stats")["facts"] == 0


def test_a_history_that_is_not_mem0s_is_refused(cli, mem0_files, tmp_path):
    export, _ = mem0_files
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE t (a)").connection.commit()
    code, _, err = cli("import", "mem0", str(export), "--history", str(other))
    assert code == 2 and err.startswith("error: history:"), err
    code, _, err = cli("import", "mem0", str(export), "--source", "llm")
    assert code == 2 and err.startswith("error: source:"), err
    assert cli.json("stats")["facts"] == 0  # nothing written by either refusal


def test_an_item_the_ledger_would_refuse_is_skipped_and_the_rest_imported(cli, tmp_path):
    items = [{"id": "ok", "memory": "Likes tea", "user_id": "ana", "created_at": "2024-01-01T00:00:00+00:00"},
             {"id": "sp", "memory": "Likes coffee", "user_id": " 张伟", "created_at": "2024-01-01T00:00:00+00:00"},
             {"id": "old", "memory": "Ancient", "user_id": "ana", "created_at": "0001-01-01T00:00:00+14:00"},
             {"id": 7, "memory": "x", "user_id": "ana"},
             {"id": "meta", "memory": "x", "user_id": "ana", "metadata": [1, 2]}]
    path = tmp_path / "export.json"
    path.write_text(json.dumps(items), encoding="utf-8")
    report = cli.json("import", "mem0", str(path))
    assert (report["recorded"], report["users"]) == (1, {"ana": 1})
    reasons = {s["item"]: s["reason"] for s in report["skipped"]}
    assert reasons["sp"].startswith("user_id:") and reasons["old"].startswith("created_at:")
    assert reasons["results[3]"] == "id is a int, not a string" and reasons["meta"].startswith("metadata")
    code, _, err = cli("import", "mem0", str(path), "--source", "user_statement")
    assert code == 2 and err.startswith("error: source:"), err  # imported before with another source
    assert cli.json("stats")["facts"] == 1  # the refusal wrote nothing


def test_mem0_times_are_read_back_through_the_compatible_api(cli, mem0_files, store_args):
    from memledger.compat.mem0 import Memory

    export, _ = mem0_files
    cli.json("import", "mem0", str(export))
    with Memory(**store_args) as m:
        got = {r["memory"]: r["created_at"][:10] for r in m.get_all(filters={"user_id": "alice"})["results"]}
    assert got == {"Likes oat flat whites": "2024-07-20", "Lives in Lisbon": "2024-07-21"}  # mem0's created_at


@pytest.mark.parametrize("content,field", [
    (b"[" * 100000 + b"]" * 100000, "path"),  # nests too deeply
    (b'{"namespace": ["u"], "key": "k", "value": {"a": "caf\xe9"}}\n', "path"),  # not UTF-8
])
def test_a_file_that_cannot_be_read_exits_2(cli, tmp_path, content, field):
    path = tmp_path / "in.jsonl"
    path.write_bytes(content)
    for verb in ("mem0", "langgraph"):
        code, _, err = cli("import", verb, str(path))
        assert code == 2 and err.startswith(f"error: {field}:") or err.startswith("error: line 1:"), (verb, err)


def test_a_namespace_langgraph_refuses_is_not_imported(cli, tmp_path):
    lines = [{"namespace": ["u1", "a.b"], "key": "c", "value": {"x": 1}},
             {"namespace": ["u1", ""], "key": "c", "value": {"x": 1}},
             {"namespace": ["u1", "ok"], "key": "c", "value": {"x": 1}}]
    path = tmp_path / "items.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines), encoding="utf-8")
    report = cli.json("import", "langgraph", str(path))
    assert report["recorded"] == 1 and [s["item"] for s in report["skipped"]] == ["line 1", "line 2"]
