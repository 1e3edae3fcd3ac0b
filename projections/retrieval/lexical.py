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

import heapq
import json
import math
import os
import re
import threading
import unicodedata
from collections import Counter
from pathlib import Path
from typing import Iterable

from ..files import atomic_write

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
        self._docs: dict[str, Counter[str]] = {}  # doc_id -> term frequencies
        self._lengths: dict[str, int] = {}  # doc_id -> token count
        self._postings: dict[str, dict[str, int]] = {}  # term -> {doc_id: tf}
        self._total_len = 0

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

    def _add_counts(self, doc_id: str, tf: Counter[str]) -> None:
        if doc_id in self._docs:
            self.remove(doc_id)
        self._docs[doc_id] = tf
        n = sum(tf.values())
        self._lengths[doc_id] = n
        self._total_len += n
        for term, c in tf.items():
            self._postings.setdefault(term, {})[doc_id] = c

    def remove(self, doc_id: str) -> bool:
        """Remove ``doc_id`` and every posting of it. Returns True if it was present, False otherwise (so
        that replaying a retraction twice is harmless)."""
        tf = self._docs.pop(doc_id, None)
        if tf is None:
            return False
        self._total_len -= self._lengths.pop(doc_id)
        for term in tf:
            plist = self._postings[term]
            del plist[doc_id]
            if not plist:  # drop empty postings so df and the vocabulary really shrink
                del self._postings[term]
        return True

    # --- queries ------------------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._docs)

    def __contains__(self, doc_id: object) -> bool:
        return doc_id in self._docs

    def doc_ids(self) -> list[str]:
        """All indexed doc ids, in insertion order."""
        return list(self._docs)

    def document_frequency(self, term: str) -> int:
        """How many documents hold ``term`` (a token as :func:`tokenize` makes it); 0 if none."""
        return len(self._postings.get(term, ()))

    def vocabulary_size(self) -> int:
        """Number of distinct terms currently indexed."""
        return len(self._postings)

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
        if k == 0 or not self._docs:
            return []
        n_docs = len(self._docs)
        avgdl = self._total_len / n_docs if self._total_len else 1.0
        k1, b = self.k1, self.b
        k1p1, one_b = k1 + 1.0, 1.0 - b
        lengths = self._lengths
        scores: dict[str, float] = {}
        get = scores.get
        for term in dict.fromkeys(tokenize(query)):  # distinct terms, stable order
            plist = self._postings.get(term)
            if not plist:
                continue
            df = len(plist)
            idf = math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))
            for doc_id, tf in plist.items():
                # the formula's own order of operations: the same floats as ever, bit for bit
                scores[doc_id] = get(doc_id, 0.0) + idf * tf * k1p1 / (tf + k1 * (one_b + b * lengths[doc_id] / avgdl))
        # the best k, as sorted() would order them (score descending, then doc_id), without sorting every match
        return heapq.nsmallest(k, scores.items(), key=lambda kv: (-kv[1], kv[0]))

    # --- persistence --------------------------------------------------------------------------------------
    _MAGIC = "memledger.lexical"
    _FORMAT = 1

    def to_bytes(self) -> bytes:
        """Serialise to UTF-8 JSON (term counts per doc, parameters, tokenizer version). Postings are rebuilt
        on load, so the payload is not redundant. Contains tokens of the indexed texts: treat as personal
        data."""
        payload = {
            "magic": self._MAGIC,
            "format": self._FORMAT,
            "tokenizer": TOKENIZER_VERSION,
            "k1": self.k1,
            "b": self.b,
            "docs": {doc_id: dict(tf) for doc_id, tf in self._docs.items()},
        }
        return json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes) -> "LexicalIndex":
        """Inverse of :meth:`to_bytes`.

        Raises:
            ValueError: if ``data`` is not a serialised LexicalIndex, has an unknown format, or was built with
                another tokenizer version (rebuild the index from the ledger in that case).
        """
        try:
            payload = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"not a serialised LexicalIndex: {exc}") from exc
        if not isinstance(payload, dict) or payload.get("magic") != cls._MAGIC:
            raise ValueError("not a serialised LexicalIndex (bad magic)")
        if payload.get("format") != cls._FORMAT:
            raise ValueError(f"unsupported LexicalIndex format {payload.get('format')!r}, expected {cls._FORMAT}")
        if payload.get("tokenizer") != TOKENIZER_VERSION:
            raise ValueError(
                f"index was built with tokenizer {payload.get('tokenizer')!r}, this code uses "
                f"{TOKENIZER_VERSION!r}: rebuild the index"
            )
        idx = cls(k1=payload["k1"], b=payload["b"])
        for doc_id, tf in payload["docs"].items():
            idx._add_counts(doc_id, Counter({str(t): int(c) for t, c in tf.items()}))
        return idx

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
