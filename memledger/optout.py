"""Opt-out sessions: ``memledger session start USER SESSION --no-memory`` (docs/erasure.md).

A session started with ``--no-memory`` never enters the append-only log while it runs. Its messages live in two
side tables of the projections database (``optout_sessions``, ``optout_messages``: working storage, not a
projection -- nothing replays into them) so the agent can read them back during the session; ending the session
deletes them (SQLite ``secure_delete`` zeroes the cells, the WAL is checkpointed and truncated; PostgreSQL tables
are ``VACUUM FULL``-ed) and records one tombstone, ``NoMemorySessionEnded`` (user, session id, message count --
no content), so the log says that a session happened and was not kept, and nothing else.

Facts asserted "in" such a session (``--session S`` on assert/correct/retract) are refused (exit 2): the user
asked us not to remember. State cards and summaries of it are refused the same way. ``memledger erase`` purges
open opt-out sessions too, and ``memledger export`` shows them while they are open.

Why side tables and not a per-session key (crypto-shredding the session's events): shredded events still leave
their metadata (message ids, roles, counts, times) in the log; a no-memory session promises to keep nothing beyond a tombstone.
"""

from __future__ import annotations

import uuid
from typing import Any


from ledger.domain import NAMESPACE
from ledger.errors import BadInput, IdempotencyMismatch
from ledger.sessions import NoMemorySession, NoMemorySessionEnded, tombstone_id  # noqa: F401 (re-exported)
from ledger.timeutil import from_micros, now_utc, parse_instant, to_micros

from .sessions import SessionReceipt
from .store import Store

MESSAGE_COLS = ["session_id", "message_id", "seq", "role", "speaker", "text", "observed_at"]


def purge_optout(cur: Any, user_id: str) -> None:
    """Erasure: delete the user's open opt-out sessions and their messages."""
    cur.execute("DELETE FROM optout_messages WHERE user_id = ?", (user_id,))
    cur.execute("DELETE FROM optout_sessions WHERE user_id = ?", (user_id,))


def is_no_memory(cur: Any, user_id: str, session_id: str) -> bool:
    """True if (user_id, session_id) is an open opt-out session."""
    cur.execute("SELECT 1 FROM optout_sessions WHERE user_id = ? AND session_id = ?", (user_id, session_id))
    return cur.fetchone() is not None


def _ended(ml: Store, user_id: str, session_id: str) -> bool:
    return bool(ml.app.recorder.select_events(tombstone_id(user_id, session_id), limit=1))


def refuse_facts_in_optout(ml: Store, pairs: set[tuple[str, str]]) -> None:
    """Raises BadInput naming ``session_id`` if any (user_id, session_id) is an opt-out session (open or ended)."""
    if not pairs:
        return
    with ml.db.read() as cur:
        for user_id, session_id in sorted(pairs):
            if is_no_memory(cur, user_id, session_id) or _ended(ml, user_id, session_id):
                raise BadInput("session_id", f"session {session_id!r} of {user_id!r} was started with --no-memory: "
                               "nothing said in it is remembered",
                               "leave --session out to record the fact outside the session, if the user agrees")


def _receipt(user_id: str, session_id: str, event: str, version: int, replayed: bool = False) -> Any:
    event_id = uuid.uuid5(NAMESPACE, f"optout\x1f{user_id}\x1f{session_id}\x1f{event}\x1f{version}")
    return SessionReceipt(event_id=str(event_id),
                          user_id=user_id, session_id=session_id, event=event, version=version, position=0,
                          replayed=replayed)


def start(ml: Store, user_id: str, session_id: str, *, task: str | None = None,
          observed_at: Any = None) -> Any:
    """Start an opt-out session. Nothing is written to the log. Returns a SessionReceipt with position 0
    (``event`` "NoMemorySessionStarted"); starting it again is a retry (``replayed``).

    Raises:
        BadInput: bad ids; ``--task`` given (a task would be remembered across sessions); the session already
            exists with memory, or ended.
    """
    from ledger.schemas import check_user_id
    from ledger.sessions import check_session_id

    user_id = check_user_id(user_id)
    session_id = check_session_id(session_id)
    if task is not None:
        raise BadInput("--task", "a --no-memory session keeps no task (tasks carry over between sessions)",
                       "leave --task out")
    at = parse_instant(observed_at, "observed_at") if observed_at is not None else now_utc()
    ml.refuse_erased({user_id})
    ml.catch_up(deferred=False)
    if _ended(ml, user_id, session_id):
        raise BadInput("session_id", f"session {session_id!r} of {user_id!r} ended (it was --no-memory)",
                       "start a new session id")
    with ml.db.transaction() as cur:
        if ml.state_cards_projection.session(cur, user_id, session_id) is not None:
            raise BadInput("--no-memory", f"session {session_id!r} of {user_id!r} was already started with memory",
                           "start a new session id with --no-memory")
        if is_no_memory(cur, user_id, session_id):
            return _receipt(user_id, session_id, "NoMemorySessionStarted", 0, replayed=True)
        cur.execute("INSERT INTO optout_sessions (user_id, session_id, started_at) VALUES (?, ?, ?)",
                    (user_id, session_id, to_micros(at)))
    return _receipt(user_id, session_id, "NoMemorySessionStarted", 0)


