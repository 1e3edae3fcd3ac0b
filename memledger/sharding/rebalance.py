"""Moving users between shards when the shard map changes (``memledger shards rebalance``, docs/scale.md).

A move of one user from shard S to shard T, each step safe to kill:

1. **mark** -- under the user's exclusive write lease (memledger/sharding/directory.py), so every write already routed to S
   has committed, the directory row becomes ``moving`` (S -> T). Reads keep going to S; writes wait.
2. **copy** -- every event of the user on S (found by one pass over S's notification log, for all users moving out
   of S at once) is decoded with S's keys and saved on T in ONE transaction, re-encrypted under T's keys, with its
   original recorded, observed and valid times (they are event fields; only the log positions are new). A copy that
   already landed (a resumed move) is not copied again: all or nothing.
3. **verify** -- T's projections are caught up, and the user's export (profile, every history row, disclosures,
   sessions, messages; log positions left out) must be equal on S and T, else the move stops with S still serving.
4. **switch** -- the row becomes ``placed`` on T, step ``erase``. Reads and writes go to T from here.
5. **erase the old copy** -- after a grace period for reads already routed to S, the user is erased on S (the
   crypto-shredding path: S's keys for the user are destroyed); S is compacted once per rebalance. The row is then
   dropped when the hash agrees with T (the directory keeps only overrides).

A rebalance killed at any step is finished by running it again: a ``moving`` row restarts at step 2 (a copy that
landed is found and kept), a row at step ``erase`` redoes step 5 (erasure is idempotent). Nothing is lost (the old
copy is erased only after the switch) and nothing doubled (the copy is one transaction, checked before copying).

``$MEMLEDGER_KILL_AT=<step>`` (mark, copy, verify, switch, erase) makes the process SIGKILL itself right after that
step of its first move: the fault-injection hook of tests/test_shards.py.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from pydantic import BaseModel, Field

from ledger.errors import MemledgerError

from .directory import Placement
from .sharded import ShardedLedger

KILL_ENV = "MEMLEDGER_KILL_AT"
ACTOR = "memledger shards rebalance"


class Move(BaseModel):
    """One user's move: ``source`` -> ``target``; ``status``: ``planned`` (dry run), ``moved``, ``resumed`` (a move
    a killed rebalance had started), ``erased-old-copy`` (only step 5 was left), ``pinned`` (an erased user kept on
    the shard holding its erasure record) or ``failed: <why>``; ``events``: events copied."""

    user_id: str
    source: str
    target: str
    status: str
    events: int = 0


class RebalanceReport(BaseModel):
    """``memledger shards rebalance --json``: the map's shards, users looked at, each move, seconds (wall)."""

    dry_run: bool
    shards: list[str]
    users: int
    moves: list[Move] = Field(default_factory=list)
    seconds: float


def _kill_point(step: str) -> None:
    if os.environ.get(KILL_ENV) == step:
        os.kill(os.getpid(), signal.SIGKILL)


def plan(sharded: ShardedLedger) -> tuple[list[Move], int]:
    """The moves the map asks for, and how many users were looked at.

    A user held on shard S (a live key in S's key store: every write creates one) moves when the hash places it
    elsewhere and no directory row keeps it; a ``moving`` row or a row at step ``erase`` is a move to resume. An
    erased user whose hash changed is ``pinned`` where its erasure record is."""
    from .shardmap import rendezvous

    rows = {p.user_id: p for p in sharded.directory.placements()}
    serving, _ = sharded.directory.ring()
    new = sharded.map.names
    moves: list[Move] = []
    seen = 0
    for name, ml in sharded.each():
        users = ml.keystore.users() if ml.keystore is not None and hasattr(ml.keystore, "users") else []
        for user_id, destroyed in users:
            seen += 1
            p = rows.get(user_id)
            if p is not None and p.state == "moving":
                if p.source == name:
                    moves.append(Move(user_id=user_id, source=name, target=p.target or "", status="resume"))
                continue
            if p is not None and p.step == "erase" and p.source == name:
                moves.append(Move(user_id=user_id, source=name, target=p.shard, status="erase"))
                continue
            if destroyed:
                if p is None and rendezvous(user_id, serving) == name and rendezvous(user_id, new) != name:
                    moves.append(Move(user_id=user_id, source=name, target=name, status="pin"))
                continue
            home = p.shard if p is not None else rendezvous(user_id, serving)
            if home != name or (p is not None and p.state == "pinned"):
                continue  # held elsewhere (this is a leftover the directory does not route to), or pinned here
            target = rendezvous(user_id, new)
            if target != name:
                moves.append(Move(user_id=user_id, source=name, target=target, status="move"))
    return moves, seen


