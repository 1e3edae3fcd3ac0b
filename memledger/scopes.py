"""Scopes: the agent and the run a memory was written in, beside the user it is about.

A memory carries the scopes it was written with. They are the provenance every fact event already records: the
agent is the event's ``actor``, the run its ``session_id`` (the faces spell them ``agent_id`` / ``run_id``, as mem0
does; ``actor`` / ``session_id`` stay). A memory's scopes are those of its current version, the one that made it
current (a reaffirmation by another agent does not move it).

A read names a user (the isolation boundary: nothing reads across users; an agent's own memories, written without a
user, have a user id of their own: memledger/agent_space.py), and may name an agent, a run or both: every scope it
names must match, the others are free. A memory written with user u and agent a is found by a read of u alone and by
one of (u, a), never by one of (u, b).

The filter is a WHERE on the history projection's plaintext ``actor`` and ``session_id`` columns
(projections/history.py ``scoped_versions``): the reads keep the (key, version) pairs it returns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ledger.errors import BadInput
from ledger.schemas import check_identifier

#: the scope fields as the faces name them, and the recorded field each one is
SCOPE_FIELDS = {"agent_id": "actor", "run_id": "session_id"}

AGENT_HELP = "Only memories written by this agent (recorded as the fact's actor)."
RUN_HELP = "Only memories written in this run (recorded as the fact's session_id)."


@dataclass(frozen=True)
class Scope:
    """The agent and the run a read is limited to; None leaves that scope free."""

    agent_id: str | None = None
    run_id: str | None = None

    def __bool__(self) -> bool:
        return self.agent_id is not None or self.run_id is not None

    def matches(self, actor: str | None, session_id: str | None) -> bool:
        """True if a version recorded with ``actor`` and ``session_id`` is in this scope."""
        return (self.agent_id is None or actor == self.agent_id) and (self.run_id is None or
                                                                     session_id == self.run_id)


def check_scope(agent_id: Any = None, run_id: Any = None) -> Scope:
    """The scope a read names: each an identifier (:func:`ledger.schemas.check_identifier`) or None.

    Raises:
        BadInput: naming ``agent_id`` or ``run_id``.
    """
    return Scope(check_identifier(agent_id, "agent_id"), check_identifier(run_id, "run_id"))


def spelled(fields: dict[str, Any], where: str = "") -> dict[str, Any]:
    """``fields`` (a write's keywords) with ``agent_id`` / ``run_id`` folded into ``actor`` / ``session_id``, the
    names the ledger records them under. Both spellings given and different is refused.

    Raises:
        BadInput: naming ``agent_id`` (or ``run_id``, after the prefix ``where``: ``commands[0].``): not an agent
            (run) id (:func:`ledger.schemas.check_agent_id`), or another value than the field it is recorded as.
    """
    out = dict(fields)
    for scope, recorded in SCOPE_FIELDS.items():
        given, have = out.pop(scope, None), out.get(recorded)
        if given is None:
            continue
        check_identifier(given, where + scope)  # refused under the name it was given by, not the one recorded
        if have is not None and have != given:
            raise BadInput(where + scope, f"{given!r} differs from {recorded} {have!r} (the same field, spelled twice)",
                           f"give one of {scope} and {recorded}")
        out[recorded] = given
    return out


def versions_in_scope(store: Any, cur: Any, user_id: str, scope: Scope,
                      keys: Any = None) -> set[tuple[str, int]]:
    """The ``(key, version)`` pairs of ``user_id``'s fact versions recorded in ``scope`` (of ``keys`` only, when
    given), read in the caller's transaction ``cur``."""
    return store.history_projection.scoped_versions(cur, user_id, scope.agent_id, scope.run_id, keys)


def close_run(store: Any, execute: Any, user_id: str, run_id: str, *, observed_at: Any = None) -> list[Any]:
    """Retire every current memory of ``user_id`` written in run ``run_id`` (its current version's session_id):
    one retraction each, all in one save through ``execute`` (``MemoryLedger.execute``: the one write path), each
    recorded in the run as ``system_feedback`` with the reason ``closed with run <run_id>``; history keeps every
    value. Returns their
    receipts (none when the run holds no current memory).

    Raises:
        BadInput: a malformed ``user_id``, ``run_id`` or ``observed_at`` (nothing written). ConflictError.
    """
    from ledger.schemas import check_user_id, validate_command

    user_id, run_id = check_user_id(user_id), check_identifier(run_id, "run_id")
    store.before_read(None, 10.0)
    with store.db.read() as cur:
        rows = store.profile_projection.rows(cur, user_id)
        keep = versions_in_scope(store, cur, user_id, Scope(run_id=run_id), [r["key"] for r in rows])
    commands = [validate_command({"op": "retract", "user_id": user_id, "key": key, "session_id": run_id,
                                  "reason": f"closed with run {run_id}", "source": "system_feedback",
                                  **({"observed_at": observed_at} if observed_at is not None else {})})
                for key in sorted(r["key"] for r in rows if (r["key"], r["version"]) in keep)]
    return execute(commands) if commands else []


def narrow_profile(store: Any, profile: Any, scope: Scope) -> Any:
    """``profile`` (a :class:`~ledger.schemas.Profile`, current or as of an instant) with only the facts whose
    shown version was recorded in ``scope``."""
    if not scope or not profile.facts:
        return profile
    with store.db.read() as cur:
        keep = versions_in_scope(store, cur, profile.user_id, scope, list(profile.facts))
    return profile.model_copy(update={"facts": {k: f for k, f in profile.facts.items() if (k, f.version) in keep}})
