"""CJK-aware tokeniser and a BM25 lexical index for ONE user's memories.

Why lexical at all: the default dense model (all-MiniLM-L6-v2) was trained on English; on Chinese text it
mostly sees [UNK]-like sub-pieces and ranks poorly. BM25 over character n-grams needs no model, is exact on
names and titles (《活着》, 鼓浪屿, OneNote), and is cheap. It is meant to be fused with a dense ranking
(see :mod:`projections.retrieval.fusion`).

Per-user by construction: a :class:`LexicalIndex` holds the documents of one user only. The caller keeps a
``dict[user_id, LexicalIndex]``; there is no user_id inside, so no query can ever score another user's
documents (and IDF statistics are per user, so one user's vocabulary never shifts another's scores).

Text is never translated; tokens are folded by Unicode NFC, ``str.lower()`` and, for ASCII words, the Snowball
English stemmer (so "hiking" and "hikes" both match "hike"). The index stores token counts, not the original text.
"""

from __future__ import annotations

import bisect
import heapq
import json
import math
import os
import re
import threading
import unicodedata
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Iterator

from ..files import atomic_write
from ..lazy import lazy_module

np = lazy_module("numpy")

__all__ = [
    "TOKENIZER_VERSION",
    "STOP_WORDS",
    "CJK_INTERROGATIVE_CHARS",
    "CJK_STOP_BIGRAMS",
    "stem",
    "tokenize",
    "LexicalIndex",
]

#: Bumped whenever :func:`tokenize` changes output; a saved index made with another version is refused
#: (its postings would silently disagree with the query tokens).
TOKENIZER_VERSION = "cjk-uni-bi-v2+en-snowball"

# Code point ranges treated as CJK: Han (URO, Ext A, compatibility, Ext B-F + supplement), Hiragana,
# Katakana (+ phonetic extensions, half-width), Hangul syllables and jamo. Punctuation blocks
# (U+3000-303F, full-width U+FF00-FF65) are deliberately NOT included: they separate tokens.
_CJK_RANGES = (
    "\u3400-\u4dbf"  # Han Extension A
    "\u4e00-\u9fff"  # Han Unified Ideographs
    "\uf900-\ufaff"  # Han Compatibility Ideographs
    "\U00020000-\U0002ebef"  # Han Extensions B-F
    "\U0002f800-\U0002fa1f"  # Han Compatibility Supplement
    "\u3040-\u309f"  # Hiragana
    "\u30a0-\u30ff"  # Katakana (includes the prolonged sound mark U+30FC)
    "\u31f0-\u31ff"  # Katakana phonetic extensions
    "\uff66-\uff9f"  # half-width Katakana
    "\u1100-\u11ff"  # Hangul Jamo
    "\u3130-\u318f"  # Hangul compatibility Jamo
    "\uac00-\ud7af"  # Hangul syllables
)
# One alternation, CJK first: a word token must exclude CJK explicitly because ``\w`` matches CJK too,
# otherwise "abc中文" would come out as one word.
_TOKEN_RE = re.compile(rf"(?P<cjk>[{_CJK_RANGES}]+)|(?P<word>[^\W_{_CJK_RANGES}]+)")

#: A deliberately small stop list: English function words, and Chinese function characters that occur in
#: nearly every first-person memory ("我……的……了"). Only whole tokens are dropped; CJK bigrams that
#: contain a stop character ("我的") are kept, they are rare enough for IDF to discount them.
STOP_WORDS: frozenset[str] = frozenset(
    """
    a an the and or but if of to in on at by for from with as is are was were be been being am it its
    this that these those i me my we our you your he him his she her they them their do does did not no
    so than then there here what which who whom how when where why can could would should will shall
    """.split()
    + list("的了吗呢吧啊呀哦着和与及而是我你他她它们这那之也都就")
)