def log(ml: Store, cmd: Any) -> Any:
    """Keep one message of an opt-out session (a validated ``log`` SessionCommand) until the session ends.

    Idempotent on ``message_id`` like a logged message; the same id with other content raises
    IdempotencyMismatch. Returns a SessionReceipt with position 0 and ``version`` the message's seq.
    """
    at = cmd.observed_at or now_utc()
    fp = cmd.fingerprint()
    with ml.db.transaction() as cur:
        cur.execute("SELECT seq, fingerprint FROM optout_messages WHERE user_id = ? AND session_id = ? AND "
                    "message_id = ?", (cmd.user_id, cmd.session_id, cmd.message_id))
        row = cur.fetchone()
        if row is not None:
            if row[1] != fp:
                raise IdempotencyMismatch(
                    "message_id", f"{cmd.message_id!r} was already logged in session {cmd.session_id!r} with "
                    "different content", "a retry must repeat the message exactly; a new message needs a new id")
            return _receipt(cmd.user_id, cmd.session_id, "MessageKept", int(row[0]), replayed=True)
        cur.execute("SELECT COUNT(*) FROM optout_messages WHERE user_id = ? AND session_id = ?",
                    (cmd.user_id, cmd.session_id))
        seq = int(cur.fetchone()[0]) + 1
        cur.execute(f"INSERT INTO optout_messages ({', '.join(['user_id', *MESSAGE_COLS, 'fingerprint'])}) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (cmd.user_id, cmd.session_id, cmd.message_id, seq, cmd.role, cmd.speaker, cmd.text,
                     to_micros(at), fp))
    return _receipt(cmd.user_id, cmd.session_id, "MessageKept", seq)


def end(ml: Store, user_id: str, session_id: str) -> Any:
    """End an opt-out session: delete its messages for good and record the ``NoMemorySessionEnded`` tombstone.

    Returns a SessionReceipt (event "NoMemorySessionEnded", ``position`` the tombstone's log position).
    """
    with ml.db.transaction() as cur:
        cur.execute("SELECT COUNT(*) FROM optout_messages WHERE user_id = ? AND session_id = ?",
                    (user_id, session_id))
        n = int(cur.fetchone()[0])
        cur.execute("DELETE FROM optout_messages WHERE user_id = ? AND session_id = ?", (user_id, session_id))
        cur.execute("DELETE FROM optout_sessions WHERE user_id = ? AND session_id = ?", (user_id, session_id))
    wipe(ml)
    # the tombstone goes through the one write path; an erased user's session may still be ended (its messages are
    # gone above), so the erased-user refusal does not apply
    saved = ml.write({user_id}, lambda: ml.recorded(ml.app.save(
        NoMemorySession(user_id=user_id, session_id=session_id, messages=n))), refuse_erased=False)
    position = saved[-1][0]
    r = _receipt(user_id, session_id, "NoMemorySessionEnded", 1)
    return r.model_copy(update={"position": position})


def wipe(ml: Store) -> None:
    """Make deleted opt-out rows leave the disk: truncate the SQLite WAL (secure_delete zeroed the cells in the
    database file; the WAL still holds the page images that contained them), or VACUUM FULL the two tables."""
    ml.db.wipe(["optout_messages", "optout_sessions"])


def messages(ml: Store, user_id: str, session_id: str | None = None) -> list[dict[str, Any]]:
    """The kept messages of the user's open opt-out sessions (or of one), by session then seq; instants aware."""
    sql = f"SELECT {', '.join(MESSAGE_COLS)} FROM optout_messages WHERE user_id = ?"
    params: list[Any] = [user_id]
    if session_id is not None:
        sql += " AND session_id = ?"
        params.append(session_id)
    with ml.db.read() as cur:
        cur.execute(sql + " ORDER BY session_id, seq", params)
        rows = [dict(zip(MESSAGE_COLS, r)) for r in cur.fetchall()]
    for r in rows:
        r["observed_at"] = from_micros(r["observed_at"])
        r["no_memory"] = True
    return rows


def open_sessions(ml: Store, user_id: str) -> list[str]:
    """The user's open opt-out session ids, sorted."""
    with ml.db.read() as cur:
        cur.execute("SELECT session_id FROM optout_sessions WHERE user_id = ? ORDER BY session_id", (user_id,))
        return [r[0] for r in cur.fetchall()]


def route(ml: Store, commands: list[Any]) -> list[Any] | None:
    """Handle session commands that target open opt-out sessions; None if none does (record them normally).

    Raises:
        BadInput: a batch mixing opt-out and ordinary sessions; a card or summary for an opt-out session.
    """
    pairs = {(c.user_id, c.session_id) for c in commands}
    with ml.db.read() as cur:
        optout = {p for p in pairs if is_no_memory(cur, *p)}
    if not optout:
        for user_id, session_id in sorted(pairs):
            if _ended(ml, user_id, session_id):
                raise BadInput("session_id", f"session {session_id!r} of {user_id!r} ended (it was --no-memory)",
                               "start a new session id")
        return None
    if optout != pairs:
        raise BadInput("commands", "a batch mixes a --no-memory session with ordinary ones",
                       "record the --no-memory session's commands on their own")
    out = []
    for c in commands:
        if c.op == "start":
            out.append(_receipt(c.user_id, c.session_id, "NoMemorySessionStarted", 0, replayed=True))
        elif c.op == "log":
            out.append(log(ml, c))
        elif c.op == "end":
            out.append(end(ml, c.user_id, c.session_id))
        else:
            what = "state card" if c.op == "card" else "summary"
            raise BadInput("session_id", f"session {c.session_id!r} was started with --no-memory: no {what} "
                           "is kept for it", f"leave the {what} out")
    return out
