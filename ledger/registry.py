"""The product's one key registry: the cardinality (single or multi), sensitivity label, validator and
re-verification period of a key prefix. The slot catalogue (ledger/catalogue.py) fills it; callers extend it
(``registry.register("project", "multi")``). An explicit key given to ``assert_fact`` is always one single-valued
stream, whatever the registry says; the registry only matters to slot resolution (ledger/resolution.py) and to
``remember``."""

from __future__ import annotations

import re
from typing import Annotated, Any, Callable, Literal

import pydantic

from .catalogue import CATALOGUE, Slot
from .text import has_cjk

#: what to clear when a registration changes (the cached typings of ledger/slots.py carry cardinalities)
_ON_CHANGE: list[Callable[[], None]] = []


def on_change(clear: Callable[[], None]) -> None:
    """Call ``clear`` whenever a prefix is registered: a cache of what the registry decided is stale then."""
    _ON_CHANGE.append(clear)


class KeyRegistry:
    """Cardinality of key prefixes: ``single`` or ``multi``. The catalogue fills it; callers can extend it.

    ``cardinality("pet.2")`` is ``multi`` (its prefix ``pet`` is registered multi); an unregistered key is
    ``single``. Raises ValueError on a cardinality other than single/multi.
    """

    def __init__(self, slots: tuple[Slot, ...] = CATALOGUE) -> None:
        self._card: dict[str, str] = {}
        self._sens: dict[str, str | None] = {}
        for s in slots:
            self.register(s.key, s.cardinality, s.sensitivity)

    def register(self, prefix: str, cardinality: str, sensitivity: str | None = None) -> None:
        if cardinality not in ("single", "multi"):
            raise ValueError(f"cardinality {cardinality!r}: use 'single' or 'multi'")
        self._card[prefix] = cardinality
        self._sens[prefix] = sensitivity
        for clear in _ON_CHANGE:
            clear()  # cached typings carry cardinalities

    def slot_of(self, key: str) -> str | None:
        """The registered slot a key belongs to (longest registered prefix, at a dot boundary), else None."""
        parts = key.split(".")
        for n in range(len(parts), 0, -1):
            p = ".".join(parts[:n])
            if p in self._card:
                return p
        return None

    def cardinality(self, key: str) -> str:
        slot = self.slot_of(key)
        return "single" if slot is None else self._card[slot]

    def sensitivity(self, slot: str) -> str | None:
        return self._sens.get(slot)

    def items(self) -> list[tuple[str, str]]:
        return sorted(self._card.items())

    # -- hygiene rules (seed 003 §5.1 validators, §4.3 re-verification; docs/hygiene.md) ---------------------------
    def register_validator(self, prefix: str, validator: Any, describe: str) -> None:
        """Give the keys under ``prefix`` (the key itself or ``prefix.*``) a validator: a pydantic type
        (``Annotated[int, Field(ge=0, le=120)]``, a ``Literal``), or a callable ``(value, recorded_at) -> type``
        for a bound that moves with time (``birth_year`` up to the year it is recorded in). ``describe`` is what a
        quarantine says ("must be a whole number from 0 to 120"). A value failing it is quarantined, not refused."""
        if not hasattr(self, "_validators"):
            self._validators: dict[str, tuple[Any, str]] = {}
        self._validators[prefix] = (validator, describe)

    def register_verify_after(self, prefix: str, seconds: float) -> None:
        """Facts under ``prefix`` need re-confirming ``seconds`` after they were last stated or confirmed
        (their ``observed_at``; seed 003 §4.3). Raises ValueError unless ``seconds`` > 0."""
        if not seconds > 0:
            raise ValueError(f"verify_after {seconds!r}: give a positive number of seconds")
        if not hasattr(self, "_verify_after"):
            self._verify_after: dict[str, float] = {}
        self._verify_after[prefix] = float(seconds)

    @staticmethod
    def _longest(table: dict[str, Any], key: str) -> Any:
        parts = key.split(".")
        for n in range(len(parts), 0, -1):
            hit = table.get(".".join(parts[:n]))
            if hit is not None:
                return hit
        return None

    def judged_value(self, key: str, value: Any) -> Any:
        """What :meth:`check_value` judges of ``value`` under ``key``: the one number of a sentence when the key's
        validator wants a number ("I'm 130 years old" and "I am 130" both judge as 130), else ``value`` itself. Two
        statements with the same judged value state the same thing (a quarantine release compares these)."""
        found = self._longest(getattr(self, "_validators", {}), key)
        if found is None or not _is_sentence(value):
            return value
        from datetime import datetime, timezone

        validator = found[0]
        # a bound that moves with time needs an instant; only the type matters here
        target = (validator(value, datetime.now(timezone.utc)) if callable(validator) and not _is_type(validator)
                  else validator)
        if not _wants_number(target):
            return value
        number = _one_number(value)
        return value if number is None else number

    def verify_after(self, key: str) -> float | None:
        """Seconds after which a fact under ``key`` needs re-confirming (longest registered prefix), or None."""
        return self._longest(getattr(self, "_verify_after", {}), key)

    def check_value(self, key: str, value: Any, recorded_at: Any) -> str | None:
        """None if ``value`` passes the validator of ``key`` (or it has none), else what is wrong with it.

        A sentence (a string with spaces, as ``remember`` records) is checked through the one number it holds
        when the validator wants a number ("I'm 130 years old" -> 130); a sentence holding no number, or several,
        is not judged (None)."""
        found = self._longest(getattr(self, "_validators", {}), key)
        if found is None:
            return None
        from pydantic import ValidationError

        validator, describe = found
        target = validator(value, recorded_at) if callable(validator) and not _is_type(validator) else validator
        if _is_sentence(value):
            value = _one_number(value) if _wants_number(target) else None
            if value is None:
                return None
        if isinstance(value, float) and value.is_integer() and _wants_number(target):
            value = int(value)  # 12.0 and 1e2 are whole numbers: JSON does not tell 12 from 12.0 apart for people
        try:
            # a validator that makes its target per call (a bound moving with time) gets a new adapter each time
            adapter = _adapter(target) if target is validator else pydantic.TypeAdapter(target)
            adapter.validate_python(value, strict=not isinstance(value, str))
        except ValidationError:
            return f"{key} {describe}"
        return None


