"""Exact inner-product vector index for ONE user, on FAISS.

Why exact (a flat scan) rather than an ANN index: one user's memories number in the hundreds to low
thousands; a brute-force scan at that size takes microseconds, needs no training, gives exact results and
supports real deletion. ``IndexIDMap2`` adds our own int64 ids and ``reconstruct(id)``.

Why float16 (FAISS's ``IndexScalarQuantizer`` with ``QT_fp16``) rather than float32 (``IndexFlatIP``): the vectors
are stored as float16 (``documents.STORED_DTYPE``, the users' packs), so holding them as float16 loses nothing
against what a reload would read, and it halves the index (a 100,000-memory user's 384-d vectors: 77 MB, not 154),
fills it from a pack with a plain copy, and halves what a search scans (FAISS decodes float16 with SIMD; measured
~1.7x faster than the float32 scan at 100,000 vectors). A vector added as float32 is rounded to float16 first, so an
index built in the process and one read back from its packs hold the same vectors. Only a vector with a component
beyond float16's range (+-65504: an embedder that does not normalise; stored as float32 then) makes the index
float32 (``IndexFlatIP``), as it was stored.

Per-user by construction: the caller keeps ``dict[user_id, UserVectorIndex]``; nothing here can return a
document of another user because no other user's vectors are in the index.

Scores are inner products; with normalised embedders (all of :mod:`projections.retrieval.embedders`) they are
cosine similarities in [-1, 1].
"""

from __future__ import annotations

import itertools
import threading
from typing import Sequence

import faiss
import numpy as np

__all__ = ["UserVectorIndex"]

#: float16's largest finite value: a vector with a larger component keeps the index float32
F16_MAX = 65504.0

# faiss' OpenMP thread count is process-global; searches switch it to 1 and back under this lock so that
# two threads never interleave their set/restore.
_OMP_LOCK = threading.Lock()


def _as_row(vec: object, dim: int, what: str = "vector") -> np.ndarray:
    arr = np.asarray(vec, dtype=np.float32)
    if arr.ndim == 2 and arr.shape[0] == 1:
        arr = arr[0]
    if arr.ndim != 1:
        raise ValueError(f"{what} must be 1-d (or shape (1, dim)), got shape {arr.shape}")
    if arr.shape[0] != dim:
        raise ValueError(f"{what} has dim {arr.shape[0]} but this index has dim {dim}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{what} contains NaN or inf")
    return np.ascontiguousarray(arr.reshape(1, dim))


