"""Privacy and user control: per-user encryption wiring, erasure, export, sensitivity disclosures.

See docs/erasure.md for the why. In short (crypto-shredding):

* Every personal payload field of every event (:data:`ENCRYPTED_FIELDS`) is encrypted with the user's own
  AES-256-GCM data key by :class:`ledger.crypto.EncryptingMapper`, wired in
  :meth:`ledger.application.LedgerApplication.construct_mapper`. Keys live in their own store
  (:func:`open_keystore`: ``keys.db`` in the home directory, or ``<schema>.user_keys`` on PostgreSQL).
* :func:`erase_user` records :class:`SubjectErased` (plaintext metadata only), destroys the key, purges every
  projection (``Projection.purge_user``) and any snapshot, then compacts the SQLite files so deleted bytes leave
  the disk. From then on the user's old events decode with ``None`` content and are skipped by the catch-up loop
  (replay/catchup.py), and a replay meeting ``SubjectErased`` purges again, so a full rebuild brings nothing back.
* :func:`export_user` gathers everything held about a user into one :class:`UserExport` (right of access).
* :class:`SensitiveFactIncluded` records, in the log, each time a fact carrying a sensitivity label was let into
  an agent's context (``projections/disclosures.py`` keeps them queryable, ``memledger export`` shows them).

This module never imports a projection at import time (ledger -> projections only inside functions).
"""

from __future__ import annotations

import os
import uuid
from datetime import datetime
from typing import TYPE_CHECKING, Any

from eventsourcing.domain import Aggregate, event
from pydantic import BaseModel, Field

from .crypto import DEFAULT_ENCRYPTED_FIELDS, KeyStore, is_erased
from .domain import NAMESPACE, fact_id
from .errors import BadInput, MemledgerError
from .schemas import HistoryRow, Profile, check_user_id
from .timeutil import now_utc

if TYPE_CHECKING:  # pragma: no cover
    from .config import Settings
    from .facade import MemoryLedger

__all__ = [
    "ENCRYPTED_FIELDS",
    "ENCRYPTION_ENV",
    "Disclosure",
    "ErasureReceipt",
    "SensitiveFactIncluded",
    "SubjectErased",
    "UserExport",
    "encryption_enabled",
    "erase_user",
    "export_user",
    "open_keystore",
]

#: Payload fields encrypted under the user's key. Fact events: ``value_json``, ``text``, ``reason`` (the
#: content) and ``command_fingerprint`` (a sha256 over the whole command, value included: a hash of a
#: low-entropy value such as a birth year can be brute-forced, so it is personal too). Session events
#: (ledger/sessions.py): message ``text`` and ``speaker`` (a name), its ``fingerprint`` (a hash of the text),
#: summary ``text``, the state ``card`` and its patch ``ops``, the session ``task`` and an ``inherited_card``.
#: Keys (``preference.drink``), ids, times and provenance stay plaintext: replay, audit and idempotency need them,
#: and they must not carry personal content (docs/erasure.md).
ENCRYPTED_FIELDS: frozenset[str] = DEFAULT_ENCRYPTED_FIELDS | {
    "command_fingerprint", "speaker", "fingerprint", "ops", "task", "inherited_card",
}

#: ``MEMLEDGER_ENCRYPTION=off`` turns per-user encryption off for a *new* store (benchmarks, legacy). Default on.
ENCRYPTION_ENV = "MEMLEDGER_ENCRYPTION"


def encryption_enabled(environ: dict[str, str] | None = None) -> bool:
    """True unless ``$MEMLEDGER_ENCRYPTION`` is ``off``/``0``/``false``/``no`` (case-insensitive).

    Raises:
        BadInput: for any other non-empty value (naming the variable and the accepted values).
    """
    value = (os.environ if environ is None else environ).get(ENCRYPTION_ENV, "").strip().lower()
    if value in ("", "on", "1", "true", "yes"):
        return True
    if value in ("off", "0", "false", "no"):
        return False
    raise BadInput(ENCRYPTION_ENV, f"{value!r} is not on or off", "set it to on (default) or off")