def rebalance(sharded: ShardedLedger, *, dry_run: bool = False, grace: float = 0.5,
              chunk: int = 20) -> RebalanceReport:
    """Move every user the map places elsewhere (:func:`plan`), one user at a time, each as the module says.

    Users move ``chunk`` at a time: the chunk is marked, its events found in one pass over the source's log, each
    user copied, verified and switched, then (after ``grace`` seconds, for reads routed to the old shard just before
    a switch to finish) each old copy erased. A user's writes wait from its mark to its switch. When every move is
    done the ring switches to the map's names. Returns a :class:`RebalanceReport`; a move that fails verification is
    reported ``failed: ...`` with the old shard still serving, and the others go on.

    Raises:
        MemledgerError: a shard or the directory cannot be reached.
    """
    started = time.perf_counter()
    d = sharded.directory
    missing = [name for name in d.ring()[0] if name not in sharded.map.names]
    if missing:
        from ledger.errors import BadInput

        raise BadInput("--shards", f"{sharded.map.source} leaves out shard(s) {', '.join(missing)}, which hold users",
                       "keep every shard in the map: removing a shard is not supported (only adding)")
    if dry_run:
        moves, seen = plan(sharded)
        label = {"move": "planned", "resume": "planned (resume)", "erase": "planned (erase old copy)",
                 "pin": "planned (pin)"}
        done = [m.model_copy(update={"status": label[m.status]}) for m in moves]
        return RebalanceReport(dry_run=True, shards=sharded.map.names, users=seen, moves=done,
                               seconds=round(time.perf_counter() - started, 3))
    off = [name for name, ml in sharded.each() if ml.keystore is None]
    if off:
        # the old copy is erased by destroying the user's key on the old shard (crypto-shredding): without keys
        # there is nothing to destroy, and users cannot be listed from the key store either
        raise MemledgerError(f"shard(s) {', '.join(off)} run with encryption off ($MEMLEDGER_ENCRYPTION=off): a "
                             "rebalance needs per-user keys to list users and to erase a moved user's old copy")
    with d.rebalance_lock():
        return _rebalance(sharded, started, grace, chunk)


def _rebalance(sharded: ShardedLedger, started: float, grace: float, chunk: int) -> RebalanceReport:
    d = sharded.directory
    moves, seen = plan(sharded)  # planned once this is the only rebalance running
    serving, _ = d.ring()
    if serving != sharded.map.names:
        d.set_ring(serving, sharded.map.names)  # routing still hashes over `serving` until every move is done
    out: list[Move] = []
    for _ in range(MAX_ROUNDS):
        out += _run(sharded, moves, grace, chunk)
        if any(m.status.startswith("failed") for m in out):
            break  # the ring keeps its target: a rerun finishes; the failed users are served where they are
        # A user written for the first time during the rounds was placed by the old hash, after the plan: plan
        # again with first writes held off (the ring lease), and switch only when nothing is left to move.
        with d.ring_exclusive():
            moves, _ = plan(sharded)
            if not moves:
                _switch_ring(sharded)
                break
    return RebalanceReport(dry_run=False, shards=sharded.map.names, users=seen, moves=out,
                           seconds=round(time.perf_counter() - started, 3))


#: plan-and-move rounds before a rebalance gives up switching (writers keep creating users on the old hash)
MAX_ROUNDS = 5


