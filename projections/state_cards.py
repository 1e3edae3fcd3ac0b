"""The ``state_cards`` projection: every session's status and the state card of the task it works on.

Two tables:

``state_cards_sessions`` — one row per (user_id, session_id): task, open/ended, when it started and ended, when
it was last touched (the latest ``observed_at`` of any of its events, in microseconds UTC), how many messages.

``state_cards_cards`` — one row per (user_id, session_id): the card (task, progress, decisions, open_questions,
action_items as JSON lists) exactly as the last ``StateCardUpdated`` recorded it (the event carries the resulting
card, so nothing is re-derived here), its status (open | done | continued), and ``touched_at``. A session started
with the task of an earlier open card inherits it (``SessionStarted.inherited_card``); the earlier card becomes
``continued`` with ``continued_in`` naming the new session, so ``resume`` shows one card per task.
"""

from __future__ import annotations

import json
from typing import Any

from ledger.timeutil import to_micros

from .base import LogEvent, Projection
from .db import Cursor

SESSION_COLS = ["session_id", "task", "status", "started_at", "ended_at", "last_at", "messages", "implicit",
                "start_position", "position"]
CARD_COLS = ["session_id", "task", "progress", "decisions", "open_questions", "action_items", "status",
             "touched_at", "updated_at", "continued_in", "position"]


