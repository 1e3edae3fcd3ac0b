"""Argument and result models of the agent faces: one pydantic model per verb, shared by MCP and HTTP.

The HTTP routes take the ``*Body`` models as JSON bodies (the user comes from the path); the MCP tools take the
same fields plus ``user_id`` (the ``*Args`` models). Instants are ISO 8601 strings *with an offset*: a naive one is
refused by the model, so the tool never runs and the route answers 422. Results are the ledger's own read models
(``Profile``, ``Receipt``, ``Beliefs``, ...), whose ``model_dump(mode="json")`` is the CLI's ``--json``; the few
wrappers below give list results a named field (MCP structured output must be an object).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, create_model, field_validator

from ledger.errors import BadInput
from ledger.schemas import HistoryRow
from ledger.timeutil import parse_instant

from ..requests import ContextRequest, RememberRequest, SearchRequest
from ..requests.base import NumbersNotBooleans, numeric
from ..scopes import AGENT_HELP, RUN_HELP
from ..search import SearchHit


def _instant(value: str | None) -> str | None:
    if value is None:
        return None
    try:
        parse_instant(value, "instant")
    except BadInput as exc:
        # the field's name is in pydantic's location; say the problem and the fix
        raise ValueError(f"{exc.problem}; fix: {exc.fix or 'give an ISO 8601 instant with an offset'}") from None
    return value


Instant = Annotated[str, AfterValidator(_instant)]
Axis = Literal["system", "observed"]
Source = Literal["user_statement", "agent_inference", "external_import", "system_feedback"]

_USER = ("Whose memory. Optional when the server is pinned to one user (--user) or the API key holds exactly one "
         "user; otherwise required, except with agent_id alone: that agent's own memories.")
_MIN_CONFIDENCE = ("Leave out memories recorded with a lower confidence (0..1; hedged statements are recorded at "
                   "0.6 at most).")
_AFTER = ("A log position from an earlier receipt: answer only once every projection includes it "
          "(read-your-writes across processes).")


class _Model(NumbersNotBooleans):
    """Every argument and body model: no field but its own, and a number field refuses true and false."""

    model_config = ConfigDict(extra="forbid")


class JsonNumbers(BaseModel):
    """Mixed into an HTTP body model: each of its numbers must be sent as a JSON number, ``"5"`` is refused naming
    its field, not read as 5. MCP tool arguments stay lenient (models writing tool calls often quote numbers); the
    GET routes convert their query parameters before building the models."""

    @field_validator("*", mode="before")
    @classmethod
    def _json_numbers(cls, value: Any, info: Any) -> Any:
        if isinstance(value, str) and numeric(cls.model_fields[info.field_name].annotation):
            raise ValueError("is a string; send a JSON number")
        return value


class UserArg(_Model):
    user_id: str | None = Field(None, description=_USER)


_ALLOW = ("Sensitivity labels (health, finance, ...) whose facts this read may show; the API key must hold each "
          "(memledger keys create --allow-sensitive LABEL). A labelled fact not asked for is withheld: value and text "
          "null, `withheld` names its label. Each one shown is recorded as a disclosure.")
_PURPOSE = "Why the labelled facts are shown (kept with each disclosure)."


class GrantArgs(_Model):
    """The sensitivity grant every read that shows fact values takes (docs/erasure.md, "Labels gate every read")."""

    allow_sensitive: list[str] | None = Field(None, description=_ALLOW)
    purpose: str | None = Field(None, description=_PURPOSE)


# -- writes ------------------------------------------------------------------------------------------------------
class Provenance(_Model):
    agent_id: str | None = Field(None, description="The agent writing it: its scope, recorded as the actor (the same "
                                 "field as actor).")
    run_id: str | None = Field(None, description="The run it is written in: its scope, recorded as the session_id "
                               "(the same field as session_id).")
    source: Source | None = Field(None, description="Who said it: user_statement (default) | agent_inference | "
                                  "external_import | system_feedback.")
    source_ref: str | None = Field(None, description="Message or document id it came from.")
    session_id: str | None = Field(None, description="Session it was said in.")
    actor: str | None = Field(None, description="Who or what recorded it.")
    trace_id: str | None = Field(None, description="Trace id of the agent turn.")
    idempotency_key: str | None = Field(None, description="A retried command with the same key records nothing new "
                                        "(HTTP: the Idempotency-Key header fills it).")


class AssertBody(Provenance):
    value: Any = Field(description="The fact's JSON value.")
    text: str | None = Field(None, description="The human sentence of the fact.")
    observed_at: Instant | None = Field(None, description="When the source said it (ISO 8601 with offset).")
    valid_from: Instant | None = Field(None, description="Start of validity (default observed_at).")
    valid_to: Instant | None = Field(None, description="End of validity, exclusive (default open).")
    derived_from: list[str] | None = Field(None, description="Event ids it was derived from.")
    confidence: float | None = Field(None, ge=0, le=1, description="0..1 (default by source).")
    role: dict[str, Any] | None = Field(None, description="{role, sub_role, task_id}: which hat the agent wore.")
    reason: str | None = Field(None, description="Why (kept in history).")
    sensitivity: str | None = Field(None, description="Label such as health, finance.")


class CorrectBody(Provenance):
    value: Any = Field(description="The right value: it replaces the current one over its whole valid time.")
    reason: str | None = Field(None, description="Why (kept in history: 'misheard').")
    text: str | None = Field(None, description="The human sentence of the corrected fact.")
    observed_at: Instant | None = Field(None, description="When the correction was said (ISO 8601 with offset).")
    confidence: float | None = Field(None, ge=0, le=1, description="0..1 (default by source).")
    sensitivity: str | None = Field(None, description="Label such as health, finance.")


class RetractBody(Provenance):
    reason: str | None = Field(None, description="Why it is withdrawn (kept in history).")
    valid_to: Instant | None = Field(None, description="True only until then (default: withdrawn entirely).")
    observed_at: Instant | None = Field(None, description="When the retraction was said (ISO 8601 with offset).")


class UnlinkBody(_Model):
    version: int = Field(ge=1, description="The version of the fact that a `remember` filed there wrongly (its "
                         "receipt's version): it is undone with events; history keeps everything.")


class CommandsBody(_Model):
    commands: list[dict[str, Any]] = Field(description="Fact commands, each {op: assert|correct|retract, user_id, "
                                           "key, value, ...} with the fields of the single routes; all or nothing.")


# -- reads -------------------------------------------------------------------------------------------------------
class HttpAssertBody(JsonNumbers, AssertBody):
    """The assert route's body, its numbers sent as JSON numbers."""


