"""Erasure that really erases: crypto-shredding wired into the ledger, on SQLite and PostgreSQL.

The central test writes distinctive Latin and Chinese strings for two users, erases one, and greps every byte the
store holds -- every file of the home directory (SQLite) or a pg_dump of the schema (PostgreSQL) -- for the erased
user's strings in every encoding they could take. With projection sealing (the default, ledger/sealing.py) no user's
string is found even before the erase: the projections keep ciphertext too. With sealing off, the other user's
strings must still be found after it (the grep can fail).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from memledger import MemoryLedger
from ledger.crypto import TOKEN_PREFIX

# Distinctive strings of the user who is erased (A) and of the one who stays (B).
A_LATIN = "Quokka-Marmalade-7391"
A_CHINESE = "我在杭州西湖边开了一家茶馆"
A_REASON = "Zephyrine misheard the year"
A_MESSAGE = "Xylophone-Basement-5512"
B_LATIN = "Pangolin-Rhubarb-2208"
B_CHINESE = "她住在成都宽窄巷子"


# What a tokenizer may keep of them (lower-cased, stemmed words, CJK bigrams): the lexical index stores tokens, not
# text. The stems ("marmalad") are prefixes of the words, so they also catch the unstemmed form.
A_TOKENS = ["quokka", "marmalad", "zephyrin", "xylophon", "杭州", "西湖", "茶馆"]
B_TOKENS = ["成都", "宽窄"]


@pytest.fixture(autouse=True)
def _hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    # The vectors projection (FAISS + BM25 files, embedding cache) takes part, with the fast deterministic
    # embedder: the files and the cache exist just as with the real model.
    monkeypatch.setenv("MEMLEDGER_EMBEDDER", "hash")


def forms(text: str) -> list[bytes]:
    """Every way the text could sit in a file: UTF-8, JSON-escaped ASCII (both hex cases), UTF-16."""
    escaped = json.dumps(text).strip('"')
    return [text.encode("utf-8"), escaped.encode("ascii"), escaped.upper().encode("ascii"),
            escaped.lower().encode("ascii"), text.encode("utf-16-le")]


def store_bytes(ml: MemoryLedger, store_args: dict[str, Any]) -> bytes:
    """Every byte the store holds: all files under the home dir, or a pg_dump of the schema."""
    if "home" in store_args:
        return b"".join(p.read_bytes() for p in sorted(Path(store_args["home"]).rglob("*")) if p.is_file())
    from tests import pg

    proc = subprocess.run(["pg_dump", "--dbname", pg.TEST_DSN, "--schema", store_args["schema"]],
                          capture_output=True, timeout=120, check=True)
    return proc.stdout


def found(data: bytes, *texts: str) -> list[str]:
    return [t for t in texts if any(f in data for f in forms(t))]


def populate(ml: MemoryLedger) -> None:
    ml.assert_fact("alice", "preference.drink", A_LATIN, observed_at="2024-01-01T08:00:00+08:00")
    ml.assert_fact("alice", "preference.drink", "green tea", observed_at="2024-02-01T08:00:00+08:00")
    ml.assert_fact("alice", "home.city", "Hangzhou", text=A_CHINESE, idempotency_key="k-1",
                   observed_at="2024-01-02T00:00:00Z")
    ml.assert_fact("alice", "profile.birth_year", 1990, observed_at="2024-01-03T00:00:00Z")
    ml.correct_fact("alice", "profile.birth_year", 1995, reason=A_REASON)
    ml.assert_fact("alice", "health.condition", "asthma", sensitivity="health")
    ml.retract_fact("alice", "preference.drink", reason="forget it")
    ml.record_disclosures("alice", [("health.condition", 1, "health")], purpose="diet advice")
    ml.session_start("alice", "s1", task="open a teahouse")
    ml.log_message("alice", "s1", role="user", message_id="m1", text=A_MESSAGE, speaker="Zoltanna")
    ml.log_message("alice", "s1", role="user", message_id="m2", text="下个月我要去西湖")
    ml.update_card("alice", "s1", progress=A_MESSAGE + " done", add_decisions=["rent in 杭州"])
    ml.summarize("alice", "s1", text="Alice plans a teahouse; " + A_MESSAGE)
    ml.assert_fact("bob", "preference.drink", B_LATIN, text=B_CHINESE)
    ml.log_message("bob", "s1", role="user", message_id="m1", text=B_CHINESE + " 的茶")


def test_the_log_holds_only_ciphertext(fresh_ledger: MemoryLedger) -> None:
    fresh_ledger.assert_fact("alice", "home.city", A_LATIN, text=A_CHINESE, reason=A_REASON)
    app = fresh_ledger.app
    stored = app.recorder.select_notifications(start=1, limit=10)
    assert len(stored) == 1
    state = app.mapper.transcoder.decode(stored[0].state)
    for field in ("value_json", "text", "reason", "command_fingerprint"):
        if state[field] is not None:
            assert state[field].startswith(TOKEN_PREFIX), field
    assert state["value_json"].startswith(TOKEN_PREFIX) and state["text"].startswith(TOKEN_PREFIX)
    assert (state["user_id"], state["key"]) == ("alice", "home.city")  # metadata stays readable
    assert fresh_ledger.profile("alice").facts["home.city"].value == A_LATIN


@pytest.mark.parametrize("sealing", ["on", "off"])
def test_erase_leaves_no_trace_and_spares_other_users(store_args: dict, sealing: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLEDGER_PROJECTION_SEALING", sealing)
    plain = sealing == "off"  # what the grep finds of a user's strings while they are held
    with MemoryLedger(**store_args) as first:  # closing writes the FAISS / BM25 index files
        populate(first)
        assert [h.key for h in first.search("alice", "杭州西湖")][:1] == ["home.city"]
    ml = MemoryLedger(**store_args)
    before = store_bytes(ml, store_args)
    # Sealed, no string of any user is at rest in plaintext (the log never held any); unsealed, the grep sees the
    # projections' and index files' plaintext, so it can fail.
    strings = [A_LATIN, A_CHINESE, A_REASON, A_MESSAGE, B_LATIN, B_CHINESE]
    assert found(before, *strings) == (strings if plain else [])
    if not plain:
        assert found(before, *A_TOKENS, *B_TOKENS, "asthma", "Hangzhou", "teahouse", "Zoltanna") == []
    if "home" in store_args:
        index_files = b"".join(p.read_bytes() for p in Path(store_args["home"], "vectors").rglob("*.lex"))
        # alice's current facts (her drink was retracted, so it is not indexed) and bob's, as BM25 tokens
        assert found(index_files, "杭州", "西湖", "asthma", "成都") == (["杭州", "西湖", "asthma", "成都"] if plain else [])
    bob_profile = ml.profile("bob").model_dump()
    bob_history = [h.model_dump() for h in ml.history("bob")]

    receipt = ml.erase("alice", actor="dpo")
    assert (receipt.user_id, receipt.already_erased, receipt.key_destroyed, receipt.facts, receipt.events) == (
        "alice", False, True, 4, 7)
    assert receipt.position == ml._head()
    assert receipt.log_plaintext_events == 0 and receipt.snapshots_deleted == 0
    assert set(receipt.projections_purged) >= {"profile", "history", "disclosures"}
    if "home" in store_args:
        assert receipt.files_compacted == ["projections.db", "vectors/embeddings.db"]

    assert ml.profile("alice").facts == {}
    assert ml.history("alice") == []
    assert ml.sessions("alice") == [] and ml.messages("alice") == []
    doc = ml.export("alice")
    assert (doc.erased, doc.profile.facts, doc.history, doc.disclosures, doc.sessions) == (True, {}, [], [], [])
    assert [m["text"] for m in ml.messages("bob")] == [B_CHINESE + " 的茶"]
    assert ml.profile("bob").model_dump() == bob_profile
    assert [h.model_dump() for h in ml.history("bob")] == bob_history

    after = store_bytes(ml, store_args)  # with the store still open (SQLite -wal files present)
    assert found(after, A_LATIN, A_CHINESE, A_REASON, A_MESSAGE, "asthma", "Hangzhou", "teahouse", "Zoltanna",
                 *A_TOKENS) == []
    assert found(after, B_LATIN, B_CHINESE) == ([B_LATIN, B_CHINESE] if plain else [])
    assert ml.search("alice", "杭州西湖") == []
    assert [h.key for h in ml.search("bob", "成都宽窄巷子")] == ["preference.drink"]
    ml.close()  # closing rewrites the index files: still nothing of alice's
    with MemoryLedger(**store_args) as again:
        final = store_bytes(again, store_args)
        assert found(final, A_LATIN, A_CHINESE, A_REASON, A_MESSAGE, "asthma", "Hangzhou", "teahouse",
                     *A_TOKENS) == []
        assert found(final, B_LATIN, B_CHINESE, *B_TOKENS) == ([B_LATIN, B_CHINESE, *B_TOKENS] if plain else [])


def test_rebuild_after_erasure_brings_nothing_back(fresh_ledger: MemoryLedger, store_args: dict) -> None:
    ml = fresh_ledger
    populate(ml)
    ml.erase("alice")
    bob = ml.profile("bob").model_dump()
    with ml.db.transaction() as cur:  # a full rebuild: every projection from position 0
        for p in ml.projections:
            p.drop(cur)
            p.create(cur)
    ml.catch_up()
    assert ml.profile("alice").facts == {} and ml.history("alice") == []
    assert ml.export("alice").disclosures == [] and ml.export("alice").sessions == []
    assert ml.context("alice", now="2024-05-01T00:00:00Z").sections == ml.context(
        "nobody", now="2024-05-01T00:00:00Z").sections
    assert ml.profile("bob").model_dump() == bob
    # The ledger's own rebuilds (replay/rebuild.py), blue/green and in place, and verify against a scratch replay.
    ml.rebuild(blue_green=True)
    ml.rebuild()
    assert ml.profile("alice").facts == {} and ml.history("alice") == [] and ml.sessions("alice") == []
    assert ml.profile("bob").model_dump() == bob
    assert all(r.ok for r in ml.verify())
    # And in another process's view: a fresh MemoryLedger on the same store.
    with MemoryLedger(**store_args) as other:
        assert other.profile("alice").facts == {} and other.history("alice") == []
        assert other.profile("bob").facts["preference.drink"].value == B_LATIN
        assert found(store_bytes(other, store_args), A_LATIN, A_CHINESE, A_REASON) == []


def test_erased_user_cannot_be_written_again(fresh_ledger: MemoryLedger) -> None:
    from ledger.errors import BadInput

    fresh_ledger.assert_fact("alice", "k", 1)
    fresh_ledger.erase("alice")
    head = fresh_ledger._head()
    with pytest.raises(BadInput, match=r"user_id: 'alice' was erased"):
        fresh_ledger.assert_fact("alice", "k", 2)
    with pytest.raises(BadInput, match="was erased"):
        fresh_ledger.record([{"user_id": "bob", "key": "k", "value": 1}, {"user_id": "alice", "key": "j", "value": 1}])
    assert fresh_ledger._head() == head  # nothing written, not even bob's half of the batch
    again = fresh_ledger.erase("alice")
    assert (again.already_erased, again.key_destroyed, again.position) == (True, False, None)
    assert fresh_ledger._head() == head


def test_erase_plaintext_store_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store written before encryption was on: erasure purges projections but says the log keeps content."""
    home = tmp_path / "legacy"
    monkeypatch.setenv("MEMLEDGER_ENCRYPTION", "off")
    with MemoryLedger(home=home) as ml:
        ml.assert_fact("alice", "k", A_LATIN)
        assert ml.keystore is None
        with pytest.raises(Exception, match="needs per-user encryption"):
            ml.erase("alice")
    monkeypatch.delenv("MEMLEDGER_ENCRYPTION")
    with MemoryLedger(home=home) as ml:
        ml.assert_fact("alice", "j", A_CHINESE)  # from now on encrypted
        receipt = ml.erase("alice")
        assert (receipt.facts, receipt.events, receipt.log_plaintext_events) == (2, 2, 1)
        assert ml.profile("alice").facts == {}
    monkeypatch.setenv("MEMLEDGER_ENCRYPTION", "off")
    with pytest.raises(Exception, match="was written encrypted"):
        MemoryLedger(home=home)


