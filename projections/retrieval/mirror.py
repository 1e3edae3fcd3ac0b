"""The in-memory mirror of the ``vectors`` table: per user, a FAISS index of the main embedder's vectors, one of
the CJK companion's and a BM25 index: what ranking needs, nothing else. A document's text, value and provenance stay
in the table and are read for the candidates a search ranks (:meth:`Mirror.doc_rows`, one query in the reader's
snapshot), so a user with 100,000 memories holds no 100,000 dicts of opened text. It is a cache of the table, only ever updated
*from* it after the transaction committed (:meth:`Mirror.refresh`): rows past the position the mirror reflects are
read in the reader's snapshot and applied, and a ``generation`` change (erasure, model change) reloads it whole.

Two ways to hold it. Whole (the default: a CLI call, a notebook): every user is loaded when the mirror opens, from
the index files when they match. Bounded (a server holding many users, ``index_budget_bytes``): a user is loaded
at their first search and kept while the loaded users' estimated size (:func:`user_bytes`) stays
within the budget, the least recently searched evicted first; rows of users not loaded are not applied, since a
user is read whole, in the reader's snapshot, when next searched: from the stored form, as the whole mirror reads
every user (their vector packs, and their BM25 file with the rows changed since it was written), else from their
rows. An evicted user whose BM25 file was missing or behind has it written, so their next load reads it.
"""

from __future__ import annotations

import itertools
import operator
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from ..base import position_of
from ..db import Cursor
from ..base import value_json_of
from .documents import DOC_COLS, META_COLS, stack_vectors, doc_meta, decode_vector, lexical_document

LOAD_CHUNK = 2048  # rows per fetch when the mirror is opened from the table's vectors
#: the columns read when the BM25 indexes come from their files: the documents' ids and vectors only
LOAD_COLS = ["user_id", "doc_id", "vector", "cjk_vector"]
#: resident bytes a loaded document costs besides its vectors, and a loaded user besides their documents:
#: the metadata dict (text, value, provenance), the BM25 postings, FAISS's id maps and what the allocator keeps.
#: Measured as the process's VmRSS growth over 400 users of 100 memories loaded at once (hash:384 vectors: 5.7 KB a
#: memory in all, 4.2 KB of it besides the vector); rounded up, so that a budget holds in resident memory, not only
#: in the objects' own sizes (scripts/bench_users.py).
DOC_OVERHEAD_BYTES = 4608
USER_OVERHEAD_BYTES = 16384


def user_bytes(u: UserIndex) -> int:
    """The estimated resident size of one loaded user, in bytes: each document's vectors (main and companion, as the
    indexes hold them: float16, 2 bytes a component) plus :data:`DOC_OVERHEAD_BYTES` a document and
    :data:`USER_OVERHEAD_BYTES`."""
    n = len(u.vectors)
    main = n * u.vectors.itemsize * u.vectors.dim
    cjk = 0 if u.cjk is None else len(u.cjk) * u.cjk.itemsize * u.cjk.dim
    cross = 0 if u.cross is None else len(u.cross) * u.cross.itemsize * u.cross.dim
    return USER_OVERHEAD_BYTES + main + cjk + cross + n * DOC_OVERHEAD_BYTES


#: loading at least this many documents at once hands the freed heap back to the kernel (:func:`release_freed_heap`)
TRIM_MIN_DOCS = 10_000


def release_freed_heap() -> None:
    """Return the C heap's free pages to the kernel (glibc's ``malloc_trim``; elsewhere nothing). Why: loading a big
    user allocates and frees transient buffers (the pack's sealed and opened blobs, ~73 MB each at 100,000 memories,
    the BM25 file) that glibc keeps in the heap, not unmapped, so the process stayed ~40 MB larger for good; the trim
    takes ~3 ms, so it runs only after a load of :data:`TRIM_MIN_DOCS` documents or more."""
    import ctypes

    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (AttributeError, OSError):  # not glibc
        pass