#: Chinese interrogative characters (什么 what, 为什么 why, 怎么/怎样 how, 哪/哪里/哪个 which/where, 谁 who,
#: 啥 what): the Chinese counterpart of dropping what/which/who. A question asks with them, the memory that answers
#: does not contain them, and a memory that happens to ("不知道该朝什么方向发展") matched the question on them alone.
#: Such a character yields no unigram and no bigram (neither 什么 nor the 有什 / 么事 around it in 有什么事). Only
#: characters that are interrogative in every common word are listed (么 also makes 那么 / 这么, equally void).
CJK_INTERROGATIVE_CHARS: frozenset[str] = frozenset("什么哪怎谁啥")

#: Interrogative words made of characters that have other, contentful uses (如何 how, 为何 why, 多少 how many):
#: only these bigrams are dropped; their characters stay unigrams (如, 何, 多, 少).
CJK_STOP_BIGRAMS: frozenset[str] = frozenset({"如何", "为何", "多少"})

_stemmers = threading.local()  # a PyStemmer Stemmer is not thread-safe: one per thread


def stem(word: str) -> str:
    """The Snowball English ("Porter 2") stem of ``word``, via PyStemmer (libstemmer_c), for ASCII words only.

    ``"hiking"``, ``"hikes"`` -> ``"hike"``; ``"painted"``, ``"paintings"`` -> ``"paint"``. Non-ASCII words are
    returned unchanged (the English rules would only mangle them). Expects a lower-cased word, as :func:`tokenize`
    passes it. Thread-safe (one stemmer per thread; each caches up to 10 000 words).

    Raises:
        TypeError: if ``word`` is not a ``str``.
    """
    if not isinstance(word, str):
        raise TypeError(f"stem() needs str, got {type(word).__name__}")
    if not word.isascii():
        return word
    st = getattr(_stemmers, "english", None)
    if st is None:
        import Stemmer  # PyStemmer

        st = _stemmers.english = Stemmer.Stemmer("english")
    return st.stemWord(word)


def tokenize(text: str) -> list[str]:
    """Split ``text`` into BM25 terms.

    Rules (applied after Unicode NFC normalisation):

    * Latin / other alphabetic or numeric runs (``[^\\W_]`` minus CJK) become one lower-cased token each;
      every other character (spaces, punctuation, full-width punctuation such as ``，。《》``) separates.
      Words in :data:`STOP_WORDS` are dropped, the others are reduced to their English stem (:func:`stem`;
      ASCII words only): ``"Hiking trips"`` -> ``["hike", "trip"]``.
    * A CJK run (Han, Hiragana/Katakana, Hangul) yields its character unigrams AND its adjacent-character
      bigrams, interleaved in reading order: ``"鼓浪屿"`` -> ``["鼓", "鼓浪", "浪", "浪屿", "屿"]``.
      Unigrams give recall (a query word can be split differently from the document), bigrams give
      precision (approximate word matching without a segmenter or dictionary). Unigrams in
      :data:`STOP_WORDS` are dropped; a character in :data:`CJK_INTERROGATIVE_CHARS` yields neither its unigram
      nor any bigram containing it, and bigrams in :data:`CJK_STOP_BIGRAMS` are dropped.

    Args:
        text: any string; not translated, case is folded only on non-CJK tokens via ``str.lower()``.

    Returns:
        Tokens in order of appearance, duplicates kept (BM25 needs term frequencies).

    Raises:
        TypeError: if ``text`` is not a ``str``.
    """
    if not isinstance(text, str):
        raise TypeError(f"tokenize() needs str, got {type(text).__name__}")
    text = unicodedata.normalize("NFC", text)
    out: list[str] = []
    for m in _TOKEN_RE.finditer(text):
        run = m.group("cjk")
        if run is not None:
            last = len(run) - 1
            for i, ch in enumerate(run):
                if ch in CJK_INTERROGATIVE_CHARS:
                    continue  # no unigram, and the bigram starting here contains it too
                if ch not in STOP_WORDS:
                    out.append(ch)
                if i < last:
                    bigram = run[i : i + 2]
                    if run[i + 1] not in CJK_INTERROGATIVE_CHARS and bigram not in CJK_STOP_BIGRAMS:
                        out.append(bigram)
        else:
            word = m.group("word").lower()
            if word not in STOP_WORDS:
                out.append(stem(word))
    return out


