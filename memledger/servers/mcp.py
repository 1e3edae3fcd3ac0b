"""The MCP server (``memledger serve mcp``): the ledger's verbs as MCP tools and resources (``mcp`` >= 2.3).

Tools (each with a pydantic argument model and a result model, so each has an input and an output schema):
``remember``, ``recall``, ``profile``, ``history``, ``believed``, ``true_at``, ``diff``, ``audit``, ``correct``,
``retract``, ``unlink``, ``context``, ``resume``, ``log_message``, ``update_card``, ``end_session``; ``erase`` and
``forget`` only with ``allow_destructive``, marked destructive (``erase`` with ``agent_id`` and no user: that agent's
own memories; over HTTP every destructive tool needs an admin key). Resources: ``memledger://users/{user_id}/profile``,
``memledger://users/{user_id}/history/{key}``, ``memledger://users/{user_id}/context``.

Facts labelled sensitive (health, finance, ...) are withheld by every read (value and text null, ``withheld`` names
the label) unless the call's ``allow_sensitive`` names the label and, over HTTP, the API key holds it; the resources
take no arguments, so they always withhold them (docs/erasure.md, "Labels gate every read").

Who a call may touch (every tool takes an optional ``user_id``):

- pinned (``--user U``): an omitted ``user_id`` means U; any other is refused;
- over HTTP (``--transport http``, or ``/mcp`` of ``serve http``): the request's API key decides (the key middleware
  of :mod:`memledger.servers.http` puts its :class:`~memledger.servers.keys.Principal` in the request's state); an
  omitted ``user_id`` means the key's one user; a key limited to an agent is limited per call
  (memledger/servers/agent_scope.py) and reaches that agent's own memories;
- over stdio, unpinned: any user (a trusted local process); ``user_id`` is then required, or ``agent_id`` (a
  write's ``actor``) alone for that agent's own memories (memledger/agent_space.py), as over HTTP with an admin key
  holding every user.

Refusals are tool errors (``is_error``), never an error string inside a successful result: ``BadInput`` gives
``<field>: <problem> (fix: <fix>)``; a naive instant fails the argument model, so the tool never runs.
"""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Callable
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context as ToolContext
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from mcp_types import ToolAnnotations
from pydantic import ConfigDict, Field, ValidationError

from ledger.errors import BadInput, MemledgerError
from projections.db import request_scope
from ledger.agent_spaces import space_of
from ledger.schemas import HistoryRow, Profile, Receipt, check_identifier, check_key, check_user_id

from .. import erasure, sensitivity
from ..agent_space import opened_if_own
from ..context import Context as LedgerContext
from ..sessions import Resume, SessionReceipt
from .agent_scope import limit_tool_call, narrow_related, refuse_unscoped
from ..timetravel import Beliefs, Diff
from .keys import Principal
from .models import (
    AuditArgs,
    BelievedArgs,
    ContextArgs,
    CorrectArgs,
    DiffArgs,
    EndSessionArgs,
    EraseArgs,
    HistoryArgs,
    HistoryResult,
    LogMessageArgs,
    ProfileArgs,
    RecallArgs,
    RecallResult,
    RememberArgs,
    ResumeArgs,
    RetractArgs,
    TrueAtArgs,
    UnlinkArgs,
    UpdateCardArgs,
)
from .ops import Service
from .wording import for_face, from_validation, text_of

PRINCIPAL_STATE = "memledger_principal"

INSTRUCTIONS = """\
memledger is this user's long-term memory, kept as a ledger: every statement, correction and retraction is an
event, so it can say what is believed now, what was believed at any past date, and why.
- Save what the user tells you with `remember` (free text); it files it under the right fact and reports what it did.
- Before answering from memory, `recall` (current beliefs only) or `context` (a prompt-ready summary).
- When the user says a remembered value was wrong, `correct`; when they withdraw it, `retract`; when `remember` filed
  a statement under the wrong fact, `unlink` that version.
- `believed`/`true_at`/`diff`/`history`/`audit` answer "what did we think then, and why".
- Facts labelled sensitive (health, finance...) come back withheld (value and text null, `withheld` names the label);
  pass allow_sensitive=[label] with a purpose only when the task needs them (each one shown is recorded).
"""

