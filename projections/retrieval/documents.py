"""What a ``vectors_docs`` row holds and how it is written: the columns, the stored vector format (float16), a
fact's BM25 document and document id, CJK detection, the per-model and per-user file names, and what a batch of
events leaves in the rows it touches. Pure functions, shared by the ``vectors`` projection (projections/vectors.py)
and the retrieval modules beside this one.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from ledger.domain import fact_effect
from ledger.timeutil import OPEN, parse_instant, to_micros

from ..base import LogEvent, value_json_of
from ..lazy import lazy_module

np = lazy_module("numpy")  # loaded on first use: a cold profile or assert never computes with a vector

#: Which events put a new current version in place (ledger/domain.py's policy effects).
CURRENT_EFFECTS = ("new", "supersede", "correct")

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
#: ``vectors_meta.cjk_model_id`` of a table without a companion index (and of tables built before it existed)
NO_COMPANION = "none"


#: What a fact's BM25 document holds, recorded in the index manifest beside the tokenizer version: ``text+key+value``
#: = its sentence, the words of its key and its value's words when the sentence does not hold them (see
#: :func:`lexical_document`). Changing it invalidates saved ``.lex`` files (the indexes are rebuilt from the table).
LEXICAL_DOCUMENT = "text+key+slot+value"


def doc_meta(values: Any) -> dict[str, Any]:
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

    Why the slot's words (:func:`ledger.slot_labels.slot_words`): a question asks in the slot's words ("what number do
    people ring") what the sentence says in others ("my mobile is 07700 900 587").

    Why the value: a fact asserted with ``--value sushi --text "she told me about lunch"`` was not found by
    "sushi" (a new user's report): the value is what the fact says. Only the lexical ranking sees key and value; the
    dense vector embeds the sentence alone.
    """
    words = " ".join(w for w in re.split(r"[._-]+", key) if w)
    low = text.lower()
    extra = [v for v in _value_words(value_json) if v.lower() not in low]
    from ledger.slot_labels import slot_words  # the catalogue loads its patterns: only when documents are made

    label = slot_words(key)  # the slot's own words: "phone number" for contact.phone, in English and Chinese
    return " ".join([text, words, *([label] if label else []), *extra])


def lexical_version(tokenizer: str) -> str:
    """The manifest's ``tokenizer`` entry: the tokenizer version and what a document holds (saved ``.lex`` files made
    otherwise are not used: the indexes are rebuilt from the table)."""
    return f"{tokenizer}/{LEXICAL_DOCUMENT}"


def fact_doc_id(key: str) -> str:
    """The document id of a fact's current version: ``"fact:<key>"`` (one live document per (user, key))."""
    return f"fact:{key}"


def current_texts(events: list[LogEvent]) -> list[str]:
    """The distinct texts the events make current (new, supersede, correct), in order."""
    return list(dict.fromkeys(le.event.text for le in events
                              if fact_effect(le.event) in CURRENT_EFFECTS
                              and getattr(le.event, "text", None) is not None))


def batch_outcome(events: list[LogEvent]) -> tuple[dict[tuple[str, str], str | None], set[tuple[str, str]]]:
    """What a batch leaves in the rows it touches, as :meth:`VectorsProjection.apply` will: ``{(user_id, doc_id):
    final text, or None (tombstone)}`` for every document whose text the batch changes, and the documents a forget
    touches (whose vectors must never go back to the embedding cache)."""
    final: dict[tuple[str, str], str | None] = {}
    forgotten: set[tuple[str, str]] = set()
    for le in events:
        e = le.event
        effect = fact_effect(e)
        if effect is None:
            continue
        doc = (e.user_id, fact_doc_id(e.key))
        if effect in CURRENT_EFFECTS:
            final[doc] = e.text
        elif effect == "retract" or (effect == "forget" and e.replaces is not None):
            final[doc] = None
        if effect == "forget":
            forgotten.add(doc)
    return final, forgotten


def forgotten_texts(events: list[LogEvent], forgotten: set[tuple[str, str]]) -> set[str]:
    """Every text the batch's fact events give the documents in ``forgotten`` (a message has a text but no key:
    it is no fact's document)."""
    return {le.event.text for le in events if fact_effect(le.event) is not None
            and getattr(le.event, "text", None) is not None
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
    written before vectors were stored as float16, or by :func:`encode_vector`'s fallback); an array (a pack's) as
    it is.

    Raises:
        ValueError: the blob has neither length (a corrupted row, or another model's vector)."""
    if isinstance(blob, np.ndarray):  # a vector read from a user's pack (projections/retrieval/packs.py)
        if blob.shape != (dim,):
            raise ValueError(f"a stored vector of shape {blob.shape}, not ({dim},)")
        return blob.astype(np.float32, copy=False)
    b = bytes(blob)
    if len(b) == 2 * dim:
        return np.frombuffer(b, dtype=STORED_DTYPE).astype(np.float32)
    if len(b) == 4 * dim:
        return np.frombuffer(b, dtype="<f4").astype(np.float32)
    raise ValueError(f"a stored vector has {len(b)} bytes, not {dim}-d float16 or float32")


def as_f32(v: Any, dim: int) -> Any:
    """A vector as float32: a stored blob decoded (:func:`decode_vector`), an array as it is."""
    return decode_vector(v, dim) if isinstance(v, (bytes, bytearray, memoryview)) else v


def stack_vectors(rows: list[tuple], col: int, dim: int) -> np.ndarray:
    """The float32 ``(len(rows), dim)`` matrix of the vector blobs in column ``col`` of ``rows`` (see
    :func:`decode_vector`; one conversion for the whole piece when every row has the same format)."""
    if any(isinstance(r[col], np.ndarray) for r in rows):  # some from a user's pack (packs.py)
        return np.stack([decode_vector(r[col], dim) for r in rows])
    blobs = [bytes(r[col]) for r in rows]
    for width, dtype in ((2, STORED_DTYPE), (4, "<f4")):
        if all(len(b) == width * dim for b in blobs):
            return np.frombuffer(b"".join(blobs), dtype=dtype).astype(np.float32).reshape(len(rows), dim)
    return np.stack([decode_vector(b, dim) for b in blobs]) if blobs else np.empty((0, dim), np.float32)


def valid_micros(iso: str | None) -> int:
    return OPEN if iso is None else to_micros(parse_instant(iso, "valid_time"))  # type: ignore[return-value]


def model_slug(model_id: str) -> str:
    """A file-system-safe directory name for a model id (``st:all-MiniLM-L6-v2@ab12`` -> ``st_all-MiniLM-L6-v2_ab12``)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", model_id)[:80]


def user_file_stem(user_id: str) -> str:
    """Per-user index file stem: 16 hex of sha256(user_id) (user ids may hold any character)."""
    return hashlib.sha256(user_id.encode("utf-8")).hexdigest()[:16]