class HttpCorrectBody(JsonNumbers, CorrectBody):
    """The correction route's body, its numbers sent as JSON numbers."""


class HttpUnlinkBody(JsonNumbers, UnlinkBody):
    """The unlink route's body, its numbers sent as JSON numbers."""


def from_request(name: str, request: type[BaseModel], *, omit: tuple[str, ...] = (),
                 wire: dict[str, tuple[Any, Any]] | None = None, notes: dict[str, str] | None = None,
                 doc: str | None = None) -> type[BaseModel]:
    """An argument model of the faces made from a verb's request model (memledger/requests.py): each field of
    ``request`` but those in ``omit``, with its description, default and constraints, so a field exists in one
    place. ``wire``: ``{field: (annotation, default)}`` where JSON spells the field otherwise than Python (an instant
    is a string, a set of labels a list); ``notes``: words added to a field's description on the faces. The
    request still checks every value when the face builds it from the model's fields."""
    wire, notes = wire or {}, notes or {}
    fields: dict[str, Any] = {}
    for fname, info in request.model_fields.items():
        if fname in omit:
            continue
        description = (info.description or "") + notes.get(fname, "")
        if fname in wire:
            annotation, default = wire[fname]
        else:
            annotation = Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation
            default = ... if info.is_required() else info.default
        fields[fname] = (annotation, Field(default, description=description))
    return create_model(name, __base__=_Model, __doc__=doc, __module__=__name__, **fields)


