"""Each user's vectors stored once: one sealed blob per user in the ``vectors_packs`` table (a *pack*), the form a
search loads in one read and one opening.

A vector lives in exactly one place at a time, inside the projection database and its transactions:

* a batch's vectors are held in memory while it is applied; at its end (:meth:`Packs.finish`, same transaction) a
  user whose new vectors, vectors in rows and stale pack entries reach 1/:data:`PACK_RATIO` of their vectors is
  *packed*: the pack is rewritten with every live document's vector (doc ids and one float16 matrix per model,
  sealed under the user's key as one blob) and those rows' vector columns are cleared; any other user's new vectors
  go into their rows (``vectors_docs.vector`` / ``cjk_vector``, float16) until their next packing.
  A small user is packed at every batch; a user of 100,000 memories every ~12,500 changes, so a write never
  rewrites a big pack (an amortised ~8 copies of each vector over its life, not one per write).

So a live row whose ``vector`` is NULL has its vectors in the user's pack, under its ``doc_id``; a pack entry whose
row was rewritten since (a supersede, a retraction) is *stale*: never read (the row's own vector, or its tombstone,
wins), and counted (``stale``) so that it leaves at the next packing. ``forget`` packs the user at once, so a
forgotten text's vector leaves the pack in the same transaction as its row (and erasure deletes the pack with the
user's rows). Why the database and not a file beside it: a pack then moves with the tracking row (a rolled-back
catch-up leaves no pack), a reader sees rows and pack in one snapshot, other processes and PostgreSQL see the same,
and a lost file could not lose a vector.
"""

from __future__ import annotations

import json
from typing import Any

from ..db import Cursor
from ..lazy import lazy_module
from .documents import as_f32, batch_outcome

np = lazy_module("numpy")

#: the first line of a pack; a JSON header line (dimensions, dtypes, doc ids) follows, then the matrices
PACK_MAGIC = b"memledger.vectors/1\n"
#: a user is packed when their unpacked vectors plus stale pack entries reach 1/PACK_RATIO of their vectors
PACK_RATIO = 8
#: the models a pack holds, in its order: the main embedder's and the CJK companion's
PARTS = ("main", "cjk")


def encode_pack(parts: dict[str, tuple[int, list[str], Any]]) -> bytes:
    """A pack: ``{part: (dim, doc ids, float32 (n, dim) matrix)}`` as one blob, each matrix float16 when every
    component is one (vectors from float16 rows), else float32 (rows written before, or beyond float16's range)."""
    header: dict[str, Any] = {}
    chunks = []
    for name in PARTS:
        if name not in parts:
            continue
        dim, docs, mat = parts[name]
        mat = np.asarray(mat, dtype=np.float32).reshape(len(docs), dim)
        with np.errstate(over="ignore"):  # a component beyond float16's range keeps the matrix float32
            half = mat.astype("<f2")
        exact = bool(np.array_equal(half.astype(np.float32), mat))
        header[name] = {"dim": dim, "dtype": "<f2" if exact else "<f4", "docs": docs}
        chunks.append(half.tobytes() if exact else mat.astype("<f4").tobytes())
    return PACK_MAGIC + json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode() + b"\n" + b"".join(chunks)


def decode_pack(data: bytes) -> dict[str, tuple[int, list[str], Any]]:
    """The parts of a blob of :func:`encode_pack`, each matrix as stored (float16, or float32): a read-only view of
    ``data``, converted by whoever reads it (a 100,000-memory pack is not copied to float32 whole just to be read).

    Raises:
        ValueError: not such a blob (altered, truncated)."""
    if not data.startswith(PACK_MAGIC):
        raise ValueError("not a vectors pack")
    end = data.index(b"\n", len(PACK_MAGIC))
    header = json.loads(data[len(PACK_MAGIC):end])
    at, out = end + 1, {}
    for name in PARTS:
        h = header.get(name)
        if h is None:
            continue
        dim, docs = int(h["dim"]), [str(x) for x in h["docs"]]
        width = np.dtype(h["dtype"]).itemsize
        if at + len(docs) * dim * width > len(data):
            raise ValueError("a vectors pack of another length")
        mat = np.frombuffer(data, dtype=h["dtype"], count=len(docs) * dim, offset=at)
        at += len(docs) * dim * width
        out[name] = (dim, docs, mat.reshape(len(docs), dim))
    if at != len(data):
        raise ValueError("a vectors pack of another length")
    return out


