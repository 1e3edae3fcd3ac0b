"""``ContextRequest``: one prompt-ready context, every option of it described, constrained and checked here."""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from ..scopes import AGENT_HELP, RUN_HELP, Scope
from .base import RequestError, _as
from .checks import MAX_K, MAX_QUERY, ReadRequest

Axis = Literal["system", "observed"]


class ContextRequest(ReadRequest):
    """One context (``MemoryLedger.context``, ``memledger context``, the MCP tool ``context``, ``GET|POST
    /v1/users/{user_id}/context``): whose, for which session and query, within which budget, as of when.

    Normalised when built: ``now`` and ``as_of`` aware UTC datetimes, ``allow_sensitive`` a frozenset of labels. See
    :func:`memledger.context.assemble` for what each section holds.

    Raises:
        RequestError: a :class:`~ledger.errors.BadInput` naming the field and the fix (nothing read or written).
    """

    verb: ClassVar[str] = "context"

    user_id: str = Field(description="Whose context.")
    session_id: str | None = Field(None, description="Session whose card and messages (default the latest).")
    query: str | None = Field(None, max_length=MAX_QUERY, description="What the agent is about to do (selects "
                              f"memories; at most {MAX_QUERY} characters).")
    now: datetime | None = Field(None, description="The clock the text is written for, ISO 8601 with an offset "
                                 "(default now).")
    budget: int = Field(2000, ge=1, description="Token budget.")
    recent_messages: int = Field(20, ge=0, le=MAX_K, description="How many recent messages of the session to start "
                                 "from (before the budget).")
    memories: int = Field(30, ge=0, le=MAX_K, description="How many memories the query selects at most.")
    allow_sensitive: frozenset[str] = Field(frozenset(), description="Sensitivity labels to let in (health, "
                                            "finance); labelled facts are left out otherwise, and each one let in "
                                            "is recorded.")
    purpose: str | None = Field(None, description="Why (kept with each disclosure).")
    trace_id: str | None = Field(None, description="Kept with each disclosure this context records.")
    after: Any = Field(None, description="A log position from an earlier receipt (or the receipt): answer only once "
                       "every projection includes it (read-your-writes across processes).")
    timeout: float = Field(10.0, description="How long to wait for `after`, in seconds.")
    as_of: datetime | None = Field(None, description="Knowledge cut-off: only what the ledger knew at this instant.")
    axis: Axis = Field("system", description="system: as_of is recorded time; observed: it is when things were "
                       "said.")
    min_confidence: float | None = Field(None, ge=0, le=1, description="Leave out facts and memories recorded with "
                                         "a lower confidence (0..1; hedged statements are recorded at 0.6 at most).")
    agent_id: str | None = Field(None, description=AGENT_HELP + " Narrows the profile and the memories; with run_id, "
                                 "both must match.")
    run_id: str | None = Field(None, description=RUN_HELP + " Narrows the profile and the memories (session_id "
                               "picks the card and messages); with agent_id, both must match.")

    @field_validator("session_id", mode="before")
    @classmethod
    def _session(cls, v: Any) -> str | None:
        from ledger.sessions import check_session_id

        return None if v is None else _as("session_id", check_session_id, v)

    @field_validator("budget", mode="before")
    @classmethod
    def _budget(cls, v: Any) -> int:
        if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
            raise RequestError("budget", f"{v!r} is not a positive number of tokens",
                               lambda n: "e.g. " + n.example("budget", 2000))
        return v

    @field_validator("recent_messages", "memories", mode="before")
    @classmethod
    def _counts(cls, v: Any, info: Any) -> int:
        name = info.field_name
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_K:
            raise RequestError(name, f"{v!r} is not a whole number from 0 to {MAX_K}",
                               lambda n: f"e.g. {n.example(name, 20)} (0 leaves the section out)")
        return v

    @field_validator("query", mode="before")
    @classmethod
    def _query(cls, v: Any) -> str | None:
        if v is None:
            return None
        if not isinstance(v, str) or not v.strip():
            raise RequestError("query", "is empty", "leave it out, or say what the agent is about to do")
        if len(v) > MAX_QUERY:
            raise RequestError("query", f"is {len(v)} characters long", f"ask in at most {MAX_QUERY} characters")
        return v

    @field_validator("axis", mode="before")
    @classmethod
    def _axis(cls, v: Any) -> str:
        if v not in ("system", "observed"):
            raise RequestError("axis", f"{v!r} is not an axis",
                               "use system (recorded by then) or observed (said by then)")
        return v

    @model_validator(mode="after")
    def _together(self) -> ContextRequest:
        """The checks of several fields at once, once each field passed its own."""
        if self.axis != "system" and self.as_of is None:
            raise RequestError("axis", "is given without as_of", lambda n: (
                f"give {n['as_of']} (the cut-off it applies to), or leave {n['axis']} out"))
        return self

    @property
    def scope(self) -> Scope:
        """The agent and run this context is limited to (memledger/scopes.py)."""
        return Scope(self.agent_id, self.run_id)
