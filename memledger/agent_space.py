"""An agent's own memories, written and read with ``agent_id`` and no user.

::

    ml.remember(text="I answer in French", agent_id="planner")        # no user: the agent's own memory
    ml.profile(agent_id="planner").facts                              # only the planner's own memories
    ml.export(agent_id="planner"); ml.erase(agent_id="planner")       # per agent

They live under a user id of their own, ``~agent/<agent id>`` (:mod:`ledger.agent_spaces`), so the user stays the
isolation boundary: no user's read returns them, and theirs never return a user's. A caller never types that id as
a user (it is refused, naming ``user_id`` and this fix); a verb given ``agent_id`` (for a write, or ``actor``, the
same field) and no user is answered on it. Receipts and reads show it as their ``user_id``, and it may be passed
back with the same ``agent_id``.

:func:`own_memories` applies this to the verbs in :data:`VERBS` of :class:`memledger.api.MemoryLedger` (and so of
``AsyncMemoryLedger``, whose coroutines call them); the CLI spells the missing user ``-`` (``memledger remember -
"..." --agent planner``: :func:`memledger.cli.common.cli_user`).
"""

from __future__ import annotations

import functools
import inspect
from contextlib import ExitStack
from typing import Any, Callable, TypeVar

from ledger.agent_spaces import PREFIX, opened, space_of
from ledger.errors import BadInput
from ledger.schemas import check_identifier

#: the verbs answered on an agent's own memories when given no user, and the fields that name the agent in each
#: (a write's ``actor`` is its agent: the same field; erase's and forget's ``actor`` is who erased)
VERBS: dict[str, tuple[str, ...]] = {
    **{name: ("agent_id", "actor") for name in ("assert_fact", "correct_fact", "retract_fact", "remember")},
    **{name: ("agent_id",) for name in ("profile", "history", "search", "context", "believed", "true_at", "diff",
                                        "audit", "export", "forget_scope", "erase")},
}

C = TypeVar("C", bound=type)


def _verb(method: Callable[..., Any], fields: tuple[str, ...]) -> Callable[..., Any]:
    sig = inspect.signature(method)

    @functools.wraps(method)
    def verb(self: Any, *args: Any, **kwargs: Any) -> Any:
        if args and isinstance(args[0], str) and not args[0].startswith(PREFIX):
            if any(kwargs.get(f) is not None for f in fields):
                _check_binding(method.__name__, sig, fields, self, args, kwargs)
            return method(self, *args, **kwargs)  # a user named (the usual call): no binding to pay for
        bound = sig.bind_partial(self, *args, **kwargs)  # a wrong call fails as the verb itself would
        given = bound.arguments
        user = given.get("user_id")
        named = [(f, given[f]) for f in fields if given.get(f) is not None]
        if user is not None and not (isinstance(user, str) and named and isinstance(named[0][1], str)
                                     and user == space_of(named[0][1])):
            return method(*bound.args, **bound.kwargs)  # a user's memories (an agent's own id is refused there)
        if not named:
            raise BadInput("user_id", "is missing", "give the user the memory is about, or agent_id alone for "
                           "that agent's own memories")
        if len(named) > 1 and named[0][1] != named[1][1]:
            return method(*bound.args, **bound.kwargs)  # the verb refuses the two spellings itself, naming both
        field, agent = named[0]
        given["user_id"] = space_of(check_identifier(agent, field))
        with opened(given["user_id"]):
            return method(*bound.args, **bound.kwargs)

    return verb


def _check_binding(name: str, sig: inspect.Signature, fields: tuple[str, ...], self: Any, args: tuple[Any, ...],
                   kwargs: dict[str, Any]) -> None:
    """Refuse a call naming an agent whose positional arguments do not fit the verb: the first was read as the user
    (``ml.assert_fact("style.length", "short", agent_id="planner")`` meant the planner's own memory), so Python's
    TypeError about a missing argument would name the wrong one.

    Raises:
        BadInput: naming ``user_id``, with the call to write instead.
    """
    try:
        sig.bind(self, *args, **kwargs)
    except TypeError as exc:
        field = next(f for f in fields if kwargs.get(f) is not None)
        params = [n for n, p in list(sig.parameters.items())[1:]
                  if n != "user_id" and p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
        shown = ", ".join(f"{p}=..." for p in params[:len(args)]) or "..."
        raise BadInput("user_id", f"{args[0]!r} was taken as the user (the first positional argument of {name}), "
                       f"and then the call does not fit: {exc}",
                       f"for the own memories of agent {kwargs[field]!r}, pass the other arguments by name: "
                       f"ml.{name}({shown}, {field}={kwargs[field]!r}); for a user's memories give the user first: "
                       f"ml.{name}(user_id, ...)") from None


def opened_if_own(*user_ids: str) -> Any:
    """A context manager: within it, each of ``user_ids`` that is an agent's own id passes the user id check (a
    face resolved it from ``agent_id`` alone, as the servers, the mem0-compatible API and its importer do); the
    others are left to it."""
    stack = ExitStack()
    for user_id in dict.fromkeys(u for u in user_ids if u.startswith(PREFIX)):
        stack.enter_context(opened(user_id))
    return stack


def own_memories(cls: C) -> C:
    """Class decorator: each verb of :data:`VERBS` on ``cls`` takes ``agent_id`` with no user (``user_id`` None or
    left out) as the agent's own memories, as the module docstring says.

    Raises (from the verbs):
        BadInput: ``user_id`` missing with no agent named; a malformed ``agent_id``; an id starting with
            ``~agent/`` given as a user (``user_id``, with the fix).
    """
    for name, fields in VERBS.items():
        setattr(cls, name, _verb(getattr(cls, name), fields))
    return cls
