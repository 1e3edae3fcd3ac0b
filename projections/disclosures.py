"""The ``disclosures`` projection: each time a sensitive fact was let into an agent's context.

One row per ``SensitiveFactIncluded`` event (ledger/privacy.py), in log order: which fact (key, version), its
label, the session and purpose given by the caller. It is the audit of sensitivity labels: context assembly leaves
labelled facts out unless the caller allows the label, and records each inclusion here. Metadata only -- the
content stays in the fact's own (encrypted) events. Purged with the user on erasure.
"""

from __future__ import annotations

from typing import Any

from .base import LogEvent, Projection
from .db import Cursor

COLS = ["user_id", "position", "recorded_at", "key", "version", "sensitivity", "session_id", "purpose", "trace_id"]


class DisclosuresProjection(Projection):
    name = "disclosures"
    tables = {
        "log": """
        CREATE TABLE IF NOT EXISTS {t} (
            user_id TEXT NOT NULL,
            position BIGINT NOT NULL,
            recorded_at BIGINT NOT NULL,
            key TEXT NOT NULL,
            version BIGINT NOT NULL,
            sensitivity TEXT NOT NULL,
            session_id TEXT,
            purpose TEXT,
            trace_id TEXT,
            PRIMARY KEY (user_id, position)
        )""",
    }

    def apply(self, cur: Cursor, le: LogEvent) -> None:
        from ledger.privacy import SensitiveFactIncluded

        e = le.event
        if not isinstance(e, SensitiveFactIncluded):
            return
        cur.execute(
            f"INSERT INTO {self.table('log')} ({', '.join(COLS)}) VALUES ({', '.join('?' * len(COLS))})",
            (e.user_id, le.position, le.recorded_at, e.key, e.version, e.sensitivity, e.session_id,
             cur.seal(e.user_id, e.purpose), e.trace_id),
        )

    def purge_user(self, cur: Cursor, user_id: str) -> None:
        cur.execute(f"DELETE FROM {self.table('log')} WHERE user_id = ?", (user_id,))

    def rows(self, cur: Cursor, user_id: str) -> list[dict[str, Any]]:
        """The user's disclosures in log order, as dicts of :data:`COLS`."""
        cur.execute(f"SELECT {', '.join(COLS)} FROM {self.table('log')} WHERE user_id = ? ORDER BY position",
                    (user_id,))
        return [dict(zip(COLS, r)) for r in cur.fetchall()]
