"""The sensitivity gate: a fact version carrying a sensitivity label (health, finance, ...) is shown by a read only
when the read asks for that label (``allow_sensitive``, with a ``purpose``), and each labelled version shown is
recorded as a disclosure (``SensitiveFactIncluded``, ledger/privacy.py; ``projections/disclosures.py`` keeps them
queryable, ``audit`` and ``export`` show them). docs/erasure.md, "Labels gate every read".

Two shapes of the one rule:

- search and context leave a withheld fact out (:func:`search_gated` and :func:`context_gated`, wrappers
  around the search and context capabilities);
- every other read keeps the item and withholds its content: :func:`gate` sets ``value``, ``text`` and what is read
  from them to None and ``withheld`` to the label (the timeline page's "withheld (health)"). The faces call the
  ledger's reads with the request's labels; a server also checks that the API key holds them.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from pydantic import BaseModel, Field

from ledger.privacy import Disclosure

from . import reads
from .requests import check_allow_sensitive, check_purpose  # noqa: F401 (re-exported: every read's grant check)
from .store import Store

# search, context, time travel and erasure are imported by the functions that use them: every read of the Python API
# passes through :func:`gate`, and a cold ``memledger profile`` must not pay for them (docs/performance.md).
if typing.TYPE_CHECKING:
    from . import search

__all__ = [
    "Grant",
    "add_disclosures",
    "check_allow_sensitive",
    "check_grant",
    "context_gated",
    "disclose",
    "gate",
    "record_disclosures",
    "search_gated",
]


# ----------------------------------------------------------------------------------------------------- sensitivity


def record_disclosures(ml: Store, user_id: str, included: list[tuple[str, int, str]], *,
                       session_id: str | None = None, purpose: str | None = None,
                       trace_id: str | None = None) -> list[int]:
    """Record one ``SensitiveFactIncluded`` per (key, version, label) let into context; one save for all.

    Returns the log positions. Called by context assembly whenever a labelled fact is included.
    """
    if not included:
        return []
    records = [Disclosure(user_id=user_id, key=k, version=v, sensitivity=label, session_id=session_id,
                          purpose=purpose, trace_id=trace_id) for k, v, label in included]
    saved = ml.write({user_id}, lambda: ml.recorded(ml.app.save(*records)))
    return [p for p, _ in saved if p is not None]


def sensitivity_labels(ml: Store, user_id: str) -> dict[tuple[str, int], str]:
    """``{(key, version): label}`` of every labelled version of ``user_id``'s facts (history projection)."""
    hp = ml.history_projection
    with ml.db.read() as cur:
        cur.execute(f"SELECT key, version, sensitivity FROM {hp.table('versions')} "
                    "WHERE user_id = ? AND sensitivity IS NOT NULL", (user_id,))
        return {(k, v): label for k, v, label in cur.fetchall()}


def withhold_related(ml: Store, receipt: Any) -> Any:
    """A ``remember`` receipt whose ``related`` memories carrying a sensitivity label show the label, not their text:
    the statement's caller asked for no disclosure, and a receipt is not a context ("I am HIV
    positive" is not listed as a related memory). The decision itself is unchanged; ``audit`` keeps the evidence."""
    related = getattr(receipt, "related", None)
    if not related:
        return receipt
    labels = sensitivity_labels(ml, receipt.user_id)
    if not any((r.key, r.version) in labels for r in related):
        return receipt
    shown = [r if (r.key, r.version) not in labels else
             r.model_copy(update={"text": f"(withheld: labelled {labels[(r.key, r.version)]})"}) for r in related]
    return receipt.model_copy(update={"related": shown})


# ------------------------------------------------------------------------------------------------------- the gate

#: what a withheld item loses (the fields of these names it has, when they may be None): the value, the sentence,
#: the reason (a ``remember`` reason quotes what it parsed from the sentence) and what is read from the sentence
WITHHELD_FIELDS = ("value", "text", "reason", "extracted_value", "attribute")
#: the purpose recorded with the disclosures of an export (the user's copy of everything held about them)
PURPOSE_EXPORT = "export (everything held about the user)"

T = TypeVar("T")


@dataclass(frozen=True)
class Grant:
    """What one read asks to see: the sensitivity ``labels`` it lets out (``allow_sensitive``), why (``purpose``)
    and the agent turn's ``trace_id``, both kept with each disclosure. ``Grant()`` asks for no label: every labelled
    version is withheld. Build one with :func:`check_grant`."""

    labels: frozenset[str] = frozenset()
    purpose: str | None = None
    trace_id: str | None = None


