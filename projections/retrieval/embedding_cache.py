"""A persistent cache of text embeddings, so rebuilding the semantic index replays the log without
re-running the model on texts it has already seen.

Key: ``(model_id, sha256(NFC(text)))``. The text itself is NOT stored, only its digest and its vector
(vectors still carry information about the text: :meth:`EmbeddingCache.delete_texts` exists so that erasing
a subject also erases their cached vectors).

What it holds: vectors that are *not* in a live row of the ``vectors`` projection (projections/vectors.py). A vector
a catch-up places in a row is taken out of the cache in the catch-up's ``prepare`` (``put_many(take=...)``), and one
that leaves its row (a supersede to another text, a retraction, a copy dropped at a model switch or an in-place
rebuild) is put back before the projection's transaction commits; so a replay, a rebuild or a switch back to a model
finds every vector it needs in one of the two without running the model, and the store keeps each vector once
(scripts/bench_growth.py ``--footprint``). A failure between the two stores can only cost a model call, never a wrong
vector: the vectors of a text are a function of the text.

Storage: one SQLite database (a file path, or ``":memory:"``), vectors as little-endian float32 bytes.
A ``models`` table pins each ``model_id`` to one dimension; every read checks the blob length against it,
so a truncated or foreign blob raises instead of producing a garbage vector.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import unicodedata
from pathlib import Path
from typing import Iterable, Mapping

from ..lazy import lazy_module

np = lazy_module("numpy")  # loaded on first use: a cold profile or assert never computes with a vector

__all__ = ["EmbeddingCache", "embed_with_cache", "text_key"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS models (
    model_id TEXT PRIMARY KEY,
    dim      INTEGER NOT NULL CHECK (dim > 0)
);
CREATE TABLE IF NOT EXISTS embeddings (
    model_id TEXT    NOT NULL REFERENCES models(model_id),
    text_key BLOB    NOT NULL,         -- sha256 of the NFC text, 32 raw bytes
    vector   BLOB    NOT NULL,         -- dim * 4 bytes, float32 little-endian
    UNIQUE (model_id, text_key)
);
CREATE INDEX IF NOT EXISTS embeddings_by_text ON embeddings(text_key);
"""
# An ordinary rowid table, not WITHOUT ROWID: a WITHOUT ROWID row lives in its key's B-tree, whose local payload on
# a 4 KB page is about 1 KB, so every 1.5 KB vector spilled into an overflow page it mostly left empty: 4.7 KB on
# disk per cached vector, against 2.1 KB now (measured on 10,000 MiniLM-sized rows; scripts/bench_growth.py).
# Caches written before are copied into this layout once, when first opened (_migrate_without_rowid).

#: page size (bytes) of a new cache file (see ``EmbeddingCache._open``)
PAGE_SIZE = 8192

# SQLite's default limit on bound parameters is 32766 (999 before 3.32); stay well below the old one.
_CHUNK = 500
_F32LE = np.dtype("<f4")


def text_key(text: str) -> bytes:
    """32-byte SHA-256 of the UTF-8 encoding of ``text`` after NFC normalisation. NFC makes composed and
    decomposed spellings of the same string (e.g. "é" vs "e\\u0301") share one entry."""
    return hashlib.sha256(unicodedata.normalize("NFC", text).encode("utf-8")).digest()


