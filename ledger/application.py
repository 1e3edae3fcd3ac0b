"""The eventsourcing ``Application`` of the ledger: commands in, events saved, one ``save()`` per batch.

Concurrency is eventsourcing's optimistic concurrency control: every event carries (originator_id,
originator_version) and the recorder's unique constraint refuses a second event at the same version. A command that
loses that race (``RecordConflictError``) is re-run on the winner's version — the policy decides again on the state
that now exists, so two writers racing on one fact never lose an update — by the one retry policy of
ledger/retry.py, then :class:`~ledger.errors.ConflictError`. A batch is saved in one ``save()`` (one transaction): all of it or none.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from eventsourcing.application import AggregateNotFoundError, Application

from .domain import Fact, fact_id
from .errors import BadInput
from .retry import on_conflict
from .schemas import FactCommand
from .timeutil import now_utc


@dataclass(frozen=True)
class Outcome:
    """What one command did: the stream, the version and event id, and the log position (None until known).

    ``event``: the domain event this command saved (None for an idempotent retry), the very object the log now holds
    at ``position``, so the caller can project it from memory instead of reading it back (replay/catchup.py
    ``recent``; the full replay of ``verify`` checks the two agree).
    """

    command: FactCommand
    version: int
    event_id: str
    kind: str
    effect: str
    position: int | None
    replayed: bool
    event: Any = None


class LedgerApplication(Application):
    """The write side. ``env`` selects the persistence module (SQLite file or PostgreSQL) and the recorder class,
    see ledger/backend.py ``event_store_env``; the library's factory then builds the recorder (ledger/recorders.py)."""

    name = "memledger"

    def __init__(self, env: Any = None, *, keystore: Any = None) -> None:
        """``keystore``: a :class:`ledger.crypto.KeyStore` to encrypt personal fields per user (crypto-shredding,
        docs/erasure.md), or None for plaintext events. It is set before ``Application.__init__``, which calls
        :meth:`construct_mapper` (ledger/crypto.py explains why ``MAPPER_TOPIC`` cannot do this)."""
        self.keystore = keystore
        super().__init__(env)

    def construct_mapper(self) -> Any:
        """An :class:`ledger.crypto.EncryptingMapper` over :data:`ledger.privacy.ENCRYPTED_FIELDS` when a key
        store is set (the library's transcoder, compressor and cipher still apply); else the library's mapper."""
        if getattr(self, "keystore", None) is None:
            return super().construct_mapper()
        from .crypto import EncryptingMapper
        from .privacy import ENCRYPTED_FIELDS

        return EncryptingMapper(
            transcoder=self.construct_transcoder(), compressor=self.factory.compressor(),
            cipher=self.factory.cipher(), keystore=self.keystore, fields=ENCRYPTED_FIELDS,
        )

    def close(self) -> None:
        """Hand back the unused per-fact keys this process reserved (ledger/crypto.py), then the library's close.
        A key store that fails here (gone, read-only) leaves the spare rows, which are harmless: closing goes on."""
        release = getattr(self.mapper, "release_unused_fact_keys", None)
        if release is not None and not self.closing.is_set():
            try:
                release()
            except Exception as exc:  # noqa: BLE001 - spare keys are harmless rows; never fail a close for them
                import logging

                logging.getLogger("memledger").debug("spare per-fact keys not handed back: %s", exc)
        super().close()

    def load_fact(self, stream_id: uuid.UUID, cls: type[Fact] = Fact) -> Fact:
        """The fact's aggregate from its stream, or a new :meth:`Fact.shell` if the stream has no events.

        On SQLite a stream with no events is told by one autocommit SELECT on the library's own connection
        before the library's ``repository.get`` (dearer after a commit: its read transaction's BEGIN and ROLLBACK
        and context managers around the same lookup), which then runs only for streams that exist. Why: most
        single-command saves of an agent create a fact, and this lookup was a sixth of such a save
        (scripts/bench_append.py, one per save). Like :meth:`existing_streams` it is only a shortcut: a writer that
        creates the stream meanwhile makes the save conflict, and the command is re-run on a full load.
        """
        if self._stream_absent(stream_id):
            return cls.shell(stream_id, now_utc())
        try:
            return self.repository.get(stream_id)
        except AggregateNotFoundError:
            return cls.shell(stream_id, now_utc())

    def _stream_absent(self, stream_id: uuid.UUID) -> bool:
        """True if the log holds no event of ``stream_id``; False if it does, or when the recorder cannot tell
        cheaply (PostgreSQL, or a recorder of the library's own: the lookups are the ledger's recorder classes',
        ledger/recorders.py, which the store's environment names)."""
        absent = getattr(self.recorder, "stream_absent", None)
        return absent is not None and absent(stream_id)

    def existing_streams(self, stream_ids: set[uuid.UUID]) -> set[uuid.UUID] | None:
        """Which of ``stream_ids`` already have events, in one query per 500 ids; None if the recorder cannot tell
        (one of the library's own, without the ledger's lookups: ledger/recorders.py).

        Why: a batch of mostly new facts (an ingest, an agent turn) used to cost one ``repository.get`` per stream,
        which finds nothing — on PostgreSQL one round trip each, half of a batched append's time (measured with
        scripts/bench_append.py). Streams not returned here start from :meth:`Fact.shell`; if another writer
        creates one meanwhile, the save conflicts and the command is re-run (see ``execute``), so this is only a
        shortcut, never a correctness assumption.
        """
        # a capability, not a backend: an application opened on a plain eventsourcing environment (an old store's
        # fixture, a benchmark) has the library's recorder, which offers no such lookup
        lookup = getattr(self.recorder, "existing_streams", None)
        if lookup is None:
            return None
        ids = list(stream_ids)
        found: set[uuid.UUID] = set()
        for i in range(0, len(ids), 500):  # within SQLite's limit of bound parameters per statement
            found |= lookup(ids[i:i + 500])
        return found

    def save_events(self, events: list[Any]) -> list[Any]:
        """Save domain events (not aggregates) in one transaction with the library's public ``Application.save``;
        returns its ``Recording`` objects (event and notification id), in the order given. The batch's per-fact
        keys are prepared first, in one key-store transaction, before the events are encoded (ledger/crypto.py)."""
        prepare = getattr(self.mapper, "prepare_fact_keys", None)
        if prepare is not None:
            prepare(events)
        return self.save(*events)

    def execute(self, commands: list[FactCommand],
                prelude: Callable[[LedgerApplication, datetime], list[Any]] | None = None) -> list[Outcome]:
        """Decide and save ``commands`` atomically (one save); returns one :class:`Outcome` per command, in order.

        A :class:`ledger.relations.RelationCommand` is decided by its :class:`ledger.relations.Relation` stream, any
        other command by its :class:`Fact`. ``prelude(app, recorded_at)``, called on every attempt, returns events to
        save first in the same save (the entities a relation names: memledger/relations.py).

        Raises:
            BadInput: a command was refused by the policy (nothing of the batch is saved).
            ConflictError: optimistic-concurrency conflicts persisted (ledger/retry.py, one policy for every write).
        """
        from .relations import Relation, RelationCommand, relation_stream_id

        kinds: list[type[Fact]] = [Relation if isinstance(c, RelationCommand) else Fact for c in commands]
        stream_ids = [relation_stream_id(c.user_id, c.key) if k is Relation else fact_id(c.user_id, c.key)
                      for c, k in zip(commands, kinds)]  # uuid5, so once per command
        def attempt(n: int) -> list[Outcome]:
            recorded_at = now_utc()
            facts: dict[uuid.UUID, Fact] = {}
            existing = self.existing_streams(set(stream_ids)) if len(commands) > 1 else None
            pending: list[tuple[FactCommand, Any, tuple | None]] = []
            first_events = prelude(self, recorded_at) if prelude is not None else []
            for i, (cmd, sid, kind) in enumerate(zip(commands, stream_ids, kinds)):
                fact = facts.get(sid)
                if fact is None:
                    new = existing is not None and sid not in existing
                    fact = facts[sid] = kind.shell(sid, now_utc()) if new else self.load_fact(sid, kind)
                try:
                    event, first = fact.record(cmd, recorded_at)
                except BadInput as exc:
                    # Say which command of a batch the policy refused: its file line when it has one (ingest),
                    # else its 1-based index.
                    where = cmd._where or (f"command {i + 1}: " if len(commands) > 1 else "")
                    if not where:
                        raise
                    raise BadInput(where + exc.field, exc.problem, exc.fix) from None
                pending.append((cmd, event, first))
            # Events are saved in command order (not grouped by stream), so log order is the order the caller gave:
            # a batch reads in the log exactly as it was written. A lost race raises RecordConflictError: re-run.
            events = first_events + [e for _, e, _ in pending if e is not None]
            recordings = self.save_events(events) if events else []
            positions = {id(r.domain_event): r.notification.id for r in recordings}
            out = []
            for cmd, event, first in pending:
                if event is not None:
                    out.append(Outcome(cmd, event.originator_version, event.event_id, event.kind, event.effect,
                                       positions.get(id(event)), False, event))
                else:
                    version, event_id, _fp, kind, effect = first  # type: ignore[misc]
                    out.append(Outcome(cmd, version, event_id, kind, effect, None, True))
            return out

        return on_conflict(attempt, "fact(s)")