# ------------------------------------------------------------------------------------------------------- CLI


def test_cli_erase(cli: Any, store_args: dict) -> None:
    assert cli.json("assert", "alice", "home.city", A_LATIN, "--text", A_CHINESE)["version"] == 1
    cli.json("assert", "bob", "home.city", B_LATIN)
    code, out, err = cli("erase", "alice")  # no terminal to confirm on
    assert code == 2 and "--yes" in err and "Traceback" not in err
    assert cli.json("profile", "alice")["facts"]["home.city"]["value"] == A_LATIN  # nothing erased
    code, out, err = cli("erase", " alice", "--yes")
    assert code == 2 and "USER" in err
    receipt = cli.json("erase", "alice", "--yes")
    assert {k: receipt[k] for k in ("user_id", "already_erased", "key_destroyed", "facts", "events")} == {
        "user_id": "alice", "already_erased": False, "key_destroyed": True, "facts": 1, "events": 1}
    assert cli.json("profile", "alice")["facts"] == {}
    assert cli.json("history", "alice") == []
    assert cli.json("profile", "bob")["facts"]["home.city"]["value"] == B_LATIN
    code, out, err = cli("assert", "alice", "home.city", "x")
    assert code == 2 and "was erased" in err and "Traceback" not in err
    code, out, err = cli("erase", "alice", "--yes")
    assert code == 0 and "already erased" in out
    if "home" in store_args:
        data = b"".join(p.read_bytes() for p in Path(store_args["home"]).rglob("*") if p.is_file())
        # nothing of either user in plaintext (the projections are sealed); bob's memory reads back (above)
        assert found(data, A_LATIN, A_CHINESE, B_LATIN) == []


