"""The ``messages`` projection: the raw conversation, one row per logged message (the audit log agents re-read).

``messages_log`` — (user_id, session_id, message_id) -> seq (order within the session, by log position), role,
speaker, text, ``observed_at`` and ``recorded_at`` (microseconds UTC) and the log position. Text is stored exactly
as logged; relative dates are annotated when it is *rendered* (memledger/context.py), in the user's current zone.
"""

from __future__ import annotations

from typing import Any

from ledger.timeutil import to_micros

from .base import LogEvent, Projection
from .db import Cursor

MESSAGE_COLS = ["session_id", "message_id", "seq", "role", "speaker", "text", "observed_at", "recorded_at",
                "position"]


class MessagesProjection(Projection):
    name = "messages"
    tables = {
        "log": """
        CREATE TABLE IF NOT EXISTS {t} (
            user_id TEXT NOT NULL,
            session_id TEXT NOT NULL,
            message_id TEXT NOT NULL,
            seq BIGINT NOT NULL,
            role TEXT NOT NULL,
            speaker TEXT,
            text TEXT NOT NULL,
            observed_at BIGINT NOT NULL,
            recorded_at BIGINT NOT NULL,
            position BIGINT NOT NULL,
            PRIMARY KEY (user_id, session_id, message_id)
        )""",
    }
    indexes = [
        "CREATE INDEX IF NOT EXISTS {t_log}_seq ON {t_log} (user_id, session_id, seq)",
        "CREATE INDEX IF NOT EXISTS {t_log}_recent ON {t_log} (user_id, observed_at)",
    ]

    def apply(self, cur: Cursor, le: LogEvent) -> None:
        e = le.event
        if type(e).__name__ != "MessageLogged":
            return
        t = self.table("log")
        # seq: the message's place in its session, in log order (each message is its own stream, so the log
        # position, not a stream version, orders a session's messages)
        cur.execute(f"SELECT COALESCE(MAX(seq), 0) FROM {t} WHERE user_id = ? AND session_id = ?",
                    (e.user_id, e.session_id))
        seq = int(cur.fetchone()[0]) + 1
        cur.execute(
            f"INSERT INTO {t} ({', '.join(['user_id'] + MESSAGE_COLS)}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (e.user_id, e.session_id, e.message_id, seq, e.role, cur.seal(e.user_id, e.speaker),
             cur.seal(e.user_id, e.text), to_micros(e.observed_at), le.recorded_at, le.position),
        )

    def purge_user(self, cur: Cursor, user_id: str) -> None:
        cur.execute(f"DELETE FROM {self.table('log')} WHERE user_id = ?", (user_id,))

    # -- queries -----------------------------------------------------------------------------------------------
    def recent(self, cur: Cursor, user_id: str, session_id: str, limit: int) -> list[dict[str, Any]]:
        """The last ``limit`` messages of a session, in conversation order (seq ascending)."""
        cur.execute(f"SELECT {', '.join(MESSAGE_COLS)} FROM {self.table('log')} WHERE user_id = ? AND "
                    "session_id = ? ORDER BY seq DESC LIMIT ?", (user_id, session_id, limit))
        return [dict(zip(MESSAGE_COLS, r)) for r in reversed(cur.fetchall())]

    def all(self, cur: Cursor, user_id: str, session_id: str | None = None) -> list[dict[str, Any]]:
        """Every message of the user (or of one session), by observed_at then seq."""
        sql = f"SELECT {', '.join(MESSAGE_COLS)} FROM {self.table('log')} WHERE user_id = ?"
        params: list[Any] = [user_id]
        if session_id is not None:
            sql += " AND session_id = ?"
            params.append(session_id)
        cur.execute(sql + " ORDER BY observed_at, seq", params)
        return [dict(zip(MESSAGE_COLS, r)) for r in cur.fetchall()]

    def position_of(self, cur: Cursor, user_id: str, session_id: str, message_id: str) -> int | None:
        cur.execute(f"SELECT position FROM {self.table('log')} WHERE user_id = ? AND session_id = ? AND "
                    "message_id = ?", (user_id, session_id, message_id))
        row = cur.fetchone()
        return None if row is None else int(row[0])