def _run(sharded: ShardedLedger, moves: list[Move], grace: float, chunk: int) -> list[Move]:
    """Carry out ``moves``: pins at once, moves ``chunk`` users at a time per source shard, one compaction per
    source shard at the end."""
    d = sharded.directory
    out: list[Move] = []
    by_source: dict[str, list[Move]] = {}
    for m in moves:
        if m.status == "pin":
            with d.db.transaction() as cur:
                d.put(cur, m.user_id, m.source, "pinned")
            out.append(m.model_copy(update={"status": "pinned"}))
        else:
            by_source.setdefault(m.source, []).append(m)
    for source, group in by_source.items():
        src = sharded.shard(source)
        # one pass over the source's log for all its moving users; each chunk then reads only the log's tail
        scan = _user_events(src, {m.user_id for m in group})
        for i in range(0, len(group), chunk):
            out += _move_chunk(sharded, src, group[i:i + chunk], grace, scan)
        from ..erasure import compact_store

        compact_store(src)  # once per source shard, not once per moved user (VACUUM FULL is heavy)
    return out


class MoveFailed(MemledgerError):
    """A copy did not verify: the user stays on (and is served by) the old shard."""


def _peek(mapper: Any, stored: Any) -> tuple[str | None, int, int | None]:
    """(user id, timestamp, a ``UserArrived``'s ``since`` or None) of a stored event (instants in microseconds),
    without decrypting its fields when the mapper can."""
    from ledger.moves import UserArrived
    from ledger.timeutil import to_micros

    state_of = getattr(mapper, "_state_of", None)
    if state_of is not None:  # the encrypting mapper: decipher and decompress only, no field decryption
        state = state_of(stored)
    else:
        state = dict(vars(mapper.to_domain_event(stored)))
    user = state.get("user_id")
    if user is None and isinstance(state.get("state"), dict):
        user = state["state"].get("user_id")
    since = to_micros(state["since"]) if stored.topic == UserArrived.TOPIC else None
    return (str(user) if user is not None else None), to_micros(state["timestamp"]), since


class _Scan:
    """The events of some users on one log as far as it was read: ``events`` per user (stored event, system time),
    ``last`` (the last position read) and ``recorded`` (the running system time there, replay/events.py)."""

    def __init__(self, users: set[str]) -> None:
        self.users = users
        self.events: dict[str, list[tuple[Any, int]]] = {}
        self.last = 0
        self.recorded = 0


def _user_events(ml: Any, users: set[str], scan: _Scan | None = None, page: int = 2000) -> _Scan:
    """Every stored event of ``users`` on ``ml``'s log in log order, each with the system time the catch-up gives
    it there (replay/events.py ``clock``), markers of earlier arrivals excluded. Given ``scan``, reads on from where
    it stopped (the tail appended since) and adds to it: a chunk of moves re-reads only the tail, not the log."""
    from ledger.moves import UserArrived
    from replay.events import clock

    scan = scan if scan is not None else _Scan(users)
    rec, mapper = ml.app.recorder, ml.app.mapper
    while True:
        batch = rec.select_notifications(start=scan.last + 1, limit=page)
        if not batch:
            return scan
        for n in batch:
            u, ts, since = _peek(mapper, n)
            stamp, scan.recorded = clock(ts, scan.recorded, since)
            if u in scan.users and n.topic != UserArrived.TOPIC:
                scan.events.setdefault(u, []).append((n, stamp))
        scan.last = batch[-1].id


def _export(ml: Any, user_id: str) -> dict[str, Any]:
    """The user's export with what legitimately differs between shards left out: log positions (each shard's own)
    and the export's own time."""
    from ..erasure import export_user  # a copy between shards, not a disclosure: no record

    data = export_user(ml, user_id).model_dump(mode="json")
    data.pop("exported_at", None)

    def strip(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items()
                    if k not in ("position", "positions", "after") and not k.endswith("_position")}
        if isinstance(v, list):
            return [strip(x) for x in v]
        return v

    return strip(data)


