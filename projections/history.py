"""The ``history`` projection: every version of every fact, and the bitemporal timeline behind time travel.

Two tables:

``history_versions`` — one row per event, in log order: kind, reason, provenance, and the version's valid range
*as known now* (later events narrow it: a superseded value shows its closed range; a misreported or withdrawn value
an empty one). This is what ``memledger history`` and ``audit`` print.

``history_timeline`` — bitemporal rows: for a version, a valid range ``[valid_from, valid_to)`` together with the
system-time range ``[recorded_from, recorded_to)`` during which the ledger held that belief. Rows are only ever
inserted and closed (``recorded_to`` set), never edited otherwise, so the belief at any past system time stays
queryable (Snodgrass's bitemporal tables; XTDB's and Datomic's as-of). ``believed(as_of=T, valid_at=V)`` is the
rows with ``recorded_from <= T < recorded_to`` and ``valid_from <= V < valid_to``. Empty valid ranges are not
stored. Open ends are :data:`ledger.timeutil.OPEN`.
"""

from __future__ import annotations

import json
from typing import Any

from ledger.timeutil import OPEN, parse_instant, to_micros

from .base import LogEvent, Projection
from .db import Cursor

VERSION_COLS = [
    "user_id", "key", "version", "event_id", "kind", "effect", "value_json", "text", "reason", "recorded_at",
    "observed_at", "valid_from", "valid_to", "status", "replaces", "replaced_by", "source", "source_ref",
    "session_id", "actor", "trace_id", "derived_from", "confidence", "role", "sensitivity", "position",
]

_INITIAL_STATUS = {
    "new": "current", "supersede": "current", "correct": "current", "backfill": "superseded",
    "reaffirm": "reaffirmation", "contest": "contesting", "retract": "retraction",
}


def _us(iso: str | None, open_value: int | None = None) -> int | None:
    return open_value if iso is None else to_micros(parse_instant(iso, "valid_time"))