DESCRIPTIONS = {
    "remember": "Remember something the user said, as free text (\"I switched to hot lattes\"). The ledger decides by "
                "itself whether it is new, supersedes an earlier value (a change of mind), duplicates what is "
                "already known, or conflicts with it, and returns that decision with the fact's key, version and "
                "log position. Pass the user's words; do not pre-summarise several facts into one call.",
    "recall": "Search the user's memories for a query (semantic + keyword). Results are CURRENT beliefs only: a "
              "superseded, corrected or retracted value never appears (use `history` or `believed` for the past). "
              "Each hit has its key, value, sentence, score and provenance. Scores are absolute: below 0.3 the "
              "memory is probably not about the query (min_score=0.3 drops those); within='messages' or 'all' "
              "searches the logged conversation too. Facts labelled sensitive (health, finance...) are left out "
              "unless allow_sensitive names their label.",
    "profile": "The user's current facts, by dotted key, with value, sentence, version, valid-from and source. A fact "
               "labelled sensitive (health, finance...) is withheld (value and text null, `withheld` names the label) "
               "unless allow_sensitive names its label.",
    "history": "Every version of the user's facts (or of one key) in log order: asserted, superseded, corrected "
               "(misreported), retracted, with reasons, provenance and valid ranges as known now.",
    "believed": "What the ledger BELIEVED about the user at a past moment of system time `as_of` (when the ledger "
                "recorded things, not when they happened): only events recorded at or before as_of count, so a "
                "later correction is not seen. `valid_at` (default as_of) picks which world-time the beliefs are "
                "about. Use it to explain past answers (\"why did you think X last week?\").",
    "true_at": "What was true of the user at a world-time instant `valid_at`, as the ledger knows it now (later "
               "corrections included).",
    "diff": "Which beliefs were added, changed or dropped between two system-time instants, each with the event "
            "that did it.",
    "audit": "For each current (or as-of) belief, the chain of events behind it: who said it, when, from which "
             "message, what it replaced and why, and each time a sensitive fact was disclosed.",
    "correct": "Correct a remembered value that was WRONG (\"I was born in 1995, not 1990\"): the new value replaces "
               "it over its whole valid time; history keeps the misreport. For a change of mind use `remember`.",
    "retract": "Withdraw a belief (\"forget that\", a misunderstanding): no current value afterwards; history keeps "
               "it and the reason. This is not erasure: the text stays in the history.",
    "context": "A prompt-ready context of the user within a token budget: profile, summaries, the session's state "
               "card, memories relevant to `query`, recent messages, dated in the user's time zone.",
    "resume": "Where the user left off: the latest open task's state card, how long ago, and a sentence to open "
              "with; `expired` says to ask before continuing.",
    "log_message": "Log one conversation message (idempotent on message_id; starts the session if needed).",
    "end_session": "End a session (a run). With `close_memories`, also retire every memory written in it (recorded "
                   "with its session_id or run_id), each by a retraction: history keeps them; the receipt lists them "
                   "in closed_memories.",
    "update_card": "Patch a session's state card: task, progress, status, and add/remove/replace decisions, open "
                   "questions and action items ('OLD=>NEW' for a replacement).",
    "unlink": "Undo a wrong `remember` decision: version `version` of `key` (from the remember receipt) does not "
              "belong there. Recorded as events, never an edit: the value it replaced comes back, the statement "
              "moves to a key of its own, or a conflict is settled. Returns the new decision.",
    "relate": "Record who or what is in the user's life and how: `entity` is the `relation_type` of the user (or of "
              "`of`, another entity): sister, wife, friend, manager_of, doctor_of, works_at, lives_in, ... A new name "
              "creates the entity (aliases like \"my sister\" name it too). For a single-valued type (manager_of, "
              "wife, lives_in) a new entity replaces the old one from valid_from, and the old one stays in history.",
    "relations": "The user's relations walked 1-3 `hops` from the user (or `entity`): each with its path "
                 "(user -> Anna -> Berlin), type, valid range and status. `valid_at` asks who it was at a date "
                 "(\"who was my manager on 2024-03-01\"), `as_of` as the ledger believed then. Relations labelled "
                 "sensitive (doctor_of: health) are withheld unless allow_sensitive names the label.",
    "correct_relation": "Correct a relation: `entity` is the `relation_type` and the one recorded never was (history "
                        "keeps it as misreported). For a multi-valued type (friend, member_of) `was` names the wrong "
                        "one.",
    "unrelate": "End a relation: withdrawn entirely, or with `valid_to` true only until then (\"Dana left in May\"). "
                "`entity` may be left out when the type has one current entity.",
    "entities": "The people, pets, places and organisations known in the user's life: id, kind, name, aliases.",
    "identity_link": "Link the user and `other`, two user ids of one person (the app's and the web's): `confirmed` "
                     "makes a recall of either also search the other's memories (each hit names its user_id); "
                     "`may_be` is shown as such and merges nothing. Never link on a guess: ask the user.",
    "erase": "DESTRUCTIVE and irreversible: erase everything about the user (their key is destroyed, every "
             "projection purged). `confirm` must repeat the user id. With `agent_id` and no user: that agent's own "
             "memories (never what it wrote about users), `confirm` repeating the agent id.",
    "forget": "DESTRUCTIVE and irreversible: shred one fact's text and value (every version of `key`, or `version` "
              "alone; its per-fact key is destroyed); its history keeps only that it existed, when and by whom. "
              "`confirm` must repeat the key.",
    "forget_scope": "DESTRUCTIVE and irreversible: shred every version written by `agent_id` and / or in `run_id` "
                    "(of `key` only, when given); history keeps only that they existed. `confirm` must repeat the "
                    "scope: the agent_id, the run_id, or agent/run.",
}