def _move_chunk(sharded: ShardedLedger, src: Any, group: list[Move], grace: float, scan: _Scan) -> list[Move]:
    """Every step for the moves of ``group`` (one source shard); returns them with their outcome."""
    d = sharded.directory
    live = [m for m in group if m.status != "erase"]
    for m in live:  # step 1, each under the user's exclusive lease
        with d.exclusive(m.user_id) as cur:
            p: Placement | None = d.placement(m.user_id, cur)
            if p is not None and p.state == "moving" and (p.source, p.target) != (m.source, m.target):
                raise MemledgerError(f"the directory moves {m.user_id!r} from {p.source} to {p.target}, not to "
                                     f"{m.target}: the shard map changed during a move; restore it and rerun")
            d.put(cur, m.user_id, m.source, "moving", source=m.source, target=m.target, step="copy")
    _kill_point("mark")
    # after the marks no write of theirs can land: the tail read now completes their events
    found = _user_events(src, set(), scan).events
    out, switched = [], []
    for m in group:
        try:
            events = _move(sharded, m, found.get(m.user_id, [])) if m.status != "erase" else 0
            switched.append((m, events))
        except MoveFailed as exc:
            d.drop(m.user_id)  # never switched: the old shard serves again and takes writes
            out.append(m.model_copy(update={"status": f"failed: {exc}"}))
    if switched and grace > 0:
        time.sleep(grace)
    for m, events in switched:
        _finish(sharded, m)
        status = {"move": "moved", "resume": "resumed", "erase": "erased-old-copy"}[m.status]
        out.append(m.model_copy(update={"status": status, "events": events}))
    return out


def _move(sharded: ShardedLedger, m: Move, stored: list[Any]) -> int:
    """Steps 2-4 for ``m`` (marked moving); returns the events copied (0 when a resumed copy had already landed)."""
    d = sharded.directory
    from ledger.moves import ShardArrival
    from ledger.timeutil import from_micros, to_micros

    src, dst = sharded.shard(m.source), sharded.shard(m.target)
    events = src.app.mapper.to_domain_events([n for n, _ in stored])
    for event, (_, stamp) in zip(events, stored):
        # the system time the old shard's catch-up gave the event (its timestamp, unless a skewed writer's clock
        # had it raised): the copy carries that, so the new shard's history shows the same times
        if stamp != to_micros(event.timestamp):
            event.__dict__["timestamp"] = from_micros(stamp)
    copied = 0
    ids = {e.originator_id for e in events}
    existing = dst.app.existing_streams(ids) if ids else set()
    if events and not existing:
        marker = ShardArrival(user_id=m.user_id, source=m.source, events=len(events),
                              since=from_micros(stored[0][1]))
        # one transaction, the whole user or nothing, through the new shard's one write path
        dst.write({m.user_id}, lambda: dst.recorded(dst.app.save_events([*marker.collect_events(), *events])))
        copied = len(events)
    elif events and existing != ids:
        raise MoveFailed(f"shard {m.target} holds {len(existing)} of {len(ids)} streams of {m.user_id!r} "
                         "from elsewhere; move it by hand")
    _kill_point("copy")
    dst.catch_up()  # both copies at their heads, whatever the projection mode: the exports are compared next
    src.catch_up()
    before, after = _export(src, m.user_id), _export(dst, m.user_id)
    if before != after:
        diff = next((k for k in before if before.get(k) != after.get(k)), "?")
        raise MoveFailed(f"the copy on {m.target} differs from {m.source} in {diff!r}; {m.source} still serves")
    _kill_point("verify")
    with d.db.transaction() as cur:
        d.put(cur, m.user_id, m.target, "placed", source=m.source, target=m.target, step="erase")
    _kill_point("switch")
    return copied


def _finish(sharded: ShardedLedger, m: Move) -> None:
    """Step 5: erase the old copy on ``m.source`` (idempotent); the row stays ``placed`` until the ring switches."""
    from ..erasure import erase_user

    erase_user(sharded.shard(m.source), m.user_id, actor=ACTOR, compact=False)
    _kill_point("erase")
    d = sharded.directory
    with d.db.transaction() as cur:
        d.put(cur, m.user_id, m.target, "placed", source=m.source, target=m.target, step="done")


def _switch_ring(sharded: ShardedLedger) -> None:
    """Every move done: hash over the new names from now on, and drop the rows the new hash agrees with (the
    directory keeps only overrides)."""
    from .shardmap import rendezvous

    d = sharded.directory
    new = sharded.map.names
    d.set_ring(new, None)
    for p in d.placements():
        if p.state == "placed" and p.step == "done" and p.shard == rendezvous(p.user_id, new):
            d.drop(p.user_id)
