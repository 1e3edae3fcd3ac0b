"""Erasure and export, the user-control verbs over a whole user (docs/erasure.md).

In short (crypto-shredding):

* Every personal payload field of every event (:data:`ledger.privacy.ENCRYPTED_FIELDS`) is encrypted with the
  user's own AES-256-GCM data key by :class:`ledger.crypto.EncryptingMapper`; keys live in their own store
  (:func:`ledger.privacy.open_keystore`).
* :func:`erase_user` records ``SubjectErased`` (plaintext metadata only), destroys the key, purges every
  projection (``Projection.purge_user``) and any snapshot, then compacts the SQLite files so deleted bytes leave
  the disk. From then on the user's old events decode with ``None`` content and are skipped by the catch-up loop
  (replay/catchup.py), and a replay meeting ``SubjectErased`` purges again, so a full rebuild brings nothing back.
* :func:`export_user` gathers everything held about a user into one :class:`UserExport` (right of access),
  the disclosures of labelled facts (memledger/sensitivity.py) included.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from ledger.agent_spaces import unknown_refusal
from ledger.domain import fact_id
from ledger.errors import BadInput, MemledgerError
from ledger.privacy import ENCRYPTED_FIELDS, ENCRYPTION_ENV, SubjectErasure, subject_id
from ledger.schemas import HistoryRow, Profile, check_user_id
from ledger.timeutil import now_utc

from . import reads
from .optout import open_sessions
from .relation_models import EntityView, RelationVersion
from .store import Store

__all__ = [
    "DisclosureRow",
    "ErasureCertificate",
    "ErasureReceipt",
    "UserExport",
    "compact_store",
    "erase_user",
    "export_user",
    "verify_certificate",
]


# ----------------------------------------------------------------------------------------------------- models


class ErasureCertificate(BaseModel):
    """What an erasure destroyed, signed with the store's key (``ledger/signing.py``) so that an auditor can check
    it later, without access to the user's data: ``memledger verify-certificate FILE --public-key KEY``.

    ``erased_at``: when ``SubjectErased`` was recorded (system time, UTC); ``certified_at``: when this certificate
    was made (an erasure repeated later certifies again). ``tombstone_position``: the log position of
    ``SubjectErased`` (None when the user had been erased before). ``key_ids``: the key-store entries destroyed --
    the user's data key, which wraps every per-fact key of theirs and opens every encrypted field of their events.
    ``events`` with ``first_position`` / ``last_position``: the user's fact events made unreadable and where they lie
    in the log. ``rows_purged``: rows each projection table held for the user just before the erasure
    (``projection.table``). ``signature``: :func:`ledger.signing.sign` over every other field.
    """

    format: str = "memledger.erasure-certificate/v1"
    user_id: str
    erased_at: datetime
    certified_at: datetime
    actor: str | None
    tombstone_position: int | None
    key_ids: list[str]
    key_destroyed_now: bool
    events: int
    first_position: int | None
    last_position: int | None
    rows_purged: dict[str, int]
    snapshots_deleted: int
    files_compacted: list[str]
    signature: dict[str, str]

    def body(self) -> dict[str, Any]:
        """What the signature covers: every field but ``signature``, as JSON."""
        return self.model_dump(mode="json", exclude={"signature"})


def verify_certificate(certificate: Any, public_key: str | None = None) -> str | None:
    """Check an erasure certificate (a dict, as ``erase --json`` gives it under ``certificate``, or the
    certificate alone): None when its signature holds, else why not. ``public_key`` (base64): the store's key the
    auditor trusts (``memledger signing-key``); None checks it against the key it names (it was not altered).

    Raises:
        BadInput: ``certificate`` is not an erasure certificate (names the field that is wrong).
    """
    from pydantic import ValidationError

    from ledger.signing import verify

    if isinstance(certificate, dict) and isinstance(certificate.get("certificate"), dict):
        receipt, certificate = certificate, certificate["certificate"]  # the whole receipt was given
        if "user_id" in receipt and receipt["user_id"] != certificate.get("user_id"):
            # only the certificate is signed: a receipt saying another user would mislead whoever reads it
            raise BadInput("user_id", f"the receipt names {receipt['user_id']!r} and its certificate "
                           f"{certificate.get('user_id')!r}", "give the receipt as `erase --json` printed it")
    try:
        cert = ErasureCertificate.model_validate(certificate)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "certificate"
        raise BadInput(field, f"is not an erasure certificate's ({first['msg']})",
                       "give the JSON `memledger erase USER --json` printed (its certificate)") from None
    if cert.format != "memledger.erasure-certificate/v1":
        raise BadInput("format", f"{cert.format!r} is not memledger.erasure-certificate/v1",
                       "give the JSON `memledger erase USER --json` printed")
    # the signed bytes are those of the document as received, not as re-read (a field the model would drop or
    # normalise counts): every field but the signature, exactly as given
    body = {k: v for k, v in certificate.items() if k != "signature"}
    return verify(body, cert.signature, public_key)


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
    #: what was destroyed, signed with the store's key (see :class:`ErasureCertificate`)
    certificate: ErasureCertificate


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
    ``sessions``: the user's sessions with card, messages and summaries, JSON-shaped (instants as ISO 8601 UTC
    strings), then open ``--no-memory`` sessions with the messages they keep until they end; ``entities`` and
    ``relations``: the people in the user's life and every version of every relation (docs/relations.md). ``erased``:
    the user was erased -- everything else is then empty. ``scope``: an export limited to an agent or a run holds
    only the facts and versions written in it, their disclosures and the run's session (memledger/scopes.py).
    """

    format: str = "memledger.export/v1"
    user_id: str
    exported_at: datetime
    erased: bool
    #: when the user was erased (system time, UTC); absent from the JSON for a user who was not
    erased_at: datetime | None = Field(default=None, exclude_if=lambda v: v is None)
    profile: Profile
    history: list[HistoryRow]
    disclosures: list[DisclosureRow] = Field(default_factory=list)
    sessions: list[dict[str, Any]] = Field(default_factory=list)
    #: the people, places and organisations in the user's life, and every version of every relation
    entities: list[EntityView] = Field(default_factory=list)
    relations: list[RelationVersion] = Field(default_factory=list)
    #: the scopes the export was limited to (``agent_id``, ``run_id``: those given); absent from the JSON of a
    #: whole user's export
    scope: dict[str, str] | None = Field(default=None, exclude_if=lambda v: v is None)


