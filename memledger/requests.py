"""The requests of the verbs that every face offers: one pydantic model per verb, built once by whichever face took
the call (the Python API, the CLI, an MCP tool, an HTTP route) and passed down to the capability.

Each field exists here once, with its description, default and constraints; the faces' argument models are made
from these (memledger/servers/models.py), and ``tests/test_request_models.py`` checks that every face reaches every
field. The checks run here, once, when the request is built: a refusal is a :class:`RequestError` (a
:class:`~ledger.errors.BadInput`) naming the request's field, and nothing is read or written.

A refusal is worded once, in terms of the request: its problem and fix may name other fields or give an example,
and each face renders them in its own terms through :class:`Names` (the CLI's ``--as-of`` and ``--in all``, an MCP
argument or HTTP field ``as_of`` and ``within="all"``). The Python API shows the request's own names.

Flow: face -> request (validated here) -> capability (``memledger/search.py`` takes a :class:`SearchRequest`; the
sensitivity gate, ``memledger/sensitivity.py``, wraps it).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, ClassVar, Literal, get_args

from pydantic import (BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator,
                      model_validator)

from ledger.errors import BadInput
from ledger.schemas import Source, check_label, check_text, check_user_id, pydantic_problem
from ledger.text import INVISIBLE

from .defaults import DEFAULT_ROLE_BONUS

#: most hits one search returns
MAX_K = 1000
#: the highest score there is: relevance, confidence and freshness at most 1, a role bonus at most 1
MAX_SCORE = 2.0
#: what ``within`` (the CLI's ``--in``) accepts
SEARCH_IN = ("facts", "messages", "all")
#: most users one search may name (the first plus ``also``)
MAX_USERS = 50
#: the longest query accepted, in characters (a question; a sentence to remember may be longer: MAX_TEXT)
MAX_QUERY = 4000
#: how far a search's walk along the user's relations goes at most (``expand``; the relation layer's own limit)
MAX_EXPAND = 3

Within = Literal["facts", "messages", "all"]


# ------------------------------------------------------------------------------------------------------ wording


class Names:
    """How one face spells a request's fields in its refusals.

    ``names[field]`` is the field as the face's caller knows it (``--as-of`` on the CLI, ``as_of`` elsewhere);
    :meth:`field` what a refusal's ``field`` says (the CLI: the option's name without dashes, ``in`` for
    ``--in``); :meth:`example` and :meth:`list_example` show how to give a value (``--in all``,
    ``within='all'``). ``cli``: the face is the command line. ``fields``: the face's spelling of each field whose
    spelling differs from the request's (the CLI reads it from its command's options).
    """

    def __init__(self, face: str = "python", fields: Mapping[str, str] | None = None) -> None:
        self.face = face
        self.fields = dict(fields or {})

    @property
    def cli(self) -> bool:
        return self.face == "cli"

    def __getitem__(self, field: str) -> str:
        return self.fields.get(field, field)

    def field(self, field: str) -> str:
        """The name a refusal of ``field`` is reported under."""
        return self[field].lstrip("-").replace("-", "_") if self.cli else self[field]

    def example(self, field: str, value: Any) -> str:
        """How a caller of this face gives ``field`` the value ``value``."""
        if self.cli:
            return f"{self[field]} {value}"
        if self.face == "python":
            return f"{field}={value!r}"
        return f"{field}={json.dumps(value, ensure_ascii=False)}"

    def list_example(self, field: str, item: Any) -> str:
        """How a caller of this face gives ``field`` a list holding ``item``."""
        if self.cli:
            return f"{self[field]} {item} (repeatable)"
        if self.face == "python":
            return f"{field}=[{item!r}]"
        return f"{field}=[{json.dumps(item, ensure_ascii=False)}]"


#: the request's own names (the Python API)
PYTHON = Names()

Wording = str | Callable[[Names], str]


def _render(text: Wording, names: Names) -> str:
    return text(names) if callable(text) else text


class RequestError(BadInput):
    """A refused request field: ``field``, ``problem`` and ``fix`` as :class:`~ledger.errors.BadInput`, worded in the
    request's own names; :meth:`worded` gives the same refusal in a face's terms (:class:`Names`). ``problem`` and
    ``fix`` are text, or functions of the face's :class:`Names` when they name a field or give an example."""

    def __init__(self, field: str, problem: Wording, fix: Wording = "", names: Names = PYTHON) -> None:
        self.request_field = field
        self._wording = (problem, fix)
        super().__init__(names.field(field), _render(problem, names), _render(fix, names))

    def worded(self, names: Names) -> RequestError:
        """This refusal in the terms of the face ``names`` describes."""
        problem, fix = self._wording
        return RequestError(self.request_field, problem, fix, names)


