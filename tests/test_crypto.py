"""Crypto-shredding: per-user keys (SQLite, PostgreSQL) and the field-encrypting mapper."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from eventsourcing.application import Application
from eventsourcing.domain import Aggregate, event
from eventsourcing.persistence import Cipher, Mapper, StoredEvent
from eventsourcing.utils import register_topic

from ledger.crypto import (
    MASTER_KEY_ENV,
    TOKEN_PREFIX,
    EncryptingMapper,
    FieldDecryptionError,
    KeyStore,
    KeyStoreError,
    SubjectErasedError,
    is_erased,
    load_master_key,
)
from ledger.keystores import PostgresKeyStore, SQLiteKeyStore
from tests import pg

LATIN = "Zebra-Kumquat-4821"
CHINESE = "我住在杭州西湖边"
REPO_ROOT = Path(__file__).resolve().parent.parent
# the suite's test server ($MEMLEDGER_TEST_DSN, tests/pg.py)
PG_CONNINFO = pg.TEST_DSN


# --------------------------------------------------------------------------------------------- toy domain


class Note(Aggregate):
    TOPIC = "tests.crypto:Note"

    class Created(Aggregate.Created):
        # With an explicit aggregate TOPIC, every event class on it needs one, including the inherited
        # "Created" base that eventsourcing redefines on each aggregate class.
        TOPIC = "tests.crypto:Note.Created"

    class Redacted(Aggregate.Event):
        """An explicit event class that declares the `erased` marker as a field."""

        TOPIC = "tests.crypto:Note.Redacted"
        user_id: str
        reason: str | None
        erased: bool = False

    class Closed(Aggregate.Event):
        """Opts out of encryption: its reason stays readable after erasure."""

        TOPIC = "tests.crypto:Note.Closed"
        ENCRYPTED_FIELDS = frozenset()
        user_id: str
        reason: str | None

    @event("Written", topic="tests.crypto:Note.Written")
    def __init__(self, user_id: str, text: str | None, value_json: Any = None) -> None:
        self.user_id = user_id
        self.text = text
        self.value_json = value_json
        self.reason: str | None = None
        self.closed_because: str | None = None

    @event("Edited", topic="tests.crypto:Note.Edited")
    def edit(self, user_id: str, text: str | None) -> None:
        self.text = text

    @event(Redacted)
    def redact(self, user_id: str, reason: str | None) -> None:
        self.reason = reason

    @event(Closed)
    def close(self, user_id: str, reason: str | None) -> None:
        self.closed_because = reason


class RecordCipher(Cipher):
    """Whole-record AES-GCM cipher (the library's AESCipher needs pycryptodome, not installed here)."""

    def __init__(self, environment: Any) -> None:
        self.aes = AESGCM(base64.b64decode(environment.get("CIPHER_KEY")))

    def encrypt(self, plaintext: bytes) -> bytes:
        nonce = os.urandom(12)
        return nonce + self.aes.encrypt(nonce, plaintext, None)

    def decrypt(self, ciphertext: bytes) -> bytes:
        return self.aes.decrypt(ciphertext[:12], ciphertext[12:], None)


register_topic("tests.crypto:RecordCipher", RecordCipher)


class NotesApp(Application):
    def __init__(self, env: dict[str, str], *, keystore: KeyStore) -> None:
        self.keystore = keystore  # construct_mapper() runs inside Application.__init__
        super().__init__(env)

    def construct_mapper(self) -> Mapper:
        return EncryptingMapper(
            transcoder=self.construct_transcoder(),
            compressor=self.factory.compressor(),
            cipher=self.factory.cipher(),
            keystore=self.keystore,
        )


def sqlite_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "PERSISTENCE_MODULE": "eventsourcing.sqlite",
        "SQLITE_DBNAME": str(tmp_path / "events.db"),
        **extra,
    }


def raw_bytes(path: Path) -> bytes:
    """The main database file plus any -wal/-journal sidecar, as the bytes an attacker would read."""
    data = b""
    for p in sorted(path.parent.glob(path.name + "*")):
        data += p.read_bytes()
    return data


def forms(text: str) -> list[bytes]:
    """Every way the text could sit in a file: UTF-8, JSON-escaped ASCII, UTF-16."""
    return [
        text.encode("utf-8"),
        json.dumps(text).strip('"').encode("ascii"),
        text.encode("utf-16-le"),
    ]