_ADAPTERS: dict[Any, Any] = {}


def _adapter(target: Any) -> Any:
    """pydantic's ``TypeAdapter`` of a registered validator type, built once: building one costs ~25 us (it compiles
    a validator), paid by every command whose key has a validator (scripts/bench_append.py, one per save)."""
    try:
        adapter = _ADAPTERS.get(target)
    except TypeError:  # an unhashable target: build it each time
        return pydantic.TypeAdapter(target)
    if adapter is None:
        adapter = _ADAPTERS[target] = pydantic.TypeAdapter(target)
    return adapter


def _is_sentence(value: Any) -> bool:
    """Whether a value is a sentence ``remember`` recorded rather than a bare value: a string with a space, or with
    Chinese characters (我今年28岁 has no space)."""
    return isinstance(value, str) and (" " in value.strip() or has_cjk(value))


def _one_number(sentence: str) -> int | float | None:
    """The one number a sentence holds ("I'm 130 years old" -> 130, 我今年二十八岁 -> 28), or None for none or
    several."""
    numbers = re.findall(r"(?<![\d.])-?\d+(?:\.\d+)?(?![\d.])", sentence)
    if not numbers and has_cjk(sentence):
        from .values import value_parts

        numbers = sorted(value_parts(sentence).parts.get("number", ()))
    if len(numbers) != 1:
        return None
    return float(numbers[0]) if "." in numbers[0] else int(numbers[0])


def _is_type(v: Any) -> bool:
    import typing

    return isinstance(v, type) or typing.get_origin(v) is not None


def _wants_number(t: Any) -> bool:
    import typing

    base = typing.get_args(t)[0] if typing.get_origin(t) is typing.Annotated else t
    return base in (int, float)


def _birth_year(value: Any, recorded_at: Any) -> Any:
    from pydantic import Field

    return Annotated[int, Field(ge=1900, le=recorded_at.year)]


def _blood_type(value: Any) -> Any:
    return value.strip().upper().replace(" ", "") if isinstance(value, str) else value


REGISTRY = KeyRegistry()
# The shipped validators (seed 003 §5.1: outliers such as "I am 120 years old" are sandboxed, not believed).
REGISTRY.register_validator("profile.age", Annotated[int, pydantic.Field(ge=0, le=120)],
                            "must be a whole number from 0 to 120")
REGISTRY.register_validator("profile.birth_year", _birth_year, "must be a year from 1900 to the year it is said in")
REGISTRY.register_validator(
    "health.blood_type",
    Annotated[Literal["A+", "A-", "B+", "B-", "AB+", "AB-", "O+", "O-"], pydantic.BeforeValidator(_blood_type)],
    "must be A, B, AB or O followed by + or -")
# Re-verification (seed 003 §4.3: medical facts are re-checked after 30 days).
REGISTRY.register_verify_after("health", 30 * 86400)
