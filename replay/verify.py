"""``memledger verify``: every serving projection equals a full replay of the log into a scratch copy.

Incremental catch-up (a batch at a time, across processes, crashes and rebuilds) and a replay from position 0 must
produce the same read model; if they do not, a projection's ``apply`` depends on something other than the events
in log order (wall time, table state it should not read, a non-deterministic order), or a crash lost or doubled a
batch. The comparison is of *content*: every table's rows ordered by all their columns, hashed with sha256 (the
stable checksum), and on a mismatch the first row that differs is reported.

Steps: build scratch copies (suffix ``verify<hex>``) from position 0 with the catch-up loop; then, in ONE exclusive
transaction, bring the serving copies and the scratch copies to the same head, and compare; finally drop the
scratch copies. Holding the lock while comparing means no writer can move a serving copy in between.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from projections.base import Projection, position_of

from .catchup import apply_batch, catch_up, max_position

FETCH = 2000


@dataclass
class VerifyResult:
    """One projection's verdict. ``difference`` (when not ok): ``{"table", "row", "serving", "replay"}`` where
    ``row`` is the 0-based index in column order and a side is None when that table has fewer rows."""

    projection: str
    ok: bool
    position: int
    checksum: str
    replay_checksum: str
    difference: dict[str, Any] | None = None

    def as_json(self) -> dict[str, Any]:
        """One element of ``memledger verify --json`` (a contract)."""
        return {"projection": self.projection, "ok": self.ok, "position": self.position,
                "checksum": self.checksum, "replay_checksum": self.replay_checksum, "difference": self.difference}


def _columns(cur: Any, table: str) -> int:
    cur.execute(f"SELECT * FROM {table} WHERE 1 = 0")
    return len(cur.raw.description)


def rows(cur: Any, table: str, exclude: str | None = None,
         normalize: Any = None) -> Iterator[tuple]:
    """Every row of ``table`` ordered by all its columns (a total order, so two copies list rows alike), streamed
    on a cursor of its own (two tables can be walked side by side). ``exclude``: an SQL condition on rows to leave
    out (a projection's ``verify_exclude``: bookkeeping that is not derived from the log)."""
    n = _columns(cur, table)
    raw = cur.raw.connection.cursor()
    where = f" WHERE NOT ({exclude})" if exclude else ""
    raw.execute(f"SELECT * FROM {table}{where} ORDER BY {', '.join(str(i) for i in range(1, n + 1))}")
    while True:
        chunk = raw.fetchmany(FETCH)
        if not chunk:
            break
        for r in chunk:
            r = tuple(r) if cur.sealer is None else cur.opened(tuple(r))  # compared as plaintext (ledger/sealing.py)
            yield r if normalize is None else normalize(r)
    raw.close()


def checksum(cur: Any, p: Projection) -> str:
    """sha256 hex over every table of ``p`` (short table name, then rows in :func:`rows` order): equal content gives
    an equal checksum whatever the copy's suffix."""
    h = hashlib.sha256()
    for short in p.tables:
        h.update(f"table {short}\n".encode())
        for r in rows(cur, p.table(short), p.verify_exclude.get(short), p.verify_row(short)):
            h.update(repr(r).encode())
            h.update(b"\n")
    return h.hexdigest()


def first_difference(cur: Any, serving: Projection, replay: Projection) -> dict[str, Any] | None:
    """The first row (table by table, in :func:`rows` order) where the two copies differ; None if they agree."""
    for short in serving.tables:
        skip = serving.verify_exclude.get(short)
        norm = serving.verify_row(short)
        a, b = rows(cur, serving.table(short), skip, norm), rows(cur, replay.table(short), skip, norm)
        i = 0
        while True:
            ra, rb = next(a, None), next(b, None)
            if ra is None and rb is None:
                break
            if ra != rb:
                return {"table": f"{serving.name}_{short}", "row": i,
                        "serving": None if ra is None else list(ra), "replay": None if rb is None else list(rb)}
            i += 1
    return None


def close_difference(cur: Any, serving: Projection, replay: Projection) -> dict[str, Any] | None:
    """The first row pair (in :func:`rows` order) that a projection's ``verify_close`` rejects; None if all pass."""
    for short in serving.tables:
        close = serving.verify_close(short, cur, replay)
        if close is None:
            continue
        skip = serving.verify_exclude.get(short)
        for i, (ra, rb) in enumerate(zip(rows(cur, serving.table(short), skip),
                                         rows(cur, replay.table(short), skip))):
            problem = close(ra, rb)
            if problem is not None:
                return {"table": f"{serving.name}_{short}", "row": i, "problem": problem}
    return None


def verify(app: Any, db: Any, projections: Sequence[Projection], *, batch: int = 2000) -> list[VerifyResult]:
    """Compare each serving projection with a full replay into a scratch copy (see the module doc).

    Args:
        app: the eventsourcing application; db: the ProjectionDB; projections: the serving projection objects
            (MemoryLedger's; their suffix is kept pointed at the serving copy by the blue/green resolver).

    Returns:
        one :class:`VerifyResult` per projection, in order. Writes nothing but the scratch copies, dropped after.
    """
    if not projections:
        return []
    tag = "verify" + uuid.uuid4().hex[:8]
    scratch = [p.clone(tag) for p in projections]
    for s in scratch:
        s.transient = True  # writes its own tables only (the vectors copy leaves the embedding cache as it is)
    try:
        with db.transaction() as cur:
            for s in scratch:
                s.create(cur)
        catch_up(app, db, scratch, batch=batch, bulk=False)  # the per-event path: independent of bulk builds
        with db.transaction() as cur:
            head = max_position(app)
            for group in (list(projections), scratch):
                while apply_batch(cur, app, group, head, batch)[1]:
                    pass
            out = []
            for p, s in zip(projections, scratch):
                mine, theirs = checksum(cur, p), checksum(cur, s)
                diff = first_difference(cur, p, s) if mine != theirs else close_difference(cur, p, s)
                out.append(VerifyResult(p.name, mine == theirs and diff is None, position_of(cur, p.tracking_name)[0], mine, theirs,
                                        diff))
        return out
    finally:
        with db.transaction() as cur:
            for s in scratch:
                s.drop(cur)