@pytest.fixture
def keystore(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SQLiteKeyStore:
    monkeypatch.delenv(MASTER_KEY_ENV, raising=False)
    store = SQLiteKeyStore(tmp_path / "keys.db")
    yield store
    store.close()


@pytest.fixture
def app(tmp_path: Path, keystore: SQLiteKeyStore) -> NotesApp:
    return NotesApp(sqlite_env(tmp_path), keystore=keystore)


# --------------------------------------------------------------------------------------------- mapper + SQLite


def test_round_trip_decrypts_and_plaintext_never_reaches_the_event_file(app: NotesApp, tmp_path: Path) -> None:
    a = Note("alice", LATIN, value_json={"city": CHINESE, "n": 3})
    a.edit("alice", CHINESE)
    app.save(a)

    fresh = NotesApp(sqlite_env(tmp_path), keystore=app.keystore)
    copy = fresh.repository.get(a.id)
    assert copy.text == CHINESE
    assert copy.value_json == {"city": CHINESE, "n": 3}  # non-string JSON keeps its type
    events = list(fresh.events.get(a.id))
    assert [e.text for e in events] == [LATIN, CHINESE]
    assert not any(is_erased(e) for e in events)

    blob = raw_bytes(tmp_path / "events.db")
    for text in (LATIN, CHINESE):
        for form in forms(text):
            assert form not in blob
    # The stored state keeps metadata in the clear (replayable, auditable) and the tokens.
    stored = app.recorder.select_events(a.id)
    state = json.loads(stored[0].state)
    assert state["user_id"] == "alice"
    assert state["text"].startswith(TOKEN_PREFIX)
    assert state["value_json"].startswith(TOKEN_PREFIX)
    assert stored[0].topic == "tests.crypto:Note.Written"
    assert b"alice" in blob


def test_destroy_erases_content_but_replay_proceeds(app: NotesApp, tmp_path: Path) -> None:
    keystore: SQLiteKeyStore = app.keystore  # type: ignore[assignment]
    a = Note("alice", LATIN)
    a.edit("alice", CHINESE)
    b = Note("bob", "Bob likes green tea")
    app.save(a, b)
    alice_key = keystore.get("alice")
    assert alice_key is not None and len(alice_key) == 32
    assert alice_key in raw_bytes(tmp_path / "keys.db")  # raw storage (no master key) before erasure

    assert keystore.destroy("alice") is True
    assert keystore.destroy("alice") is False  # idempotent
    assert keystore.get("alice") is None
    assert keystore.is_destroyed("alice")
    assert not keystore.is_destroyed("bob")

    # The key's bytes are gone from the key file (secure_delete), not just unlinked from the row.
    key_file = raw_bytes(tmp_path / "keys.db")
    assert alice_key not in key_file
    assert not list(tmp_path.glob("keys.db-wal"))

    # A fresh process view (new app, new key store object) still replays everything.
    fresh_store = SQLiteKeyStore(tmp_path / "keys.db")
    fresh = NotesApp(sqlite_env(tmp_path), keystore=fresh_store)
    events = list(fresh.events.get(a.id))
    assert [e.originator_version for e in events] == [1, 2]
    assert all(e.text is None for e in events)
    assert all(is_erased(e) for e in events)
    assert all(e.user_id == "alice" for e in events)  # metadata survives
    assert all(getattr(e, "_erased", False) is True for e in events)  # marker form for plain @event classes
    assert events[0].timestamp.tzinfo is not None
    note = fresh.repository.get(a.id)
    assert note.text is None and note.version == 2
    # Notification log replay also proceeds.
    notifications = fresh.notification_log.select(start=1, limit=10)
    assert len(notifications) == 3

    # Another user's events still decrypt.
    assert fresh.repository.get(b.id).text == "Bob likes green tea"

    # No silent new key for an erased user, and no new personal content can be recorded for them.
    with pytest.raises(SubjectErasedError, match=r"'alice'.*subject was erased"):
        fresh_store.get_or_create("alice")
    note.edit("alice", "new secret")
    with pytest.raises(SubjectErasedError, match="alice"):
        fresh.save(note)
    fresh_store.close()


def test_erased_marker_uses_declared_field_when_event_has_one(app: NotesApp, tmp_path: Path) -> None:
    a = Note("carol", LATIN)
    a.redact("carol", "asked to hide " + CHINESE)
    app.save(a)
    assert list(app.events.get(a.id))[1].reason == "asked to hide " + CHINESE
    assert list(app.events.get(a.id))[1].erased is False
    app.keystore.destroy("carol")
    redacted = list(app.events.get(a.id))[1]
    assert isinstance(redacted, Note.Redacted)
    assert redacted.reason is None
    assert redacted.erased is True
    assert "_erased" not in vars(redacted)
    assert is_erased(redacted)
    assert app.repository.get(a.id).reason is None


def test_event_class_can_opt_out_and_unowned_events_stay_plain(app: NotesApp, tmp_path: Path) -> None:
    a = Note("dave", LATIN)
    a.close("dave", "closed by request")
    anon = Note("", "nobody's note")
    app.save(a, anon)
    app.keystore.destroy("dave")
    assert list(app.events.get(a.id))[1].reason == "closed by request"
    assert app.repository.get(anon.id).text == "nobody's note"
    assert json.loads(app.recorder.select_events(anon.id)[0].state)["text"] == "nobody's note"
    # An erased user's event with nothing to encrypt can still be recorded (e.g. the erasure event itself).
    b = app.repository.get(a.id)
    b.close("dave", "erased")
    app.save(b)


def _token_swap(app: NotesApp, target: StoredEvent, field: str, token: str) -> StoredEvent:
    state = json.loads(target.state)
    state[field] = token
    return replace(target, state=json.dumps(state).encode())


def test_tampered_token_raises_clear_error(app: NotesApp) -> None:
    a = Note("erin", LATIN)
    app.save(a)
    stored = app.recorder.select_events(a.id)[0]
    token = json.loads(stored.state)["text"]
    sealed = bytearray(base64.b64decode(token[len(TOKEN_PREFIX) :]))
    sealed[20] ^= 0x01  # flip one bit in the ciphertext
    bad = TOKEN_PREFIX + base64.b64encode(bytes(sealed)).decode()
    with pytest.raises(FieldDecryptionError, match=r"'text'.*authentication failed") as info:
        app.mapper.to_domain_event(_token_swap(app, stored, "text", bad))
    assert str(a.id) in str(info.value) and "erin" in str(info.value)
    with pytest.raises(FieldDecryptionError, match="base64"):
        app.mapper.to_domain_event(_token_swap(app, stored, "text", TOKEN_PREFIX + "%%%"))
    with pytest.raises(FieldDecryptionError, match="too short"):
        app.mapper.to_domain_event(_token_swap(app, stored, "text", TOKEN_PREFIX + "AAAA"))


def test_moved_token_fails_authentication(app: NotesApp) -> None:
    a = Note("frank", LATIN, value_json="v")
    a.edit("frank", CHINESE)
    b = Note("frank", "other note")
    g = Note("grace", "grace's note")
    app.save(a, b, g)
    a1, a2 = app.recorder.select_events(a.id)
    b1 = app.recorder.select_events(b.id)[0]
    g1 = app.recorder.select_events(g.id)[0]
    a1_text = json.loads(a1.state)["text"]

    # Same user, another stream.
    with pytest.raises(FieldDecryptionError, match="moved"):
        app.mapper.to_domain_event(_token_swap(app, b1, "text", a1_text))
    # Same stream, another version.
    with pytest.raises(FieldDecryptionError, match="moved"):
        app.mapper.to_domain_event(_token_swap(app, a2, "text", a1_text))
    # Same event, another field.
    with pytest.raises(FieldDecryptionError, match="'value_json'"):
        app.mapper.to_domain_event(_token_swap(app, a1, "value_json", a1_text))
    # Another user's event (their key).
    with pytest.raises(FieldDecryptionError, match="grace"):
        app.mapper.to_domain_event(_token_swap(app, g1, "text", a1_text))
    # Relabelling the event as another user's does not help either.
    with pytest.raises(FieldDecryptionError):
        app.mapper.to_domain_event(_token_swap(app, a1, "user_id", "grace"))
    # Untouched events still decode.
    assert app.mapper.to_domain_event(a1).text == LATIN


def test_token_for_user_without_key_is_an_error_not_erasure(tmp_path: Path, app: NotesApp) -> None:
    a = Note("henry", LATIN)
    app.save(a)
    other_store = SQLiteKeyStore(tmp_path / "other-keys.db")
    other = NotesApp(sqlite_env(tmp_path), keystore=other_store)
    with pytest.raises(FieldDecryptionError, match="no data key"):
        other.repository.get(a.id)
    other_store.close()


def test_library_compressor_and_cipher_still_apply(tmp_path: Path, keystore: SQLiteKeyStore) -> None:
    env = sqlite_env(
        tmp_path,
        COMPRESSOR_TOPIC="eventsourcing.compressor:ZlibCompressor",
        CIPHER_TOPIC="tests.crypto:RecordCipher",
        CIPHER_KEY=base64.b64encode(os.urandom(32)).decode(),
    )
    app = NotesApp(env, keystore=keystore)
    assert app.mapper.compressor is not None and app.mapper.cipher is not None
    a = Note("ivan", CHINESE)
    app.save(a)
    stored = app.recorder.select_events(a.id)[0]
    inner = app.mapper.compressor.decompress(app.mapper.cipher.decrypt(stored.state))
    assert json.loads(inner)["text"].startswith(TOKEN_PREFIX)  # field encryption happened first
    assert app.repository.get(a.id).text == CHINESE
    keystore.destroy("ivan")
    assert app.repository.get(a.id).text is None


def test_snapshots_encrypt_the_aggregate_state(tmp_path: Path, keystore: SQLiteKeyStore) -> None:
    app = NotesApp(sqlite_env(tmp_path, IS_SNAPSHOTTING_ENABLED="y"), keystore=keystore)
    a = Note("judy", LATIN)
    a.edit("judy", CHINESE)
    app.save(a)
    app.take_snapshot(a.id)
    assert app.snapshots is not None
    snap = list(app.snapshots.get(a.id))[-1]
    assert snap.state["text"] == CHINESE
    for text in (LATIN, CHINESE):
        for form in forms(text):
            assert form not in raw_bytes(tmp_path / "events.db")
    assert app.repository.get(a.id).text == CHINESE
    keystore.destroy("judy")
    snap = list(app.snapshots.get(a.id))[-1]
    assert snap.state["text"] is None and is_erased(snap)
    assert app.repository.get(a.id).text is None


def test_mapper_refuses_to_be_built_without_keystore() -> None:
    from eventsourcing.persistence import JSONTranscoder

    with pytest.raises(TypeError, match="construct_mapper"):
        EncryptingMapper(transcoder=JSONTranscoder())


# --------------------------------------------------------------------------------------------- SQLite key store


def test_sqlite_keystore_lifecycle(keystore: SQLiteKeyStore) -> None:
    assert keystore.get("kim") is None
    assert not keystore.is_destroyed("kim")
    key = keystore.get_or_create("kim")
    assert len(key) == 32
    assert keystore.get_or_create("kim") == key == keystore.get("kim")
    assert keystore.get_or_create("lee") != key
    # Erasing a user who never had a key leaves a tombstone: no key can appear for them later.
    assert keystore.destroy("never-seen") is False
    assert keystore.is_destroyed("never-seen")
    with pytest.raises(SubjectErasedError):
        keystore.get_or_create("never-seen")
    with pytest.raises(ValueError):
        keystore.get_or_create("")


def _race_get_or_create(shared: Any, open_store: Callable[[], Any]) -> None:
    """8 threads call ``get_or_create`` for one new user at once, first all on ``shared``, then each on its own
    store from ``open_store()``: every thread must get the same key, and ``shared`` must then return it."""
    for store_per_thread in (False, True):
        user = f"race-{store_per_thread}"
        barrier = threading.Barrier(8)
        results: list[bytes] = []
        errors: list[BaseException] = []

        def worker(store_per_thread: bool = store_per_thread, user: str = user) -> None:
            store = open_store() if store_per_thread else shared
            try:
                barrier.wait()
                results.append(store.get_or_create(user))
            except BaseException as e:  # pragma: no cover - reported below
                errors.append(e)
            finally:
                if store_per_thread:
                    store.close()

        threads = [threading.Thread(target=worker) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        assert len(results) == 8 and len(set(results)) == 1
        assert shared.get(user) == results[0]


def test_sqlite_keystore_concurrent_get_or_create_8_threads(tmp_path: Path, keystore: SQLiteKeyStore) -> None:
    _race_get_or_create(keystore, lambda: SQLiteKeyStore(tmp_path / "keys.db"))


_PROC_SCRIPT = """
import sys, time
from ledger.keystores import SQLiteKeyStore
path, user, start = sys.argv[1], sys.argv[2], float(sys.argv[3])
store = SQLiteKeyStore(path)
time.sleep(max(0.0, start - time.time()))
print(store.get_or_create(user).hex())
"""


def test_sqlite_keystore_race_across_processes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MASTER_KEY_ENV, raising=False)
    path = tmp_path / "keys.db"
    SQLiteKeyStore(path).close()  # table exists; the race is on the row
    start = time.time() + 1.5
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _PROC_SCRIPT, str(path), "mallory", str(start)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=REPO_ROOT,
        )
        for _ in range(4)
    ]
    outs = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1] for o in outs]
    keys = {o[0].strip() for o in outs}
    assert len(keys) == 1
    assert SQLiteKeyStore(path).get("mallory").hex() == keys.pop()


