"""A free-text memory's value is its own sentence: the profile row stores it once, as its text, and every read gives
the value back as recorded (projections/profile.py, projections/base.py ``stored_value_json``). On SQLite and
PostgreSQL."""

from __future__ import annotations

import json
from typing import Any

from memledger import MemoryLedger


def stored(ml: MemoryLedger, table: str = "") -> dict[str, str | None]:
    """``{key: value_json as stored}`` of u1's profile rows (or rows of ``table``), opened."""
    with ml.db.read() as cur:
        cur.execute(f"SELECT key, value_json FROM {table or ml.profile_projection.table('facts')} "
                    "WHERE user_id = 'u1'")
        return dict(cur.fetchall())


def test_a_value_that_is_its_own_sentence_is_stored_once_and_read_back(store_args: dict[str, Any]) -> None:
    with MemoryLedger(**store_args) as ml:
        ml.assert_fact("u1", "memory.a1", "I walk the dog at six", text="I walk the dog at six")
        ml.assert_fact("u1", "pet.name", "Rex", text="my dog is called Rex")
        ml.assert_fact("u1", "memory.q1", "say \"hi\" 你好", text="say \"hi\" 你好")
        assert stored(ml) == {"memory.a1": "", "pet.name": '"Rex"', "memory.q1": ""}
        values = {k: f.value for k, f in ml.profile("u1").facts.items()}
        assert values == {"memory.a1": "I walk the dog at six", "pet.name": "Rex", "memory.q1": "say \"hi\" 你好"}
        assert all(r.ok for r in ml.verify())
        # a row written before (the value spelled out) reads the same and verifies against a replay that elides it
        with ml.db.transaction() as cur:
            cur.execute(f"UPDATE {ml.profile_projection.table('facts')} SET value_json = ? WHERE key = 'memory.a1'",
                        (cur.seal("u1", json.dumps("I walk the dog at six")),))
        assert {k: f.value for k, f in ml.profile("u1").facts.items()}["memory.a1"] == "I walk the dog at six"
        assert all(r.ok for r in ml.verify())
        with ml.db.transaction() as cur:
            cur.execute(f"UPDATE {ml.profile_projection.table('facts')} SET value_json = ? WHERE key = 'memory.a1'",
                        (cur.seal("u1", json.dumps("I walk the cat")),))
        assert not {r.projection: r for r in ml.verify()}["profile"].ok


def _stored_states(ml: MemoryLedger, user: str, key: str) -> list[dict[str, Any]]:
    """The stored (transcoded, still encrypted) states of the fact stream's events."""
    from ledger.domain import fact_id

    mapper = ml.app.mapper
    out = []
    for stored in ml.app.recorder.select_events(fact_id(user, key)):
        state = stored.state
        if mapper.cipher:
            state = mapper.cipher.decrypt(state)
        if mapper.compressor:
            state = mapper.compressor.decompress(state)
        out.append(mapper.transcoder.decode(state))
    return out


def test_the_log_stores_a_free_text_value_once_and_decodes_it_as_recorded(store_args: dict[str, Any]) -> None:
    from ledger.crypto import TOKEN_PREFIX, VALUE_IS_TEXT

    with MemoryLedger(**store_args) as ml:
        ml.assert_fact("u1", "memory.a1", "I walk the dog at six", text="I walk the dog at six")
        ml.assert_fact("u1", "pet.name", "Rex", text="my dog is called Rex")
        [free] = _stored_states(ml, "u1", "memory.a1")
        assert "value_json" not in free and free[VALUE_IS_TEXT] is True and free["text"].startswith(TOKEN_PREFIX)
        [named] = _stored_states(ml, "u1", "pet.name")
        assert VALUE_IS_TEXT not in named and named["value_json"].startswith(TOKEN_PREFIX)
        history = {r.key: r.value for r in ml.history("u1", "memory.a1")}
        assert history == {"memory.a1": "I walk the dog at six"}
        ml.rebuild(["profile", "history"], blue_green=True)  # a replay decodes the value back
        assert ml.profile("u1").facts["memory.a1"].value == "I walk the dog at six"
        assert all(r.ok for r in ml.verify())
        # forgotten: the text's key is destroyed, and the value it stood for is gone with it
        ml.forget("u1", "memory.a1", actor="test")
        from ledger.domain import fact_id

        first = ml.app.recorder.select_events(fact_id("u1", "memory.a1"))[0]
        event = ml.app.mapper.to_domain_event(first)
        assert (event.text, event.value_json) == (None, None)
        assert [r.value for r in ml.history("u1", "memory.a1")][0] is None
        assert all(r.ok for r in ml.verify())


def test_history_stores_a_free_text_value_once_and_every_query_reads_it_back(store_args: dict[str, Any]) -> None:
    from datetime import datetime, timezone

    with MemoryLedger(**store_args) as ml:
        ml.assert_fact("u1", "memory.a1", "I walk the dog at six", text="I walk the dog at six")
        t0 = datetime.now(timezone.utc)
        ml.assert_fact("u1", "memory.a1", "I walk the dog at seven now", text="I walk the dog at seven now")
        ml.assert_fact("u1", "pet.name", "Rex", text="my dog is called Rex")
        versions = ml.history_projection.table("versions")
        assert stored(ml, versions) == {"memory.a1": "", "pet.name": '"Rex"'}  # both versions of memory.a1 elided
        assert [r.value for r in ml.history("u1", "memory.a1")] == ["I walk the dog at six",
                                                                    "I walk the dog at seven now"]
        assert ml.believed("u1", as_of=t0).facts["memory.a1"].value == "I walk the dog at six"
        hits = ml.search("u1", "walk the dog", k=1, as_of=t0.isoformat())
        assert [(h.key, h.value) for h in hits] == [("memory.a1", "I walk the dog at six")]
        assert all(r.ok for r in ml.verify())
        with ml.db.transaction() as cur:  # a row written before (the value spelled out) verifies the same
            cur.execute(f"UPDATE {versions} SET value_json = ? WHERE key = 'memory.a1' AND version = 1",
                        (cur.seal("u1", json.dumps("I walk the dog at six")),))
        assert [r.value for r in ml.history("u1", "memory.a1")][0] == "I walk the dog at six"
        assert all(r.ok for r in ml.verify())