#: how JSON spells the request fields whose Python form is another (memledger/requests.py)
_WIRE: dict[str, tuple[Any, Any]] = {
    "as_of": (Instant | None, None),
    "after": (Annotated[int | None, Field(ge=0)], None),
    "allow_sensitive": (list[str] | None, None),
    "also": (list[str] | None, None),
    "exclude_source": (list[Source] | None, None),
    "role_bonus": (Annotated[float | None, Field(ge=0, le=1)], None),
}

SearchBody = from_request(
    "SearchBody", SearchRequest, omit=("user_id", "timeout"), wire=_WIRE,
    notes={"also": " The API key must hold each.", "allow_sensitive": " The API key must hold each label.",
           },
    doc="A search's options (:class:`memledger.requests.SearchRequest` without ``user_id``, which the path or the "
        "tool's ``user_id`` gives, and ``timeout``, which the server bounds).")


class HttpSearchBody(JsonNumbers, SearchBody):
    """The search route's body: :class:`SearchBody`, its numbers sent as JSON numbers (:class:`JsonNumbers`)."""


ContextBody = from_request(
    "ContextBody", ContextRequest, omit=("user_id", "timeout"),
    wire={**_WIRE, "now": (Instant | None, None), "budget": (Annotated[int, Field(ge=1, le=1_000_000)], 2000)},
    notes={"allow_sensitive": " The API key must hold each label."},
    doc="A context's options (:class:`memledger.requests.ContextRequest` without ``user_id``, which the path or the "
        "tool's ``user_id`` gives, and ``timeout``, which the server bounds).")


class HttpContextBody(JsonNumbers, ContextBody):
    """The context route's body: :class:`ContextBody`, its numbers sent as JSON numbers."""


RememberBody = from_request(
    "RememberBody", RememberRequest, omit=("user_id",),
    wire={"observed_at": (Instant | None, None), "valid_from": (Instant | None, None),
          # the faces give the role's name; the Python API may give the whole RoleContext
          "role": (str | None, None)},
    notes={"idempotency_key": " (HTTP: the Idempotency-Key header fills it.)"},
    doc="A statement to remember (:class:`memledger.requests.RememberRequest` without ``user_id``, which the path or "
        "the tool's ``user_id`` gives).")


class LogMessageBody(_Model):
    role: Literal["user", "assistant", "system", "tool"] = Field(description="Who spoke.")
    message_id: str = Field(description="Idempotency: the same id is logged once.")
    text: str = Field(description="The message text.")
    speaker: str | None = Field(None, description="Who spoke (beyond the role).")
    observed_at: Instant | None = Field(None, description="When it was said (ISO 8601 with offset).")


class CardBody(_Model):
    task: str | None = Field(None, description="Name (or rename) the card's task.")
    progress: str | None = Field(None, description="Where the task stands.")
    add_decisions: list[str] = Field(default_factory=list)
    remove_decisions: list[str] = Field(default_factory=list)
    replace_decisions: list[str] = Field(default_factory=list, description="'OLD=>NEW' items.")
    add_questions: list[str] = Field(default_factory=list)
    remove_questions: list[str] = Field(default_factory=list)
    replace_questions: list[str] = Field(default_factory=list, description="'OLD=>NEW' items.")
    add_actions: list[str] = Field(default_factory=list)
    remove_actions: list[str] = Field(default_factory=list)
    replace_actions: list[str] = Field(default_factory=list, description="'OLD=>NEW' items.")
    status: Literal["open", "done"] | None = Field(None, description="open | done (done: resume skips it).")
    observed_at: Instant | None = Field(None, description="ISO 8601 with offset.")


class SessionStartBody(_Model):
    task: str | None = Field(None, description="The task this session works on (inherits its open card).")
    observed_at: Instant | None = Field(None, description="ISO 8601 with offset.")
    no_memory: bool = Field(False, description="Opt out: nothing of it reaches the log.")