def test_sqlite_keystore_wraps_with_master_key_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    master = os.urandom(32)
    monkeypatch.setenv(MASTER_KEY_ENV, base64.b64encode(master).decode())
    assert load_master_key() == master
    store = SQLiteKeyStore(tmp_path / "keys.db")
    assert store.wraps_keys
    key = store.get_or_create("nina")
    blob = store._conn().execute("SELECT key FROM user_keys WHERE user_id='nina'").fetchone()[0]
    assert key not in raw_bytes(tmp_path / "keys.db")  # only the wrapped form is stored
    assert blob in raw_bytes(tmp_path / "keys.db")

    # Wrong master key, or none at all: refused with a clear message, never a wrong key.
    with pytest.raises(KeyStoreError, match="wrong master key"):
        SQLiteKeyStore(tmp_path / "keys.db", master_key=os.urandom(32)).get("nina")
    monkeypatch.delenv(MASTER_KEY_ENV)
    with pytest.raises(KeyStoreError, match="no master key"):
        SQLiteKeyStore(tmp_path / "keys.db").get("nina")
    # A wrapped key cannot be moved to another user's row.
    store._conn().execute("INSERT INTO user_keys VALUES ('oscar', ?, 'aesgcm-v1', 'now', NULL)", (blob,))
    with pytest.raises(KeyStoreError, match="oscar"):
        store.get("oscar")

    assert store.destroy("nina")
    assert store.destroy("oscar")  # the copy planted above
    assert blob not in raw_bytes(tmp_path / "keys.db")
    store.close()


