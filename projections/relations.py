"""The ``relations`` projection: a user's entities, and their relations with both time axes.

Three tables, fed by the entity and relation events of ledger/relations.py (never by fact events):

* ``entities`` — one row per (user, entity): kind, name, aliases (a JSON list), when first recorded.
* ``versions`` — one row per relation event (as the history projection keeps a fact's): the edge's subject, type
  and object, the decision (``kind``, ``effect``), the valid range *as known now* and its status, provenance and
  the sensitivity label.
* ``timeline`` — the bitemporal rows of the edges: a version's valid range and status over a system-time range
  ``[recorded_from, recorded_to)``. Insert-and-close only: when an event narrows a version's valid range (a
  supersede closes it, a correction empties it), the open row is closed at the event's system time and a new row
  opens. So "who was the manager on V, as the ledger believed at T" is one indexed lookup: rows with
  ``recorded_from <= T < recorded_to`` and ``valid_from <= V < valid_to``.

Walks (1 to 3 hops) follow edges in both directions from the user or an entity (:meth:`RelationsProjection.walk`).
Erasure purges all three tables; the names are plaintext here, as a fact's text is in the profile.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ledger.mentions import Known
from ledger.relations import IDENTITY_TYPES, SELF, Entity, Relation
from ledger.timeutil import OPEN, to_micros

from .base import LogEvent, Projection, iso_micros
from .db import Cursor

ENTITY_COLS = ["user_id", "entity_id", "kind", "name", "aliases", "recorded_at", "position"]
VERSION_COLS = [
    "user_id", "key", "version", "event_id", "kind", "effect", "subject", "relation_type", "object", "text", "reason",
    "observed_at", "valid_from", "valid_to", "status", "source", "source_ref", "confidence", "sensitivity",
    "recorded_at", "position",
]
TIMELINE_COLS = [
    "user_id", "key", "version", "subject", "relation_type", "object", "valid_from", "valid_to", "recorded_from",
    "recorded_to", "position_from", "position_to", "status", "sensitivity",
]
#: effects that make a version with a valid range (the others are recorded as events only)
VALUE_EFFECTS = ("new", "supersede", "backfill", "correct")


class RelationsProjection(Projection):
    name = "relations"
    reads = (Entity.Event, Relation.Event)
    tables = {
        "entities": """
        CREATE TABLE IF NOT EXISTS {t} (
            user_id TEXT NOT NULL,
            entity_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            name TEXT NOT NULL,
            aliases TEXT NOT NULL,
            recorded_at BIGINT NOT NULL,
            position BIGINT NOT NULL,
            PRIMARY KEY (user_id, entity_id)
        )""",
        "versions": """
        CREATE TABLE IF NOT EXISTS {t} (
            user_id TEXT NOT NULL,
            key TEXT NOT NULL,
            version BIGINT NOT NULL,
            event_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            effect TEXT NOT NULL,
            subject TEXT NOT NULL,
            relation_type TEXT NOT NULL,
            object TEXT NOT NULL,
            text TEXT,
            reason TEXT,
            observed_at BIGINT,
            valid_from BIGINT,
            valid_to BIGINT,
            status TEXT NOT NULL,
            source TEXT NOT NULL,
            source_ref TEXT,
            confidence DOUBLE PRECISION NOT NULL,
            sensitivity TEXT,
            recorded_at BIGINT NOT NULL,
            position BIGINT NOT NULL,
            PRIMARY KEY (user_id, key, version)
        )""",
        "timeline": """
        CREATE TABLE IF NOT EXISTS {t} (
            user_id TEXT NOT NULL,
            key TEXT NOT NULL,
            version BIGINT NOT NULL,
            subject TEXT NOT NULL,
            relation_type TEXT NOT NULL,
            object TEXT NOT NULL,
            valid_from BIGINT NOT NULL,
            valid_to BIGINT NOT NULL,
            recorded_from BIGINT NOT NULL,
            recorded_to BIGINT NOT NULL,
            position_from BIGINT NOT NULL,
            position_to BIGINT NOT NULL,
            status TEXT NOT NULL,
            sensitivity TEXT,
            PRIMARY KEY (user_id, key, version, position_from)
        )""",
    }
    indexes = [
        "CREATE INDEX IF NOT EXISTS {t_timeline}_sys ON {t_timeline} (user_id, recorded_from, recorded_to)",
        "CREATE INDEX IF NOT EXISTS {t_timeline}_open ON {t_timeline} (user_id, key, version, position_to)",
    ]
    #: the full primary key of each table, so ``verify``'s checksum orders rows the same in every copy
    ORDER = {"entities": "user_id, entity_id", "versions": "user_id, key, version",
             "timeline": "user_id, key, version, position_from"}

    # -- apply -----------------------------------------------------------------------------------------------------
    def apply(self, cur: Cursor, le: LogEvent) -> None:
        e = le.event
        if isinstance(e, Entity.Event):
            self._entity(cur, le)
        elif isinstance(e, Relation.Event):
            self._relation(cur, le)

    def _entity(self, cur: Cursor, le: LogEvent) -> None:
        e = le.event
        if e.name is None:  # shredded content: nothing to show
            return
        # names are the user's words: sealed under their key (ledger/sealing.py)
        row = [e.user_id, e.entity_id, e.kind, cur.seal(e.user_id, e.name),
               cur.seal(e.user_id, json.dumps(list(e.aliases or []), ensure_ascii=False)), le.recorded_at, le.position]
        cur.execute(
            f"INSERT INTO {self.table('entities')} ({', '.join(ENTITY_COLS)}) VALUES ({', '.join('?' * len(row))}) "
            "ON CONFLICT (user_id, entity_id) DO UPDATE SET kind = excluded.kind, name = excluded.name, "
            "aliases = excluded.aliases, position = excluded.position", row)

    def _relation(self, cur: Cursor, le: LogEvent) -> None:
        """The history rules for one relation event: its own row, then the ranges it narrows (``changes``)."""
        e = le.event
        tv, tt = self.table("versions"), self.table("timeline")
        value = e.effect in VALUE_EFFECTS
        status = ("superseded" if e.effect == "backfill" else "current") if value else e.effect
        vf = to_micros(e.valid_from) if value else None
        vt = to_micros(e.valid_to, OPEN) if value else None
        row = [e.user_id, e.key, e.originator_version, e.event_id, e.kind, e.effect, e.subject, e.relation_type,
               e.object, cur.seal(e.user_id, e.text), cur.seal(e.user_id, e.reason), to_micros(e.observed_at), vf, vt,
               status, e.source, e.source_ref,
               e.confidence, e.sensitivity, le.recorded_at, le.position]
        cur.execute(f"INSERT INTO {tv} ({', '.join(VERSION_COLS)}) VALUES ({', '.join('?' * len(row))})", row)
        for ch in e.changes:
            cvf, cvt = iso_micros(ch["valid_from"]), iso_micros(ch["valid_to"], OPEN)
            cur.execute(f"UPDATE {tv} SET valid_from = ?, valid_to = ?, status = ? "
                        "WHERE user_id = ? AND key = ? AND version = ?",
                        (cvf, cvt, ch["status"], e.user_id, e.key, ch["version"]))
            cur.execute(f"SELECT subject, relation_type, object, sensitivity FROM {tt} "
                        "WHERE user_id = ? AND key = ? AND version = ? AND position_to = ?",
                        (e.user_id, e.key, ch["version"], OPEN))
            open_row = cur.fetchone()
            if open_row is None:
                continue
            cur.execute(f"UPDATE {tt} SET recorded_to = ?, position_to = ? "
                        "WHERE user_id = ? AND key = ? AND version = ? AND position_to = ?",
                        (le.recorded_at, le.position, e.user_id, e.key, ch["version"], OPEN))
            self._open(cur, [e.user_id, e.key, ch["version"], *open_row[:3], cvf, cvt, le.recorded_at, OPEN,
                             le.position, OPEN, ch["status"], open_row[3]])
        if value:
            self._open(cur, [e.user_id, e.key, e.originator_version, e.subject, e.relation_type, e.object, vf, vt,
                             le.recorded_at, OPEN, le.position, OPEN, status, e.sensitivity])

    def _open(self, cur: Cursor, row: list[Any]) -> None:
        cur.execute(f"INSERT INTO {self.table('timeline')} ({', '.join(TIMELINE_COLS)}) "
                    f"VALUES ({', '.join('?' * len(row))})", row)

    def purge_user(self, cur: Cursor, user_id: str) -> None:
        for short in self.tables:
            cur.execute(f"DELETE FROM {self.table(short)} WHERE user_id = ?", (user_id,))

    def checksum(self, cur: Cursor) -> str:
        """sha256 over every row of the three tables, each in its primary key's order."""
        h = hashlib.sha256()
        for short in self.tables:
            cur.execute(f"SELECT * FROM {self.table(short)} ORDER BY {self.ORDER[short]}")
            for row in cur.fetchall():
                h.update(repr(tuple(row)).encode())
        return h.hexdigest()

    # -- queries ---------------------------------------------------------------------------------------------------
    def entities(self, cur: Cursor, user_id: str) -> list[dict[str, Any]]:
        """The user's entities, by name then id: dicts of :data:`ENTITY_COLS` (``aliases`` decoded)."""
        cur.execute(f"SELECT {', '.join(ENTITY_COLS)} FROM {self.table('entities')} WHERE user_id = ?", (user_id,))
        out = []
        for r in cur.fetchall():
            d = dict(zip(ENTITY_COLS, r))
            d["aliases"] = json.loads(d["aliases"])
            out.append(d)
        # ordered here, not by SQL: the stored names are sealed (ledger/sealing.py)
        return sorted(out, key=lambda d: (d["name"], d["entity_id"]))

    def edges(self, cur: Cursor, user_id: str, valid_at: int, as_of: int | None) -> list[dict[str, Any]]:
        """The user's edges true at ``valid_at`` (microseconds, UTC) as believed at system time ``as_of``
        (microseconds; None: as believed now), each a dict of the timeline row joined with its version's
        provenance (``event_id``, ``text``, ``source``, ``source_ref``, ``confidence``, ``observed_at``,
        ``recorded_at`` of the version)."""
        tt, tv = self.table("timeline"), self.table("versions")
        system = "t.recorded_to = ?" if as_of is None else "t.recorded_from <= ? AND ? < t.recorded_to"
        params: list[Any] = [user_id] + ([OPEN] if as_of is None else [as_of, as_of]) + [valid_at, valid_at]
        cols = ["key", "version", "subject", "relation_type", "object", "valid_from", "valid_to", "status",
                "sensitivity", "event_id", "text", "source", "source_ref", "confidence", "observed_at",
                "recorded_at", "position"]
        cur.execute(
            f"SELECT t.key, t.version, t.subject, t.relation_type, t.object, t.valid_from, t.valid_to, t.status, "
            f"t.sensitivity, v.event_id, v.text, v.source, v.source_ref, v.confidence, v.observed_at, v.recorded_at, "
            f"v.position FROM {tt} t JOIN {tv} v ON v.user_id = t.user_id AND v.key = t.key AND v.version = t.version "
            f"WHERE t.user_id = ? AND {system} AND t.valid_from <= ? AND ? < t.valid_to "
            "ORDER BY t.key, t.version", params)
        return [dict(zip(cols, r)) for r in cur.fetchall()]

    def head(self, cur: Cursor, user_id: str, key: str) -> dict[str, Any] | None:
        """The newest live version of a relation stream as known now (its object, range, status), or None."""
        cur.execute(f"SELECT version, object, valid_from, valid_to, status, sensitivity FROM {self.table('versions')} "
                    "WHERE user_id = ? AND key = ? AND status IN ('current', 'contested') "
                    "ORDER BY version DESC LIMIT 1", (user_id, key))
        r = cur.fetchone()
        return None if r is None else dict(zip(["version", "object", "valid_from", "valid_to", "status",
                                                "sensitivity"], r))

    def roles(self, cur: Cursor, user_id: str) -> list[tuple[str, str, int, bool]]:
        """The user's own relations, one row per (entity, type) ever recorded: ``(object, relation_type,
        first position, current)``, in log order; ``current``: its newest version is current or contested."""
        cur.execute(f"SELECT object, relation_type, position, status FROM {self.table('versions')} "
                    "WHERE user_id = ? AND subject = ? ORDER BY position", (user_id, SELF))
        out: dict[tuple[str, str], list[Any]] = {}
        for obj, rtype, pos, status in cur.fetchall():
            row = out.setdefault((obj, rtype), [obj, rtype, pos, False])
            row[3] = status in ("current", "contested")
        return [tuple(r) for r in out.values()]  # type: ignore[misc]

    def known(self, cur: Cursor, user_id: str) -> list[Known]:
        """The user's entities with the ties they hold or held towards the user, as ``remember`` and recall read
        them (:class:`ledger.mentions.Known`: roles in the order first recorded, the current ones, first position)."""
        rows = self.entities(cur, user_id)
        if not rows:
            return []
        roles: dict[str, list[tuple[int, str, bool]]] = {}
        for obj, rtype, pos, current in self.roles(cur, user_id):
            if rtype not in IDENTITY_TYPES:  # another id of the user is no person of the user's life
                roles.setdefault(obj, []).append((pos, rtype, current))
        out = []
        for r in rows:
            mine = sorted(roles.get(r["entity_id"], []))
            out.append(Known(r["entity_id"], r["name"], tuple(r["aliases"]), tuple(t for _, t, _ in mine),
                             tuple(t for _, t, c in mine if c), mine[0][0] if mine else r["position"]))
        return out

    def versions(self, cur: Cursor, user_id: str) -> list[dict[str, Any]]:
        """Every version of every relation of the user, in log order: dicts of :data:`VERSION_COLS` (instants in
        microseconds, UTC; ``valid_to`` None when open)."""
        cur.execute(f"SELECT {', '.join(VERSION_COLS)} FROM {self.table('versions')} WHERE user_id = ? "
                    "ORDER BY position", (user_id,))
        out = []
        for r in cur.fetchall():
            d = dict(zip(VERSION_COLS, r))
            d["valid_to"] = None if d["valid_to"] in (None, OPEN) else d["valid_to"]
            out.append(d)
        return out

    def identity_links(self, cur: Cursor, user_id: str, valid_at: int) -> list[tuple[str, str, int]]:
        """The user's identity links true at ``valid_at`` (microseconds, UTC) as known now: ``(other user id,
        relation type, valid_from)``, read from the entities named ``user:<id>`` (memledger/identity.py)."""
        # every search asks this: the links first (no names opened), the sealed names only when there are some
        cur.execute(f"SELECT object, relation_type, valid_from FROM {self.table('timeline')} WHERE user_id = ? "
                    "AND subject = ? AND relation_type IN (?, ?) AND recorded_to = ? AND valid_from <= ? "
                    "AND ? < valid_to ORDER BY key, version", (user_id, SELF, *IDENTITY_TYPES, OPEN, valid_at, valid_at))
        links = cur.fetchall()
        if not links:
            return []
        names = {r["entity_id"]: r["name"] for r in self.entities(cur, user_id)}
        return [(names[obj][len("user:"):], rtype, vf) for obj, rtype, vf in links
                if names.get(obj, "").startswith("user:")]

    def live_keys(self, cur: Cursor, user_id: str, subject: str, relation_type: str) -> list[dict[str, Any]]:
        """The current edges of one (subject, type) as known now: dicts of ``key``, ``version``, ``object`` and
        ``valid_from`` / ``valid_to`` (microseconds since the epoch, UTC; None when not set)."""
        cols = ["key", "version", "object", "valid_from", "valid_to"]
        cur.execute(f"SELECT {', '.join(cols)} FROM {self.table('versions')} WHERE user_id = ? AND subject = ? "
                    "AND relation_type = ? AND status IN ('current', 'contested') ORDER BY key, version",
                    (user_id, subject, relation_type))
        return [dict(zip(cols, r)) for r in cur.fetchall()]


    def live_of(self, cur: Cursor, user_id: str, subject: str) -> list[dict[str, Any]]:
        """Every current edge of ``subject`` (``self`` or an entity id) as known now, least recently used first:
        dicts of ``key``, ``relation_type``, ``object``, ``valid_from`` (microseconds, UTC) and ``used``, the log
        position of the newest event of its stream (a reaffirmation counts as a use)."""
        tv = self.table("versions")
        cur.execute(f"SELECT v.key, v.relation_type, v.object, v.valid_from, "
                    f"(SELECT MAX(u.position) FROM {tv} u WHERE u.user_id = v.user_id AND u.key = v.key) "
                    f"FROM {tv} v WHERE v.user_id = ? AND v.subject = ? AND v.status IN ('current', 'contested')",
                    (user_id, subject))
        rows = {r[0]: dict(zip(["key", "relation_type", "object", "valid_from", "used"], r)) for r in cur.fetchall()}
        return sorted(rows.values(), key=lambda r: (r["used"], r["key"]))