class SummaryBody(_Model):
    text: str = Field(description="The summary (written by the caller).")
    level: Literal["session", "span", "all"] = "session"
    covers: list[str] | None = None
    first_message_id: str | None = None
    last_message_id: str | None = None
    observed_at: Instant | None = None


class ObservedBody(_Model):
    observed_at: Instant | None = None
    close_memories: bool = Field(False, description="Ending a session: also retire the memories written in it (its "
                                 "run: facts recorded with session_id or run_id = the session), each by a "
                                 "retraction; history keeps them. The receipt lists them in closed_memories.")


# -- MCP tool arguments (the body fields plus user_id, and the key where the route has it in the path) -----------
class RememberArgs(UserArg, RememberBody):
    pass


class RecallArgs(UserArg, SearchBody):
    pass


class ScopeArgs(_Model):
    """The scopes a read is limited to (memledger/scopes.py): each one named must match, the others are free."""

    agent_id: str | None = Field(None, description=AGENT_HELP)
    run_id: str | None = Field(None, description=RUN_HELP)


class HistoryArgs(UserArg, GrantArgs, ScopeArgs):
    key: str | None = Field(None, description="One fact's dotted key (default: every fact of the user).")
    after: int | None = Field(None, ge=0, description=_AFTER)


class ProfileArgs(UserArg, GrantArgs, ScopeArgs):
    after: int | None = Field(None, ge=0, description=_AFTER)


class BelievedArgs(UserArg, GrantArgs, ScopeArgs):
    as_of: Instant = Field(description="System time (when the ledger recorded things), inclusive, ISO 8601 with "
                           "offset.")
    valid_at: Instant | None = Field(None, description="Valid time (when things were true in the world) to slice "
                                     "at (default as_of).")
    axis: Axis = Field("system", description="system: as_of is recorded time; observed: it is observed time.")
    after: int | None = Field(None, ge=0, description=_AFTER)


class TrueAtArgs(UserArg, GrantArgs, ScopeArgs):
    valid_at: Instant = Field(description="Valid-time instant, ISO 8601 with offset.")
    axis: Axis = "system"
    after: int | None = Field(None, ge=0, description=_AFTER)


class DiffArgs(UserArg, GrantArgs, ScopeArgs):
    from_as_of: Instant = Field(description="Earlier system-time instant (ISO 8601 with offset).")
    to_as_of: Instant = Field(description="Later system-time instant (ISO 8601 with offset).")
    valid_at: Instant | None = Field(None, description="Valid-time slice of both sides (default to_as_of).")
    axis: Axis = "system"
    after: int | None = Field(None, ge=0, description=_AFTER)


class AuditArgs(UserArg, GrantArgs, ScopeArgs):
    key: str | None = Field(None, description="One fact's dotted key (default every belief).")
    trace_id: str | None = Field(None, description="Only facts with an event of this trace id.")
    source_ref: str | None = Field(None, description="Only facts with an event from this source_ref.")
    as_of: Instant | None = Field(None, description="Audit the beliefs as of this instant (default now).")
    valid_at: Instant | None = None
    axis: Axis = "system"
    after: int | None = Field(None, ge=0, description=_AFTER)


class CorrectArgs(UserArg, CorrectBody):
    key: str = Field(description="The fact's dotted key, e.g. profile.birth_year.")


class RetractArgs(UserArg, RetractBody):
    key: str = Field(description="The fact's dotted key.")


class ContextArgs(UserArg, ContextBody):
    pass


class ResumeArgs(UserArg):
    now: Instant | None = Field(None, description="ISO 8601 with offset (default now).")
    expiry_hours: float = Field(48.0, gt=0, description="Older than this, ask before continuing.")


class LogMessageArgs(UserArg, LogMessageBody):
    session_id: str = Field(description="The session (started implicitly if needed).")


class UpdateCardArgs(UserArg, CardBody):
    session_id: str = Field(description="The session whose state card to patch.")