def check_grant(allow_sensitive: Any = None, purpose: Any = None, trace_id: str | None = None, *,
                field: str = "allow_sensitive", purpose_field: str = "purpose") -> Grant:
    """Validate what a read asks to see, before anything is read: ``allow_sensitive`` as
    :func:`check_allow_sensitive` (a list of labels, a comma-separated string, or None), ``purpose`` as
    :func:`check_purpose`. A :class:`Grant` is returned as it is.

    Raises:
        BadInput: naming ``field`` (or ``purpose_field``) and the fix.
    """
    if isinstance(allow_sensitive, Grant):
        return allow_sensitive
    return Grant(check_allow_sensitive(allow_sensitive, field), check_purpose(purpose, purpose_field), trace_id)


def disclose(ml: Store, user_id: str, versions: Iterable[tuple[str, int]], grant: Grant, *,
             record: bool = True) -> dict[tuple[str, int], str]:
    """The one decision every read takes: of the ``(key, version)`` pairs of ``user_id``'s facts a read is about to
    show, return those to withhold, ``{(key, version): label}`` (their label is not in ``grant.labels``), and
    record a disclosure (``SensitiveFactIncluded``, one save) for each labelled pair the grant lets out, with its
    purpose and trace. Unlabelled pairs are neither. ``record=False``: decide only (a read that returns part of
    what it decided on calls again, with what it returns)."""
    labels = sensitivity_labels(ml, user_id)
    if not labels:
        return {}
    withheld: dict[tuple[str, int], str] = {}
    shown: set[tuple[str, int, str]] = set()
    for kv in versions:
        label = labels.get(kv)
        if label is None:
            continue
        if label in grant.labels:
            shown.add((kv[0], kv[1], label))
        else:
            withheld[kv] = label
    if record:
        record_disclosures(ml, user_id, sorted(shown), purpose=grant.purpose, trace_id=grant.trace_id)
    return withheld


def _nullable(info: Any) -> bool:
    return info.annotation is Any or type(None) in typing.get_args(info.annotation)


def _walk(x: Any, key: str | None, visit: Callable[[BaseModel, str], BaseModel]) -> Any:
    """``x`` (a read model, or lists and dicts of them) with every gated item replaced by ``visit(item, key)``.

    A gated item is a model with a ``version`` and a ``withheld`` field (a profile's fact, a belief, a history row,
    an audit event, a due, scheduled or quarantined fact, a diff's event); its key is its own ``key`` field, else
    the key of the dict it sits under (``facts[KEY]``, ``added[KEY].before``). Values are data, never walked."""
    if isinstance(x, BaseModel):
        fields = type(x).model_fields
        own = getattr(x, "key", None) if "key" in fields else None
        k = own if isinstance(own, str) else key
        updates = {}
        for name in fields:
            if name in WITHHELD_FIELDS:
                continue
            v = getattr(x, name)
            if isinstance(v, (BaseModel, list, dict)):
                nv = _walk(v, k, visit)
                if nv is not v:
                    updates[name] = nv
        if updates:
            x = x.model_copy(update=updates)
        if "withheld" in fields and "version" in fields and k is not None:
            x = visit(x, k)
        return x
    if isinstance(x, list):
        items = [_walk(v, key, visit) for v in x]
        return x if all(a is b for a, b in zip(items, x)) else items
    if isinstance(x, dict):
        entries = {n: _walk(v, n if isinstance(n, str) else key, visit) for n, v in x.items()}
        return x if all(entries[n] is x[n] for n in x) else entries
    return x


