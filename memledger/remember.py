"""``remember``: a free-text statement lands in a slot. Orchestration only; the rules are in ledger/.

For one statement, checked already (a :class:`~memledger.requests.RememberRequest`: nothing is written on bad
input), take the user's remember lock (two ``remember`` calls for one user never open the same slot twice: a thread
lock in the process, plus a file lock in the home directory, or a PostgreSQL advisory lock), type it against the slot catalogue (ledger/slots.py), gather
candidates — the current facts of its slot (by key) and the best dense + lexical search hits (the CJK path for
Chinese) — decide with ledger/resolution.py, and record the decision in one save: the statement's event (its
``reason`` carries the evidence: rule, slot, candidates and scores, catalogue version, embedder, so ``audit``
answers "why"), plus, when needed, the retraction closing an older free-text key of the same slot or the contest
marking a candidate "to confirm". See docs/resolution.md.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Callable
from typing import Any

from ledger.domain import NON_USER_SOURCES
from ledger.resolution import ADJUDICABLE, Candidate, Resolution, resolve
from ledger.schemas import FactCommand, RelatedMemory, RememberReceipt, canonical_json, validate_command
from ledger.slots import CATALOGUE_VERSION, REGISTRY, KeyRegistry, linked_slot_keys

from . import linking, reads
from .locks import user_lock
from .requests import RememberRequest
from .store import Store

#: how many search hits are weighed besides the slot's own facts
CANDIDATES = 8
#: how many related candidates besides the target the evidence names
EVIDENCE_CANDIDATES = 10
#: search hits below this relevance are not reported as related
RELATED_FLOOR = 0.2

EFFECT_DECISION = {"new": "new", "supersede": "supersede", "backfill": "supersede", "reaffirm": "reaffirm",
                   "correct": "correct", "contest": "conflict", "retract": "retire"}


def _fingerprint(user_id: str, text: str, template: FactCommand) -> str:
    data = template.model_dump(mode="json", exclude={"idempotency_key", "key", "value", "op"})
    data["remember"] = True
    return canonical_json(data)


def _candidates(store: Store, user_id: str, text: str, slot_key: str | None,
                embedder: str | None = None) -> tuple[list[Candidate], dict]:
    """The slot's current facts (by key) and the best search hits; returns them and the profile rows by key."""
    from .search import search_caught_up

    rows: dict[str, dict[str, Any]] = {}
    cands: dict[str, Candidate] = {}
    with store.db.read() as cur:
        # the slot's own facts, and those of the slots a cessation there also ends (a lost job ends the employer)
        for sk in ((slot_key, *linked_slot_keys(slot_key)) if slot_key is not None else ()):
            for r in store.profile_projection.slot_rows(cur, user_id, sk):
                rows[r["key"]] = r
    for key, r in rows.items():
        if r["text"] is None:
            continue
        cands[key] = Candidate(key=key, version=r["version"], text=r["text"], source=r["source"], status=r["status"])
    if getattr(store, "vectors_projection", None) is not None:
        from .search import MAX_QUERY

        # a statement may be longer than a question: its beginning finds the candidates
        hits = search_caught_up(store, user_id, text[:MAX_QUERY], k=CANDIDATES)
        for h in hits:
            c = cands.get(h.key)
            if c is None:
                c = cands[h.key] = Candidate(key=h.key, version=h.version, text=h.text, source=h.source,
                                             status=h.status)
                rows.setdefault(h.key, {"key": h.key, "version": h.version,
                                        "value_json": None if h.value is None else canonical_json(h.value),
                                        "text": h.text, "source": h.source, "status": h.status,
                                        "valid_from": h.valid_from})
            c.score = round(h.parts.relevance, 4)
            # a cosine of the CJK companion (multilingual e5: every pair of sentences scores high) is evidence but
            # not comparable with the main model's thresholds: the rules only use the main model's
            same_model = h.parts.dense_model in (None, embedder)
            c.dense = None if h.parts.dense is None or not same_model else round(h.parts.dense, 4)
            if h.parts.dense is not None and not same_model:
                c.companion, c.companion_model = round(h.parts.dense, 4), h.parts.dense_model
            c.lexical = None if h.parts.lexical is None else round(h.parts.lexical, 4)
    return list(cands.values()), rows