def _as(field: str, check: Callable[..., Any], *args: Any) -> Any:
    """``check(*args)`` with its refusal named ``field`` (a :class:`RequestError`)."""
    try:
        return check(*args)
    except RequestError:
        raise
    except BadInput as exc:
        raise RequestError(field, exc.problem, exc.fix) from None


# --------------------------------------------------------------------------------------------------- the checks


def check_allow_sensitive(labels: Any, field: str = "allow_sensitive") -> frozenset[str]:
    """Validate the labels a caller lets into a read: a list of labels (``["health"]``; each a lowercase identifier,
    :func:`ledger.schemas.check_label`), a comma-separated string, or None.

    Raises:
        BadInput: naming ``field``.
    """
    if labels is None:
        return frozenset()
    if isinstance(labels, str):
        labels = [labels]
    if not isinstance(labels, (list, tuple, set, frozenset)):
        raise BadInput(field, f"is a {type(labels).__name__}", "give a list of labels such as [\"health\"]")
    # each item may itself be comma-separated (a query string's allow_sensitive=health,finance)
    labels = [part for x in labels for part in (x.split(",") if isinstance(x, str) else [x])]
    out = set()
    for x in labels:
        if not isinstance(x, str) or not x.strip():
            raise BadInput(field, f"{x!r} is not a label", "give labels such as health,finance (comma-separated)")
        out.add(check_label(x.strip(), field))  # a lowercase identifier, as recorded labels are
    return frozenset(out)


def check_purpose(purpose: Any, field: str = "purpose") -> str | None:
    """Validate why a caller lets labelled facts out (kept, encrypted, with each disclosure): None, or non-blank text
    without control characters, at most ``MAX_TEXT`` characters. Raises BadInput naming ``field``."""
    from ledger.schemas import MAX_TEXT

    if purpose is None:
        return None
    if not isinstance(purpose, str) or not purpose.strip():
        raise BadInput(field, "is empty", "say why the labelled facts are needed, or leave it out")
    if len(purpose) > MAX_TEXT:
        raise BadInput(field, f"is {len(purpose)} characters long", f"use at most {MAX_TEXT}")
    return check_text(purpose, field)


def check_role_name(role: Any, field: str) -> str:
    """A role as ``search --role`` / ``--role-filter`` name it: the same rule as a recorded role
    (:class:`ledger.schemas.RoleContext`). Raises BadInput naming ``field``."""
    from ledger.schemas import RoleContext

    if not isinstance(role, str):
        raise BadInput(field, f"must be a role name (a string), got {type(role).__name__}", "e.g. coach")
    try:
        RoleContext(role=role)
    except ValidationError as exc:
        raise BadInput(field, str(exc.errors()[0]["msg"]).removeprefix("Value error, "),
                       "name the role as it was recorded, e.g. coach") from None
    return role


