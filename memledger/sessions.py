"""Sessions: recording session commands, and the session reads (sessions, messages, summary gaps, resume).

::

    with MemoryLedger(home="/tmp/demo") as ml:
        ml.session_start("u1", "s1", task="quarterly report", observed_at="2024-05-06T09:00:00+08:00")
        ml.log_message("u1", "s1", role="user", message_id="m1", text="Let's finish it next Friday")
        ml.update_card("u1", "s1", progress="the outline is done", add_decisions=["use the 2023 template"])
        print(ml.resume("u1", now="2024-05-09T09:00:00+08:00").opening)
        print(ml.context("u1", budget=800).text)

``MemoryLedger``'s session methods are these functions on its store; each mirrors a CLI verb (``memledger session start|log|card|summarize|end|gaps``, ``resume``, ``context``)
and returns a pydantic model whose ``model_dump(mode="json")`` is the CLI's ``--json``. Writes return once the
projections have caught up (read-your-writes), reads catch up first — the facade's contract. Errors: every refusal
is :class:`~ledger.errors.BadInput` naming the field (nothing written).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from ledger.errors import BadInput
from ledger.schemas import ErasedMark, Receipt
from ledger.sessions import SessionCommand, check_session_id, execute_session_commands, validate_session_command
from ledger.timeutil import from_micros, now_utc, parse_instant

from .reads import TZ_KEYS, user_timezone  # noqa: F401 (TZ_KEYS re-exported)
from .store import Store
from .timefmt import ago_text


#: Default age after which ``resume`` flags a task as stale (ask before carrying on), in hours.
from .defaults import DEFAULT_EXPIRY_HOURS  # noqa: E402,F401 (re-exported)


class SessionReceipt(BaseModel):
    """What every session command returns: the event recorded (or, for a retry, the first one) and its position."""

    event_id: str
    user_id: str
    session_id: str
    event: str
    version: int
    position: int
    replayed: bool = False
    #: the shard whose log ``position`` is on, when the ledger is sharded (docs/scale.md); absent otherwise
    shard: str | None = Field(default=None, exclude_if=lambda v: v is None)
    #: ``end`` with ``close_memories``: the receipts of the retractions that retired the run's memories (absent
    #: otherwise; memledger/scopes.py ``close_run``)
    closed_memories: list[Receipt] | None = Field(default=None, exclude_if=lambda v: v is None)


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


class Resume(ErasedMark):
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


class SummaryGaps(ErasedMark):
    """``memledger session gaps USER --json``: which parts of the pyramid are missing.

    ``without_session_summary``: sessions with no summary of their own and not covered by any span/all summary.
    ``not_merged``: sessions older than the ``recent`` newest that no span or all summary covers yet.
    """

    user_id: str
    sessions: list[str]
    without_session_summary: list[str]
    not_merged: list[str]
    recent: int


# -- writes ------------------------------------------------------------------------------------------------
def record_session(store: Store, commands: Iterable[dict[str, Any] | SessionCommand]) -> list[SessionReceipt]:
    """Record many session commands in one save: all validated first; any refusal writes nothing."""
    validated = [c if isinstance(c, SessionCommand) else validate_session_command(c) for c in commands]
    if not validated:
        return []
    outcomes: list[Any] = []

    def save() -> list[tuple[int | None, Any]]:
        # every event the save wrote (implicit session starts included), and a None position per retry that wrote
        # nothing, whose receipt is read from a projection
        saved: list[tuple[int, Any]] = []
        outcomes.extend(execute_session_commands(store.app, [_complete(store, c) for c in validated], saved=saved))
        return [*saved, *((None, None) for o in outcomes if o.position is None)]

    # the one write path (Store.write): the same checks and read-your-writes as the fact commands
    store.write({c.user_id for c in validated}, save)
    out = []
    for o in outcomes:
        position = o.position
        if position is None:  # a retry: find the first event's position in the projections
            with store.db.read() as cur:
                if o.command.op == "log":
                    position = store.messages_projection.position_of(cur, o.command.user_id,
                                                                    o.command.session_id, o.command.message_id)
                else:
                    s = store.state_cards_projection.session(cur, o.command.user_id, o.command.session_id)
                    position = None if s is None else s["start_position"]
        out.append(SessionReceipt(event_id=o.event_id, user_id=o.command.user_id,
                                  session_id=o.command.session_id, event=o.event, version=o.version,
                                  position=position or 0, replayed=o.replayed))
    return out

def _complete(store: Store, cmd: SessionCommand) -> SessionCommand:
    """Fill in what the facade decides from the read side: an inherited card, the sessions of ``all``."""
    if cmd.op == "start" and cmd.task and cmd.inherited_card is None:
        store.before_read(None, 10.0)
        with store.db.read() as cur:
            previous = store.state_cards_projection.open_card_for_task(cur, cmd.user_id, cmd.task)
        if previous is not None and previous["session_id"] != cmd.session_id:
            card = {k: previous[k] for k in ("task", "progress", "decisions", "open_questions", "action_items")}
            card["status"] = "open"
            return cmd.model_copy(update={"inherited_card": {"from_session": previous["session_id"],
                                                             "card": card}})
    if cmd.op == "summarize" and cmd.level != "session":
        store.before_read(None, 10.0)
        with store.db.read() as cur:
            known = [s["session_id"] for s in store.state_cards_projection.sessions(cur, cmd.user_id)]
        if cmd.level == "all":
            covers = known if cmd.session_id in known else known + [cmd.session_id]
            return cmd.model_copy(update={"covers": covers})
        unknown = [s for s in cmd.covers if s not in known]
        if unknown:
            raise BadInput("covers", f"{unknown[0]!r} is not a session of {cmd.user_id!r}",
                           "name sessions that were started or logged to")
    return cmd

def card_ops(add_decisions: Sequence[str] = (), remove_decisions: Sequence[str] = (),
             replace_decisions: Sequence[tuple[str, str] | str] = (), add_questions: Sequence[str] = (),
             remove_questions: Sequence[str] = (), replace_questions: Sequence[tuple[str, str] | str] = (),
             add_actions: Sequence[str] = (), remove_actions: Sequence[str] = (),
             replace_actions: Sequence[tuple[str, str] | str] = ()) -> list[dict[str, Any]]:
    """The patch ops of a state-card update, in the order decisions, questions, actions (each: add, remove,
    replace). A replacement is ``(old, new)`` or ``"OLD=>NEW"``; raises BadInput naming the replace flag."""
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
    return ops


def sessions(store: Store, user_id: str) -> list[dict[str, Any]]:
    """The user's sessions, oldest first: ``{"session_id", "task", "status", "started_at", "ended_at",
    "last_at", "messages"}`` with instants as aware UTC datetimes."""
    from ledger.schemas import check_user_id

    user_id = check_user_id(user_id)
    store.before_read(None, 10.0)
    with store.db.read() as cur:
        rows = store.state_cards_projection.sessions(cur, user_id)
    return [{"session_id": r["session_id"], "task": r["task"], "status": r["status"],
             "started_at": from_micros(r["started_at"]), "ended_at": from_micros(r["ended_at"]),
             "last_at": from_micros(r["last_at"]), "messages": r["messages"]} for r in rows]

def messages(store: Store, user_id: str, session_id: str | None = None) -> list[dict[str, Any]]:
    """The user's logged messages (or one session's), by observed_at then seq, instants as aware UTC."""
    from ledger.schemas import check_user_id

    user_id = check_user_id(user_id)
    if session_id is not None:
        session_id = check_session_id(session_id)
    store.before_read(None, 10.0)
    with store.db.read() as cur:
        rows = store.messages_projection.all(cur, user_id, session_id)
    for r in rows:
        r["observed_at"] = from_micros(r["observed_at"])
        r["recorded_at"] = from_micros(r["recorded_at"])
    return rows

def summary_gaps(store: Store, user_id: str, *, recent: int = 3) -> SummaryGaps:
    """Which sessions still lack a summary (``memledger session gaps``); see :class:`SummaryGaps`."""
    from ledger.schemas import check_user_id

    user_id = check_user_id(user_id)
    if isinstance(recent, bool) or not isinstance(recent, int) or recent < 0:
        raise BadInput("--recent", f"{recent!r} is not a number of sessions", "give 0 or more, e.g. --recent 3")
    store.before_read(None, 10.0)
    with store.db.read() as cur:
        sessions = [s["session_id"] for s in store.state_cards_projection.sessions(cur, user_id)]
        summaries = store.summaries_projection.rows(cur, user_id)
    own = {c for s in summaries if s["level"] == "session" for c in s["covers"]}
    merged = {c for s in summaries if s["level"] != "session" for c in s["covers"]}
    older = sessions[:-recent] if recent > 0 else sessions
    return SummaryGaps(user_id=user_id, sessions=sessions,
                       without_session_summary=[s for s in sessions if s not in own and s not in merged],
                       not_merged=[s for s in older if s not in merged], recent=recent)

def resume(store: Store, user_id: str, *, now: Any = None, expiry_hours: float = DEFAULT_EXPIRY_HOURS,
           as_of: Any = None, axis: str = "system") -> Resume:
    """Where ``user_id`` left off: the most recently touched open card (else the latest session), how long ago,
    its open questions and action items, and the opening sentence; flagged ``expired`` past ``expiry_hours``.

    ``now`` is an aware instant (default: the current time); naive is refused. Times are rendered in the
    user's zone (:meth:`user_timezone`). Raises BadInput for a bad user id, ``now`` or ``expiry_hours``.
        ``as_of`` (with ``axis``: "system" recorded by then, "observed" said by then): only what the ledger knew at
    that instant — the sessions and cards replayed from the log up to it (:func:`replay.cutoff.sessions_at_cutoff`).
    """
    from .timefmt import format_local
    from ledger.schemas import check_user_id

    user_id = check_user_id(user_id)
    now_dt = parse_instant(now, "now") if now is not None else now_utc()
    if isinstance(expiry_hours, bool) or not isinstance(expiry_hours, (int, float)) or not expiry_hours > 0 \
            or expiry_hours == float("inf"):
        raise BadInput("expiry_hours", f"{expiry_hours!r} is not a positive number of hours", "e.g. 48")
    tz = user_timezone(store, user_id)
    base = dict(user_id=user_id, now=now_dt, now_local=format_local(now_dt, tz), timezone=tz,
                expiry_hours=float(expiry_hours))
    if axis not in ("system", "observed"):
        raise BadInput("axis", f"{axis!r} is not an axis", "use system (recorded by then) or observed (said by then)")
    if axis != "system" and as_of is None:
        raise BadInput("axis", "is given without as_of", "give --as-of T (the cut-off it applies to), or leave --axis out")
    db, cards_p = store.db, store.state_cards_projection
    if as_of is not None:  # the knowledge cut-off: the session projections replayed from the log up to then
        from ledger.timeutil import to_micros
        from replay.cutoff import sessions_at_cutoff

        store.before_read()
        past = sessions_at_cutoff(store.app, user_id, to_micros(parse_instant(as_of, "as_of")), axis)
        db, cards_p = past.db, past.state_cards
    with db.read() as cur:
        cards = cards_p.open_cards(cur, user_id)
        sessions = cards_p.sessions(cur, user_id)
        card = cards[0] if cards else None
        latest = max(sessions, key=lambda s: (s["last_at"], s["position"])) if sessions else None
        session_row = (cards_p.session(cur, user_id, card["session_id"]) if card
                       else latest)
        # No open card: the latest session's own card, if its task was marked done (not to be "continued").
        done = (cards_p.card(cur, user_id, latest["session_id"])
                if card is None and latest is not None else None)
    if as_of is not None:
        db.close()  # the scratch replay
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
        # A finished task is reported as finished, never offered for continuing.
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

