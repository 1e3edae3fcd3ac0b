"""The ``profile`` projection: the current belief per (user_id, key).

One row per fact that has a head version (see ``ledger/domain.py``): asserted, superseded and corrected values
replace the row; a retraction deletes it; a contest or its resolution flips ``status``. The row is the *latest
belief* — the value we were last told — with its valid range; "what is true at instant V" is a history query
(``true_at``), not a profile lookup. A free-text memory's value (its own sentence as a JSON string) is not stored a
second time beside its text: the row holds ``''`` and :meth:`ProfileProjection.rows` reads the value back.
"""

from __future__ import annotations

from typing import Any

from ledger.domain import Fact, fact_effect
from ledger.timeutil import OPEN, to_micros

from .base import LogEvent, Projection, iso_micros, rows_read_back, sealed, spelled_out, stored_value_json
from .db import Cursor
from .history import add_missing_column, hygiene_json


COLS = [
    "user_id", "key", "version", "value_json", "text", "recorded_at", "valid_from", "valid_to", "source",
    "confidence", "status", "source_ref", "session_id", "sensitivity", "position", "hygiene",
]
_VERSION, _VALID_TO, _STATUS = COLS.index("version"), COLS.index("valid_to"), COLS.index("status")
#: the personal content of a row, sealed under the user's key (ledger/sealing.py)
_SEALED = (COLS.index("value_json"), COLS.index("text"))


def project(le: LogEvent, w: Any) -> None:
    """The profile rules for one event, written as primitive writes to ``w`` (the one definition of the row).

    ``w`` is :class:`_SqlWrites` (event by event) or :class:`ProfileBulk` (held in memory, written at once):
    ``upsert(row)`` (a list in :data:`COLS` order, replacing the (user_id, key) row), ``delete(user_id, key)``,
    and ``set_head(user_id, key, version, status, valid_to)`` (only if the row's version is ``version``).
    """
    e = le.event
    effect = fact_effect(e)
    if effect is None:
        return
    if effect in ("new", "supersede", "correct"):
        w.upsert([
            e.user_id, e.key, e.originator_version, stored_value_json(e.value_json, e.text), e.text, le.recorded_at,
            to_micros(e.valid_from), to_micros(e.valid_to, OPEN), e.source, e.confidence, "current",
            e.source_ref, e.session_id, e.sensitivity, le.position, hygiene_json(e),
        ])
    elif effect == "retract":
        w.delete(e.user_id, e.key)
        return
    elif effect == "forget":
        # memledger forget: a forgotten head leaves no current value (its row goes); older versions are history only
        if e.replaces is not None:
            w.delete(e.user_id, e.key)
        return
    for ch in e.changes:
        # Only a change to the head matters here: contest / uncontest, or a narrowed range.
        w.set_head(e.user_id, e.key, ch["version"], "contested" if ch["status"] == "contested" else "current",
                   iso_micros(ch["valid_to"], OPEN))


class _SqlWrites:
    """The writes of :func:`project` as SQL statements, one per write (the per-event catch-up path)."""

    def __init__(self, cur: Cursor, t: str) -> None:
        self.cur, self.t = cur, t

    def upsert(self, row: list[Any]) -> None:
        self.cur.execute(_upsert_sql(self.t), sealed(self.cur, row, _SEALED))

    def delete(self, user_id: str, key: str) -> None:
        self.cur.execute(f"DELETE FROM {self.t} WHERE user_id = ? AND key = ?", (user_id, key))

    def set_head(self, user_id: str, key: str, version: int, status: str, valid_to: int) -> None:
        self.cur.execute(f"UPDATE {self.t} SET status = ?, valid_to = ? WHERE user_id = ? AND key = ? AND version = ?",
                         (status, valid_to, user_id, key, version))


def _upsert_sql(t: str) -> str:
    return (f"INSERT INTO {t} ({', '.join(COLS)}) VALUES ({', '.join('?' * len(COLS))}) "
            "ON CONFLICT (user_id, key) DO UPDATE SET "
            + ", ".join(f"{c} = excluded.{c}" for c in COLS if c not in ("user_id", "key")))