#: a search ranks the documents it matched with Python's ``heapq`` when they are at most this many, else with numpy
#: (the same order: score descending, then doc id)
_PY_TOP = 2048
#: postings added since the index was loaded or last compacted are kept in dicts; past this many (and more than a
#: quarter of the compact postings) they are merged into the compact arrays at the next search
_OVERLAY_MIN = 4096


def _b64(arr: object) -> str:
    import base64

    return base64.b64encode(np.ascontiguousarray(arr, dtype="<i4").tobytes()).decode("ascii")


def _unb64(text: str) -> "np.ndarray":
    import base64

    return np.frombuffer(base64.b64decode(text), dtype="<i4").astype(np.int32)


class _Terms:
    """The sorted vocabulary of the compact postings as one UTF-8 blob and the offsets of its terms: a sequence of
    str (``len``, ``[i]``, iteration) that :func:`bisect.bisect_left` searches as it does a list. Why: a list of
    200,000 str objects holds ~11 MB (~55 bytes a term); the blob and its offsets ~2 MB. A term is decoded when
    read: a search reads ~18 a query word."""

    __slots__ = ("_blob", "_at", "_n")

    def __init__(self, terms: list[str]) -> None:
        self._n = len(terms)
        # tokens are runs of word characters (_TOKEN_RE), so "\0" separates them unambiguously
        self._blob = "\0".join(terms).encode("utf-8")
        self._index_blob()

    @classmethod
    def of_blob(cls, blob: bytes, n: int) -> "_Terms":
        """The terms of :meth:`blob` form (``n`` NUL-separated UTF-8 terms), held as they are.

        Raises:
            ValueError: the blob does not hold ``n`` terms, or is not UTF-8."""
        blob.decode("utf-8")  # checked once; a term is decoded again when read
        self = cls.__new__(cls)
        self._n, self._blob = n, blob
        self._index_blob()
        return self

    def _index_blob(self) -> None:
        ends = np.flatnonzero(np.frombuffer(self._blob, dtype=np.uint8) == 0)
        if len(ends) != max(self._n - 1, 0) or (self._n == 0 and self._blob):
            raise ValueError("a term holds a NUL character")
        dtype = np.int32 if len(self._blob) < 2**31 - 1 else np.int64
        self._at = np.empty(self._n + 1, dtype=dtype)  # term i is _blob[_at[i]:_at[i + 1] - 1]
        self._at[0] = 0
        self._at[1:self._n] = ends + 1
        self._at[self._n] = len(self._blob) + 1

    @staticmethod
    def of(terms: list[str]) -> "_Terms | list[str]":
        """The compact form of ``terms`` (sorted), or the list itself when a term holds a NUL (not from
        :func:`tokenize`: an old file's)."""
        try:
            return _Terms(terms)
        except ValueError:
            return terms

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: int) -> str:
        if not 0 <= i < self._n:
            raise IndexError("term index out of range")
        return self._blob[int(self._at[i]):int(self._at[i + 1]) - 1].decode("utf-8")

    def __iter__(self) -> Iterator[str]:
        return iter(self._blob.decode("utf-8").split("\0") if self._n else [])