class EndSessionArgs(UserArg, ObservedBody):
    session_id: str = Field(description="The session (the run) to end.")


class UnlinkArgs(UserArg, UnlinkBody):
    key: str = Field(description="The fact's dotted key the statement was wrongly filed under.")


class EraseArgs(UserArg):
    """``erase``: everything about the user, or with ``agent_id`` and no user that agent's own memories."""

    agent_id: str | None = Field(None, description="With no user_id: erase this agent's own memories (those written "
                                 "with agent_id and no user); never the memories it wrote about users. Given with a "
                                 "user it is refused: erasure is whole-user (forget_scope shreds what an agent wrote).")
    confirm: str = Field(description="The user id again (for an agent's own memories, the agent id): erasing is "
                         "irreversible.")


class ForgetArgs(UserArg):
    """``forget``: shred one fact's text and value (every version of ``key``, or ``version`` alone)."""

    key: str = Field(description="The fact's dotted key.")
    version: int | None = Field(None, ge=1, description="Only this version (default: every version of the key).")
    confirm: str = Field(description="The key again: forgetting is irreversible.")


class ForgetScopeArgs(UserArg):
    """``forget_scope``: shred every version written by an agent and / or in a run (of ``key`` only, when given)."""

    agent_id: str | None = Field(None, description="Shred what this agent wrote.")
    run_id: str | None = Field(None, description="Shred what was written in this run; with agent_id, both must "
                               "match.")
    key: str | None = Field(None, description="Only this fact's versions in that scope (default: every fact).")
    confirm: str = Field(description="The scope again, as agent_id, run_id or both joined by '/' (agent/run): "
                         "forgetting is irreversible.")


# -- entities and relations (docs/relations.md) ---------------------------------------------------------------
class RelateBody(_Model):
    """``relate``: ENTITY is the RELATION_TYPE of the user (or of ``of``)."""

    relation_type: str = Field(description="sister, wife, friend, manager_of, doctor_of, works_at, lives_in, "
                               "member_of, owns, ... or a free type (a lowercase identifier).")
    entity: str = Field(description="The entity's name (a new one is created), alias or id.")
    of: str | None = Field(None, description="Whose relation: an entity's name, alias or id (default: the user).")
    aliases: list[str] | None = Field(None, description="Other names of the entity (\"my sister\", 我姐姐).")
    kind: Literal["person", "pet", "place", "organisation", "other"] | None = Field(
        None, description="Kind of a new entity (default by relation type).")
    text: str | None = Field(None, description="The human sentence of the relation.")
    observed_at: Instant | None = Field(None, description="When the source said it (ISO 8601 with offset).")
    valid_from: Instant | None = Field(None, description="Start of validity (default observed_at); for a "
                                       "single-valued type the previous entity's validity ends here.")
    valid_to: Instant | None = Field(None, description="End of validity, exclusive (default open).")
    source: Source | None = Field(None, description="Who said it: user_statement (default) | agent_inference | "
                                  "external_import | system_feedback.")
    source_ref: str | None = Field(None, description="Message or document id it came from.")
    session_id: str | None = Field(None, description="Session it was said in.")
    actor: str | None = Field(None, description="Who or what recorded it.")
    trace_id: str | None = Field(None, description="Trace id of the agent turn.")
    confidence: float | None = Field(None, ge=0, le=1, description="0..1 (default by source).")
    reason: str | None = Field(None, description="Why (kept in history).")
    sensitivity: str | None = Field(None, description="Label such as health (default: the type's; doctor_of is "
                                    "health).")


class _SaidBy(_Model):
    """Where a relation's correction or end came from (as on every write)."""

    observed_at: Instant | None = Field(None, description="When the source said it (ISO 8601 with offset).")
    source: Source | None = Field(None, description="Who said it (default user_statement).")
    source_ref: str | None = Field(None, description="Message or document id it came from.")
    session_id: str | None = Field(None, description="Session it was said in.")
    actor: str | None = Field(None, description="Who or what recorded it.")
    trace_id: str | None = Field(None, description="Trace id of the agent turn.")


