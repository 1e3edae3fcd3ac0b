"""The in-memory mirror of the ``vectors`` table: per user, a FAISS index of the main embedder's vectors, one of
the CJK companion's, a BM25 index and each document's metadata. It is a cache of the table, only ever updated
*from* it after the transaction committed (:meth:`Mirror.refresh`): rows past the position the mirror reflects are
read in the reader's snapshot and applied, and a ``generation`` change (erasure, model change) reloads it whole.
"""

from __future__ import annotations

import itertools
import operator
import threading
from dataclasses import dataclass, field
from typing import Any

from ..base import position_of
from ..db import Cursor
from .documents import DOC_COLS, META_COLS, stack_vectors, doc_meta, decode_vector, lexical_document

LOAD_CHUNK = 2048  # rows per fetch when the mirror is opened from the table's vectors


@dataclass
class UserIndex:
    vectors: Any  # UserVectorIndex
    lexical: Any  # LexicalIndex
    meta: dict[str, dict[str, Any]] = field(default_factory=dict)
    cjk: Any = None  # UserVectorIndex of the CJK companion (only documents with CJK text), None until one exists


@dataclass
class Memory:
    """The in-memory mirror of one copy (suffix) of the table."""

    generation: int
    position: int
    dim: int | None
    cjk_dim: int | None = None
    users: dict[str, UserIndex] = field(default_factory=dict)
    dirty: set[str] = field(default_factory=set)
    lock: threading.RLock = field(default_factory=threading.RLock)
    #: sha256 (hex) of each user's BM25 file as last written or read (file stem -> digest), for the manifest
    digests: dict[str, str] = field(default_factory=dict)


