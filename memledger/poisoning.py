"""Poisoning screened on every path at read time: messages, summaries and state cards (and facts recorded before the
screen knew a wording) that read as an instruction to the assistant never reach ``context`` as text.

A fact is screened when it is recorded (ledger/domain.py quarantines it, ledger/injection.py decides); messages,
summaries and cards are screened here, when they are read, so a better screen also covers what was stored before it.
What is withheld is shown as a notice line (never a heading) and listed by ``memledger quarantine`` under
``withheld_texts``. Who counts as the user (``from_user``: only the kinds in :data:`ledger.injection.ANY_SOURCE` count):
a fact whose source is ``user_statement``; a message whose role is ``user``, ``assistant`` or ``system`` (the
conversation and the operator's own words). A ``tool`` message, an imported or inferred fact, a summary and a state
card are other sources: any instruction to the assistant in them is withheld. docs/hygiene.md.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel

from ledger.injection import REASONS, screen, screen_joined
from ledger.timeutil import from_micros

#: message roles whose words count as the user's side of the conversation (the operator's system messages too)
TRUSTED_ROLES = frozenset({"user", "assistant", "system"})


def notice(kind: str) -> str:
    """The words a withheld text is replaced with in ``context``: what it read as, and where to see it."""
    return f"[withheld: {REASONS.get(kind, 'reads as an instruction to the assistant')}; see `quarantine`]"


def fact_kind(text: Any, source: str | None, value: Any = None) -> str | None:
    """The poisoning kind of a fact's ``text`` (and of its ``value``, a JSON value read as its JSON text) given its
    ``source``, or None (ledger/injection.py)."""
    from_user = source == "user_statement"
    for said in (text, value):
        if said is not None and not isinstance(said, str):
            said = json.dumps(said, ensure_ascii=False)
        kind = screen(said, from_user=from_user) if said else None
        if kind is not None:
            return kind
    return None


def message_text(row: dict[str, Any]) -> str:
    """A message's text as a search hit carries it: the text, or the withheld notice when it reads as an instruction
    to the assistant for its role (a search hit is read by the agent as much as ``context`` is)."""
    kind = screen(row.get("text"), from_user=row.get("role") in TRUSTED_ROLES) or (
        screen(row.get("speaker"), from_user=False) if row.get("speaker") else None)
    return notice(kind) if kind is not None else row.get("text") or ""


def message_kinds(msgs: list[dict[str, Any]]) -> list[str | None]:
    """The poisoning kind of each message in ``msgs`` (rows in order, with ``session_id``, ``role``, ``text``), or
    None. Adjacent messages of one session and role are screened joined too, so an instruction split over two tool
    messages is withheld in both."""
    kinds: list[str | None] = [None] * len(msgs)
    i = 0
    while i < len(msgs):
        j = i
        while j + 1 < len(msgs) and (msgs[j + 1].get("session_id"), msgs[j + 1].get("role")) == (
                msgs[i].get("session_id"), msgs[i].get("role")):
            j += 1
        run = msgs[i:j + 1]
        kinds[i:j + 1] = screen_joined([m.get("text") for m in run], from_user=msgs[i].get("role") in TRUSTED_ROLES)
        i = j + 1
    for n, m in enumerate(msgs):  # a speaker's name is stored text too ("Bob\n## Profile ...")
        if kinds[n] is None and m.get("speaker"):
            kinds[n] = screen(m["speaker"], from_user=False)
    return kinds


def other_source_kind(text: str | None) -> str | None:
    """The poisoning kind of a summary or a state-card line (another source than the user), or None."""
    return screen(text, from_user=False)


class WithheldText(BaseModel):
    """A stored text withheld from ``context`` because it reads as an instruction to the assistant (``memledger
    quarantine USER --json``: an item of ``withheld_texts``).

    ``path``: message | summary | card | fact; ``kind``: override | identity | exfiltration | structure |
    instruction (ledger/injection.py); ``reason``: what that kind means; ``session_id`` / ``message_id`` /
    ``role`` / ``key``: where it is; ``observed_at``: when it was said or written (UTC)."""

    path: Literal["message", "summary", "card", "fact"]
    kind: str
    reason: str
    text: str
    session_id: str | None = None
    message_id: str | None = None
    role: str | None = None
    key: str | None = None
    observed_at: datetime | None = None


def withheld_texts(ml: Any, user_id: str, facts: dict[str, Any] | None = None) -> list[WithheldText]:
    """Every stored message, summary and open-card line of ``user_id`` (and current fact of ``facts``, a profile's
    ``facts``) that ``context`` withholds, in that order."""
    out: list[WithheldText] = []
    with ml.db.read() as cur:
        msgs = ml.messages_projection.all(cur, user_id)
        summaries = ml.summaries_projection.rows(cur, user_id)
        cards = ml.state_cards_projection.open_cards(cur, user_id)
    for m, kind in zip(msgs, message_kinds(msgs)):
        if kind is not None:
            out.append(WithheldText(path="message", kind=kind, reason=REASONS[kind], text=m["text"] or "",
                                    session_id=m["session_id"], message_id=m["message_id"], role=m["role"],
                                    observed_at=from_micros(m["observed_at"])))
    for s in summaries:
        kind = other_source_kind(s["text"])
        if kind is not None:
            out.append(WithheldText(path="summary", kind=kind, reason=REASONS[kind], text=s["text"],
                                    session_id=s["session_id"], observed_at=from_micros(s["observed_at"])))
    for c in cards:
        for line in card_lines(c):
            kind = other_source_kind(line)
            if kind is not None:
                out.append(WithheldText(path="card", kind=kind, reason=REASONS[kind], text=line,
                                        session_id=c["session_id"], observed_at=from_micros(c["updated_at"])))
    for key, f in sorted((facts or {}).items()):
        if getattr(f, "sensitivity", None):
            continue  # a labelled fact is withheld from context by its label already; listing it here would show it
        kind = fact_kind(f.text, f.source, f.value)
        if kind is not None:
            out.append(WithheldText(path="fact", kind=kind, reason=REASONS[kind], text=f.text or str(f.value),
                                    key=key, observed_at=getattr(f, "observed_at", None)))
    return out


def card_lines(card: dict[str, Any]) -> list[str]:
    """The stored strings of a state card: task, progress, decisions, open questions, action items."""
    lines = [card.get("task") or "", card.get("progress") or ""]
    for name in ("decisions", "open_questions", "action_items"):
        lines += list(card.get(name) or [])
    return [x for x in lines if x]


_LINE_BREAKS = re.compile(r"\r\n|[\n\r\v\f\x1c-\x1e\x85\u2028\u2029]")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1f\x7f-\x84\x86-\x9f]")
_TEMPLATE = re.compile(r"<\|([^|<>\n]{0,40})\|>|<\|([^|<>\n]{0,40})>|\[(/?)INST\]|<<(/?)SYS>>"
                       r"|<(/?)(system|assistant|user|developer|s)>", re.IGNORECASE)


def _neutral(m: re.Match[str]) -> str:
    """A chat-template token with its delimiters swapped for look-alike brackets: readable, no longer the token."""
    tok = m.group(0)
    return tok.replace("<|", "‹|").replace("|>", "|›").replace("<<", "‹‹").replace(">>", "››").replace(
        "[", "⟦").replace("]", "⟧").replace("<", "‹").replace(">", "›")


def as_data(text: str | None) -> str:
    """``text`` as one line of quoted data for ``context``: line breaks shown as `` ⏎ `` (so no line of stored text
    can start a heading or a role marker), terminal escape sequences and control characters removed, and chat-template
    tokens (``<|im_start|>``, ``[INST]``, ``<<SYS>>``, ``<system>``) neutralised by swapping their brackets for
    look-alikes."""
    if not text:
        return text or ""
    if not text.isascii() or _LINE_BREAKS.search(text) or _CONTROL.search(text) or "<" in text or "[" in text:
        text = _ANSI.sub("", text)
        text = _LINE_BREAKS.sub(" ⏎ ", text)
        text = _CONTROL.sub("", text)
        text = _TEMPLATE.sub(_neutral, text)
    return text
