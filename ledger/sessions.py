"""Sessions: one :class:`Session` aggregate per (user_id, session_id), its events, commands and their execution.

A session keeps the raw conversation as an audit log (``MessageLogged``, one :class:`Message` stream per message),
a small structured *state card*
for the task the session works on (``StateCardUpdated``), caller-provided summaries (``SessionSummarized``), and
its start and end. Events carry explicit TOPICs (stored events survive refactors) and share the ledger's one
notification log: they are saved through the same :class:`~ledger.application.LedgerApplication`, so the catch-up
loop feeds them to the ``state_cards``, ``messages`` and ``summaries`` projections (projections/).

Rules (docs/sessions.md):

* The stream id is deterministic, ``uuid5(NAMESPACE, "session\\x1f<user_id>\\x1f<session_id>")``, like a fact's.
* ``MessageLogged`` is idempotent on ``message_id``: each message is its own one-event stream,
  ``uuid5(NAMESPACE, "message\\x1f<user_id>\\x1f<session_id>\\x1f<message_id>")`` (:class:`Message`), so a
  duplicate finds the stream already written, records nothing and returns the first receipt (``replayed=True``);
  the same id with different content is refused (:class:`~ledger.errors.IdempotencyMismatch`, exit 2). Two writers
  racing on one message id collide on version 1 (optimistic concurrency) and the loser replays. Why not keep the
  ids in the session aggregate: logging would then re-read every earlier message of the session (a cost per
  message that grows with the session: quadratic in session length); a stream per
  message keeps it constant. The session stream holds start, card, summaries and end.
* Logging to a session that was never started starts it implicitly (one ``SessionStarted`` with
  ``implicit=True`` in the same save). Starting a started session again with the same (or no) task is a retry:
  nothing is recorded. Nothing but summaries may follow ``SessionEnded``.
* The state card has patch semantics: each ``StateCardUpdated`` records its ``ops`` (add / remove / replace one
  item of decisions, open_questions or action_items; set progress, task or status) *and* the resulting ``card``,
  so projections apply the decision instead of re-deriving it. Removing or replacing an item that is not on the
  card is refused naming the flag. A session started with the task of an earlier open card *inherits* that card
  (recorded in ``SessionStarted.inherited_card``), so a task carries over between sessions.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.domain import Aggregate, event
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .domain import NAMESPACE
from .errors import BadInput, IdempotencyMismatch
from .retry import on_conflict
from .schemas import MAX_ID, MAX_TEXT, check_text, check_user_id, pydantic_problem
from .timeutil import check_observed, now_utc, parse_instant

ROLES: tuple[str, ...] = ("user", "assistant", "system", "tool")
LEVELS: tuple[str, ...] = ("session", "span", "all")
CARD_LISTS: tuple[str, ...] = ("decisions", "open_questions", "action_items")
MAX_SESSION = 200
MAX_ITEM = 2000


def session_stream_id(user_id: str, session_id: str) -> uuid.UUID:
    """The stream (aggregate) id of the session (user_id, session_id): deterministic, like ``fact_id``."""
    return uuid.uuid5(NAMESPACE, f"session\x1f{user_id}\x1f{session_id}")


def check_session_id(session_id: Any, field: str = "session_id") -> str:
    """Validate a session id: non-empty, no surrounding spaces or control characters, at most 200 characters, and
    not text that reads as an instruction to the assistant (ledger/injection.py; the id is shown in contexts).

    Raises:
        BadInput: naming ``field``.
    """
    if not isinstance(session_id, str) or not session_id.strip():
        raise BadInput(field, "is empty", "give the session's id, e.g. 2024-05-01 or chat-17")
    if session_id != session_id.strip() or any(unicodedata.category(c).startswith("C") for c in session_id):
        raise BadInput(field, f"{session_id!r} has surrounding spaces or control characters", "strip them")
    if "\ufffd" in session_id:  # as for user ids (ledger/schemas.py check_user_id): a URL's %F0 decoded with loss
        raise BadInput(field, f"{session_id!r} holds U+FFFD, the mark of bytes that were not valid UTF-8",
                       "send the session id as UTF-8 (percent-encode its UTF-8 bytes in a URL)")
    if len(session_id) > MAX_SESSION:
        raise BadInput(field, f"is {len(session_id)} characters long", f"use at most {MAX_SESSION}")
    from .injection import REASONS, screen

    kind = screen(session_id, from_user=False)
    if kind is not None:  # an id is shown in every context: it must never read as an instruction to the assistant
        raise BadInput(field, f"{session_id!r} {REASONS[kind]}", "use an identifier, e.g. 2024-05-01 or chat-17")
    return unicodedata.normalize("NFC", session_id)


def empty_card(task: str | None = None) -> dict[str, Any]:
    """A card with nothing on it: ``{"task", "progress", "decisions", "open_questions", "action_items", "status"}``."""
    return {"task": task, "progress": None, "decisions": [], "open_questions": [], "action_items": [],
            "status": "open"}


# -- commands ------------------------------------------------------------------------------------------------------
class CardOp(BaseModel):
    """One patch of a state card: ``add`` / ``remove`` / ``replace`` one item of a list field.

    ``field`` is decisions, open_questions or action_items; ``replace`` needs ``old`` (the item replaced).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    op: Literal["add", "remove", "replace"]
    field: Literal["decisions", "open_questions", "action_items"]
    item: str
    old: str | None = None

    @field_validator("item", "old")
    @classmethod
    def _item(cls, v: str | None, info: Any) -> str | None:
        if v is not None:
            if not v.strip():
                raise BadInput(info.field_name, "is empty", "give the item's text")
            check_text(v, info.field_name)
        return v


