"""The ``summaries`` projection: the summary pyramid (caller-written summaries at levels session, span and all).

``summaries_pyramid`` — one row per ``SessionSummarized``: level, text, the session ids it covers (JSON list; a
session summary covers its own session, a span several, ``all`` every session the user had when it was written),
an optional message range, ``observed_at`` and the log position. A later summary of the same level and coverage
does not delete an earlier one (the log keeps both); readers take the latest.
"""

from __future__ import annotations

import json
from typing import Any

from ledger.timeutil import to_micros

from .base import LogEvent, Projection
from .db import Cursor

SUMMARY_COLS = ["summary_id", "session_id", "level", "text", "covers", "first_message_id", "last_message_id",
                "observed_at", "position"]


class SummariesProjection(Projection):
    name = "summaries"
    tables = {
        "pyramid": """
        CREATE TABLE IF NOT EXISTS {t} (
            user_id TEXT NOT NULL,
            summary_id TEXT NOT NULL,
            session_id TEXT NOT NULL,
            level TEXT NOT NULL,
            text TEXT NOT NULL,
            covers TEXT NOT NULL,
            first_message_id TEXT,
            last_message_id TEXT,
            observed_at BIGINT NOT NULL,
            position BIGINT NOT NULL,
            PRIMARY KEY (user_id, summary_id)
        )""",
    }
    indexes = ["CREATE INDEX IF NOT EXISTS {t_pyramid}_pos ON {t_pyramid} (user_id, position)"]

    def apply(self, cur: Cursor, le: LogEvent) -> None:
        e = le.event
        if type(e).__name__ != "SessionSummarized":
            return
        cur.execute(
            f"INSERT INTO {self.table('pyramid')} ({', '.join(['user_id'] + SUMMARY_COLS)}) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (e.user_id, e.summary_id, e.session_id, e.level, cur.seal(e.user_id, e.text), json.dumps(list(e.covers)),
             e.first_message_id, e.last_message_id, to_micros(e.observed_at), le.position),
        )

    def purge_user(self, cur: Cursor, user_id: str) -> None:
        cur.execute(f"DELETE FROM {self.table('pyramid')} WHERE user_id = ?", (user_id,))

    def rows(self, cur: Cursor, user_id: str) -> list[dict[str, Any]]:
        """Every summary of the user in log order, ``covers`` decoded to a list."""
        cur.execute(f"SELECT {', '.join(SUMMARY_COLS)} FROM {self.table('pyramid')} WHERE user_id = ? "
                    "ORDER BY position", (user_id,))
        out = []
        for r in cur.fetchall():
            d = dict(zip(SUMMARY_COLS, r))
            d["covers"] = json.loads(d["covers"])
            out.append(d)
        return out
