"""The embedding work of the ``vectors`` projection: embedding passages and queries through the (model id, text hash)
embedding cache, warming a batch's vectors before the catch-up transaction opens (:meth:`EmbeddingWork.warm`) or
on a worker thread while an ingest records (:meth:`EmbeddingWork.warm_in_background`), and finding a vector for
every text a batch makes current while keeping each vector in one place, a live row or the cache
(:meth:`EmbeddingWork.prepare`).
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from ledger.text import has_cjk

from ..base import LogEvent
from ..db import Cursor
from ..lazy import lazy_module
from .documents import (NO_COMPANION, as_f32, batch_outcome, current_texts, decode_vector, encode_vector,
                        fact_doc_id, forgotten_texts)
from .mirror import LOAD_CHUNK

np = lazy_module("numpy")

#: texts whose vectors :meth:`VectorsProjection.warm` hands to ``prepare`` in memory at most (~6 MB of MiniLM vectors)
WARM_MAX = 4096


class EmbeddingWork:
    """The embedding half of :class:`projections.vectors.VectorsProjection` (a mixin: it reads the projection's
    embedders, tables and locks)."""

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

    def warm(self, events: list[LogEvent], db: Any = None) -> None:
        """Embed the batch's new texts *before* the catch-up transaction opens, so ``prepare`` inside it finds them.

        Called by replay/catchup.py and replay/bulk.py outside the exclusive transaction: loading the model and
        embedding take seconds, and holding the projections' write lock meanwhile made concurrent writers fail with
        "database is locked" (found by the new-user concurrency run). With ``db`` (the
        :class:`~projections.db.ProjectionDB`), texts a live row can lend (:meth:`prepare`) are left out. The
        vectors are handed to ``prepare`` in memory, up to :data:`WARM_MAX` waiting texts; past that they go to
        the embedding cache (a rebuild's large chunks), except for a transient copy, whose ``prepare`` embeds them.
        """
        texts = current_texts(events)
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
                _, lent, lent_cjk = self._lenders(cur, list(batch_outcome(events)[0]))
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
                # (FAISS's import, for one), on this otherwise idle thread, and whatever the caller adds.
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
        transaction per model (see projections/retrieval/embedding_cache.py): the vectors of texts the batch makes live leave
        the cache (their rows hold them), and those of texts that leave their rows (a supersede to another text, a
        retraction) or that were current only inside the batch go into it. A forgotten fact's vectors never go back
        (``forget`` deletes them), and a ``transient`` copy changes nothing there.
        """
        self.check_model(cur)  # never write this object's vectors into a table built with another model
        unique = current_texts(events)
        self._prepared = {}
        self._prepared_cjk = {}
        self._stale = {}  # counted for this batch only (a batch rolled back left nothing to count)
        self._batch = {}  # the batch's vectors, held by apply for its end (packs.py)
        final, forgotten = batch_outcome(events)
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
        self.note_unpacked(own)  # the batch rewrites these rows: a packed one's pack entry goes stale
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
        banned = forgotten_texts(events, forgotten) if forgotten else set()
        spill: dict[str, Any] = {}
        spill_cjk: dict[str, Any] = {}
        for doc, (text, vec, cvec, _) in own.items():  # vectors leaving their rows
            if final[doc] != text and doc not in forgotten and text not in live:
                spill[text] = as_f32(vec, int(self.embedder.dim))
                if cvec is not None and companion is not None:
                    spill_cjk[text] = as_f32(cvec, int(companion.dim))
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
                v = as_f32(lent[t], dim)  # the lender's model is this embedder's (_lenders)
            out[i] = v
        return out, set(hits)

    def _live_rows(self, cur: Cursor, copy: Any, docs: list[tuple[str, str]]
                   ) -> dict[tuple[str, str], tuple[str, Any, Any, bool]]:
        """``{(user_id, doc_id): (text, vector, cjk vector or None, packed)}`` of the live rows of ``copy`` (this
        projection or another copy of it) among ``docs`` (by the primary key, in pieces); a packed row's vectors
        come from its user's pack (projections/retrieval/packs.py)."""
        by_user: dict[str, list[str]] = {}
        for user_id, doc_id in docs:
            by_user.setdefault(user_id, []).append(doc_id)
        out: dict[tuple[str, str], tuple[str, Any, Any, bool]] = {}
        cols = ["user_id", "doc_id", "text", "vector", "cjk_vector"]
        for user_id, ids in by_user.items():
            rows: list[tuple] = []
            for i in range(0, len(ids), 500):
                chunk = ids[i:i + 500]
                cur.execute(f"SELECT {', '.join(cols)} FROM {copy.table('docs')} WHERE user_id = ? AND doc_id IN "
                            f"({', '.join('?' * len(chunk))}) AND live = 1", (user_id, *chunk))
                rows.extend(r for r in cur.fetchall() if r[2] is not None)
            packed = {r[1] for r in rows if r[3] is None}
            for _, doc_id, text, vec, cvec in copy.with_packed(cur, rows, cols):
                out[(user_id, doc_id)] = (text, vec, cvec, doc_id in packed)
        return out

    def _lenders(self, cur: Cursor, docs: list[tuple[str, str]]
                 ) -> tuple[dict[tuple[str, str], tuple[str, Any, Any]], dict[str, Any], dict[str, Any]]:
        """This copy's live rows among ``docs``, and ``{text: vector bytes}`` of the main and companion models that
        those rows and the origin copy's (when it still exists and was built with the same models) can lend."""
        own = self._live_rows(cur, self, docs)
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
                for text, vec, cvec, _ in self._live_rows(cur, origin, docs).values():
                    if same_main:
                        lent.setdefault(text, vec)
                    if same_cjk and cvec is not None:
                        lent_cjk.setdefault(text, cvec)
        for text, vec, cvec, _ in rows:
            lent[text] = vec
            if cvec is not None:
                lent_cjk[text] = cvec
        return own, lent, lent_cjk

    def spill_live(self, cur: Cursor, successor: Any = None) -> int:
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
        packs = self.read_packs(cur)  # whole, before the rows' cursor: it is reused for nothing else then
        cols = ["user_id", "doc_id", "text", "vector", "cjk_vector"]
        cur.execute(f"SELECT {', '.join(cols)} FROM {self.table('docs')} WHERE live = 1 AND text IS NOT NULL")
        cache = self._embedding_cache()
        stored = 0
        while True:
            rows = cur.fetchmany(LOAD_CHUNK)
            if not rows:
                return stored
            rows = [r[2:] for r in self.with_packed(cur, rows, cols, packs)]
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
        rows = self._live_rows(cur, self, [(user_id, d) for d, _ in docs])
        lent = {}
        for text, vec, cvec, _ in rows.values():
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
            out[i] = as_f32(lent[t], dim)
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