def bad_input_text(exc: BadInput) -> str:
    return text_of(for_face(exc, "mcp"))


def key_scope(ctx: ToolContext | None) -> Any:
    """The database scope of an MCP request (``projections.db.request_scope``): the key's users, or every user
    over stdio and in process, where no key is used."""
    p = principal_of(ctx)
    return request_scope(None if p is None else p.scope)


def principal_of(ctx: ToolContext | None) -> Principal | None:
    """The API key's principal of an MCP request over HTTP (None over stdio or in process)."""
    if ctx is None:
        return None
    try:
        request = ctx.request_context.request
    except (ValueError, AttributeError):
        return None
    scope = getattr(request, "scope", None)
    if not isinstance(scope, dict):
        return None
    return (scope.get("state") or {}).get(PRINCIPAL_STATE)


class UserPolicy:
    """Which user a call may touch: pinned user, API key, or (stdio) anyone."""

    def __init__(self, pinned: str | None = None, require_key: bool = False) -> None:
        self.pinned = check_user_id(pinned, "--user") if pinned is not None else None
        self.require_key = require_key

    def resolve(self, user_id: str | None, principal: Principal | None, agent: str | None = None) -> str:
        """The user a call touches: ``user_id`` as the pin and the key allow, or, given ``agent`` (the call's
        ``agent_id`` or ``actor``) and no user (or the agent's own id back from a receipt), that agent's own id
        (``~agent/A``) when the server is unpinned and the caller may read every user (stdio, or an admin key
        without users) or holds a key limited to that agent (given no user: when the key holds no user).

        Raises:
            BadInput: ``user_id`` missing, malformed, or not the pinned user; ``agent_id`` malformed.
            PermissionError: the key does not hold the user, or no key where one is required.
        """
        if agent is not None and self.pinned is None and (user_id is None or user_id == space_of(agent)):
            if (principal is None and not self.require_key) or (principal is not None and principal.all_users) or (
                    # a key limited to this agent: by its own id passed back, or with no user when it holds none
                    principal is not None and principal.agent == agent and (user_id is not None or
                                                                            not principal.users)):
                return space_of(check_identifier(agent, "agent_id"))
        if user_id is not None:
            user_id = check_user_id(user_id)
        if self.pinned is not None:
            if user_id is not None and user_id != self.pinned:
                raise BadInput("user_id", f"this server is pinned to user {self.pinned!r}",
                               "omit user_id (or pass the pinned user)")
            user_id = self.pinned
        if principal is not None:
            if user_id is None:
                if principal.all_users or len(principal.users) != 1:
                    raise BadInput("user_id", "missing, and this API key holds more than one user",
                                   "name the user whose memory to use")
                (user_id,) = principal.users
            if not principal.allows(user_id):
                raise PermissionError(f"user_id: this API key does not hold user {user_id!r} (fix: use a key "
                                      "created with --user for that user)")
            return user_id
        if self.require_key:
            raise PermissionError("no API key on this request (fix: send Authorization: Bearer <key>)")
        if user_id is None:
            raise BadInput("user_id", "missing", "name the user whose memory to use (or start the server with "
                           "--user)")
        return user_id

    def resolve_as(self, field: str, user_id: str, principal: Principal | None, pinned_fix: str | None = None) -> str:
        """:meth:`resolve` for another user a call names (``also``, ``other``): the same rule, its errors naming
        ``field`` (``pinned_fix``: the fix when the server is pinned to another user)."""
        try:
            return self.resolve(user_id, principal)
        except BadInput as exc:
            fix = pinned_fix if pinned_fix and "pinned" in exc.problem else exc.fix
            raise BadInput(field, exc.problem, fix) from None
        except PermissionError as exc:
            raise PermissionError(str(exc).replace("user_id:", f"{field}:", 1)) from None

    def holds(self, user_id: str, principal: Principal | None) -> bool:
        """Whether a call may read ``user_id`` under :meth:`resolve`'s rule (a confirmed identity link's other id)."""
        try:
            self.resolve(user_id, principal)
        except (BadInput, PermissionError):
            return False
        return True

    @staticmethod
    def check_labels(labels: list[str] | None, principal: Principal | None) -> None:
        if principal is None or not labels:
            return
        allowed = sensitivity.check_allow_sensitive(labels)
        missing = sorted(allowed - principal.allow_sensitive)
        if missing:
            raise PermissionError(f"allow_sensitive: this API key may not let in {', '.join(missing)} (fix: use an "
                                  f"API key granted the label {missing[0]}; the operator grants it when creating "
                                  "the key)")