#: candidates whose rows one query reads (:meth:`Mirror.doc_rows`): SQLite's and PostgreSQL's parameter limits
ROWS_CHUNK = 500


@dataclass
class UserIndex:
    """One user's loaded indexes: the documents are those of ``vectors`` (the same ids in ``lexical``)."""

    vectors: Any  # UserVectorIndex
    lexical: Any  # LexicalIndex
    cjk: Any = None  # UserVectorIndex of the CJK companion (only documents with CJK text), None until one exists
    #: UserVectorIndex of the companion's vectors of the documents *without* CJK text, filled at the user's first CJK
    #: query (projections/retrieval/cross_language.py), None until then; never written to the table
    cross: Any = None

    def __len__(self) -> int:
        return len(self.vectors)


@dataclass
class Memory:
    """The in-memory mirror of one copy (suffix) of the table."""

    generation: int
    position: int
    dim: int | None
    cjk_dim: int | None = None
    users: dict[str, UserIndex] = field(default_factory=OrderedDict)  # least recently searched first (bounded)
    dirty: set[str] = field(default_factory=set)
    #: bounded: the most bytes of loaded users kept (:func:`user_bytes`); None: every user, loaded at open
    budget: int | None = None
    sizes: dict[str, int] = field(default_factory=dict)  # bounded: user_bytes of each loaded user
    evictions: int = 0
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
                budget = getattr(self, "index_budget_bytes", None)
                if budget is not None:  # bounded: users are read at their first search (:meth:`user_index`)
                    mem = Memory(generation=generation, position=position, dim=dim, cjk_dim=cjk_dim, budget=budget)
                else:
                    mem = self._load(cur, generation, position, dim, cjk_dim)
                    if sum(len(u) for u in mem.users.values()) >= TRIM_MIN_DOCS:
                        release_freed_heap()
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
                rows = cur.fetchall()
                if mem.budget is not None:  # bounded: rows of users not loaded are not applied (nor unpacked)
                    rows = [r for r in rows if r[0] in mem.users]
                for r in self.with_packed(cur, rows, DOC_COLS):
                    self._apply_row(mem, dict(zip(DOC_COLS, r)))
                mem.position = position
        return mem

    def user_index(self, cur: Cursor, user_id: str) -> tuple[Memory, UserIndex | None]:
        """The mirror brought up to this snapshot (:meth:`refresh`) and ``user_id``'s loaded index in it (None: the
        user has no live document). Bounded, a user not loaded is read from the table in this snapshot; kept only
        when the snapshot is the mirror's position (an older reader's copy would miss rows the mirror has passed),
        then the least recently searched users are evicted until the budget holds (the one just read stays, even
        alone over it). Use the returned index under ``mem.lock``."""
        mem = self.refresh(cur)
        with mem.lock:
            u = mem.users.get(user_id)
            if u is not None or mem.budget is None:
                if u is not None and mem.budget is not None:
                    mem.users.move_to_end(user_id)  # type: ignore[attr-defined]
                return mem, u
        at = position_of(cur, self.tracking_name)[0]
        u, dirty = self._read_user(cur, mem, user_id, at)
        if u is None:
            return mem, None
        if len(u) >= TRIM_MIN_DOCS:
            release_freed_heap()
        evicted: list[tuple[str, UserIndex]] = []
        with mem.lock:
            if user_id in mem.users:  # another reader loaded it meanwhile: one copy
                return mem, mem.users[user_id]
            if at == mem.position and self._memories.get(self.suffix) is mem:
                mem.users[user_id] = u
                mem.sizes[user_id] = user_bytes(u)
                if dirty:
                    mem.dirty.add(user_id)
                evicted = self._evict(mem, keep=user_id)
                generation, position = mem.generation, mem.position
        if evicted:
            # an evicted user's BM25 file brought up to what their index held (every row up to the mirror's
            # position applied), on a writer thread: their next load reads it instead of tokenising their rows
            self.write_user_files_later(evicted, generation, position)
        return mem, u

    @staticmethod
    def _evict(mem: Memory, keep: str) -> list[tuple[str, UserIndex]]:
        """Evict the least recently searched users but ``keep`` until the budget holds; returns the evicted users
        whose BM25 file is missing or behind their index (``mem.dirty``), to be written."""
        assert mem.budget is not None
        total = sum(mem.sizes.values())
        dirty = []
        for user_id in list(mem.users):
            if total <= mem.budget:
                break
            if user_id == keep:
                continue
            u = mem.users.pop(user_id)
            total -= mem.sizes.pop(user_id, 0)
            mem.evictions += 1
            if user_id in mem.dirty:
                mem.dirty.discard(user_id)
                dirty.append((user_id, u))
        return dirty

    def loaded_bytes(self) -> int:
        """The estimated bytes of the serving copy's loaded users (:func:`user_bytes`), 0 before the first search."""
        mem = self._memories.get(self.suffix)
        if mem is None:
            return 0
        with mem.lock:
            return sum(mem.sizes.values()) if mem.budget is not None else sum(user_bytes(u) for u in mem.users.values())

    def _read_user(self, cur: Cursor, mem: Memory, user_id: str, at: int) -> tuple[UserIndex | None, bool]:
        """One user's index in this snapshot (``at``: its position) and whether their BM25 file is missing or behind
        it: loaded from the stored form, as the whole mirror loads every user (their packs and BM25 file,
        ``load_user``), else read from the table's live rows; None when they have no live document."""
        loaded = self.load_user(cur, mem, user_id, at)
        if loaded is not None:
            return loaded
        cur.execute(f"SELECT {', '.join(DOC_COLS)} FROM {self.table('docs')} WHERE user_id = ? AND live = 1 "
                    "ORDER BY doc_id", (user_id,))
        rows = cur.fetchall()
        if not rows:
            return None, False
        rows = self.with_packed(cur, rows, DOC_COLS)
        one = Memory(generation=mem.generation, position=mem.position, dim=mem.dim, cjk_dim=mem.cjk_dim)
        self._add_rows(one, user_id, rows, lexical=True)
        if mem.dim is None:
            mem.dim = one.dim
        return one.users[user_id], True

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
        if mem.budget is not None and user_id not in mem.users:
            return  # bounded: a user not loaded is read whole, in the reader's snapshot, at their next search
        if not row["live"]:
            u = mem.users.get(user_id)
            if u is not None and doc_id in u.vectors:
                u.vectors.remove(doc_id)
                u.lexical.remove(doc_id)
                if u.cjk is not None:
                    u.cjk.remove(doc_id)
                if u.cross is not None:
                    u.cross.remove(doc_id)
                mem.dirty.add(user_id)
            return
        u = self._user(mem, user_id)
        vec = decode_vector(row["vector"], mem.dim if mem.dim is not None else self._dim_of("vector"))  # or a pack's
        u.vectors.add(doc_id, vec)  # add replaces: one live vector per doc_id
        if u.cross is not None:
            u.cross.remove(doc_id)  # a new version's text: its companion vector is found again at the next CJK query
        if row["cjk_vector"] is not None:
            from .vector_store import UserVectorIndex

            cvec = decode_vector(row["cjk_vector"], mem.cjk_dim if mem.cjk_dim is not None else self._dim_of("cjk"))
            if u.cjk is None:
                u.cjk = UserVectorIndex(cvec.shape[0])
            u.cjk.add(doc_id, cvec)
        elif u.cjk is not None:
            u.cjk.remove(doc_id)  # the new version's text has no CJK: its old companion vector goes
        u.lexical.add(doc_id, lexical_document(row["key"], row["text"], value_json_of(row["value_json"], row["text"])))
        mem.dirty.add(user_id)
        if mem.budget is not None:
            mem.sizes[user_id] = user_bytes(u)

    def doc_rows(self, cur: Cursor, user_id: str, doc_ids: list[str]) -> dict[str, dict[str, Any]]:
        """The metadata (:data:`META_COLS`: text, value, provenance, times) of ``user_id``'s live documents among
        ``doc_ids``, read from the table in this snapshot: a search reads its candidates' rows only, never the
        whole user's. A document not live in this snapshot is absent."""
        out: dict[str, dict[str, Any]] = {}
        cols = ", ".join(META_COLS)
        for i in range(0, len(doc_ids), ROWS_CHUNK):
            part = doc_ids[i:i + ROWS_CHUNK]
            cur.execute(f"SELECT doc_id, {cols} FROM {self.table('docs')} WHERE user_id = ? AND live = 1 "
                        f"AND doc_id IN ({', '.join('?' * len(part))})", (user_id, *part))
            for r in cur.fetchall():
                out[r[0]] = doc_meta(r[1:])
        return out

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
        """Add the table's live rows to ``mem``: vectors into FAISS (main and companion) and, unless
        ``lexical_from_files``, each row's BM25 document. With ``lexical_from_files`` every user already holds the
        BM25 index read from its file, only the vectors are read, and False is returned as soon as that file does not
        hold exactly the user's live documents (the files are not this table's).

        Rows are read in pieces of :data:`LOAD_CHUNK`; a user's vectors go into FAISS in one call: the whole result
        held in Python (150 MB of bytes objects at 100k memories) left the process ~140 MB larger for good
        (bench_growth.py --rss-memories), and FAISS's arrays grown piece by piece cost seconds in copies.
        """
        cols = LOAD_COLS if lexical_from_files else DOC_COLS
        packs = self.read_packs(cur)  # whole, before the rows' cursor: it is reused for nothing else then
        cur.execute(f"SELECT {', '.join(cols)} FROM {self.table('docs')} WHERE live = 1 ORDER BY user_id, doc_id")
        pending: list[tuple] = []
        while rows := cur.fetchmany(LOAD_CHUNK):
            rows = self.with_packed(cur, rows, cols, packs)
            for user_id, group in itertools.groupby(rows, key=operator.itemgetter(0)):
                part = list(group)
                if lexical_from_files:
                    u = mem.users.get(user_id)
                    if u is None or any(r[1] not in u.lexical for r in part):
                        return False
                if pending and pending[0][0] != user_id:
                    self._add_rows(mem, pending[0][0], pending, cols, lexical=not lexical_from_files)
                    pending = []
                pending.extend(part)
        if pending:
            self._add_rows(mem, pending[0][0], pending, cols, lexical=not lexical_from_files)
        return not lexical_from_files or all(len(u) == len(u.lexical) for u in mem.users.values())

    def _add_rows(self, mem: Memory, user_id: str, part: list[tuple], cols: list[str] = DOC_COLS, *,
                  lexical: bool) -> None:
        """Add one user's live rows (tuples of ``cols``) to ``mem``: vectors into FAISS (main and companion), and
        with ``lexical`` (``cols`` then holds key, text and value) each row's BM25 document."""
        from .lexical import LexicalIndex
        from .vector_store import UserVectorIndex

        at = {c: i for i, c in enumerate(cols)}
        vec, cvec = at["vector"], at["cjk_vector"]
        if mem.dim is None:  # the meta row notes it with the first vector; else the embedder's
            mem.dim = self._dim_of("vector")
        u = mem.users.get(user_id)
        if u is None:
            u = mem.users[user_id] = UserIndex(UserVectorIndex(mem.dim), LexicalIndex())
        u.vectors.add_many([r[1] for r in part], stack_vectors(part, vec, mem.dim))
        cjk = [r for r in part if r[cvec] is not None]
        if cjk:
            cdim = mem.cjk_dim if mem.cjk_dim is not None else self._dim_of("cjk")
            if u.cjk is None:
                u.cjk = UserVectorIndex(cdim)
            u.cjk.add_many([r[1] for r in cjk], stack_vectors(cjk, cvec, cdim))
        if lexical:
            key, text, value = at["key"], at["text"], at["value_json"]
            for r in part:
                u.lexical.add(r[1], lexical_document(r[key], r[text], value_json_of(r[value], r[text])))
