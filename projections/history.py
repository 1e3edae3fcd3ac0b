"""The ``history`` projection: every version of every fact, and the bitemporal timeline behind time travel.

Two tables:

``history_versions`` — one row per event, in log order: kind, reason, provenance, and the version's valid range
*as known now* (later events narrow it: a superseded value shows its closed range; a misreported or withdrawn value
an empty one). This is what ``memledger history`` and ``audit`` print.

A free-text memory's value (its own sentence as a JSON string) is stored once in ``history_versions``, as its text:
the row's ``value_json`` is ``''`` and every query here reads the value back
(:func:`projections.base.rows_read_back`).

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

from ledger.domain import Fact, fact_effect
from ledger.timeutil import OPEN, to_micros

from .base import (LogEvent, Projection, insert_rows, iso_micros, rows_read_back, sealed, spelled_out,
                   stored_value_json)
from .db import Cursor

VERSION_COLS = [
    "user_id", "key", "version", "event_id", "kind", "effect", "value_json", "text", "reason", "recorded_at",
    "observed_at", "valid_from", "valid_to", "status", "replaces", "replaced_by", "source", "source_ref",
    "session_id", "actor", "trace_id", "derived_from", "confidence", "role", "sensitivity", "position", "hygiene",
]

_INITIAL_STATUS = {
    "new": "current", "supersede": "current", "correct": "current", "backfill": "superseded",
    "reaffirm": "reaffirmation", "contest": "contesting", "retract": "retraction", "quarantine": "quarantined",
    "withdraw_source": "withdrawal", "forget": "forgotten",
}


TIMELINE_COLS = [
    "user_id", "key", "version", "valid_from", "valid_to", "recorded_from", "recorded_to", "position_from",
    "position_to", "status",
]
_REPLACED_BY, _VALID_FROM, _VALID_TO, _STATUS = (VERSION_COLS.index(c) for c in (
    "replaced_by", "valid_from", "valid_to", "status"))
_RECORDED_TO, _POSITION_TO = TIMELINE_COLS.index("recorded_to"), TIMELINE_COLS.index("position_to")
_UNSET = object()  # a column no held write has set
_FORGET_SET = "value_json = NULL, text = NULL, reason = NULL, status = 'forgotten'"
_VALUE_JSON, _TEXT, _REASON = (VERSION_COLS.index(c) for c in ("value_json", "text", "reason"))
_SEALED = (_VALUE_JSON, _TEXT, _REASON)  # a version's personal content, sealed under the user's key


def _user_upto(user_id: str | None, upto: int | None) -> tuple[str, list[Any]]:
    """The optional filters of the hygiene counts: `` AND user_id = ?`` (one user, else all) and `` AND observed_at
    <= ?`` (said by ``upto`` micros, else ever), with their parameters."""
    where, params = "", []
    if user_id is not None:
        where, params = " AND user_id = ?", [user_id]
    if upto is not None:
        where, params = where + " AND observed_at <= ?", [*params, upto]
    return where, params


def hygiene_json(e: Any) -> str | None:
    """The event's hygiene mark (ledger/hygiene.py: ``{"hedged": true}``, ``{"quarantined": "..."}``,
    ``{"releases": 3}``, ``{"corrections": 2}`` ...) as canonical JSON, or None (events before v3 have none)."""
    marks = getattr(e, "hygiene", None)
    return json.dumps(marks, sort_keys=True, separators=(",", ":")) if marks else None


def add_missing_column(cur: Cursor, table: str, column: str, ddl_type: str) -> None:
    """Add ``column`` to an existing ``table`` created before the column existed (the column goes last, where the
    DDL of a new table puts it too). Its old rows hold NULL: their events carried no such field."""
    cur.execute(f"SELECT * FROM {table} WHERE 1 = 0")
    if column not in [d[0] for d in cur.raw.description]:
        cur.execute(f"ALTER TABLE {table} ADD COLUMN {column} {ddl_type}")


def project(le: LogEvent, w: Any) -> None:
    """The history rules for one event, written as primitive writes to ``w`` (the one definition of the rows).

    ``w`` is :class:`_SqlWrites` (event by event: one statement per write) or :class:`HistoryBulk` (rows held in
    memory, written at once). Its writes, with (user_id, key, version) naming a ``history_versions`` row:

    * ``insert_version(row)`` — a ``history_versions`` row, a list in :data:`VERSION_COLS` order;
    * ``set_replaced_by(user_id, key, version, by)``;
    * ``narrow(user_id, key, version, valid_from, valid_to, status)`` — the version's valid range as known now
      (``valid_to`` None when open);
    * ``close(user_id, key, version, recorded_to, position_to)`` — close the version's open timeline rows;
    * ``open_row(row)`` — a ``history_timeline`` row, a list in :data:`TIMELINE_COLS` order;
    * ``forget(user_id, key, versions)`` — clear the content (value, text, reason) of those ``history_versions``
      rows and set their status ``forgotten`` (``memledger forget``; replayed, the shredded events already decode
      with no content, so live rows and a rebuild agree).
    """
    e = le.event
    effect = fact_effect(e)
    if effect is None:
        return
    user_id, key, version = e.user_id, e.key, e.originator_version
    recorded, position = le.recorded_at, le.position
    valid_from, valid_to = to_micros(e.valid_from), to_micros(e.valid_to)
    w.insert_version([
        user_id, key, version, e.event_id, e.kind, effect, stored_value_json(e.value_json, e.text), e.text, e.reason,
        recorded, to_micros(e.observed_at), valid_from, valid_to,
        _INITIAL_STATUS[effect], e.replaces, None, e.source, e.source_ref, e.session_id, e.actor,
        e.trace_id, json.dumps(list(e.derived_from)) if e.derived_from else "[]", e.confidence,
        None if e.role is None else json.dumps(e.role, sort_keys=True), e.sensitivity, position,
        hygiene_json(e),
    ])
    if e.replaces is not None and effect in ("supersede", "correct", "retract"):
        w.set_replaced_by(user_id, key, e.replaces, version)
    # Bitemporal rows: a new version's range opens now in system time ...
    if effect in ("new", "supersede", "correct", "backfill"):
        vt = OPEN if valid_to is None else valid_to
        if valid_from < vt:
            w.open_row([user_id, key, version, valid_from, vt, recorded, OPEN, position, OPEN, "believed"])
    # ... and every changed range closes its old row and opens the narrowed one, at this system time.
    for ch in e.changes:
        vf, vt = iso_micros(ch["valid_from"]), iso_micros(ch["valid_to"], OPEN)
        changed, status = ch["version"], ch["status"]
        w.narrow(user_id, key, changed, vf, None if vt == OPEN else vt, status)
        w.close(user_id, key, changed, recorded, position)
        if vf < vt:
            w.open_row([user_id, key, changed, vf, vt, recorded, OPEN, position, OPEN,
                        "contested" if status == "contested" else "believed"])
    if effect == "forget":
        w.forget(user_id, key, list(e.forgotten))


class _SqlWrites:
    """The writes of :func:`project` as SQL statements, one per write (the per-event catch-up path)."""

    def __init__(self, cur: Cursor, tv: str, tt: str) -> None:
        self.cur, self.tv, self.tt = cur, tv, tt

    def insert_version(self, row: list[Any]) -> None:
        self.cur.execute(
            f"INSERT INTO {self.tv} ({', '.join(VERSION_COLS)}) VALUES ({', '.join('?' * len(VERSION_COLS))})",
            sealed(self.cur, row, _SEALED))

    def set_replaced_by(self, user_id: str, key: str, version: int, by: int) -> None:
        self.cur.execute(f"UPDATE {self.tv} SET replaced_by = ? WHERE user_id = ? AND key = ? AND version = ?",
                         (by, user_id, key, version))

    def narrow(self, user_id: str, key: str, version: int, vf: int, vt: int | None, status: str) -> None:
        self.cur.execute(f"UPDATE {self.tv} SET valid_from = ?, valid_to = ?, status = ? WHERE user_id = ? "
                         "AND key = ? AND version = ?", (vf, vt, status, user_id, key, version))

    def close(self, user_id: str, key: str, version: int, recorded_to: int, position_to: int) -> None:
        self.cur.execute(f"UPDATE {self.tt} SET recorded_to = ?, position_to = ? WHERE user_id = ? AND key = ? "
                         "AND version = ? AND position_to = ?", (recorded_to, position_to, user_id, key, version, OPEN))

    def open_row(self, row: list[Any]) -> None:
        self.cur.execute(
            f"INSERT INTO {self.tt} ({', '.join(TIMELINE_COLS)}) VALUES ({', '.join('?' * len(TIMELINE_COLS))})", row)

    def forget(self, user_id: str, key: str, versions: list[int]) -> None:
        self.cur.executemany(f"UPDATE {self.tv} SET {_FORGET_SET} WHERE user_id = ? AND key = ? AND version = ?",
                             [(user_id, key, v) for v in versions])


class HistoryBulk:
    """The writes of :func:`project` held in memory, then written with COPY / executemany by :meth:`flush`.

    Rows inserted since the last flush are edited in place. Writes to a row written by an earlier flush (a later
    event of a stream that spans flushes) are kept, per row, as the values they leave (``edits``: one UPDATE per
    row however many events touched it), and a close of a version's flushed open rows as one UPDATE; the next
    flush runs them *before* inserting the new rows, so they reach exactly the rows the per-event path would
    reach: its UPDATE of open timeline rows would also have closed the rows opened since, and those are closed
    here in memory. Erasure: ``purge_user`` drops the user's held rows and statements and deletes the
    user's flushed rows first thing at the flush. So after every flush the tables equal the per-event path's
    after the same events.

    Memory: the rows of the events since the last flush (one ``history_versions`` row per fact event, about one
    timeline row per event, about 1 KB per event together); the caller flushes every N events.
    """

    def __init__(self, tv: str, tt: str) -> None:
        self.tv, self.tt = tv, tt
        self._reset()

    def _reset(self) -> None:
        self.versions: dict[tuple[str, str, int], list[Any]] = {}  # inserted since the last flush
        self.timeline: list[list[Any]] = []  # inserted since the last flush
        self.open: dict[tuple[str, str, int], list[list[Any]]] = {}  # ... of those, still open, by version
        self.closed_in_db: set[tuple[str, str, int]] = set()  # versions whose flushed open rows a close reached
        self.purges: list[tuple[str]] = []
        # flushed history_versions rows -> [replaced_by, valid_from, valid_to, status] as the writes left them
        self.edits: dict[tuple[str, str, int], list[Any]] = {}
        self.closes: list[tuple[Any, ...]] = []  # closes of flushed open timeline rows, one per version
        self.forgets: list[tuple[str, str, int]] = []  # flushed history_versions rows to clear (forget), run last

    def apply(self, le: LogEvent) -> None:
        project(le, self)

    def insert_version(self, row: list[Any]) -> None:
        self.versions[(row[0], row[1], row[2])] = row

    def set_replaced_by(self, user_id: str, key: str, version: int, by: int) -> None:
        row = self.versions.get((user_id, key, version))
        if row is not None:
            row[_REPLACED_BY] = by
        else:
            self.edits.setdefault((user_id, key, version), [_UNSET] * 4)[0] = by

    def narrow(self, user_id: str, key: str, version: int, vf: int, vt: int | None, status: str) -> None:
        row = self.versions.get((user_id, key, version))
        if row is not None:
            row[_VALID_FROM], row[_VALID_TO], row[_STATUS] = vf, vt, status
        else:
            self.edits.setdefault((user_id, key, version), [_UNSET] * 4)[1:] = vf, vt, status

    def close(self, user_id: str, key: str, version: int, recorded_to: int, position_to: int) -> None:
        k = (user_id, key, version)
        for row in self.open.pop(k, ()):
            row[_RECORDED_TO], row[_POSITION_TO] = recorded_to, position_to
        if k not in self.versions and k not in self.closed_in_db:  # the version has rows from an earlier flush
            self.closes.append((recorded_to, position_to, user_id, key, version, OPEN))
            self.closed_in_db.add(k)

    def open_row(self, row: list[Any]) -> None:
        self.timeline.append(row)
        self.open.setdefault((row[0], row[1], row[2]), []).append(row)

    def forget(self, user_id: str, key: str, versions: list[int]) -> None:
        for v in versions:
            row = self.versions.get((user_id, key, v))
            if row is not None:
                row[_VALUE_JSON] = row[_TEXT] = row[_REASON] = None
                row[_STATUS] = "forgotten"
            else:
                self.forgets.append((user_id, key, v))

    def purge_user(self, user_id: str) -> None:
        self.versions = {k: r for k, r in self.versions.items() if k[0] != user_id}
        self.forgets = [f for f in self.forgets if f[0] != user_id]
        self.timeline = [r for r in self.timeline if r[0] != user_id]
        self.open = {k: r for k, r in self.open.items() if k[0] != user_id}
        self.closed_in_db = {k for k in self.closed_in_db if k[0] != user_id}
        self.edits = {k: e for k, e in self.edits.items() if k[0] != user_id}
        self.closes = [s for s in self.closes if s[2] != user_id]
        self.purges.append((user_id,))

    def flush(self, cur: Cursor) -> None:
        """Write what is held, inside the caller's transaction, and forget it."""
        for table in (self.tv, self.tt):
            cur.executemany(f"DELETE FROM {table} WHERE user_id = ?", self.purges)
        both, replaced, narrowed = [], [], []
        for (user_id, key, version), (by, vf, vt, status) in self.edits.items():
            if by is _UNSET:
                narrowed.append((vf, vt, status, user_id, key, version))
            elif vf is _UNSET:
                replaced.append((by, user_id, key, version))
            else:
                both.append((by, vf, vt, status, user_id, key, version))
        where = "WHERE user_id = ? AND key = ? AND version = ?"
        cur.executemany(f"UPDATE {self.tv} SET replaced_by = ?, valid_from = ?, valid_to = ?, status = ? {where}",
                        both)
        cur.executemany(f"UPDATE {self.tv} SET replaced_by = ? {where}", replaced)
        cur.executemany(f"UPDATE {self.tv} SET valid_from = ?, valid_to = ?, status = ? {where}", narrowed)
        cur.executemany(f"UPDATE {self.tt} SET recorded_to = ?, position_to = ? WHERE user_id = ? AND key = ? "
                        "AND version = ? AND position_to = ?", self.closes)
        # after the edits: a forget in this chunk comes after every narrowing of the row held before it
        cur.executemany(f"UPDATE {self.tv} SET {_FORGET_SET} {where}", self.forgets)
        insert_rows(cur, self.tv, VERSION_COLS, [sealed(cur, r, _SEALED) for r in self.versions.values()])
        insert_rows(cur, self.tt, TIMELINE_COLS, self.timeline)
        self._reset()


