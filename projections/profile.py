"""The ``profile`` projection: the current belief per (user_id, key).

One row per fact that has a head version (see ``ledger/domain.py``): asserted, superseded and corrected values
replace the row; a retraction deletes it; a contest or its resolution flips ``status``. The row is the *latest
belief* — the value we were last told — with its valid range; "what is true at instant V" is a history query
(``true_at``), not a profile lookup.
"""

from __future__ import annotations

from typing import Any

from ledger.timeutil import OPEN, parse_instant, to_micros

from .base import LogEvent, Projection
from .db import Cursor


def _us(iso: str | None) -> int | None:
    return None if iso is None else to_micros(parse_instant(iso, "valid_time"))


class ProfileProjection(Projection):
    name = "profile"
    tables = {
        "facts": """
        CREATE TABLE IF NOT EXISTS {t} (
            user_id TEXT NOT NULL,
            key TEXT NOT NULL,
            version BIGINT NOT NULL,
            value_json TEXT,
            text TEXT,
            recorded_at BIGINT NOT NULL,
            valid_from BIGINT NOT NULL,
            valid_to BIGINT NOT NULL,
            source TEXT NOT NULL,
            confidence DOUBLE PRECISION NOT NULL,
            status TEXT NOT NULL,
            source_ref TEXT,
            session_id TEXT,
            sensitivity TEXT,
            position BIGINT NOT NULL,
            PRIMARY KEY (user_id, key)
        )""",
    }
    indexes = ["CREATE INDEX IF NOT EXISTS {t_facts}_recent ON {t_facts} (user_id, recorded_at)"]

    def apply(self, cur: Cursor, le: LogEvent) -> None:
        e = le.event
        effect = getattr(e, "effect", None)
        if effect is None:
            return
        t = self.table("facts")
        if effect in ("new", "supersede", "correct"):
            cur.execute(
                f"INSERT INTO {t} (user_id, key, version, value_json, text, recorded_at, valid_from, valid_to, "
                "source, confidence, status, source_ref, session_id, sensitivity, position) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'current', ?, ?, ?, ?) "
                "ON CONFLICT (user_id, key) DO UPDATE SET version = excluded.version, "
                "value_json = excluded.value_json, text = excluded.text, recorded_at = excluded.recorded_at, "
                "valid_from = excluded.valid_from, valid_to = excluded.valid_to, source = excluded.source, "
                "confidence = excluded.confidence, status = excluded.status, source_ref = excluded.source_ref, "
                "session_id = excluded.session_id, sensitivity = excluded.sensitivity, position = excluded.position",
                (
                    e.user_id, e.key, e.originator_version, e.value_json, e.text, le.recorded_at,
                    to_micros(e.valid_from), to_micros(e.valid_to, OPEN), e.source, e.confidence,
                    e.source_ref, e.session_id, e.sensitivity, le.position,
                ),
            )
        elif effect == "retract":
            cur.execute(f"DELETE FROM {t} WHERE user_id = ? AND key = ?", (e.user_id, e.key))
            return
        for ch in e.changes:
            # Only a change to the head matters here: contest / uncontest, or a narrowed range.
            cur.execute(
                f"UPDATE {t} SET status = ?, valid_to = ? WHERE user_id = ? AND key = ? AND version = ?",
                (
                    "contested" if ch["status"] == "contested" else "current",
                    _us(ch["valid_to"]) if ch["valid_to"] is not None else OPEN,
                    e.user_id, e.key, ch["version"],
                ),
            )

    def purge_user(self, cur: Cursor, user_id: str) -> None:
        cur.execute(f"DELETE FROM {self.table('facts')} WHERE user_id = ?", (user_id,))

    # -- queries -----------------------------------------------------------------------------------------------
    def rows(self, cur: Cursor, user_id: str) -> list[dict[str, Any]]:
        """The user's current facts ordered by key, as dicts of the table's columns."""
        cur.execute(
            f"SELECT key, version, value_json, text, recorded_at, valid_from, valid_to, source, confidence, status, "
            f"source_ref, session_id, sensitivity, position FROM {self.table('facts')} WHERE user_id = ? ORDER BY key",
            (user_id,),
        )
        cols = ["key", "version", "value_json", "text", "recorded_at", "valid_from", "valid_to", "source",
                "confidence", "status", "source_ref", "session_id", "sensitivity", "position"]
        return [dict(zip(cols, r)) for r in cur.fetchall()]
