"""Projection sealing (ledger/sealing.py): the read models keep each user's content under the user's own key, so the
projection database's files, its WAL and a dump of it hold no plaintext, and an erase shreds those copies too."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from ledger.sealing import Sealer, is_sealed
from memledger import MemoryLedger


class Keys:
    """A key store double: one fixed key per user, destroyable."""

    def __init__(self) -> None:
        self.keys: dict[str, bytes | None] = {}

    def get_or_create(self, user_id: str) -> bytes:
        return self.keys.setdefault(user_id, os.urandom(32))  # type: ignore[return-value]

    def get(self, user_id: str) -> bytes | None:
        return self.keys.get(user_id)


def test_a_token_opens_for_its_user_only_and_to_none_once_the_key_is_gone() -> None:
    keys = Keys()
    s = Sealer(keys)
    a = s.seal("ana", "我住在杭州 and I drink tea")
    assert is_sealed(a) and "杭州" not in a and "tea" not in a
    assert s.seal("ana", "我住在杭州 and I drink tea") == a  # deterministic: equality lookups still work
    assert s.seal("bo", "我住在杭州 and I drink tea") != a
    assert s.open(a) == "我住在杭州 and I drink tea"
    blob = s.seal("ana", b"\x00\x01vector")
    assert is_sealed(blob) and s.open(blob) == b"\x00\x01vector"
    assert s.open("plain text") == "plain text" and s.open(b"plain") == b"plain" and s.seal("ana", None) is None
    # a token moved into another user's row does not open
    forged = a.replace(a.split(":")[1], "Ym8=")  # the user id part says "bo"
    keys.get_or_create("bo")
    with pytest.raises(ValueError, match="does not open"):
        s.open(forged)
    keys.keys["ana"] = None  # erased: the key is destroyed, and erase drops what the process opened of her
    s.forget_user("ana")
    assert s.open(a) is None and s.open(blob) is None
    assert Sealer(keys).open(a) is None  # another process
    off = Sealer(keys, writes=False)
    assert off.seal("bo", "tea") == "tea" and off.open(s.seal("bo", "tea")) == "tea"


SECRET = "Okapi-Tamarind-4417"
SECRET_ZH = "我的保险箱密码藏在书架第三层"


def populate(ml: MemoryLedger) -> None:
    ml.assert_fact("u1", "home.city", SECRET, text=f"I live at {SECRET}", reason=f"said {SECRET}")
    ml.remember("u1", SECRET_ZH)
    ml.session_start("u1", "s1", task=f"plan {SECRET}")
    ml.log_message("u1", "s1", role="user", message_id="m1", text=f"remember {SECRET_ZH}", speaker=SECRET)
    ml.update_card("u1", "s1", progress=SECRET, add_decisions=[SECRET_ZH])
    ml.summarize("u1", "s1", text=f"summary {SECRET}")
    ml.relate("u1", "sister", SECRET)
    assert [h.key for h in ml.search("u1", SECRET_ZH, k=3)]


def test_every_read_shows_plaintext_and_the_tables_hold_none(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    populate(ml)
    assert ml.profile("u1").facts["home.city"].value == SECRET
    assert SECRET in ml.history("u1", "home.city")[0].reason
    assert [m["text"] for m in ml.messages("u1", "s1")] == [f"remember {SECRET_ZH}"]
    assert SECRET_ZH in ml.context("u1", session_id="s1", query="保险箱").text
    assert [e.name for e in ml.entities("u1").entities] == [SECRET]
    with ml.db.read() as cur:  # the raw rows: every personal column holds tokens
        raw = cur.raw
        for table, cols in ((ml.profile_projection.table("facts"), "value_json, text"),
                            (ml.history_projection.table("versions"), "value_json, text, reason"),
                            (ml.messages_projection.table("log"), "speaker, text"),
                            (ml.summaries_projection.table("pyramid"), "text"),
                            (ml.state_cards_projection.table("cards"), "task, progress, decisions"),
                            (ml.relations_projection.table("entities"), "name, aliases"),
                            (ml.vectors_projection.table("docs"), "text, vector")):
            raw.execute(f"SELECT {cols} FROM {table} WHERE user_id = 'u1'")
            values = [v for row in raw.fetchall() for v in row if v is not None]
            assert values and all(is_sealed(bytes(v) if isinstance(v, memoryview) else v) for v in values), table
    assert all(r.ok for r in ml.verify())  # rebuilt copies seal alike


@pytest.mark.postgres
def test_the_postgres_wal_and_a_dump_hold_no_plaintext(postgres_server: None, tmp_path: Path) -> None:
    """A pg_dump of the log and projection tables taken before the erase, and the WAL after a checkpoint, hold none
    of the user's strings (the key store's tables are left out of the dump: keys are what must be kept apart)."""
    import psycopg

    from tests import pg

    schema = pg.new_schema()
    marker = f"Wombat-{uuid.uuid4().hex[:10]}"  # unique to this test: the WAL is shared by every test
    try:
        with MemoryLedger(dsn=pg.TEST_DSN, schema=schema) as ml:
            ml.assert_fact("u1", "home.city", marker, text=f"I live at {marker}")
            ml.log_message("u1", "s1", role="user", message_id="m1", text=f"my code is {marker}")
            ml.search("u1", marker, k=1)
            dump = subprocess.run(["pg_dump", "--dbname", pg.TEST_DSN, "--schema", schema, "--exclude-table",
                                   f"{schema}.user_keys", "--exclude-table", f"{schema}.fact_keys"],
                                  capture_output=True, timeout=120, check=True).stdout
            assert b"memledger_events" in dump and b"profile_facts" in dump  # the dump holds the tables
            assert marker.encode() not in dump
            with psycopg.connect(pg.TEST_DSN, autocommit=True) as conn:
                conn.execute("CHECKPOINT")
                wal = Path(conn.execute("SHOW data_directory").fetchone()[0]) / "pg_wal"
            if not os.access(wal, os.R_OK):
                pytest.skip(f"{wal} is not readable by this user")
            data = b"".join(p.read_bytes() for p in wal.iterdir() if p.is_file())
            assert data and marker.encode() not in data
            assert ml.profile("u1").facts["home.city"].value == marker  # and it reads back
    finally:
        pg.drop_schema(schema)


def test_sealing_off_keeps_new_rows_plain_and_sealed_rows_still_open(store_args: dict[str, Any],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    with MemoryLedger(**store_args) as ml:
        ml.assert_fact("u1", "home.city", SECRET)
    monkeypatch.setenv("MEMLEDGER_PROJECTION_SEALING", "off")
    with MemoryLedger(**store_args) as ml:
        ml.assert_fact("u1", "preference.drink", "tea")
        assert {k: f.value for k, f in ml.profile("u1").facts.items()} == {"home.city": SECRET,
                                                                          "preference.drink": "tea"}
        with ml.db.read() as cur:
            cur.raw.execute(f"SELECT key, value_json FROM {ml.profile_projection.table('facts')} ORDER BY key")
            rows = dict(cur.raw.fetchall())
        assert is_sealed(rows["home.city"]) and rows["preference.drink"] == '"tea"'


def _cut(token: bytes) -> tuple[bytes, list[bytes]]:
    """A chunked token's head (prefix, user, chunk table) and its chunks."""
    n = int.from_bytes(token[4:6], "big")
    at = 6 + n
    count = int.from_bytes(token[at:at + 4], "big")
    lengths = [int.from_bytes(token[at + 4 + 8 * i:at + 12 + 8 * i], "big") for i in range(count)]
    at += 4 + 8 * count
    head, chunks = token[:at], []
    for x in lengths:
        chunks.append(token[at:at + x])
        at += x
    return head, chunks


