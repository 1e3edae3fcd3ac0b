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