class HistoryProjection(Projection):
    name = "history"
    tables = {
        "versions": """
        CREATE TABLE IF NOT EXISTS {t} (
            user_id TEXT NOT NULL,
            key TEXT NOT NULL,
            version BIGINT NOT NULL,
            event_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            effect TEXT NOT NULL,
            value_json TEXT,
            text TEXT,
            reason TEXT,
            recorded_at BIGINT NOT NULL,
            observed_at BIGINT,
            valid_from BIGINT,
            valid_to BIGINT,
            status TEXT NOT NULL,
            replaces BIGINT,
            replaced_by BIGINT,
            source TEXT NOT NULL,
            source_ref TEXT,
            session_id TEXT,
            actor TEXT,
            trace_id TEXT,
            derived_from TEXT,
            confidence DOUBLE PRECISION NOT NULL,
            role TEXT,
            sensitivity TEXT,
            position BIGINT NOT NULL,
            PRIMARY KEY (user_id, key, version)
        )""",
        "timeline": """
        CREATE TABLE IF NOT EXISTS {t} (
            user_id TEXT NOT NULL,
            key TEXT NOT NULL,
            version BIGINT NOT NULL,
            valid_from BIGINT NOT NULL,
            valid_to BIGINT NOT NULL,
            recorded_from BIGINT NOT NULL,
            recorded_to BIGINT NOT NULL,
            position_from BIGINT NOT NULL,
            position_to BIGINT NOT NULL,
            status TEXT NOT NULL,
            PRIMARY KEY (user_id, key, version, position_from)
        )""",
    }
    indexes = [
        "CREATE INDEX IF NOT EXISTS {t_versions}_pos ON {t_versions} (user_id, position)",
        "CREATE UNIQUE INDEX IF NOT EXISTS {t_versions}_event ON {t_versions} (event_id)",
        "CREATE INDEX IF NOT EXISTS {t_timeline}_sys ON {t_timeline} (user_id, recorded_from, recorded_to)",
        "CREATE INDEX IF NOT EXISTS {t_timeline}_open ON {t_timeline} (user_id, key, version, position_to)",
    ]

    def apply(self, cur: Cursor, le: LogEvent) -> None:
        e = le.event
        effect = getattr(e, "effect", None)
        if effect is None:
            return
        tv, tt = self.table("versions"), self.table("timeline")
        version = e.originator_version
        cur.execute(
            f"INSERT INTO {tv} ({', '.join(VERSION_COLS)}) VALUES ({', '.join('?' * len(VERSION_COLS))})",
            (
                e.user_id, e.key, version, e.event_id, e.kind, effect, e.value_json, e.text, e.reason,
                le.recorded_at, to_micros(e.observed_at), to_micros(e.valid_from), to_micros(e.valid_to),
                _INITIAL_STATUS[effect], e.replaces, None, e.source, e.source_ref, e.session_id, e.actor,
                e.trace_id, json.dumps(list(e.derived_from)), e.confidence,
                None if e.role is None else json.dumps(e.role, sort_keys=True), e.sensitivity, le.position,
            ),
        )
        if e.replaces is not None and effect in ("supersede", "correct", "retract"):
            cur.execute(
                f"UPDATE {tv} SET replaced_by = ? WHERE user_id = ? AND key = ? AND version = ?",
                (version, e.user_id, e.key, e.replaces),
            )
        # Bitemporal rows: a new version's range opens now in system time ...
        if effect in ("new", "supersede", "correct", "backfill"):
            vf, vt = to_micros(e.valid_from), to_micros(e.valid_to, OPEN)
            if vf < vt:
                self._open_row(cur, e, version, vf, vt, "current", le)
        # ... and every changed range closes its old row and opens the narrowed one, at this system time.
        for ch in e.changes:
            vf, vt = _us(ch["valid_from"]), _us(ch["valid_to"], OPEN)
            cur.execute(
                f"UPDATE {tv} SET valid_from = ?, valid_to = ?, status = ? WHERE user_id = ? AND key = ? "
                "AND version = ?",
                (vf, None if vt == OPEN else vt, ch["status"], e.user_id, e.key, ch["version"]),
            )
            cur.execute(
                f"UPDATE {tt} SET recorded_to = ?, position_to = ? WHERE user_id = ? AND key = ? AND version = ? "
                "AND position_to = ?",
                (le.recorded_at, le.position, e.user_id, e.key, ch["version"], OPEN),
            )
            if vf < vt:
                self._open_row(cur, e, ch["version"], vf, vt, ch["status"], le)

    def _open_row(self, cur: Cursor, e: Any, version: int, vf: int, vt: int, status: str, le: LogEvent) -> None:
        cur.execute(
            f"INSERT INTO {self.table('timeline')} (user_id, key, version, valid_from, valid_to, recorded_from, "
            "recorded_to, position_from, position_to, status) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (e.user_id, e.key, version, vf, vt, le.recorded_at, OPEN, le.position, OPEN,
             "contested" if status == "contested" else "believed"),
        )

    def purge_user(self, cur: Cursor, user_id: str) -> None:
        for short in self.tables:
            cur.execute(f"DELETE FROM {self.table(short)} WHERE user_id = ?", (user_id,))

    # -- queries -----------------------------------------------------------------------------------------------
    def versions(self, cur: Cursor, user_id: str, key: str | None = None) -> list[dict[str, Any]]:
        """Every event of the user's facts (or of one key), in log order, as dicts of VERSION_COLS."""
        sql = f"SELECT {', '.join(VERSION_COLS)} FROM {self.table('versions')} WHERE user_id = ?"
        params: list[Any] = [user_id]
        if key is not None:
            sql += " AND key = ?"
            params.append(key)
        cur.execute(sql + " ORDER BY position", params)
        return [dict(zip(VERSION_COLS, r)) for r in cur.fetchall()]

    def position_of_version(self, cur: Cursor, user_id: str, key: str, version: int) -> int | None:
        cur.execute(
            f"SELECT position FROM {self.table('versions')} WHERE user_id = ? AND key = ? AND version = ?",
            (user_id, key, version),
        )
        row = cur.fetchone()
        return None if row is None else int(row[0])
