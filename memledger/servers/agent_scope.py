"""What a key limited to one agent may do through the MCP tools (``memledger keys create --agent A``), and the
``remember`` receipt such a key sees on every face (docs/interfaces.md, "Keys limited to an agent").

Over HTTP the routes are limited before they run (:mod:`memledger.servers.agent_keys`); the MCP endpoint is one
route whose tools are only known once the call is read, so each tool call is limited here, by the same rules:

* a call naming another agent (``agent_id`` or ``actor``) is refused; one naming none is made as A (a write is A's,
  a read is narrowed to what A wrote);
* a tool that takes no ``agent_id`` cannot be narrowed to an agent, so it is refused rather than answered whole;
  ``diff`` and ``audit`` of a user are refused too (a dropped belief names the other agent's event), but answered on
  A's own memories, which A alone wrote;
* ``erase`` takes ``agent_id`` (the agent's own memories) but needs an admin key, so a key limited to an agent
  erases nothing unless it was created as an admin key too (then only its agent's own memories);
* the user stays the boundary: the key's users are checked as for any key, and A's own memories (``~agent/A``) are
  reached by ``agent_id`` with no user when the key holds no user, or by passing that id back as ``user_id``.
"""

from __future__ import annotations

from typing import Any

from ledger.agent_spaces import PREFIX, space_of

__all__ = ["limit_tool_call", "narrow_related", "refuse_unscoped"]

#: tools that take ``agent_id`` but cannot be narrowed to one agent on a user's memories
WHOLE_USER_TOOLS = frozenset({"diff", "audit"})


def limit_tool_call(tool: str, args: Any, principal: Any) -> Any:
    """``args`` (a tool's validated argument model) as a key limited to an agent may send them: its agent put in
    when none is named. Any other key's: unchanged.

    Raises:
        PermissionError: ``agent_id`` / ``actor`` naming another agent; a tool without ``agent_id``.
    """
    agent = getattr(principal, "agent", None)
    if agent is None:
        return args
    for field in ("agent_id", "actor"):
        given = getattr(args, field, None)
        if given is not None and given != agent:
            raise PermissionError(f"{field}: {given!r} is not the agent this API key is limited to ({agent!r}) (fix: "
                                  f"leave {field} out (it is {agent!r}), or use a key for agent {given!r})")
    if "agent_id" not in type(args).model_fields:
        raise PermissionError(f"Authorization: this API key is limited to agent {agent!r}, and the tool {tool} cannot "
                              "be limited to an agent (fix: use a key that is not limited to an agent for this tool)")
    return args if args.agent_id is not None else args.model_copy(update={"agent_id": agent})


def refuse_unscoped(tool: str, user_id: str, principal: Any) -> None:
    """Refuse ``diff`` / ``audit`` of a user's memories to a key limited to an agent (its own memories pass).

    Raises:
        PermissionError: naming ``Authorization`` and the fix.
    """
    agent = getattr(principal, "agent", None)
    if agent is not None and tool in WHOLE_USER_TOOLS and user_id != space_of(agent):
        raise PermissionError(f"Authorization: this API key is limited to agent {agent!r}, and {tool} of a user "
                              "cannot be limited to an agent (a dropped belief names another agent's event) (fix: use "
                              f"a key that is not limited to an agent, or {tool} of agent {agent!r}'s own memories: "
                              "agent_id without user_id)")


def narrow_related(ml: Any, receipt: Any, agent: str | None) -> Any:
    """A ``remember`` receipt as a key limited to ``agent`` may see it: the memories it weighed (``related``) only
    where the version weighed was written by that agent. The decision stands (the user is one person: another
    agent's memory may be revised), but no other agent's words are shown. ``agent`` None, or the agent's own
    memories (all its own): the receipt as it is."""
    related = getattr(receipt, "related", None)
    if agent is None or not related or str(getattr(receipt, "user_id", "")).startswith(PREFIX):
        return receipt
    mine = {(h.key, h.version) for key in {r.key for r in related}  # the few keys weighed, not the whole history
            for h in ml.history(receipt.user_id, key, agent_id=agent)}
    return receipt.model_copy(update={"related": [r for r in related if (r.key, r.version) in mine]})