def test_a_chunked_token_opens_whole_or_chunk_by_chunk_for_its_user_only_and_to_none_once_the_key_is_gone() -> None:
    keys = Keys()
    s = Sealer(keys)
    chunks = [b"memledger head\n", os.urandom(1000), b"", b"the tail"]
    t = s.seal_chunks("ana", chunks)
    assert is_sealed(t) and t[:4] == b"MLS2" and b"memledger head" not in t and b"the tail" not in t
    assert bytes(s.open(t)) == b"".join(chunks)
    c = s.chunks(t)
    assert c.sizes == [15, 1000, 0, 8] and c.open(1) == chunks[1] and c.open(3) == b"the tail"
    out = [bytearray(n) for n in c.sizes]
    c.open_into(list(enumerate(out)))  # two threads, each chunk straight into its buffer
    assert [bytes(o) for o in out] == chunks
    with pytest.raises(ValueError, match="opens to 1000 bytes, not 999"):
        c.open_into([(1, bytearray(999))])
    # a random nonce per chunk: sealed again, another token opening to the same bytes
    t2 = s.seal_chunks("ana", chunks)
    assert t2 != t and bytes(s.open(t2)) == b"".join(chunks)
    head, parts = _cut(t)
    _, parts2 = _cut(t2)
    # a chunk of another token (same user, same place), chunks reordered, the token moved to another user's row,
    # or cut short: none opens
    keys.get_or_create("bob")
    for bad in (head + parts[0] + parts2[1] + parts[2] + parts[3],
                head + parts2[0] + parts[1] + parts[2] + parts[3],
                head.replace(b"ana", b"bob") + b"".join(parts)):
        with pytest.raises(ValueError, match="does not open"):
            s.open(bad)
    with pytest.raises(ValueError, match="another length"):
        s.open(t[:-1])
    keys.keys["ana"] = None  # erased: every chunk is gone with the key
    assert s.open(t) is None and s.chunks(t) is None and Sealer(keys).open(t2) is None
    assert Sealer(keys, writes=False).seal_chunks("bob", chunks) == b"".join(chunks)
