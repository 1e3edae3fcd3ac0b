"""A CJK question over memories written in English: the multilingual companion's vectors of a user's documents
*without* CJK text (the main, English-only model reads a Chinese question as unknown tokens, so it cannot judge
them). They are made at the user's first CJK query, never at write time (an English-only user pays nothing), and
kept where vectors that belong to no table row live: the embedding cache (keyed by model id and text hash; ``forget``
and erasure delete a text's vectors there for every model). A reload, another process or a user evicted and read
again finds them there without running the model. In memory they are the user's ``cross`` index
(projections/retrieval/mirror.py), dropped for a document when its row changes.

Cost, measured with multilingual-e5-small at load about 3: about 16 ms a memory, once. A CJK query embeds at most
:data:`CROSS_SYNC_DOCS` of the newest missing memories itself and hands the rest to one worker thread per user, which
fills the cache; they join at a later CJK query (until then those memories are judged by their words). A user with
more than :data:`CROSS_MAX_DOCS` memories without CJK text gets none: their CJK questions reach English memories by
words only, as before.
"""

from __future__ import annotations

import threading
from typing import Any

from ledger.text import has_cjk

#: the most documents without CJK text a user may have for their CJK queries to ask the companion about them
#: (10,000 memories: ~15 MB of float32 vectors in memory, ~3 minutes of one core to embed once)
CROSS_MAX_DOCS = 10_000
#: how many of the missing companion vectors a CJK query computes before it answers (the newest first): about 0.5 s
#: at load 3, 1.5 s at load 5 (scripts/bench_crosslang.py)
CROSS_SYNC_DOCS = 32
#: texts the worker embeds per model call and cache write (a process that exits mid-way loses at most one chunk)
CROSS_CHUNK = 128


class CrossLanguage:
    """The cross-language half of :class:`projections.vectors.VectorsProjection` (a mixin: it reads the projection's
    companion embedder, embedding cache and table rows)."""

    #: per projection: how many missing vectors a query embeds itself (tests lower it to exercise the worker)
    cross_sync_docs: int = CROSS_SYNC_DOCS
    cross_max_docs: int = CROSS_MAX_DOCS

    def cross_docs(self, u: Any) -> int:
        """How many of a loaded user's documents hold no CJK text (the main index's minus the companion's), or 0
        when the cross-language path is off, there is no companion, or the user has more than
        :attr:`cross_max_docs` of them."""
        if u is None or not self.cross_language or self.cjk_embedder is None:
            return 0
        n = len(u.vectors) - (len(u.cjk) if u.cjk is not None else 0)
        return n if n <= self.cross_max_docs else 0

    def cross_pending(self, user_id: str, u: Any) -> list[str]:
        """The doc ids of ``u`` (a loaded user, read under the mirror's lock) without CJK text whose companion
        vector its ``cross`` index does not hold; empty while a worker is filling this user's vectors (the next
        query after it ends picks them up from the cache) or when :meth:`cross_docs` is 0."""
        if not self.cross_docs(u) or user_id in self._cross_workers():
            return []
        cjk, cross = u.cjk, u.cross
        if cross is not None and len(cross) + (len(cjk) if cjk is not None else 0) >= len(u.vectors):
            return []
        return [d for d in u.vectors.doc_ids() if (cjk is None or d not in cjk) and (cross is None or d not in cross)]

    def cross_vectors(self, user_id: str, rows: dict[str, dict[str, Any]]) -> dict[str, tuple[str, Any]]:
        """``{doc_id: (text, float32 companion vector)}`` for ``rows`` (``{doc_id: row}`` with ``text`` and
        ``position``, read in a snapshot): every vector the embedding cache holds, and the model's for at most
        :attr:`cross_sync_docs` of the newest others. The rest go to a worker thread that stores them in the cache.
        Called outside any transaction. A row whose text holds CJK (written since the index was read) is skipped."""
        from .embedding_cache import embed_with_cache

        companion = self.cjk_embedder
        todo = {d: r["text"] for d, r in rows.items() if isinstance(r.get("text"), str) and not has_cjk(r["text"])}
        if companion is None or not todo:
            return {}
        cache = self._embedding_cache()
        model = str(companion.model_id)
        hits = cache.get_many(model, list(dict.fromkeys(todo.values())))
        out = {d: (t, hits[t]) for d, t in todo.items() if t in hits}
        missing = sorted((d for d in todo if d not in out), key=lambda d: -(rows[d].get("position") or 0))
        now, later = missing[:self.cross_sync_docs], missing[self.cross_sync_docs:]
        if now:
            texts = [todo[d] for d in now]
            for d, t, v in zip(now, texts, embed_with_cache(companion, texts, cache)):
                out[d] = (t, v)
        if later:
            self._start_cross_worker(user_id, list(dict.fromkeys(todo[d] for d in later)))
        return out

    def add_cross(self, cur: Any, user_id: str, u: Any, found: dict[str, tuple[str, Any]]) -> int:
        """Add ``found`` (from :meth:`cross_vectors`) to ``u``'s ``cross`` index, under the mirror's lock, for the
        documents whose live row in this snapshot still holds the same text (one read); returns how many."""
        from .vector_store import UserVectorIndex

        if not found:
            return 0
        rows = self.doc_rows(cur, user_id, list(found))
        keep = [d for d, (t, _) in found.items() if d in rows and rows[d]["text"] == t and d in u.vectors
                and (u.cjk is None or d not in u.cjk)]
        if not keep:
            return 0
        if u.cross is None:
            u.cross = UserVectorIndex(int(self.cjk_embedder.dim))
        import numpy as np

        u.cross.add_many(keep, np.stack([np.asarray(found[d][1], dtype=np.float32) for d in keep]))
        return len(keep)

    def _cross_workers(self) -> dict[str, threading.Thread]:
        workers = self.__dict__.get("_cross_threads")
        if workers is None:
            workers = self.__dict__.setdefault("_cross_threads", {})
        for user_id in [u for u, t in workers.items() if not t.is_alive()]:
            workers.pop(user_id, None)
        return workers

    def _start_cross_worker(self, user_id: str, texts: list[str]) -> None:
        from .embedding_cache import embed_with_cache

        companion, cache = self.cjk_embedder, self._embedding_cache()

        def run() -> None:
            import logging

            try:
                for i in range(0, len(texts), CROSS_CHUNK):
                    embed_with_cache(companion, texts[i:i + CROSS_CHUNK], cache)
            except Exception as exc:  # noqa: BLE001 - a later query tries again; the search already answered
                logging.getLogger("memledger").warning(
                    "memledger: companion vectors of %d English memories not made (%s); CJK queries judge them by "
                    "their words until a later query succeeds", len(texts), exc)

        with self._lock:
            workers = self._cross_workers()
            if user_id in workers:
                return
            t = workers[user_id] = threading.Thread(target=run, name="memledger-cross-language", daemon=True)
            t.start()

    def cross_wait(self, timeout: float | None = None) -> None:
        """Wait for the workers filling companion vectors (tests, benchmarks; ``timeout`` in seconds each)."""
        for t in list(self.__dict__.get("_cross_threads", {}).values()):
            t.join(timeout)