def walk(edges: list[dict[str, Any]], start: str, hops: int) -> list[tuple[int, list[str], dict[str, Any]]]:
    """Breadth-first along ``edges`` (either direction) from ``start`` (``self`` or an entity id), at most ``hops``
    edges deep; returns ``(hop, node path, edge)`` for each edge reached, nearest first, each edge once. The path
    is the nodes from ``start`` to the far end of the edge. An edge whose ``withheld`` is set is reported but not
    walked through."""
    by_node: dict[str, list[dict[str, Any]]] = {}
    for e in edges:
        by_node.setdefault(e["subject"], []).append(e)
        by_node.setdefault(e["object"], []).append(e)
    seen_edges: set[tuple[str, int]] = set()
    seen_nodes = {start}
    frontier: list[tuple[str, list[str]]] = [(start, [start])]
    out: list[tuple[int, list[str], dict[str, Any]]] = []
    for hop in range(1, hops + 1):
        nxt: list[tuple[str, list[str]]] = []
        for node, path in frontier:
            for e in by_node.get(node, []):
                ident = (e["key"], e["version"])
                if ident in seen_edges:
                    continue
                seen_edges.add(ident)
                other = e["object"] if e["subject"] == node else e["subject"]
                out.append((hop, path + [other], e))
                if other not in seen_nodes and not e.get("withheld"):
                    seen_nodes.add(other)
                    nxt.append((other, path + [other]))
        frontier = nxt
    return out


__all__ = ["RelationsProjection", "walk", "SELF"]
