"""The checks the requests run on their fields, shared with the verbs that take the same values (every read's
grant: ``allow_sensitive``, ``purpose``), and the limits they enforce."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any, Literal

from pydantic import ValidationError, ValidationInfo, field_validator

from ledger.errors import BadInput
from ledger.schemas import check_identifier, check_label, check_text, check_user_id

from ..defaults import DEFAULT_ROLE_BONUS
from .base import RequestError, UserRequest, _as

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


class ReadRequest(UserRequest):
    """What a read in scopes shares (search, context): the scopes, the labels allowed and why, the instants (the
    cut-off, context's clock) and the confidence floor, each checked once here; each verb's model declares and describes the fields."""

    @field_validator("agent_id", "run_id", mode="before", check_fields=False)
    @classmethod
    def _scope(cls, v: Any, info: ValidationInfo) -> str | None:
        return _as(info.field_name, check_identifier, v, info.field_name)

    @field_validator("allow_sensitive", mode="before", check_fields=False)
    @classmethod
    def _allow(cls, v: Any) -> frozenset[str]:
        return _as("allow_sensitive", check_allow_sensitive, v)

    @field_validator("purpose", mode="before", check_fields=False)
    @classmethod
    def _purpose(cls, v: Any) -> str | None:
        return _as("purpose", check_purpose, v)

    @field_validator("as_of", "now", mode="before", check_fields=False)
    @classmethod
    def _instant(cls, v: Any, info: ValidationInfo) -> datetime | None:
        from ledger.timeutil import parse_instant

        return None if v is None else _as(info.field_name, parse_instant, v, info.field_name)

    @field_validator("min_confidence", mode="before", check_fields=False)
    @classmethod
    def _min_confidence(cls, v: Any) -> float | None:
        from ledger.hygiene import check_min_confidence

        return _as("min_confidence", check_min_confidence, v)
