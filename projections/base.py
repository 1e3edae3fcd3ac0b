"""What every projection has: its tables, ``apply`` for one event, a tracking row, and a checksum.

A projection is a read model rebuilt by replaying the log. Each one:

* names its tables through :meth:`Projection.table` so a blue/green rebuild can build ``<name>_<table>__<suffix>``
  beside the serving copy (see ``replay/``);
* applies events inside the catch-up loop's transaction and records the log position it reached in
  ``projection_tracking`` in that same transaction (so rows and position never disagree after a crash);
* never reads the log itself — the catch-up loop in ``replay/catchup.py`` feeds it :class:`LogEvent` objects.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, Protocol

from ledger.timeutil import parse_instant, to_micros

from .db import Cursor, protect_user_rows

TRACKING_DDL = """
CREATE TABLE IF NOT EXISTS projection_tracking (
    projection TEXT PRIMARY KEY,
    position BIGINT NOT NULL,
    recorded_at BIGINT NOT NULL
)"""
#: Users whose ``SubjectErased`` tombstone some copy has applied, with its log position; shared by every copy.
#: Why: a writer that still held an erased user's data key in its key cache could append
#: events after the tombstone and, decoding them with that cached key, project the plaintext again. The catch-up
#: reads this register in its transaction and skips every later event of a user in it (replay/catchup.py).
ERASED_DDL = """
CREATE TABLE IF NOT EXISTS erased_subjects (
    user_id TEXT PRIMARY KEY,
    position BIGINT NOT NULL
)"""


@dataclass(frozen=True)
class LogEvent:
    """One event as the read side sees it.

    Attributes:
        position: the notification id in the log (the authority on order).
        event: the decoded domain event.
        recorded_at: system time in microseconds since the epoch (UTC): the event's timestamp, raised if needed to
            the previous event's, so system time never runs backwards along the log (two writers may stamp events
            a few microseconds out of commit order; as-of queries must agree with log order).
        clock: the running system time after this event (what a later event is raised to), which a tracking row
            stores: ``recorded_at`` except after a ``UserArrived`` marker, which restarts it at the moved user's
            first time (replay/events.py ``clock``); None when unknown (then ``recorded_at`` is used).
    """

    position: int
    event: Any
    recorded_at: int
    clock: int | None = None


class Projection:
    """Base class: subclasses set ``name`` and ``tables`` (table -> DDL with ``{t}`` for the table's real name)."""

    name: ClassVar[str] = ""
    #: the schema version of this projection's tables; bump it when the DDL changes (then rebuild).
    schema_version: ClassVar[int] = 1
    #: a deferred projection is expensive to apply (it embeds text): writes do not wait for it; the reads that
    #: need it (search) catch it up first, so it is never stale when read. See MemoryLedger.catch_up.
    deferred: ClassVar[bool] = False
    #: the event classes (with their subclasses) this projection's ``apply`` acts on, or None for every event. A
    #: catch-up of copies that all name theirs decodes only those in full (replay/events.py ``decode``); an event
    #: of another class reaches ``apply`` as a ``replay.events.Unread``, which it must ignore.
    reads: ClassVar[tuple[type, ...] | None] = None
    #: short table name -> CREATE TABLE statement, with ``{t}`` for the real table name
    tables: ClassVar[dict[str, str]] = {}
    #: statements run after the tables exist (indexes), with ``{t:<table>}`` placeholders
    indexes: ClassVar[list[str]] = []
    #: short table name -> SQL condition on rows that ``verify`` leaves out: bookkeeping that is not derived from the
    #: log (e.g. the vectors projection's reload counter), which a scratch replay cannot reproduce
    verify_exclude: ClassVar[dict[str, str]] = {}
    #: a scratch copy (``verify``'s): it may write its own tables only, nothing shared (the embedding cache)
    transient: bool = False
    #: the name of another projection whose rows hold everything this one's rows are made of: a rebuild that builds
    #: both from position 0 fills this one from the other's new copy with :meth:`derive` (one statement) instead
    #: of applying every event to it. None: always built from the events.
    derived_from: ClassVar[str | None] = None

    def verify_row(self, short: str) -> Any:
        """A function ``row -> row`` that ``verify`` applies to each row of table ``short`` before comparing, or None
        (compare rows exactly). For values that are derived but not bit-reproducible (float vectors)."""
        return None

    def verify_close(self, short: str, cur: Any = None, replay: Projection | None = None) -> Any:
        """A function ``(serving_row, replay_row) -> None | str`` that ``verify`` applies to each pair of raw rows of
        table ``short`` (in row order) after the checksums agree: None if they agree within tolerance, else what
        differs. None (the default): the checksum alone decides. ``cur`` and ``replay`` (the scratch copy) let it
        read what a row refers to in another table of either copy."""
        return None

    def __init__(self, suffix: str = "") -> None:
        self.suffix = suffix

    @property
    def tracking_name(self) -> str:
        return self.name + (f"__{self.suffix}" if self.suffix else "")

    def table(self, short: str) -> str:
        """The real name of one of this projection's tables."""
        return f"{self.name}_{short}" + (f"__{self.suffix}" if self.suffix else "")

    def clone(self, suffix: str) -> Projection:
        """Another copy of this projection whose tables carry ``suffix`` (a blue/green build, a verify scratch).

        The default is a shallow copy with the suffix changed; a projection holding per-copy state outside its
        tables (an in-memory index) overrides this so the copies do not share it.
        """
        import copy

        other = copy.copy(self)
        other.suffix = suffix
        return other

    @property
    def user_tables(self) -> list[str]:
        """The short names of this projection's tables that hold rows of a user (a ``user_id`` column)."""
        return [short for short, ddl in self.tables.items() if "user_id" in ddl]

    def _names(self) -> dict[str, str]:
        return {f"t_{short}": self.table(short) for short in self.tables}

    def create(self, cur: Cursor) -> None:
        """Create the tables, indexes and tracking row if missing (idempotent)."""
        cur.execute(TRACKING_DDL)
        cur.execute(ERASED_DDL)
        names = self._names()
        for short, ddl in self.tables.items():
            cur.execute(ddl.format(t=self.table(short), **names))
            if short in self.user_tables:  # a user's rows: row-level security on PostgreSQL (projections/db.py)
                protect_user_rows(cur, self.table(short))
        for stmt in self.indexes:
            cur.execute(stmt.format(**names))
        cur.execute(
            "INSERT INTO projection_tracking (projection, position, recorded_at) VALUES (?, 0, 0) "
            "ON CONFLICT (projection) DO NOTHING",
            (self.tracking_name,),
        )

    def drop(self, cur: Cursor) -> None:
        """Drop this copy's tables and tracking row."""
        for short in self.tables:
            cur.execute(f"DROP TABLE IF EXISTS {self.table(short)}")
        cur.execute("DELETE FROM projection_tracking WHERE projection = ?", (self.tracking_name,))

    def prepare(self, cur: Cursor, events: list[LogEvent]) -> None:
        """Called once per catch-up batch, before :meth:`apply` sees any of ``events`` (only those after this
        copy's position), in the same transaction. Default: nothing. The ``vectors`` projection embeds the
        batch's new texts here in one model call (batch 64 is ~5x faster per sentence than batch 1)."""

    def finish(self, cur: Cursor, events: list[LogEvent]) -> None:
        """Called once per catch-up batch, after :meth:`apply` saw every event of ``events`` (those :meth:`prepare`
        was given), in the same transaction, before the tracking row moves. Default: nothing. The ``vectors``
        projection moves the batch's new vectors into their users' packs here (projections/retrieval/packs.py)."""

    def apply(self, cur: Cursor, le: LogEvent) -> None:
        """Apply one event. Events this projection does not care about are ignored."""
        raise NotImplementedError

    def bulk(self) -> BulkApplier | None:
        """A fresh in-memory applier for replaying many events at once (``replay/bulk.py``), or None: this
        projection is only applied event by event. An applier must leave exactly the rows ``apply`` would."""
        return None

    def derive(self, cur: Cursor, source: Projection) -> None:
        """Fill this copy's empty tables from ``source`` (a copy of the projection named :attr:`derived_from`, caught
        up to some position) so that they hold exactly the rows applying the same events would leave; the caller
        moves this copy's tracking row to ``source``'s in the same transaction. Only for projections that set
        :attr:`derived_from`."""
        raise NotImplementedError

    def purge_user(self, cur: Cursor, user_id: str) -> None:
        """Delete every row about ``user_id`` (erasure). Subclasses with user rows override."""

    def checksum(self, cur: Cursor) -> str:
        """A stable checksum of the content (sha256 over rows in primary-key order), for ``memledger verify``."""
        h = hashlib.sha256()
        for short in self.tables:
            cur.execute(f"SELECT * FROM {self.table(short)} ORDER BY 1, 2, 3")
            for row in cur.fetchall():
                h.update(repr(tuple(row)).encode())
        return h.hexdigest()


class BulkApplier(Protocol):
    """What ``Projection.bulk`` returns: events are applied to rows held in memory, then written at once.

    ``apply`` and ``purge_user`` take events in log order (the caller honours erasure as ``apply_one`` does);
    ``flush(cur)`` writes what is held (executemany / COPY), inside the caller's transaction, and forgets it
    (the caller bounds memory by flushing every N events).
    """

    def apply(self, le: LogEvent) -> None: ...

    def purge_user(self, user_id: str) -> None: ...

    def flush(self, cur: Cursor) -> None: ...


#: ``value_json`` of a fact (in ``vectors_docs``) whose value is its own sentence as a JSON string (every free-text memory:
#: ``remember``, an ingested observation): the empty string, which is no JSON value, instead of the sentence a second
#: time in the row (90 bytes of a LoCoMo observation's ~1.1 KB). Readers see ``json.dumps(text)`` (:func:`value_json_of`).
SAME_AS_TEXT = ""


def stored_value_json(value_json: str | None, text: str | None) -> str | None:
    """What a projection row stores for a fact's value: :data:`SAME_AS_TEXT` when the value is exactly its text as
    a JSON string, else the value as it is."""
    if text is not None and value_json is not None and value_json == json.dumps(text, ensure_ascii=False):
        return SAME_AS_TEXT
    return value_json


def value_json_of(value_json: str | None, text: str | None) -> str | None:
    """A stored value read back (the inverse of :func:`stored_value_json`; rows written before store the value)."""
    if value_json == SAME_AS_TEXT and text is not None:
        return json.dumps(text, ensure_ascii=False)
    return value_json


def rows_read_back(cols: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[dict[str, Any]]:
    """Fetched rows of ``cols`` as dicts, ``value_json`` read back as recorded where the row stores a free-text
    memory's value as its text (:func:`stored_value_json`)."""
    out = [dict(zip(cols, r)) for r in rows]
    if "value_json" in cols and "text" in cols:
        for d in out:
            d["value_json"] = value_json_of(d["value_json"], d["text"])
    return out


def spelled_out(cols: Sequence[str]) -> Callable[[tuple], tuple]:
    """For ``verify``: a row of ``cols`` with a value stored as :data:`SAME_AS_TEXT` written out, so that rows written
    before the value of a free-text memory was elided compare equal to a replay's."""
    value_at, text_at = cols.index("value_json"), cols.index("text")
    last = max(value_at, text_at)

    def spell(row: tuple) -> tuple:
        out = list(row)
        if len(out) > last:
            out[value_at] = value_json_of(out[value_at], out[text_at])
        return tuple(out)

    return spell


def insert_rows(cur: Cursor, table: str, cols: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Insert many rows: ``COPY ... FROM STDIN`` on PostgreSQL (psycopg 3's ``Cursor.copy``: ~190k rows/s
    against executemany's ~100k on these machines, /work/shared/DESIGN.md),
    one ``executemany`` of a prepared INSERT on SQLite, and on PostgreSQL under row-level security (which refuses
    COPY FROM). ``rows`` are sequences in ``cols`` order."""
    if not rows:
        return
    if cur.copies_rows:
        with cur.raw.copy(f"COPY {table} ({', '.join(cols)}) FROM STDIN") as copy:
            for r in rows:
                copy.write_row(r)
    else:
        cur.executemany(f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})", rows)


def sealed(cur: Cursor, row: Sequence[Any], columns: Sequence[int]) -> list[Any]:
    """``row`` with the values at ``columns`` sealed under the user named by its first value (``user_id``): the
    personal content a projection keeps (ledger/sealing.py)."""
    out = list(row)
    for i in columns:
        out[i] = cur.seal(out[0], out[i])
    return out


def iso_micros(iso: str | None, open_value: int | None = None) -> int | None:
    """An ISO 8601 instant stored in an event (a ``changes`` range end) -> microseconds since the epoch (UTC);
    ``None`` -> ``open_value``. ``datetime.fromisoformat`` first (the stored strings carry an offset; ~4x faster
    than :func:`ledger.timeutil.parse_instant`, which still refuses a string without one with BadInput)."""
    if iso is None:
        return open_value
    dt = datetime.fromisoformat(iso)
    return to_micros(dt if dt.tzinfo is not None else parse_instant(iso, "valid_time"))


def position_of(cur: Cursor, tracking_name: str) -> tuple[int, int]:
    """(position, recorded_at) a projection copy has reached; (0, 0) if it has no row."""
    cur.execute(
        "SELECT position, recorded_at FROM projection_tracking WHERE projection = ?", (tracking_name,)
    )
    row = cur.fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def positions_of(cur: Cursor, tracking_names: Sequence[str]) -> dict[str, tuple[int, int]]:
    """``{tracking name: (position, recorded_at)}`` of several copies in one query ((0, 0) for a copy with no row):
    a catch-up reads all its projections' positions at once instead of one round trip each."""
    names = list(dict.fromkeys(tracking_names))
    if not names:
        return {}
    cur.execute("SELECT projection, position, recorded_at FROM projection_tracking WHERE projection IN "
                f"({', '.join('?' * len(names))})", tuple(names))
    found = {str(r[0]): (int(r[1]), int(r[2])) for r in cur.fetchall()}
    return {n: found.get(n, (0, 0)) for n in names}


def erased_subjects(cur: Cursor) -> set[str]:
    """The user ids in the ``erased_subjects`` register (see :data:`ERASED_DDL`; :meth:`Projection.create` makes it)."""
    cur.execute("SELECT user_id FROM erased_subjects")
    return {r[0] for r in cur.fetchall()}


def note_erased(cur: Cursor, user_id: str, position: int) -> None:
    """Add ``user_id`` to the register at the tombstone's log ``position`` (the first one kept; idempotent)."""
    cur.execute("INSERT INTO erased_subjects (user_id, position) VALUES (?, ?) ON CONFLICT (user_id) DO NOTHING",
                (user_id, position))


def set_position(cur: Cursor, tracking_name: str, position: int, recorded_at: int) -> None:
    cur.execute(
        "UPDATE projection_tracking SET position = ?, recorded_at = ? WHERE projection = ?",
        (position, recorded_at, tracking_name),
    )