def lookup(parts: dict[str, tuple[int, list[str], Any]] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """``({doc_id: main vector}, {doc_id: companion vector})`` of a decoded pack (row views of its matrices)."""
    if not parts:
        return {}, {}
    out = []
    for name in PARTS:
        if name in parts:
            _, docs, mat = parts[name]
            out.append(dict(zip(docs, mat)))
        else:
            out.append({})
    return out[0], out[1]


class Packs:
    """The packs' half of :class:`projections.vectors.VectorsProjection` (a mixin: it reads the projection's tables
    and meta)."""

    def read_pack(self, cur: Cursor, user_id: str) -> dict[str, tuple[int, list[str], Any]] | None:
        """The user's pack in this copy, decoded (None: they have none, or their key is gone). One read, one
        opening."""
        cur.execute(f"SELECT vectors FROM {self.table('packs')} WHERE user_id = ?", (user_id,))
        row = cur.fetchone()
        if row is None or row[0] is None:
            return None
        return decode_pack(bytes(row[0]))

    def read_packs(self, cur: Cursor) -> dict[str, dict[str, tuple[int, list[str], Any]]]:
        """Every user's pack in this copy, decoded (a whole mirror's load, an in-place rebuild's spill)."""
        cur.execute(f"SELECT user_id, vectors FROM {self.table('packs')}")
        return {u: decode_pack(bytes(v)) for u, v in cur.fetchall() if v is not None}

    def with_packed(self, cur: Cursor, rows: list[tuple], cols: list[str],
                    packs: dict[str, Any] | None = None) -> list[tuple]:
        """``rows`` (tuples of ``cols``: ``user_id``, ``doc_id``, ``vector`` and ``cjk_vector`` among them, live rows
        or tombstones) with the vectors of packed live rows taken from their users' packs, as float32 arrays (a
        column's own vector stays its stored bytes). ``packs``: decoded packs already read (else each user's is
        read here, once; ``rows`` must be fetched whole before, since the cursor is reused)."""
        at = {c: i for i, c in enumerate(cols)}
        u_at, d_at, v_at, c_at = at["user_id"], at["doc_id"], at["vector"], at["cjk_vector"]
        live_at = at.get("live")
        found: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
        out = []
        for r in rows:
            if r[v_at] is not None or (live_at is not None and not r[live_at]):
                out.append(r)
                continue
            user_id = r[u_at]
            if user_id not in found:
                found[user_id] = lookup(packs.get(user_id) if packs is not None else self.read_pack(cur, user_id))
            main, cjk = found[user_id]
            vec = main.get(r[d_at])
            if vec is None:
                raise self._lost_vector(user_id, r[d_at])
            r = list(r)
            r[v_at], r[c_at] = vec, cjk.get(r[d_at])
            out.append(tuple(r))
        return out

    def _lost_vector(self, user_id: str, doc_id: str) -> RuntimeError:
        return RuntimeError(f"{self.table('docs')}: the live document {doc_id!r} of user {user_id!r} has no vector in "
                            f"its row nor in the user's pack; rebuild the index: `memledger rebuild vectors "
                            "--blue-green`")

    def pack_user(self, cur: Cursor, user_id: str, held: dict[str, tuple[Any, Any]] | None = None) -> int:
        """Move every vector of ``user_id``'s live documents into their pack (rewritten whole, without stale
        entries) and clear those rows' vector columns; the pack row goes when no live row is left. ``held``: the
        vectors the batch being applied gives the user's documents (``{doc_id: (vector, cjk vector)}``, kept out
        of their rows until now). Returns the vectors packed (main model)."""
        packs, docs_t = self.table("packs"), self.table("docs")
        cur.execute(f"SELECT doc_id, vector, cjk_vector FROM {docs_t} WHERE user_id = ? AND live = 1 ORDER BY doc_id",
                    (user_id,))
        rows = cur.fetchall()
        if not rows:
            cur.execute(f"DELETE FROM {packs} WHERE user_id = ?", (user_id,))
            return 0
        if held:
            rows = [(d, *held[d]) if d in held else (d, v, c) for d, v, c in rows]
        old_main, old_cjk = lookup(self.read_pack(cur, user_id) if any(r[1] is None for r in rows) else None)
        meta = self._meta(cur)
        dim, cjk_dim = int(meta["dim"]), int(meta.get("cjk_dim") or 0)
        main = np.empty((len(rows), dim), dtype=np.float32)
        cjk_docs, cjk_rows = [], []
        for i, (doc_id, vec, cvec) in enumerate(rows):
            if vec is None:
                got = old_main.get(doc_id)
                if got is None:
                    raise self._lost_vector(user_id, doc_id)
                main[i], cvec = got, old_cjk.get(doc_id)
            else:
                main[i] = as_f32(vec, dim)
            if cvec is not None:
                cjk_docs.append(doc_id)
                cjk_rows.append(as_f32(cvec, cjk_dim))
        parts = {"main": (dim, [r[0] for r in rows], main)}
        if cjk_docs:
            parts["cjk"] = (cjk_dim, cjk_docs, np.stack(cjk_rows))
        blob = cur.seal(user_id, encode_pack(parts))  # the user's vectors, under their key, opened in one call
        cur.execute(f"INSERT INTO {packs} (user_id, docs, stale, vectors) VALUES (?, ?, 0, ?) "
                    "ON CONFLICT (user_id) DO UPDATE SET docs = excluded.docs, stale = 0, vectors = excluded.vectors",
                    (user_id, len(rows), blob))
        cur.execute(f"UPDATE {docs_t} SET vector = NULL, cjk_vector = NULL WHERE user_id = ? AND vector IS NOT NULL",
                    (user_id,))
        return len(rows)

    def note_unpacked(self, own: dict[tuple[str, str], Any]) -> None:
        """Before a batch rewrites the rows ``own`` (``{(user_id, doc_id): (text, vector, cjk, packed)}``, read
        by ``prepare``): each packed one's pack entry becomes stale."""
        for (user_id, _), entry in own.items():
            if entry[3]:
                self._stale[user_id] = self._stale.get(user_id, 0) + 1

    def finish(self, cur: Cursor, events: list[Any]) -> None:
        """After a batch: pack each user it touched whose unpacked vectors and stale pack entries reach
        1/:data:`PACK_RATIO` of their vectors, and every user a ``forget`` touched (see the module doc)."""
        final, forgotten = batch_outcome(events)
        batch, self._batch = self._batch or {}, None
        held: dict[str, dict[str, tuple[Any, Any]]] = {}
        for (user_id, doc_id), vectors in batch.items():
            held.setdefault(user_id, {})[doc_id] = vectors
        users = sorted({u for u, _ in final} | {u for u, _ in forgotten} | set(self._stale) | set(held))
        stale, self._stale = self._stale, {}
        must = {u for u, _ in forgotten}
        packs, docs_t = self.table("packs"), self.table("docs")
        for user_id in users:
            cur.execute(f"SELECT docs, stale FROM {packs} WHERE user_id = ?", (user_id,))
            row = cur.fetchone()
            packed, old = (0, 0) if row is None else (int(row[0]), int(row[1]))
            cur.execute(f"SELECT COUNT(*) FROM {docs_t} WHERE user_id = ? AND vector IS NOT NULL", (user_id,))
            mine = held.get(user_id, {})
            fresh = int(cur.fetchone()[0]) + len(mine)
            waste = old + stale.get(user_id, 0)
            if user_id in must or (fresh + waste and (fresh + waste) * PACK_RATIO >= packed + fresh):
                self.pack_user(cur, user_id, mine)
                continue
            for doc_id, (vec, cvec) in mine.items():  # not packed this time: the rows hold them until then
                cur.execute(f"UPDATE {docs_t} SET vector = ?, cjk_vector = ? WHERE user_id = ? AND doc_id = ?",
                            (cur.seal(user_id, vec), cur.seal(user_id, cvec), user_id, doc_id))
            if waste != old:
                cur.execute(f"UPDATE {packs} SET stale = ? WHERE user_id = ?", (waste, user_id))

    def stored_vectors(self, cur: Cursor) -> dict[tuple[str, str], tuple[Any, Any]]:
        """``{(user_id, doc_id): (main vector, companion vector or None)}`` of every document of this copy, as
        stored: a live row's from its column (bytes) or its user's pack (a float32 array), ``(None, None)`` for a
        tombstone. What ``vectors_docs`` alone held before packs (a test's and an operator's view)."""
        cols = ["user_id", "doc_id", "live", "vector", "cjk_vector"]
        cur.execute(f"SELECT {', '.join(cols)} FROM {self.table('docs')} ORDER BY user_id, doc_id")
        rows = self.with_packed(cur, cur.fetchall(), cols)
        return {(r[0], r[1]): (r[3], r[4]) for r in rows}

    def pack_all(self, cur: Cursor) -> int:
        """Pack every user who has a vector in a row (a store written before packs: its upgrade on open). Returns
        the users packed."""
        cur.execute(f"SELECT DISTINCT user_id FROM {self.table('docs')} WHERE vector IS NOT NULL")
        users = [r[0] for r in cur.fetchall()]
        for user_id in users:
            self.pack_user(cur, user_id)
        return len(users)