class HistoryProjection(Projection):
    name = "history"
    reads = (Fact.Event,)  # only fact events act on it (``effect``); replay/events.py decodes the rest cheaply
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
            hygiene TEXT,
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
        # search and context ask for a user's labelled versions on every call (memledger/sensitivity.py): a partial
        # index makes that a lookup of the few labelled rows, not a scan of the user's versions
        "CREATE INDEX IF NOT EXISTS {t_versions}_labelled ON {t_versions} (user_id) WHERE sensitivity IS NOT NULL",
        "CREATE INDEX IF NOT EXISTS {t_timeline}_sys ON {t_timeline} (user_id, recorded_from, recorded_to)",
        "CREATE INDEX IF NOT EXISTS {t_timeline}_open ON {t_timeline} (user_id, key, version, position_to)",
    ]

    def create(self, cur: Cursor) -> None:
        """The tables; a ``versions`` table from before hygiene marks gets its ``hygiene`` column."""
        super().create(cur)
        add_missing_column(cur, self.table("versions"), "hygiene", "TEXT")

    def apply(self, cur: Cursor, le: LogEvent) -> None:
        project(le, _SqlWrites(cur, self.table("versions"), self.table("timeline")))

    def bulk(self) -> HistoryBulk:
        """An in-memory applier for replaying many events at once (see :class:`HistoryBulk`)."""
        return HistoryBulk(self.table("versions"), self.table("timeline"))

    def verify_row(self, short: str) -> Any:
        """For ``verify``: a value stored as :data:`~projections.base.SAME_AS_TEXT` equals one written out (rows
        written before the value of a free-text memory was elided compare equal to a replay's)."""
        return spelled_out(VERSION_COLS) if short == "versions" else None

    def purge_user(self, cur: Cursor, user_id: str) -> None:
        for short in self.tables:
            cur.execute(f"DELETE FROM {self.table(short)} WHERE user_id = ?", (user_id,))

    # -- queries -----------------------------------------------------------------------------------------------
    def scoped_versions(self, cur: Cursor, user_id: str, actor: str | None, session_id: str | None,
                        keys: Any = None) -> set[tuple[str, int]]:
        """``(key, version)`` of the user's versions recorded by ``actor`` and in ``session_id`` (None: either),
        of ``keys`` only when given (memledger/scopes.py). ``actor`` and ``session_id`` are plaintext columns."""
        sql = f"SELECT key, version FROM {self.table('versions')} WHERE user_id = ?"
        params: list[Any] = [user_id]
        for col, want in (("actor", actor), ("session_id", session_id)):
            if want is not None:
                sql += f" AND {col} = ?"
                params.append(want)
        keys = None if keys is None else sorted(set(keys))
        if keys is not None and len(keys) <= 500:  # a longer IN list costs more than reading the user's rows
            if not keys:
                return set()
            sql += f" AND key IN ({', '.join('?' * len(keys))})"
            params.extend(keys)
        cur.execute(sql, params)
        return {(k, int(v)) for k, v in cur.fetchall()}

    def versions(self, cur: Cursor, user_id: str, key: str | None = None) -> list[dict[str, Any]]:
        """Every event of the user's facts (or of one key), in log order, as dicts of VERSION_COLS."""
        sql = f"SELECT {', '.join(VERSION_COLS)} FROM {self.table('versions')} WHERE user_id = ?"
        params: list[Any] = [user_id]
        if key is not None:
            sql += " AND key = ?"
            params.append(key)
        cur.execute(sql + " ORDER BY position", params)
        return rows_read_back(VERSION_COLS, cur.fetchall())

    # -- hygiene (memledger/hygiene.py, docs/hygiene.md) -------------------------------------------------------
    def quarantine_rows(self, cur: Cursor, user_id: str | None) -> tuple[list[dict[str, Any]],
                                                                           dict[tuple[str, str, int], dict[str, Any]]]:
        """The user's (or, with None, every user's) quarantined statements (effect ``quarantine``) in log order,
        and the releases: for each quarantined ``(user_id, key, version)`` the row of the version that released it
        (hygiene ``releases``)."""
        sql = (f"SELECT {', '.join(VERSION_COLS)} FROM {self.table('versions')} "
               "WHERE (effect = 'quarantine' OR hygiene LIKE ?)")
        params: list[Any] = ['%"releases":%']
        if user_id is not None:
            sql += " AND user_id = ?"
            params.append(user_id)
        cur.execute(sql + " ORDER BY position", params)
        rows = rows_read_back(VERSION_COLS, cur.fetchall())
        held = [r for r in rows if r["effect"] == "quarantine"]
        releases = {}
        for r in rows:
            marks = json.loads(r["hygiene"] or "{}")
            if "releases" in marks:
                releases[(r["user_id"], r["key"], marks["releases"])] = r
        return held, releases

    def confirmations(self, cur: Cursor, user_id: str | None = None,
                      upto: int | None = None) -> dict[tuple[str, str, int], int]:
        """When each version was last stated or confirmed: ``{(user_id, key, version): observed_at micros}``, the
        latest ``observed_at`` of the version's own event and of the reaffirmations of it, counting
        only statements said at or before ``upto`` (micros) when given."""
        sql = (f"SELECT user_id, key, CASE WHEN effect = 'reaffirm' THEN replaces ELSE version END AS v, "
               f"MAX(observed_at) FROM {self.table('versions')} "
               "WHERE effect IN ('new', 'supersede', 'correct', 'reaffirm')")
        where, params = _user_upto(user_id, upto)
        cur.execute(sql + where + " GROUP BY user_id, key, CASE WHEN effect = 'reaffirm' THEN replaces ELSE version END",
                    params)
        return {(u, k, int(v)): int(t) for u, k, v, t in cur.fetchall() if v is not None and t is not None}

    def reaffirmation_refs(self, cur: Cursor, user_id: str, keys: list[str]) -> dict[tuple[str, int], list[str]]:
        """The ``source_ref`` of each reaffirmation of the given keys' versions, in log order:
        ``{(key, version reaffirmed): [source_ref, ...]}`` (reaffirmations without a ``source_ref`` left out)."""
        if not keys:
            return {}
        marks = ", ".join("?" for _ in keys)
        # sorted here, not by ORDER BY position: that would make SQLite walk the user's position index (every
        # version of the user) instead of the primary key's (user_id, key) for the few keys asked
        cur.execute(f"SELECT key, replaces, source_ref, position FROM {self.table('versions')} WHERE user_id = ? "
                    f"AND key IN ({marks}) AND effect = 'reaffirm' AND source_ref IS NOT NULL", (user_id, *keys))
        out: dict[tuple[str, int], list[str]] = {}
        for key, version, ref, _ in sorted(cur.fetchall(), key=lambda r: r[3]):
            if version is not None:
                out.setdefault((key, int(version)), []).append(ref)
        return out

    def covering(self, cur: Cursor, user_id: str, key: str, at: int) -> dict[str, Any] | None:
        """The version of ``key`` whose valid range (as known now) covers ``at`` (micros), or None: what is true at
        ``at`` while the head is scheduled for later."""
        cur.execute(f"SELECT {', '.join(VERSION_COLS)} FROM {self.table('versions')} WHERE user_id = ? AND key = ? "
                    "AND effect IN ('new', 'supersede', 'correct', 'backfill') AND valid_from <= ? "
                    "AND valid_to IS NOT NULL AND valid_to > ? AND valid_to > valid_from "
                    "ORDER BY valid_from DESC, version DESC", (user_id, key, at, at))
        row = cur.fetchone()
        return None if row is None else rows_read_back(VERSION_COLS, [row])[0]

    def observed_at_of(self, cur: Cursor, user_id: str, key: str, version: int) -> int | None:
        """When the version's event was said (``observed_at`` micros), or None."""
        cur.execute(f"SELECT observed_at FROM {self.table('versions')} WHERE user_id = ? AND key = ? AND version = ?",
                    (user_id, key, version))
        row = cur.fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def correction_counts(self, cur: Cursor, user_id: str | None = None, upto: int | None = None) -> int:
        """How many corrections (effect ``correct``) the user's (or every user's) facts have had (said at or before
        ``upto`` micros, when given)."""
        where, params = _user_upto(user_id, upto)
        cur.execute(f"SELECT COUNT(*) FROM {self.table('versions')} WHERE effect = 'correct'" + where, params)
        return int(cur.fetchone()[0])

    def position_of_version(self, cur: Cursor, user_id: str, key: str, version: int) -> int | None:
        cur.execute(
            f"SELECT position FROM {self.table('versions')} WHERE user_id = ? AND key = ? AND version = ?",
            (user_id, key, version),
        )
        row = cur.fetchone()
        return None if row is None else int(row[0])