class SessionCommand(BaseModel):
    """One command on the stream of (user_id, session_id).

    ``op`` is start | log | card | summarize | end. Instants are aware (naive refused) and stored in UTC;
    ``observed_at`` defaults to the instant the command is recorded. Fields used per op:

    * start: ``task``; log: ``role`` (user/assistant/system/tool), ``message_id``, ``text``, ``speaker``;
    * card: ``task``, ``progress``, ``ops`` (:class:`CardOp`), ``status`` (open | done);
    * summarize: ``text``, ``level`` (session | span | all), ``covers`` (session ids; for span),
      ``first_message_id`` / ``last_message_id`` (a message range, for level session).
    """

    model_config = ConfigDict(extra="forbid")

    op: Literal["start", "log", "card", "summarize", "end"]
    user_id: str
    session_id: str
    observed_at: datetime | None = None
    task: str | None = None
    role: Literal["user", "assistant", "system", "tool"] | None = None
    message_id: str | None = None
    text: str | None = None
    speaker: str | None = None
    progress: str | None = None
    ops: list[CardOp] = Field(default_factory=list)
    status: Literal["open", "done"] | None = None
    level: Literal["session", "span", "all"] = "session"
    covers: list[str] = Field(default_factory=list)
    first_message_id: str | None = None
    last_message_id: str | None = None
    #: filled by the facade, not the caller: the card an earlier session left for the same task
    inherited_card: dict[str, Any] | None = None

    @field_validator("user_id", mode="before")
    @classmethod
    def _user(cls, v: Any) -> str:
        return check_user_id(v)

    @field_validator("session_id", mode="before")
    @classmethod
    def _session(cls, v: Any) -> str:
        return check_session_id(v)

    @field_validator("observed_at", mode="before")
    @classmethod
    def _instant(cls, v: Any) -> datetime | None:
        return None if v is None else check_observed(parse_instant(v, "observed_at"))

    @field_validator("task", "text", "speaker", "progress", "message_id", "first_message_id", "last_message_id")
    @classmethod
    def _text(cls, v: str | None, info: Any) -> str | None:
        if v is None:
            return None
        flag = _FLAG.get(info.field_name, info.field_name)
        if not v.strip():
            raise BadInput(flag, "is empty", f"give {flag} a non-blank value" if info.field_name in ("text", "message_id")
                           else "give a non-blank value, or leave it out")
        check_text(v, flag)
        if len(v) > MAX_TEXT:  # as a fact's sentence: a message, a summary or a card line is no document store
            raise BadInput(flag, f"is {len(v)} characters long", f"use at most {MAX_TEXT}")
        if info.field_name.endswith("message_id") and len(v) > MAX_ID:
            # ids stay plaintext in the log (docs/erasure.md): capped like the fact commands' identifiers
            raise BadInput(_FLAG.get(info.field_name, info.field_name), f"is {len(v)} characters long",
                           f"use at most {MAX_ID}: it is an identifier, kept in plaintext; put content in text")
        return unicodedata.normalize("NFC", v)

    def fingerprint(self) -> str:
        """What a retried ``log`` must repeat exactly (role, speaker, text, observed_at if given)."""
        data = self.model_dump(mode="json", include={"role", "speaker", "text", "observed_at"})
        return hashlib.sha256(json.dumps(data, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:32]


_FLAG = {"task": "--task", "role": "--role", "message_id": "--message-id", "text": "--text", "level": "--level",
         "status": "--status", "observed_at": "--observed-at", "progress": "--progress", "covers": "--covers"}


def validate_session_command(data: dict[str, Any], where: str = "") -> SessionCommand:
    """Validate a command dict into a :class:`SessionCommand`, turning pydantic's errors into :class:`BadInput`.

    Also checks what each op needs (log: role, message_id and text; summarize: text; card: at least one change).
    """
    try:
        cmd = SessionCommand.model_validate(data)
    except BadInput as exc:
        raise BadInput(where + exc.field, exc.problem, exc.fix) from None
    except ValidationError as exc:
        e = exc.errors()[0]
        inner = (e.get("ctx") or {}).get("error")
        if isinstance(inner, BadInput):
            raise BadInput(where + inner.field, inner.problem, inner.fix) from None
        field = ".".join(str(p) for p in e["loc"]) or "command"
        fix = ""
        if e["type"] == "literal_error":
            fix = "use one of " + str(e.get("ctx", {}).get("expected", ""))
        raise BadInput(where + field, pydantic_problem(e), fix) from None
    if cmd.op == "log":
        for name in ("role", "message_id", "text"):
            if getattr(cmd, name) is None:
                raise BadInput(where + name, "is missing for session log", f"give {_FLAG[name]}")
    if cmd.op == "summarize" and cmd.text is None:
        raise BadInput(where + "text", "is missing for a summary", "give --text with the caller-written summary")
    if cmd.op == "summarize" and cmd.level == "span" and not cmd.covers:
        raise BadInput(where + "covers", "a span summary must say which sessions it covers",
                       "give --covers SESSION for each session of the span")
    if cmd.op == "card" and not (cmd.ops or cmd.progress or cmd.task or cmd.status):
        raise BadInput(where + "card", "nothing to update",
                       "give --task, --progress, --status or an --add-/--remove-/--replace- flag")
    for op in cmd.ops:
        if not op.item.strip() or len(op.item) > MAX_ITEM:
            raise BadInput(where + f"--{op.op}-{op.field}", "item is empty or longer than 2000 characters",
                           "write one short item per flag")
        if op.op == "replace" and not op.old:
            raise BadInput(where + f"--replace-{op.field}", "needs the old item", "write it as 'OLD=>NEW'")
    return cmd


# -- aggregate -----------------------------------------------------------------------------------------------------
class Session(Aggregate):
    """The stream of one session (user_id, session_id)."""

    TOPIC = "memledger:Session"

    class Event(Aggregate.Event):
        """Base of the session events. No field is named ``effect``: fact projections skip these events."""

        TOPIC = "memledger:Session.Event"

        user_id: str
        session_id: str
        event_id: str
        observed_at: datetime

        def mutate(self, aggregate: Session | None) -> Session | None:  # type: ignore[override]
            if aggregate is None:
                aggregate = Session.shell(self.originator_id, self.timestamp)
            return super().mutate(aggregate)

        def apply(self, aggregate: Session) -> None:
            aggregate.on_event(self)

    class SessionStarted(Event):
        TOPIC = "memledger:SessionStarted"
        task: str | None
        implicit: bool
        inherited_card: dict[str, Any] | None  # {"from_session": S, "card": {...}} or None

    class StateCardUpdated(Event):
        TOPIC = "memledger:StateCardUpdated"
        ops: list[dict[str, Any]]
        card: dict[str, Any]

    class SessionSummarized(Event):
        TOPIC = "memledger:SessionSummarized"
        summary_id: str
        level: str
        text: str
        covers: list[str]
        first_message_id: str | None
        last_message_id: str | None

    class SessionEnded(Event):
        TOPIC = "memledger:SessionEnded"

    # -- state -------------------------------------------------------------------------------------------------
    @classmethod
    def shell(cls, aggregate_id: uuid.UUID, timestamp: datetime) -> Session:
        """A session with no events yet (version 0)."""
        agg = cls.__new__(cls)
        agg.__base_init__(originator_id=aggregate_id, originator_version=0, timestamp=timestamp)
        agg.user_id = None
        agg.session_id = None
        agg.started = False
        agg.start_receipt = None
        agg.ended = None
        agg.card = empty_card()
        return agg

    user_id: str | None
    session_id: str | None
    started: bool
    start_receipt: tuple[int, str] | None
    ended: datetime | None
    card: dict[str, Any]

    def on_event(self, e: Session.Event) -> None:
        self.user_id, self.session_id = e.user_id, e.session_id
        if isinstance(e, Session.SessionStarted):
            self.started = True
            self.start_receipt = (e.originator_version, e.event_id)
            inherited = (e.inherited_card or {}).get("card")
            self.card = dict(inherited) if inherited else empty_card(e.task)
            if e.task:
                self.card["task"] = e.task
        elif isinstance(e, Session.StateCardUpdated):
            self.card = dict(e.card)
        elif isinstance(e, Session.SessionEnded):
            self.ended = e.observed_at

    @property
    def pending_events(self) -> list[Any]:
        return self._pending_events

    # -- policy ------------------------------------------------------------------------------------------------
    def _trigger(self, cls: type, cmd: SessionCommand, recorded_at: datetime, **fields: Any) -> Any:
        self.trigger_event(cls, user_id=cmd.user_id, session_id=cmd.session_id, event_id=str(uuid.uuid4()),
                           observed_at=cmd.observed_at or recorded_at, timestamp=recorded_at, **fields)
        return self.pending_events[-1]

    def _open(self, cmd: SessionCommand) -> None:
        if self.ended is not None:
            raise BadInput("session_id", f"session {cmd.session_id!r} ended at {self.ended.isoformat()}",
                           "start a new session (a new SESSION id) to continue")

    def record(self, cmd: SessionCommand, recorded_at: datetime) -> tuple[Any | None, tuple[int, str] | None]:
        """Decide and trigger the event(s) for ``cmd``; returns (event, None), or (None, (version, event_id)) of the
        first event for a retry that records nothing.

        Raises:
            BadInput: the command does not fit the session's state (ended, unknown card item, ...).
            IdempotencyMismatch: a message id reused for a different message.
        """
        if cmd.op == "start":
            if self.started:
                self._open(cmd)
                if cmd.task and self.card.get("task") not in (None, cmd.task):
                    raise BadInput("task", f"session {cmd.session_id!r} is already on task {self.card['task']!r}",
                                   "start a new session for another task")
                return None, self.start_receipt
            return self._trigger(Session.SessionStarted, cmd, recorded_at, task=cmd.task, implicit=False,
                                 inherited_card=cmd.inherited_card), None
        if cmd.op == "log":  # the message itself goes to its own stream (Message); here: start implicitly
            self._open(cmd)
            if not self.started:
                return self._trigger(Session.SessionStarted, cmd, recorded_at, task=None, implicit=True,
                                     inherited_card=None), None
            return None, None
        if not self.started:
            raise BadInput("session_id", f"session {cmd.session_id!r} of {cmd.user_id!r} was never started",
                           "run `memledger session start USER SESSION` (or log a message) first")
        if cmd.op == "card":
            self._open(cmd)
            card = {**self.card, **{k: list(self.card[k]) for k in CARD_LISTS}}
            ops: list[dict[str, Any]] = []
            if cmd.task:
                card["task"] = cmd.task
                ops.append({"op": "set", "field": "task", "item": cmd.task})
            if cmd.progress:
                card["progress"] = cmd.progress
                ops.append({"op": "set", "field": "progress", "item": cmd.progress})
            for op in cmd.ops:
                items = card[op.field]
                item = unicodedata.normalize("NFC", op.item.strip())
                if op.op == "add":
                    if item not in items:  # adding what is there already is a no-op, not an error
                        items.append(item)
                elif op.op == "remove":
                    if item not in items:
                        raise BadInput(f"--remove-{_flag_noun(op.field)}", f"{item!r} is not on the card",
                                       _on_card(op.field, items))
                    items.remove(item)
                else:
                    old = unicodedata.normalize("NFC", (op.old or "").strip())
                    if old not in items:
                        raise BadInput(f"--replace-{_flag_noun(op.field)}", f"{old!r} is not on the card",
                                       _on_card(op.field, items))
                    items[items.index(old)] = item
                ops.append({"op": op.op, "field": op.field, "item": item, **({"old": op.old} if op.old else {})})
            if cmd.status:
                card["status"] = cmd.status
                ops.append({"op": "set", "field": "status", "item": cmd.status})
            return self._trigger(Session.StateCardUpdated, cmd, recorded_at, ops=ops, card=card), None
        if cmd.op == "summarize":
            covers = list(cmd.covers) if cmd.level != "session" else [cmd.session_id]
            return self._trigger(Session.SessionSummarized, cmd, recorded_at, summary_id=str(uuid.uuid4()),
                                 level=cmd.level, text=cmd.text, covers=covers,
                                 first_message_id=cmd.first_message_id, last_message_id=cmd.last_message_id), None
        # end
        self._open(cmd)
        return self._trigger(Session.SessionEnded, cmd, recorded_at), None


def message_stream_id(user_id: str, session_id: str, message_id: str) -> uuid.UUID:
    """The stream id of one message: deterministic, so a duplicate of the message finds its stream."""
    return uuid.uuid5(NAMESPACE, f"message\x1f{user_id}\x1f{session_id}\x1f{message_id}")


class Message(Aggregate):
    """One logged message: a stream of exactly one ``MessageLogged`` event (idempotency by stream existence)."""

    TOPIC = "memledger:Message"

    class Event(Aggregate.Event):
        TOPIC = "memledger:Message.Event"

        user_id: str
        session_id: str
        event_id: str
        observed_at: datetime

        def mutate(self, aggregate: Message | None) -> Message | None:  # type: ignore[override]
            if aggregate is None:
                aggregate = Message.shell(self.originator_id, self.timestamp)
            return super().mutate(aggregate)

        def apply(self, aggregate: Message) -> None:
            aggregate.first = (self.originator_version, self.event_id, getattr(self, "fingerprint", ""))

    class MessageLogged(Event):
        """A message of the conversation. No field is named ``effect``: fact projections skip it."""

        TOPIC = "memledger:MessageLogged"
        message_id: str
        role: str
        speaker: str | None
        text: str
        fingerprint: str

    first: tuple[int, str, str] | None  # (version, event_id, fingerprint) once logged

    @classmethod
    def shell(cls, aggregate_id: uuid.UUID, timestamp: datetime) -> Message:
        agg = cls.__new__(cls)
        agg.__base_init__(originator_id=aggregate_id, originator_version=0, timestamp=timestamp)
        agg.first = None
        return agg

    @property
    def pending_events(self) -> list[Any]:
        return self._pending_events

    def record(self, cmd: SessionCommand, recorded_at: datetime) -> tuple[Any | None, tuple[int, str] | None]:
        """Log ``cmd`` (op log) unless this message was logged already: (event, None) or (None, first receipt).

        Raises:
            IdempotencyMismatch: the message id was logged before with different content.
        """
        fp = cmd.fingerprint()
        if self.first is not None:
            version, event_id, first_fp = self.first
            if first_fp != fp:
                raise IdempotencyMismatch(
                    "message_id", f"{cmd.message_id!r} was already logged in session {cmd.session_id!r} with "
                    "different content", "a retry must repeat the message exactly; a new message needs a new id")
            return None, (version, event_id)
        self.trigger_event(Message.MessageLogged, user_id=cmd.user_id, session_id=cmd.session_id,
                           event_id=str(uuid.uuid4()), observed_at=cmd.observed_at or recorded_at,
                           timestamp=recorded_at, message_id=cmd.message_id, role=cmd.role, speaker=cmd.speaker,
                           text=cmd.text, fingerprint=fp)
        return self.pending_events[-1], None


def _flag_noun(field: str) -> str:
    return {"decisions": "decision", "open_questions": "question", "action_items": "action"}[field]


def _on_card(field: str, items: list[str]) -> str:
    return f"the card's {field} are: " + ("; ".join(repr(i) for i in items) if items else "(none)")


# -- execution -----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SessionOutcome:
    """What one session command did: the event (type name, version, id) and its log position (None for a retry)."""

    command: SessionCommand
    event: str
    version: int
    event_id: str
    position: int | None
    replayed: bool


def load_session(app: Any, stream_id: uuid.UUID) -> Session:
    """The session aggregate from the log, or an empty shell if the stream has no events."""
    try:
        return app.repository.get(stream_id)
    except AggregateNotFoundError:
        return Session.shell(stream_id, now_utc())


def load_message(app: Any, stream_id: uuid.UUID) -> Message:
    """The message aggregate from the log, or an empty shell if it was never logged."""
    try:
        return app.repository.get(stream_id)
    except AggregateNotFoundError:
        return Message.shell(stream_id, now_utc())


def execute_session_commands(app: Any, commands: list[SessionCommand],
                             saved: list[tuple[int, Any]] | None = None) -> list[SessionOutcome]:
    """Decide and save ``commands`` in one ``save()`` of ``app`` (the ledger's Application): all or nothing.

    ``saved``: a list extended with ``(log position, domain event)`` of every event the save wrote (implicit session
    starts included), in log order, so the caller can project them from memory (``Store.catch_up(recent=...)``).

    Same concurrency contract as :meth:`ledger.application.LedgerApplication.execute`: a batch that loses an
    optimistic-concurrency race is decided again on the winner's state (ledger/retry.py: the one retry policy).

    Raises:
        BadInput: a command was refused (nothing of the batch is saved).
        ConflictError: conflicts persisted after the retries.
    """
    # Which message streams exist, in one query: a batch of new messages (an ingest, a turn) otherwise paid one
    # repository.get each that found nothing. As for facts
    # (LedgerApplication.existing_streams), a stream another writer creates meanwhile makes the save conflict and
    # the batch is decided again, loading it.
    lister = getattr(app, "existing_streams", None)
    message_ids = {message_stream_id(c.user_id, c.session_id, c.message_id) for c in commands
                   if c.op == "log" and c.message_id is not None}
    existing = lister(message_ids) if lister is not None and len(message_ids) > 1 else None
    def run(attempt: int) -> list[SessionOutcome]:
        recorded_at = now_utc()
        aggregates: dict[uuid.UUID, Any] = {}

        def get(stream_id: uuid.UUID, loader: Any) -> Any:
            agg = aggregates.get(stream_id)
            if agg is None:
                if loader is load_message and existing is not None and attempt == 0 and stream_id not in existing:
                    agg = aggregates[stream_id] = Message.shell(stream_id, now_utc())
                else:
                    agg = aggregates[stream_id] = loader(app, stream_id)
            return agg

        pending: list[tuple[SessionCommand, Any, tuple[int, str] | None]] = []
        for cmd in commands:
            session = get(session_stream_id(cmd.user_id, cmd.session_id), load_session)
            if cmd.op == "log":
                assert cmd.message_id is not None
                message = get(message_stream_id(cmd.user_id, cmd.session_id, cmd.message_id), load_message)
                if message.first is None:
                    session.record(cmd, recorded_at)  # refuses an ended session; starts it implicitly
                event, first = message.record(cmd, recorded_at)
            else:
                if cmd.op == "summarize":
                    for name in ("first_message_id", "last_message_id"):
                        mid = getattr(cmd, name)
                        if mid and get(message_stream_id(cmd.user_id, cmd.session_id, mid),
                                       load_message).first is None:
                            raise BadInput(name, f"{mid!r} is not a message of session {cmd.session_id!r}",
                                           "name a logged message id")
                event, first = session.record(cmd, recorded_at)
            pending.append((cmd, event, first))
        changed = [a for a in aggregates.values() if a.pending_events]
        recordings = app.save(*changed) if changed else []  # a lost race raises RecordConflictError: re-run
        positions = {id(r.domain_event): r.notification.id for r in recordings}
        if saved is not None:
            saved.extend(sorted(((r.notification.id, r.domain_event) for r in recordings), key=lambda pe: pe[0]))
        out = []
        for cmd, event, first in pending:
            if event is not None:
                out.append(SessionOutcome(cmd, type(event).__name__, event.originator_version, event.event_id,
                                          positions.get(id(event)), False))
            else:
                version, event_id = first  # type: ignore[misc]
                name = "MessageLogged" if cmd.op == "log" else "SessionStarted"
                out.append(SessionOutcome(cmd, name, version, event_id, None, True))
        return out
    return on_conflict(run, "session(s)")


# ------------------------------------------------------------------- opt-out sessions (memledger/optout.py)


def tombstone_id(user_id: str, session_id: str) -> uuid.UUID:
    """Stream id of an opt-out session's tombstone: ``uuid5(NAMESPACE, "nomemory\\x1f<user>\\x1f<session>")``."""
    return uuid.uuid5(NAMESPACE, f"nomemory\x1f{user_id}\x1f{session_id}")


class NoMemorySession(Aggregate):
    """One stream per ended opt-out session, holding its single tombstone event."""

    TOPIC = "memledger:NoMemorySession"

    class Created(Aggregate.Created):
        TOPIC = "memledger:NoMemorySession.Created"

    class NoMemorySessionEnded(Aggregate.Created):
        """An opt-out session ended and its messages were deleted: who, which session, how many. No content."""

        TOPIC = "memledger:NoMemorySessionEnded"
        ENCRYPTED_FIELDS = frozenset()
        user_id: str
        session_id: str
        messages: int

    @staticmethod
    def create_id(user_id: str, session_id: str, **_: Any) -> uuid.UUID:
        return tombstone_id(user_id, session_id)

    @event(NoMemorySessionEnded)
    def __init__(self, user_id: str, session_id: str, messages: int) -> None:
        self.user_id = user_id
        self.session_id = session_id
        self.messages = messages


NoMemorySessionEnded = NoMemorySession.NoMemorySessionEnded
