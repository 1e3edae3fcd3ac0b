"""``RememberRequest``: one free-text statement to remember, every argument of it described, constrained and checked
here."""

from __future__ import annotations

import unicodedata
from datetime import datetime
from typing import Any, ClassVar, get_args

from pydantic import Field, ValidationError, field_validator, model_validator

from ledger.schemas import (MAX_TEXT, FactCommand, RoleContext, Source, check_confidence, check_identifier,
                            check_instant, check_key, check_text, pydantic_problem)
from ledger.text import INVISIBLE

from ..scopes import SCOPE_FIELDS
from .base import RequestError, UserRequest, _as
from .checks import check_role_name

#: what the ledger's command carries from the request, besides user, key and text (the provenance of the statement)
PROVENANCE = ("observed_at", "valid_from", "source", "source_ref", "session_id", "actor", "trace_id", "confidence",
              "role", "sensitivity", "idempotency_key")


class RememberRequest(UserRequest):
    """One statement to remember (``MemoryLedger.remember``, ``memledger remember``, the MCP tool ``remember``,
    ``POST /v1/users/{user_id}/memories``): whose, what was said, where it came from, and where it may land.

    Normalised when built: ``text`` stripped, instants aware UTC datetimes, ``source`` given (default
    ``user_statement``), ``confidence`` a float, ``role`` a :class:`~ledger.schemas.RoleContext` (a face gives the
    role's name), ``about`` the name as stored (NFC, stripped). :meth:`command` is the ledger's command it makes;
    :func:`memledger.remember.remember` decides its key and records it.

    Raises:
        RequestError: a :class:`~ledger.errors.BadInput` naming the field and the fix (nothing read or written).
    """

    verb: ClassVar[str] = "remember"

    user_id: str = Field(description="Whose memory.")
    text: str = Field(max_length=MAX_TEXT, description="What the user said, as a sentence (\"I switched to hot "
                      f"lattes\"; at most {MAX_TEXT} characters).")
    observed_at: datetime | None = Field(None, description="When it was said (ISO 8601 with an offset; default now).")
    valid_from: datetime | None = Field(None, description="When it became true (ISO 8601 with an offset; default "
                                        "observed_at).")
    source: Source = Field("user_statement", description="Who said it: user_statement (default) | agent_inference | "
                           "external_import | system_feedback.")
    source_ref: str | None = Field(None, description="Message or document id it came from.")
    session_id: str | None = Field(None, description="Session it was said in.")
    actor: str | None = Field(None, description="Who or what recorded it.")
    trace_id: str | None = Field(None, description="Trace id of the agent turn.")
    confidence: float | None = Field(None, ge=0, le=1, description="0..1 (default by source).")
    role: RoleContext | None = Field(None, description="The role the agent plays as it records this (e.g. coach); "
                                     "search can favour or keep only memories recorded under a role.")
    sensitivity: str | None = Field(None, description="A label such as health or finance: kept out of recall and "
                                    "context unless a caller allows it.")
    idempotency_key: str | None = Field(None, description="A retried call with the same key records nothing new.")
    key: str | None = Field(None, description="Land in this dotted key instead of letting slot resolution choose "
                            "one.")
    about: str | None = Field(None, description="A person linked to the user (entity id, name or alias) who said "
                              "it, or for whom it was said: it lands in that person's slots, never the user's.")
    agent_id: str | None = Field(None, description="The agent writing it: its scope, recorded as the fact's actor "
                                 "(the same field as actor, spelled as a scope).")
    run_id: str | None = Field(None, description="The run it was written in: its scope, recorded as the fact's "
                               "session_id (the same field as session_id, spelled as a scope).")

    @field_validator("text", mode="before")
    @classmethod
    def _text(cls, v: Any) -> str:
        if not isinstance(v, str):
            raise RequestError("text", f"must be a string, got {type(v).__name__}", "pass the statement as text")
        if not v.strip(INVISIBLE):  # zero-width marks alone show nothing: the text is empty, said as `text`
            raise RequestError("text", "is empty", "give the statement to remember, e.g. 'I switched to hot lattes'")
        if len(v) > MAX_TEXT:
            raise RequestError("text", f"is {len(v)} characters long", f"use at most {MAX_TEXT}")
        return _as("text", check_text, v.strip(), "text")

    @field_validator("observed_at", "valid_from", mode="before")
    @classmethod
    def _instant(cls, v: Any, info: Any) -> datetime | None:
        return _as(info.field_name, check_instant, v, info.field_name)

    @field_validator("source", mode="before")
    @classmethod
    def _source(cls, v: Any) -> str:
        sources = get_args(Source)
        if v is None:
            return "user_statement"
        if v not in sources:
            raise RequestError("source", f"{v!r} is not a source", "use one of " + ", ".join(sources))
        return v

    @field_validator("source_ref", "session_id", "actor", "trace_id", "sensitivity", "idempotency_key", "agent_id",
                     "run_id", mode="before")
    @classmethod
    def _identifier(cls, v: Any, info: Any) -> str | None:
        return _as(info.field_name, check_identifier, v, info.field_name)

    @field_validator("confidence", mode="before")
    @classmethod
    def _confidence(cls, v: Any) -> float | None:
        return _as("confidence", check_confidence, v)

    @field_validator("role", mode="before")
    @classmethod
    def _role(cls, v: Any) -> RoleContext | None:
        if v is None or isinstance(v, RoleContext):
            return v
        if isinstance(v, str):  # the faces give the role's name
            return RoleContext(role=_as("role", check_role_name, v, "role"))
        if not isinstance(v, dict):
            raise RequestError("role", f"is not a role name (got {type(v).__name__})",
                               lambda n: "e.g. " + n.example("role", "coach"))
        try:
            return RoleContext.model_validate(v)
        except ValidationError as exc:
            err = exc.errors()[0]
            part = ".".join(str(p) for p in err.get("loc", ()))
            raise RequestError("role", (part + " " if part else "") + pydantic_problem(err),
                               'give an object such as {"role": "planner", "sub_role": null, "task_id": null}'
                               ) from None

    @field_validator("key", mode="before")
    @classmethod
    def _key(cls, v: Any) -> str | None:
        return None if v is None else _as("key", check_key, v)

    @field_validator("about", mode="before")
    @classmethod
    def _about(cls, v: Any) -> str | None:
        from ledger.mentions import check_name  # the slot catalogue behind it loads only for a remember

        return None if v is None else _as("about", check_name, v, "about")

    @model_validator(mode="after")
    def _together(self) -> RememberRequest:
        """The checks of several fields at once, once each field passed its own."""
        if self.about is not None and self.key is not None:
            raise RequestError("about", "is given with key", lambda n: (
                f"leave {n['key']} out: the statement lands in that person's slots"))
        for scope, recorded in SCOPE_FIELDS.items():
            given, have = getattr(self, scope), getattr(self, recorded)
            if given is not None and have is not None and given != have:
                raise RequestError(scope, lambda n, s=scope, r=recorded, g=given, h=have: (
                    f"{g!r} differs from {n[r]} {h!r} (the same field, spelled twice)"),
                    lambda n, s=scope, r=recorded: f"give one of {n[s]} and {n[r]}")
            # one field, two spellings: both hold the value after the check, and the command records it once
            self.__dict__[scope] = self.__dict__[recorded] = given if given is not None else have
        return self

    def command(self) -> FactCommand:
        """The ledger's command this request makes: an ``assert`` of the statement with its provenance, under
        ``key`` (a placeholder when slot resolution will choose it). Built from the checked fields, so the ledger's
        model does not check them a second time; the command remember records is made from it with its key, value
        and evidence, and checked then as every command is."""
        return FactCommand.model_construct(
            op="assert", user_id=self.user_id, key=self.key or "memory.pending", value=self.text,
            text=unicodedata.normalize("NFC", self.text), **{f: getattr(self, f) for f in PROVENANCE})