def test_master_key_env_is_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MASTER_KEY_ENV, "not base64!")
    with pytest.raises(KeyStoreError, match="base64"):
        load_master_key()
    monkeypatch.setenv(MASTER_KEY_ENV, base64.b64encode(b"short").decode())
    with pytest.raises(KeyStoreError, match="32 bytes"):
        load_master_key()
    monkeypatch.setenv(MASTER_KEY_ENV, "")
    assert load_master_key() is None


def test_raw_store_refused_when_master_key_configured(tmp_path: Path, keystore: SQLiteKeyStore) -> None:
    keystore.get_or_create("pat")
    with pytest.raises(KeyStoreError, match="stored raw"):
        SQLiteKeyStore(tmp_path / "keys.db", master_key=os.urandom(32)).get("pat")


def test_secure_delete_is_on_for_every_connection(tmp_path: Path, keystore: SQLiteKeyStore) -> None:
    seen: list[int] = []
    t = threading.Thread(target=lambda: seen.append(keystore._conn().execute("PRAGMA secure_delete").fetchone()[0]))
    t.start()
    t.join()
    assert seen == [1]
    assert keystore._conn().execute("PRAGMA secure_delete").fetchone()[0] == 1
    assert keystore._conn().execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    # A rewrite that shrinks the row a lot lands the new cell away from the old key bytes; without
    # secure_delete those bytes would stay in the page's free space (checked by hand: they do).
    keys = [keystore.get_or_create(f"user-{i}") for i in range(30)]
    keystore._conn().execute(
        "UPDATE user_keys SET key = NULL, key_format = NULL, created_at = '', destroyed_at = 1"
        " WHERE user_id IN ('user-3', 'user-17')"
    )
    data = raw_bytes(tmp_path / "keys.db")
    assert keys[3] not in data and keys[17] not in data
    assert keys[4] in data