class StateCardsProjection(Projection):
    name = "state_cards"
    tables = {
        "sessions": """
        CREATE TABLE IF NOT EXISTS {t} (
            user_id TEXT NOT NULL,
            session_id TEXT NOT NULL,
            task TEXT,
            status TEXT NOT NULL,
            started_at BIGINT NOT NULL,
            ended_at BIGINT,
            last_at BIGINT NOT NULL,
            messages BIGINT NOT NULL,
            implicit BIGINT NOT NULL,
            start_position BIGINT NOT NULL,
            position BIGINT NOT NULL,
            PRIMARY KEY (user_id, session_id)
        )""",
        "cards": """
        CREATE TABLE IF NOT EXISTS {t} (
            user_id TEXT NOT NULL,
            session_id TEXT NOT NULL,
            task TEXT,
            progress TEXT,
            decisions TEXT NOT NULL,
            open_questions TEXT NOT NULL,
            action_items TEXT NOT NULL,
            status TEXT NOT NULL,
            touched_at BIGINT NOT NULL,
            updated_at BIGINT,
            continued_in TEXT,
            position BIGINT NOT NULL,
            PRIMARY KEY (user_id, session_id)
        )""",
    }
    indexes = [
        "CREATE INDEX IF NOT EXISTS {t_sessions}_recent ON {t_sessions} (user_id, last_at)",
        "CREATE INDEX IF NOT EXISTS {t_cards}_recent ON {t_cards} (user_id, status, touched_at)",
    ]

    def apply(self, cur: Cursor, le: LogEvent) -> None:
        e = le.event
        kind = type(e).__name__
        if kind not in ("SessionStarted", "MessageLogged", "StateCardUpdated", "SessionSummarized", "SessionEnded"):
            return
        ts, tc = self.table("sessions"), self.table("cards")
        at = to_micros(e.observed_at)

        def seal(value: Any) -> Any:  # a card's words are the user's: sealed under their key (ledger/sealing.py)
            return cur.seal(e.user_id, value)

        if kind == "SessionStarted":
            inherited = e.inherited_card or {}
            card = inherited.get("card") or {}
            task = e.task or card.get("task")
            cur.execute(
                f"INSERT INTO {ts} (user_id, session_id, task, status, started_at, ended_at, last_at, messages, "
                "implicit, start_position, position) VALUES (?, ?, ?, 'open', ?, NULL, ?, 0, ?, ?, ?)",
                (e.user_id, e.session_id, seal(task), at, at, int(bool(e.implicit)), le.position, le.position),
            )
            cur.execute(
                f"INSERT INTO {tc} (user_id, session_id, task, progress, decisions, open_questions, action_items, "
                "status, touched_at, updated_at, continued_in, position) VALUES (?, ?, ?, ?, ?, ?, ?, 'open', ?, ?, "
                "NULL, ?)",
                (e.user_id, e.session_id, seal(task), seal(card.get("progress")),
                 seal(json.dumps(card.get("decisions", []))), seal(json.dumps(card.get("open_questions", []))),
                 seal(json.dumps(card.get("action_items", []))), at, None, le.position),
            )
            if inherited.get("from_session"):
                cur.execute(f"UPDATE {tc} SET status = 'continued', continued_in = ? WHERE user_id = ? AND "
                            "session_id = ?", (e.session_id, e.user_id, inherited["from_session"]))
            return
        if kind == "SessionSummarized":
            return  # a summary is written about a session, often later: it is not activity in it
        # Every other event touches its session (last activity).
        cur.execute(f"UPDATE {ts} SET last_at = CASE WHEN last_at > ? THEN last_at ELSE ? END, position = ? "
                    "WHERE user_id = ? AND session_id = ?", (at, at, le.position, e.user_id, e.session_id))
        cur.execute(f"UPDATE {tc} SET touched_at = CASE WHEN touched_at > ? THEN touched_at ELSE ? END "
                    "WHERE user_id = ? AND session_id = ?", (at, at, e.user_id, e.session_id))
        if kind == "MessageLogged":
            cur.execute(f"UPDATE {ts} SET messages = messages + 1 WHERE user_id = ? AND session_id = ?",
                        (e.user_id, e.session_id))
        elif kind == "StateCardUpdated":
            c = e.card
            cur.execute(
                f"UPDATE {tc} SET task = ?, progress = ?, decisions = ?, open_questions = ?, action_items = ?, "
                "status = ?, updated_at = ?, position = ? WHERE user_id = ? AND session_id = ?",
                (seal(c.get("task")), seal(c.get("progress")), seal(json.dumps(c.get("decisions", []))),
                 seal(json.dumps(c.get("open_questions", []))), seal(json.dumps(c.get("action_items", []))),
                 c.get("status", "open"), at, le.position, e.user_id, e.session_id),
            )
            cur.execute(f"UPDATE {ts} SET task = ? WHERE user_id = ? AND session_id = ?",
                        (seal(c.get("task")), e.user_id, e.session_id))
        elif kind == "SessionEnded":
            cur.execute(f"UPDATE {ts} SET status = 'ended', ended_at = ? WHERE user_id = ? AND session_id = ?",
                        (at, e.user_id, e.session_id))

    def purge_user(self, cur: Cursor, user_id: str) -> None:
        for short in self.tables:
            cur.execute(f"DELETE FROM {self.table(short)} WHERE user_id = ?", (user_id,))

    # -- queries -----------------------------------------------------------------------------------------------
    def sessions(self, cur: Cursor, user_id: str) -> list[dict[str, Any]]:
        """The user's sessions, oldest first (by ``started_at``, then log position), as dicts of SESSION_COLS."""
        cur.execute(f"SELECT {', '.join(SESSION_COLS)} FROM {self.table('sessions')} WHERE user_id = ? "
                    "ORDER BY started_at, position", (user_id,))
        return [dict(zip(SESSION_COLS, r)) for r in cur.fetchall()]

    def session(self, cur: Cursor, user_id: str, session_id: str) -> dict[str, Any] | None:
        cur.execute(f"SELECT {', '.join(SESSION_COLS)} FROM {self.table('sessions')} WHERE user_id = ? AND "
                    "session_id = ?", (user_id, session_id))
        row = cur.fetchone()
        return None if row is None else dict(zip(SESSION_COLS, row))

    def card(self, cur: Cursor, user_id: str, session_id: str) -> dict[str, Any] | None:
        """One session's card with its lists decoded, or None."""
        cur.execute(f"SELECT {', '.join(CARD_COLS)} FROM {self.table('cards')} WHERE user_id = ? AND "
                    "session_id = ?", (user_id, session_id))
        row = cur.fetchone()
        return None if row is None else _card(row)

    def open_cards(self, cur: Cursor, user_id: str) -> list[dict[str, Any]]:
        """Open cards that say something (a task or any item), most recently touched first."""
        cur.execute(f"SELECT {', '.join(CARD_COLS)} FROM {self.table('cards')} WHERE user_id = ? AND "
                    "status = 'open' ORDER BY touched_at DESC, position DESC", (user_id,))
        cards = [_card(r) for r in cur.fetchall()]
        return [c for c in cards if c["task"] or c["progress"] or any(c[k] for k in
                                                                      ("decisions", "open_questions", "action_items"))]

    def open_card_for_task(self, cur: Cursor, user_id: str, task: str) -> dict[str, Any] | None:
        """The most recently touched open card of ``task``, or None (a new session of that task inherits it)."""
        cur.execute(f"SELECT {', '.join(CARD_COLS)} FROM {self.table('cards')} WHERE user_id = ? AND task = ? AND "
                    "status = 'open' ORDER BY touched_at DESC, position DESC", (user_id, cur.seal(user_id, task)))
        row = cur.fetchone()
        return None if row is None else _card(row)


def _card(row: tuple) -> dict[str, Any]:
    d = dict(zip(CARD_COLS, row))
    for k in ("decisions", "open_questions", "action_items"):
        d[k] = json.loads(d[k])
    return d