def open_keystore(settings: Settings, encrypt: bool | None = None) -> KeyStore | None:
    """The key store of a ledger: ``<home>/keys.db`` (SQLite) or table ``<schema>.user_keys`` (PostgreSQL).

    Returns None when encryption is off (``encrypt=False`` or ``$MEMLEDGER_ENCRYPTION=off``). A master key in
    ``$MEMLEDGER_MASTER_KEY`` (base64 of 32 bytes) wraps the data keys (ledger/crypto.py).

    Raises:
        MemledgerError: encryption off for an embedded store that already has a ``keys.db`` -- its log holds
            ciphertext that only the key store can read, so switching off would return tokens as content.
    """
    from .crypto import PostgresKeyStore, SQLiteKeyStore

    if encrypt is None:
        encrypt = encryption_enabled()
    if settings.home is not None:
        path = settings.home / "keys.db"
        if not encrypt:
            if path.exists():
                raise MemledgerError(
                    f"{ENCRYPTION_ENV}=off but {path} exists: this store was written encrypted; "
                    f"unset {ENCRYPTION_ENV} to open it"
                )
            return None
        return SQLiteKeyStore(path)
    if not encrypt:
        return None
    return PostgresKeyStore(settings.dsn or "", schema=settings.schema)


# ----------------------------------------------------------------------------------------------------- events


def subject_id(user_id: str) -> uuid.UUID:
    """The stream id of a user's erasure record: ``uuid5(NAMESPACE, "subject\\x1f<user_id>")``."""
    return uuid.uuid5(NAMESPACE, f"subject\x1f{user_id}")


class SubjectErasure(Aggregate):
    """One stream per erased user, holding the single ``SubjectErased`` tombstone (so a second erasure of the
    same user finds it and records nothing new)."""

    TOPIC = "memledger:SubjectErasure"

    class Created(Aggregate.Created):
        # eventsourcing redefines ``Created`` on each aggregate class; with an explicit aggregate TOPIC every
        # event class on it needs one too.
        TOPIC = "memledger:SubjectErasure.Created"

    class SubjectErased(Aggregate.Created):
        """The tombstone: who was erased, when (the event's timestamp), by whom, and how much was purged.

        Never encrypted (``ENCRYPTED_FIELDS`` empty): it must stay readable after the key is gone, and holds no
        personal content -- only the user id, which the log keeps anyway as stream metadata.
        """

        TOPIC = "memledger:SubjectErased"
        ENCRYPTED_FIELDS = frozenset()
        user_id: str
        actor: str | None
        facts: int
        events: int

    @staticmethod
    def create_id(user_id: str, **_: Any) -> uuid.UUID:
        return subject_id(user_id)

    @event(SubjectErased)
    def __init__(self, user_id: str, actor: str | None, facts: int, events: int) -> None:
        self.user_id = user_id
        self.actor = actor
        self.facts = facts
        self.events = events


#: The event class the catch-up loop reacts to (purge the user from every projection).
SubjectErased = SubjectErasure.SubjectErased


class Disclosure(Aggregate):
    """One stream per disclosure: a labelled fact let into an agent's context (a stream each, so concurrent
    context assemblies never conflict on a version)."""

    TOPIC = "memledger:Disclosure"

    class Created(Aggregate.Created):
        TOPIC = "memledger:Disclosure.Created"

    class SensitiveFactIncluded(Aggregate.Created):
        """A fact labelled ``sensitivity`` (health, finance, ...) was included in context because the caller
        allowed that label. Metadata only (key, version, label, purpose): the content stays in the fact's own
        encrypted events."""

        TOPIC = "memledger:SensitiveFactIncluded"
        user_id: str
        key: str
        version: int
        sensitivity: str
        session_id: str | None
        purpose: str | None
        trace_id: str | None

    @event(SensitiveFactIncluded)
    def __init__(self, user_id: str, key: str, version: int, sensitivity: str, session_id: str | None,
                 purpose: str | None, trace_id: str | None) -> None:
        self.user_id = user_id


