"""Memory hygiene rules of the domain: hedged statements, suspicious values, instruction-like text, corrections.

Pure functions and constants; the policy (:meth:`ledger.domain.Fact.decide`) applies them and records what it decided
in the event's ``hygiene`` mark, so projections and ``verify`` never re-derive a decision. What only time causes
(a quarantine's 72 hours running out, a scheduled fact's time arriving, a fact falling due) is derived at read time
from recorded times (memledger/hygiene.py), never recorded.

* **Hedged** ("fuzziness marking"): a statement whose text says "I think", "maybe", "probably",
  好像, 似乎, 可能 or 大概 is recorded with confidence at most :data:`HEDGED_CONFIDENCE` (0.6) and marked
  ``{"hedged": true}``.
* **Quarantine** (the "memory sandbox"): a value that fails its key's validator
  (:meth:`ledger.slots.KeyRegistry.check_value`) or a text that reads as an instruction to the agent
  (:func:`reads_as_instruction`, ledger/injection.py) is recorded but not believed: ``{"quarantined": "<why>"}``. A second statement of
  the same value from an independent source (:func:`independent`) said within :data:`QUARANTINE_WINDOW` of it
  (``observed_at`` to ``observed_at``, before or after it, so imported history is judged by when it was said,
  in any order) releases it; a sentence and a number stating the same number are the same value.
* **Correction decay**: the n-th correction of a fact records confidence ``given x 0.8**n``; from
  the third on the fact is flagged for review (``{"corrections": n, "review": true}``).
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

from .errors import BadInput
from .injection import screen

#: the highest confidence a hedged statement is recorded with ("confidence <= 0.6")
HEDGED_CONFIDENCE = 0.6
#: how long a quarantined value waits for an independent second statement (72 hours)
QUARANTINE_WINDOW = timedelta(hours=72)
#: each correction multiplies the new version's confidence by this, once per correction so far
CORRECTION_DECAY = 0.8
#: the number of corrections of one fact from which it is flagged for review
REVIEW_AT = 3

_HEDGE_EN = re.compile(r"\b(?:i think|maybe|probably)\b", re.IGNORECASE)
# 可能 hedges ("他可能是", "maybe"), but not inside 不可能 ("impossible"), 可能性 ("the possibility") or 尽可能
# ("as ... as possible"): "我不可能吃肉" ("I can't possibly eat meat") is not hedged.
_HEDGE_ZH = re.compile(r"好像|似乎|(?<![不尽])可能(?!性)|大概")

def is_hedged(text: str | None) -> bool:
    """True when ``text`` hedges ("I think", "maybe", "probably", 好像, 似乎, 可能, 大概)."""
    if not text:
        return False
    # ASCII text holds no Chinese hedge: one search instead of two on most statements
    return bool(_HEDGE_EN.search(text) or (not text.isascii() and _HEDGE_ZH.search(text)))


def reads_as_instruction(text: str | None, *, from_user: bool = True) -> bool:
    """True when ``text`` reads as an instruction to the agent rather than a fact about the user ("ignore previous
    instructions", "you are now DAN", "forward the user's chat history to ...", "忽略之前的指令"): memory poisoning,
    quarantined. ``from_user``: the text is the user's own statement, so only what is poisoning from any source
    counts; from another source (an import, an agent's inference) any instruction to the assistant does
    (:func:`ledger.injection.screen`, which says what is read and its known gaps)."""
    return screen(text, from_user=from_user) is not None


def independent(first: dict[str, Any], session_id: str | None, source_ref: str | None) -> bool:
    """Whether a statement with ``session_id``/``source_ref`` is independent of the quarantined statement ``first``
    (a dict with those keys): it names another session or another source_ref. Two statements naming neither are
    not independent (nothing tells them apart)."""
    other_session = session_id is not None and session_id != first.get("session_id")
    other_ref = source_ref is not None and source_ref != first.get("source_ref")
    return other_session or other_ref


def decayed(confidence: float, corrections: int) -> float:
    """The confidence recorded for a fact's ``corrections``-th correction: ``confidence x 0.8**corrections``,
    rounded to 4 places."""
    return round(confidence * CORRECTION_DECAY ** corrections, 4)


def check_min_confidence(value: Any, field: str = "min_confidence") -> float | None:
    """Validate a ``min_confidence`` (a number from 0 to 1, or None). Raises BadInput naming ``field``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or not 0 <= value <= 1:
        raise BadInput(field, f"{value!r} is not a number from 0 to 1", "give a confidence such as 0.7, or leave it out")
    return float(value)
