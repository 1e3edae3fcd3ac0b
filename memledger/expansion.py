"""Recall that follows the links: ``search(..., expand=N)`` (docs/relations.md).

The people a query speaks of are the seeds: by a name or alias it contains ("where did Anna's husband grow up?"),
or by the tie they hold towards the user ("my sister", 我老婆). From each seed the relations true at the search's
time (as believed at its ``as_of``) are walked, at most N hops (1-3), never through the user (the sister's husband is
no relation of the wife's) and never through a relation whose label the read does not allow (doctor_of:
``health``). For each person, place or organisation reached, nearest first and at most :data:`MAX_REACHED`, the
query is asked again with their name added; a hit that is about them (in their slots, ``family.sister.*``, or
naming them) and that the plain search did not return joins the others with that score times :data:`DECAY` per hop
(a seed named by its tie counts as one hop), and with ``path``, the walk that brought it ("sister Anna → husband
Mark"). The plain hits keep their scores; all are ranked by score and the best ``k`` returned, so an added hit may
outrank a weak plain one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ledger.mentions import Known, fold, named_in, names_any, slugs
from ledger.relations import SELF
from ledger.timeutil import now_utc, parse_instant, to_micros

from .reads import people
from .requests import MAX_EXPAND, check_expand  # noqa: F401 (re-exported)


#: a hit found through a person counts this much less per hop than one the query found itself
DECAY = 0.9
#: how many people reached are searched for (nearest first)
MAX_REACHED = 8


def expand(store: Any, user_id: str, query: str, hits: list[Any], k: int, hops: int, as_of: Any,
           allowed: set[str], ask: Callable[[str], list[Any]]) -> list[Any]:
    """``hits`` (the plain search of ``user_id``) with the memories of the people the query leads to, best ``k``
    (see the module docstring). ``allowed``: the sensitivity labels the read allows; ``ask(query)`` runs the same
    search for another query. A query naming nobody linked returns ``hits`` unchanged."""
    known = people(store, user_id)
    seeds = named_in(query, known) if known else []
    if not seeds:
        return hits
    reached = _reach(store, user_id, seeds, hops, as_of, allowed)
    have = {h.doc_id for h in hits}
    slug_of = slugs(known)
    by_id = {k.entity_id: k for k in known}
    extra: dict[str, Any] = {}
    for eid, name, hop, path in reached[:MAX_REACHED]:
        person = by_id.get(eid)
        words = {fold(name)} | (person.names() if person else set())
        prefix = f"family.{slug_of[eid]}." if eid in slug_of else None
        for h in ask(f"{query} {name}"):
            if h.doc_id in have or not _about(h, words, prefix):
                continue
            score = round(h.score * DECAY ** max(hop, 1), 4)
            if h.doc_id not in extra or extra[h.doc_id].score < score:
                extra[h.doc_id] = h.model_copy(update={"score": score, "path": path})
    return sorted([*hits, *extra.values()], key=lambda h: -h.score)[:k]


def _about(hit: Any, words: set[str], prefix: str | None) -> bool:
    """Whether a memory found for a person is about them: it is in their slots, or it names them."""
    if prefix is not None and (hit.key or "").startswith(prefix):
        return True
    return names_any(fold(hit.text or ""), words)


def _reach(store: Any, user_id: str, seeds: list[tuple[Known, bool]], hops: int, as_of: Any,
           allowed: set[str]) -> list[tuple[str, str, int, str]]:
    """(entity id, name, hops, path) of each entity the walk reaches, nearest first, each once: a seed the query
    named only by its role at hop 0 (its name is not in the query yet), then those 1..``hops`` away. The walk never
    passes through the user (from the sister to the wife is no relation of theirs)."""
    from projections.relations import walk

    as_of_us = None if as_of is None else to_micros(parse_instant(as_of, "as_of"))
    valid_us = to_micros(now_utc()) if as_of_us is None else as_of_us
    proj = store.relations_projection
    with store.db.read() as cur:
        edges = proj.edges(cur, user_id, valid_us, as_of_us)
        names = {r["entity_id"]: r["name"] for r in proj.entities(cur, user_id)}
    for e in edges:
        label = e["sensitivity"]
        e["withheld"] = label if label is not None and label not in allowed else None
    ties = [e for e in edges if e["subject"] == SELF]
    hidden = {e["object"] for e in ties if e["withheld"]} - {e["object"] for e in ties if not e["withheld"]}
    edges = [e for e in edges if SELF not in (e["subject"], e["object"])]
    out: list[tuple[str, str, int, str]] = []
    seen: set[str] = set()
    for k, by_role in seeds:
        if k.entity_id in hidden:
            continue  # "my doctor": reached only through a labelled tie the read does not allow
        label = f"{k.current[0]} {k.name}" if by_role and k.current else k.name
        if by_role and k.entity_id not in seen:
            out.append((k.entity_id, k.name, 0, label))
        seen.add(k.entity_id)
        for hop, path, e in walk(edges, k.entity_id, hops):
            far = path[-1]
            if e["withheld"] or far in seen or far == SELF or far not in names:
                continue
            seen.add(far)
            out.append((far, names[far], hop, _path(label, path, edges, names)))
    return sorted(out, key=lambda t: t[2])


def _path(label: str, nodes: list[str], edges: list[dict[str, Any]], names: dict[str, str]) -> str:
    """"sister Anna → husband Mark": each step the relation and the name reached; a step against the relation's
    direction reads "← lives_in Anna" (Berlin is where Anna lives)."""
    steps = [label]
    for a, b in zip(nodes, nodes[1:]):
        fwd = next((e for e in edges if e["subject"] == a and e["object"] == b), None)
        back = None if fwd else next((e for e in edges if e["subject"] == b and e["object"] == a), None)
        e = fwd or back
        rtype = e["relation_type"] if e else "?"
        steps.append(f"→ {rtype} {names.get(b, b)}" if fwd else f"← {rtype} {names.get(b, b)}")
    return " ".join(steps)


__all__ = ["DECAY", "MAX_EXPAND", "MAX_REACHED", "check_expand", "expand"]