class EmbeddingCache:
    """SQLite-backed ``(model_id, text) -> float32 vector`` cache.

    Args:
        path: database file (parent directories are created) or ``":memory:"``.

    Thread-safe: one connection guarded by a lock (embedding calls dominate, so contention is moot).
    Usable as a context manager; :meth:`close` releases the file.

    A file that is not a readable database (overwritten, malformed) is deleted and started again empty, with a
    warning on logger ``memledger``: it holds only vectors the model computes again.

    The file is made by the first write, not before: a store whose vectors are all in live rows (nothing superseded,
    one model) has none (an empty cache file is ~48 KB of pages). Until then a read finds nothing, unless another
    process has made the file meanwhile.

    Raises:
        MemledgerError: the file cannot be opened at all (a directory in its place, no permission); the message
            names the path and the fix.
    """

    def __init__(self, path: str | os.PathLike[str] = ":memory:") -> None:
        p = str(path)
        if p != ":memory:":
            try:
                Path(p).parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:  # a file in the way of the directory, no permission
                from ledger.errors import MemledgerError

                raise MemledgerError(f"the embedding cache's directory {Path(p).parent} cannot be made ({exc}): "
                                     "move what is in the way, or fix its permissions.") from exc
        self.path = p
        self._lock = threading.Lock()
        self._dims: dict[str, int] = {}
        self._conn: sqlite3.Connection | None = None
        if p == ":memory:" or Path(p).exists():
            self._start()

    def _ready(self, create: bool = False) -> bool:
        """Whether the database is open, opening it if its file exists (or ``create``). Called under the lock."""
        if self._conn is None and (create or Path(self.path).exists()):
            self._start()
        return self._conn is not None

    def _start(self) -> None:
        p = self.path
        new = p != ":memory:" and not Path(p).exists()
        try:
            self._open()
            if new:  # vectors carry information about their texts: owner-only, as every store file (0600)
                os.chmod(p, 0o600)
        except sqlite3.OperationalError as exc:  # not a file SQLite can open (a directory, no permission), or busy
            from ledger.errors import MemledgerError

            if self._conn is not None:
                self._conn.close()
                self._conn = None

            raise MemledgerError(f"the embedding cache {p} cannot be opened ({exc}). It holds only vectors the "
                                 "model can compute again: fix what is in the way (a directory in its place, "
                                 "permissions), or delete it.") from exc
        except sqlite3.DatabaseError as exc:  # "file is not a database", "database disk image is malformed"
            # Only derived vectors are in it (no text, see the module docstring): start it again rather than leave
            # every write and search failing until someone deletes it (random bytes over the file, say).
            import logging

            self._conn.close()
            for suffix in ("", "-wal", "-shm"):
                Path(p + suffix).unlink(missing_ok=True)
            logging.getLogger("memledger").warning(
                "memledger: the embedding cache %s was unreadable (%s) and was started again empty; texts are "
                "embedded again as they are needed.", p, exc)
            self._open()

    def _open(self) -> None:
        # timeout: several processes (CLI writers, a rebuild) share the cache; wait for a writer like every other
        # store of the ledger does rather than failing with "database is locked" after sqlite3's default 5 s.
        self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=60)
        if self.path != ":memory:":
            # 8 KB pages for a new file (SQLite takes the size only before the first table, and not once in WAL):
            # a cached MiniLM row is ~1.6 KB, and a 4 KB page holds two of them with ~0.8 KB left empty. 10,000
            # rows: 2,202 bytes each on 4 KB pages, 1,793 on 8 KB (16 KB: the same). A file made before keeps its
            # pages (``PRAGMA journal_mode=DELETE; PRAGMA page_size=8192; VACUUM`` converts it, offline).
            self._conn.execute(f"PRAGMA page_size={PAGE_SIZE}")
            # WAL: readers (another process rebuilding) are not blocked by a writer.
            self._conn.execute("PRAGMA journal_mode=WAL")
            # A cache: a commit lost to a power cut is recomputed, never wrong (WAL + NORMAL cannot corrupt the
            # file). FULL fsynced every put, in each remember, which stores its sentence's vector here.
            self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("PRAGMA foreign_keys=ON")
        self._migrate_without_rowid()
        self._conn.executescript(_SCHEMA)

    def _migrate_without_rowid(self) -> None:
        """Copy a cache written in the old WITHOUT ROWID layout into the current one (see ``_SCHEMA``), in one
        transaction; a process opening the same file at the same time waits and then finds it done."""
        def old_layout() -> bool:
            row = self._conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'embeddings'"
                                     ).fetchone()
            return row is not None and "WITHOUT ROWID" in row[0].upper()

        if not old_layout():
            return
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            if old_layout():
                self._conn.execute("DROP INDEX IF EXISTS embeddings_by_text")
                self._conn.execute("ALTER TABLE embeddings RENAME TO embeddings_without_rowid")
                # executescript would commit this transaction first: run the statements one by one
                for statement in filter(str.strip, _SCHEMA.split(";")):
                    self._conn.execute(statement)
                self._conn.execute("INSERT INTO embeddings (model_id, text_key, vector) "
                                   "SELECT model_id, text_key, vector FROM embeddings_without_rowid")
                self._conn.execute("DROP TABLE embeddings_without_rowid")
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise

    # --- helpers ------------------------------------------------------------------------------------------
    def _model_dim(self, model_id: str) -> int | None:
        dim = self._dims.get(model_id)
        if dim is None:
            if not self._ready():
                return None
            row = self._conn.execute("SELECT dim FROM models WHERE model_id = ?", (model_id,)).fetchone()
            if row is None:
                return None
            dim = self._dims[model_id] = int(row[0])
        return dim

    # --- API ----------------------------------------------------------------------------------------------
    def dim(self, model_id: str) -> int | None:
        """Dimension pinned for ``model_id``, or None if nothing was stored for it yet."""
        with self._lock:
            return self._model_dim(model_id)

    def get_many(self, model_id: str, texts: Iterable[str]) -> dict[str, np.ndarray]:
        """Look up cached vectors.

        Args:
            model_id: the embedder's ``model_id``.
            texts: texts to look up (duplicates allowed).

        Returns:
            ``{text: vector}`` for the texts that are cached (misses are simply absent), keyed by the text
            exactly as given; each vector is a fresh writable float32 ``(dim,)`` array.

        Raises:
            ValueError: if a stored blob's length is not ``dim * 4`` bytes for the model's pinned dim
                (a corrupted or foreign cache; delete the file to rebuild it).
        """
        texts = list(texts)
        if not texts:
            return {}
        by_key: dict[bytes, list[str]] = {}
        for t in texts:
            by_key.setdefault(text_key(t), []).append(t)
        keys = list(by_key)
        out: dict[str, np.ndarray] = {}
        with self._lock:
            dim = self._model_dim(model_id)
            if dim is None or not self._ready():
                return {}
            for i in range(0, len(keys), _CHUNK):
                chunk = keys[i : i + _CHUNK]
                marks = ",".join("?" * len(chunk))
                rows = self._conn.execute(
                    f"SELECT text_key, vector FROM embeddings WHERE model_id = ? AND text_key IN ({marks})",
                    (model_id, *chunk),
                ).fetchall()
                for key, blob in rows:
                    if len(blob) != dim * 4:
                        raise ValueError(
                            f"embedding cache corrupt: model {model_id!r} is {dim}-d but a stored vector has "
                            f"{len(blob)} bytes ({len(blob) / 4:g} floats)"
                        )
                    vec = np.frombuffer(blob, dtype=_F32LE).astype(np.float32)  # astype copies: writable
                    for t in by_key[bytes(key)]:
                        out[t] = vec
        return out

    def put_many(self, model_id: str, vectors: Mapping[str, np.ndarray], take: Iterable[str] = ()) -> int:
        """Store vectors (insert or overwrite) and delete the vectors of ``take``, in one transaction.

        Args:
            model_id: the embedder's ``model_id``.
            vectors: ``{text: vector}``, each vector 1-d (or ``(1, dim)``) of one common dim.
            take: texts whose vectors of ``model_id`` leave the cache (a text also in ``vectors`` is stored). The
                ``vectors`` projection hands a vector over this way when its row holds it (see the module doc).

        Returns:
            Number of rows written.

        Raises:
            ValueError: if vectors differ in dim among themselves or from the dim already pinned for
                ``model_id``, or contain NaN/inf.
        """
        take_keys = list(dict.fromkeys(text_key(t) for t in take if t not in vectors))
        if not vectors and not take_keys:
            return 0
        rows: list[tuple[str, bytes, bytes]] = []
        dim_seen: int | None = None
        for text, vec in vectors.items():
            arr = np.asarray(vec, dtype=np.float32)
            if arr.ndim == 2 and arr.shape[0] == 1:
                arr = arr[0]
            if arr.ndim != 1 or arr.shape[0] == 0:
                raise ValueError(f"vector for a text must be 1-d and non-empty, got shape {arr.shape}")
            if dim_seen is None:
                dim_seen = arr.shape[0]
            elif arr.shape[0] != dim_seen:
                raise ValueError(f"vectors of different dims in one put_many: {dim_seen} and {arr.shape[0]}")
            if not np.isfinite(arr).all():
                raise ValueError("refusing to cache a vector with NaN or inf")
            rows.append((model_id, text_key(text), arr.astype(_F32LE).tobytes()))
        with self._lock:
            if not self._ready(create=bool(rows)):
                return 0  # only texts to take out of a cache that has no file: nothing to do
            pinned = self._model_dim(model_id)
            if dim_seen is not None and pinned is not None and pinned != dim_seen:
                raise ValueError(
                    f"model {model_id!r} is pinned to dim {pinned} in this cache, got vectors of dim {dim_seen}"
                )
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                for i in range(0, len(take_keys), _CHUNK):
                    chunk = take_keys[i : i + _CHUNK]
                    self._conn.execute(f"DELETE FROM embeddings WHERE model_id = ? AND text_key IN "
                                       f"({','.join('?' * len(chunk))})", (model_id, *chunk))
                if pinned is None and dim_seen is not None:
                    # Another connection (thread or process) may have pinned the model since the check above:
                    # insert-if-absent and re-check inside the write lock.
                    self._conn.execute("INSERT INTO models(model_id, dim) VALUES (?, ?) ON CONFLICT (model_id) "
                                       "DO NOTHING", (model_id, dim_seen))
                    row = self._conn.execute("SELECT dim FROM models WHERE model_id = ?", (model_id,)).fetchone()
                    if int(row[0]) != dim_seen:
                        raise ValueError(f"model {model_id!r} is pinned to dim {row[0]} in this cache, "
                                         f"got vectors of dim {dim_seen}")
                self._conn.executemany(
                    "INSERT OR REPLACE INTO embeddings(model_id, text_key, vector) VALUES (?, ?, ?)", rows
                )
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                self._dims.pop(model_id, None)
                raise
            if dim_seen is not None:
                self._dims[model_id] = dim_seen
        return len(rows)

    def delete_texts(self, texts: Iterable[str], model_id: str | None = None) -> int:
        """Delete the cached vectors of ``texts`` (for every model, or only ``model_id``). Used by subject
        erasure: afterwards no vector derived from those texts remains here.

        Returns:
            Number of rows deleted.
        """
        keys = list(dict.fromkeys(text_key(t) for t in texts))
        deleted = 0
        with self._lock:
            if not self._ready():
                return 0
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                for i in range(0, len(keys), _CHUNK):
                    chunk = keys[i : i + _CHUNK]
                    marks = ",".join("?" * len(chunk))
                    if model_id is None:
                        cur = self._conn.execute(f"DELETE FROM embeddings WHERE text_key IN ({marks})", chunk)
                    else:
                        cur = self._conn.execute(
                            f"DELETE FROM embeddings WHERE model_id = ? AND text_key IN ({marks})",
                            (model_id, *chunk),
                        )
                    deleted += cur.rowcount
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
        return deleted

    def count(self, model_id: str | None = None) -> int:
        """Number of cached vectors (for one model, or in total)."""
        with self._lock:
            if not self._ready():
                return 0
            if model_id is None:
                return int(self._conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0])
            return int(
                self._conn.execute("SELECT COUNT(*) FROM embeddings WHERE model_id = ?", (model_id,)).fetchone()[0]
            )

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __enter__(self) -> "EmbeddingCache":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: a call that must embed at least this many texts says so on logger ``memledger`` (seconds of work with MiniLM)
NOTICE_MISSES = 500