# ----------------------------------------------------------------------------------------------------- erase


def _plaintext_events(app: Any, stream_ids: list[uuid.UUID]) -> int:
    """How many stored events of these streams carry a personal field that is not a ciphertext token."""
    from ledger.crypto import TOKEN_PREFIX

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


def erase_user(ml: Store, user_id: str, *, actor: str | None = None, compact: bool = True) -> ErasureReceipt:
    """Erase ``user_id`` from ``ml``: record ``SubjectErased``, destroy the key, purge every projection, delete
    snapshots, purge index files and caches a projection keeps (``purge_user_files``), compact SQLite files.

    Idempotent: erasing an erased user records nothing new and purges again. Order (why): the tombstone is
    recorded first, so a crash after it still leaves a log whose replay purges the user; the key is destroyed
    next, so nothing recorded concurrently can be decoded again; projections are purged through the catch-up
    (the tombstone) *and* directly afterwards, for events a concurrent writer slipped in before the key went.

    ``compact=False`` leaves the compaction to the caller (:func:`compact_store`): a shard rebalance erases many
    moved users' old copies and compacts once (memledger/sharding/rebalance.py).

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
    # deferred=False: the history read needs no semantic index, and nothing after the tombstone may fail on it (an
    # irreversible verb returns its receipt: the vectors table is purged directly below, whatever its model)
    ml.catch_up(deferred=False)
    with ml.db.read() as cur:
        rows = ml.history_projection.versions(cur, user_id)
    keys = sorted({r["key"] for r in rows})
    stream_ids = [fact_id(user_id, k) for k in keys]
    texts = [t for r in rows for t in (r["text"],) if t]
    already = ml.keystore.is_destroyed(user_id)
    if not already and not rows and ml.keystore.get(user_id) is None and not open_sessions(ml, user_id):
        # Nothing was ever recorded for this id (every write creates the user's key): erasing it would only burn
        # the id for good, and a typo in an erase would then block a real user.
        raise unknown_refusal(user_id, f"nothing is held about {user_id!r}",
                              "check the user id: erasing burns it for good")
    plaintext = _plaintext_events(ml.app, stream_ids) if not already else 0
    held = _rows_held(ml, user_id)

    position = None
    erased_at = now_utc()
    from eventsourcing.application import AggregateNotFoundError

    try:
        record = ml.app.repository.get(subject_id(user_id))
        erased_at = record.created_on
    except AggregateNotFoundError:  # the first erasure of this user
        record = SubjectErasure(user_id=user_id, actor=actor, facts=len(keys), events=len(rows))
        # the one write path, without the erased-user refusal (this is the erasure); the key goes right after the
        # save, before anything reads the events
        destroyed: list[Any] = []
        try:
            saved = ml.write({user_id}, lambda: ml.recorded(ml.app.save(record)), refuse_erased=False,
                             after_save=lambda: destroyed.append(ml.keystore.destroy(user_id)))
            position = saved[-1][0]
            erased_at = record.created_on
        except Exception:
            # another process recorded the tombstone between our look and our save (two erases at once): this one
            # is then the second, which purges again; anything else is the error it is
            try:
                erased_at = ml.app.repository.get(subject_id(user_id)).created_on
            except AggregateNotFoundError:
                raise
            already = True
    key_destroyed = destroyed[0] if position is not None else ml.keystore.destroy(user_id)
    if ml.db.sealer is not None:
        ml.db.sealer.forget_user(user_id)  # what this process opened of the user's projection rows
    ml.catch_up(deferred=False)  # the vectors projection applies the tombstone at its next catch-up (a no-op then)
    purged = []
    with ml.db.transaction() as cur:
        for p in ml.projections:
            p.purge_user(cur, user_id)
            purged.append(p.name)
    from .optout import purge_optout

    with ml.db.transaction() as cur:
        purge_optout(cur, user_id)
    _purge_vectors(ml, user_id, texts)
    snapshots = _delete_snapshots(ml.app, stream_ids)

    compacted = compact_store(ml) if compact else []
    from ledger.signing import sign

    positions = [int(r["position"]) for r in rows]
    cert = dict(user_id=user_id, erased_at=erased_at, certified_at=now_utc(), actor=actor,
                tombstone_position=position, key_ids=[f"user_keys:{user_id}"], key_destroyed_now=key_destroyed,
                events=len(rows), first_position=min(positions, default=None),
                last_position=max(positions, default=None), rows_purged=held, snapshots_deleted=snapshots,
                files_compacted=compacted)
    body = ErasureCertificate.model_validate({**cert, "signature": {}}).body()
    return ErasureReceipt(
        user_id=user_id, erased_at=erased_at, position=position, already_erased=already,
        key_destroyed=key_destroyed, facts=len(keys), events=len(rows), projections_purged=purged,
        snapshots_deleted=snapshots, log_plaintext_events=plaintext, files_compacted=compacted,
        certificate=ErasureCertificate.model_validate({**body, "signature": sign(ml.keystore, body)}),
    )


def _rows_held(ml: Store, user_id: str) -> dict[str, int]:
    """Rows each projection table (and each opt-out working table) holds for ``user_id``: ``{"profile.facts": 3}``."""
    from .store import OPTOUT_TABLES

    tables = [(f"{p.name}.{short}", p.table(short)) for p in ml.projections for short in p.user_tables] + [
        (f"optout.{t.removeprefix('optout_')}", t) for t in OPTOUT_TABLES]
    out = {}
    with ml.db.read() as cur:
        for name, table in tables:
            cur.execute(f"SELECT count(*) FROM {table} WHERE user_id = ?", (user_id,))
            out[name] = int(cur.fetchone()[0])
    return out


def compact_store(ml: Store) -> list[str]:
    """Make deleted bytes leave the disk after an erasure (the backend's ``compact``, ledger/backend.py): SQLite
    files are compacted (returns their paths relative to the home), PostgreSQL runs ``VACUUM FULL`` on the key tables
    and the projections' tables (returns [])."""
    tables = [p.table(short) for p in ml.projections for short in p.tables]
    return ml.backend.compact(ml.keystore, ml.db, tables)


def _purge_vectors(ml: Store, user_id: str, texts: list[str]) -> None:
    """The semantic index (projections/vectors.py) keeps more than its table: an in-memory mirror, per-user
    BM25 files (``.lex``, which hold the words; a store written before kept FAISS ``.faiss`` files too), and an
    embedding cache keyed by a hash of each text. The table was purged with the other projections (its generation bump tells every process to
    reload); here the mirror is reloaded now, the user's index files are deleted in every model/copy directory,
    the manifest rewritten, and the cached embeddings of every text the user ever had deleted."""
    proj = getattr(ml, "vectors_projection", None)
    if proj is None:
        return
    reload_user_index(ml, proj, user_id)
    if texts:
        proj._embedding_cache().delete_texts(texts)


def reload_user_index(ml: Store, proj: Any, user_id: str) -> None:
    """After the vectors table changed for ``user_id`` (erase, forget) and its generation was bumped: reload this
    process's mirror from the rows, delete the user's ``.lex`` files (and ``.vec`` and ``.faiss`` files of older layouts) in
    every model/copy directory, and rewrite the manifest and files from the mirror."""
    from projections.retrieval.documents import user_file_stem

    with ml.db.read() as cur:
        # a table built with another model (this process was opened with another embedder): its rows were purged
        # all the same; this object never serves it, so there is no mirror to reload and no manifest of ours
        mismatch = proj.model_mismatch(proj._meta(cur)) is not None
        if not mismatch:
            proj.refresh(cur)  # the generation changed: reload the mirror from the rows
    # BM25 files of evicted users still queued (a server's bounded mirror) are written before the user's go, so none
    # of the old index lands after them
    proj.wait_for_writes()
    stem = user_file_stem(user_id)
    for suffix in (".faiss", ".lex", ".vec"):
        for path in ml.backend.files("vectors", stem + suffix):  # none on PostgreSQL: the index lives in tables
            path.unlink(missing_ok=True)
    if not mismatch:
        proj.try_save_files()  # manifest without the user's files (and files of users the mirror lacks go)


# ----------------------------------------------------------------------------------------------------- export


def export_user(ml: Store, user_id: str, scope: Any = None) -> UserExport:
    """Everything ``ml`` holds about ``user_id`` as one :class:`UserExport` (``memledger export USER --json``).

    ``scope`` (a :class:`memledger.scopes.Scope`) limits it to what an agent wrote or a run held: the current facts
    whose current version was written in it, the history events recorded in it, the disclosures of those versions,
    and the sessions of the run (a message records no agent: an agent's export holds no session).

    Raises:
        BadInput: ``user_id`` invalid, or nothing was ever recorded about it (a mistyped id would otherwise read as
            a user whose memory is empty), whatever the scope.
    """
    user_id = check_user_id(user_id)
    agent_id, run_id = (scope.agent_id, scope.run_id) if scope else (None, None)
    profile = reads.profile(ml, user_id, agent_id=agent_id, run_id=run_id)
    history = reads.history(ml, user_id)
    sessions = _export_sessions(ml, user_id)
    erased_at = ml.erased_at(user_id)
    if erased_at is None and not history and not sessions and not open_sessions(ml, user_id) and (
            ml.keystore is None or ml.keystore.get(user_id) is None):  # every write makes the user's key
        raise unknown_refusal(user_id, f"nothing is held about {user_id!r}: no fact, session or erasure",
                              "check the user id (every id the ledger holds has a fact or a session)")
    disclosures = disclosure_rows(ml, user_id)
    if scope:
        history = [h for h in history if scope.matches(h.actor, h.session_id)]
        shown = {(h.key, h.version) for h in history}
        disclosures = [d for d in disclosures if (d.key, d.version) in shown]
        sessions = [] if agent_id is not None else [s for s in sessions if s["session_id"] == run_id]
    return UserExport(user_id=user_id, exported_at=now_utc(), erased=erased_at is not None, erased_at=erased_at,
                      profile=profile, history=history, disclosures=disclosures, sessions=sessions,
                      scope={k: v for k, v in (("agent_id", agent_id), ("run_id", run_id)) if v is not None} or None)


def disclosure_rows(ml: Store, user_id: str) -> list[DisclosureRow]:
    """Every disclosure of ``user_id``'s labelled facts, in log order (who let which version out, when, why): what
    ``export`` lists and :meth:`memledger.api.MemoryLedger.disclosures` returns. Reading them records nothing."""
    from ledger.timeutil import from_micros

    proj = getattr(ml, "disclosures_projection", None)
    if proj is None:
        return []
    with ml.db.read() as cur:
        return [DisclosureRow(key=r["key"], version=r["version"], sensitivity=r["sensitivity"],
                              recorded_at=from_micros(r["recorded_at"]), position=r["position"],
                              session_id=r["session_id"], purpose=r["purpose"], trace_id=r["trace_id"])
                for r in proj.rows(cur, user_id)]


def _export_sessions(ml: Store, user_id: str) -> list[dict[str, Any]]:
    """The user's sessions (ledger/sessions.py), oldest first, each with its card, messages and summaries; then
    open ``--no-memory`` sessions with the messages kept until they end (``no_memory: true``)."""
    from ledger.timeutil import from_micros

    from .optout import messages as optout_messages
    from .optout import open_sessions

    if getattr(ml, "state_cards_projection", None) is None:  # sessions not wired in this build
        return []

    def instants(row: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
        return {k: (from_micros(v) if k in names else v) for k, v in row.items()}

    out: list[dict[str, Any]] = []
    with ml.db.read() as cur:
        summaries = ml.summaries_projection.rows(cur, user_id)
        for s in ml.state_cards_projection.sessions(cur, user_id):
            sid = s["session_id"]
            card = ml.state_cards_projection.card(cur, user_id, sid)
            out.append({
                **instants(s, ("started_at", "ended_at", "last_at")),
                "no_memory": False,
                "card": None if card is None else instants(card, ("touched_at", "updated_at")),
                "messages": [instants(m, ("observed_at", "recorded_at"))
                             for m in ml.messages_projection.all(cur, user_id, sid)],
                "summaries": [instants(x, ("observed_at", "recorded_at")) for x in summaries
                              if sid in x["covers"]],
            })
    kept = optout_messages(ml, user_id)
    for sid in open_sessions(ml, user_id):
        out.append({"session_id": sid, "no_memory": True,
                    "messages": [m for m in kept if m["session_id"] == sid]})
    # JSON-shaped (instants as ISO 8601 strings), so the document round-trips through its JSON unchanged.
    from pydantic_core import to_jsonable_python

    return to_jsonable_python(out)