def gate(ml: Store, user_id: str, result: T, grant: Grant | None = None) -> T:
    """``result`` (a read of ``user_id``'s facts) as the read may show it: each labelled version whose label
    ``grant`` does not ask for keeps its place, key, version, times and provenance, but its ``value``, ``text``,
    ``reason`` and what is read from the sentence become None and ``withheld`` names the label; each labelled
    version shown is recorded as a disclosure (:func:`disclose`). ``grant`` None asks for no label.

    Every read of the Python API that returns fact values goes through here (``profile``, ``history``,
    ``believed``, ``true_at``, ``diff``, ``audit``, ``due``, ``scheduled``, ``quarantine``, ``export``), so the
    CLI, HTTP, MCP and LangGraph faces, which call those, stay thin."""
    grant = grant or Grant()
    found: list[tuple[str, int]] = []

    def collect(item: Any, key: str) -> Any:
        found.append((key, item.version))
        return item

    _walk(result, None, collect)
    if not found:
        return result
    withheld = disclose(ml, user_id, found, grant)
    if not withheld:
        return result

    def hide(item: Any, key: str) -> Any:
        label = withheld.get((key, item.version))
        if label is None:
            return item
        fields = type(item).model_fields
        return item.model_copy(update={**{f: None for f in WITHHELD_FIELDS if f in fields and _nullable(fields[f])},
                                       "withheld": label})

    return _walk(result, None, hide)


def export_labels(ml: Store, user_id: str) -> frozenset[str]:
    """Every label among ``user_id``'s fact versions: the grant of a complete export."""
    return frozenset(sensitivity_labels(ml, user_id).values())


def search_gated(ml: Store, request: search.SearchRequest,
                 search_fn: Callable[..., list[search.SearchHit]] | None = None) -> list[search.SearchHit]:
    """A search (``search_fn``, default :func:`memledger.search.search`) under the same rule as context: a hit whose
    version carries a sensitivity label (health, finance, ...) is left out unless ``request.allow_sensitive`` names
    the label, and each labelled hit returned is recorded as a disclosure (``SensitiveFactIncluded`` with the
    request's ``purpose``/``trace_id``) on the user whose fact it is, so ``audit`` and ``export`` show it.

    The gate hands the search each user's labels (:func:`sensitivity_labels`), which leaves out what the request
    does not allow and asks for that many more hits so the page stays full, then records what came back.

    Raises:
        BadInput: what the search raises (the request was checked when it was built; nothing is recorded).
    """
    from . import search

    seen: dict[str, dict[tuple[str, int], str]] = {}

    def labels(user_id: str) -> dict[tuple[str, int], str]:
        seen[user_id] = sensitivity_labels(ml, user_id)
        return seen[user_id]

    hits = (search_fn or search.search)(ml, request, labels)
    for u, labelled in seen.items():
        included = sorted({(h.key, h.version, labelled[(h.key, h.version)]) for h in hits
                           if h.user_id == u and h.kind == "fact" and (h.key, h.version) in labelled})
        record_disclosures(ml, u, included, purpose=request.purpose, trace_id=request.trace_id)
    return hits


class _SensitivityView:
    """What context assembly (memledger/context.py) sees of a ledger when labels are filtered: ``profile`` and
    ``search`` leave out fact versions whose label is not allowed, and remember the labelled ones they let through.

    ``labels``: ``{(key, version): label}`` of every labelled version (:func:`sensitivity_labels`), so a profile as
    of a past instant (``base_profile``) is judged by the versions it shows."""

    def __init__(self, ml: Store, allow: frozenset[str], labels: dict[tuple[str, int], str],
                 base_profile: Any = None) -> None:
        self._ml = ml
        self._allow = allow
        self._labels = labels
        self._base_profile = base_profile or partial(reads.profile, ml)
        self.offered: dict[str, tuple[int, str, str]] = {}  # key -> (version, label, text) let through
        self.withheld: set[str] = set()

    def _keep(self, key: str | None, version: int | None, text: str | None) -> bool:
        label = self._labels.get((key, version)) if key is not None else None
        if label is None:
            return True
        if label not in self._allow:
            self.withheld.add(key)  # type: ignore[arg-type]
            return False
        self.offered[key] = (version, label, text or "")  # type: ignore[index,assignment]
        return True

    def profile(self, user_id: str, *args: Any, **kwargs: Any) -> Any:
        prof = self._base_profile(user_id, *args, **kwargs)
        facts = {k: f for k, f in prof.facts.items() if self._keep(k, f.version, f.text or f"{k}: {f.value}")}
        return prof.model_copy(update={"facts": facts})

    def search(self, user_id: str, query: str, *args: Any, **kwargs: Any) -> Any:
        if "as_of" not in kwargs:  # as context's own search: facts and earlier turns (memledger/context.py)
            kwargs.setdefault("within", "all")
        from . import search

        # context's own search: the user's memories only, never those of linked ids (memledger/context.py)
        hits = search.find(self._ml, user_id, query, *args, linked=False, **kwargs)
        items = list(getattr(hits, "hits", hits))

        def field(h: Any, name: str) -> Any:
            return h.get(name) if isinstance(h, dict) else getattr(h, name, None)

        return [h for h in items if self._keep(field(h, "key"), field(h, "version"), field(h, "text"))]