class CorrectRelationBody(_SaidBy):
    """``correct_relation``: ENTITY is the RELATION_TYPE, and the one recorded never was."""

    relation_type: str = Field(description="The relation's type, as recorded (sister, manager_of, lives_in, ...).")
    entity: str = Field(description="The right entity: a name (a new one is created), alias or id.")
    of: str | None = Field(None, description="Whose relation: an entity's name, alias or id (default: the user).")
    was: str | None = Field(None, description="The wrong entity (required for a multi-valued type; for a "
                            "single-valued one, if given, it must name the current one).")
    reason: str | None = Field(None, description="Why (kept in history).")
    text: str | None = Field(None, description="The human sentence of the correction.")
    confidence: float | None = Field(None, ge=0, le=1, description="0..1 (default by source).")


class UnrelateBody(_SaidBy):
    """``unrelate``: the relation is withdrawn, or (with ``valid_to``) true only until then."""

    relation_type: str = Field(description="The relation's type (sister, manager_of, lives_in, ...).")
    entity: str | None = Field(None, description="The entity's name, alias or id (may be left out when the type "
                               "has one current entity).")
    of: str | None = Field(None, description="Whose relation: an entity's name, alias or id (default: the user).")
    valid_to: Instant | None = Field(None, description="End of validity, exclusive (\"Dana left in May\"); "
                                     "default: withdrawn entirely.")
    reason: str | None = Field(None, description="Why (kept in history).")


class CorrectRelationArgs(UserArg, CorrectRelationBody):
    """MCP ``correct_relation``."""


class UnrelateArgs(UserArg, UnrelateBody):
    """MCP ``unrelate``."""


class IdentityLinkBody(_Model):
    """``identity_link``: the user and ``other`` are one person (``confirmed``) or may be (``may_be``)."""

    other: str = Field(description="The other user id (the API key must hold it too).")
    status: Literal["confirmed", "may_be"] = Field(description="confirmed: a search of either id also reads the "
                                                   "other's memories; may_be: shown to the agent, merges nothing.")
    reason: str | None = Field(None, description="Why (kept in history).")


class IdentityLinkArgs(UserArg, IdentityLinkBody):
    pass


class IdentityUnlinkBody(_Model):
    """``identity_unlink``: the link between the user and ``other`` is withdrawn, in both ledgers."""

    other: str = Field(description="The other user id (the API key must hold it too).")
    reason: str | None = Field(None, description="Why (kept in history).")


class RelateArgs(UserArg, RelateBody):
    pass


class RelationsArgs(UserArg, GrantArgs):
    entity: str | None = Field(None, description="Start from this entity (name, alias or id) instead of the user.")
    hops: int = Field(1, ge=1, le=3, description="How far to walk: 1, 2 or 3.")
    as_of: Instant | None = Field(None, description="As the ledger believed at this system time (default now).")
    valid_at: Instant | None = Field(None, description="True at this instant (default now): who was the manager "
                                     "on 2024-03-01.")
    after: int | None = Field(None, ge=0, description=_AFTER)


class EntitiesArgs(UserArg, GrantArgs):
    after: int | None = Field(None, ge=0, description=_AFTER)


# -- result wrappers ---------------------------------------------------------------------------------------------
class RecallResult(BaseModel):
    """``recall``: the user's current memories most relevant to the query, best first (``hits`` is the CLI's
    ``search --json`` list)."""

    user_id: str
    hits: list[SearchHit]


class HistoryResult(BaseModel):
    """``history``: every event of the user's facts (or one key's), in log order (the CLI's list)."""

    user_id: str
    key: str | None
    rows: list[HistoryRow]


class Change(BaseModel):
    """One belief change in the feed (``GET /v1/users/{user_id}/changes``)."""

    user_id: str
    key: str
    kind: str
    version: int
    position: int
    recorded_at: datetime | None