def test_encryption_env_is_validated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ledger.errors import BadInput

    monkeypatch.setenv("MEMLEDGER_ENCRYPTION", "maybe")
    with pytest.raises(BadInput, match="MEMLEDGER_ENCRYPTION: 'maybe' is not on or off"):
        MemoryLedger(home=tmp_path / "x")
    assert not (tmp_path / "x" / "events.db").exists()


def test_master_key_wraps_the_ledgers_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import base64

    master = os.urandom(32)
    monkeypatch.setenv("MEMLEDGER_MASTER_KEY", base64.b64encode(master).decode())
    with MemoryLedger(home=tmp_path / "m") as ml:
        ml.assert_fact("alice", "k", A_LATIN)
        assert ml.keystore.wraps_keys
        key = ml.keystore.get("alice")
    assert key not in (tmp_path / "m" / "keys.db").read_bytes()
    monkeypatch.delenv("MEMLEDGER_MASTER_KEY")
    with pytest.raises(Exception, match="no master key"):
        with MemoryLedger(home=tmp_path / "m") as ml:
            ml.assert_fact("alice", "j", 1)


def test_a_write_racing_the_erase_is_never_projected(store_args: dict) -> None:
    """A writer that passed its "is this user erased?" check just before another process erased the user, and still
    holds the user's data key in its key cache, appends after the tombstone. Seen with (3 writer
    processes and an erase: the late values showed in profile/history/export and in projections.db). Those events
    must never be projected, in the writer's own catch-up or any later one, and verify must agree."""
    from ledger.schemas import validate_command

    with MemoryLedger(**store_args) as writer:
        writer.assert_fact("eve", "pref.secret", "zebra-first", text="zebra-first secret")
        with MemoryLedger(**store_args) as eraser:
            eraser.erase("eve")
        # The facade's check would refuse now; the race is a save that passed it before the erase committed.
        late = validate_command({"op": "assert", "user_id": "eve", "key": "pref.secret", "value": "zebra-late",
                                 "text": "zebra-late secret"})
        outcome = writer.app.execute([late])[0]
        assert outcome.position is not None and outcome.position > 2  # it really landed after the tombstone
        writer.catch_up()
        assert writer.profile("eve").facts == {} and writer.history("eve") == []
        assert writer.search("eve", "zebra secret", k=5) == []
        exported = writer.export("eve")
        assert (exported.erased, exported.profile.facts, exported.history) == (True, {}, [])
        assert all(r.ok for r in writer.verify()), [r.difference for r in writer.verify() if not r.ok]
        assert found(store_bytes(writer, store_args), "zebra-late", "zebra-first") == []
    with MemoryLedger(**store_args) as other:  # a process without the cached key, and a rebuild
        assert other.profile("eve").facts == {} and other.history("eve") == []
        other.rebuild(blue_green=True)
        assert other.history("eve") == []