def test_cache_is_dropped_on_destroy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MASTER_KEY_ENV, raising=False)
    store = SQLiteKeyStore(tmp_path / "keys.db", cache_ttl=60)
    key = store.get_or_create("quinn")
    assert store.get("quinn") == key
    store.destroy("quinn")
    assert store.get("quinn") is None
    store.close()


# --------------------------------------------------------------------------------------------- PostgreSQL


@pytest.fixture
def pg_schema(monkeypatch: pytest.MonkeyPatch) -> str:
    import psycopg

    pg.require()  # no server: a skip with the reason, or a failure under MEMLEDGER_REQUIRE_POSTGRES=1
    monkeypatch.delenv(MASTER_KEY_ENV, raising=False)
    conn = psycopg.connect(PG_CONNINFO, autocommit=True, connect_timeout=3)
    schema = f"memledger_test_{uuid.uuid4().hex[:12]}"
    yield schema
    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    conn.close()


@pytest.mark.postgres
def test_pg_keystore_lifecycle(pg_schema: str) -> None:
    store = PostgresKeyStore(PG_CONNINFO, schema=pg_schema)
    assert store.get("alice") is None
    key = store.get_or_create("alice")
    assert len(key) == 32 and store.get("alice") == key == store.get_or_create("alice")
    assert store.destroy("alice") is True
    assert store.destroy("alice") is False
    assert store.get("alice") is None and store.is_destroyed("alice")
    # A second store object (another process's view) sees the tombstone.
    other = PostgresKeyStore(PG_CONNINFO, schema=pg_schema)
    with pytest.raises(SubjectErasedError, match=r"'alice'.*subject was erased"):
        other.get_or_create("alice")
    assert other.destroy("never-seen") is False
    assert store.is_destroyed("never-seen")
    with other._connection.cursor() as cur:
        row = cur.execute(
            f'SELECT key, destroyed_at FROM "{pg_schema}".user_keys WHERE user_id = %s', ("alice",)
        ).fetchone()
    assert row[0] is None and row[1] is not None
    store.vacuum()
    store.close()
    other.close()


