"""``ingest`` embeds the observations it records on a worker thread while it records them (memledger/ingest.py
``_warm_vectors``, projections/retrieval/embedding.py ``warm_in_background``), so the first search finds every vector cached."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from memledger import MemoryLedger
from projections.retrieval.embedders import HashingEmbedder

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "samples" / "locomo_conv30.json"


class RecordingEmbedder(HashingEmbedder):
    """HashingEmbedder noting each text it embeds and the thread that asked; ``fail`` makes the next call raise."""

    def __init__(self) -> None:
        super().__init__(64)
        self.embedded: list[str] = []
        self.threads: set[str] = set()
        self.fail = 0

    def embed_passages(self, texts: list[str]) -> Any:
        if self.fail:
            self.fail -= 1
            raise RuntimeError("model crashed")
        self.embedded.extend(texts)
        self.threads.add(threading.current_thread().name)
        return super().embed_passages(texts)


def observations() -> set[str]:
    data = json.loads(SAMPLE.read_text(encoding="utf-8"))
    out = set()
    for conv in data if isinstance(data, list) else [data]:
        for per_session in conv["observation"].values():
            for items in per_session.values():
                out.update(text for text, _evidence in items)
    return out


def test_ingest_embeds_its_texts_on_a_worker_and_search_embeds_none(store_args: dict[str, Any]) -> None:
    emb = RecordingEmbedder()
    with MemoryLedger(**store_args, embedder=emb) as ml:
        ml.ingest(SAMPLE)
        texts = observations()
        assert set(emb.embedded) == texts and len(emb.embedded) == len(texts)  # each once, all before search
        assert emb.threads == {"memledger-warm"}
        hits = ml.search("Jon", "dance studio", k=5)
        assert len(emb.embedded) == len(texts)  # the catch-up found every vector in the cache
        assert hits and all(h.user_id == "Jon" for h in hits)
        ml.ingest(SAMPLE)  # nothing new: cache hits, the model does not run
        assert len(emb.embedded) == len(texts)
        warmed = [(h.key, round(h.score, 6)) for h in ml.search("Gina", "clothing store", k=10)]

    # the same file without the warm: the catch-up embeds, and search answers the same
    plain = RecordingEmbedder()
    home = {**store_args, "home": Path(str(store_args["home"]) + "-plain")} if "home" in store_args else None
    if home is not None:
        with MemoryLedger(**home, embedder=plain) as ml2:
            from memledger import ingest as ingest_module

            original = ingest_module._warm_vectors
            ingest_module._warm_vectors = lambda ml, commands: (lambda while_waiting=None: None)
            try:
                ml2.ingest(SAMPLE)
            finally:
                ingest_module._warm_vectors = original
            assert plain.embedded == []
            assert [(h.key, round(h.score, 6)) for h in ml2.search("Gina", "clothing store", k=10)] == warmed
            assert set(plain.embedded) == texts and plain.threads == {"MainThread"}


def test_a_failed_warm_changes_nothing_and_the_catch_up_embeds(store_args: dict[str, Any]) -> None:
    emb = RecordingEmbedder()
    emb.fail = 1
    with MemoryLedger(**store_args, embedder=emb) as ml:
        report = ml.ingest(SAMPLE)
        assert report["users"] == {"Gina": 83, "Jon": 86}
        assert emb.embedded == []  # the worker's call raised; ingest recorded everything regardless
        hits = ml.search("Jon", "dance studio", k=3)
        assert hits and set(emb.embedded) == observations()
        assert emb.threads == {"MainThread"}
        assert all(r.ok for r in ml.verify())
