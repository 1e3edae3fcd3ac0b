"""``forget``: shred one fact's text and value for real (``memledger forget USER KEY [--version N] --yes``).

``retract`` keeps what was said (history shows it, by design); ``erase`` shreds everything about a user. ``forget`` is
the one in between: the content of one fact (every version of it, or ``--version N`` alone) is made unreadable for
good while the rest of the user's memory stays. How (docs/erasure.md, "Forget one fact"):

* every fact event written since per-fact keys exist is encrypted with its own data key (ledger/crypto.py, "Per-fact
  keys"), stored wrapped under the user's key in the key store's ``fact_keys`` table;
* ``forget`` records ``FactForgotten`` on the fact's stream first (when, by whom, which versions; no content), so a
  crash after it still leaves a log whose replay clears the content; then destroys those per-fact keys (the log's
  ciphertext of them can never be read again: replays decode it as ``None`` with a ``_forgotten`` marker); then the
  catch-up applies ``FactForgotten`` (profile row gone if the head was forgotten, history rows cleared to a
  ``forgotten`` placeholder, the search document tombstoned); then the semantic index files and the embedding cache
  entries of the forgotten texts are purged, snapshots of the stream deleted, and the SQLite files compacted
  (``VACUUM`` + WAL truncated) or the PostgreSQL tables rewritten (``VACUUM FULL``), so the deleted bytes leave disk.

``forget USER [KEY] --agent A --run R`` (:func:`forget_scope`) does the same for every version recorded in a scope
(by an agent, in a run: memledger/scopes.py), over every fact that has one, in one save and one purge.

Refused with :class:`~ledger.errors.BadInput` (exit 2, nothing written): an invalid or unknown user, key or version,
an erased user, a version already forgotten, and a version written before per-fact keys existed (its content is under
the user's key in an append-only log, so it cannot be shredded alone: erasing the user still works), or written in
plaintext (encryption off at the time).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from ledger.agent_spaces import unknown_refusal
from ledger.crypto import FACT_KEY_FIELD, TOKEN_PREFIX, is_erased, is_forgotten
from ledger.domain import Fact, fact_id
from ledger.errors import BadInput, MemledgerError
from ledger.privacy import ENCRYPTED_FIELDS, ENCRYPTION_ENV
from ledger.schemas import check_key, check_text, check_user_id
from ledger.timeutil import now_utc

from .erasure import _delete_snapshots, compact_store, reload_user_index
from .locks import user_lock
from .store import Store

__all__ = ["ForgetReceipt", "ScopeForgetReceipt", "check_forget_version", "forget_fact", "forget_scope"]

#: the actor recorded when the caller names none
DEFAULT_ACTOR = "forget"


class ForgetReceipt(BaseModel):
    """``memledger forget USER KEY --yes --json``: what a forget did.

    ``versions``: the fact's versions whose content was shredded (stream versions, as ``history`` numbers them);
    ``forgotten_at``: the system time of the ``FactForgotten`` placeholder (UTC), ``actor`` who asked; ``version``,
    ``event_id`` and ``position``: the placeholder's own version on the stream, event id and log position;
    ``keys_destroyed``: per-fact keys destroyed (versions without content, such as a bare retraction, have none);
    ``current_value_forgotten``: the head was among them, so the fact has no current value now;
    ``cache_entries_deleted``: embedding-cache rows of the forgotten texts deleted (the vector of a text still
    current is in its search row, cleared instead, not in the cache); ``files_compacted``: SQLite files rewritten
    (home-relative) so deleted bytes left the disk; ``resumed``: an earlier forget of these versions had recorded its
    placeholder but stopped before destroying the keys, and this call finished it (nothing new recorded).
    """

    user_id: str
    key: str
    versions: list[int]
    forgotten_at: datetime
    actor: str | None
    version: int
    event_id: str
    position: int
    keys_destroyed: int
    current_value_forgotten: bool
    cache_entries_deleted: int
    files_compacted: list[str]
    resumed: bool = False


def check_forget_version(version: Any) -> int | None:
    """``--version N``: None (every version) or an integer >= 1. Raises BadInput naming ``version``."""
    if version is None:
        return None
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise BadInput("version", f"{version!r} is not a version number", "give a version >= 1 as `history` lists it")
    return version


def _stored_fields(app: Any, stream_id: uuid.UUID) -> dict[int, dict[str, Any]]:
    """Each stored event of the stream as its transcoded state (encrypted fields still tokens), by version."""
    mapper = app.mapper
    out = {}
    for stored in app.recorder.select_events(stream_id):
        state = stored.state
        if mapper.cipher:
            state = mapper.cipher.decrypt(state)
        if mapper.compressor:
            state = mapper.compressor.decompress(state)
        out[stored.originator_version] = mapper.transcoder.decode(state)
    return out


def _refuse_a_scheduled_head_alone(fact: Fact, targets: set[int], user_id: str, key: str) -> None:
    """Refuse to forget a scheduled head ("moves to Berlin on 1 June") while a version it will replace is kept: its
    placeholder would leave the fact with no current value, not even the one that holds until then (Paris
    would be lost before the move), as ``retract`` refuses for the same reason (ledger/domain.py). Forgetting every version
    of the key is allowed: nothing is meant to remain."""
    head = fact.versions.get(fact.head) if fact.head is not None else None
    if head is None or fact.head not in targets or head.valid_from <= now_utc():
        return
    kept = [n for n, v in fact.versions.items() if n not in targets and v.value_json is not None
            and v.status in ("current", "superseded") and v.valid_to is not None and v.valid_to > v.valid_from]
    if kept:
        raise BadInput("version", f"{key!r} v{fact.head} is scheduled for {head.valid_from.isoformat()} and has not "
                       f"happened; forgetting it alone would leave no value, not even v{max(kept)} that holds until then",
                       f"first cancel it by restating what still holds (memledger correct {user_id} {key} VALUE "
                       f"--reason 'plan cancelled'), then forget v{fact.head}; or forget every version of {key!r}")


def _check_caller(ml: Store, actor: str | None) -> Any:
    """The checks every forget makes before it reads anything: ``actor``, encryption on, per-fact keys kept, this
    process's keys open the store's. Returns the key store."""
    if actor is not None:
        check_text(actor, "actor")
        if not actor.strip() or len(actor) > 512:
            raise BadInput("actor", "is empty or longer than 512 characters", "name who asks in at most 512 characters")
    keystore = ml.keystore
    if keystore is None:
        raise MemledgerError(f"forget needs per-user encryption, and this ledger runs with it off ({ENCRYPTION_ENV}"
                             "=off): the append-only log keeps every fact's content in plaintext")
    if not callable(getattr(keystore, "destroy_fact_keys", None)):
        raise MemledgerError("this ledger's key store keeps no per-fact keys: a single fact cannot be shredded")
    ml.check_keys()
    return keystore


@dataclass
class _Plan:
    """What forgetting one fact's versions takes, decided before anything is written: the versions (``targets``),
    the ``placeholder`` to record (or the earlier one a ``resumed`` forget finishes, at ``position``), the per-fact
    ``key_ids`` to destroy and the ``texts`` whose cached embeddings go."""

    key: str
    sid: uuid.UUID
    targets: list[int]
    placeholder: Any
    resumed: bool
    key_ids: list[str]
    texts: list[str]
    position: int | None = None


def _known(ml: Store, keystore: Any, user_id: str) -> None:
    """Refuse a user id the ledger holds nothing about (naming ``user_id``)."""
    with ml.db.read() as cur:
        known = bool(ml.history_projection.versions(cur, user_id)) or keystore.get(user_id) is not None
    if not known:
        raise unknown_refusal(user_id, f"nothing is held about {user_id!r}", "check the user id (see `memledger stats`)")


def _plan(ml: Store, keystore: Any, user_id: str, key: str, events: list[Any], version: int | None,
          actor: str | None, in_scope: Any = None) -> _Plan | None:
    """Check forgetting ``key``'s ``version`` (every version when None; with ``in_scope``, a predicate on a fact
    event, the versions it keeps that are not forgotten yet) and decide its placeholder; nothing is written.
    Returns None when a scoped forget finds nothing left to forget on this key. Raises BadInput as
    :func:`forget_fact` says."""
    sid = fact_id(user_id, key)
    placeholders = [e for e in events if isinstance(e, Fact.FactForgotten)]
    listed = {v for p in placeholders for v in p.forgotten}
    facts = {e.originator_version: e for e in events if not isinstance(e, Fact.FactForgotten)}
    if any(is_erased(e) for e in facts.values()):  # the key went between the check above and now
        raise BadInput("user_id", f"{user_id!r} was erased", "nothing is left to forget")
    if version is not None and version not in facts:
        shown = ", ".join(str(v) for v in sorted(facts))
        why = "is the record of a forget" if version in {p.originator_version for p in placeholders} \
            else "does not exist"
        raise BadInput("version", f"{key!r} v{version} {why}; its versions are {shown}",
                       f"pick one of them (see `memledger history {user_id} {key}`)")
    stored = _stored_fields(ml.app, sid)
    # a version "alive": it carries content that still decodes (its per-fact key, or the user's, exists)
    alive = {v for v, e in facts.items()
             if not is_forgotten(e) and any(stored[v].get(f) is not None for f in ENCRYPTED_FIELDS)}
    asked = [version] if version is not None else sorted(v for v in facts if in_scope is None or in_scope(facts[v]))
    targets = [v for v in asked if v not in listed]
    resumed = False
    if not targets:
        # every asked version is named by a placeholder: done, unless a forget stopped before its keys went
        targets = [v for v in asked if v in alive]
        resumed = bool(targets)
        if not resumed:
            if in_scope is not None:
                return None
            when = max(p.timestamp for p in placeholders)
            what = f"v{version} is" if version is not None else "is"
            raise BadInput("version" if version is not None else "key",
                           f"{key!r} {what} already forgotten (at {when.isoformat()})",
                           f"nothing is left to forget; `memledger history {user_id} {key}` shows the placeholder")
    field = "version" if version is not None else "key"
    legacy = [v for v in targets if v in alive and not stored[v].get(FACT_KEY_FIELD)]
    if legacy:
        vs = ", ".join(f"v{v}" for v in legacy)
        raise BadInput(field,
                       f"{key!r} {vs} {'was' if len(legacy) == 1 else 'were'} written before per-fact keys "
                       "existed: its text and value are encrypted under the user's own key in an append-only log, "
                       "so they cannot be shredded alone",
                       f"erase the whole user (`memledger erase {user_id} --yes`)"
                       + ("" if version is not None else ", or forget later versions one by one with --version N"))
    plain = [v for v in targets if v in alive and any(
        isinstance(stored[v].get(f), str) and not stored[v][f].startswith(TOKEN_PREFIX) for f in ENCRYPTED_FIELDS)]
    if plain:
        raise BadInput(field, f"{key!r} {', '.join(f'v{v}' for v in plain)} was written in plaintext (encryption "
                       "was off): the log keeps it readable", f"erase the whole user (`memledger erase {user_id} "
                                                              "--yes`) to take it out of every read model")
    texts = [facts[v].text for v in targets if getattr(facts[v], "text", None)]
    key_ids = [str(stored[v][FACT_KEY_FIELD]) for v in targets if v in alive and stored[v].get(FACT_KEY_FIELD)]
    if resumed:
        placeholder = [p for p in placeholders if set(targets) & set(p.forgotten)][-1]
        with ml.db.read() as cur:
            position = ml.history_projection.position_of_version(cur, user_id, key, placeholder.originator_version)
        return _Plan(key, sid, targets, placeholder, True, key_ids, texts, position)
    fact = ml.app.load_fact(sid)
    _refuse_a_scheduled_head_alone(fact, set(targets), user_id, key)
    placeholder = fact.forget(targets, [facts[v].event_id for v in targets], actor or DEFAULT_ACTOR, now_utc())
    return _Plan(key, sid, targets, placeholder, False, key_ids, texts)


def _carry_out(ml: Store, keystore: Any, user_id: str,
               plans: list[_Plan]) -> tuple[list[ForgetReceipt], int, list[str]]:
    """Record the new placeholders (one save through the one write path; first, so a crash after it still leaves a
    log whose replay clears the content, and a re-run finishes the job), destroy the per-fact keys right after the
    save, before anything reads the events; then catch every read model up and purge the search index, the
    snapshots and the files. The caller holds the user's lock (our own writers stay off the streams; another
    process's write makes the save conflict, nothing written, and the caller retries). Returns a receipt per plan
    (with the cache entries deleted and the files compacted when it is the only one), the cache entries deleted
    and the files compacted."""
    destroyed: dict[str, int] = {}

    def destroy() -> None:
        for p in plans:
            destroyed[p.key] = keystore.destroy_fact_keys(user_id, p.key_ids)

    new = [p for p in plans if not p.resumed]
    if new:
        saved = ml.write([user_id], lambda: ml.recorded(ml.app.save_events([p.placeholder for p in new])),
                         after_save=destroy)
        for p, (position, _) in zip(new, saved):
            p.position = position
    else:
        destroy()
    # every read model at the head whatever the projection mode: the purge below must find them there
    ml.catch_up(deferred=False)
    cache_deleted = _purge_vectors(ml, user_id, [(p.key, p.targets) for p in plans], [t for p in plans for t in p.texts])
    _delete_snapshots(ml.app, [p.sid for p in plans])
    compacted = compact_store(ml)
    one = len(plans) == 1
    receipts = [ForgetReceipt(
        user_id=user_id, key=p.key, versions=list(p.placeholder.forgotten), forgotten_at=p.placeholder.timestamp,
        actor=p.placeholder.actor, version=p.placeholder.originator_version, event_id=p.placeholder.event_id,
        position=p.position or 0, keys_destroyed=destroyed[p.key],
        current_value_forgotten=p.placeholder.replaces is not None, cache_entries_deleted=cache_deleted if one else 0,
        files_compacted=compacted if one else [], resumed=p.resumed) for p in plans]
    return receipts, cache_deleted, compacted


def forget_fact(ml: Store, user_id: str, key: str, *, version: int | None = None,
                actor: str | None = None) -> ForgetReceipt:
    """Shred the text and value of ``user_id``'s fact ``key`` (every version, or ``version`` alone); see the module
    docstring for the order and why.

    Returns a :class:`ForgetReceipt`.

    Raises:
        BadInput: invalid or unknown user_id / key / version, an erased user, nothing left to forget, or a version
            written before per-fact keys existed or in plaintext (nothing written in every case).
        MemledgerError: the store runs without encryption (``MEMLEDGER_ENCRYPTION=off``), or its key store keeps
            no per-fact keys: nothing could be shredded.
    """
    user_id = check_user_id(user_id)
    key = check_key(key)
    version = check_forget_version(version)
    keystore = _check_caller(ml, actor)
    ml.refuse_erased([user_id])
    with user_lock(ml, user_id):
        ml.before_read(None, 10.0)
        events = list(ml.app.events.get(fact_id(user_id, key)))
        if not events:
            _known(ml, keystore, user_id)
            raise BadInput("key", f"{user_id} has no fact {key!r}", f"see `memledger history {user_id}` for its keys")
        plan = _plan(ml, keystore, user_id, key, events, version, actor)
        assert plan is not None  # an unscoped plan refuses rather than finding nothing
        (receipt,), _, _ = _carry_out(ml, keystore, user_id, [plan])
    return receipt


class ScopeForgetReceipt(BaseModel):
    """``memledger forget USER [KEY] --agent A --run R --yes --json``: what forgetting a scope did.

    ``agent_id`` / ``run_id``: the scope (those given); ``key``: the one key it was limited to, if any;
    ``forgotten``: one :class:`ForgetReceipt` per fact that had versions written in the scope (each with its own
    ``FactForgotten`` placeholder, all recorded in one save; their ``cache_entries_deleted`` and ``files_compacted``
    are counted here, once); ``keys_destroyed``: per-fact keys destroyed in all.
    """

    user_id: str
    agent_id: str | None = None
    run_id: str | None = None
    key: str | None = None
    forgotten: list[ForgetReceipt]
    keys_destroyed: int
    cache_entries_deleted: int
    files_compacted: list[str]


def forget_scope(ml: Store, user_id: str, *, agent_id: str | None = None, run_id: str | None = None,
                 key: str | None = None, actor: str | None = None) -> ScopeForgetReceipt:
    """Shred every version of ``user_id``'s facts recorded by agent ``agent_id`` and / or in run ``run_id`` (each
    named scope must match; of ``key`` only, when given): the per-version forget of :func:`forget_fact`, for every
    fact with such versions at once (one save of their placeholders, one purge, one compaction). Versions written
    in another scope stay; a fact whose current version is forgotten has no current value afterwards.

    Raises:
        BadInput: no scope, an invalid or unknown user_id / key, an erased user, no version in the scope left to
            forget (naming the scope's field), or one written before per-fact keys existed or in plaintext (nothing
            written in every case).
        MemledgerError: as :func:`forget_fact`.
    """
    from .scopes import check_scope, versions_in_scope

    user_id = check_user_id(user_id)
    scope = check_scope(agent_id, run_id)
    field = "agent_id" if scope.agent_id is not None else "run_id"
    if not scope:
        raise BadInput("agent_id", "names no scope", "give agent_id or run_id (or forget one key)")
    key = None if key is None else check_key(key)
    keystore = _check_caller(ml, actor)
    ml.refuse_erased([user_id])
    described = " ".join(w for w in (scope.agent_id and f"by agent {scope.agent_id!r}",
                                      scope.run_id and f"in run {scope.run_id!r}") if w)
    with user_lock(ml, user_id):
        ml.before_read(None, 10.0)
        with ml.db.read() as cur:
            keys = sorted({k for k, _ in versions_in_scope(ml, cur, user_id, scope, None if key is None else [key])})
        plans = []
        for k in keys:
            events = list(ml.app.events.get(fact_id(user_id, k)))
            plan = _plan(ml, keystore, user_id, k, events, None, actor,
                         in_scope=lambda e: scope.matches(e.actor, e.session_id))
            if plan is not None:
                plans.append(plan)
        if not plans:
            _known(ml, keystore, user_id)
            if key is not None and not list(ml.app.events.get(fact_id(user_id, key))):
                raise BadInput("key", f"{user_id} has no fact {key!r}", f"see `memledger history {user_id}` for its keys")
            raise BadInput(field, f"{user_id} has no {'version of ' + repr(key) if key else 'memory'} written "
                           f"{described} left to forget", f"see `memledger history {user_id} --agent A --run R` "
                           "for what each scope wrote")
        receipts, cache_deleted, compacted = _carry_out(ml, keystore, user_id, plans)
    return ScopeForgetReceipt(user_id=user_id, agent_id=scope.agent_id, run_id=scope.run_id, key=key,
                              forgotten=receipts, keys_destroyed=sum(r.keys_destroyed for r in receipts),
                              cache_entries_deleted=cache_deleted, files_compacted=compacted)


def _purge_vectors(ml: Store, user_id: str, versions: list[tuple[str, list[int]]], texts: list[str]) -> int:
    """The semantic index holds the facts' texts beyond the catch-up's reach until its (deferred) catch-up runs:
    their document rows (tombstoned here at once where they hold a forgotten version of ``versions``, ``(key,
    [version, ...])`` pairs; the catch-up's own ``FactForgotten`` step then leaves the very rows a rebuild makes),
    the in-memory mirror and per-user ``.lex`` files (the ``generation`` bump reloads every process's mirror from the
    rows; this user's files are deleted in every model directory and rewritten), and the embedding cache rows of
    the texts. Returns the cache rows deleted."""
    proj = getattr(ml, "vectors_projection", None)
    if proj is None:
        return 0
    from projections.retrieval.documents import fact_doc_id

    with ml.db.transaction() as cur:
        t = proj.table("docs")
        for key, vs in versions:
            marks = ", ".join("?" * len(vs))
            cur.execute(f"UPDATE {t} SET live = 0, text = NULL, value_json = NULL, vector = NULL, cjk_vector = NULL, "
                        "source_ref = NULL, role = NULL, status = 'removed' "
                        f"WHERE user_id = ? AND doc_id = ? AND version IN ({marks})",
                        (user_id, fact_doc_id(key), *vs))
        proj.pack_user(cur, user_id)  # the user's pack rewritten from their live rows: the forgotten vectors go
        meta = proj._meta(cur)
        proj._set_meta(cur, "generation", str(int(meta.get("generation", "0")) + 1))
    reload_user_index(ml, proj, user_id)
    if not texts:
        return 0
    return int(proj._embedding_cache().delete_texts(texts) or 0)
