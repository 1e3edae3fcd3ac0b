"""``memledger forget USER KEY [--version N] --yes``: one fact's text and value shredded for real (memledger/forget.py).

What is checked, on both backends: after a forget, neither the text nor the value is anywhere the store keeps bytes
(every file of the home directory on SQLite, a ``pg_dump`` of the schema on PostgreSQL), a rebuild brings nothing
back, ``verify`` agrees, history keeps a ``forgotten`` placeholder with when and by whom, and the user's other facts
(and other users') are untouched. Bad input is refused with exit 2 naming the field, and nothing is written.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest

from ledger.domain import Fact
from memledger import MemoryLedger
from tests.test_erasure import found, store_bytes

# what alice's preference.food said (must be gone) and what must stay
GONE_TEXTS = ["I love Kyoto sushi omakase", "Now I prefer tonkotsu ramen, 豚骨拉面"]
GONE_WORDS = ["Kyoto", "sushi omakase", "tonkotsu", "豚骨拉面", "omakase"]
KEPT = ["I moved to Zurich", "Zurich", "Bob eats pierogi", "pierogi"]


def _error(stderr: str) -> dict[str, Any]:
    return json.loads(stderr.strip().splitlines()[-1])


def _head(store_args: dict[str, Any]) -> int:
    with MemoryLedger(**store_args) as ml:
        return ml.head()


def _populate(cli: Any) -> None:
    for args in (
        ("assert", "alice", "preference.food", '"sushi omakase"', "--text", GONE_TEXTS[0],
         "--observed-at", "2024-01-01T09:00:00+00:00"),
        ("assert", "alice", "preference.food", '"tonkotsu ramen"', "--text", GONE_TEXTS[1],
         "--observed-at", "2024-03-01T09:00:00+00:00"),
        ("assert", "alice", "home.city", '"Zurich"', "--text", "I moved to Zurich",
         "--observed-at", "2024-02-01T09:00:00+00:00"),
        ("assert", "bob", "preference.food", '"pierogi"', "--text", "Bob eats pierogi",
         "--observed-at", "2024-02-01T09:00:00+00:00"),
    ):
        code, _out, err = cli(*args)
        assert code == 0, err


def test_forget_through_the_cli_leaves_no_trace_and_a_rebuild_brings_nothing_back(
        cli: Any, store_args: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    # what forget purges is the projections' plaintext: with projection sealing (the default) nothing is found before
    # it either (tests/test_erasure.py), so this runs with the projections unsealed, where the grep can fail
    monkeypatch.setenv("MEMLEDGER_PROJECTION_SEALING", "off")
    cli.env["MEMLEDGER_PROJECTION_SEALING"] = "off"
    _populate(cli)
    # the semantic index, its files and the embedding cache hold the texts before the forget
    hits = cli.json("search", "alice", "what food", "-k", "5")
    assert {h["key"] for h in hits} == {"preference.food", "home.city"}
    with MemoryLedger(**store_args) as ml:
        before = store_bytes(ml, store_args)
    assert found(before, *GONE_TEXTS, "Zurich") == [*GONE_TEXTS, "Zurich"]

    receipt = cli.json("forget", "alice", "preference.food", "--yes", "--actor", "alice-request-42")
    forgotten_at = datetime.fromisoformat(receipt.pop("forgotten_at"))
    assert forgotten_at.tzinfo is not None and forgotten_at.utcoffset().total_seconds() == 0
    event_id = receipt.pop("event_id")
    files = receipt.pop("files_compacted")
    assert receipt == {
        "user_id": "alice", "key": "preference.food", "versions": [1, 2], "actor": "alice-request-42", "version": 3,
        "position": 5, "keys_destroyed": 2, "current_value_forgotten": True,
        # one: the superseded version's vector is in the cache, the current one's only in its (tombstoned) row
        "cache_entries_deleted": 1 if "home" in store_args else receipt["cache_entries_deleted"], "resumed": False,
    }
    if "home" in store_args:
        assert files == ["projections.db", "vectors/embeddings.db"]

    def check_gone() -> None:
        with MemoryLedger(**store_args) as ml:
            data = store_bytes(ml, store_args)
        assert found(data, *GONE_TEXTS, *GONE_WORDS) == []
        assert found(data, *KEPT) == KEPT  # the user's other facts, and other users', untouched

    check_gone()
    history = cli.json("history", "alice", "preference.food")
    assert [(r["version"], r["kind"], r["status"], r["value"], r["text"], r["reason"], r["position"])
            for r in history] == [
        (1, "asserted", "forgotten", None, None, None, 1),
        (2, "asserted", "forgotten", None, None, None, 2),
        (3, "forgotten", "forgotten", None, None, None, 5),
    ]
    placeholder = history[2]
    assert placeholder["actor"] == "alice-request-42" and placeholder["event_id"] == event_id
    assert datetime.fromisoformat(placeholder["recorded_at"]) == forgotten_at
    # the forgotten versions no longer carry a belief: their valid ranges are empty
    assert [(r["valid_from"] == r["valid_to"]) for r in history[:2]] == [True, True]
    profile = cli.json("profile", "alice")
    assert {k: f["value"] for k, f in profile["facts"].items()} == {"home.city": "Zurich"}
    assert {k: f["value"] for k, f in cli.json("profile", "bob")["facts"].items()} == {"preference.food": "pierogi"}
    hits = cli.json("search", "alice", "sushi omakase Kyoto tonkotsu ramen", "-k", "5")
    assert [h["key"] for h in hits] == ["home.city"]

    # a rebuild from the log brings nothing back, and verify agrees with the live copies
    code, _out, err = cli("rebuild")
    assert code == 0, err
    check_gone()
    assert cli.json("history", "alice", "preference.food") == history
    assert cli.json("profile", "alice")["facts"] == profile["facts"]
    code, out, err = cli("verify")
    assert code == 0, out + err
    assert "DIFFERS" not in out
    hits = cli.json("search", "alice", "sushi omakase Kyoto tonkotsu ramen", "-k", "5")
    assert [h["key"] for h in hits] == ["home.city"]
    check_gone()

    # the key can be used again: a new version, with its own key
    code, out, err = cli("assert", "alice", "preference.food", '"dumplings"')
    assert code == 0, err
    assert out.strip().startswith("asserted alice preference.food v4 [new] at position 6")
    assert cli.json("profile", "alice")["facts"]["preference.food"]["value"] == "dumplings"


def test_forget_one_version_keeps_the_others(fresh_ledger: MemoryLedger, store_args: dict) -> None:
    ml = fresh_ledger
    ml.assert_fact("u1", "preference.drink", "oolong from Fujian", observed_at="2024-01-01T00:00:00Z")
    ml.assert_fact("u1", "preference.drink", "flat white", observed_at="2024-02-01T00:00:00Z")
    r = ml.forget("u1", "preference.drink", version=1)
    assert (r.versions, r.version, r.keys_destroyed, r.current_value_forgotten, r.actor) == ([1], 3, 1, False,
                                                                                            "forget")
    assert ml.profile("u1").facts["preference.drink"].value == "flat white"
    rows = ml.history("u1", "preference.drink")
    assert [(h.version, h.status, h.value) for h in rows] == [
        (1, "forgotten", None), (2, "current", "flat white"), (3, "forgotten", None)]
    assert [h.key for h in ml.search("u1", "flat white", k=3)] == ["preference.drink"]
    assert all(p.ok for p in ml.verify())
    data = store_bytes(ml, store_args)
    assert found(data, "oolong from Fujian", "Fujian") == []  # v2 reads back above; sealed, it is no plaintext
    assert found(data, "flat white") == []
    # forgetting the rest later: only v2 is left
    r = ml.forget("u1", "preference.drink")
    assert (r.versions, r.version, r.keys_destroyed, r.current_value_forgotten) == ([2], 4, 1, True)
    assert ml.profile("u1").facts == {}
    assert found(store_bytes(ml, store_args), "flat white") == []


def _legacy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Write as before per-fact keys existed: fact events without a ``fact_key_id`` (content under the user's key)."""
    trigger = Fact.trigger_event

    def without_fact_key(self: Any, event_class: Any, **kwargs: Any) -> None:
        if kwargs.get("fact_key_id"):
            kwargs["fact_key_id"] = None
        trigger(self, event_class, **kwargs)

    monkeypatch.setattr(Fact, "trigger_event", without_fact_key)


