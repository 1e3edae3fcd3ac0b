"""A LangGraph store on the ledger: ``MemledgerStore(ledger)`` is a ``langgraph.store.base.BaseStore``
(langgraph-checkpoint 4.x; ``pip install 'memledger[langgraph]'``).

Mapping (docs/interfaces.md):

- A namespace is ``(user_id, *prefix)``: its first label is the user (the isolation boundary), the rest a path.
  ``(user_id, *prefix)`` + ``key`` is one fact of that user with the ledger key ``lg.<label>...<label>.<key>``, each
  label and the key escaped by :func:`escape` (reversible: :func:`unescape`, :func:`ledger_key`,
  :func:`item_address`). The store sees only its own ``lg.`` facts.
- ``put`` asserts the value (a dict) as the fact's value (a supersede, or a reaffirm of the same value, by the
  ledger's policy), with the dict's string leaves as the fact's sentence for search; ``put(value=None)`` and
  ``delete`` retract it (history keeps it). All puts of one ``batch`` are one save (all or nothing); as in
  LangGraph's own stores, the reads of a batch see the state before its puts, and the last put of a key wins.
- ``get`` and ``search`` read the profile (current beliefs); ``search(query=...)`` is the ledger's hybrid search,
  with its ``score``; ``filter`` compares value fields (``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``).
  Without a query, items come sorted by namespace and key.
- ``created_at`` is when the item was first recorded (since its last deletion), ``updated_at`` when its current
  version was (LangGraph's ``InMemoryStore`` resets ``created_at`` on every put, langmem #180).
- An item whose fact carries a sensitivity label (health, finance, ...) is returned by ``get`` and ``search`` with
  the value ``{"withheld": LABEL}`` unless the store was opened with ``allow_sensitive`` naming the label (and a
  ``purpose``); each labelled item returned with its value is recorded as a disclosure, as every read of the
  ledger does (docs/erasure.md, "Labels gate every read"). ``filter`` sees only what is returned.
- ``list_namespaces`` lists the namespaces that hold a current item, per user.
- Scopes (memledger/scopes.py): a namespace ``(user_id, "agents", agent, ...)`` records its items as that agent's,
  ``(user_id, "runs", run, ...)`` as that run's and ``(user_id, "agents", agent, "runs", run, ...)`` as both (the
  facts' actor and session_id), so ``ledger.search(user, q, agent_id=agent)`` and every other read find them by
  scope; the namespace still addresses the item as any other (:func:`namespace_scope`).
- A ``search`` or ``list_namespaces`` whose prefix names no user is refused (``ValueError``) unless the store
  was opened with ``cross_user=True``.

Escaping: ``a-z 0-9 -`` stand for themselves; every other character (capitals and ``_`` included) becomes ``_``
and two lower-case hex digits per UTF-8 byte (``.`` -> ``_2e``, ``D`` -> ``_44``, ``é`` -> ``_c3_a9``); the empty
string is ``_``. Escaped keys are lowercase, as the ledger wants new keys, and at most 200 characters: a longer
escaped address is refused (``BadInput``, a ``ValueError``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from langgraph.store.base import (BaseStore, GetOp, Item, ListNamespacesOp, MatchCondition, Op, PutOp, Result,
                                  SearchItem, SearchOp)

from ledger.errors import BadInput
from ledger.schemas import check_user_id

# the key mapping's public names are this module's too
from .lg_keys import (ROOT, _text_of, escape, item_address, ledger_key, namespace_scope,  # noqa: F401
                      unescape)

def _compare(item_value: Any, want: Any) -> bool:
    if isinstance(want, dict):
        if any(k.startswith("$") for k in want):
            return all(_operator(item_value, op, v) for op, v in want.items())
        return isinstance(item_value, dict) and all(_compare(item_value.get(k), v) for k, v in want.items())
    if isinstance(want, (list, tuple)):
        return (isinstance(item_value, (list, tuple)) and len(item_value) == len(want)
                and all(_compare(a, b) for a, b in zip(item_value, want)))
    return item_value == want


def _operator(value: Any, op: str, arg: Any) -> bool:
    if op == "$eq":
        return value == arg
    if op == "$ne":
        return value != arg
    if op in ("$gt", "$gte", "$lt", "$lte"):
        try:
            a, b = float(value), float(arg)
        except (TypeError, ValueError):
            return False
        return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]
    raise ValueError(f"Unsupported operator: {op}")


def _matches(condition: MatchCondition, ns: tuple[str, ...]) -> bool:
    path = condition.path
    if len(ns) < len(path):
        return False
    pairs = zip(ns, path) if condition.match_type == "prefix" else zip(reversed(ns), reversed(path))
    return all(p == "*" or a == p for a, p in pairs)


class MemledgerStore(BaseStore):
    """A LangGraph ``BaseStore`` whose items are facts of a :class:`~memledger.api.MemoryLedger`.

    Args:
        ledger: an opened MemoryLedger (the store does not close it).
        cross_user: allow searches and listings whose prefix names no user (all users).
        source: the provenance of the store's writes (default ``agent_inference``: the agent wrote it).
        allow_sensitive: sensitivity labels whose items ``get`` and ``search`` return with their value (others
            come back as ``{"withheld": LABEL}``); each one returned is recorded as a disclosure with ``purpose``.

    Raises:
        BadInput: a malformed ``allow_sensitive`` or ``purpose``.
    """

    supports_ttl = False

    def __init__(self, ledger: Any, *, cross_user: bool = False, source: str = "agent_inference",
                 allow_sensitive: Any = None, purpose: str | None = None) -> None:
        from ..sensitivity import check_grant

        self.ledger = ledger
        self.cross_user = cross_user
        self.source = source
        self.grant = check_grant(allow_sensitive, purpose)

    # -- reads -------------------------------------------------------------------------------------------------
    def _items(self, user_id: str, refs: dict[tuple[tuple[str, ...], str], tuple[str, int]] | None = None
               ) -> dict[tuple[tuple[str, ...], str], Item]:
        """Every current item of ``user_id``: (namespace, key) -> Item, a labelled one not granted holding
        ``{"withheld": LABEL}``. ``refs`` collects each item's ``(fact key, version)`` for :meth:`_shown`."""
        from ..reads import history, profile
        from ..sensitivity import disclose

        prof = profile(self.ledger, user_id)  # gated below, item by item (as the ledger's reads are)
        mine = {}
        for fact_key, f in prof.facts.items():
            addr = item_address(fact_key)
            if addr is not None and isinstance(f.value, dict):
                mine[fact_key] = (addr, f)
        if not mine:
            return {}
        created: dict[str, datetime] = {}
        # which labelled items are withheld (recorded later, for the items returned: _shown)
        withheld = disclose(self.ledger, user_id, [(fk, f.version) for fk, (_, f) in mine.items()], self.grant,
                            record=False)
        for row in history(self.ledger, user_id):  # log order: the first recording since the last retraction
            if row.key not in mine:
                continue
            if row.kind == "retracted":
                created.pop(row.key, None)
            elif row.key not in created and row.kind != "reaffirmed":
                created[row.key] = row.recorded_at
        out = {}
        for fact_key, ((prefix, key), f) in mine.items():
            ns = (user_id, *prefix)
            label = withheld.get((fact_key, f.version))
            out[(ns, key)] = Item(value={"withheld": label} if label else f.value, key=key, namespace=ns,
                                  created_at=created.get(fact_key, f.recorded_at), updated_at=f.recorded_at)
            if refs is not None:
                refs[(ns, key)] = (fact_key, f.version)
        return out

    def _shown(self, items: Iterable[Item], refs: dict[tuple[tuple[str, ...], str], tuple[str, int]]) -> None:
        """Record a disclosure for each labelled item returned with its value (per user, one save each)."""
        from ..sensitivity import disclose

        by_user: dict[str, list[tuple[str, int]]] = {}
        for it in items:
            ref = refs.get((tuple(it.namespace), it.key))
            if ref is not None:
                by_user.setdefault(it.namespace[0], []).append(ref)
        for user, pairs in by_user.items():
            disclose(self.ledger, user, pairs, self.grant)

    def _users(self) -> list[str]:
        table = self.ledger.profile_projection.table("facts")
        with self.ledger.db.read() as cur:
            cur.execute(f"SELECT DISTINCT user_id FROM {table} WHERE key LIKE 'lg.%' ORDER BY user_id")
            return [r[0] for r in cur.fetchall()]

    def _scope(self, prefix: tuple[str, ...], what: str) -> list[str]:
        if prefix and prefix[0] != "*":
            return [check_user_id(prefix[0], "namespace[0]")]
        if not self.cross_user:
            raise BadInput("namespace_prefix", f"this {what} names no user (its first label is the user_id)",
                           "start the namespace with the user id, or open MemledgerStore(..., cross_user=True)")
        return self._users()

    def _search(self, op: SearchOp, cache: dict[str, Any],
                refs: dict[tuple[tuple[str, ...], str], tuple[str, int]]) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        users = self._scope(prefix, "search")
        found: list[tuple[float | None, Item]] = []
        for user in users:
            items = cache[user] if user in cache else cache.setdefault(user, self._items(user, refs))
            def under(ns: tuple[str, ...]) -> bool:
                return len(ns) >= len(prefix) and all(p == "*" or a == p for a, p in zip(ns, prefix))

            def keep(it: Item) -> bool:
                return under(it.namespace) and (not op.filter or all(
                    _compare(it.value.get(k), v) for k, v in op.filter.items()))

            if op.query:
                by_key = {ledger_key(ns[1:], k): it for (ns, k), it in items.items()}
                hits = self.ledger.search(user, op.query, k=min(1000, max(len(by_key), 1)))
                seen = set()
                for h in hits:
                    it = by_key.get(h.key)
                    if it is not None and keep(it):
                        found.append((h.score, it))
                        seen.add(h.key)
                # items the index did not return (no shared word or vector neighbour) come last, unscored
                found += [(None, it) for fk, it in sorted(by_key.items()) if fk not in seen and keep(it)]
            else:
                found += [(None, it) for _, it in sorted(items.items()) if keep(it)]
        if op.query:
            found.sort(key=lambda x: -(x[0] if x[0] is not None else float("-inf")))
        page = found[op.offset:op.offset + op.limit]
        self._shown([it for _, it in page], refs)
        return [SearchItem(namespace=it.namespace, key=it.key, value=it.value, created_at=it.created_at,
                           updated_at=it.updated_at, score=score) for score, it in page]

    def _list(self, op: ListNamespacesOp, cache: dict[str, Any],
              refs: dict[tuple[tuple[str, ...], str], tuple[str, int]]) -> list[tuple[str, ...]]:
        conditions = tuple(op.match_conditions or ())
        prefixes = [c.path for c in conditions if c.match_type == "prefix"]
        named = next((p for p in prefixes if p and p[0] != "*"), ())
        users = self._scope(tuple(named), "listing")
        spaces = set()
        for user in users:
            for ns, _ in (cache[user] if user in cache else cache.setdefault(user, self._items(user, refs))):
                if all(_matches(c, ns) for c in conditions):
                    spaces.add(ns if op.max_depth is None else ns[:op.max_depth])
        return sorted(spaces)[op.offset:op.offset + op.limit]

    # -- BaseStore -----------------------------------------------------------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        results: list[Result] = [None] * len(ops)
        cache: dict[str, Any] = {}
        refs: dict[tuple[tuple[str, ...], str], tuple[str, int]] = {}
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for i, op in enumerate(ops):
            if isinstance(op, GetOp):
                user = check_user_id(op.namespace[0], "namespace[0]") if op.namespace else None
                if user is None:
                    raise BadInput("namespace", "is empty", "start the namespace with the user id")
                ledger_key(tuple(op.namespace[1:]), op.key)  # refuse what could never be stored
                items = cache[user] if user in cache else cache.setdefault(user, self._items(user, refs))
                item = items.get((tuple(op.namespace), op.key))
                if item is not None:
                    self._shown([item], refs)
                results[i] = item
            elif isinstance(op, SearchOp):
                results[i] = self._search(op, cache, refs)
            elif isinstance(op, ListNamespacesOp):
                results[i] = self._list(op, cache, refs)
            elif isinstance(op, PutOp):
                if not op.namespace:
                    raise BadInput("namespace", "is empty", "start the namespace with the user id")
                puts[(tuple(op.namespace), op.key)] = op
            else:
                raise ValueError(f"Unknown operation type: {type(op).__name__}")
        if puts:
            self._apply(puts)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        return await asyncio.get_running_loop().run_in_executor(None, self.batch, ops)

    def _apply(self, puts: dict[tuple[tuple[str, ...], str], PutOp]) -> None:
        commands: list[dict[str, Any]] = []
        current: dict[str, set[str]] = {}
        for (ns, key), op in puts.items():
            user = check_user_id(ns[0], "namespace[0]")
            fact_key = ledger_key(ns[1:], key)
            if op.value is None:
                if user not in current:
                    current[user] = set(self.ledger.profile(user).facts)
                if fact_key in current[user]:
                    commands.append({"op": "retract", "user_id": user, "key": fact_key, "source": self.source,
                                     "reason": "deleted through the LangGraph store", **namespace_scope(ns)})
            else:
                if not isinstance(op.value, dict):
                    raise BadInput("value", f"is a {type(op.value).__name__}, not a dict", "store dicts")
                commands.append({"op": "assert", "user_id": user, "key": fact_key, "value": dict(op.value),
                                 "text": _text_of(op.value), "source": self.source, **namespace_scope(ns)})
        if commands:
            self.ledger.record(commands)
