"""Agents' own memories: the user ids kept for them, and the rule that no caller types one.

An agent may keep memories of its own, written without a user (memledger/agent_space.py). They live under a user id
of their own, :data:`PREFIX` followed by the agent id (``~agent/planner``), so the user stays the ledger's one
isolation boundary: a user's reads never return an agent's own memories, and an agent's never return a user's.

No caller may name such an id as a user: :func:`ledger.schemas.check_user_id` refuses an id starting with
:data:`PREFIX` unless the call in progress opened that agent's space (:func:`opened`), which the memledger layer
does when a verb is given ``agent_id`` and no user. The open spaces are a context variable, so they hold for the
call (its thread or task) and nothing else.
"""

from __future__ import annotations

from collections.abc import Iterator
import unicodedata
from contextlib import contextmanager
from contextvars import ContextVar

from .errors import BadInput

#: the start of every agent's own user id; refused as a user id typed by a caller
PREFIX = "~agent/"

_OPEN: ContextVar[frozenset[str]] = ContextVar("memledger_open_agent_spaces", default=frozenset())


def space_of(agent_id: str) -> str:
    """The user id under which agent ``agent_id`` (an already checked identifier) keeps its own memories."""
    return PREFIX + agent_id


@contextmanager
def opened(user_id: str) -> Iterator[str]:
    """Within the block, ``user_id`` (an agent's own id, :func:`space_of`) passes the user id check."""
    token = _OPEN.set(_OPEN.get() | {user_id})
    try:
        yield user_id
    finally:
        _OPEN.reset(token)


def refuse_reserved(user_id: str, field: str = "user_id") -> None:
    """Refuse ``user_id`` when it starts with :data:`PREFIX` and its space is not open in this call.

    Raises:
        BadInput: naming ``field``, with the fix (another user id, or ``agent_id`` alone).
    """
    # read as a person reads it: "~Agent/x" and a full-width "～agent/x" are the prefix too
    shown = unicodedata.normalize("NFKC", user_id).casefold()
    if shown.startswith(PREFIX) and user_id not in _OPEN.get():
        agent = user_id[len(PREFIX):] or "A"
        raise BadInput(field, f"{user_id!r} starts with {PREFIX!r}, which is kept for agents' own memories",
                       f"choose a user id that does not start with {PREFIX!r}; for the own memories of agent "
                       f"{agent!r}, leave the user out and give agent_id={agent!r} alone")


def agent_of(user_id: str) -> str | None:
    """The agent whose own memories ``user_id`` holds (``"planner"`` of ``~agent/planner``), or None for a user."""
    return user_id[len(PREFIX):] if user_id.startswith(PREFIX) else None


def unknown_refusal(user_id: str, problem: str, fix: str, field: str = "user_id") -> BadInput:
    """The refusal of ``user_id`` when the ledger holds nothing about it: ``problem`` and ``fix`` naming ``field``;
    for an agent's own id (the caller named the agent, not a user), naming ``agent_id`` and saying that agent
    keeps no memories of its own here."""
    agent = agent_of(user_id)
    if agent is None:
        return BadInput(field, problem, fix)
    return BadInput("agent_id", f"agent {agent!r} has no own memories here ({problem})",
                    f"check the agent id (its own memories show as user {PREFIX}<agent id> in `memledger stats`); "
                    f"what agent {agent!r} wrote about a user is read with that user's id and agent_id={agent!r}")


def erased_refusal(user_id: str, fix: str, field: str = "user_id") -> BadInput:
    """The refusal of a write for ``user_id`` once it was erased (an erased id stays burned); for an agent's own id,
    naming ``agent_id`` and telling the agent to keep new memories under a new agent id."""
    agent = agent_of(user_id)
    if agent is None:
        return BadInput(field, f"{user_id!r} was erased; nothing more can be recorded for it", fix)
    return BadInput("agent_id", f"{user_id!r}, the own memories of agent {agent!r}, was erased; nothing more can be "
                    "recorded for it", f"an agent's erased memories stay burned: keep new ones under a new agent "
                    f"id, e.g. agent_id={agent + '-2'!r} (what agent {agent!r} writes about a user is not affected)")