def check_expand(value: Any, field: str = "expand") -> int:
    """0 (no expansion, the default), 1, 2 or 3 hops. Raises BadInput naming ``field``."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_EXPAND:
        raise BadInput(field, f"{value!r} is not 0, 1, 2 or 3",
                       f"give 0 to {MAX_EXPAND}: how many relation hops to follow (0: none)")
    return value


def check_role_bonus(role_bonus: Any) -> float:
    """``role_bonus`` in [0, 1] (added to the score of a memory recorded under the caller's role). Raises BadInput."""
    if isinstance(role_bonus, bool) or not isinstance(role_bonus, (int, float)) or not math.isfinite(role_bonus) \
            or not 0 <= role_bonus <= 1:
        raise BadInput("role_bonus", f"{role_bonus!r} is not a number from 0 to 1", f"e.g. {DEFAULT_ROLE_BONUS}")
    return float(role_bonus)


def check_also(user_id: Any, also: Any) -> tuple[str, ...]:
    """The other users a search names: user ids, each once, the first user left out, at most
    :data:`MAX_USERS` in all. Raises a :class:`RequestError` naming ``also``."""
    if also is None:
        return ()
    if isinstance(also, str) or not isinstance(also, (list, tuple)):
        raise RequestError("also", "is not a list of user ids", lambda n: "e.g. " + n.list_example("also", "u2"))
    first = check_user_id(user_id) if user_id is not None else None
    users: list[str] = []
    for u in also:
        u = _as("also", check_user_id, u, "also")
        if u != first and u not in users:
            users.append(u)
    if len(users) + 1 > MAX_USERS:
        raise RequestError("also", f"names {len(users) + 1} users; at most {MAX_USERS} per search",
                           "search fewer users per call")
    return tuple(users)


# ------------------------------------------------------------------------------------------------ the requests


class Request(BaseModel):
    """What every request shares: frozen once built, no field but its own, and every refusal a
    :class:`RequestError` naming the field (pydantic's own refusals are worded the same way)."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    #: the verb this request is for (``search``), as the faces name it
    verb: ClassVar[str] = ""

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise _refusal(exc) from None

    def arguments(self) -> dict[str, Any]:
        """The request's fields as the verb's keywords (``MemoryLedger.search(**request.arguments())``)."""
        return {name: getattr(self, name) for name in type(self).model_fields}


def _refusal(exc: ValidationError) -> RequestError:
    """The first refusal of a request's validation: the check's own :class:`RequestError`, or pydantic's worded as
    memledger words a refusal (:func:`ledger.schemas.pydantic_problem`)."""
    errors = exc.errors()
    err = errors[0] if errors else {"loc": (), "msg": "invalid", "type": "value_error"}
    inner = (err.get("ctx") or {}).get("error")
    if isinstance(inner, RequestError):
        return inner
    field = ".".join(str(p) for p in err.get("loc", ())) or "request"
    if isinstance(inner, BadInput):
        return RequestError(field, inner.problem, inner.fix)
    return RequestError(field, pydantic_problem(err), "see the verb's documentation for its arguments")


class SearchRequest(Request):
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

    @field_validator("user_id", mode="before")
    @classmethod
    def _user(cls, v: Any) -> str:
        return _as("user_id", check_user_id, v)

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

    @field_validator("as_of", mode="before")
    @classmethod
    def _as_of(cls, v: Any) -> datetime | None:
        from ledger.timeutil import parse_instant

        return None if v is None else _as("as_of", parse_instant, v, "as_of")

    @field_validator("source", mode="before")
    @classmethod
    def _source(cls, v: Any) -> Any:
        sources = get_args(Source)
        if v is not None and v not in sources:
            raise RequestError("source", f"{v!r} is not a source", "use one of " + ", ".join(sources))
        return v

    @field_validator("role", mode="before")
    @classmethod
    def _role(cls, v: Any) -> str | None:
        return None if v is None else _as("role", check_role_name, v, "role")

    @field_validator("half_lives", mode="before")
    @classmethod
    def _half_lives(cls, v: Any) -> dict[str, float] | None:
        from .store import check_half_lives

        return None if v is None else _as("half_lives", check_half_lives, v)

    @field_validator("role_bonus", mode="before")
    @classmethod
    def _role_bonus(cls, v: Any) -> float:
        return DEFAULT_ROLE_BONUS if v is None else _as("role_bonus", check_role_bonus, v)

    @field_validator("allow_sensitive", mode="before")
    @classmethod
    def _allow(cls, v: Any) -> frozenset[str]:
        return _as("allow_sensitive", check_allow_sensitive, v)

    @field_validator("purpose", mode="before")
    @classmethod
    def _purpose(cls, v: Any) -> str | None:
        return _as("purpose", check_purpose, v)

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

    @field_validator("role_filter", mode="before")
    @classmethod
    def _role_filter(cls, v: Any) -> str | None:
        return None if v is None else _as("role_filter", check_role_name, v, "role_filter")

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

    @field_validator("min_confidence", mode="before")
    @classmethod
    def _min_confidence(cls, v: Any) -> float | None:
        from ledger.hygiene import check_min_confidence

        return _as("min_confidence", check_min_confidence, v)

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
            or self.min_score is not None or self.min_confidence is not None


__all__ = ["MAX_EXPAND", "MAX_K", "MAX_QUERY", "MAX_SCORE", "MAX_USERS", "Names", "PYTHON", "Request",
           "RequestError", "SEARCH_IN", "SearchRequest", "check_allow_sensitive", "check_also", "check_expand",
           "check_purpose", "check_role_bonus", "check_role_name"]