def context_gated(ml: Store, request: Any) -> Any:
    """Assemble the context ``request`` asks for (a :class:`~memledger.requests.ContextRequest`;
    memledger/context.py ``assemble``) leaving out every fact whose sensitivity label is not in
    ``request.allow_sensitive`` (unlabelled facts always go in), and record one ``SensitiveFactIncluded`` per
    labelled fact that made it into the text (after the token budget), with the request's ``purpose``/``trace_id``
    and the session.

    Raises:
        BadInput: what context assembly refuses (the request was checked when it was built).
    """
    from . import timetravel
    from .context import assemble

    ml.catch_up(deferred=False)  # memories come through ml.search, which catches the vectors up itself
    labels = sensitivity_labels(ml, request.user_id)
    base = None
    if request.as_of is not None:  # context --as-of: the profile as believed then, judged by its versions
        base = partial(timetravel.profile_as_of, ml, as_of=request.as_of, axis=request.axis, valid_at=request.now)
    elif request.now is not None:  # context --now: scheduled facts are judged at that instant
        base = partial(reads.profile, ml, now=request.now)
    view = _SensitivityView(ml, request.allow_sensitive, labels, base)
    ctx = assemble(ml, request, profile_fn=view.profile, search_fn=view.search)
    if view.offered:
        lines = [line for s in ctx.sections if s.name in ("profile", "memories") for line in s.lines]
        # A line is "- <text, relative dates annotated> (<date>, <source>)": the text's opening survives the
        # annotation (it is inserted after a relative phrase), so it identifies the fact's line.
        included = [(k, v, label) for k, (v, label, text) in sorted(view.offered.items())
                    if any(line.startswith("- " + text[:24]) for line in lines)]
        record_disclosures(ml, request.user_id, included, session_id=ctx.session_id, purpose=request.purpose,
                           trace_id=request.trace_id)
    return ctx


def _audit_models() -> tuple[type, type]:
    """``Audit``/``AuditEntry`` of memledger/timetravel.py with each entry's ``disclosures`` added (built once)."""
    global _AUDIT_MODELS
    if _AUDIT_MODELS is None:
        from .erasure import DisclosureRow
        from .timetravel import Audit, AuditEntry

        class AuditEntryWithDisclosures(AuditEntry):  # type: ignore[valid-type,misc]
            """An audit entry plus every time the fact was let into an agent's context (``SensitiveFactIncluded``,
            only for labelled facts), in log order, up to the audit's ``as_of``."""

            disclosures: list[DisclosureRow] = Field(default_factory=list)

        class AuditWithDisclosures(Audit):  # type: ignore[valid-type,misc]
            facts: dict[str, AuditEntryWithDisclosures]  # type: ignore[assignment]

        _AUDIT_MODELS = (AuditWithDisclosures, AuditEntryWithDisclosures)
    return _AUDIT_MODELS


_AUDIT_MODELS: tuple[type, type] | None = None


def add_disclosures(ml: Store, audit: Any) -> Any:
    """The audit (``memledger audit --json``) with, per fact, the disclosures of that fact recorded at or before
    the audit's ``as_of`` (system time)."""
    from ledger.timeutil import from_micros, to_micros

    from .erasure import DisclosureRow

    audit_cls, entry_cls = _audit_models()
    cut = None if audit.as_of is None else to_micros(audit.as_of)
    by_key: dict[str, list[DisclosureRow]] = {}
    with ml.db.read() as cur:
        for r in ml.disclosures_projection.rows(cur, audit.user_id):
            if cut is not None and r["recorded_at"] > cut:
                continue
            by_key.setdefault(r["key"], []).append(DisclosureRow(
                key=r["key"], version=r["version"], sensitivity=r["sensitivity"],
                recorded_at=from_micros(r["recorded_at"]), position=r["position"], session_id=r["session_id"],
                purpose=r["purpose"], trace_id=r["trace_id"]))
    facts = {k: entry_cls(**dict(e), disclosures=by_key.get(k, [])) for k, e in audit.facts.items()}
    return audit_cls(**{**dict(audit), "facts": facts})

