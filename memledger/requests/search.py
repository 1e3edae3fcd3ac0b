"""``SearchRequest``: one search, every option of it described, constrained and checked here."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any, ClassVar, get_args

from pydantic import Field, ValidationInfo, field_validator, model_validator

from ledger.schemas import Source, check_text
from ledger.text import INVISIBLE

from ..defaults import DEFAULT_ROLE_BONUS
from ..scopes import AGENT_HELP, RUN_HELP, Scope
from .base import RequestError, _as
from .checks import (MAX_EXPAND, MAX_K, MAX_QUERY, MAX_SCORE, SEARCH_IN, ReadRequest, Within, check_also,
                     check_expand, check_role_bonus, check_role_name)


class SearchRequest(ReadRequest):
    """One search (``MemoryLedger.search``, ``memledger search``, the MCP tool ``recall``, ``POST
    /v1/users/{user_id}/search``): whose memories, what to look for, and every option, checked.

    Normalised when built: ``as_of`` an aware UTC datetime, ``allow_sensitive`` a frozenset of labels, ``also``
    the other users each once (the first user left out), ``exclude_source`` each source once, ``half_lives`` a dict
    of floats, or None for the store's own. See :mod:`memledger.search` for how a hit is scored.

    Raises:
        RequestError: a :class:`~ledger.errors.BadInput` naming the field and the fix (nothing read or written).
    """

    verb: ClassVar[str] = "search"

    user_id: str = Field(description="Whose memories to search.")
    query: str = Field(max_length=MAX_QUERY, description=f"What to look for (at most {MAX_QUERY} characters).")
    k: int = Field(10, ge=1, le=MAX_K, description=f"How many hits (1..{MAX_K}).")
    as_of: datetime | None = Field(None, description="Search what the ledger believed at this instant (ISO 8601 "
                                   "with an offset).")
    source: Source | None = Field(None, description="Only memories from this source (user_statement | "
                                  "agent_inference | external_import | system_feedback); applied before the top k is "
                                  "cut.")
    role: str | None = Field(None, description="The agent's current role: memories recorded under it rank higher "
                             "(role_bonus).")
    after: Any = Field(None, description="A log position from an earlier receipt (or the receipt): answer only once "
                       "every projection includes it (read-your-writes across processes).")
    timeout: float = Field(10.0, description="How long to wait for `after`, in seconds.")
    half_lives: dict[str, float] | None = Field(None, description="Freshness half-life in seconds per key prefix, "
                                                "e.g. {\"session.\": 86400} (default the ledger's).")
    role_bonus: float = Field(DEFAULT_ROLE_BONUS, ge=0, le=1, description="Score added to a memory recorded under "
                              f"`role` (0..1; default {DEFAULT_ROLE_BONUS}).")
    allow_sensitive: frozenset[str] = Field(frozenset(), description="Sensitivity labels to let in (health, "
                                            "finance); labelled facts are left out otherwise, and each one let in "
                                            "is recorded.")
    purpose: str | None = Field(None, description="Why sensitive facts are asked for (kept with each disclosure).")
    trace_id: str | None = Field(None, description="Kept with each disclosure this search records.")
    also: tuple[str, ...] = Field((), description="Other users to search too: hits then carry user_id and are "
                                  "merged by score.")
    min_score: float | None = Field(None, ge=0, le=MAX_SCORE, description="Drop hits scoring below this (scores are "
                                    "absolute; below 0.3 is a weak match). Default: nothing is cut.")
    role_filter: str | None = Field(None, min_length=1, description="Only memories recorded under this role.")
    exclude_source: tuple[Source, ...] = Field((), description="Leave out memories from these sources.")
    within: Within = Field("facts", description="What to search: facts, messages (logged turns) or all.")
    min_confidence: float | None = Field(None, ge=0, le=1, description="Leave out memories recorded with a lower "
                                         "confidence (0..1; hedged statements are recorded at 0.6 at most).")
    expand: int = Field(0, ge=0, le=MAX_EXPAND, strict=True, description="Also the memories of the people the query "
                        "names and of those their relations lead to, in that many hops (0-3; 0: none); each such "
                        "hit carries `path`.")
    linked: bool = Field(True, strict=True, description="Also the memories of the user ids confirmed as the same "
                         "person (identity links); each hit carries its user_id.")
    agent_id: str | None = Field(None, description=AGENT_HELP + " With run_id, both must match; applied before the "
                                 "top k is cut.")
    run_id: str | None = Field(None, description=RUN_HELP + " With agent_id, both must match; applied before the top "
                               "k is cut.")

    @field_validator("query", mode="before")
    @classmethod
    def _query(cls, v: Any) -> str:
        if not isinstance(v, str) or not v.strip(INVISIBLE):
            raise RequestError("query", "is empty", "give the text to search for, e.g. 'what does the user drink?'")
        _as("query", check_text, v, "query")
        if len(v) > MAX_QUERY:
            # a question, not a document: a long query costs an embedding of the whole of it and a BM25 pass per term
            raise RequestError("query", f"is {len(v)} characters long", f"ask in at most {MAX_QUERY} characters")
        return v

    @field_validator("k", mode="before")
    @classmethod
    def _k(cls, v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_K:
            raise RequestError("k", f"{v!r} is not a whole number from 1 to {MAX_K}",
                               lambda n: "e.g. " + n.example("k", 10))
        return v

    @field_validator("source", mode="before")
    @classmethod
    def _source(cls, v: Any) -> Any:
        sources = get_args(Source)
        if v is not None and v not in sources:
            raise RequestError("source", f"{v!r} is not a source", "use one of " + ", ".join(sources))
        return v

    @field_validator("role", "role_filter", mode="before")
    @classmethod
    def _role(cls, v: Any, info: ValidationInfo) -> str | None:
        return None if v is None else _as(info.field_name, check_role_name, v, info.field_name)

    @field_validator("half_lives", mode="before")
    @classmethod
    def _half_lives(cls, v: Any) -> dict[str, float] | None:
        from ..store import check_half_lives

        return None if v is None else _as("half_lives", check_half_lives, v)

    @field_validator("role_bonus", mode="before")
    @classmethod
    def _role_bonus(cls, v: Any) -> float:
        return DEFAULT_ROLE_BONUS if v is None else _as("role_bonus", check_role_bonus, v)

    @field_validator("also", mode="before")
    @classmethod
    def _also(cls, v: Any, info: ValidationInfo) -> tuple[str, ...]:
        return check_also(info.data.get("user_id"), v)  # the first user, when valid, is left out

    @field_validator("min_score", mode="before")
    @classmethod
    def _min_score(cls, v: Any) -> float | None:
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 <= v <= MAX_SCORE:
            raise RequestError("min_score", f"{v!r} is not a number from 0 to {MAX_SCORE:g}", lambda n: (
                f"e.g. {n.example('min_score', 0.3)}, the weak-match threshold (a score is relevance x confidence x "
                "freshness, each at most 1, plus a role bonus of at most 1)"))
        return float(v)

    @field_validator("exclude_source", mode="before")
    @classmethod
    def _exclude_source(cls, v: Any) -> tuple[str, ...]:
        if v is None:
            return ()
        items = [v] if isinstance(v, str) else v
        if not isinstance(items, (list, tuple)):
            raise RequestError("exclude_source", "is not a list of sources",
                               lambda n: "e.g. " + n.list_example("exclude_source", "agent_inference"))
        sources = get_args(Source)
        excluded: list[str] = []
        for x in items:
            if x not in sources:
                raise RequestError("exclude_source", f"{x!r} is not a source", "use one of " + ", ".join(sources))
            if x not in excluded:
                excluded.append(x)
        return tuple(excluded)

    @field_validator("within", mode="before")
    @classmethod
    def _within(cls, v: Any) -> str:
        if v is None:
            return "facts"
        if v not in SEARCH_IN:
            raise RequestError("within", f"{v!r} is not one of {', '.join(SEARCH_IN)}",
                               lambda n: "e.g. " + n.example("within", "all"))
        return v

    @field_validator("expand", mode="before")
    @classmethod
    def _expand(cls, v: Any) -> int:
        return _as("expand", check_expand, v)

    @model_validator(mode="after")
    def _together(self) -> SearchRequest:
        """The checks of several fields at once, once each field passed its own."""
        if self.within != "facts" and self.as_of is not None:
            raise RequestError("within", "messages cannot be searched as of an instant (only facts have a belief "
                               "history)", lambda n: f"drop {n['as_of']}, or search facts only")
        if self.within == "messages" and self.agent_id is not None:
            raise RequestError("within", "messages record no agent, so this filter would leave nothing",
                               lambda n: f"drop {n['agent_id']}, or search " + n.example("within", "all"))
        if self.within == "messages" and (self.role_filter is not None or self.source is not None):
            raise RequestError("within", "messages have no source or recorded role, so this filter would leave "
                               "nothing", lambda n: f"drop {n['source']} / {n['role_filter']}, or search "
                               + n.example("within", "all"))
        if self.source is not None and self.source in self.exclude_source:
            raise RequestError("exclude_source", f"excludes {self.source!r}, the only source asked for",
                               "drop one of the two")
        return self

    @property
    def filtered(self) -> bool:
        """Whether a filter may drop hits (so the candidate pool grows until ``k`` pass)."""
        return self.source is not None or bool(self.exclude_source) or self.role_filter is not None \
            or self.min_score is not None or self.min_confidence is not None or bool(self.scope)

    @property
    def scope(self) -> Scope:
        """The agent and run this search is limited to (memledger/scopes.py)."""
        return Scope(self.agent_id, self.run_id)