SensitiveFactIncluded = Disclosure.SensitiveFactIncluded


# ----------------------------------------------------------------------------------------------------- models


class ErasureReceipt(BaseModel):
    """``memledger erase USER --json``: what an erasure did.

    ``position`` is the log position of ``SubjectErased`` (``None`` when the user had been erased before and
    nothing new was recorded). ``facts``/``events``: the user's fact streams and fact events found when erasing.
    ``log_plaintext_events``: events of the user written before encryption was on (their content stays readable
    in the append-only log -- erasure cannot shred them; docs/erasure.md). ``files_compacted``: the SQLite files
    rewritten so deleted bytes left the disk.
    """

    user_id: str
    erased_at: datetime
    position: int | None
    already_erased: bool
    key_destroyed: bool
    facts: int
    events: int
    projections_purged: list[str]
    snapshots_deleted: int
    log_plaintext_events: int
    files_compacted: list[str]


class DisclosureRow(BaseModel):
    """One ``SensitiveFactIncluded``: which labelled fact (key, version) went into context, when, why."""

    key: str
    version: int
    sensitivity: str
    recorded_at: datetime
    position: int
    session_id: str | None
    purpose: str | None
    trace_id: str | None


class UserExport(BaseModel):
    """``memledger export USER --json``: everything held about one user (right of access), in one document.

    ``profile``: current facts; ``history``: every event of every fact in log order (values, texts, reasons,
    provenance, valid and system times); ``disclosures``: each time a sensitive fact was let into context;
    ``sessions``: the user's sessions with messages, summaries and cards (empty until sessions exist). ``erased``:
    the user was erased -- everything else is then empty.
    """

    format: str = "memledger.export/v1"
    user_id: str
    exported_at: datetime
    erased: bool
    profile: Profile
    history: list[HistoryRow]
    disclosures: list[DisclosureRow] = Field(default_factory=list)
    sessions: list[dict[str, Any]] = Field(default_factory=list)


# ----------------------------------------------------------------------------------------------------- erase


def _plaintext_events(app: Any, stream_ids: list[uuid.UUID]) -> int:
    """How many stored events of these streams carry a personal field that is not a ciphertext token."""
    from .crypto import TOKEN_PREFIX

    n = 0
    for sid in stream_ids:
        for stored in app.recorder.select_events(sid):
            state = stored.state
            if app.mapper.cipher:
                state = app.mapper.cipher.decrypt(state)
            if app.mapper.compressor:
                state = app.mapper.compressor.decompress(state)
            data = app.mapper.transcoder.decode(state)
            if any(isinstance(data.get(f), str) and not data[f].startswith(TOKEN_PREFIX)
                   for f in ENCRYPTED_FIELDS):
                n += 1
    return n


def _delete_snapshots(app: Any, stream_ids: list[uuid.UUID]) -> int:
    """Delete the snapshots of these streams (eventsourcing has no API for it; its snapshot table is plain SQL)."""
    if app.snapshots is None or not stream_ids:
        return 0
    recorder = app.snapshots.recorder
    table = recorder.events_table_name
    n = 0
    with recorder.datastore.transaction(commit=True) as cur:
        for sid in stream_ids:
            if getattr(recorder.datastore, "schema", None):  # PostgreSQL
                cur.execute(f'DELETE FROM "{recorder.datastore.schema}"."{table}" WHERE originator_id = %s', (sid,))
            else:
                cur.execute(f"DELETE FROM {table} WHERE originator_id = ?", (sid.hex,))
            n += max(cur.rowcount, 0)
    return n