def test_verify_passes_after_an_erase(fresh_ledger: MemoryLedger) -> None:
    """verify compared the vectors projection's reload counter (``generation``), which a scratch replay cannot
    reproduce, so it reported DIFFERS after every erase."""
    populate(fresh_ledger)
    fresh_ledger.search("bob", "drink", k=1)  # the vectors projection caught up before the erase
    fresh_ledger.erase("alice")
    results = fresh_ledger.verify()
    assert [(r.projection, r.ok) for r in results] == [(p.name, True) for p in fresh_ledger.projections]


def test_a_wrong_or_missing_master_key_cannot_create_keys(store_args: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store whose keys are wrapped by K1: a process with K2, or with none, used to create a new user's key in its
    own format (exit 0), after which neither configuration could rebuild or verify the store.
    Now the first new key of a process is checked against an existing one, and nothing is written."""
    import base64

    from ledger.crypto import KeyStoreError

    k1, k2 = (base64.b64encode(os.urandom(32)).decode() for _ in range(2))
    monkeypatch.setenv("MEMLEDGER_MASTER_KEY", k1)
    with MemoryLedger(**store_args) as ml:
        ml.assert_fact("alice", "k", 1)
        head = ml._head()
    for env in (k2, None):
        if env is None:
            monkeypatch.delenv("MEMLEDGER_MASTER_KEY")
        else:
            monkeypatch.setenv("MEMLEDGER_MASTER_KEY", env)
        with MemoryLedger(**store_args) as ml:
            with pytest.raises(KeyStoreError, match=r"^refusing to write: this store's "
                                                    r"existing keys do not open with this configuration"):
                ml.assert_fact("dora", "k", 1)
            # a write that needs no key (a session without a task) is refused too
            with pytest.raises(KeyStoreError, match=r"^refusing to write: "):
                ml.session_start("carl", "s1")
            assert ml._head() == head and ml.keystore.get("dora") is None
    monkeypatch.setenv("MEMLEDGER_MASTER_KEY", k1)
    with MemoryLedger(**store_args) as ml:  # the right key still works, for old and new users, and verifies
        ml.assert_fact("dora", "k", 2)
        assert ml.profile("dora").facts["k"].value == 2 and ml.profile("alice").facts["k"].value == 1
        assert all(r.ok for r in ml.verify())


def test_erase_without_encryption_is_refused_with_the_reason(tmp_path, monkeypatch):
    # A failure path the package re-layout broke (the message named a constant its new module did not import).
    from ledger.errors import MemledgerError

    monkeypatch.setenv("MEMLEDGER_ENCRYPTION", "off")
    with MemoryLedger(home=tmp_path / "plain") as ml:
        ml.assert_fact("u1", "profile.city", "Oslo")
        with pytest.raises(MemledgerError, match=r"\(MEMLEDGER_ENCRYPTION=off\): the append-only log would keep"):
            ml.erase("u1")
        assert ml.profile("u1").facts["profile.city"].value == "Oslo"


def test_every_read_of_an_erased_user_says_so(cli):
    cli("assert", "u1", "preference.drink", "tea", "--observed-at", "2024-01-01T00:00:00Z")
    cli("session", "start", "u1", "s1")
    assert cli("erase", "u1", "--yes")[0] == 0
    erased_at = cli.json("export", "u1")["exported_at"]  # after the erasure
    reads = [("profile", "u1"), ("believed", "u1", "--as-of", "2100-01-01T00:00:00Z"),
             ("true-at", "u1", "--valid-at", "2024-06-01T00:00:00Z"),
             ("diff", "u1", "--from", "2024-01-01T00:00:00Z", "--to", "2100-01-01T00:00:00Z"), ("audit", "u1"),
             ("resume", "u1"), ("context", "u1")]
    for args in reads:
        data = cli.json(*args)
        assert data["erased"] is True, args
        assert data["erased_at"] <= erased_at, args
    for args in [("history", "u1"), ("search", "u1", "tea"), ("session", "search", "u1", "tea"), ("profile", "u1")]:
        code, out, err = cli(*args)
        assert code == 0, (args, err)
        assert "note: u1 was erased at " in err and "nothing is held about them" in err, args
    ctx = cli.json("context", "u1")
    assert ctx["text"].endswith("nothing about them is kept.")
    export = cli.json("export", "u1")
    assert export["erased"] is True and export["erased_at"] == cli.json("profile", "u1")["erased_at"]
    assert cli.json("session", "gaps", "u1")["erased"] is True
    code, _out, err = cli("unlink", "u1", "preference.drink", "1")  # the reason is the erasure, not the key
    assert code == 2 and "'u1' was erased" in err
    code, _out, err = cli("keys", "create", "--user", "u1")
    assert code == 2 and err.startswith("error: --user: 'u1' was erased")
    # a user who was never erased reads as before: no erased fields at all
    cli("assert", "u2", "preference.drink", "tea")
    assert "erased" not in cli.json("profile", "u2")
    assert "note:" not in cli("profile", "u2")[2]
    # a write for the erased user is refused, naming why and what to do
    code, _out, err = cli("assert", "u1", "preference.drink", "coffee")
    assert code == 2 and "was erased; nothing more can be recorded for it" in err and "new user id" in err


def test_a_disclosure_purpose_is_shredded_with_the_user(tmp_path):
    home = tmp_path / "ledger"
    with MemoryLedger(home=home) as ml:
        ml.assert_fact("dave", "med.cond", "leukemia", sensitivity="health")
        ml.context("dave", allow_sensitive=["health"], purpose="review the Zorblax chemo plan")
        assert [d.purpose for d in ml.export("dave").disclosures] == ["review the Zorblax chemo plan"]
        assert b"Zorblax" not in (home / "events.db").read_bytes()  # encrypted from the start
        ml.erase("dave")
    for f in home.rglob("*"):
        if f.is_file():
            assert b"Zorblax" not in f.read_bytes(), f


def test_erasing_an_id_never_seen_is_refused_and_burns_nothing(cli):
    code, _out, err = cli("erase", "nobody", "--yes")
    assert code == 2 and err.startswith("error: user_id: nothing is held about 'nobody'")
    assert cli("assert", "nobody", "a.b", "1")[0] == 0  # the id was not burned by the typo
    assert cli.json("erase", "nobody", "--yes")["facts"] == 1


def test_two_erases_at_once_both_succeed_and_one_records_the_tombstone(store_args: dict) -> None:
    import threading

    with MemoryLedger(**store_args) as ml:
        populate(ml)
    results: list[Any] = []

    def erase() -> None:
        with MemoryLedger(**store_args) as ml:
            try:
                results.append(ml.erase("alice"))
            except Exception as exc:  # noqa: BLE001 - the test reports what went wrong
                results.append(exc)

    threads = [threading.Thread(target=erase) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(not isinstance(r, Exception) for r in results), results
    assert sorted(r.position is None for r in results) in ([False, True], [True, True], [False, False]) and \
        sum(r.position is not None for r in results) <= 1, results
    with MemoryLedger(**store_args) as ml:
        assert ml.profile("alice").facts == {} and ml.erased_at("alice") is not None