def _mint_key(store: Store, user_id: str, res: Resolution, idempotency_key: str | None = None) -> str:
    """A fresh key for a new slot or sibling, never derived from the text: ``<slot>.<n>`` for a multi-valued slot
    (n = one more than any sibling ever recorded), ``memory.r<12 random hex>`` for a memory without a slot.

    With an ``idempotency_key`` a retry must land where the first call did, even when that memory is no longer
    current: ``memory.r`` + 12 hex of sha256(user, idempotency key) (derived from the idempotency key, not from the
    text), and for a sibling, the sibling whose stream already holds that idempotency key, if any."""
    slot_key = None if res.fresh_key else res.typing.slot_key
    if slot_key is None:
        if idempotency_key is not None:
            return "memory.r" + hashlib.sha256(f"{user_id}\x1f{idempotency_key}".encode()).hexdigest()[:12]
        return "memory.r" + secrets.token_hex(6)
    hp = store.history_projection
    like = slot_key.replace("_", "\\_") + ".%"
    with store.db.read() as cur:
        cur.execute(f"SELECT DISTINCT key FROM {hp.table('versions')} WHERE user_id = ? AND key LIKE ? ESCAPE '\\'",
                    (user_id, like))
        keys = [r[0] for r in cur.fetchall()]
    if idempotency_key is not None:
        from ledger.domain import fact_id

        for k in sorted(keys):
            if idempotency_key in store.app.load_fact(fact_id(user_id, k)).idempotency:
                return k
    n = 0
    for k in keys:
        tail = k[len(slot_key) + 1:]
        if tail.isdigit():
            n = max(n, int(tail))
    return f"{slot_key}.{n + 1}"


def _on_key(store: Store, template: FactCommand, fp: str, key: str, words: str) -> RememberReceipt:
    """Record the statement on ``key`` without slot resolution (a key the caller gave, or the one a retry's
    idempotency key was recorded under); ``words`` is the explanation, formatted with decision, key and effect."""
    cmd = template.model_copy(update={"key": key})
    cmd._fingerprint = fp
    receipt = store.execute([cmd])[0]
    decision = EFFECT_DECISION.get(receipt.effect, "new")
    return RememberReceipt(**receipt.model_dump(), decision=decision, related=[],  # type: ignore[arg-type]
                           explanation=words.format(decision=decision, key=key, effect=receipt.effect))


def _prior_key(store: Store, user_id: str, text: str, idempotency_key: str) -> str | None:
    """The key whose stream already holds ``idempotency_key`` for this sentence, or None: the keys that ever held
    the sentence are read from the history projection, then their streams are asked."""
    from ledger.domain import fact_id

    hp = store.history_projection
    with store.db.read() as cur:
        cur.execute(f"SELECT DISTINCT key FROM {hp.table('versions')} WHERE user_id = ? AND text = ?",
                    (user_id, cur.seal(user_id, text)))  # sealing is deterministic: the sealed text matches
        keys = sorted(r[0] for r in cur.fetchall())
    for k in keys:
        if idempotency_key in store.app.load_fact(fact_id(user_id, k)).idempotency:
            return k
    return None


def _adjudicate(res: Resolution, text: str) -> None:
    """Settle a rules' ``conflict`` with the optional adjudicator (memledger/adjudicator.py), in place: its verdict
    turns the conflict into a supersede, a correction or an addition; no verdict leaves it. A no-op unless
    ``MEMLEDGER_ADJUDICATOR_URL`` is set."""
    from . import adjudicator

    if not adjudicator.configured():
        return
    target = res.target
    v = adjudicator.ask(target.text, text)
    res.adjudication = v.evidence
    if v.verdict is None:
        return
    res.contest_key = None
    if v.verdict == "both_true":
        res.decision, res.key, res.fresh_key, res.rule = "add", None, True, res.rule + "+adjudicated"
    else:
        res.decision = "supersede" if v.verdict == "replaces" else "correct"
        res.op = "assert" if v.verdict == "replaces" else "correct"
        res.key, res.rule = target.key, res.rule + "+adjudicated"


#: characters of each part read from the statement kept in the evidence
EVIDENCE_PART = 600


def _clip(part: str) -> str:
    return part if len(part) <= EVIDENCE_PART else part[:EVIDENCE_PART - 1] + "…"


def _evidence(res: Resolution, key: str, embedder: str | None) -> str:
    # what was read from the statement is clipped: the reason of a 100,000-character statement must stay within the
    # reason's own limit (ledger/schemas.py MAX_TEXT), and the statement itself is in the event
    parts = [f"remember: {res.decision} -> {key} by rule {res.rule}", _clip(res.typing.describe()),
             *([f"parsed: {_clip(res.parsed)}"] if res.parsed else []),
             *([res.adjudication] if res.adjudication else []),
             f"catalogue {CATALOGUE_VERSION}", f"embedder {embedder or 'none'}"]
    # the target and the best-scored others: a slot of a thousand siblings would make every reason tens of KB
    cands = ([res.target] if res.target else []) + sorted(res.related, key=lambda c: -c.score)[:EVIDENCE_CANDIDATES]
    if cands:
        parts.append("candidates: " + "; ".join(
            f"{c.key} v{c.version} {c.relation} score {c.score:.3f}"
            + (f" dense {c.dense:.3f}" if c.dense is not None else "")
            + f" overlap {c.value_overlap:.2f}" for c in cands))
    return " | ".join(parts)


