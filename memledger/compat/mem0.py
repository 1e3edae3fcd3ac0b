"""mem0 2.x's ``Memory`` and ``AsyncMemory`` over the ledger: ``from memledger.compat.mem0 import Memory`` instead
of ``from mem0 import Memory``, and a script written against mem0 runs unchanged.

::

    from memledger.compat.mem0 import Memory

    m = Memory(home="/tmp/demo")                      # or Memory(dsn=...), Memory.from_config({...}), Memory()
    r = m.add("I switched to hot lattes", user_id="ana")
    mid = r["results"][0]["id"]                       # {"id", "memory", "event": "ADD"}
    m.search("what does she drink?", filters={"user_id": "ana"})["results"]   # [{"id", "memory", "score", ...}]
    m.update(mid, "These days I drink green tea")     # a change of mind: a new version, the old one kept
    m.history(mid)                                    # ADD, UPDATE rows as mem0 writes them

Each memory is one fact of the ledger (a user and a key; ids in memledger/compat/mem0_shapes.py). ``add`` with
``infer=True`` sends each user message through :meth:`~memledger.api.MemoryLedger.remember` (slot resolution, no
LLM), so a change of mind updates the memory it replaces instead of adding a contradiction beside it; ``update`` is
a supersede, ``delete`` a retraction: the ledger's history keeps every version, and ``history`` returns them.
What differs from mem0 is listed in docs/interfaces.md ("mem0-compatible API").
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ledger.errors import BadInput, MemledgerError

from ..agent_space import opened_if_own
from .mem0_shapes import (SCOPE_KEYS, Life, check_filters, check_metadata, check_text_arg, entity_id, item,
                          matches, memory_id, normalise_messages, parse_memory_id, payload, read_value, rename_fields,
                          require_user, stored_value, walk)

logger = logging.getLogger("memledger.compat.mem0")

#: mem0 config sections that have no meaning here, and why (from_config warns about each one given)
IGNORED_CONFIG = {
    "vector_store": "the ledger keeps its own per-user index in the store (set memledger.home or memledger.dsn)",
    "llm": "memledger decides without an LLM (slot resolution, docs/resolution.md)",
    "embedder": "memledger's embedder is memledger.embedder or $MEMLEDGER_EMBEDDER",
    "graph_store": "memledger has no graph memory",
    "history_db_path": "history is the ledger's own log",
    "reranker": "search scores are absolute (docs/retrieval.md); nothing reranks them",
    "version": "results always have mem0's v1.1 shape",
    "custom_instructions": "nothing is extracted by an LLM",
    "custom_fact_extraction_prompt": "nothing is extracted by an LLM",
    "custom_update_memory_prompt": "nothing is extracted by an LLM",
}
#: the settings of a config's ``memledger`` section (and the keyword arguments of Memory)
MEMLEDGER_SETTINGS = ("home", "dsn", "schema", "embedder", "allow_sensitive", "purpose")
REASON = "through the mem0-compatible API (Memory.{})"
#: retractions per save in delete_all (a batch holds at most 2,000 commands)
DELETE_BATCH = 500
_NOT_SUPPORTED = {
    "memory_type": "procedural memories are summaries written by an LLM: add the summary yourself with infer=False",
    "prompt": "nothing is extracted by an LLM: leave prompt out",
    "timestamp": "leave timestamp out (mem0's open-source Memory refuses it too)",
    "expiration_date": "leave expiration_date out, or retract the memory when it lapses (delete)",
}


class ResetRefused(MemledgerError):
    """``Memory.reset`` on a store this ``Memory`` did not create (see :meth:`Memory.reset`)."""


def settings_from_config(config: Any) -> dict[str, Any]:
    """The Memory settings of a mem0-style config dict (or a mem0 ``MemoryConfig``, whose set fields are read).

    The ``memledger`` section gives :data:`MEMLEDGER_SETTINGS`; mem0's own sections (:data:`IGNORED_CONFIG`) are
    ignored with a ``UserWarning`` naming each and why. Raises BadInput naming ``config.KEY`` for anything else.
    """
    if hasattr(config, "model_dump"):  # mem0's MemoryConfig: only what the caller set
        config = config.model_dump(exclude_unset=True)
    if not isinstance(config, dict):
        raise BadInput("config", f"is a {type(config).__name__}",
                       "pass a dict such as {'memledger': {'home': '/path/to/store'}}")
    out: dict[str, Any] = {}
    for k, v in config.items():
        if k == "memledger":
            if not isinstance(v, dict):
                raise BadInput("config.memledger", f"is a {type(v).__name__}", "pass a dict such as {'home': '...'}")
            for sub, value in v.items():
                if sub not in MEMLEDGER_SETTINGS:
                    raise BadInput(f"config.memledger.{sub}", "is not a memledger setting",
                                   "use " + ", ".join(MEMLEDGER_SETTINGS))
                out[sub] = value
        elif k in IGNORED_CONFIG:
            if v is not None and not (k == "version" and v == "v1.1"):
                warnings.warn(f"memledger.compat.mem0: config[{k!r}] is ignored: {IGNORED_CONFIG[k]}", UserWarning,
                              stacklevel=3)
        else:
            raise BadInput(f"config.{k}", "is not a mem0 or memledger setting",
                           "give the store in a 'memledger' section: {'memledger': {'home': ...}} or {'dsn': ...}")
    return out


#: where a message holds another statement: after a sentence's end, and before "and I" / "and my" / "but I" (EN);
#: after 。！？； and before a clause that starts again with 我 (ZH)
_STATEMENT_BREAK = re.compile(r"(?<=[.!?])(?<!Dr\.)(?<!Mr\.)(?<!Mrs\.)(?<!Ms\.)(?<!St\.)(?<!Mt\.)(?<!Jr\.)(?<!Sr\.)"
                              r"\s+(?=[A-Z0-9\"“'‘\u4e00-\u9fff])|(?<=[。！？；;])|,?\s+(?:and|but) (?=(?:I|I'm|I've|my|we|our)\b)|"
                              r"[，,](?:而且|还有|另外)?(?=我(?!们))")


def statements(text: str) -> list[str]:
    """The statements of one message, in order (at least one; nothing dropped but the joining words and spaces):
    "Hi, I'm Alex. I love iced americano and I live in Lisbon." -> "Hi, I'm Alex.", "I love iced americano",
    "I live in Lisbon." A part too short to say anything (fewer than 2 characters) stays with the one before."""
    parts: list[str] = []
    for piece in _STATEMENT_BREAK.split(text.strip()):
        piece = (piece or "").strip()
        if len(piece) < 2 and parts:
            parts[-1] += piece
        elif piece:
            parts.append(piece)
    return parts or [text.strip()]


#: a scope filter of "*": any agent (or run), as long as the memory was recorded with one
ANY = "*"


class Memory:
    """mem0's ``Memory`` (2.x methods, arguments and result shapes) on one memledger store.

    Args:
        config: a mem0-style config dict (or mem0 ``MemoryConfig``): see :meth:`from_config`.
        home: directory of an embedded store. dsn / schema: a PostgreSQL store. Neither: the CLI's store
            (``$MEMLEDGER_DSN``, else ``$MEMLEDGER_HOME``, else ``./.memledger``).
        embedder: the search index's embedder (default ``$MEMLEDGER_EMBEDDER`` or MiniLM).
        ledger: an opened :class:`~memledger.api.MemoryLedger` to use instead (not closed by :meth:`close`).
        allow_sensitive / purpose: sensitivity labels (health, finance, ...) whose memories reads return, and why
            (each one returned is recorded as a disclosure); by default such memories are left out of get, get_all,
            search and history, as every read of the ledger withholds them.

    Thread-safe: calls on one Memory are serialised. Raises BadInput (a ``ValueError``) naming the argument and the
    fix for bad input; nothing is written then.
    """

    def __init__(self, config: Any = None, *, home: str | os.PathLike[str] | None = None, dsn: str | None = None,
                 schema: str | None = None, embedder: Any = None, ledger: Any = None, allow_sensitive: Any = None,
                 purpose: str | None = None) -> None:
        from ..sensitivity import check_grant

        given = {"home": home, "dsn": dsn, "schema": schema, "embedder": embedder,
                 "allow_sensitive": allow_sensitive, "purpose": purpose}
        settings = settings_from_config(config) if config is not None else {}
        for k, v in given.items():
            if v is None:
                continue
            if k in settings and settings[k] != v:
                raise BadInput(k, "is given both in config and as an argument, differently", f"give {k} once")
            settings[k] = v
        grant = check_grant(settings.pop("allow_sensitive", None), settings.pop("purpose", None))
        self._read_args = {"allow_sensitive": sorted(grant.labels) or None, "purpose": grant.purpose}
        self._lock = threading.RLock()
        self._created, self._before = False, None
        if ledger is not None:
            if settings:
                raise BadInput("ledger", f"given together with {', '.join(sorted(settings))}",
                               "pass an opened MemoryLedger or the store settings, not both")
            self._store_args: dict[str, Any] | None = None
            self._owned = False
            self._ledger = ledger
            return
        if settings.get("home") is None and settings.get("dsn") is None and os.environ.get("MEMLEDGER_SHARDS"):
            raise BadInput("home", "is not given and $MEMLEDGER_SHARDS names a shard map, which this API does not open",
                           "pass home= or dsn= of one store (or unset $MEMLEDGER_SHARDS)")
        from ledger.config import Settings

        from ..api import MemoryLedger

        resolved = Settings.resolve(settings.get("home"), settings.get("dsn"), settings.get("schema"))
        # whether opening creates the store, and what the home held before (what reset() may delete)
        self._created, self._before = resolved.backend.fresh()
        self._store_args = {k: v for k, v in settings.items() if v is not None}
        self._resolved = resolved
        self._owned = True
        self._ledger = MemoryLedger(**self._store_args)

    @classmethod
    def from_config(cls, config_dict: dict[str, Any]) -> Memory:
        """A Memory from a mem0-style config: ``{"memledger": {"home": ...}}`` or ``{"memledger": {"dsn": ...,
        "schema": ...}}`` (also ``embedder``, ``allow_sensitive``, ``purpose``); mem0's sections (``vector_store``,
        ``llm``, ``embedder``, ``graph_store``, ``history_db_path``, ``reranker``, prompts) are ignored with a
        ``UserWarning`` each; no ``memledger`` section means the CLI's store. Raises BadInput for unknown keys."""
        return cls(config_dict)

    @contextmanager
    def _on(self, user: str) -> Iterator[None]:
        """This Memory's lock, with ``user`` passing the user id check when it is an agent's own id (derived here
        from ``agent_id`` alone, or from a memory id minted for it; a caller's ``user_id`` never is)."""
        with self._lock, opened_if_own(user):
            yield

    @property
    def ledger(self) -> Any:
        """The :class:`~memledger.api.MemoryLedger` underneath (time travel, audit, unlink, ...)."""
        return self._ml

    @property
    def _ml(self) -> Any:
        if self._ledger is None:
            raise RuntimeError("this Memory was closed (fix: open a new Memory)")
        return self._ledger

    # -- add -------------------------------------------------------------------------------------------------------
    def add(self, messages: Any, *, user_id: Any = None, agent_id: Any = None, run_id: Any = None,
            metadata: dict[str, Any] | None = None, infer: bool = True, memory_type: Any = None, prompt: Any = None,
            timestamp: Any = None, expiration_date: Any = None) -> dict[str, list[dict[str, Any]]]:
        """Add memories from ``messages`` (a string, a ``{"role", "content"[, "name"]}`` dict, or a list of them).

        ``infer=True``: each user message is remembered (:meth:`MemoryLedger.remember`: slot resolution decides
        new, add, supersede, correct, retire, reaffirm or conflict); other roles are not memories about the user
        and are skipped. ``infer=False``: each message but system ones is stored as given, as a memory of its own
        (an assistant's or tool's with source ``agent_inference``), all in one save. ``agent_id`` / ``run_id`` are
        recorded as the facts' actor / session id (``agent_id`` with no user: the agent's own memories,
        memledger/agent_space.py); ``metadata`` is kept with the memory.

        Returns ``{"results": [...]}``, one entry per memory touched: ``{"id", "memory", "event"}`` with event ADD
        (a new memory; also a conflict, kept beside the memory it may replace, which the ledger marks contested),
        UPDATE (a supersede, correction or cessation; plus ``previous_memory``), DELETE (a memory the statement
        closed, as "I lost my job" closes the employer) or NONE (nothing changed: said before, recorded as earlier
        history, or quarantined by the hygiene checks); with ``infer=False`` also ``actor_id`` (the message's
        name) and ``role``.

        Raises:
            BadInput: naming the argument (``user_id``, ``messages[1].content``, ``metadata``, ...); nothing is
                written. ``memory_type``, ``prompt``, ``timestamp`` and ``expiration_date`` are refused (no LLM;
                see docs/interfaces.md).
        """
        for name, value in (("memory_type", memory_type), ("prompt", prompt), ("timestamp", timestamp),
                            ("expiration_date", expiration_date)):
            if value is not None:
                raise BadInput(name, "is not supported by memledger.compat.mem0", _NOT_SUPPORTED[name])
        user = entity_id(user_id, "user_id")
        agent, run = entity_id(agent_id, "agent_id"), entity_id(run_id, "run_id")
        user = require_user(user, agent, run)
        meta = check_metadata(metadata)
        if not isinstance(infer, bool):
            raise BadInput("infer", f"is a {type(infer).__name__}", "pass True (remember) or False (store as given)")
        msgs = normalise_messages(messages)
        with self._on(user):
            if infer:
                return {"results": self._add_inferred(user, agent, run, meta, msgs)}
            return {"results": self._add_raw(user, agent, run, meta, msgs)}

    def _add_inferred(self, user: str, agent: str | None, run: str | None, meta: dict[str, Any] | None,
                      msgs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        from ..remember import remember
        from ..requests import RememberRequest

        current = {k: read_value(f.value, f.text)[0] for k, f in self._profile(user).facts.items()}
        value_of = (lambda text: stored_value(text, meta, None)) if meta else None
        results: list[dict[str, Any]] = []
        for m in msgs:
            if m["role"] != "user":
                continue
            # one statement at a time, as mem0 distils a message into facts: "I love iced americano and I live in
            # Lisbon" kept whole under the drink would lose Lisbon when the drink changes
            for said in statements(m["content"]):
                try:
                    receipt = remember(self._ml, RememberRequest(user_id=user, text=said, actor=agent, session_id=run),
                                       value_of=value_of)
                except BadInput as exc:
                    raise rename_fields(exc, {"text": f"{m['where']}.content", "actor": "agent_id",
                                              "session_id": "run_id", "value": "metadata"}) from None
                for i, r in enumerate([receipt, *receipt.extra]):
                    entry = _event(user, r, said if i == 0 else None, current, main=i == 0)
                    if entry is not None:
                        results.append(entry)
        return results

    def _add_raw(self, user: str, agent: str | None, run: str | None, meta: dict[str, Any] | None,
                 msgs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        kept = [m for m in msgs if m["role"] != "system"]
        commands = [{"op": "assert", "user_id": user, "key": "memory.r" + secrets.token_hex(6),
                     "value": stored_value(m["content"], meta, m["name"]), "text": m["content"],
                     "source": "user_statement" if m["role"] == "user" else "agent_inference",
                     "actor": agent, "session_id": run} for m in kept]
        if not commands:
            return []
        try:
            receipts = self._ml.record([{k: v for k, v in c.items() if v is not None} for c in commands])
        except BadInput as exc:
            names = {}
            for i, m in enumerate(kept):
                names.update({f"commands[{i}].text": f"{m['where']}.content", f"commands[{i}].actor": "agent_id",
                              f"commands[{i}].session_id": "run_id", f"commands[{i}].value": "metadata"})
            raise rename_fields(exc, names) from None
        return [{"id": memory_id(user, r.key), "memory": m["content"],
                 "event": "ADD" if r.effect == "new" else "NONE", "actor_id": m["name"], "role": m["role"]}
                for r, m in zip(receipts, kept)]

    # -- reads -----------------------------------------------------------------------------------------------------
    def _profile(self, user: str) -> Any:
        return self._ml.profile(user, **self._read_args)

    def _rows(self, user: str, key: str | None = None) -> dict[str, list[dict[str, Any]]]:
        """The ``history_versions`` rows of the user's facts (or one), by key, in log order: ids, effects, times,
        actor, session and label, never content (nothing here needs the sensitivity gate)."""
        from ledger.timeutil import from_micros

        store = self._ml
        cols = ("key", "version", "event_id", "effect", "status", "recorded_at", "observed_at", "actor", "session_id",
                "sensitivity")
        where, params = "user_id = ?", [user]
        if key is not None:
            where, params = where + " AND key = ?", [user, key]
        store.before_read(None, 10.0)
        with store.db.read() as cur:
            cur.execute(f"SELECT {', '.join(cols)} FROM {store.history_projection.table('versions')} "
                        f"WHERE {where} ORDER BY position", params)
            fetched = cur.fetchall()
        out: dict[str, list[dict[str, Any]]] = {}
        for row in fetched:
            r = dict(zip(cols, row))
            r["recorded_at"] = from_micros(r["recorded_at"])
            r["observed_at"] = from_micros(r["observed_at"]) if r["observed_at"] is not None else None
            out.setdefault(r["key"], []).append(r)
        return out

    def _items(self, user: str, keys: list[str] | None = None) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
        """``{key: (mem0 item without score, filter payload)}`` of the user's current memories (all, or ``keys``);
        a memory whose label the reads were not granted is left out."""
        facts = self._profile(user).facts
        rows = self._rows(user, keys[0] if keys is not None and len(keys) == 1 else None)
        out = {}
        for key in (keys if keys is not None else list(facts)):
            f = facts.get(key)
            if f is None or f.withheld is not None:
                continue
            memory, meta, actor_id = read_value(f.value, f.text)
            life = walk(rows.get(key, []))[1]
            out[key] = (item(memory_id(user, key), user, memory or "", meta, life, actor_id, f.recorded_at),
                        payload(user, life, meta, actor_id))
        return out

    def _read_scope(self, filters: Any, user_id: Any, agent_id: Any, run_id: Any
                    ) -> tuple[str, str | None, str | None, dict[str, Any]]:
        """(user, agent, run, metadata filters) of a search or get_all: the scope from ``filters`` (mem0 2.x) or
        the arguments (mem0 1.x), which must agree. Raises BadInput."""
        if filters is None:
            filters = {}
        if not isinstance(filters, dict):
            raise BadInput("filters", f"is a {type(filters).__name__}", "pass a dict such as {'user_id': 'alice'}")
        rest = {k: v for k, v in filters.items() if k not in SCOPE_KEYS}
        scope = {}
        for name, arg in (("user_id", user_id), ("agent_id", agent_id), ("run_id", run_id)):
            if filters.get(name) == "*":
                # mem0's "any value": an agent's or run's memories, whichever; never every user (reads stay in one)
                if name == "user_id":
                    raise BadInput("filters.user_id", "'*' would read every user's memories",
                                   "name the user: a read never crosses users")
                if entity_id(arg, name) is not None:
                    raise BadInput(name, f"is given with filters[{name!r}] = '*'", "give it once")
                scope[name] = ANY
                continue
            in_filter = entity_id(filters[name], f"filters.{name}") if name in filters else None
            given = entity_id(arg, name)
            if in_filter is not None and given is not None and in_filter != given:
                raise BadInput(name, f"{given!r} differs from filters[{name!r}] = {in_filter!r}", "give it once")
            scope[name] = given if given is not None else in_filter
        check_filters(rest)
        user = require_user(scope["user_id"], scope["agent_id"], scope["run_id"])
        return user, scope["agent_id"], scope["run_id"], rest

    @staticmethod
    def _keep(pay: dict[str, Any], agent: str | None, run: str | None, rest: dict[str, Any]) -> bool:
        for want, have in ((agent, pay.get("agent_id")), (run, pay.get("run_id"))):
            if want is not None and (have is None if want == ANY else have != want):
                return False
        return matches(pay, rest)

    def get(self, memory_id: str) -> dict[str, Any] | None:
        """The memory ``memory_id`` as mem0 returns it (``id, memory, hash, metadata, score: None, created_at,
        updated_at, user_id`` and ``agent_id``/``run_id``/``actor_id`` when set), or None when it has no current
        memory (deleted, never added, or labelled sensitive and not granted). Raises BadInput for a malformed id."""
        user, key = parse_memory_id(memory_id)
        with self._on(user):
            found = self._items(user, [key]).get(key)
        if found is None:
            return None
        it = dict(found[0])
        return {**{k: it[k] for k in ("id", "memory", "hash", "metadata")}, "score": None,
                **{k: v for k, v in it.items() if k not in ("id", "memory", "hash", "metadata")}}

    def get_all(self, *, filters: dict[str, Any] | None = None, top_k: int = 20, user_id: Any = None,
                agent_id: Any = None, run_id: Any = None, limit: int | None = None,
                show_expired: bool = False) -> dict[str, list[dict[str, Any]]]:
        """The user's current memories, most recently updated first, at most ``top_k`` (mem0's default 20):
        ``{"results": [{id, memory, hash, metadata, created_at, updated_at, user_id, ...}]}``.

        The scope is ``filters={"user_id": ..., "agent_id": ..., "run_id": ...}`` (mem0 2.x) or the same as
        arguments (mem0 1.x; ``limit`` is 1.x's ``top_k``); user_id is required, or agent_id alone for that agent's own
        memories. Other ``filters`` keys filter on
        metadata with mem0's operators (:func:`memledger.compat.mem0_shapes.matches`). ``show_expired`` is accepted
        and changes nothing (no memory expires here). Raises BadInput.
        """
        user, agent, run, rest = self._read_scope(filters, user_id, agent_id, run_id)
        k = _top_k(top_k if limit is None else limit, "top_k" if limit is None else "limit")
        with self._on(user):
            found = [it for it, pay in self._items(user).values() if self._keep(pay, agent, run, rest)]
        found.sort(key=lambda it: (it["updated_at"] or "", it["id"]), reverse=True)
        return {"results": found[:k]}

    def search(self, query: str, *, top_k: int = 20, filters: dict[str, Any] | None = None,
               threshold: float | None = 0.1, user_id: Any = None, agent_id: Any = None, run_id: Any = None,
               limit: int | None = None, rerank: bool = False, explain: bool = False,
               show_expired: bool = False) -> dict[str, list[dict[str, Any]]]:
        """The user's current memories most relevant to ``query``, best first: ``{"results": [{id, memory, hash,
        metadata, score, created_at, updated_at, user_id, ...}]}``.

        ``score`` is the ledger's absolute relevance (0..1, below 0.3 a weak match; docs/retrieval.md);
        ``threshold`` drops hits below it (mem0's default 0.1; None keeps all). Scope and ``filters`` as for
        :meth:`get_all`. ``rerank`` is accepted and does nothing (no reranker); ``explain=True`` adds
        ``score_details`` (the ledger's score parts); ``show_expired`` changes nothing. Raises BadInput naming the
        argument.
        """
        user, agent, run, rest = self._read_scope(filters, user_id, agent_id, run_id)
        k = _top_k(top_k if limit is None else limit, "top_k" if limit is None else "limit")
        if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, (int, float))
                                      or not 0 <= threshold <= 1):
            raise BadInput("threshold", f"{threshold!r} is not a number from 0 to 1", "e.g. threshold=0.3")
        if not isinstance(query, str) or not query.strip():
            raise BadInput("query", "is empty" if isinstance(query, str) else f"is a {type(query).__name__}",
                           "give the text to search for, e.g. 'what does the user drink?'")
        if k == 0:
            return {"results": []}
        from ..search import MAX_K

        ask = min(max(k * 4, 60), MAX_K) if (agent or run or rest) else k
        with self._on(user):
            hits = self._ml.search(user, query.strip(), ask, min_score=threshold, **self._read_args)
            rows = self._rows(user)
        results, seen = [], set()
        for h in hits:
            if h.kind != "fact" or h.key in seen:
                continue
            seen.add(h.key)
            memory, meta, actor_id = read_value(h.value, h.text)
            life = walk(rows.get(h.key, []))[1]
            if not self._keep(payload(user, life, meta, actor_id), agent, run, rest):
                continue
            it = item(memory_id(user, h.key), user, memory or "", meta, life, actor_id, h.recorded_at, score=h.score)
            if explain:
                it["score_details"] = h.parts.model_dump(mode="json")
            results.append(it)
            if len(results) == k:
                break
        return {"results": results}

    def history(self, memory_id: str) -> list[dict[str, Any]]:
        """The memory's changes in log order, as mem0's history rows: ``id`` (the event), ``memory_id``,
        ``old_memory``, ``new_memory``, ``event`` (ADD, UPDATE, DELETE), ``created_at`` (when this life of the
        memory began), ``updated_at`` (when this change was recorded), ``is_deleted``, ``actor_id``, ``role``
        (None). Reaffirmations and quarantined statements changed nothing and are not listed (``ledger.history``
        has every event); a version labelled sensitive and not granted shows None as its memory. ``[]`` for an id
        with no history. Raises BadInput for a malformed id."""
        user, key = parse_memory_id(memory_id)
        with self._on(user):
            rows = self._ml.history(user, key, **self._read_args)
            ev = self._rows(user, key).get(key, [])
        texts, names = {}, {}
        for r in rows:
            if r.withheld is None:
                texts[r.version], _, names[r.version] = read_value(r.value, r.text)
        return walk(ev, memory_id, texts, names)[0]

    # -- changes ---------------------------------------------------------------------------------------------------
    def _current(self, memory_id: str, user: str, key: str, verb: str) -> tuple[Any, Life | None]:
        fact = self._profile(user).facts.get(key)
        if fact is None:
            raise BadInput("memory_id", f"{memory_id[:80]!r} names no current memory (deleted, or never added)",
                           f"get_all lists the current memories and their ids; nothing to {verb}")
        return fact, walk(self._rows(user, key).get(key, []))[1]

    def update(self, memory_id: str, text: str | None = None, metadata: dict[str, Any] | None = None, *,
               data: str | None = None, expiration_date: Any = None) -> dict[str, str]:
        """Change a memory: a new version of the same fact (a change of mind, a supersede), so ``history`` keeps the
        old text. ``text`` (mem0 2.x; ``data`` is its older name) replaces the memory; ``metadata`` is merged into
        its metadata (identity keys dropped, as mem0 does). The memory keeps its id, agent_id, run_id and
        sensitivity label. The same text and metadata again is a reaffirmation (no new version).

        Returns ``{"message": "Memory updated successfully!"}``. Raises BadInput: a malformed id or one with no
        current memory, neither text nor metadata, an empty text, an ``expiration_date`` (nothing written)."""
        if expiration_date is not None:
            raise BadInput("expiration_date", "is not supported by memledger.compat.mem0",
                           _NOT_SUPPORTED["expiration_date"])
        if text is not None and data is not None and text != data:
            raise BadInput("data", "is given together with text, differently", "give the new text once, as text")
        new_text = text if text is not None else data
        if new_text is None and metadata is None:
            raise BadInput("text", "is missing", "give the memory's new text (or metadata to merge into it)")
        if new_text is not None:
            new_text = check_text_arg(new_text, "text" if text is not None else "data")
        meta = check_metadata(metadata)
        user, key = parse_memory_id(memory_id)
        with self._on(user):
            fact, life = self._current(memory_id, user, key, "update")
            old_text, old_meta, actor_id = read_value(fact.value, fact.text)
            if fact.withheld is not None and new_text is None:
                raise BadInput("text", "is missing and the memory is withheld (its label was not granted)",
                               "give the new text, or open Memory with allow_sensitive naming the label")
            merged = {**(old_meta or {}), **(meta or {})} if meta is not None else old_meta
            final = new_text if new_text is not None else old_text
            self._ml.assert_fact(user, key, stored_value(final, merged or None, actor_id), text=final,
                                     actor=life.agent_id if life else None, session_id=life.run_id if life else None,
                                     sensitivity=life.sensitivity if life else None, reason=REASON.format("update"))
        return {"message": "Memory updated successfully!"}

    def delete(self, memory_id: str) -> dict[str, str]:
        """Delete a memory: a retraction (the ledger's history keeps it; ``history`` ends with a DELETE row).
        Returns ``{"message": "Memory deleted successfully!"}``. Raises BadInput for a malformed id or one with no
        current memory (as mem0 raises ValueError for an unknown id)."""
        user, key = parse_memory_id(memory_id)
        with self._on(user):
            self._current(memory_id, user, key, "delete")
            self._ml.retract_fact(user, key, reason=REASON.format("delete"))
        return {"message": "Memory deleted successfully!"}

    def delete_all(self, user_id: Any = None, agent_id: Any = None, run_id: Any = None) -> dict[str, str]:
        """Delete every current memory of ``user_id`` (only those recorded with ``agent_id`` / ``run_id`` when
        given), memories labelled sensitive included: retractions, 500 per save (history keeps them; to destroy a
        user's data use ``ledger.erase``). Returns ``{"message": "Memories deleted successfully!"}``. Raises
        BadInput when user_id is missing (``agent_id`` alone: the agent's own memories)."""
        user = entity_id(user_id, "user_id")
        agent, run = entity_id(agent_id, "agent_id"), entity_id(run_id, "run_id")
        user = require_user(user, agent, run)
        with self._on(user):
            rows = self._rows(user)
            keys = []
            for key in sorted(self._ml.profile(user).facts):  # withheld ones too: no content is read
                life = walk(rows.get(key, []))[1]
                if agent is not None and (life is None or life.agent_id != agent):
                    continue
                if run is not None and (life is None or life.run_id != run):
                    continue
                keys.append(key)
            commands = [{"op": "retract", "user_id": user, "key": k, "reason": REASON.format("delete_all")}
                        for k in keys]
            for i in range(0, len(commands), DELETE_BATCH):
                self._ml.record(commands[i:i + DELETE_BATCH])
        return {"message": "Memories deleted successfully!"}

    def reset(self) -> None:
        """Empty the store, as mem0's reset does -- only when this Memory created it.

        Why: a ledger keeps everything it was told and is usually shared (other agents, the CLI, the HTTP API); its
        only deletion is erasure, which is irreversible and leaves an erased user unable to be written again, so a
        mem0 script's routine ``reset()`` must never wipe a store someone else wrote. A store this object created
        (the home directory had no ``events.db``, or the PostgreSQL schema did not exist, when it was opened) is
        dropped whole -- the store's files (anything that was in the home directory before stays), or the schema --
        and opened again, empty. Any other store raises :class:`ResetRefused` (nothing is changed): retract one
        user's memories with ``delete_all(user_id=...)``, or destroy them with ``ledger.erase(user_id)``.
        """
        with self._lock:
            if not self._created or not self._owned:
                raise ResetRefused("reset: this store was not created by this Memory, so it is not emptied (other "
                                   "agents or tools may use it) (fix: delete_all(user_id=...) retracts a user's "
                                   "memories, ledger.erase(user_id) destroys them; or open a new store)")
            from ..api import MemoryLedger

            self._ml.close()
            self._ledger = None
            self._resolved.backend.drop_created(self._before)
            self._ledger = MemoryLedger(**self._store_args)  # type: ignore[arg-type]

    def close(self) -> None:
        """Close the store (unless it was passed in as ``ledger``). Idempotent."""
        with self._lock:
            if self._owned and self._ledger is not None:
                self._ledger.close()
                self._ledger = None

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _top_k(k: Any, name: str) -> int:
    from ..search import MAX_K

    if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= MAX_K:
        raise BadInput(name, f"{k!r} is not a whole number from 0 to {MAX_K}", f"e.g. {name}=10")
    return k


