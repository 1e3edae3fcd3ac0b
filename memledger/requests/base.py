"""What every request shares: the base model, its refusal (:class:`RequestError`) and how a face names the request's
fields in one (:class:`Names`). See the package's docstring."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from ledger.errors import BadInput
from ledger.schemas import check_user_id, pydantic_problem

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




def numeric(annotation: Any) -> bool:
    """True if a field annotated ``annotation`` takes a number (int or float, optionally None), not a bool."""
    import typing

    kinds = set(typing.get_args(annotation)) or {annotation}
    return bool(kinds & {int, float}) and bool not in kinds


class NumbersNotBooleans(BaseModel):
    """Mixed into a request or argument model: a number field refuses ``true`` / ``false`` (pydantic reads them as 1
    and 0, so ``{"k": true}`` would ask for one hit), naming the field, on every face."""

    @field_validator("*", mode="before")
    @classmethod
    def _not_boolean(cls, value: Any, info: Any) -> Any:
        field = cls.model_fields.get(info.field_name)
        if isinstance(value, bool) and field is not None and numeric(field.annotation):
            default = field.default
            example = default if isinstance(default, (int, float)) and not isinstance(default, bool) else 1
            raise BadInput(info.field_name, f"is a boolean ({str(value).lower()}), not a number",
                           f"give {info.field_name} as a number, e.g. {example}")
        return value


class Request(NumbersNotBooleans):
    """What every request shares: frozen once built, no field but its own, and every refusal a
    :class:`RequestError` naming the field (pydantic's own refusals are worded the same way); a number field
    refuses true and false (:class:`NumbersNotBooleans`)."""

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


class UserRequest(Request):
    """A request about one user: ``user_id`` checked once here (each verb's model declares and describes it)."""

    @field_validator("user_id", mode="before", check_fields=False)
    @classmethod
    def _user(cls, v: Any) -> str:
        return _as("user_id", check_user_id, v)


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