class UserVectorIndex:
    """One user's vectors, keyed by string ``doc_id``.

    Args:
        dim: vector dimension, >= 1 (must equal the embedder's ``dim``).

    String ids are mapped to sequential int64 FAISS ids internally (never reused within an index, so a
    stale int id can never point at a new document). Not thread-safe for concurrent mutation; concurrent
    searches are fine.

    Raises:
        ValueError: if ``dim`` < 1.
    """

    def __init__(self, dim: int) -> None:
        if not isinstance(dim, (int, np.integer)) or int(dim) < 1:
            raise ValueError(f"dim must be an int >= 1, got {dim!r}")
        self.dim = int(dim)
        self._wide = False  # float32 (IndexFlatIP) once a vector beyond float16's range came; float16 until then
        self._index = self._new_index()
        self._to_int: dict[str, int] = {}
        # FAISS id -> doc id, None once removed: ids are 0 up and never reused, so a list (8 bytes an entry, not a
        # dict's ~50 and an int object's 32: ~7 MB less at 100,000 memories)
        self._to_str: list[str | None] = []
        # whether FAISS's reverse map (id -> position, IndexIDMap2's) is built: an index adopted from a load has ids
        # 0 up in storage order, so until it changes the map is the identity and is not built (~15-40 ms at 100,000
        # vectors on the first search); built before the first change
        self._rev = True

    def _new_index(self) -> faiss.IndexIDMap2:
        if self._wide:
            return faiss.IndexIDMap2(faiss.IndexFlatIP(self.dim))
        return faiss.IndexIDMap2(faiss.IndexScalarQuantizer(self.dim, faiss.ScalarQuantizer.QT_fp16,
                                                             faiss.METRIC_INNER_PRODUCT))

    @property
    def itemsize(self) -> int:
        """Bytes per vector component the index holds: 2 (float16, the stored form), or 4 (float32) once a vector
        with a component beyond float16's range was added."""
        return 4 if self._wide else 2

    def _widen(self) -> None:
        """Hold every vector as float32 from now on (a vector beyond float16's range is coming): the same ids, the
        same (float16-exact) vectors, in a float32 flat index."""
        n = len(self)
        ids = faiss.vector_to_array(self._index.id_map)[:n]
        mat = self._index.index.reconstruct_n(0, n) if n else None
        self._wide = True
        self._index = self._new_index()
        if n:
            self._index.add_with_ids(mat, ids)

    # --- mutation -----------------------------------------------------------------------------------------
    def add(self, doc_id: str, vector: object) -> None:
        """Add (or replace) the vector of ``doc_id``.

        Args:
            doc_id: caller's string id (e.g. a fact version id).
            vector: float array of shape ``(dim,)`` or ``(1, dim)``; held rounded to float16 (as it is stored),
                not renormalised.

        Raises:
            TypeError: if ``doc_id`` is not a str.
            ValueError: if the vector's dim differs from the index's (the message names both), or it has
                NaN/inf.
        """
        self.add_many([doc_id], np.asarray(vector, dtype=np.float32).reshape(1, -1))

    def add_many(self, doc_ids: Sequence[str], vectors: object) -> None:
        """Add (or replace) several vectors in one FAISS call.

        Args:
            doc_ids: n distinct string ids.
            vectors: float array ``(n, dim)``.

        Raises:
            TypeError / ValueError: as :meth:`add`; also if ids repeat or the row count differs from n.
            Nothing is changed when an error is raised.
        """
        doc_ids = list(doc_ids)
        for d in doc_ids:
            if not isinstance(d, str):
                raise TypeError(f"doc_id must be str, got {type(d).__name__}")
        if len(set(doc_ids)) != len(doc_ids):
            raise ValueError("doc_ids repeat within one add_many call")
        mat = np.asarray(vectors, dtype=np.float32)
        if mat.ndim != 2:
            raise ValueError(f"vectors must be 2-d (n, dim), got shape {mat.shape}")
        if mat.shape[1] != self.dim:
            raise ValueError(f"vectors have dim {mat.shape[1]} but this index has dim {self.dim}")
        if mat.shape[0] != len(doc_ids):
            raise ValueError(f"{len(doc_ids)} doc_ids but {mat.shape[0]} vectors")
        if not np.isfinite(mat).all():
            raise ValueError("vectors contain NaN or inf")
        if not doc_ids:
            return
        # replace = remove then add: FAISS has no in-place update
        for d in doc_ids:
            if d in self._to_int:
                self.remove(d)
        if not self._wide:
            if float(np.abs(mat).max()) > F16_MAX:
                self._widen()
            else:  # rounded as the stored float16 is (numpy, nearest even): FAISS's encoding of it is then exact
                mat = mat.astype("<f2").astype(np.float32)
        ids = np.arange(len(self._to_str), len(self._to_str) + len(doc_ids), dtype=np.int64)
        self._rev_map()
        self._index.add_with_ids(np.ascontiguousarray(mat), ids)
        for d, i in zip(doc_ids, ids.tolist()):
            self._to_int[d] = i
        self._to_str.extend(doc_ids)

    @classmethod
    def from_matrix(cls, dim: int, doc_ids: list[str], vectors: np.ndarray) -> UserVectorIndex:
        """An index of ``doc_ids`` and their float32 ``(n, dim)`` ``vectors`` as :meth:`export` gave them (an index's
        own vectors, read back from its stored form): one FAISS call, without :meth:`add_many`'s per-vector checks.

        Raises:
            ValueError: ids repeat, or the matrix is not ``(len(doc_ids), dim)``."""
        return cls.from_blocks(dim, [(doc_ids, vectors)])

    @classmethod
    def from_blocks(cls, dim: int, blocks: Sequence[tuple[list[str], np.ndarray]]) -> UserVectorIndex:
        """An index of several ``(doc_ids, (n, dim) matrix)`` blocks in their order, the same as :meth:`from_matrix`
        of their concatenation (the same FAISS ids, 0 up, the same vectors), built without an intermediate: FAISS's
        storage is sized once for every vector and each block (float16 as stored in a pack: a plain copy; or
        float32: rounded to float16) is written straight into it. A 100,000-memory user's 384-d vectors are thus one
        77 MB array, never two or three.

        Raises:
            ValueError: ids repeat, or a matrix is not ``(len(its doc_ids), dim)``."""
        ids = list(itertools.chain.from_iterable(docs for docs, _ in blocks))
        if any(np.shape(m) != (len(docs), int(dim)) for docs, m in blocks):
            raise ValueError("doc ids and vectors that no index exported")
        # a float32 block beyond float16's range (an embedder that does not normalise) keeps the index float32
        wide = any(len(docs) and np.asarray(m).dtype != np.float16 and float(np.abs(m).max()) > F16_MAX
                   for docs, m in blocks)
        index, rows = cls.reserve(dim, len(ids), wide=wide)
        at = 0
        for docs, m in blocks:
            np.copyto(rows[at:at + len(docs)], m)  # in place: a plain copy of float16, or a rounding to it
            at += len(docs)
        index.adopt(ids)
        return index

    @classmethod
    def reserve(cls, dim: int, capacity: int, *, wide: bool = False) -> tuple[UserVectorIndex, np.ndarray]:
        """An empty index whose FAISS storage is sized for ``capacity`` vectors, and a writable ``(capacity, dim)``
        view of that storage (float16; float32 when ``wide``): write the vectors into its first rows (a pack's
        matrix opened straight into it: no copy between), then :meth:`adopt` their ids. The view is valid until
        then only.

        Raises:
            ValueError: ``dim`` < 1 or ``capacity`` < 0."""
        if capacity < 0:
            raise ValueError(f"capacity must be >= 0, got {capacity}")
        index = cls(dim)
        if wide:
            index._wide = True
            index._index = index._new_index()
        store = faiss.downcast_index(index._index.index)
        width = index.itemsize
        store.codes.resize(capacity * index.dim * width)  # the index's rows, sized once
        if not capacity:
            return index, np.empty((0, index.dim), dtype="<f4" if wide else "<f2")
        rows = (faiss.rev_swig_ptr(store.codes.data(), capacity * index.dim * width)
                .view("<f4" if wide else "<f2").reshape(capacity, index.dim))
        return index, rows

    def adopt(self, doc_ids: list[str]) -> None:
        """Take the first ``len(doc_ids)`` rows of the storage :meth:`reserve` sized as these documents' vectors,
        FAISS ids 0 up in this order (the rest of the reserved rows are let go).

        Raises:
            ValueError: ids repeat, the index already holds vectors, or more ids than reserved rows."""
        n = len(doc_ids)
        store = faiss.downcast_index(self._index.index)
        to_int = dict(zip(doc_ids, range(n)))  # also the check that no id repeats
        if len(to_int) != n or len(self) or n * self.dim * self.itemsize > store.codes.size():
            raise ValueError("doc ids that do not fit the reserved vectors")
        slack = store.codes.size() - n * self.dim * self.itemsize
        if slack > max(1 << 20, n * self.dim * self.itemsize // 16):
            # many reserved rows unused (stale entries left out): a tight copy, so the unused ones are handed back
            tight, rows = type(self).reserve(self.dim, n, wide=self._wide)
            if n:
                np.copyto(rows, faiss.rev_swig_ptr(store.codes.data(), n * self.dim * self.itemsize)
                          .view(rows.dtype).reshape(n, self.dim))
            self._index = tight._index
            store = faiss.downcast_index(self._index.index)
        store.codes.resize(n * self.dim * self.itemsize)  # smaller: the rows stay where they were written
        if n:
            store.ntotal = n
            faiss.copy_array_to_vector(np.arange(n, dtype=np.int64), self._index.id_map)
            self._index.ntotal = n
            self._rev = False  # ids 0 up in storage order: the reverse map is built when first needed
        self._to_int = to_int
        self._to_str = list(doc_ids)

    def _rev_map(self) -> None:
        """Build FAISS's reverse map if a load left it out (before the first add or removal)."""
        if not self._rev:
            self._index.construct_rev_map()
            self._rev = True

    def remove(self, doc_id: str) -> bool:
        """Remove ``doc_id``'s vector from the FAISS index itself (not just from the id map), so it can
        never be returned again and ``ntotal`` shrinks. Returns True if it was present, else False."""
        i = self._to_int.pop(doc_id, None)
        if i is None:
            return False
        self._to_str[i] = None
        self._rev_map()
        n = self._index.remove_ids(np.array([i], dtype=np.int64))
        if n != 1:  # pragma: no cover - would mean the map and FAISS disagree
            raise RuntimeError(f"FAISS removed {n} vectors for doc_id {doc_id!r}, expected 1")
        return True

    # --- queries ------------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return int(self._index.ntotal)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._to_int

    def doc_ids(self) -> list[str]:
        """Indexed doc ids in insertion order."""
        return list(self._to_int)

    def export(self) -> tuple[list[str], np.ndarray]:
        """Every doc id and its held vector (float32 values), as ``(doc_ids, (n, dim) matrix)`` in the index's order:
        :meth:`add_many` of them builds the same index."""
        n = len(self)
        ids = faiss.vector_to_array(self._index.id_map)[:n].tolist()
        mat = self._index.index.reconstruct_n(0, n) if n else np.zeros((0, self.dim), dtype=np.float32)
        return [self._to_str[i] for i in ids], mat

    def get_vector(self, doc_id: str) -> np.ndarray:
        """The held vector of ``doc_id`` (float16-exact unless :attr:`itemsize` is 4), as float32
        ``(dim,)``. Raises KeyError if absent."""
        if not self._rev:  # FAISS ids are storage positions still
            return self._index.index.reconstruct(self._to_int[doc_id])
        return self._index.reconstruct(self._to_int[doc_id])

    def similarities(self, vector: object, doc_ids: Sequence[str]) -> np.ndarray:
        """Inner products of ``vector`` with the stored vectors of ``doc_ids`` (float32 ``(len(doc_ids),)``), in one
        FAISS call: the cosine of candidates another ranking found (projections/retrieval/ranking.py). Raises KeyError if a
        doc id is absent, ValueError on a dim mismatch."""
        q = _as_row(vector, self.dim, "query vector")[0]
        if not doc_ids:
            return np.zeros(0, dtype=np.float32)
        keys = np.fromiter((self._to_int[d] for d in doc_ids), dtype=np.int64, count=len(doc_ids))
        return (self._index if self._rev else self._index.index).reconstruct_batch(keys) @ q

    def search(self, vector: object, k: int = 10) -> list[tuple[str, float]]:
        """Exact top-``k`` by inner product with the held (float16) vectors.

        Args:
            vector: query float array ``(dim,)`` or ``(1, dim)``.
            k: maximum number of results, >= 0.

        Returns:
            Up to ``min(k, len(self))`` ``(doc_id, score)`` pairs, score descending.

        Raises:
            ValueError: on a dim mismatch (names both dims), NaN/inf, or negative ``k``.
        """
        q = _as_row(vector, self.dim, "query vector")
        if k < 0:
            raise ValueError(f"k must be >= 0, got {k}")
        k = min(int(k), len(self))
        if k == 0:
            return []
        # One query over a flat index: OpenMP start-up dominates, and one thread measured about twice
        # as fast as two on this hardware. The setting is process-global, so restore it afterwards for
        # callers doing large batched FAISS work.
        with _OMP_LOCK:
            prev = faiss.omp_get_max_threads()
            faiss.omp_set_num_threads(1)
            try:
                scores, ids = self._index.search(q, k)
            finally:
                faiss.omp_set_num_threads(prev)
        out = []
        for s, i in zip(scores[0].tolist(), ids[0].tolist()):
            if i < 0:  # FAISS pads with -1 when fewer than k vectors exist
                continue
            out.append((self._to_str[i], float(s)))
        return out