def embed_with_cache(embedder, texts: list[str], cache: EmbeddingCache, store: bool = True) -> np.ndarray:
    """Embed ``texts`` as passages, running the model only on texts the cache does not hold.

    Misses are de-duplicated (by NFC text) and embedded in one ``embedder.embed_passages`` call, then
    stored, so a second call with the same texts runs the model zero times.

    Args:
        embedder: any :class:`projections.retrieval.embedders.Embedder`.
        texts: list of str.
        cache: the cache to read and fill.
        store: False leaves the misses out of the cache (the caller keeps them elsewhere: the ``vectors``
            projection's rows).

    Returns:
        float32 ``(len(texts), embedder.dim)``, rows in the order of ``texts``.

    Raises:
        ValueError: if the cache holds vectors of another dim for ``embedder.model_id``, or the embedder
            returns a wrong shape.
    """
    texts = list(texts)
    dim = int(embedder.dim)
    pinned = cache.dim(embedder.model_id)
    if pinned is not None and pinned != dim:
        raise ValueError(f"cache has {embedder.model_id!r} as {pinned}-d but the embedder says {dim}-d")
    out = np.empty((len(texts), dim), dtype=np.float32)
    if not texts:
        return out
    hits = cache.get_many(embedder.model_id, texts)
    # unique misses by NFC form: "é" composed and decomposed are embedded once
    misses: dict[str, str] = {}
    for t in texts:
        if t not in hits:
            misses.setdefault(unicodedata.normalize("NFC", t), t)
    if misses:
        miss_texts = list(misses)
        if len(miss_texts) >= NOTICE_MISSES:
            import logging

            logging.getLogger("memledger").warning(
                "memledger: embedding %d texts with %s (once per text and model; later calls find them stored)",
                len(miss_texts), embedder.model_id)
        vecs = np.asarray(embedder.embed_passages(miss_texts), dtype=np.float32)
        if vecs.shape != (len(miss_texts), dim):
            raise ValueError(f"embedder returned shape {vecs.shape}, expected {(len(miss_texts), dim)}")
        new = dict(zip(miss_texts, vecs))
        if store:
            cache.put_many(embedder.model_id, new)
    else:
        new = {}
    for i, t in enumerate(texts):
        v = hits.get(t)
        out[i] = v if v is not None else new[unicodedata.normalize("NFC", t)]
    return out