class ProfileBulk:
    """The writes of :func:`project` held in memory (the latest row per (user_id, key), or "deleted"), written by
    :meth:`flush`: the user purges first, then ``set_head`` statements that reached rows written by an earlier
    flush (in event order: they precede every held write of their key), then the deletes and the upserts
    (executemany of the per-event path's upsert, since a held key may have a row from an earlier flush).

    Memory: at most one row per (user_id, key) touched since the last flush; the caller flushes every N events.
    """

    def __init__(self, t: str) -> None:
        self.t = t
        self._reset()

    def _reset(self) -> None:
        self.rows: dict[tuple[str, str], list[Any] | None] = {}  # None: deleted
        self.purges: list[tuple[str]] = []
        self.heads: list[tuple[Any, ...]] = []  # set_head statements on flushed rows, in event order

    def apply(self, le: LogEvent) -> None:
        project(le, self)

    def upsert(self, row: list[Any]) -> None:
        self.rows[(row[0], row[1])] = row

    def delete(self, user_id: str, key: str) -> None:
        self.rows[(user_id, key)] = None

    def set_head(self, user_id: str, key: str, version: int, status: str, valid_to: int) -> None:
        k = (user_id, key)
        if k in self.rows:
            row = self.rows[k]
            if row is not None and row[_VERSION] == version:
                row[_STATUS], row[_VALID_TO] = status, valid_to
        else:
            self.heads.append((status, valid_to, user_id, key, version))

    def purge_user(self, user_id: str) -> None:
        self.rows = {k: r for k, r in self.rows.items() if k[0] != user_id}
        self.heads = [s for s in self.heads if s[2] != user_id]
        self.purges.append((user_id,))

    def flush(self, cur: Cursor) -> None:
        """Write what is held, inside the caller's transaction, and forget it."""
        cur.executemany(f"DELETE FROM {self.t} WHERE user_id = ?", self.purges)
        cur.executemany(f"UPDATE {self.t} SET status = ?, valid_to = ? WHERE user_id = ? AND key = ? AND version = ?",
                        self.heads)
        cur.executemany(f"DELETE FROM {self.t} WHERE user_id = ? AND key = ?",
                        [k for k, r in self.rows.items() if r is None])
        cur.executemany(_upsert_sql(self.t), [sealed(cur, r, _SEALED) for r in self.rows.values() if r is not None])
        self._reset()


#: The profile rows computed from a history copy (:meth:`ProfileProjection.derive`), ``{tp}`` / ``{tv}`` / ``{tt}`` the
#: profile, history_versions and history_timeline tables, the parameter :data:`~ledger.timeutil.OPEN`. Why these are
#: exactly the rows :func:`project` leaves, event by event:
#:
#: * a key has a row iff the last of its events that upsert or delete the row (new, supersede, correct; retract; a
#:   forget naming the head in ``replaces``) upserted it; every event has a ``history_versions`` row with its
#:   ``effect`` and ``replaces``, and a stream's versions are its log order. That event's version is the head.
#: * the upsert's columns are the event's, which the head's ``history_versions`` row holds as well (the same
#:   ``stored_value_json``, ``hygiene_json``, recorded time and position; the same sealed values, opened alike).
#: * ``set_head`` reaches the row only for a change to the head while it is the head; a version is the head from
#:   its own event on, so every change history applied to that version (``narrow``) reached the row too:
#:   ``valid_to`` is the last change's end (history keeps an open end as NULL, the profile as OPEN) and ``status``
#:   is ``contested`` iff the last change said so (``current`` otherwise, as it starts).
#: * ``valid_from`` is the event's own, which ``set_head`` never changes but ``narrow`` would: taken from the
#:   timeline row the head's own event opened (position_from = its position); only a version whose range was empty
#:   from birth has none, and then the versions row's (the policy's changes keep a version's start).
DERIVE_SQL = """
INSERT INTO {tp} (""" + ", ".join(COLS) + """)
SELECT v.user_id, v.key, v.version, v.value_json, v.text, v.recorded_at, COALESCE(t.valid_from, v.valid_from),
       COALESCE(v.valid_to, ?), v.source, v.confidence,
       CASE WHEN v.status = 'contested' THEN 'contested' ELSE 'current' END,
       v.source_ref, v.session_id, v.sensitivity, v.position, v.hygiene
FROM (SELECT user_id, key, MAX(version) AS version FROM {tv}
      WHERE effect IN ('new', 'supersede', 'correct', 'retract') OR (effect = 'forget' AND replaces IS NOT NULL)
      GROUP BY user_id, key) head
JOIN {tv} v ON v.user_id = head.user_id AND v.key = head.key AND v.version = head.version
LEFT JOIN {tt} t ON t.user_id = v.user_id AND t.key = v.key AND t.version = v.version AND t.position_from = v.position
WHERE v.effect IN ('new', 'supersede', 'correct')"""