class LexicalIndex:
    """Okapi BM25 index over the documents of ONE user.

    Scoring (Robertson & Zaragoza 2009, with Lucene's non-negative IDF)::

        idf(t)      = ln(1 + (N - df + 0.5) / (df + 0.5))
        score(d, q) = sum over distinct t in q of idf(t) * tf * (k1 + 1) / (tf + k1 * (1 - b + b * |d| / avgdl))

    where ``|d|`` is the number of tokens of ``d`` (after stop-word removal) and ``avgdl`` their mean.
    Query terms are de-duplicated, so repeating a word in the query does not weigh it more.

    Documents are keyed by a caller-chosen string ``doc_id`` (e.g. a fact version or event id). Only token
    counts are stored, not the text; erasing a subject is ``remove(doc_id)`` for each of their documents
    (or dropping the whole per-user index).

    How it is held: each document has a slot (an int, in insertion order); the postings are kept once, as compact
    arrays per term (sorted terms, offsets, slots, term counts: what :meth:`to_bytes` writes and :meth:`from_bytes`
    reads without rebuilding anything), plus the postings of documents added since, in dicts, merged into the
    arrays when they grow. A removed document's slot is marked dead (its compact postings stay until the next
    merge). A search scores the matched documents with numpy, in the formula's own order of operations, so the
    scores are the same floats as one Python loop gives, bit for bit.

    Not thread-safe: guard with a lock if one index is shared by threads.
    """

    def __init__(self, k1: float = 1.5, b: float = 0.75) -> None:
        """Args:
            k1: term-frequency saturation, >= 0 (1.2-2.0 is usual).
            b: length normalisation in [0, 1].

        Raises:
            ValueError: on parameters outside those ranges.
        """
        if not (k1 >= 0 and math.isfinite(k1)):
            raise ValueError(f"k1 must be a finite number >= 0, got {k1!r}")
        if not (0.0 <= b <= 1.0):
            raise ValueError(f"b must be in [0, 1], got {b!r}")
        self.k1 = float(k1)
        self.b = float(b)
        self._ids: list[str | None] = []  # slot -> doc_id (None: removed)
        self._slot: dict[str, int] = {}  # live doc_id -> slot
        self._length = np.zeros(16, dtype=np.float64)  # slot -> token count
        self._live = np.zeros(16, dtype=bool)
        self._total_len = 0
        # compact postings: term i's documents are _slots[_offsets[i]:_offsets[i + 1]] (dead slots included)
        self._terms: _Terms | list[str] = []  # sorted; _Terms once compacted (see there)
        self._offsets = np.zeros(1, dtype=np.int32)
        self._slots = np.zeros(0, dtype=np.int32)
        self._tfs = np.zeros(0, dtype=np.int32)
        # postings of documents added since: term -> {slot: tf}, and each such slot's terms (for remove)
        self._extra: dict[str, dict[int, int]] = {}
        self._extra_terms: dict[int, tuple[str, ...]] = {}
        self._extra_count = 0
        self._order: np.ndarray | None = None  # slot -> rank of its doc_id in string order (cached, for ties)
        self._dead = 0  # compact postings' slots removed since they were compacted: 0 spares a search the check
        # (k1, b, avgdl, each slot's k1 * (1 - b + b * |d| / avgdl)): the formula's per-document part, cached
        self._norm: tuple[float, float, float, np.ndarray] | None = None
        #: read from the previous format (:meth:`from_bytes`): worth writing again in this one
        self.stale_format = False
        #: what the writer of the bytes this index was read from said it holds (:meth:`to_bytes`'s ``stamp``; None:
        #: nothing, or built in memory); the index itself never reads it
        self.stamp: dict[str, Any] | None = None

    # --- mutation -----------------------------------------------------------------------------------------
    def add(self, doc_id: str, text: str) -> None:
        """Index ``text`` under ``doc_id``; an existing ``doc_id`` is replaced (upsert), so replaying a
        correction of the same document is idempotent.

        Raises:
            TypeError: if ``doc_id`` or ``text`` is not a ``str``.
        """
        if not isinstance(doc_id, str):
            raise TypeError(f"doc_id must be str, got {type(doc_id).__name__}")
        tf = Counter(tokenize(text))
        self._add_counts(doc_id, tf)

    def _new_slot(self, doc_id: str, n: int) -> int:
        slot = len(self._ids)
        if slot >= len(self._length):
            grow = max(16, 2 * len(self._length))
            self._length = np.concatenate([self._length, np.zeros(grow - len(self._length))])
            self._live = np.concatenate([self._live, np.zeros(grow - len(self._live), dtype=bool)])
        self._ids.append(doc_id)
        self._slot[doc_id] = slot
        self._length[slot] = n
        self._live[slot] = True
        self._total_len += n
        self._order = None
        self._norm = None
        return slot

    def _add_counts(self, doc_id: str, tf: Counter[str]) -> None:
        if doc_id in self._slot:
            self.remove(doc_id)
        slot = self._new_slot(doc_id, sum(tf.values()))
        for term, c in tf.items():
            self._extra.setdefault(term, {})[slot] = c
        self._extra_terms[slot] = tuple(tf)
        self._extra_count += len(tf)

    def remove(self, doc_id: str) -> bool:
        """Remove ``doc_id`` and every posting of it. Returns True if it was present, False otherwise (so
        that replaying a retraction twice is harmless)."""
        slot = self._slot.pop(doc_id, None)
        if slot is None:
            return False
        self._total_len -= int(self._length[slot])
        self._live[slot] = False
        self._ids[slot] = None
        self._order = None
        if slot not in self._extra_terms:
            self._dead += 1
        for term in self._extra_terms.pop(slot, ()):
            plist = self._extra[term]
            del plist[slot]
            self._extra_count -= 1
            if not plist:  # drop empty postings so df and the vocabulary really shrink
                del self._extra[term]
        return True

    def _compact_postings(self) -> tuple[_Terms | list[str], np.ndarray, np.ndarray, np.ndarray]:
        """Every live posting as compact arrays: (sorted terms, offsets, slots, tfs), slots ascending per term."""
        counts = np.diff(self._offsets)
        term_of = np.repeat(np.arange(len(self._terms), dtype=np.int64), counts)
        keep = self._live[self._slots]
        term_of, slots, tfs = term_of[keep], self._slots[keep], self._tfs[keep]
        present = np.zeros(len(self._terms), dtype=bool)
        present[term_of] = True
        terms = sorted({t for t, p in zip(self._terms, present.tolist()) if p} | set(self._extra))
        at = {t: i for i, t in enumerate(terms)}
        remap = np.array([at.get(t, -1) for t in self._terms], dtype=np.int64)
        ex_terms, ex_slots, ex_tfs = [], [], []
        for t, plist in self._extra.items():
            i = at[t]
            ex_terms.extend([i] * len(plist))
            ex_slots.extend(plist.keys())
            ex_tfs.extend(plist.values())
        all_terms = np.concatenate([remap[term_of], np.array(ex_terms, dtype=np.int64)])
        all_slots = np.concatenate([slots, np.array(ex_slots, dtype=np.int32)])
        all_tfs = np.concatenate([tfs, np.array(ex_tfs, dtype=np.int32)])
        order = np.lexsort((all_slots, all_terms))
        offsets = np.zeros(len(terms) + 1, dtype=np.int32)
        np.cumsum(np.bincount(all_terms, minlength=len(terms)), out=offsets[1:])
        return _Terms.of(terms), offsets, all_slots[order].astype(np.int32), all_tfs[order].astype(np.int32)

    def _merge(self) -> None:
        """Move the dict postings into the compact arrays (and drop the dead slots' postings)."""
        self._terms, self._offsets, self._slots, self._tfs = self._compact_postings()
        self._extra, self._extra_terms, self._extra_count = {}, {}, 0
        self._dead = 0

    # --- queries ------------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._slot)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._slot

    def doc_ids(self) -> list[str]:
        """All indexed doc ids, in insertion order."""
        return [d for d in self._ids if d is not None]

    def _postings(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        """The live documents holding ``term``: (slots, tfs), compact postings first, then those added since."""
        i = bisect.bisect_left(self._terms, term)
        if i < len(self._terms) and self._terms[i] == term:
            a, z = int(self._offsets[i]), int(self._offsets[i + 1])
            slots, tfs = self._slots[a:z], self._tfs[a:z]
            if self._dead:
                keep = self._live[slots]
                slots, tfs = slots[keep], tfs[keep]
        else:
            slots, tfs = self._slots[:0], self._tfs[:0]
        extra = self._extra.get(term)
        if extra:
            slots = np.concatenate([slots, np.fromiter(extra.keys(), dtype=np.int32, count=len(extra))])
            tfs = np.concatenate([tfs, np.fromiter(extra.values(), dtype=np.int32, count=len(extra))])
        return slots, tfs

    def document_frequency(self, term: str) -> int:
        """How many documents hold ``term`` (a token as :func:`tokenize` makes it); 0 if none."""
        return len(self._postings(term)[0])

    def vocabulary_size(self) -> int:
        """Number of distinct terms currently indexed."""
        return len(self._compact_postings()[0])

    def search(self, query: str, k: int = 10) -> list[tuple[str, float]]:
        """Rank documents for ``query``.

        Args:
            query: free text, tokenised with :func:`tokenize`.
            k: maximum number of results, >= 0.

        Returns:
            Up to ``k`` ``(doc_id, score)`` pairs, score > 0 descending (ties broken by doc_id so results are
            deterministic). Documents sharing no term with the query are not returned, so the list can be
            shorter than ``k`` or empty.

        Raises:
            ValueError: if ``k`` is negative.
        """
        if k < 0:
            raise ValueError(f"k must be >= 0, got {k}")
        if k == 0 or not self._slot:
            return []
        if self._extra_count > max(_OVERLAY_MIN, len(self._slots) // 4):
            self._merge()
        n_docs = len(self._slot)
        avgdl = self._total_len / n_docs if self._total_len else 1.0
        k1p1 = self.k1 + 1.0
        norm = self._norms(avgdl)
        scores: np.ndarray | None = None
        for term in dict.fromkeys(tokenize(query)):  # distinct terms, stable order
            slots, tfs = self._postings(term)
            df = len(slots)
            if not df:
                continue
            idf = math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))
            tf = tfs.astype(np.float64)
            # a term in every slot has slots 0..n-1 in order (a term's slots ascend, distinct): slices, no gathers
            at = slice(0, df) if df == len(self._ids) else slots
            # the formula's own order of operations: the same floats as a Python loop, bit for bit
            part = idf * tf * k1p1 / (tf + norm[at])
            if scores is None:
                scores = np.zeros(len(self._ids), dtype=np.float64)
            scores[at] += part
        if scores is None:
            return []
        # every matched document scored > 0 (idf > 0, tf >= 1), every other 0
        return self._best(np.flatnonzero(scores > 0.0), scores, k)

    def _norms(self, avgdl: float) -> np.ndarray:
        """Each slot's ``k1 * (1 - b + b * |d| / avgdl)``, computed over every slot at once and kept until a document
        is added or ``avgdl`` changes (a common term's postings reach every document; this spares each such term
        four passes over them)."""
        key = (self.k1, self.b, avgdl)
        if self._norm is None or self._norm[:3] != key:
            self._norm = (*key, self.k1 * ((1.0 - self.b) + self.b * self._length / avgdl))
        return self._norm[3]

    def _best(self, slots: np.ndarray, by_slot: np.ndarray, k: int) -> list[tuple[str, float]]:
        """The best ``k`` of the matched ``slots`` (``by_slot``: each slot's score), as ``sorted`` would order them
        (score descending, then doc_id)."""
        ids = self._ids
        scores = by_slot[slots]
        key = lambda kv: (-kv[1], kv[0])  # noqa: E731
        if len(slots) <= max(_PY_TOP, k):
            return heapq.nsmallest(k, zip([ids[s] for s in slots.tolist()], scores.tolist()), key=key)
        kth = float(-np.partition(-scores, k - 1)[k - 1])  # the k-th best score
        above = slots[scores > kth]
        ties = slots[scores == kth]
        need = k - len(above)
        if len(ties) > need:  # the tied documents with the smallest doc ids
            if len(ties) <= _PY_TOP:
                ties = np.array(sorted(ties.tolist(), key=ids.__getitem__)[:need], dtype=np.int64)
            else:
                rank = self._doc_order()[ties]  # distinct: the need smallest are those up to the need-th
                ties = ties[rank <= np.partition(rank, need - 1)[need - 1]]
        chosen = np.concatenate([above, ties]).astype(np.int64)
        return sorted(zip([ids[s] for s in chosen.tolist()], by_slot[chosen].tolist()), key=key)

    def _doc_order(self) -> np.ndarray:
        """slot -> rank of its doc_id among the live documents' ids in string order (dead slots last); cached."""
        if self._order is None:
            order = np.full(len(self._ids), len(self._ids), dtype=np.int64)
            slots = np.array([slot for _, slot in sorted(self._slot.items())], dtype=np.int64)
            order[slots] = np.arange(len(slots), dtype=np.int64)
            self._order = order
        return self._order

    # --- persistence --------------------------------------------------------------------------------------
    _MAGIC = "memledger.lexical"
    _FORMAT = 3

    def to_bytes(self, stamp: dict[str, Any] | None = None) -> bytes:
        """Serialise: one JSON header line (the parameters, the tokenizer version, the sections' sizes, and
        ``stamp``, a JSON object the caller reads back as :attr:`stamp`: what the file holds, e.g. whose documents
        as of which position), then the
        live doc ids in insertion order and the sorted terms, each as one NUL-separated UTF-8 run, and the postings'
        arrays as little-endian int32 (token counts per document, offsets, documents, term counts, each document's
        rank by id), which :meth:`from_bytes` reads as they are: no JSON string per term nor base64 (format 3; a
        100,000-memory user's file parses in a third of format 2's time). Contains tokens of the indexed texts:
        treat as personal data."""
        terms, offsets, slots, tfs = self._compact_postings()
        live = [s for s, d in enumerate(self._ids) if d is not None]
        renumber = np.full(max(len(self._ids), 1), -1, dtype=np.int64)
        renumber[live] = np.arange(len(live))
        header: dict[str, Any] = {
            "magic": self._MAGIC, "format": self._FORMAT, "tokenizer": TOKENIZER_VERSION, "k1": self.k1, "b": self.b,
        }
        if stamp is not None:
            header["stamp"] = stamp
        sections = []
        for name, words in (("docs", [self._ids[s] for s in live]), ("terms", list(terms))):
            if any("\0" in w for w in words):  # not separable by NUL (no tokenizer's term; an odd id): in the header
                header[name] = words
            else:
                run = "\0".join(words).encode("utf-8")
                header[f"{name}_bytes"], header[f"{name}_count"] = len(run), len(words)
                sections.append(run)
        for name, arr in (("lengths", self._length[live]), ("offsets", offsets), ("slots", renumber[slots]),
                          ("tfs", tfs), ("order", self._doc_order()[live])):
            raw = np.ascontiguousarray(arr, dtype="<i4").tobytes()
            header[f"{name}_count"] = len(raw) // 4
            sections.append(raw)
        head = json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        return b"".join([head, b"\n", *sections])

    @classmethod
    def from_bytes(cls, data: bytes | bytearray) -> "LexicalIndex":
        """Inverse of :meth:`to_bytes` (also reads the previous formats: 2, one JSON document with base64 arrays,
        and 1, term counts per document; either marks the index ``stale_format``, to be written again).

        Raises:
            ValueError: if ``data`` is not a serialised LexicalIndex, has an unknown format, or was built with
                another tokenizer version (rebuild the index from the ledger in that case).
        """
        end = data.find(b"\n")
        try:
            payload = json.loads(bytes(data[:end] if end >= 0 else data).decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"not a serialised LexicalIndex: {exc}") from exc
        if not isinstance(payload, dict) or payload.get("magic") != cls._MAGIC:
            raise ValueError("not a serialised LexicalIndex (bad magic)")
        if payload.get("format") not in (1, 2, cls._FORMAT) or (payload.get("format") == cls._FORMAT) != (end >= 0):
            raise ValueError(f"unsupported LexicalIndex format {payload.get('format')!r}, expected {cls._FORMAT}")
        if payload.get("tokenizer") != TOKENIZER_VERSION:
            raise ValueError(
                f"index was built with tokenizer {payload.get('tokenizer')!r}, this code uses "
                f"{TOKENIZER_VERSION!r}: rebuild the index"
            )
        idx = cls(k1=payload["k1"], b=payload["b"])
        if payload["format"] == 1:
            for doc_id, tf in payload["docs"].items():
                idx._add_counts(doc_id, Counter({str(t): int(c) for t, c in tf.items()}))
            idx._merge()
            idx.stale_format = True
            return idx
        try:
            if payload["format"] == 2:
                idx.stale_format = True
                docs = [str(d) for d in payload["docs"]]
                lengths = _unb64(payload["lengths"]).astype(np.float64)
                terms: Any = [str(t) for t in payload["terms"]]
                offsets, slots, tfs = (_unb64(payload[f]) for f in ("offsets", "slots", "tfs"))
                order = _unb64(payload["order"]).astype(np.int64) if "order" in payload else None
            else:
                docs, terms, offsets, slots, tfs, lengths, order = cls._sections(payload, data, end + 1)
        except (KeyError, TypeError, ValueError, UnicodeDecodeError) as exc:
            raise ValueError(f"not a serialised LexicalIndex: {exc}") from exc
        stamp = payload.get("stamp")
        idx.stamp = stamp if isinstance(stamp, dict) else None
        n = len(docs)
        idx._slot = dict(zip(docs, range(n)))
        if (len(lengths) != n or len(idx._slot) != n or len(offsets) != len(terms) + 1 or len(slots) != len(tfs)
                or (len(offsets) and (offsets[0] != 0 or offsets[-1] != len(slots)))
                or (len(slots) and (slots.min() < 0 or slots.max() >= n))):
            raise ValueError("not a serialised LexicalIndex (inconsistent postings)")
        idx._ids = list(docs)
        idx._length = np.concatenate([lengths, np.zeros(max(16, n) - n)]) if n < 16 else lengths.copy()
        idx._live = np.zeros(len(idx._length), dtype=bool)
        idx._live[:n] = True
        idx._total_len = int(lengths.sum())
        idx._terms = terms if isinstance(terms, _Terms) else _Terms.of(terms)
        idx._offsets, idx._slots, idx._tfs = offsets, slots, tfs
        if order is not None and len(order) == n and n and order.min() >= 0 and order.max() < n and bool(
                (np.bincount(order, minlength=n) == 1).all()):  # a permutation of the documents
            idx._order = order
        return idx

    @staticmethod
    def _sections(header: dict[str, Any], data: bytes | bytearray, at: int) -> tuple[Any, ...]:
        """The doc ids, terms and arrays of a format-3 file after its header line (see :meth:`to_bytes`)."""
        view = memoryview(data)
        words = []
        for name in ("docs", "terms"):
            if name in header:
                words.append([str(w) for w in header[name]])
                continue
            size, count = int(header[f"{name}_bytes"]), int(header[f"{name}_count"])
            run = bytes(view[at:at + size])
            at += size
            if name == "terms":
                words.append(_Terms.of_blob(run, count))
            else:
                got = run.decode("utf-8").split("\0") if count else []
                if len(got) != count:
                    raise ValueError("a doc id section of another length")
                words.append(got)
        arrays = []
        for name in ("lengths", "offsets", "slots", "tfs", "order"):
            count = int(header[f"{name}_count"])
            if at + 4 * count > len(view):
                raise ValueError("a LexicalIndex of another length")
            arrays.append(np.frombuffer(view, dtype="<i4", count=count, offset=at).astype(np.int32))
            at += 4 * count
        if at != len(view):
            raise ValueError("a LexicalIndex of another length")
        lengths, offsets, slots, tfs, order = arrays
        return words[0], words[1], offsets, slots, tfs, lengths.astype(np.float64), order.astype(np.int64)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write :meth:`to_bytes` to ``path`` atomically (temp file + rename), so a crash never leaves a
        half-written index that a later load would trust."""
        atomic_write(path, self.to_bytes())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "LexicalIndex":
        """Read an index written by :meth:`save`. Raises ``FileNotFoundError`` or ``ValueError``."""
        return cls.from_bytes(Path(path).read_bytes())

    @classmethod
    def from_documents(cls, docs: Iterable[tuple[str, str]], **params: float) -> "LexicalIndex":
        """Build an index from ``(doc_id, text)`` pairs (convenience for rebuilds and tests)."""
        idx = cls(**params)
        for doc_id, text in docs:
            idx.add(doc_id, text)
        return idx