@pytest.mark.postgres
def test_pg_keystore_concurrent_get_or_create_8_threads(pg_schema: str) -> None:
    PostgresKeyStore(PG_CONNINFO, schema=pg_schema).close()
    shared = PostgresKeyStore(PG_CONNINFO, schema=pg_schema)
    _race_get_or_create(shared, lambda: PostgresKeyStore(PG_CONNINFO, schema=pg_schema))
    shared.close()


@pytest.mark.postgres
def test_pg_keystore_wraps_keys(pg_schema: str) -> None:
    master = os.urandom(32)
    store = PostgresKeyStore(PG_CONNINFO, schema=pg_schema, master_key=master)
    key = store.get_or_create("bob")
    with store._connection.cursor() as cur:
        blob, fmt = cur.execute(
            f'SELECT key, key_format FROM "{pg_schema}".user_keys WHERE user_id = %s', ("bob",)
        ).fetchone()
    assert fmt == "aesgcm-v1" and key not in bytes(blob)
    with pytest.raises(KeyStoreError, match="wrong master key"):
        PostgresKeyStore(PG_CONNINFO, schema=pg_schema, master_key=os.urandom(32)).get("bob")
    with pytest.raises(KeyStoreError, match="no master key"):
        PostgresKeyStore(PG_CONNINFO, schema=pg_schema).get("bob")
    store.close()


@pytest.mark.postgres
def test_pg_keystore_with_application(tmp_path: Path, pg_schema: str) -> None:
    store = PostgresKeyStore(PG_CONNINFO, schema=pg_schema)
    app = NotesApp(sqlite_env(tmp_path), keystore=store)
    a = Note("alice", CHINESE)
    b = Note("bob", LATIN)
    app.save(a, b)
    assert app.repository.get(a.id).text == CHINESE
    store.destroy("alice")
    fresh_store = PostgresKeyStore(PG_CONNINFO, schema=pg_schema)
    fresh = NotesApp(sqlite_env(tmp_path), keystore=fresh_store)
    event = next(iter(fresh.events.get(a.id)))
    assert event.text is None and is_erased(event)
    assert fresh.repository.get(b.id).text == LATIN
    store.close()
    fresh_store.close()