class Mirror:
    """The mirror's half of :class:`projections.vectors.VectorsProjection` (a mixin: it reads the projection's
    table names, embedders and index files)."""

    def refresh(self, cur: Cursor) -> Memory:
        """Bring the in-memory indexes of the serving copy up to this snapshot's rows; returns them (locked use).

        Reads the tracking position and ``generation`` in the caller's snapshot: a generation change (erasure,
        model change) reloads everything; otherwise only rows with ``position`` past the memory's are applied.
        A memory already *ahead* of the snapshot (another thread refreshed from a newer one) is kept: newer is
        never stale.
        """
        position = position_of(cur, self.tracking_name)[0]
        meta = self._meta(cur)
        self._seen_meta = meta
        problem = self.model_mismatch(meta)
        if problem is not None:  # never query rows of another model with ours (dimensions, spaces)
            from ledger.errors import MemledgerError

            raise MemledgerError(problem)
        generation = int(meta.get("generation", "0"))
        dim = int(meta["dim"]) if "dim" in meta else None
        cjk_dim = int(meta["cjk_dim"]) if "cjk_dim" in meta else None
        with self._lock:
            mem = self._memories.get(self.suffix)
            if mem is None or mem.generation != generation:
                mem = self._load(cur, generation, position, dim, cjk_dim)
                self._memories[self.suffix] = mem
                return mem
        with mem.lock:
            if mem.dim is None:
                mem.dim = dim
            if mem.cjk_dim is None:
                mem.cjk_dim = cjk_dim
            if position > mem.position:
                cols = ", ".join(DOC_COLS)
                cur.execute(f"SELECT {cols} FROM {self.table('docs')} WHERE position > ? ORDER BY position",
                            (mem.position,))
                for r in cur.fetchall():
                    self._apply_row(mem, dict(zip(DOC_COLS, r)))
                mem.position = position
        return mem

    def _user(self, mem: Memory, user_id: str) -> UserIndex:
        from .lexical import LexicalIndex
        from .vector_store import UserVectorIndex

        u = mem.users.get(user_id)
        if u is None:
            assert mem.dim is not None
            u = mem.users[user_id] = UserIndex(UserVectorIndex(mem.dim), LexicalIndex())
        return u

    def _apply_row(self, mem: Memory, row: dict[str, Any]) -> None:
        user_id, doc_id = row["user_id"], row["doc_id"]
        if not row["live"]:
            u = mem.users.get(user_id)
            if u is not None and doc_id in u.meta:
                u.vectors.remove(doc_id)
                u.lexical.remove(doc_id)
                if u.cjk is not None:
                    u.cjk.remove(doc_id)
                del u.meta[doc_id]
                mem.dirty.add(user_id)
            return
        u = self._user(mem, user_id)
        vec = decode_vector(row["vector"], mem.dim if mem.dim is not None else self._dim_of("vector"))
        u.vectors.add(doc_id, vec)  # add replaces: one live vector per doc_id
        if row["cjk_vector"] is not None:
            from .vector_store import UserVectorIndex

            cvec = decode_vector(row["cjk_vector"], mem.cjk_dim if mem.cjk_dim is not None else self._dim_of("cjk"))
            if u.cjk is None:
                u.cjk = UserVectorIndex(cvec.shape[0])
            u.cjk.add(doc_id, cvec)
        elif u.cjk is not None:
            u.cjk.remove(doc_id)  # the new version's text has no CJK: its old companion vector goes
        meta = doc_meta(row[c] for c in META_COLS)
        u.lexical.add(doc_id, lexical_document(row["key"], row["text"], meta["value_json"]))
        u.meta[doc_id] = meta
        mem.dirty.add(user_id)

    def _load(self, cur: Cursor, generation: int, position: int, dim: int | None,
              cjk_dim: int | None = None) -> Memory:
        mem = self._load_files(cur, generation, position, dim, cjk_dim)
        if mem is not None:
            return mem
        mem = Memory(generation=generation, position=position, dim=dim, cjk_dim=cjk_dim)
        self._read_rows(cur, mem, lexical_from_files=False)
        mem.dirty = set(mem.users)
        return mem

    def _read_rows(self, cur: Cursor, mem: Memory, *, lexical_from_files: bool) -> bool:
        """Add the table's live rows to ``mem``: vectors into FAISS (main and companion), metadata, and, unless
        ``lexical_from_files``, each row's BM25 document. With ``lexical_from_files`` every user already holds the
        BM25 index read from its file, and False is returned as soon as that file does not hold exactly the user's
        live documents (the files are not this table's).

        Rows are read in pieces of :data:`LOAD_CHUNK`, each added at once: the whole result held in Python (150 MB
        of bytes objects at 100k memories) left the process ~140 MB larger for good (bench_growth.py --rss-memories).
        """
        from .lexical import LexicalIndex
        from .vector_store import UserVectorIndex

        cur.execute(f"SELECT {', '.join(DOC_COLS)} FROM {self.table('docs')} WHERE live = 1 ORDER BY user_id, doc_id")
        at = {c: i for i, c in enumerate(DOC_COLS)}
        vec, cvec, meta_at = at["vector"], at["cjk_vector"], [at[c] for c in META_COLS]
        while rows := cur.fetchmany(LOAD_CHUNK):
            for user_id, group in itertools.groupby(rows, key=operator.itemgetter(0)):
                part = list(group)
                if mem.dim is None:  # the meta row notes it with the first vector; else the embedder's
                    mem.dim = self._dim_of("vector")
                u = mem.users.get(user_id)
                if lexical_from_files:
                    if u is None or any(r[1] not in u.lexical for r in part):
                        return False
                elif u is None:
                    u = mem.users[user_id] = UserIndex(UserVectorIndex(mem.dim), LexicalIndex())
                u.vectors.add_many([r[1] for r in part], stack_vectors(part, vec, mem.dim))
                cjk = [r for r in part if r[cvec] is not None]
                if cjk:
                    cdim = mem.cjk_dim if mem.cjk_dim is not None else self._dim_of("cjk")
                    if u.cjk is None:
                        u.cjk = UserVectorIndex(cdim)
                    u.cjk.add_many([r[1] for r in cjk], stack_vectors(cjk, cvec, cdim))
                metas = [(r[1], doc_meta(r[i] for i in meta_at)) for r in part]
                if not lexical_from_files:
                    for doc_id, m in metas:
                        u.lexical.add(doc_id, lexical_document(m["key"], m["text"], m["value_json"]))
                u.meta.update(metas)
        return not lexical_from_files or all(len(u.meta) == len(u.lexical) for u in mem.users.values())