def _tool_error(exc: BaseException, model: Any = None) -> ToolError:
    """A refusal as a tool error worded for MCP: ``<argument>: <problem> (fix: <fix>)``, CLI flags and commands
    named as the tool's arguments and tools (:mod:`memledger.servers.wording`)."""
    if isinstance(exc, BadInput):
        return ToolError(text_of(for_face(exc, "mcp", model)))
    if isinstance(exc, ValidationError):
        return ToolError(text_of(from_validation(exc.errors(), "mcp", model)))
    if isinstance(exc, PermissionError):
        return ToolError(f"refused: {exc}")
    if isinstance(exc, MemledgerError):
        return ToolError(f"{type(exc).__name__}: {exc}")
    if isinstance(exc, NotImplementedError):
        return ToolError(str(exc))
    raise exc


class _RawArguments(ArgModelBase):
    """The SDK's argument model of every memledger tool: it passes the caller's arguments through untouched, so the
    tool's own argument model (``extra="forbid"``) validates them and words the refusal (an unknown argument such
    as ``observedAt`` is refused, never dropped; the SDK's model ignored it and dumped pydantic's text otherwise).
    The published input schema is still the tool's argument model's."""

    model_config = ConfigDict(extra="allow", arbitrary_types_allowed=True)

    def model_dump_one_level(self) -> dict[str, Any]:
        return dict(self.__pydantic_extra__ or {})


def _register(server: MCPServer, name: str, args_model: type, result_type: Any,
              body: Callable[[Any, Any, Principal | None], Any], policy: UserPolicy,
              annotations: ToolAnnotations | None = None, *, lock: Any) -> None:
    """Register tool ``name``: flat parameters from ``args_model``'s fields (so the input schema is that model's),
    the result model as the output schema, and the user policy and error mapping around ``body``."""
    params, hints = [], {}
    for fname, f in args_model.model_fields.items():
        ann = Annotated[(f.annotation, *f.metadata, Field(description=f.description))]
        default = inspect.Parameter.empty if f.is_required() else f.get_default(call_default_factory=True)
        params.append(inspect.Parameter(fname, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=ann))
        hints[fname] = ann
    params.append(inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=ToolContext))
    hints["ctx"] = ToolContext
    hints["return"] = result_type

    parser: Any = None  # the SDK's pre-parse of JSON-in-a-string arguments (set once the tool is registered)

    def call(kwargs: dict[str, Any], principal: Principal | None) -> Any:
        try:
            if parser is not None:
                kwargs = parser.pre_parse_json(kwargs)
            args = limit_tool_call(name, args_model.model_validate(kwargs), principal)  # a key limited to an agent
            agent = getattr(args, "agent_id", None) or getattr(args, "actor", None)
            user = policy.resolve(getattr(args, "user_id", None), principal, agent if isinstance(agent, str) else None)
            refuse_unscoped(name, user, principal)
            # an MCP tool runs in the session's task, not the HTTP request's: the key's scope is set here
            with request_scope(None if principal is None else principal.scope), opened_if_own(user):
                return body(user, args, principal)
        except Exception as exc:  # noqa: BLE001 - mapped to a tool error, or re-raised (a crash)
            raise _tool_error(exc, args_model) from exc

    # A read (about a millisecond) runs on the event loop when the ledger is free: no worker-thread hop, which
    # under CPU contention costs a scheduling round trip; a write, or a read behind a busy ledger, runs in a thread.
    inline = bool(annotations is not None and annotations.read_only_hint)

    async def tool(**kwargs: Any) -> Any:
        ctx = kwargs.pop("ctx", None)
        principal = principal_of(ctx)
        if inline and lock.acquire(blocking=False):
            try:
                return call(kwargs, principal)
            finally:
                lock.release()
        return await anyio.to_thread.run_sync(call, kwargs, principal)

    tool.__name__ = name
    tool.__doc__ = DESCRIPTIONS[name]
    tool.__signature__ = inspect.Signature(params, return_annotation=result_type)  # type: ignore[attr-defined]
    tool.__annotations__ = hints
    server.add_tool(tool, name=name, description=DESCRIPTIONS[name], annotations=annotations,
                    structured_output=True)
    try:  # publish the output schema lean (the SDK reads fn_metadata.output_schema live; private but guarded)
        meta = server._tool_manager.get_tool(name).fn_metadata
        if meta.output_schema is not None:
            meta.output_schema = lean_schema(meta.output_schema)
        # arguments reach `call` as sent (the input schema was published from the signature already)
        parser = FuncMetadata(arg_model=meta.arg_model)
        meta.arg_model = _RawArguments
    except AttributeError:  # pragma: no cover - another SDK layout: the schema stays as generated
        pass


