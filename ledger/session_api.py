"""The sessions half of the public API: :class:`SessionsMixin` gives ``MemoryLedger`` its session verbs.

::

    with MemoryLedger(home="/tmp/demo") as ml:
        ml.session_start("u1", "s1", task="quarterly report", observed_at="2024-05-06T09:00:00+08:00")
        ml.log_message("u1", "s1", role="user", message_id="m1", text="Let's finish it next Friday")
        ml.update_card("u1", "s1", progress="the outline is done", add_decisions=["use the 2023 template"])
        print(ml.resume("u1", now="2024-05-09T09:00:00+08:00").opening)
        print(ml.context("u1", budget=800).text)

Every method mirrors a CLI verb (``memledger session start|log|card|summarize|end|gaps``, ``resume``, ``context``)
and returns a pydantic model whose ``model_dump(mode="json")`` is the CLI's ``--json``. Writes return once the
projections have caught up (read-your-writes), reads catch up first — the facade's contract. Errors: every refusal
is :class:`~ledger.errors.BadInput` naming the field (nothing written).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel

from .errors import BadInput
from .sessions import SessionCommand, check_session_id, execute_session_commands, validate_session_command
from .timeutil import from_micros, now_utc, parse_instant

#: Profile fact keys read as the user's IANA time zone, first found wins (docs/sessions.md).
TZ_KEYS: tuple[str, ...] = ("profile.timezone", "profile.time_zone", "profile.tz", "timezone")
#: Default age after which ``resume`` flags a task as stale (ask before carrying on), in hours.
DEFAULT_EXPIRY_HOURS = 48.0


class SessionReceipt(BaseModel):
    """What every session command returns: the event recorded (or, for a retry, the first one) and its position."""

    event_id: str
    user_id: str
    session_id: str
    event: str
    version: int
    position: int
    replayed: bool = False


class StateCard(BaseModel):
    """A session's state card as the ``state_cards`` projection holds it."""

    session_id: str
    task: str | None
    progress: str | None
    decisions: list[str]
    open_questions: list[str]
    action_items: list[str]
    status: str
    touched_at: datetime


class Resume(BaseModel):
    """``memledger resume USER --json``: where the user left off, and the sentence to open with.

    ``found`` is false for a user with no session. ``ago_seconds`` is ``now - last_touched_at`` (>= 0, seconds);
    ``expired`` is true when it exceeds ``expiry_hours``: the agent should ask whether to continue.
    ``card`` is None when the latest session has no card content (the opening then names the session).
    """

    user_id: str
    now: datetime
    now_local: str
    timezone: str
    found: bool
    session_id: str | None = None
    session_status: str | None = None
    task: str | None = None
    card: StateCard | None = None
    open_questions: list[str] = []
    action_items: list[str] = []
    last_touched_at: datetime | None = None
    last_touched_local: str | None = None
    ago_seconds: int | None = None
    ago: str | None = None
    expiry_hours: float
    expired: bool = False
    opening: str


class SummaryGaps(BaseModel):
    """``memledger session gaps USER --json``: which parts of the pyramid are missing.

    ``without_session_summary``: sessions with no summary of their own and not covered by any span/all summary.
    ``not_merged``: sessions older than the ``recent`` newest that no span or all summary covers yet.
    """

    user_id: str
    sessions: list[str]
    without_session_summary: list[str]
    not_merged: list[str]
    recent: int


def ago_text(seconds: int) -> str:
    """A coarse human duration: ``"just now"``, ``"5 minutes"``, ``"3 hours"``, ``"3 days"``, ``"2 weeks"``."""
    units = [(365 * 86400, "year"), (30 * 86400, "month"), (7 * 86400, "week"), (86400, "day"), (3600, "hour"),
             (60, "minute")]
    for size, name in units:
        n = seconds // size
        if n >= 1:
            return f"{n} {name}{'s' if n > 1 else ''}"
    return "just now"