def _event(user: str, r: Any, said: str | None, current: dict[str, str | None], *, main: bool) -> dict[str, Any] | None:
    """The mem0 add-result entry of one receipt of a remember, or None (an extra event that changed no memory: a
    contest). ``current`` (key -> memory) is kept up to date."""
    mid, prev = memory_id(user, r.key), current.get(r.key)
    if r.effect == "new" or (r.effect in ("supersede", "correct") and r.key not in current):
        event, memory = "ADD", said
    elif r.effect in ("supersede", "correct"):
        event, memory = "UPDATE", said
    elif r.effect == "retract":
        event, memory = "DELETE", prev
    elif main:  # reaffirm, backfill, quarantine, contest: the statement changed no memory
        return {"id": mid, "memory": said, "event": "NONE"}
    else:
        return None
    if event == "DELETE":
        current.pop(r.key, None)
        return {"id": mid, "memory": memory, "event": event}
    current[r.key] = memory
    entry = {"id": mid, "memory": memory, "event": event}
    if event == "UPDATE":
        entry["previous_memory"] = prev
    return entry


class AsyncMemory:
    """mem0's ``AsyncMemory``: :class:`Memory`'s methods as coroutines (``await m.add(...)``, ``await m.search(...)``),
    each run in a worker thread, one at a time (memledger/aio.py's ``Serialised``), so any number of tasks may share
    one. Constructed as :class:`Memory` (synchronously, as mem0's is); ``close()`` is synchronous as in mem0, and
    ``async with`` closes it too."""

    def __init__(self, config: Any = None, **kwargs: Any) -> None:
        from ..aio import Serialised

        self._memory = Memory(config, **kwargs)
        self._runner = Serialised(lambda: self._memory)

    @classmethod
    def from_config(cls, config_dict: dict[str, Any]) -> AsyncMemory:
        """As :meth:`Memory.from_config`."""
        return cls(config_dict)

    @property
    def memory(self) -> Memory:
        """The synchronous :class:`Memory` underneath."""
        return self._memory

    def close(self) -> None:
        """Close the store once no call is running (:meth:`Memory.close`); later calls raise RuntimeError."""
        with self._runner._thread_lock:
            self._memory.close()
            self._runner._closed = True

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._runner.close(lambda memory: memory.close())


#: the methods AsyncMemory has as coroutines
ASYNC_METHODS = ("add", "get", "get_all", "search", "update", "delete", "delete_all", "history", "reset")


def _install_async() -> None:
    from ..aio import async_twin

    for name in ASYNC_METHODS:
        twin = async_twin(Memory, name)
        twin.__qualname__ = f"AsyncMemory.{name}"
        setattr(AsyncMemory, name, twin)


_install_async()