def lean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The same JSON Schema without indirection: ``$ref``s inlined, ``anyOf`` of bare types collapsed to a type list
    (``["string", "null"]``), titles dropped. A client validates every structured result against the tool's
    output schema (the ``mcp`` client with jsonschema); this form validates the same documents in less time
    (docs/interfaces.md, bench_serve)."""
    defs = schema.get("$defs", {})

    def walk(node: Any, depth: int = 0) -> Any:
        if isinstance(node, list):
            return [walk(x, depth) for x in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/") and depth < 20:
            target = dict(defs.get(ref.split("/")[-1], {}))
            target.update({k: v for k, v in node.items() if k != "$ref"})
            return walk(target, depth + 1)
        out = {}
        for k, v in node.items():
            if k in ("$defs", "title"):
                continue
            out[k] = v if k in ("properties", "required", "enum", "const", "default", "examples") and not isinstance(
                v, dict) else (walk(v, depth) if k != "properties" else {p: walk(x, depth) for p, x in v.items()})
        any_of = out.get("anyOf")
        if isinstance(any_of, list) and any_of and all(isinstance(x, dict) and set(x) == {"type"} and
                                                       isinstance(x["type"], str) for x in any_of):
            out.pop("anyOf")
            out["type"] = [x["type"] for x in any_of]
        return out

    return walk(schema)


def build_mcp(service: Service, *, user: str | None = None, allow_destructive: bool = False,
              require_key: bool = False) -> MCPServer:
    """The MCP server on ``service``'s ledger.

    Args:
        user: pin the server to this user (``--user``).
        allow_destructive: also offer ``erase`` (and ``forget`` if the ledger has it), marked destructive.
        require_key: refuse calls that carry no API-key principal (MCP over HTTP).
    """
    policy = UserPolicy(user, require_key)
    # log_level WARNING: the SDK logs a failed tool's message at INFO, and that message may quote the caller's data
    server = MCPServer("memledger", instructions=INSTRUCTIONS, version="0.1.0", log_level="WARNING")
    ro = ToolAnnotations(readOnlyHint=True, destructiveHint=False, openWorldHint=False)
    write = ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=False)
    s = service

    def recall(u: str, a: RecallArgs, p: Principal | None) -> RecallResult:
        policy.check_labels(a.allow_sensitive, p)
        for other in a.also or []:  # the same rule as user_id: the pin and the key must hold each user searched
            policy.resolve_as("also", other, p, "search the pinned user only (leave also out)")
        return s.recall(u, s.linked_also(u, a, lambda other: policy.holds(other, p)))

    def context(u: str, a: ContextArgs, p: Principal | None) -> LedgerContext:
        policy.check_labels(a.allow_sensitive, p)
        return s.context(u, a)

    def granted(read: Callable[[str, Any], Any]) -> Callable[[str, Any, Principal | None], Any]:
        """A read tool's body: the labels its call asks for (``allow_sensitive``) checked against the API key, then
        the read, which withholds every label not asked for (memledger/sensitivity.py ``gate``)."""

        def body(u: str, a: Any, p: Principal | None) -> Any:
            policy.check_labels(a.allow_sensitive, p)
            return read(u, a)

        return body

    def reg(name: str, args_model: type, result_type: Any, body: Callable[[Any, Any, Principal | None], Any],
            annotations: ToolAnnotations) -> None:
        _register(server, name, args_model, result_type, body, policy, annotations, lock=s.lock)

    remember_type = _remember_result_type(service)
    reg("remember", RememberArgs, remember_type,  # a key limited to an agent sees only its own memories weighed
        lambda u, a, p: narrow_related(s.ml, s.remember(u, a), getattr(p, "agent", None)), write)
    reg("recall", RecallArgs, RecallResult, recall, ro)
    # every read showing fact values: labels the call asks for must be the key's; the rest are withheld
    reg("profile", ProfileArgs, Profile, granted(lambda u, a: s.profile(u, a.after, a.allow_sensitive, a.purpose,
                                                                        a.agent_id, a.run_id)), ro)
    reg("history", HistoryArgs, HistoryResult,
        granted(lambda u, a: s.history(u, a.key, a.after, a.allow_sensitive, a.purpose, a.agent_id, a.run_id)), ro)
    reg("believed", BelievedArgs, Beliefs, granted(s.believed), ro)
    reg("true_at", TrueAtArgs, Beliefs, granted(s.true_at), ro)
    reg("diff", DiffArgs, Diff, granted(s.diff), ro)
    reg("audit", AuditArgs, sensitivity._audit_models()[0], granted(s.audit), ro)
    reg("correct", CorrectArgs, Receipt, lambda u, a, p: s.correct(u, a.key, a), write)
    reg("retract", RetractArgs, Receipt, lambda u, a, p: s.retract(u, a.key, a), write)
    if callable(getattr(service.ml, "unlink", None)):
        reg("unlink", UnlinkArgs, remember_type, lambda u, a, p: s.unlink(u, check_key(a.key), a.version), write)
    reg("context", ContextArgs, LedgerContext, context, write)
    if callable(getattr(service.ml, "relate", None)):
        from ..relations import Entities, RelationReceipt, Relations
        from .models import CorrectRelationArgs, EntitiesArgs, RelateArgs, RelationsArgs, UnrelateArgs

        reg("relate", RelateArgs, RelationReceipt, lambda u, a, p: s.relate(u, a), write)
        reg("correct_relation", CorrectRelationArgs, RelationReceipt, lambda u, a, p: s.correct_relation(u, a), write)
        reg("unrelate", UnrelateArgs, RelationReceipt, lambda u, a, p: s.unrelate(u, a), write)
        reg("relations", RelationsArgs, Relations, granted(s.relations), ro)
        reg("entities", EntitiesArgs, Entities, granted(s.entities), ro)
        from ..identity import IdentityReceipt
        from .models import IdentityLinkArgs

        def identity_link(u: str, a: IdentityLinkArgs, p: Principal | None) -> IdentityReceipt:
            policy.resolve_as("other", a.other, p)  # the same rule as user_id: the pin and the key must hold it
            return s.identity_link(u, a)

        reg("identity_link", IdentityLinkArgs, IdentityReceipt, identity_link, write)
    reg("resume", ResumeArgs, Resume, lambda u, a, p: s.resume(u, now=a.now, expiry_hours=a.expiry_hours), ro)
    reg("log_message", LogMessageArgs, SessionReceipt, lambda u, a, p: s.log_message(u, a.session_id, a), write)
    reg("update_card", UpdateCardArgs, SessionReceipt, lambda u, a, p: s.update_card(u, a.session_id, a), write)
    reg("end_session", EndSessionArgs, SessionReceipt,
        lambda u, a, p: s.end_session(u, a.session_id, a.observed_at, a.close_memories), write)
    if allow_destructive:
        destructive = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=True,
                                      openWorldHint=False)

        def erase(u: str, a: EraseArgs, p: Principal | None) -> Any:
            # irreversible: never on a plain key, a key limited to an agent included
            if p is not None and not p.admin:
                raise PermissionError("erase needs an admin API key (fix: call it with a key created as an admin key)")
            if a.agent_id is not None and u != space_of(a.agent_id):
                raise BadInput("agent_id", f"erase destroys a whole user (here {u!r}) and cannot be limited to an "
                               "agent", f"leave agent_id out to erase user {u!r}; for agent {a.agent_id!r}'s own "
                               "memories give agent_id with no user_id, on a server not pinned to a user (over HTTP "
                               "with an admin key holding every user); forget_scope shreds what an agent wrote about "
                               "a user")
            named = a.agent_id if a.agent_id is not None else u  # an agent's own memories: the agent id
            if a.confirm != named:
                what = "agent whose own memories are" if a.agent_id is not None else "user"
                raise BadInput("confirm", f"{a.confirm!r} is not the {what} being erased",
                               f"pass confirm={named!r} to erase {'them' if a.agent_id is not None else 'that user'} "
                               "irreversibly")
            try:
                return s.erase(u)
            except BadInput as exc:
                if a.agent_id is None or not exc.problem.startswith("nothing is held"):
                    raise
                raise BadInput("agent_id", f"agent {a.agent_id!r} has no own memories (nothing was written with "
                               f"agent_id {a.agent_id!r} and no user)", "check the agent id: erasing burns it for "
                               "good") from None

        reg("erase", EraseArgs, erasure.ErasureReceipt, erase, destructive)
        if service.has_forget():
            from .models import ForgetArgs

            def forget(u: str, a: Any, p: Any) -> Any:
                # the agent names the key twice, as erase names the user twice: a shredding is never undone
                if a.confirm != a.key:
                    raise BadInput("confirm", f"{a.confirm!r} is not the key being forgotten",
                                   f"pass confirm={a.key!r} to forget that fact irreversibly")
                if p is not None and not p.admin:  # irreversible, as erase: never on a plain key
                    raise PermissionError("forget needs an admin API key (fix: call it with a key created as an admin key)")
                return s.ml.forget(u, a.key, version=a.version, actor="mcp" if p is None else f"mcp key {p.key_id}")

            reg("forget", ForgetArgs, _return_type(type(service.ml).forget), forget, destructive)
        if callable(getattr(service.ml, "forget_scope", None)):
            from .models import ForgetScopeArgs

            def forget_scope(u: str, a: Any, p: Any) -> Any:
                # the agent names the scope twice, as forget names the key twice: a shredding is never undone
                said = "/".join(x for x in (a.agent_id, a.run_id) if x)
                if not said or a.confirm != said:
                    raise BadInput("confirm", f"{a.confirm!r} is not the scope being forgotten",
                                   f"pass confirm={said!r} (the agent_id, the run_id, or agent/run) to forget it "
                                   "irreversibly" if said else "name agent_id, run_id or both, then repeat it")
                if p is not None and not p.admin:  # irreversible, as forget: never on a plain key
                    raise PermissionError("forget_scope needs an admin API key (fix: call it with a key created as "
                                          "an admin key)")
                return s.ml.forget_scope(u, agent_id=a.agent_id, run_id=a.run_id, key=a.key,
                                         actor="mcp" if p is None else f"mcp key {p.key_id}")

            reg("forget_scope", ForgetScopeArgs, _return_type(type(service.ml).forget_scope), forget_scope, destructive)
    _register_resources(server, service, policy)
    return server


def _return_type(fn: Any) -> Any:
    from memledger.api import annotation_namespace  # the verbs' modules, which memledger.api imports lazily

    try:
        namespace = {**annotation_namespace(), **getattr(fn, "__globals__", {})}  # the method's own module first
        hint = typing.get_type_hints(fn, globalns=namespace).get("return")
    except Exception:  # noqa: BLE001 - a forward reference we cannot resolve: a plain object schema
        hint = None
    return hint if isinstance(hint, type) and hint is not Any else dict[str, Any]


def _remember_result_type(service: Service) -> Any:
    """``RememberReceipt`` (ledger/schemas.py) when this ledger has ``remember``; else the declared return type."""
    import ledger.schemas

    model = getattr(ledger.schemas, "RememberReceipt", None)
    if service.has_remember() and isinstance(model, type):
        return model
    return _return_type(type(service.ml).remember) if service.has_remember() else dict[str, Any]


def _register_resources(server: MCPServer, service: Service, policy: UserPolicy) -> None:
    def check(user_id: str, ctx: ToolContext) -> str:
        # A refusal is the caller's (bad user id, a user the key or the pin does not hold): the SDK answers
        # ResourceNotFoundError with -32602 (invalid params), any other ResourceError with -32603 (internal error).
        try:
            p = principal_of(ctx)
            if getattr(p, "agent", None) is not None:  # a resource takes no agent_id: it cannot be narrowed
                raise PermissionError(f"this API key is limited to agent {p.agent!r}, and a resource cannot be "
                                      "limited to an agent (fix: use the tool of the same name)")
            return policy.resolve(user_id, p)
        except (BadInput, PermissionError) as exc:
            raise ResourceNotFoundError(bad_input_text(exc) if isinstance(exc, BadInput) else f"refused: {exc}") \
                from None

    @server.resource("memledger://users/{user_id}/profile", mime_type="application/json",
                     description="The user's current facts (profile --json; facts labelled sensitive "
                                 "withheld: use the profile tool with allow_sensitive to see them).")
    def profile_resource(user_id: str, ctx: ToolContext) -> str:
        u = check(user_id, ctx)
        with key_scope(ctx):
            return json.dumps(service.profile(u).model_dump(mode="json"), ensure_ascii=False)

    @server.resource("memledger://users/{user_id}/history/{key}", mime_type="application/json",
                     description="Every version of one fact, in log order (history --json; labelled versions "
                                 "withheld: use the history tool with allow_sensitive).")
    def history_resource(user_id: str, key: str, ctx: ToolContext) -> str:
        u = check(user_id, ctx)
        try:
            with key_scope(ctx):
                rows: list[HistoryRow] = service.history(u, key).rows
        except BadInput as exc:
            raise ResourceNotFoundError(bad_input_text(exc)) from None
        return json.dumps([r.model_dump(mode="json") for r in rows], ensure_ascii=False)

    @server.resource("memledger://users/{user_id}/context", mime_type="text/plain",
                     description="The prompt-ready context of the user (context; sensitive facts left out).")
    def context_resource(user_id: str, ctx: ToolContext) -> str:
        from .models import ContextBody

        u = check(user_id, ctx)
        with key_scope(ctx):
            return service.context(u, ContextBody()).text


# -- stdio: every request gets an answer ---------------------------------------------------------------------------
def unreadable_reply(exc: Exception) -> Any:
    """The JSON-RPC error answering a stdio line the SDK could not read (``exc``, what its reader passes on), or None
    for a notification (never answered, JSON-RPC 2.0 section 4.1).

    The SDK's stdio reader hands such lines to the server as exceptions, which it only logs: a client that sent
    a JSON-escaped lone surrogate (``"\\ud800"``, valid JSON the SDK's parser refuses) or a line that is not JSON
    would wait for an answer forever. Codes are JSON-RPC 2.0's: -32700 (not JSON; id null), -32602
    (a lone surrogate in the request; its id), -32600 (JSON, but not a JSON-RPC message; its id when it has one)."""
    from mcp import types

    errors = exc.errors() if isinstance(exc, ValidationError) else []
    raw = errors[0].get("input") if errors else None
    obj: Any = raw if isinstance(raw, dict) else None  # a message that parsed but is not JSON-RPC: its fields
    if isinstance(raw, str):
        try:
            obj = json.loads(raw)
        except ValueError:
            obj = None
    rid = obj.get("id") if isinstance(obj, dict) else None
    if isinstance(rid, bool) or not isinstance(rid, (str, int)):
        rid = None
    if isinstance(obj, dict) and "id" not in obj and "method" in obj:
        return None
    if obj is None:
        code, message = types.PARSE_ERROR, "Parse error: the line is not JSON (one JSON-RPC message per line)"
    elif isinstance(raw, str) and _has_lone_surrogate(obj):
        code, message = types.INVALID_PARAMS, ("the request holds a lone surrogate code point (a \\ud800-\\udfff "
                                               "escape without its pair): send text as valid Unicode")
    else:
        code, message = types.INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 message"
    return types.JSONRPCError(jsonrpc="2.0", id=rid, error=types.ErrorData(code=code, message=message))


def _has_lone_surrogate(obj: Any) -> bool:
    if isinstance(obj, str):
        return any("\ud800" <= ch <= "\udfff" for ch in obj)
    if isinstance(obj, dict):
        return any(_has_lone_surrogate(k) or _has_lone_surrogate(v) for k, v in obj.items())
    if isinstance(obj, list):
        return any(_has_lone_surrogate(v) for v in obj)
    return False


def run_stdio(server: MCPServer) -> None:
    """Serve ``server`` over stdin/stdout (``memledger serve mcp``) as the SDK's ``run("stdio")`` does, except that a
    line the SDK cannot read is answered with :func:`unreadable_reply` instead of being dropped."""
    from mcp.server.stdio import stdio_server
    from mcp.shared.message import SessionMessage

    lowlevel = server._lowlevel_server  # what the SDK's own run_stdio_async drives (mcp 2.x MCPServer)

    async def serve() -> None:
        async with stdio_server() as (read_stream, write_stream):
            send, receive = anyio.create_memory_object_stream[Any](0)

            async def pump() -> None:
                async with send:
                    async for item in read_stream:
                        if isinstance(item, Exception):
                            reply = unreadable_reply(item)
                            if reply is not None:
                                await write_stream.send(SessionMessage(reply))
                            continue
                        await send.send(item)

            async with anyio.create_task_group() as tg:
                tg.start_soon(pump)
                await lowlevel.run(receive, write_stream, lowlevel.create_initialization_options())
                tg.cancel_scope.cancel()

    anyio.run(serve)
