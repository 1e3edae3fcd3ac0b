"""``retract-source``: withdraw a source, and only what it alone supports (docs/hygiene.md, "Withdraw a source").

A fact's current value is *supported* by every statement of it: the event that made the version and each
reaffirmation of it, each naming its ``source_ref`` (a statement without one counts as a supporter of its own).
Withdrawing ``SOURCE_REF`` changes only current values that no other statement supports:

* the value replaced an earlier one (supersede, correct): the latest earlier version still supported by another
  statement is put back, with a ``correct`` event (the withdrawn value is kept in history as misreported), source
  ``system_feedback``, actor ``retract-source``, the ``source_ref`` and confidence of its latest remaining supporter,
  ``derived_from`` naming the supporting events;
* nothing earlier is supported: the value is retracted (no current value);
* a value other statements also support stays, and is reported as ``kept`` with its supporters.

Every fact the source made statements on gets a ``withdraw_source`` event naming it, so it stops counting as
support there for good (a later withdrawal of another source does not count it); a retry records nothing.

Versions that are no longer current are history: they are not changed. Contrast Graphiti's ``remove_episode``, which
deletes a fact whose first supporting episode goes even when others still support it.

Raises:
    BadInput: a bad user id or source_ref, or no statement of the user names ``source_ref`` (nothing written).
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from ledger.errors import BadInput
from ledger.schemas import FactCommand, Receipt, check_text, check_user_id, validate_command

from .locks import user_lock

ACTOR = "retract-source"
_VERSION_EFFECTS = ("new", "supersede", "correct", "backfill")


class SourceChange(BaseModel):
    """One fact ``retract-source`` looked at: ``key``; ``version`` (the current version it found) and ``value``;
    ``action``: ``withdrawn`` (retracted: nothing else supports any value), ``restored`` (``restored_value`` from
    version ``restored_version`` is current again) or ``kept`` (other statements support it); ``supported_by``: the
    source_refs still supporting what is current afterwards (null stands for a statement without a source_ref)."""

    key: str
    version: int
    value: Any
    action: str
    restored_version: int | None = None
    restored_value: Any = None
    supported_by: list[str | None]


class SourceRetraction(BaseModel):
    """``memledger retract-source USER SOURCE_REF --json``: what changed, and the receipts of the events recorded
    in one save: a ``withdraw_source`` event on every fact the source made statements on (so it no longer counts as
    support there; none on a retry), then the corrections and retractions of ``changes``."""

    user_id: str
    source_ref: str
    changes: list[SourceChange]
    receipts: list[Receipt]


def check_source_ref(source_ref: Any) -> str:
    """A source_ref as commands take it: a non-empty identifier of at most 512 characters. Raises BadInput."""
    if not isinstance(source_ref, str) or not source_ref.strip():
        raise BadInput("source_ref", "is empty", "give the source_ref the statements were recorded with (e.g. D1:2)")
    check_text(source_ref, "source_ref")
    if len(source_ref) > 512:
        raise BadInput("source_ref", f"is {len(source_ref)} characters long", "use at most 512")
    return source_ref


def _support(rows: list[dict[str, Any]], version: int) -> list[dict[str, Any]]:
    """The statements supporting ``version``: its own event and the reaffirmations of it, in log order, leaving out
    those of sources withdrawn from the fact (``withdraw_source`` events)."""
    gone = {r["source_ref"] for r in rows if r["effect"] == "withdraw_source"}
    own = next((r for r in rows if r["version"] == version and r["effect"] in _VERSION_EFFECTS), None)
    # a version put back by an earlier retract-source (a system_feedback correction) rests on the statements it
    # names in derived_from, not on its own event: withdrawing one of those must report "kept", not nothing
    restored_from = set(json.loads(own["derived_from"] or "[]")) if (
        own is not None and own["source"] == "system_feedback" and own["actor"] == ACTOR) else set()
    return [r for r in rows if ((r["version"] == version and r["effect"] in _VERSION_EFFECTS and not restored_from)
                                or r["event_id"] in restored_from
                                or (r["effect"] == "reaffirm" and r["replaces"] == version))
            and r["source_ref"] not in gone]


def retract_source(ml: Any, user_id: str, source_ref: str) -> SourceRetraction:
    """Withdraw ``source_ref`` for ``user_id`` (see the module docstring)."""
    user_id = check_user_id(user_id)
    source_ref = check_source_ref(source_ref)
    with user_lock(ml, user_id):
        ml.before_read(None, 10.0)
        with ml.db.read() as cur:
            rows = ml.history_projection.versions(cur, user_id)
            heads = {r["key"]: r for r in ml.profile_projection.rows(cur, user_id)}
        named = sorted({r["key"] for r in rows if r["source_ref"] == source_ref})
        if not named:
            raise BadInput("source_ref", f"no statement of {user_id} names {source_ref!r}",
                           f"see `memledger audit {user_id} --source-ref REF` for the refs recorded")
        done = {r["key"] for r in rows if r["source_ref"] == source_ref and r["effect"] == "withdraw_source"}
        named = [k for k in named if k not in done]  # withdrawn before: a retry records nothing
        changes: list[SourceChange] = []
        commands: list[FactCommand] = [
            validate_command({"op": "withdraw", "user_id": user_id, "key": key, "source": "system_feedback",
                              "source_ref": source_ref, "actor": ACTOR,
                              "reason": f"retract-source: {source_ref} withdrawn"}) for key in named]
        for key in named:
            head = heads.get(key)
            if head is None:
                continue  # no current value: history only
            key_rows = [r for r in rows if r["key"] == key]
            by_version = {r["version"]: r for r in key_rows if r["effect"] in _VERSION_EFFECTS}
            support = _support(key_rows, head["version"])
            if source_ref not in [r["source_ref"] for r in support]:
                continue
            value = json.loads(head["value_json"])
            others = [r for r in support if r["source_ref"] != source_ref]
            if others:
                changes.append(SourceChange(key=key, version=head["version"], value=value, action="kept",
                                            supported_by=list(dict.fromkeys(r["source_ref"] for r in others))))
                continue
            # the head rests on this source alone: go back along what it replaced to a value others support
            back = by_version.get(head["version"], {}).get("replaces")
            restored = None
            while back is not None:
                remaining = [r for r in _support(key_rows, back) if r["source_ref"] != source_ref]
                # a forgotten version (memledger forget) has no value left to put back: look further back
                if remaining and by_version.get(back, {}).get("value_json") is not None:
                    restored = (by_version[back], remaining)
                    break
                back = by_version.get(back, {}).get("replaces")
            reason = f"retract-source: {source_ref} withdrawn; v{head['version']} rested on it alone"
            if restored is None:
                commands.append(validate_command({"op": "retract", "user_id": user_id, "key": key,
                                                  "source": "system_feedback", "actor": ACTOR, "reason": reason}))
                changes.append(SourceChange(key=key, version=head["version"], value=value, action="withdrawn",
                                            supported_by=[]))
                continue
            old, remaining = restored
            last = remaining[-1]
            commands.append(validate_command({
                "op": "correct", "user_id": user_id, "key": key, "value": json.loads(old["value_json"]),
                "text": old["text"], "source": "system_feedback", "source_ref": last["source_ref"],
                "confidence": last["confidence"], "actor": ACTOR,
                "derived_from": [r["event_id"] for r in remaining],
                "reason": f"{reason}; restores v{old['version']}"}))
            changes.append(SourceChange(key=key, version=head["version"], value=value, action="restored",
                                        restored_version=old["version"], restored_value=json.loads(old["value_json"]),
                                        supported_by=list(dict.fromkeys(r["source_ref"] for r in remaining))))
        receipts = ml.execute(commands) if commands else []
    return SourceRetraction(user_id=user_id, source_ref=source_ref, changes=changes, receipts=receipts)