# ------------------------------------------------------------------------- per-fact keys: batched store, release


def _wrap(user_key: bytes, user_id: str, key_id: str, key: bytes) -> bytes:
    from ledger.crypto import wrap_fact_key

    return wrap_fact_key(user_key, user_id, key_id, key)


def test_store_fact_keys_makes_a_new_users_key_in_the_same_transaction(keystore: SQLiteKeyStore) -> None:
    from ledger.crypto import unwrap_fact_key

    statements: list[str] = []
    keystore._conn().set_trace_callback(statements.append)
    fk = os.urandom(32)
    keystore.store_fact_keys({"ada": [("k1", fk)]}, _wrap)
    assert [s for s in statements if s.strip().upper() == "COMMIT"] == ["COMMIT"]
    user_key = keystore.get("ada")
    assert user_key is not None and len(user_key) == 32
    assert unwrap_fact_key(user_key, "ada", "k1", keystore.get_fact_key("ada", "k1")) == fk


def test_store_fact_keys_wraps_under_the_key_a_racing_writer_created(tmp_path: Path, keystore: SQLiteKeyStore) -> None:
    """Another process creates the user's key between our fast-path read and our transaction: the fact key must be
    wrapped under the key that won, or it could never be opened."""
    from ledger.crypto import unwrap_fact_key

    other = SQLiteKeyStore(tmp_path / "keys.db")
    reads = {"n": 0}
    real_row = keystore._row

    def row(conn: Any, user_id: str) -> Any:
        reads["n"] += 1
        if reads["n"] == 1:  # our fast-path read sees no key; then the other process creates it
            other.get_or_create(user_id)
            return None
        return real_row(conn, user_id)

    keystore._row = row  # type: ignore[method-assign]
    fk = os.urandom(32)
    keystore.store_fact_keys({"bo": [("k1", fk)]}, _wrap)
    winner = other.get("bo")
    assert winner is not None
    assert unwrap_fact_key(winner, "bo", "k1", other.get_fact_key("bo", "k1")) == fk
    other.close()


def test_store_fact_keys_for_an_erased_user_stores_nothing(keystore: SQLiteKeyStore) -> None:
    keystore.get_or_create("cy")
    keystore.destroy("cy")
    with pytest.raises(SubjectErasedError):
        keystore.store_fact_keys({"dee": [("k1", os.urandom(32))], "cy": [("k2", os.urandom(32))]}, _wrap)
    assert keystore.get_fact_key("dee", "k1") is None and keystore.get_fact_key("cy", "k2") is None
    assert keystore.get("dee") is None  # the other, new user of the batch got no key either


def test_release_fact_keys_deletes_rows_and_their_bytes(tmp_path: Path, keystore: SQLiteKeyStore) -> None:
    keys = [os.urandom(32) for _ in range(3)]
    keystore.store_fact_keys({"eve": [(f"k{i}", k) for i, k in enumerate(keys)]}, _wrap)
    wrapped = keystore.get_fact_key("eve", "k1")
    assert keystore.release_fact_keys("eve", ["k1", "k2", "nope"]) == 2
    assert keystore.get_fact_key("eve", "k1") is None  # gone, not a tombstone: no event ever named it
    assert keystore.get_fact_key("eve", "k0") not in (None, False)
    keystore.close()
    assert wrapped not in (tmp_path / "keys.db").read_bytes()  # secure_delete zeroed the row


@pytest.mark.postgres
def test_pg_store_and_release_fact_keys(pg_schema: str) -> None:
    from ledger.crypto import unwrap_fact_key

    store = PostgresKeyStore(PG_CONNINFO, schema=pg_schema)
    fk = [os.urandom(32) for _ in range(2)]
    store.store_fact_keys({"fay": [("k0", fk[0]), ("k1", fk[1])]}, _wrap)
    user_key = store.get("fay")
    assert unwrap_fact_key(user_key, "fay", "k0", store.get_fact_key("fay", "k0")) == fk[0]
    assert store.release_fact_keys("fay", ["k1"]) == 1
    assert store.get_fact_key("fay", "k1") is None
    store.close()