class SessionsMixin:
    """Session verbs of :class:`~ledger.facade.MemoryLedger`.

    Relies on the facade's ``app``, ``db``, ``projections``, ``projection_mode``, ``catch_up``, ``wait_for``,
    ``_head``, ``_before_read``, ``_refuse_erased`` and ``profile``; adds the ``state_cards``, ``messages`` and
    ``summaries`` projections (:meth:`_init_sessions`).
    """

    app: Any
    db: Any
    projections: list[Any]

    def _init_sessions(self) -> None:
        """Register the session projections (called by ``MemoryLedger.__init__`` before tables are created)."""
        from projections.messages import MessagesProjection
        from projections.state_cards import StateCardsProjection
        from projections.summaries import SummariesProjection

        self.state_cards_projection = StateCardsProjection()
        self.messages_projection = MessagesProjection()
        self.summaries_projection = SummariesProjection()
        self.projections.extend([self.state_cards_projection, self.messages_projection, self.summaries_projection])

    # -- writes ------------------------------------------------------------------------------------------------
    def record_session(self, commands: Iterable[dict[str, Any] | SessionCommand]) -> list[SessionReceipt]:
        """Record many session commands in one save: all validated first; any refusal writes nothing."""
        validated = [c if isinstance(c, SessionCommand) else validate_session_command(c) for c in commands]
        if not validated:
            return []
        self._check_keys()  # type: ignore[attr-defined]
        self._refuse_erased({c.user_id for c in validated})  # type: ignore[attr-defined]
        validated = [self._complete(c) for c in validated]
        outcomes = execute_session_commands(self.app, validated)
        positions = [o.position for o in outcomes if o.position is not None]
        # Same contract as the fact commands (MemoryLedger._execute): inline mode catches up before returning;
        # worker mode waits for the worker only when a retry's receipt must be looked up in a projection.
        if self.projection_mode == "inline":  # type: ignore[attr-defined]
            self.catch_up(until=max(positions) if positions else None, deferred=False)  # type: ignore[attr-defined]
        elif any(o.position is None for o in outcomes):
            self.wait_for(self._head())  # type: ignore[attr-defined]
        out = []
        for o in outcomes:
            position = o.position
            if position is None:  # a retry: find the first event's position in the projections
                with self.db.read() as cur:
                    if o.command.op == "log":
                        position = self.messages_projection.position_of(cur, o.command.user_id,
                                                                        o.command.session_id, o.command.message_id)
                    else:
                        s = self.state_cards_projection.session(cur, o.command.user_id, o.command.session_id)
                        position = None if s is None else s["start_position"]
            out.append(SessionReceipt(event_id=o.event_id, user_id=o.command.user_id,
                                      session_id=o.command.session_id, event=o.event, version=o.version,
                                      position=position or 0, replayed=o.replayed))
        return out

    def _complete(self, cmd: SessionCommand) -> SessionCommand:
        """Fill in what the facade decides from the read side: an inherited card, the sessions of ``all``."""
        if cmd.op == "start" and cmd.task and cmd.inherited_card is None:
            self._before_read(None, 10.0)  # type: ignore[attr-defined]
            with self.db.read() as cur:
                previous = self.state_cards_projection.open_card_for_task(cur, cmd.user_id, cmd.task)
            if previous is not None and previous["session_id"] != cmd.session_id:
                card = {k: previous[k] for k in ("task", "progress", "decisions", "open_questions", "action_items")}
                card["status"] = "open"
                return cmd.model_copy(update={"inherited_card": {"from_session": previous["session_id"],
                                                                 "card": card}})
        if cmd.op == "summarize" and cmd.level != "session":
            self._before_read(None, 10.0)  # type: ignore[attr-defined]
            with self.db.read() as cur:
                known = [s["session_id"] for s in self.state_cards_projection.sessions(cur, cmd.user_id)]
            if cmd.level == "all":
                covers = known if cmd.session_id in known else known + [cmd.session_id]
                return cmd.model_copy(update={"covers": covers})
            unknown = [s for s in cmd.covers if s not in known]
            if unknown:
                raise BadInput("covers", f"{unknown[0]!r} is not a session of {cmd.user_id!r}",
                               "name sessions that were started or logged to")
        return cmd

    def _one_session(self, op: str, user_id: str, session_id: str, fields: dict[str, Any]) -> SessionReceipt:
        data = {k: v for k, v in fields.items() if v is not None}
        data.update(op=op, user_id=user_id, session_id=session_id)
        return self.record_session([validate_session_command(data)])[0]

    def session_start(self, user_id: str, session_id: str, *, task: str | None = None,
                      observed_at: Any = None) -> SessionReceipt:
        """Start a session (``SessionStarted``); with ``task``, it inherits that task's latest open card.

        Starting a started session again (same or no task) records nothing and returns the first receipt.
        Raises BadInput if the session ended or is on another task.
        """
        return self._one_session("start", user_id, session_id, dict(task=task, observed_at=observed_at))

    def log_message(self, user_id: str, session_id: str, *, role: str, message_id: str, text: str,
                    speaker: str | None = None, observed_at: Any = None) -> SessionReceipt:
        """Log one message (``MessageLogged``); idempotent on ``message_id`` within the session.

        ``role`` is user | assistant | system | tool; ``speaker`` optionally names who spoke (provenance beyond the
        role). Starts the session implicitly if needed. A reused id with different content raises
        :class:`~ledger.errors.IdempotencyMismatch` (BadInput).
        """
        return self._one_session("log", user_id, session_id, dict(role=role, message_id=message_id, text=text,
                                                                  speaker=speaker, observed_at=observed_at))

    def update_card(self, user_id: str, session_id: str, *, task: str | None = None, progress: str | None = None,
                    add_decisions: Sequence[str] = (), remove_decisions: Sequence[str] = (),
                    replace_decisions: Sequence[tuple[str, str] | str] = (),
                    add_questions: Sequence[str] = (), remove_questions: Sequence[str] = (),
                    replace_questions: Sequence[tuple[str, str] | str] = (),
                    add_actions: Sequence[str] = (), remove_actions: Sequence[str] = (),
                    replace_actions: Sequence[tuple[str, str] | str] = (),
                    status: str | None = None, observed_at: Any = None) -> SessionReceipt:
        """Patch the session's state card (``StateCardUpdated``): set task/progress/status, add/remove/replace items.

        A replacement is ``(old, new)`` or the string ``"OLD=>NEW"``. Ops apply in the order: decisions, questions,
        actions (each: add, remove, replace). Raises BadInput naming the flag if an item to remove/replace is not
        on the card.
        """
        ops: list[dict[str, Any]] = []
        for field, adds, removes, replaces in (
            ("decisions", add_decisions, remove_decisions, replace_decisions),
            ("open_questions", add_questions, remove_questions, replace_questions),
            ("action_items", add_actions, remove_actions, replace_actions),
        ):
            ops += [{"op": "add", "field": field, "item": i} for i in adds]
            ops += [{"op": "remove", "field": field, "item": i} for i in removes]
            for r in replaces:
                old, new = split_replacement(r, field)
                ops.append({"op": "replace", "field": field, "item": new, "old": old})
        return self._one_session("card", user_id, session_id, dict(task=task, progress=progress, ops=ops or None,
                                                                   status=status, observed_at=observed_at))

    def summarize(self, user_id: str, session_id: str, *, text: str, level: str = "session",
                  covers: Sequence[str] | None = None, first_message_id: str | None = None,
                  last_message_id: str | None = None, observed_at: Any = None) -> SessionReceipt:
        """Store a caller-written summary (``SessionSummarized``) in SESSION's stream.

        ``level`` session covers SESSION (optionally a message range); span covers ``covers`` (session ids that
        must exist); all covers every session of the user so far (decided here and recorded in the event).
        """
        return self._one_session("summarize", user_id, session_id, dict(
            text=text, level=level, covers=list(covers) if covers else None, first_message_id=first_message_id,
            last_message_id=last_message_id, observed_at=observed_at))

    def end_session(self, user_id: str, session_id: str, *, observed_at: Any = None) -> SessionReceipt:
        """End a session (``SessionEnded``); only summaries may be added afterwards."""
        return self._one_session("end", user_id, session_id, dict(observed_at=observed_at))

    # -- reads -------------------------------------------------------------------------------------------------
    def user_timezone(self, user_id: str) -> str:
        """The user's IANA zone from their profile (first of :data:`TZ_KEYS` that names a valid zone), else "UTC"."""
        from .relative_time import to_local

        facts = self.profile(user_id).facts  # type: ignore[attr-defined]
        for key in TZ_KEYS:
            f = facts.get(key)
            if f is not None and isinstance(f.value, str):
                try:
                    to_local(now_utc(), f.value)
                except BadInput:
                    continue
                return f.value.strip()
        return "UTC"

    def sessions(self, user_id: str) -> list[dict[str, Any]]:
        """The user's sessions, oldest first: ``{"session_id", "task", "status", "started_at", "ended_at",
        "last_at", "messages"}`` with instants as aware UTC datetimes."""
        from .schemas import check_user_id

        user_id = check_user_id(user_id)
        self._before_read(None, 10.0)  # type: ignore[attr-defined]
        with self.db.read() as cur:
            rows = self.state_cards_projection.sessions(cur, user_id)
        return [{"session_id": r["session_id"], "task": r["task"], "status": r["status"],
                 "started_at": from_micros(r["started_at"]), "ended_at": from_micros(r["ended_at"]),
                 "last_at": from_micros(r["last_at"]), "messages": r["messages"]} for r in rows]

    def messages(self, user_id: str, session_id: str | None = None) -> list[dict[str, Any]]:
        """The user's logged messages (or one session's), by observed_at then seq, instants as aware UTC."""
        from .schemas import check_user_id

        user_id = check_user_id(user_id)
        if session_id is not None:
            session_id = check_session_id(session_id)
        self._before_read(None, 10.0)  # type: ignore[attr-defined]
        with self.db.read() as cur:
            rows = self.messages_projection.all(cur, user_id, session_id)
        for r in rows:
            r["observed_at"] = from_micros(r["observed_at"])
            r["recorded_at"] = from_micros(r["recorded_at"])
        return rows

    def summary_gaps(self, user_id: str, *, recent: int = 3) -> SummaryGaps:
        """Which sessions still lack a summary (``memledger session gaps``); see :class:`SummaryGaps`."""
        from .schemas import check_user_id

        user_id = check_user_id(user_id)
        self._before_read(None, 10.0)  # type: ignore[attr-defined]
        with self.db.read() as cur:
            sessions = [s["session_id"] for s in self.state_cards_projection.sessions(cur, user_id)]
            summaries = self.summaries_projection.rows(cur, user_id)
        own = {c for s in summaries if s["level"] == "session" for c in s["covers"]}
        merged = {c for s in summaries if s["level"] != "session" for c in s["covers"]}
        older = sessions[:-recent] if recent > 0 else sessions
        return SummaryGaps(user_id=user_id, sessions=sessions,
                           without_session_summary=[s for s in sessions if s not in own and s not in merged],
                           not_merged=[s for s in older if s not in merged], recent=recent)

    def resume(self, user_id: str, *, now: Any = None, expiry_hours: float = DEFAULT_EXPIRY_HOURS) -> Resume:
        """Where ``user_id`` left off: the most recently touched open card (else the latest session), how long ago,
        its open questions and action items, and the opening sentence; flagged ``expired`` past ``expiry_hours``.

        ``now`` is an aware instant (default: the current time); naive is refused. Times are rendered in the
        user's zone (:meth:`user_timezone`). Raises BadInput for a bad user id, ``now`` or ``expiry_hours``.
        """
        from .relative_time import format_local
        from .schemas import check_user_id

        user_id = check_user_id(user_id)
        now_dt = parse_instant(now, "now") if now is not None else now_utc()
        if not isinstance(expiry_hours, (int, float)) or expiry_hours <= 0:
            raise BadInput("expiry_hours", f"{expiry_hours!r} is not a positive number of hours", "e.g. 48")
        tz = self.user_timezone(user_id)
        base = dict(user_id=user_id, now=now_dt, now_local=format_local(now_dt, tz), timezone=tz,
                    expiry_hours=float(expiry_hours))
        with self.db.read() as cur:
            cards = self.state_cards_projection.open_cards(cur, user_id)
            sessions = self.state_cards_projection.sessions(cur, user_id)
            card = cards[0] if cards else None
            latest = max(sessions, key=lambda s: (s["last_at"], s["position"])) if sessions else None
            session_row = (self.state_cards_projection.session(cur, user_id, card["session_id"]) if card
                           else latest)
            # No open card: the latest session's own card, if its task was marked done (not to be "continued").
            done = (self.state_cards_projection.card(cur, user_id, latest["session_id"])
                    if card is None and latest is not None else None)
        if session_row is None:
            return Resume(found=False, opening="We have not worked on anything together yet. What shall we start "
                                               "with?", **base)
        touched = from_micros(card["touched_at"] if card else session_row["last_at"])
        assert touched is not None
        seconds = max(0, int((now_dt - touched).total_seconds()))
        expired = seconds > expiry_hours * 3600
        when = format_local(touched, tz)[:10]
        ago = ago_text(seconds)
        if touched > now_dt:  # e.g. `resume --now` in the past of a card stamped by the real clock
            ago_phrase = "touched after now"
        else:
            ago_phrase = "earlier today" if ago == "just now" else f"{ago} ago"
        state = None
        if card is not None:
            state = StateCard(session_id=card["session_id"], task=card["task"], progress=card["progress"],
                              decisions=card["decisions"], open_questions=card["open_questions"],
                              action_items=card["action_items"], status=card["status"], touched_at=touched)
            subject = card["task"] or f"session {card['session_id']}"
        else:
            subject = f"our conversation (session {session_row['session_id']})"
        progress = state.progress if state else None
        if done is not None and done["status"] == "done" and done["task"]:
            # A finished task is reported as finished, never offered for continuing (fresh-user run).
            opening = f"Last time we finished {done['task']} ({ago_phrase}, {when})"
            opening += f"; {done['progress']}" if done["progress"] else ""
            opening += ". What shall we do next?"
        elif expired:
            opening = f"It has been {ago} since we were on {subject} ({when})"
            opening += f"; {progress}" if progress else ""
            opening += ". Do you want to continue with it, or start something new?"
        else:
            opening = f"Last time we were on {subject} ({ago_phrase}, {when})"
            opening += f"; {progress}" if progress else ""
            opening += "; shall we continue?"
        if state and state.open_questions:
            still = "; ".join(state.open_questions)
            opening += " Still open: " + still + ("" if still[-1] in ".?!。？！" else ".")
        return Resume(found=True, session_id=session_row["session_id"], session_status=session_row["status"],
                      task=state.task if state else session_row["task"], card=state,
                      open_questions=state.open_questions if state else [],
                      action_items=state.action_items if state else [], last_touched_at=touched,
                      last_touched_local=format_local(touched, tz), ago_seconds=seconds, ago=ago_phrase,
                      expired=expired, opening=opening, **base)

    def search_messages(self, user_id: str, query: str, k: int = 10, *, session_id: str | None = None) -> list[Any]:
        """The user's logged messages most relevant to ``query`` (``memledger session search``): a list of
        :class:`ledger.message_search.MessageHit`, best first. Raises BadInput for a bad query, k or id."""
        from .message_search import search_messages

        return search_messages(self, user_id, query, k, session_id)

    def context(self, user_id: str, *, session_id: str | None = None, query: str | None = None, now: Any = None,
                budget: int = 2000, recent_messages: int = 20, memories: int = 30) -> Any:
        """The prompt-ready context (``memledger context``): see :func:`ledger.context.assemble_context`."""
        from .context import assemble_context

        return assemble_context(self, user_id, session_id=session_id, query=query, now=now, budget=budget,
                                recent_messages=recent_messages, memories=memories)


def split_replacement(r: tuple[str, str] | str, field: str) -> tuple[str, str]:
    """``("old", "new")`` or ``"old=>new"`` -> (old, new). Raises BadInput naming the replace flag."""
    noun = {"decisions": "decision", "open_questions": "question", "action_items": "action"}[field]
    if isinstance(r, str):
        if "=>" not in r:
            raise BadInput(f"--replace-{noun}", f"{r!r} has no '=>'", "write it as 'OLD=>NEW'")
        old, new = r.split("=>", 1)
        r = (old.strip(), new.strip())
    old, new = r
    if not old or not new:
        raise BadInput(f"--replace-{noun}", "needs both the old and the new item", "write it as 'OLD=>NEW'")
    return old, new