class ProfileProjection(Projection):
    name = "profile"
    #: a rebuild of profile and history together fills the profile from the new history copy (:meth:`derive`)
    derived_from = "history"
    reads = (Fact.Event,)  # only fact events act on it (``effect``); replay/events.py decodes the rest cheaply
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
            hygiene TEXT,
            PRIMARY KEY (user_id, key)
        )""",
    }
    indexes = ["CREATE INDEX IF NOT EXISTS {t_facts}_recent ON {t_facts} (user_id, recorded_at)"]

    def create(self, cur: Cursor) -> None:
        """The table; one from before hygiene marks gets its ``hygiene`` column."""
        super().create(cur)
        add_missing_column(cur, self.table("facts"), "hygiene", "TEXT")

    def apply(self, cur: Cursor, le: LogEvent) -> None:
        project(le, _SqlWrites(cur, self.table("facts")))

    def verify_row(self, short: str) -> Any:
        """For ``verify``: a value stored as :data:`~projections.base.SAME_AS_TEXT` equals one written out (rows
        written before the value of a free-text memory was elided compare equal to a replay's)."""
        return spelled_out(COLS) if short == "facts" else None

    def bulk(self) -> ProfileBulk:
        """An in-memory applier for replaying many events at once (see :class:`ProfileBulk`)."""
        return ProfileBulk(self.table("facts"))

    def derive(self, cur: Cursor, source: Projection) -> None:
        """Fill this (empty) copy from a ``history`` copy in one ``INSERT ... SELECT``: the rows :func:`project`
        leaves after the events ``source`` holds (see :data:`DERIVE_SQL` for why each column is the same)."""
        cur.execute(f"DELETE FROM {self.table('facts')}")
        cur.execute(DERIVE_SQL.format(tp=self.table("facts"), tv=source.table("versions"),
                                      tt=source.table("timeline")), (OPEN,))

    def purge_user(self, cur: Cursor, user_id: str) -> None:
        cur.execute(f"DELETE FROM {self.table('facts')} WHERE user_id = ?", (user_id,))

    # -- queries -----------------------------------------------------------------------------------------------
    def rows(self, cur: Cursor, user_id: str) -> list[dict[str, Any]]:
        """The user's current facts ordered by key, as dicts of the table's columns."""
        cur.execute(
            f"SELECT key, version, value_json, text, recorded_at, valid_from, valid_to, source, confidence, status, "
            f"source_ref, session_id, sensitivity, position, hygiene FROM {self.table('facts')} WHERE user_id = ? ORDER BY key",
            (user_id,),
        )
        return rows_read_back(FACT_COLS, cur.fetchall())

    def slot_rows(self, cur: Cursor, user_id: str, slot_key: str) -> list[dict[str, Any]]:
        """The user's current facts under ``slot_key`` itself or its siblings (``slot_key.*``), ordered by key
        (slot resolution, memledger/remember.py)."""
        like = slot_key.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + ".%"
        cur.execute(
            f"SELECT key, version, value_json, text, recorded_at, valid_from, valid_to, source, confidence, status, "
            f"source_ref, session_id, sensitivity, position, hygiene FROM {self.table('facts')} "
            f"WHERE user_id = ? AND (key = ? OR key LIKE ? ESCAPE '\\') ORDER BY key",
            (user_id, slot_key, like),
        )
        return rows_read_back(FACT_COLS, cur.fetchall())


#: the columns :meth:`ProfileProjection.rows` and ``slot_rows`` read, in order
FACT_COLS = ["key", "version", "value_json", "text", "recorded_at", "valid_from", "valid_to", "source", "confidence",
             "status", "source_ref", "session_id", "sensitivity", "position", "hygiene"]
