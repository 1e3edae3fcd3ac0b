"""Each user's vectors stored once: one sealed blob per user in the ``vectors_packs`` table (a *pack*), the form a
search loads in one read; sealed in chunks (``ledger/sealing.py``), opened two at a time straight into the index.

A vector lives in exactly one place at a time, inside the projection database and its transactions:

* a user has a *base* pack (level 0) and a *delta* pack (level 1), each doc ids and one float16 matrix per model,
  sealed under the user's key as one blob. A batch's vectors are held in memory while it is applied; at its end
  (:meth:`Packs.finish`, same transaction) they go into the delta, rewritten with the entries it keeps, unless the
  delta and the base's stale entries reach 1/:data:`PACK_RATIO` of the user's vectors: then the base is rewritten
  with every live document's vector and the delta goes. A small user's base is rewritten at every batch; a user of
  100,000 memories rewrites a delta of at most ~12,500 vectors per batch and the base every ~12,500 changes, so a
  write never rewrites a big pack (an amortised ~8 copies of each vector over its life), and a search loads a user
  with two openings.
* ``vectors_docs.vector`` / ``cjk_vector`` hold a vector only in a store written before packs until it is opened
  (the upgrade packs them), or where an operator put one; a row's own vector wins over the packs.

So a live row whose ``vector`` is NULL has its vectors in the user's delta under its ``doc_id``, else in their
base; a base entry whose row was rewritten since (a supersede, a retraction) is *stale*: never read, and counted
(``stale``) so that it leaves at the next rewrite of the base. ``forget`` packs the user at once, so a
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
#: the packs' stored form (``vectors_meta.pack_format``): "2", sealed in chunks (:func:`encode_pack_chunks`); a
#: table without it may hold packs sealed whole, which the open that finds it reseals (:meth:`Packs.reseal_packs`)
PACK_FORMAT = "2"


#: the most bytes of a matrix in one sealed chunk (:func:`encode_pack_chunks`): a 100,000-memory user's 73 MB base is
#: ~18 chunks, opened in two threads
CHUNK_BYTES = 4 << 20


def encode_pack(parts: dict[str, tuple[int, list[str], Any]]) -> bytes:
    """A pack: ``{part: (dim, doc ids, float32 (n, dim) matrix)}`` as one blob, each matrix float16 when every
    component is one (vectors from float16 rows), else float32 (rows written before, or beyond float16's range)."""
    return b"".join(encode_pack_chunks(parts))


def encode_pack_chunks(parts: dict[str, tuple[int, list[str], Any]]) -> list[bytes]:
    """The blob of :func:`encode_pack` in the pieces it is sealed in (``Cursor.seal_chunks``): the magic and header
    line, then each matrix in whole rows of at most :data:`CHUNK_BYTES` (a piece never holds two matrices), so a
    loader opens a matrix straight into its own storage, a few pieces at once."""
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
        stored = half if exact else mat.astype("<f4")
        rows = max(1, CHUNK_BYTES // max(1, dim * stored.itemsize))
        chunks.extend(stored[i:i + rows].tobytes() for i in range(0, len(docs), rows))
    head = PACK_MAGIC + json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
    return [head, *chunks]


def decode_pack(data: bytes) -> dict[str, tuple[int, list[str], Any]]:
    """The parts of a blob of :func:`encode_pack`, each matrix as stored (float16, or float32): a read-only view of
    ``data``, converted by whoever reads it (a 100,000-memory pack is not copied to float32 whole just to be read).

    Raises:
        ValueError: not such a blob (altered, truncated)."""
    header, at = _header(data)
    out = {}
    for name, (dim, docs, dtype) in header.items():
        width = np.dtype(dtype).itemsize
        if at + len(docs) * dim * width > len(data):
            raise ValueError("a vectors pack of another length")
        mat = np.frombuffer(data, dtype=dtype, count=len(docs) * dim, offset=at)
        at += len(docs) * dim * width
        out[name] = (dim, docs, mat.reshape(len(docs), dim))
    if at != len(data):
        raise ValueError("a vectors pack of another length")
    return out


def _header(data: bytes | bytearray) -> tuple[dict[str, tuple[int, list[str], str]], int]:
    """``({part: (dim, doc ids, dtype)}, where the matrices start)`` of a pack's first bytes, parts in their order.

    Raises:
        ValueError: not a pack."""
    if not data.startswith(PACK_MAGIC):
        raise ValueError("not a vectors pack")
    end = data.index(b"\n", len(PACK_MAGIC))
    header = json.loads(data[len(PACK_MAGIC):end])
    out = {}
    for name in PARTS:
        h = header.get(name)
        if h is not None:
            dtype = str(h["dtype"])
            if dtype not in ("<f2", "<f4"):
                raise ValueError("a vectors pack of another dtype")
            out[name] = (int(h["dim"]), list(map(str, h["docs"])), dtype)
    return out, end + 1


class StoredPack:
    """A user's pack as read, for a load: ``parts`` (``{part: (dim, doc ids, dtype)}``) known at once, each matrix
    opened when asked for, straight into the caller's storage (:meth:`matrix_into`). A pack sealed in chunks
    (:func:`encode_pack_chunks`) has only its header opened first and its matrix's chunks opened into the target in
    two threads; any other (sealed whole by an earlier version, or not sealed) is opened whole at once."""

    def __init__(self, parts: dict[str, tuple[int, list[str], str]], *, decoded: dict[str, Any] | None = None,
                 chunks: Any = None, spans: dict[str, list[int]] | None = None) -> None:
        self.parts = parts
        self._decoded, self._chunks, self._spans = decoded, chunks, spans

    @classmethod
    def of(cls, blob: Any, sealer: Any) -> StoredPack | None:
        """The pack of a stored ``vectors_packs.vectors`` value; None once its user's key is gone.

        Raises:
            ValueError: not a pack, or one that does not open (altered, another user's)."""
        from ledger.sealing import CHUNKS_PREFIX

        if sealer is not None and bytes(blob[:4]) == CHUNKS_PREFIX:
            chunks = sealer.chunks(blob)
            if chunks is None:
                return None
            head = chunks.open(0)
            parts, at = _header(head)
            spans: dict[str, list[int]] = {}
            i = 1
            if at == len(head):  # pieces as encode_pack_chunks cuts them: each matrix in whole chunks of its own
                for name, (dim, docs, dtype) in parts.items():
                    need, spans[name] = len(docs) * dim * np.dtype(dtype).itemsize, []
                    while need > 0 and i < len(chunks.sizes) and chunks.sizes[i] <= need:
                        spans[name].append(i)
                        need -= chunks.sizes[i]
                        i += 1
                    if need:
                        break
                else:
                    if i == len(chunks.sizes):
                        return cls(parts, chunks=chunks, spans=spans)
            blob = sealer.open(blob)  # cut otherwise: opened whole, read as any pack
        elif sealer is not None:
            blob = sealer.open(blob if isinstance(blob, (bytes, bytearray)) else bytes(blob))
            if blob is None:
                return None
        decoded = decode_pack(blob)
        return cls({n: (d, docs, m.dtype.str) for n, (d, docs, m) in decoded.items()}, decoded=decoded)

    def matrix_into(self, name: str, out: Any) -> None:
        """Write part ``name``'s ``(n, dim)`` matrix into ``out`` (C-contiguous, that shape and the part's dtype).

        Raises:
            ValueError: a chunk does not open (altered); ``out`` then holds no usable values."""
        dim, docs, dtype = self.parts[name]
        if out.shape != (len(docs), dim) or out.dtype != np.dtype(dtype) or not out.flags.c_contiguous:
            raise ValueError(f"the {name} matrix is ({len(docs)}, {dim}) {dtype}, not {out.shape} {out.dtype}")
        if self._decoded is not None:
            np.copyto(out, self._decoded[name][2])
            return
        flat, at, targets = out.reshape(-1).view(np.uint8), 0, []
        for i in self._spans[name]:  # type: ignore[index]
            targets.append((i, flat[at:at + self._chunks.sizes[i]]))
            at += self._chunks.sizes[i]
        self._chunks.open_into(targets)

    def matrix(self, name: str) -> Any:
        """Part ``name``'s ``(n, dim)`` matrix as stored (float16 or float32), opened now."""
        dim, docs, dtype = self.parts[name]
        out = np.empty((len(docs), dim), dtype=dtype)
        self.matrix_into(name, out)
        return out


#: the two packs of a user (``vectors_packs.level``)
BASE, DELTA = 0, 1


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


def entries(vectors: dict[str, tuple[Any, Any]], dim: int, cjk_dim: int) -> dict[str, tuple[int, list[str], Any]]:
    """The parts of a pack holding ``{doc_id: (main vector, companion vector or None)}`` (stored bytes or arrays)."""
    docs = sorted(vectors)
    parts = {"main": (dim, docs, np.stack([as_f32(vectors[d][0], dim) for d in docs]) if docs
                      else np.empty((0, dim), np.float32))}
    cjk = [d for d in docs if vectors[d][1] is not None]
    if cjk:
        parts["cjk"] = (cjk_dim, cjk, np.stack([as_f32(vectors[d][1], cjk_dim) for d in cjk]))
    return parts


class Packs:
    """The packs' half of :class:`projections.vectors.VectorsProjection` (a mixin: it reads the projection's tables
    and meta)."""

    def read_pack(self, cur: Cursor, user_id: str, level: int = BASE) -> dict[str, tuple[int, list[str], Any]] | None:
        """The user's base (or delta) pack in this copy, decoded (None: they have none, or their key is gone). One
        read, opened whole."""
        cur.execute(f"SELECT vectors FROM {self.table('packs')} WHERE user_id = ? AND level = ?", (user_id, level))
        row = cur.fetchone()
        if row is None or row[0] is None:
            return None
        return decode_pack(row[0] if isinstance(row[0], (bytes, bytearray)) else bytes(row[0]))

    def stored_pack(self, cur: Cursor, user_id: str, level: int = BASE) -> StoredPack | None:
        """The user's base (or delta) pack in this copy as read for a load (:class:`StoredPack`: its matrices opened
        on demand, into the caller's storage); None: they have none, or their key is gone."""
        blob = cur.read_blob(self.table("packs"), "vectors", "user_id = ? AND level = ?", (user_id, level))
        return None if blob is None else StoredPack.of(blob, cur.sealer)

    def read_packs(self, cur: Cursor) -> dict[str, tuple[Any, Any]]:
        """Every user's ``(base, delta)`` packs in this copy, decoded (a whole mirror's load, an in-place rebuild's
        spill)."""
        cur.execute(f"SELECT user_id, level, vectors FROM {self.table('packs')}")
        out: dict[str, list[Any]] = {}
        for user_id, level, data in cur.fetchall():
            if data is not None:
                out.setdefault(user_id, [None, None])[int(level)] = decode_pack(
                    data if isinstance(data, (bytes, bytearray)) else bytes(data))
        return {u: (b, d) for u, (b, d) in out.items()}

    def packed_vectors(self, cur: Cursor, user_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """``({doc_id: main vector}, {doc_id: companion vector})`` of the user's packs, the delta's over the
        base's (stale base entries included: a caller asks for live documents only)."""
        return self._merged(self.read_pack(cur, user_id), self.read_pack(cur, user_id, DELTA))

    @staticmethod
    def _merged(base: Any, delta: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        main, cjk = lookup(base)
        d_main, d_cjk = lookup(delta)
        for doc in d_main:  # a document rewritten since the base: its companion vector is the delta's, or none
            cjk.pop(doc, None)
        main.update(d_main)
        cjk.update(d_cjk)
        return main, cjk

    def with_packed(self, cur: Cursor, rows: list[tuple], cols: list[str],
                    packs: dict[str, Any] | None = None) -> list[tuple]:
        """``rows`` (tuples of ``cols``: ``user_id``, ``doc_id``, ``vector`` and ``cjk_vector`` among them, live rows
        or tombstones) with the vectors of packed live rows taken from their users' packs, as arrays (a column's
        own vector stays its stored bytes). ``packs``: ``{user: (base, delta)}`` already read (else each user's
        delta is read here, and their base only when the delta lacks a document; ``rows`` must be fetched whole
        before, since the cursor is reused)."""
        at = {c: i for i, c in enumerate(cols)}
        u_at, d_at, v_at, c_at = at["user_id"], at["doc_id"], at["vector"], at["cjk_vector"]
        live_at = at.get("live")
        found: dict[str, list[Any]] = {}  # user -> [merged lookups, base read yet]
        out = []
        for r in rows:
            if r[v_at] is not None or (live_at is not None and not r[live_at]):
                out.append(r)
                continue
            user_id, doc_id = r[u_at], r[d_at]
            f = found.get(user_id)
            if f is None:
                if packs is not None:
                    f = found[user_id] = [self._merged(*packs.get(user_id, (None, None))), True]
                else:  # the delta first: a refresh after a batch needs only the batch's vectors
                    f = found[user_id] = [self._merged(None, self.read_pack(cur, user_id, DELTA)), False]
            if doc_id not in f[0][0] and not f[1]:
                f[0], f[1] = self.packed_vectors(cur, user_id), True
            main, cjk = f[0]
            vec = main.get(doc_id)
            if vec is None:
                raise self._lost_vector(user_id, doc_id)
            r = list(r)
            r[v_at], r[c_at] = vec, cjk.get(doc_id)
            out.append(tuple(r))
        return out

    def _lost_vector(self, user_id: str, doc_id: str) -> RuntimeError:
        return RuntimeError(f"{self.table('docs')}: the live document {doc_id!r} of user {user_id!r} has no vector in "
                            f"its row nor in the user's packs; rebuild the index: `memledger rebuild vectors "
                            "--blue-green`")

    def _write_pack(self, cur: Cursor, user_id: str, level: int, parts: dict[str, Any], stale: int = 0) -> None:
        # the user's vectors, under their key, in chunks a load opens two at a time (encode_pack_chunks)
        blob = cur.seal_chunks(user_id, encode_pack_chunks(parts))
        cur.execute(f"INSERT INTO {self.table('packs')} (user_id, level, docs, stale, vectors) VALUES (?, ?, ?, ?, ?) "
                    "ON CONFLICT (user_id, level) DO UPDATE SET docs = excluded.docs, stale = excluded.stale, "
                    "vectors = excluded.vectors", (user_id, level, len(parts["main"][1]), stale, blob))

    def _dims(self, cur: Cursor) -> tuple[int, int]:
        meta = self._meta(cur)
        return int(meta["dim"]), int(meta.get("cjk_dim") or 0)

    def pack_user(self, cur: Cursor, user_id: str, held: dict[str, tuple[Any, Any]] | None = None) -> int:
        """Rewrite ``user_id``'s base pack with every live document's vectors (no stale entry left), drop their
        delta and clear their rows' vector columns; no pack is left when no live row is. ``held``: the vectors the
        batch being applied gives the user's documents (``{doc_id: (vector, cjk vector)}``, kept out of their rows).
        Returns the vectors packed (main model)."""
        packs, docs_t = self.table("packs"), self.table("docs")
        cur.execute(f"SELECT doc_id, vector, cjk_vector FROM {docs_t} WHERE user_id = ? AND live = 1 ORDER BY doc_id",
                    (user_id,))
        rows = cur.fetchall()
        if not rows:
            cur.execute(f"DELETE FROM {packs} WHERE user_id = ?", (user_id,))
            return 0
        held = held or {}
        need = any(d not in held and v is None for d, v, _ in rows)
        main, cjk = self.packed_vectors(cur, user_id) if need else ({}, {})
        dim, cjk_dim = self._dims(cur)
        vectors: dict[str, tuple[Any, Any]] = {}
        for doc_id, vec, cvec in rows:
            if doc_id in held:
                vectors[doc_id] = held[doc_id]
            elif vec is not None:
                vectors[doc_id] = (vec, cvec)
            elif doc_id in main:
                vectors[doc_id] = (main[doc_id], cjk.get(doc_id))
            else:
                raise self._lost_vector(user_id, doc_id)
        self._write_pack(cur, user_id, BASE, entries(vectors, dim, cjk_dim))
        cur.execute(f"DELETE FROM {packs} WHERE user_id = ? AND level = ?", (user_id, DELTA))
        cur.execute(f"UPDATE {docs_t} SET vector = NULL, cjk_vector = NULL WHERE user_id = ? AND vector IS NOT NULL",
                    (user_id,))
        return len(rows)

    def note_unpacked(self, own: dict[tuple[str, str], Any]) -> None:
        """Before a batch rewrites the rows ``own`` (``{(user_id, doc_id): (text, vector, cjk, packed)}``, read
        by ``prepare``): each packed one's base entry goes stale, unless the delta held it (:meth:`finish`)."""
        for (user_id, doc_id), entry in own.items():
            if entry[3]:
                self._stale.setdefault(user_id, set()).add(doc_id)

    def finish(self, cur: Cursor, events: list[Any]) -> None:
        """After a batch: each user it touched gets its vectors in their delta, or (the delta and the base's stale
        entries reaching 1/:data:`PACK_RATIO` of their vectors, or a ``forget``) a rewritten base; see the module
        doc."""
        final, forgotten = batch_outcome(events)
        batch, self._batch = self._batch or {}, None
        held: dict[str, dict[str, tuple[Any, Any]]] = {}
        for (user_id, doc_id), vectors in batch.items():
            held.setdefault(user_id, {})[doc_id] = vectors
        touched: dict[str, set[str]] = {}
        for user_id, doc_id in final:
            touched.setdefault(user_id, set()).add(doc_id)
        users = sorted(set(touched) | {u for u, _ in forgotten} | set(self._stale) | set(held))
        rewritten, self._stale = self._stale, {}
        must = {u for u, _ in forgotten}
        packs, docs_t = self.table("packs"), self.table("docs")
        for user_id in users:
            mine = held.get(user_id, {})
            if user_id in must:
                self.pack_user(cur, user_id, mine)
                continue
            cur.execute(f"SELECT docs, stale FROM {packs} WHERE user_id = ? AND level = ?", (user_id, BASE))
            row = cur.fetchone()
            packed, old = (0, 0) if row is None else (int(row[0]), int(row[1]))
            d_main, d_cjk = lookup(self.read_pack(cur, user_id, DELTA))
            gone = touched.get(user_id, set())
            delta = {d: (v, d_cjk.get(d)) for d, v in d_main.items() if d not in gone}
            delta.update(mine)
            cur.execute(f"SELECT COUNT(*) FROM {docs_t} WHERE user_id = ? AND vector IS NOT NULL", (user_id,))
            fresh = len(delta) + int(cur.fetchone()[0])
            waste = old + len(rewritten.get(user_id, set()) - set(d_main))  # base entries rewritten since
            if (fresh + waste) * PACK_RATIO >= packed + fresh:
                self.pack_user(cur, user_id, mine)
                continue
            if delta:
                self._write_pack(cur, user_id, DELTA, entries(delta, *self._dims(cur)))
            else:
                cur.execute(f"DELETE FROM {packs} WHERE user_id = ? AND level = ?", (user_id, DELTA))
            if waste != old:
                cur.execute(f"UPDATE {packs} SET stale = ? WHERE user_id = ? AND level = ?", (waste, user_id, BASE))

    def stored_vectors(self, cur: Cursor) -> dict[tuple[str, str], tuple[Any, Any]]:
        """``{(user_id, doc_id): (main vector, companion vector or None)}`` of every document of this copy, as
        stored: a live row's from its column (bytes) or its user's packs (an array), ``(None, None)`` for a
        tombstone. What ``vectors_docs`` alone held before packs (a test's and an operator's view)."""
        cols = ["user_id", "doc_id", "live", "vector", "cjk_vector"]
        cur.execute(f"SELECT {', '.join(cols)} FROM {self.table('docs')} ORDER BY user_id, doc_id")
        rows = self.with_packed(cur, cur.fetchall(), cols)
        return {(r[0], r[1]): (r[3], r[4]) for r in rows}

    def reseal_packs(self, cur: Cursor) -> int:
        """Rewrite every pack sealed whole (by an earlier version) sealed in chunks (:func:`encode_pack_chunks`):
        the same plaintext under the same user key, so a big user's first search opens it two chunks at a time.
        Packs already in chunks, not sealed (sealing off) or of an erased user are left as they are. Returns the
        packs rewritten (the upgrade of :meth:`VectorsProjection.create`, once per table)."""
        from ledger.sealing import BYTES_PREFIX

        if cur.sealer is None or not cur.sealer.writes:
            return 0
        packs = self.table("packs")
        cur.execute(f"SELECT user_id, level FROM {packs} ORDER BY user_id, level")
        done = 0
        for user_id, level in cur.fetchall():
            blob = cur.read_blob(packs, "vectors", "user_id = ? AND level = ?", (user_id, level))
            if blob is None or bytes(blob[:4]) != BYTES_PREFIX:
                continue
            plain = cur.sealer.open(blob)
            if plain is None:
                continue  # erased: nothing of the user is written again
            parts = decode_pack(plain)
            chunks = encode_pack_chunks(parts)
            if b"".join(chunks) != plain:  # pragma: no cover - would mean the encoding changed
                raise RuntimeError(f"the vectors pack of user {user_id!r} does not encode back to itself")
            cur.execute(f"UPDATE {packs} SET vectors = ? WHERE user_id = ? AND level = ?",
                        (cur.seal_chunks(user_id, chunks), user_id, level))
            done += 1
        return done

    def pack_all(self, cur: Cursor) -> int:
        """Pack every user who has a vector in a row (a store written before packs: its upgrade on open). Returns
        the users packed."""
        cur.execute(f"SELECT DISTINCT user_id FROM {self.table('docs')} WHERE vector IS NOT NULL")
        users = [r[0] for r in cur.fetchall()]
        for user_id in users:
            self.pack_user(cur, user_id)
        return len(users)