def remember(store: Any, request: RememberRequest, *, registry: KeyRegistry = REGISTRY,
             value_of: Callable[[str], Any] | None = None) -> RememberReceipt:
    """Record the statement of ``request`` where slot resolution puts it; see the module docstring and
    :meth:`memledger.api.MemoryLedger.remember`. Raises BadInput (nothing written): an ``about`` naming nobody the
    user is linked to, an opt-out session, an erased user; the request's own checks ran when it was built.

    ``value_of``: the value recorded for the (stripped) statement when it makes a new version, instead of the
    statement itself (the statement stays the ``text`` that is resolved and searched; a reaffirmation keeps the
    current value; with ``key=`` or on an idempotent retry the statement itself is recorded). memledger.compat.mem0
    keeps a memory's metadata beside its text this way."""
    user_id, text, about_ref, template = request.user_id, request.text, request.about, request.command()
    fp = _fingerprint(user_id, text, template) + ("" if about_ref is None else f"\x1fabout={about_ref}")
    explicit = request.key
    if explicit is not None:
        return _on_key(store, template, fp, explicit, "{decision}: key {key} given by the caller (no slot "
                                                       "resolution; policy effect {effect})")
    store.check_keys()
    store.refuse_erased([user_id])
    from .relations import max_live

    cap = max_live()  # a bad cap refuses before anything is written
    if template.idempotency_key is not None:
        prior = _prior_key(store, user_id, text, template.idempotency_key)
        if prior is not None:
            # a retry lands where the first call did, whatever was remembered since (a later statement about the
            # same attribute would otherwise draw it elsewhere): the store answers it as a replay
            return _on_key(store, template, fp, prior, f"{{decision}}: a retry of idempotency key "
                                                       f"{template.idempotency_key!r}, recorded before under {{key}}")
    embedder = getattr(getattr(store, "vectors_projection", None), "model_id", None)
    with user_lock(store, user_id):
        store.before_read(deferred=True)
        # the people the statement names, and the one it is about (memledger/linking.py): read under the lock, so
        # two statements naming a new person at once create them once
        known = reads.people(store, user_id)
        about = None if about_ref is None else linking.about_whom(known, about_ref)
        links = linking.plan(text, known, user_id, about)
        reading = linking.reading(text, known, links, registry, user_id, about)
        typing = reading.typing
        cands, rows = _candidates(store, user_id, text, typing.slot_key, embedder)
        if about is not None:  # said by or for a relative: only what is theirs can be revised by it
            cands = [c for c in cands if c.key.startswith(f"family.{reading.slug}.")]
        linking.type_candidates(cands, known, registry, user_id)
        res = resolve(reading.text, typing, cands, embedder=embedder, registry=registry, user_name=user_id)
        if res.decision in ("reaffirm", "new") and reading.full_text not in (None, reading.text):
            # said again, or nothing revised, read on the clause naming the person: decided again on the whole
            # statement, whose later clauses may hold a value the clause does not (nothing the user said is dropped;
            # "Arlo's school is switching to a later bell so pickup's 3:40 from next week" revises the pickup time)
            whole = resolve(reading.full_text, typing, cands, embedder=embedder, registry=registry, user_name=user_id)
            res = whole if res.decision == "reaffirm" or whole.decision != "new" else res
        if res.decision == "conflict" and res.rule in ADJUDICABLE and res.target is not None:
            _adjudicate(res, text)
        key = res.key or _mint_key(store, user_id, res, template.idempotency_key)
        if about is not None and reading.slug and key.startswith("memory."):
            key = f"family.{reading.slug}.{key}"  # a memory of theirs without a slot still shows under them
        evidence = _evidence(res, key, embedder)
        named = linking.receipt_links(links, reading, [])
        if named:
            evidence += " | " + linking.describe(named)
        value: Any = text if value_of is None else value_of(text)
        if res.decision == "reaffirm" and res.target is not None:
            vj = rows.get(res.target.key, {}).get("value_json")
            value = text if vj is None else json.loads(vj)
        # a question or plan about a special category keeps the label of the slot it names (typing.sensitivity)
        sensitivity = template.sensitivity or registry.sensitivity(res.typing.slot or "") or res.typing.sensitivity
        main = template.model_copy(update={"key": key, "op": res.op, "value": value, "reason": evidence,
                                           "sensitivity": sensitivity})
        main = validate_command(main.model_dump(exclude_none=True))
        main._fingerprint = fp
        commands = [main]
        if (res.close_key is not None and template.source in NON_USER_SOURCES
                and (rows.get(res.close_key) or {}).get("source") == "user_statement"):
            # what the agent inferred never closes what the user said: it contests instead
            res.contest_key, res.close_key, res.decision = res.close_key, None, "conflict"
        if res.close_key is not None:
            commands.append(_close(template, rows.get(res.close_key), res, key))
        for other in res.also_close:  # a linked slot the cessation ends too (never what the user said, by an agent)
            row = rows.get(other)
            if row is not None and not (template.source in NON_USER_SOURCES and row.get("source") == "user_statement"):
                commands.append(_close(template, row, res, key))
        if res.contest_key is not None:
            commands.append(validate_command({
                "op": "contest", "user_id": user_id, "key": res.contest_key, "value": text, "text": text,
                "reason": f"to confirm: {key} may replace this (remember: conflict by rule {res.rule})",
                **{k: v for k, v in template.model_dump(exclude_none=True).items()
                   if k in ("observed_at", "source", "source_ref", "session_id", "actor", "trace_id", "confidence")},
            }))
        commands = [c for c in commands if c is not None]
        proj = getattr(store, "vectors_projection", None)
        if proj is not None:
            proj.keep_as_passage(text)  # the catch-up indexing this sentence reuses its query vector
        ties, prelude = linking.commands(links, main, key)
        receipts = store.execute(commands + ties, prelude=prelude)
        if ties:  # an entity past its cap of live relations folds its least recently used (memledger/relations.py)
            from .relations import fold_over_cap

            fold_over_cap(store, user_id, {t.subject for t in ties}, cap, source=template.source,
                          **({"observed_at": template.observed_at} if template.observed_at else {}))
    main_receipt = receipts[0]
    named = linking.receipt_links(links, reading, receipts[len(commands):])
    receipts = receipts[:len(commands)]
    decision = res.decision
    if main_receipt.effect == "contest":  # the policy would not let this source displace what the user said
        decision = "conflict"
    related = [RelatedMemory(key=c.key, version=c.version, text=c.text, score=c.score, relation=c.relation)
               for c in ([res.target] if res.target else []) + res.related
               if c is res.target or c.score >= RELATED_FLOOR or c.relation in ("same_slot", "sibling")]
    explanation = res.explanation() + f" (catalogue {CATALOGUE_VERSION}, embedder {embedder or 'none'})"
    if main_receipt.effect == "backfill":
        explanation += ("; its valid_from is before the current value's, so it was recorded as earlier history "
                        "(backfill) and the current value stays")
    if decision != res.decision:
        explanation = (f"conflict: a {template.source} never displaces a user_statement (recorded, contesting it); "
                       + explanation)
    shared = [e for e in named if e.effect == "ambiguous" and e.relation_type is None]
    if shared:
        # a name two people share is never guessed: the statement stands as said, for the user to place
        decision = "conflict"
        explanation = ("conflict: " + "; ".join(f"{e.name!r} names {len(e.candidates)} people "
                                                f"({', '.join(e.candidates)})" for e in shared)
                       + ", so it is linked to none of them; to confirm, say whose it is (\"my sister Anna ...\") "
                         "or relate it; " + explanation)
    for e in named:
        if e.effect in ("ambiguous", "not_linked") and e.relation_type is not None:
            explanation += (f"; {e.name!r} was not linked as {e.relation_type}: "
                            + ("another person of that name is known (" if e.effect == "ambiguous"
                               else "another person holds that tie (") + ", ".join(e.candidates)
                            + "); relate it to say who they are")
    return RememberReceipt(**main_receipt.model_dump(), decision=decision, related=related,  # type: ignore[arg-type]
                           explanation=explanation, extra=receipts[1:], entities=named)


def _close(template: FactCommand, row: dict[str, Any] | None, res: Resolution, key: str) -> FactCommand | None:
    """The retraction closing an older free-text key of the same slot (it cannot be superseded across keys)."""
    if row is None:
        return None
    from ledger.timeutil import from_micros, now_utc

    vf = row.get("valid_from")
    head_from = from_micros(vf) if isinstance(vf, int) else vf
    at = template.valid_from or template.observed_at or now_utc()
    data: dict[str, Any] = {"op": "retract", "user_id": template.user_id, "key": row["key"],
                            "reason": f"slot resolution: {res.decision} -> {key} (rule {res.rule})",
                            "observed_at": template.observed_at, "source": template.source,
                            "source_ref": template.source_ref, "session_id": template.session_id,
                            "actor": template.actor, "trace_id": template.trace_id}
    if res.close_as != "withdrawn" and head_from is not None and at > head_from:
        data["valid_to"] = at
    return validate_command({k: v for k, v in data.items() if v is not None})