def compact_sqlite(path: str | os.PathLike[str]) -> bool:
    """Rewrite an SQLite file so deleted rows' bytes leave the disk: VACUUM, then truncate the WAL.

    ``secure_delete`` (set on every projection connection) already zeroes freed cells; VACUUM rebuilds the file
    without free pages, and ``wal_checkpoint(TRUNCATE)`` empties the ``-wal`` file, whose frames still hold the
    page images written before the purge. Returns False if another connection kept the WAL from being truncated
    (a reader in the middle of a transaction); erasure then reports the file as not compacted.
    """
    import sqlite3

    conn = sqlite3.connect(os.fspath(path), isolation_level=None, timeout=60)
    try:
        conn.execute("PRAGMA secure_delete=ON")
        conn.execute("VACUUM")
        busy, _log, _ckpt = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return busy == 0
    finally:
        conn.close()


def erase_user(ml: MemoryLedger, user_id: str, *, actor: str | None = None) -> ErasureReceipt:
    """Erase ``user_id`` from ``ml``: record ``SubjectErased``, destroy the key, purge every projection, delete
    snapshots, purge index files and caches a projection keeps (``purge_user_files``), compact SQLite files.

    Idempotent: erasing an erased user records nothing new and purges again. Order (why): the tombstone is
    recorded first, so a crash after it still leaves a log whose replay purges the user; the key is destroyed
    next, so nothing recorded concurrently can be decoded again; projections are purged through the catch-up
    (the tombstone) *and* directly afterwards, for events a concurrent writer slipped in before the key went.

    Raises:
        BadInput: ``user_id`` invalid.
        MemledgerError: the store has no key store (encryption off): the log would keep the user's plaintext.
    """
    user_id = check_user_id(user_id)
    if ml.keystore is None:
        raise MemledgerError(
            "erase needs per-user encryption, and this ledger runs with it off "
            f"({ENCRYPTION_ENV}=off): the append-only log would keep the user's content in plaintext"
        )
    ml.catch_up()
    with ml.db.read() as cur:
        rows = ml.history_projection.versions(cur, user_id)
    keys = sorted({r["key"] for r in rows})
    stream_ids = [fact_id(user_id, k) for k in keys]
    texts = [t for r in rows for t in (r["text"],) if t]
    already = ml.keystore.is_destroyed(user_id)
    plaintext = _plaintext_events(ml.app, stream_ids) if not already else 0

    position = None
    erased_at = now_utc()
    try:
        record = ml.app.repository.get(subject_id(user_id))
        erased_at = record.created_on
    except Exception:  # noqa: BLE001 - AggregateNotFoundError: first erasure
        record = SubjectErasure(user_id=user_id, actor=actor, facts=len(keys), events=len(rows))
        recordings = ml.app.save(record)
        position = recordings[-1].notification.id
        erased_at = record.created_on
    key_destroyed = ml.keystore.destroy(user_id)

    ml.catch_up()
    purged = []
    with ml.db.transaction() as cur:
        for p in ml.projections:
            p.purge_user(cur, user_id)
            purged.append(p.name)
    for p in ml.projections:
        purge_files = getattr(p, "purge_user_files", None)
        if purge_files is not None:
            purge_files(user_id, texts)
    cache = getattr(ml, "embedding_cache", None)
    if cache is not None and texts:
        cache.delete_texts(texts)
    snapshots = _delete_snapshots(ml.app, stream_ids)

    compacted = []
    if ml.settings.home is not None:
        vacuum = getattr(ml.keystore, "vacuum", None)
        for name in sorted(os.listdir(ml.settings.home)):
            path = ml.settings.home / name
            if name.endswith(".db") and name not in ("events.db", "keys.db") and compact_sqlite(path):
                compacted.append(name)
    else:
        vacuum = getattr(ml.keystore, "vacuum", None)
        if vacuum is not None:
            vacuum()  # VACUUM FULL user_keys: the destroyed key's dead row version leaves the heap
        _vacuum_postgres(ml)
    return ErasureReceipt(
        user_id=user_id, erased_at=erased_at, position=position, already_erased=already,
        key_destroyed=key_destroyed, facts=len(keys), events=len(rows), projections_purged=purged,
        snapshots_deleted=snapshots, log_plaintext_events=plaintext, files_compacted=compacted,
    )