def test_bad_input_is_refused_with_exit_2_and_nothing_written(cli: Any, store_args: dict,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    with MemoryLedger(**store_args) as ml:
        ml.assert_fact("carol", "preference.drink", "mate")
        with monkeypatch.context() as m:
            _legacy(m)
            ml.assert_fact("carol", "pet.name", "Rex the legacy dog")
        ml.assert_fact("carol", "pet.name", "Fido")  # v2, with its own key
        ml.assert_fact("dave", "preference.drink", "kefir")
        ml.erase("dave")
    head = _head(store_args)
    cases = [
        (("carol", "preference.drink"), "--yes", "add --yes"),
        (("nobody", "preference.drink", "--yes"), "user_id", "check the user id"),
        (("carol", "home.city", "--yes"), "key", "memledger history carol"),
        (("carol", "preference.drink", "--version", "7", "--yes"), "version", "pick one of them"),
        (("carol", "preference.drink", "--version", "0", "--yes"), "version", "version >= 1"),
        (("carol", "Bad Key!", "--yes"), "KEY", None),
        (("dave", "preference.drink", "--yes"), "user_id", "record under a new user id"),
        (("carol", "pet.name", "--yes"), "key", "memledger erase carol --yes"),
        (("carol", "pet.name", "--version", "1", "--yes"), "version", "memledger erase carol --yes"),
    ]
    for args, field, fix in cases:
        code, out, err = cli("forget", *args, "--json")
        assert code == 2, (args, out, err)
        assert "Traceback" not in err
        e = _error(err)
        assert e["exit"] == 2 and e["error"]["field"] == field, (args, e)
        if fix is not None:
            assert fix in e["error"]["fix"], (args, e)
        assert _head(store_args) == head, args
    code, _out, err = cli("forget", "carol", "pet.name", "--json", "--yes")
    assert "written before per-fact keys existed" in _error(err)["error"]["problem"]
    # the later version of the same key has its own key: it can be forgotten alone; the legacy one stays readable
    r = cli.json("forget", "carol", "pet.name", "--version", "2", "--yes")
    assert (r["versions"], r["keys_destroyed"], r["current_value_forgotten"]) == ([2], 1, True)
    # forgetting it twice is refused (nothing left), nothing written
    head = _head(store_args)
    code, _out, err = cli("forget", "carol", "pet.name", "--version", "2", "--yes", "--json")
    assert code == 2 and _error(err)["error"]["field"] == "version"
    assert "already forgotten" in _error(err)["error"]["problem"]
    assert _head(store_args) == head
    with MemoryLedger(**store_args) as ml:
        data = store_bytes(ml, store_args)
        assert found(data, "Fido") == []
        assert [(h.version, h.value) for h in ml.history("carol", "pet.name")][:2] == [
            (1, "Rex the legacy dog"), (2, None)]
        # erasing the user still shreds the legacy version
        ml.erase("carol")
        assert found(store_bytes(ml, store_args), "Rex the legacy dog") == []


def test_a_forget_interrupted_after_its_placeholder_is_finished_by_a_rerun(fresh_ledger: MemoryLedger,
                                                                         store_args: dict,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    ml = fresh_ledger
    ml.assert_fact("erin", "health.allergy", "peanuts and cashews", sensitivity="health")
    with monkeypatch.context() as m:
        def crash(*_a: Any, **_k: Any) -> int:
            raise RuntimeError("killed")

        m.setattr(ml.keystore, "destroy_fact_keys", crash)
        with pytest.raises(RuntimeError):
            ml.forget("erin", "health.allergy", actor="dpo")
    # the placeholder is recorded and projected: the profile and history no longer show the content ...
    assert ml.profile("erin").facts == {}
    assert [(h.version, h.value) for h in ml.history("erin", "health.allergy")] == [(1, None), (2, None)]
    head = ml.head()
    r = ml.forget("erin", "health.allergy")
    assert (r.resumed, r.versions, r.version, r.keys_destroyed, r.actor) == (True, [1], 2, 1, "dpo")
    assert ml.head() == head  # nothing new recorded
    assert found(store_bytes(ml, store_args), "peanuts and cashews") == []
    ml.rebuild()
    assert [(h.version, h.value) for h in ml.history("erin", "health.allergy")] == [(1, None), (2, None)]
    assert all(p.ok for p in ml.verify())


def test_erasing_a_user_deletes_their_per_fact_keys(tmp_path: Any) -> None:
    import sqlite3

    with MemoryLedger(home=tmp_path / "h") as ml:
        ml.assert_fact("frank", "preference.drink", "cola")
        ml.assert_fact("gina", "preference.drink", "milk")
        ml.erase("frank")
    conn = sqlite3.connect(tmp_path / "h" / "keys.db")
    assert conn.execute("SELECT user_id, key IS NOT NULL FROM fact_keys ORDER BY user_id").fetchall() == [
        ("gina", 1)]
    conn.close()


def test_a_per_fact_key_moved_to_another_fact_does_not_open(tmp_path: Any) -> None:
    """The wrapped key's associated data binds user and key id: swapping two rows of ``fact_keys`` makes both events
    fail to decode (FieldDecryptionError) instead of showing one fact's words as another's."""
    import sqlite3

    from ledger.crypto import FieldDecryptionError

    home = tmp_path / "h"
    with MemoryLedger(home=home) as ml:
        ml.assert_fact("hal", "preference.drink", "rooibos")
        ml.assert_fact("hal", "home.city", "Tallinn")
        a, b = [ml.app.mapper.to_domain_event(n).fact_key_id
                for n in ml.app.recorder.select_notifications(start=1, limit=2)]
    conn = sqlite3.connect(home / "keys.db")
    [ka], [kb] = (conn.execute("SELECT key FROM fact_keys WHERE key_id = ?", (k,)).fetchone() for k in (a, b))
    with conn:
        conn.execute("UPDATE fact_keys SET key = ? WHERE key_id = ?", (kb, a))
        conn.execute("UPDATE fact_keys SET key = ? WHERE key_id = ?", (ka, b))
    conn.close()
    with MemoryLedger(home=home) as ml:
        with pytest.raises(FieldDecryptionError, match="moved here from another fact or user"):
            ml.app.mapper.to_domain_event(ml.app.recorder.select_notifications(start=1, limit=1)[0])


def test_reads_at_a_past_now_leave_forgotten_versions_out(cli: Any) -> None:
    T = "2024-03-01T09:00:00Z"
    cli.json("assert", "u1", "preference.drink", "tea", "--text", "Likes tea", "--observed-at", T)
    cli.json("assert", "u1", "profile.age", "130", "--observed-at", T, "--session", "s1")
    cli.json("assert", "u1", "preference.food", "rice", "--text", "Likes rice", "--observed-at", T)
    for key in ("preference.drink", "profile.age"):
        assert cli("forget", "u1", key, "--yes")[0] == 0
    now = "2024-03-02T09:00:00Z"  # before the forget was recorded, after the statements were said
    ctx = cli.json("context", "u1", "--now", now)
    assert next(s for s in ctx["sections"] if s["name"] == "profile")["lines"] == [
        "- Likes rice (2024-03-01, the user said)"]
    assert cli.json("quarantine", "u1", "--now", now)["items"] == []
    s = cli.json("stats", "u1", "--now", now)
    assert (s["facts"], s["quarantined"]) == (1, 0)


def test_retract_source_does_not_restore_a_forgotten_version(cli: Any) -> None:
    cli.json("assert", "u1", "a.b", "x1", "--source-ref", "d1")
    cli.json("assert", "u1", "a.b", "y1", "--source-ref", "d2")
    assert cli("forget", "u1", "a.b", "--version", "1", "--yes")[0] == 0
    code, out, err = cli("retract-source", "u1", "d2")
    assert (code, out.strip()) == (0, 'withdrawn a.b v2 "y1": no other source supports a value'), err
    assert "a.b" not in cli.json("profile", "u1")["facts"]
    assert cli.json("verify")[0]["ok"] is True


def test_forgetting_a_scheduled_head_alone_is_refused_while_it_would_take_the_current_value(cli: Any) -> None:
    cli.json("assert", "u1", "residence.city", "Paris", "--text", "Lives in Paris",
             "--observed-at", "2024-03-01T09:00:00Z")
    cli.json("assert", "u1", "residence.city", "Berlin", "--text", "Moves to Berlin on 1 June 2099",
             "--valid-from", "2099-06-01T00:00:00Z")
    code, _, err = cli("forget", "u1", "residence.city", "--version", "2", "--yes")
    assert code == 2 and "is scheduled for 2099-06-01" in err and "plan cancelled" in err
    assert cli.json("profile", "u1")["facts"]["residence.city"]["value"] == "Paris"
    assert len(cli.json("history", "u1", "residence.city")) == 2  # nothing written
    # cancelled first, the plan can be forgotten; Paris stays
    cli.json("correct", "u1", "residence.city", "Paris", "--reason", "plan cancelled")
    assert cli("forget", "u1", "residence.city", "--version", "2", "--yes")[0] == 0
    assert cli.json("profile", "u1")["facts"]["residence.city"]["value"] == "Paris"
    assert [h["status"] for h in cli.json("history", "u1", "residence.city")][1] == "forgotten"
    # forgetting every version of a key with a scheduled head is what was asked: nothing remains
    cli.json("assert", "u2", "residence.city", "Paris", "--observed-at", "2024-03-01T09:00:00Z")
    cli.json("assert", "u2", "residence.city", "Berlin", "--valid-from", "2099-06-01T00:00:00Z")
    assert cli("forget", "u2", "residence.city", "--yes")[0] == 0
    assert cli.json("profile", "u2")["facts"] == {}


def test_per_fact_key_pools_refill_rarely_and_hand_the_reserve_back_at_close(tmp_path: Any) -> None:
    """The Python API (a long-lived process) reserves ``FIRST_RESERVE`` keys at its first save for a user, in the
    same key-store transaction as the new user's data key; refills add ``_POOL_MIN`` doubling up to ``_POOL_MAX``;
    every event gets its own key; closing deletes the unused reserve."""
    import sqlite3

    from ledger import crypto

    with MemoryLedger(home=tmp_path / "h", embedder="none") as ml:
        commits = []
        store = ml.keystore.store_fact_keys
        ml.keystore.store_fact_keys = lambda made, wrap: (  # type: ignore[method-assign]
            commits.append({u: len(p) for u, p in made.items()}), store(made, wrap))[1]
        statements: list[str] = []
        ml.keystore._conn().set_trace_callback(statements.append)
        ml.assert_fact("hana", "note.n0", "v0")
        assert commits == [{"hana": 1 + crypto.FIRST_RESERVE}] == [{"hana": 65}]
        # the new user's data key was stored in that same key-store transaction: one commit, not two
        assert [s for s in statements if s.strip().upper() == "COMMIT"] == ["COMMIT"]
        assert any("INSERT OR IGNORE INTO user_keys" in s for s in statements)
        for i in range(1, 200):
            ml.assert_fact("hana", f"note.n{i}", f"v{i}")
        expected, reserve = [1 + crypto.FIRST_RESERVE], crypto.FIRST_RESERVE
        while sum(expected) < 200:
            reserve = min(max(crypto._POOL_MIN, 2 * reserve), crypto._POOL_MAX)
            expected.append(1 + reserve)
        assert [c["hana"] for c in commits] == expected == [65, 65, 65, 65]
        conn = sqlite3.connect(tmp_path / "h" / "keys.db")
        stored_open = conn.execute("SELECT count(*) FROM fact_keys WHERE user_id = 'hana'").fetchone()[0]
        conn.close()
        assert stored_open == 260  # 200 used, 60 in reserve while the ledger is open
    conn = sqlite3.connect(tmp_path / "h" / "keys.db")
    stored = conn.execute("SELECT count(*) FROM fact_keys WHERE user_id = 'hana'").fetchone()[0]
    conn.close()
    assert stored == 200  # the unused reserve was handed back when the ledger closed
    events = sqlite3.connect(tmp_path / "h" / "events.db")
    ids = [json.loads(state)["fact_key_id"] for (state,) in events.execute("SELECT state FROM stored_events")]
    events.close()
    assert len(ids) == 200 and len(set(ids)) == 200  # one key per event, none given twice


def test_spare_per_fact_keys_stay_within_a_process_wide_bound(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A process writing for many users reserves at most ``_POOL_TOTAL`` spare keys over all of them (a crash leaves
    no more behind); within the bound each user still gets the reserve, and every event its own key."""
    import sqlite3

    from ledger import crypto

    monkeypatch.setattr(crypto, "_POOL_TOTAL", 150)
    with MemoryLedger(home=tmp_path / "h", embedder="none") as ml:
        for round_ in range(2):
            for u in range(5):
                ml.assert_fact(f"user{u}", f"note.r{round_}", "v")
        mapper = ml.app.mapper
        pools = {u: len(p) for u, p in mapper._pools.items()}
        # first round: users 0 and 1 reserve 64 each, user 2 the 22 left of the 150, users 3 and 4 nothing; second
        # round: each uses one, and user 3 gets the 3 that frees
        assert pools == {"user0": 63, "user1": 63, "user2": 21, "user3": 3, "user4": 0}
        assert mapper._spare == 150
        conn = sqlite3.connect(tmp_path / "h" / "keys.db")
        assert conn.execute("SELECT count(*) FROM fact_keys").fetchone()[0] == 10 + 150
        conn.close()
    conn = sqlite3.connect(tmp_path / "h" / "keys.db")
    assert conn.execute("SELECT count(*) FROM fact_keys").fetchone()[0] == 10  # the spare keys went at close
    conn.close()


def test_a_one_shot_cli_write_stores_exactly_the_keys_it_uses(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """``memledger assert`` reserves nothing (a one-shot process), and running the CLI in-process leaves the Python
    API's reserve as it was."""
    import sqlite3

    from ledger import crypto
    from ledger.keystores import SQLiteKeyStore
    from memledger.cli import main

    stored: list[int] = []
    real = SQLiteKeyStore.store_fact_keys
    monkeypatch.setattr(SQLiteKeyStore, "store_fact_keys", lambda self, made, wrap: (
        stored.append(sum(len(p) for p in made.values())), real(self, made, wrap))[1])
    before = crypto.FIRST_RESERVE
    home = tmp_path / "h"
    with pytest.raises(SystemExit) as exit_:
        main(["--home", str(home), "assert", "ivo", "note.a", '"x"'])
    assert exit_.value.code == 0
    assert crypto.FIRST_RESERVE == before == crypto._POOL_MIN
    assert stored == [1]  # one key made and stored, none reserved
    conn = sqlite3.connect(home / "keys.db")
    assert conn.execute("SELECT count(*) FROM fact_keys").fetchone()[0] == 1
    conn.close()


@pytest.mark.parametrize("reclaim", [True, False])
def test_the_reserve_handed_back_at_close_leaves_no_free_pages_in_keys_db(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch, reclaim: bool) -> None:
    """keys.db is made with ``auto_vacuum=INCREMENTAL`` and the pages the released reserve freed go back to the file
    system at close (``SQLiteKeyStore.reclaim_space``); without that step they stay in the file as free pages."""
    import sqlite3

    from ledger.keystores import SQLiteKeyStore

    if not reclaim:
        monkeypatch.setattr(SQLiteKeyStore, "reclaim_space", lambda self: None)
    with MemoryLedger(home=tmp_path / "h", embedder="none") as ml:
        for i in range(20):  # 20 users: 20 keys used, 20 x 64 reserved, then handed back
            ml.assert_fact(f"user{i}", "note.n0", "v0")
    conn = sqlite3.connect(tmp_path / "h" / "keys.db")
    free, pages = (conn.execute(f"PRAGMA {p}").fetchone()[0] for p in ("freelist_count", "page_count"))
    rows = conn.execute("SELECT count(*) FROM fact_keys").fetchone()[0]
    conn.close()
    assert rows == 20
    if reclaim:
        assert free == 0 and pages <= 8
    else:
        assert free >= 10