def _vacuum_postgres(ml: MemoryLedger) -> None:
    """VACUUM FULL the projection tables: deleted rows' versions leave the table files (not WAL or backups)."""
    tables = [p.table(short) for p in ml.projections for short in p.tables]
    with ml.db._pool.connection() as conn:  # VACUUM cannot run inside a transaction block
        for t in tables:
            conn.execute(f'VACUUM FULL "{ml.db.schema}"."{t}"')


# ----------------------------------------------------------------------------------------------------- export


def export_user(ml: MemoryLedger, user_id: str) -> UserExport:
    """Everything ``ml`` holds about ``user_id`` as one :class:`UserExport` (``memledger export USER --json``).

    Raises:
        BadInput: ``user_id`` invalid.
    """
    from .timeutil import from_micros

    user_id = check_user_id(user_id)
    profile = ml.profile(user_id)
    history = ml.history(user_id)
    disclosures = []
    proj = getattr(ml, "disclosures_projection", None)
    if proj is not None:
        with ml.db.read() as cur:
            for r in proj.rows(cur, user_id):
                disclosures.append(DisclosureRow(
                    key=r["key"], version=r["version"], sensitivity=r["sensitivity"],
                    recorded_at=from_micros(r["recorded_at"]), position=r["position"], session_id=r["session_id"],
                    purpose=r["purpose"], trace_id=r["trace_id"],
                ))
    sessions: list[dict[str, Any]] = []
    export_sessions = getattr(ml, "export_sessions", None)  # issue 5's sessions, once they exist
    if export_sessions is not None:
        sessions = list(export_sessions(user_id))
    erased = ml.keystore.is_destroyed(user_id) if ml.keystore is not None else False
    return UserExport(user_id=user_id, exported_at=now_utc(), erased=erased, profile=profile, history=history,
                      disclosures=disclosures, sessions=sessions)


# ----------------------------------------------------------------------------------------------------- sensitivity


def check_allow_sensitive(labels: Any, field: str = "allow_sensitive") -> frozenset[str]:
    """Validate the labels a caller lets into context: a list of non-empty strings (``["health"]``), or None.

    Raises:
        BadInput: naming ``field``.
    """
    if labels is None:
        return frozenset()
    if isinstance(labels, str):
        labels = [x for x in labels.split(",")]
    out = set()
    for x in labels:
        if not isinstance(x, str) or not x.strip():
            raise BadInput(field, f"{x!r} is not a label", "give labels such as health,finance (comma-separated)")
        out.add(x.strip())
    return frozenset(out)


def split_by_sensitivity(items: list[Any], allow: frozenset[str],
                         label_of: Any = lambda item: getattr(item, "sensitivity", None)) -> tuple[list[Any], list[Any]]:
    """Split ``items`` into (kept, withheld): an item with a label not in ``allow`` is withheld; unlabelled
    items are always kept. Order is preserved. ``label_of(item)`` reads the label (default: ``.sensitivity``)."""
    kept, withheld = [], []
    for item in items:
        label = label_of(item)
        (kept if label is None or label in allow else withheld).append(item)
    return kept, withheld


def record_disclosures(ml: MemoryLedger, user_id: str, included: list[tuple[str, int, str]], *,
                       session_id: str | None = None, purpose: str | None = None,
                       trace_id: str | None = None) -> list[int]:
    """Record one ``SensitiveFactIncluded`` per (key, version, label) let into context; one save for all.

    Returns the log positions. Called by context assembly whenever a labelled fact is included.
    """
    if not included:
        return []
    records = [Disclosure(user_id=user_id, key=k, version=v, sensitivity=label, session_id=session_id,
                          purpose=purpose, trace_id=trace_id) for k, v, label in included]
    recordings = ml.app.save(*records)
    positions = [r.notification.id for r in recordings]
    ml.catch_up(until=max(positions))
    return positions


def skip_in_projections(ev: Any) -> bool:
    """True for an event the projections must not apply: one whose user was erased (its content is gone)."""
    return is_erased(ev)
