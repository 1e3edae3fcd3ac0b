"""Pydantic models at the boundary: commands in, receipts and read models out.

Commands are validated here, before anything touches the log: a refused command writes nothing. Read models are
what both the Python API returns and the CLI prints with ``--json``; ``model_dump(mode="json")`` of each is the
CLI's JSON, field for field. Field names of the read models are a contract other tools rely on: add fields, never
rename them.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from .agent_spaces import refuse_reserved
from .errors import BadInput
from .timeutil import check_observed, now_utc, parse_instant

Source = Literal["user_statement", "agent_inference", "external_import", "system_feedback"]
SOURCES: tuple[str, ...] = ("user_statement", "agent_inference", "external_import", "system_feedback")
Kind = Literal["asserted", "reaffirmed", "corrected", "retracted", "forgotten"]

#: Default confidence by source when the caller gives none: what the user said outranks what we guessed.
DEFAULT_CONFIDENCE: dict[str, float] = {
    "user_statement": 1.0,
    "external_import": 0.9,
    "system_feedback": 0.9,
    "agent_inference": 0.6,
}

# A key is dotted segments of letters, digits, '_' or '-': `preference.drink`, `memory.3f2a9c`.
KEY_RE = re.compile(r"^[A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]+)*$")
MAX_KEY = 200
MAX_USER = 200
MAX_VALUE_BYTES = 1_000_000  # a fact is a belief, not a document store: 1 MB of JSON at most
#: Most commands one batch (one save, one transaction) may hold, and most bytes of values, texts and reasons in it.
#: Why: psycopg's pipeline mode, which eventsourcing's PostgreSQL recorder inserts a save's events with, can
#: deadlock on a large pipeline (psycopg/psycopg#685): a save of 8,000 small events hung for good in 6 of 9 runs
#: here (server in ClientRead, client in pipeline.sync), 6,000 in 1 of 2, while 5,000 and fewer never did. Bigger
#: batches are refused before anything is written; ingest already saves 500 at a time.
MAX_BATCH_COMMANDS = 2000
MAX_BATCH_BYTES = 4_000_000


def content_bytes(command: Any) -> int:
    """The bytes of content one command adds to a batch (``value`` as JSON, ``text``, ``reason``), as
    :func:`check_batch_size` counts them."""
    value = getattr(command, "value", None)
    n = len(json.dumps(value, ensure_ascii=False).encode("utf-8")) if value is not None else 0
    for name in ("text", "reason"):
        part = getattr(command, name, None)
        n += len(part.encode("utf-8")) if isinstance(part, str) else 0
    return n


def check_batch_size(commands: list[Any], field: str = "commands") -> None:
    """Refuse a batch over :data:`MAX_BATCH_COMMANDS` commands or :data:`MAX_BATCH_BYTES` bytes of content
    (``value`` as JSON, ``text``, ``reason``). Raises :class:`BadInput` naming ``field`` and how to split it."""
    if len(commands) > MAX_BATCH_COMMANDS:
        raise BadInput(field, f"holds {len(commands)} commands; one batch takes at most {MAX_BATCH_COMMANDS}",
                       f"split it into batches of at most {MAX_BATCH_COMMANDS} (each batch is saved all or nothing)")
    size = sum(content_bytes(c) for c in commands)
    if size > MAX_BATCH_BYTES:
        raise BadInput(field, f"holds {size} bytes of values and texts; one batch takes at most {MAX_BATCH_BYTES}",
                       "split it into smaller batches (each batch is saved all or nothing)")
MAX_TEXT = 100_000  # characters of a fact's sentence or reason
#: characters of an identifier-like field (idempotency_key, source_ref, session_id, actor, trace_id, sensitivity):
#: they are stored in plaintext in the log (docs/erasure.md), so content must not hide in them (a
#: 100,000-character actor is refused)
MAX_ID = 512
#: a sensitivity label (``health``, ``finance``, ``special-category``): a lowercase identifier. A label sticks to the
#: later versions of a fact and a caller must name it exactly to let the fact in, so a typo ("Bogus Label") would
#: hide a fact for good: labels are refused unless they have this form.
LABEL_RE = re.compile(r"^[a-z][a-z0-9_-]*$")
MAX_LABEL = 64


def check_user_id(user_id: Any, field: str = "user_id") -> str:
    """Validate a user id: a non-empty string without control characters or U+FFFD, at most 200 characters, not
    starting with ``~agent/`` (kept for agents' own memories: :mod:`ledger.agent_spaces`) unless this call opened
    that agent's space.

    Raises:
        BadInput: naming ``field``.
    """
    if not isinstance(user_id, str):
        raise BadInput(field, f"must be a string, got {type(user_id).__name__}", "pass the user id as text")
    if not user_id.strip():
        raise BadInput(field, "is empty", "give the id of the user whose memory this is")
    if user_id != user_id.strip() or any(unicodedata.category(c).startswith("C") for c in user_id):
        raise BadInput(field, f"{user_id!r} has surrounding spaces or control characters", "strip them")
    if len(user_id) > MAX_USER:
        raise BadInput(field, f"is {len(user_id)} characters long", f"use at most {MAX_USER}")
    if "\ufffd" in user_id:  # what a decoder leaves of bytes that were not UTF-8 (%FF%FE in a URL): never a real id
        raise BadInput(field, f"{user_id!r} holds U+FFFD, the mark of bytes that were not valid UTF-8",
                       "send the user id encoded as UTF-8")
    user_id = unicodedata.normalize("NFC", user_id)
    refuse_reserved(user_id, field)  # an agent's own memories are reached by agent_id alone (ledger/agent_spaces.py)
    return user_id


def check_label(label: Any, field: str = "sensitivity") -> str:
    """Validate a sensitivity label: a lowercase identifier ``[a-z][a-z0-9_-]*`` of at most 64 characters.

    Raises:
        BadInput: naming ``field``.
    """
    if not isinstance(label, str):
        raise BadInput(field, f"must be a string, got {type(label).__name__}", "give a label such as health")
    if len(label) > MAX_LABEL:
        raise BadInput(field, f"is {len(label)} characters long", f"use at most {MAX_LABEL}: a label such as health")
    if not LABEL_RE.match(label):
        raise BadInput(field, f"{label!r} is not a label (a lowercase identifier: a-z, then a-z, 0-9, _ or -)",
                       "use a label such as " + ", ".join(dict.fromkeys([_label_hint(label), "health", "finance"])))
    return label


def _label_hint(label: str) -> str:
    """A label close to ``label`` to offer in a fix (``"Bogus Label"`` -> ``bogus_label``)."""
    hint = re.sub(r"[^a-z0-9_-]+", "_", label.strip().lower()).strip("_-")
    hint = re.sub(r"^[^a-z]+", "", hint)[:MAX_LABEL]
    return hint or "special-category"


def check_key(key: Any, field: str = "key") -> str:
    """Validate a fact key: dotted segments of ``[A-Za-z0-9_-]`` (no spaces), at most 200 characters.

    Raises:
        BadInput: naming ``field``.
    """
    if key is not None and not isinstance(key, str):
        raise BadInput(field, f"must be a string, got {type(key).__name__}",
                       "name the fact with a dotted key such as preference.drink, as text")
    if not key:
        raise BadInput(field, "is empty", "name the fact with a dotted key such as preference.drink")
    if len(key) > MAX_KEY:
        raise BadInput(field, f"is {len(key)} characters long", f"use at most {MAX_KEY}")
    if not KEY_RE.match(key):
        raise BadInput(
            field,
            f"{key!r} is not a dotted key",
            "use dot-separated segments of letters, digits, '_' or '-' (no spaces), e.g. preference.drink",
        )
    return key


#: Deepest nesting of lists and objects a value may have. Why a bound below Python's recursion limit: pydantic
#: refuses to serialise much past ~255 levels ("Maximum serialization depth exceeded"), so a value of 300 levels was
#: stored (201) and then every read of the user's profile or history would fail with a 500.
MAX_VALUE_DEPTH = 64


def _depth_over(value: Any, limit: int) -> bool:
    """True if ``value`` nests lists/dicts more than ``limit`` levels deep (iterative: no recursion to overflow)."""
    stack = [(value, 0)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (list, tuple, dict)):
            if d >= limit:
                return True
            stack.extend((c, d + 1) for c in (v.values() if isinstance(v, dict) else v))
    return False


def canonical_json(value: Any, field: str = "value") -> str:
    """Serialise a JSON value canonically (sorted keys, no NaN/Infinity, NFC strings), so equal values compare equal.

    Raises:
        BadInput: if the value is not JSON (sets, bytes, objects, NaN, ...), or nests more than
            :data:`MAX_VALUE_DEPTH` levels (checked first, so ``json.dumps`` never recurses that deep).
    """
    if _depth_over(value, MAX_VALUE_DEPTH):
        raise BadInput(field, f"is nested too deeply to be stored (more than {MAX_VALUE_DEPTH} levels of lists and "
                       "objects)", "flatten it (a few levels of nesting at most)")
    try:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise BadInput(field, f"is not a JSON value ({exc})", "pass str, int, float, bool, None, list or dict") from None
    check_text(text, field)
    if len(text.encode("utf-8")) > MAX_VALUE_BYTES:
        raise BadInput(field, f"is larger than {MAX_VALUE_BYTES} bytes as JSON",
                       "store large documents elsewhere and keep a reference (source_ref) here")
    return unicodedata.normalize("NFC", text)


def check_text(text: str, field: str) -> str:
    """Refuse strings that cannot be stored as UTF-8 (lone surrogates such as '\\ud800') or that hold a C0 control
    character other than tab and newline (NUL, ESC, carriage return...: invisible in every read, and able to
    rewrite a terminal). Raises BadInput naming ``field``."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise BadInput(field, "contains a lone surrogate code point that is not valid Unicode text",
                       "decode the text properly before storing it") from None
    bad = _CONTROL.search(text)
    if bad is not None:
        raise BadInput(field, f"contains the control character {bad.group()!r} at position {bad.start()}",
                       "remove control characters (tab and newline are allowed)")
    return text


#: C0 control characters except tab and newline, DEL, the C1 controls, and the invisible bidirectional overrides and
#: isolates (U+202A-202E, U+2066-2069: they make a text read differently from what it holds)
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _check_strings(value: Any, field: str) -> None:
    """:func:`check_text` on every string in a JSON value (dict keys included)."""
    if isinstance(value, str):
        check_text(value, field)
    elif isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                # json.dumps would turn 1 into "1" silently: the value read back would not be the value given
                raise BadInput(field, f"has the non-string object key {k!r}", "use string keys (JSON objects have them)")
            check_text(k, field)
            _check_strings(v, field)
    elif isinstance(value, list):
        for v in value:
            _check_strings(v, field)


#: longest role, sub_role or task_id accepted
MAX_ROLE = 200


class RoleContext(BaseModel):
    """Which hat the agent wore when the fact was recorded (role, sub_role, task_id).

    Each is a name matched exactly by ``search --role`` / ``--role-filter``: non-empty, at most 200 characters, no
    surrounding spaces and no control characters (tab and newline included), so a stored role can always be named
    again (" coach" and "coach\n" are refused: no filter could match them)."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)
    role: str | None = None
    sub_role: str | None = None
    task_id: str | None = None

    @field_validator("role", "sub_role", "task_id")
    @classmethod
    def _a_name(cls, v: str | None) -> str | None:
        if v is None:
            return v
        if not v.strip():
            raise ValueError("is empty: give a name such as coach, or leave it out")
        if v != v.strip():
            raise ValueError(f"{v!r} has spaces around it: write it without them")
        if len(v) > MAX_ROLE:
            raise ValueError(f"is {len(v)} characters long: use at most {MAX_ROLE}")
        if any(ord(ch) < 32 or 127 <= ord(ch) < 160 for ch in v) or any(0xD800 <= ord(ch) <= 0xDFFF for ch in v):
            raise ValueError("contains a control character or a lone surrogate: write the name as plain text")
        return v


#: the fix of a refused confidence
_CONFIDENCE_FIX = "give a number from 0 to 1, or leave it out (default by source)"


def check_instant(value: Any, field: str) -> datetime | None:
    """A command's instant (``observed_at``, ``valid_from``, ``valid_to``): None, or an ISO 8601 string with an
    offset or an aware datetime, as an aware UTC datetime; an ``observed_at`` is never in the future
    (:func:`ledger.timeutil.check_observed`). The rule of :class:`FactCommand` and of the requests that build one.

    Raises:
        BadInput: naming ``field``.
    """
    if value is None:
        return None
    dt = parse_instant(value, field)
    return check_observed(dt) if field == "observed_at" else dt


def check_confidence(value: Any, field: str = "confidence") -> float | None:
    """A confidence: None (the source's default), or a number in [0, 1] (a numeric string is read as its number, as
    pydantic reads one), as a float. True and False are no numbers.

    Raises:
        BadInput: naming ``field``.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise BadInput(field, f"{value!r} is not a number", "give a number from 0 to 1")
    try:
        number: float | None = float(value)
    except (TypeError, ValueError):
        number = None
    if number is None:
        shown = repr(value) if isinstance(value, (int, float, str)) else type(value).__name__
        raise BadInput(field, f"{shown} is not a valid number", _CONFIDENCE_FIX)
    if math.isnan(number) or not 0.0 <= number <= 1.0:
        raise BadInput(field, "must be a number between 0 and 1", _CONFIDENCE_FIX)
    return number


#: the fields that carry an agent id (a write's ``actor`` is the agent that wrote it) and a run id (a write's
#: ``session_id``), as each face names them: :func:`check_identifier` gives them the character rules of a user id,
#: and an agent id no ``/`` (memledger/scopes.py)
AGENT_FIELDS = frozenset({"actor", "agent_id", "--actor", "--agent"})
RUN_FIELDS = frozenset({"session_id", "run_id", "--session", "--run"})
#: what an agent id may hold, as a refusal's fix says it
AGENT_CHARS = ("an agent id is letters, digits, spaces inside and punctuation other than '/' (e.g. planner, "
               "support-bot.2), with no control or invisible characters")
#: what a run id may hold, as a refusal's fix says it
RUN_CHARS = ("a run id is letters, digits, spaces inside and punctuation (e.g. run-7, 2024-05-01), with no control "
             "or invisible characters")


def check_identifier(value: Any, field: str) -> str | None:
    """An identifier a command carries in plaintext (``idempotency_key``, ``source_ref``, ``session_id``,
    ``actor``, ``trace_id``, ``sensitivity``): None, or non-blank text without control characters, at most
    :data:`MAX_ID` characters; a ``sensitivity`` is also a label (:func:`check_label`), an agent id (a field of
    :data:`AGENT_FIELDS`) and a run id (:data:`RUN_FIELDS`) hold what a user id may (:func:`check_agent_id`,
    :func:`check_run_id`). Returned as given.

    Raises:
        BadInput: naming ``field``.
    """
    if value is None:
        return None
    bare = re.split(r"[.\s]", field)[-1]  # "commands[0].actor", "line 3: actor": the field itself
    if bare in AGENT_FIELDS:
        return check_agent_id(value, field)
    if bare in RUN_FIELDS:
        return check_run_id(value, field)
    return _identifier(value, field, f"leave {field} out, or give it as non-blank text")


def _identifier(value: Any, field: str, what: str) -> str:
    """:func:`check_identifier`'s rules for any identifier; ``what`` is the fix of an empty one."""
    if not isinstance(value, str):
        shown = repr(value) if isinstance(value, (int, float)) else type(value).__name__
        raise BadInput(field, f"{shown} is not a valid string", "give it as text")
    if not value.strip():
        raise BadInput(field, "is empty", what)
    check_text(value, field)
    if len(value) > MAX_ID:
        raise BadInput(field, f"is {len(value)} characters long",
                       f"use at most {MAX_ID}: it is an identifier, kept in plaintext; put content in text")
    if field == "sensitivity":
        check_label(value, "sensitivity")
    return value


def _scope_id(value: Any, field: str, chars: str, slash: str = "/") -> str:
    """An agent or run id: an identifier with a user id's character rules (:func:`check_user_id`): no spaces at
    either end, no control, format (invisible: U+200B, U+200D, U+FEFF...), private-use or unassigned character,
    no U+FFFD. Returned as given. The fix of an invisible character sends the id without it (``slash``: what a
    '/' becomes there)."""
    example = "".join(c for c in value if not unicodedata.category(c).startswith("C")).strip().replace(
        "/", slash) if isinstance(value, str) else ""
    value = _identifier(value, field, f"leave {field} out, or give one: {chars}")
    if value != value.strip():
        raise BadInput(field, f"{value!r} has spaces at either end", f"strip them: {chars}")
    if "\ufffd" in value:  # as in a user id: what a decoder leaves of bytes that were not UTF-8
        raise BadInput(field, f"{value!r} holds U+FFFD, the mark of bytes that were not valid UTF-8",
                       f"send the id encoded as UTF-8 (percent-encode its UTF-8 bytes in a URL): {chars}")
    bad = next((c for c in value if unicodedata.category(c).startswith("C")), None)
    if bad is not None:
        name = unicodedata.name(bad, "unnamed")
        raise BadInput(field, f"{value!r} holds U+{ord(bad):04X} ({name}), an invisible or control character "
                       "that a reader cannot tell from the id without it",
                       (f"send {example!r}: " if example else "remove it: ") + chars)
    return value


def check_agent_id(value: Any, field: str = "agent_id") -> str | None:
    """Validate an agent id (``agent_id``, a write's ``actor``, ``--agent``): None, or an identifier
    (:func:`check_identifier`) with a user id's character rules (:func:`check_user_id`: a zero-width space is
    refused as in a user id) and no ``/``, since an agent's own memories are addressed by it in a path
    (``/v1/agents/{agent_id}``, ``~agent/{agent_id}``). Returned as given.

    Raises:
        BadInput: naming ``field``, the fix saying which characters an agent id may hold.
    """
    if value is None:
        return None
    value = _scope_id(value, field, AGENT_CHARS, slash="-")
    if "/" in value:
        raise BadInput(field, f"{value!r} holds '/', which cannot be part of an agent id (its own memories are "
                       f"addressed by it: /v1/agents/{{agent_id}})", f"use {value.replace('/', '-')!r}: {AGENT_CHARS}")
    return value


def check_run_id(value: Any, field: str = "run_id") -> str | None:
    """Validate a run id (``run_id``, a write's ``session_id``, ``--run``): None, or an identifier
    (:func:`check_identifier`) with a user id's character rules (:func:`check_user_id`). Returned as given.

    Raises:
        BadInput: naming ``field``, the fix saying which characters a run id may hold.
    """
    if value is None:
        return None
    return _scope_id(value, field, RUN_CHARS)


class FactCommand(BaseModel):
    """One command on the stream of (user_id, key): assert, correct or retract.

    Instants are aware and converted to UTC; ``valid_from`` defaults to ``observed_at``, which defaults to the
    instant the command is recorded. ``confidence`` is in [0, 1] and defaults by source
    (:data:`DEFAULT_CONFIDENCE`). ``value`` must be JSON; ``text`` defaults to ``"<key>: <value>"``.
    """

    model_config = ConfigDict(extra="forbid", defer_build=True)

    op: Literal["assert", "correct", "retract", "contest", "withdraw"]
    user_id: str
    key: str
    value: Any = None
    text: str | None = None
    observed_at: datetime | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    source: Source = "user_statement"
    source_ref: str | None = None
    session_id: str | None = None
    actor: str | None = None
    trace_id: str | None = None
    derived_from: list[str] = Field(default_factory=list)
    confidence: float | None = None
    role: RoleContext | None = None
    reason: str | None = None
    sensitivity: str | None = None
    idempotency_key: str | None = None

    @field_validator("user_id", mode="before")
    @classmethod
    def _user(cls, v: Any) -> str:
        return check_user_id(v)

    @field_validator("key", mode="before")
    @classmethod
    def _key(cls, v: Any) -> str:
        return check_key(v)

    @field_validator("observed_at", "valid_from", "valid_to", mode="before")
    @classmethod
    def _instant(cls, v: Any, info: Any) -> datetime | None:
        return check_instant(v, info.field_name)

    @field_validator("confidence", mode="before")
    @classmethod
    def _confidence(cls, v: Any) -> float | None:
        return check_confidence(v)

    @field_validator("text", "reason")
    @classmethod
    def _nfc(cls, v: str | None, info: Any) -> str | None:
        if v is None:
            return None
        check_text(v, info.field_name)
        if len(v) > MAX_TEXT:
            raise BadInput(info.field_name, f"is {len(v)} characters long", f"use at most {MAX_TEXT}")
        return unicodedata.normalize("NFC", v)

    @field_validator("idempotency_key", "source_ref", "session_id", "actor", "trace_id", "sensitivity")
    @classmethod
    def _nonempty(cls, v: str | None, info: Any) -> str | None:
        return check_identifier(v, info.field_name)

    #: (the value it was made from, its canonical JSON): made once by validation, read by ``value_json``.
    _json: tuple[Any, str | None] | None = PrivateAttr(default=None)
    #: where the command came from (``"line 3: "``), set by :func:`validate_command`: prefixes a policy refusal
    _where: str = PrivateAttr(default="")
    #: what an idempotent retry must repeat, when the command was made from another one (``remember``: its own
    #: inputs, since the resolved key and evidence may differ on a retry); None: :meth:`fingerprint` decides
    _fingerprint: str | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _consistent(self) -> FactCommand:
        if self.op in ("assert", "correct", "contest"):
            self._json = (self.value, canonical_json(self.value))
            if self.value is None:
                raise BadInput("value", f"is missing for {self.op}", "give the fact's value; to remove it use retract")
            if isinstance(self.value, str) and not self.value.strip():
                raise BadInput("value", "is an empty string", "give the fact's value; to remove a fact use retract")
            _check_strings(self.value, "value")
        elif self.value is not None:
            raise BadInput("value", f"{self.op} takes no value", "leave value out")
        if self.op == "withdraw" and (self.actor != "retract-source" or self.source_ref is None):
            # withdrawing a source also restores or retracts what it alone supported: one verb does both
            raise BadInput("op", "withdraw is recorded by retract-source only",
                           "use memledger retract-source USER SOURCE_REF (Python: ml.retract_source)")
        # A retraction's valid_to closes the *head's* range (the policy checks it against the head's valid_from),
        # so it may well be earlier than when it was said: "on 1 June: I moved away on 1 May".
        # With neither valid_from nor observed_at the range starts when the command is recorded: now.
        start = self.valid_from or (self.observed_at or now_utc() if self.op not in ("retract", "withdraw") else None)
        if self.valid_to is not None and start is not None and self.valid_to <= start:
            raise BadInput(
                "valid_to",
                f"{self.valid_to.isoformat()} is not after valid_from {start.isoformat()}",
                "valid ranges are half-open [valid_from, valid_to): valid_to must be later",
            )
        return self

    @property
    def value_json(self) -> str | None:
        """The value's canonical JSON text (None for no value). Serialised once, at validation: the policy, the
        event and the idempotency fingerprint each read it (three ``json.dumps`` per command before). A value
        assigned after validation is serialised afresh; commands are not meant to be mutated in place.

        Raises:
            BadInput: a value assigned after validation is not JSON.
        """
        # Read the private attribute from pydantic's documented ``__pydantic_private__`` dict: ``self._json`` goes
        # through BaseModel.__getattr__, which costs more than the json.dumps it saves.
        cached = (self.__pydantic_private__ or {}).get("_json")
        if cached is not None and cached[0] is self.value:
            return cached[1]
        return None if self.value is None else canonical_json(self.value)

    def effective_confidence(self) -> float:
        return self.confidence if self.confidence is not None else DEFAULT_CONFIDENCE[self.source]

    def fingerprint(self) -> str:
        """What an idempotent retry must repeat exactly (everything but the idempotency key itself)."""
        override = (self.__pydantic_private__ or {}).get("_fingerprint")
        if override is not None:
            return override
        return canonical_json(self.model_dump(mode="json", exclude={"idempotency_key"}))


def validate_command(data: dict[str, Any], where: str = "") -> FactCommand:
    """Validate a command dict into a :class:`FactCommand`, turning pydantic's errors into :class:`BadInput`.

    ``where`` prefixes the field name (``"line 3: "``) so a batch error says which command was bad.
    """
    try:
        cmd = FactCommand.model_validate(data)
    except BadInput as exc:
        raise BadInput(where + exc.field, exc.problem, exc.fix) from None
    except ValidationError as exc:
        err = exc.errors()[0]
        ctx = err.get("ctx") or {}
        inner = ctx.get("error")
        if isinstance(inner, BadInput):
            raise BadInput(where + inner.field, inner.problem, inner.fix) from None
        field = ".".join(str(p) for p in err["loc"]) or "command"
        fix = ""
        if err["type"] == "literal_error" and field == "source":
            fix = "use one of " + ", ".join(SOURCES)
        elif field == "confidence":
            fix = "give a number from 0 to 1, or leave it out (default by source)"
        elif err["type"] == "extra_forbidden":
            fix = "remove it; known fields are " + ", ".join(FactCommand.model_fields)
        elif field.split(".")[0] == "role":
            fix = 'give an object such as {"role": "planner", "sub_role": null, "task_id": null}'

        raise BadInput(where + field, pydantic_problem(err), fix) from None
    cmd._where = where  # the policy's refusals name the line too (ledger/application.py)
    return cmd


def pydantic_problem(err: Any) -> str:
    """One pydantic error (an item of ``ValidationError.errors()``) worded as the rest of memledger words a refusal:
    what was given and what is wrong with it, without pydantic's "Value error," or "Input should be" phrasing.

    ``{"type": "literal_error", "input": "bogus", "msg": "Input should be 'open' or 'done'"}`` ->
    ``"'bogus' is not 'open' or 'done'"``; ``"Value error, must be ..."`` -> ``"must be ..."``;
    ``"Field required"`` -> ``"is missing"``; ``"Extra inputs are not permitted"`` -> ``"is not a known field"``.
    """
    msg = str(err.get("msg", ""))
    kind = err.get("type", "")
    given = err.get("input")
    shown = repr(given) if isinstance(given, (str, int, float, bool)) or given is None else type(given).__name__
    if kind == "missing":
        return "is missing"
    if kind == "extra_forbidden":
        return "is not a known field"
    if kind in ("model_type", "dict_type", "model_attributes_type"):
        return f"{shown} is not an object"
    if msg.startswith("Value error, "):
        return msg[len("Value error, "):]
    if msg.startswith("Input should be "):
        rest = msg[len("Input should be "):]
        return f"{shown} is not {rest.split(', unable to')[0]}"
    return msg


class Receipt(BaseModel):
    """What every command returns: which event recorded it, the fact's version after it, the log position.

    For an idempotent retry, ``replayed`` is true and the fields are those of the first command's event.
    ``kind`` is the policy's decision: asserted, reaffirmed, corrected or retracted; ``effect`` says more
    (new, supersede, backfill, contest, reaffirm, correct, retract).
    """
    model_config = ConfigDict(defer_build=True)  # built on first use: a cold command uses few

    event_id: str
    user_id: str
    key: str
    version: int
    position: int
    kind: Kind
    effect: str
    replayed: bool = False
    #: the shard whose log ``position`` is on, when the ledger is sharded (docs/scale.md); absent otherwise
    shard: str | None = Field(default=None, exclude_if=lambda v: v is None)


class RelatedMemory(BaseModel):
    """A current memory slot resolution weighed for a ``remember`` (``RememberReceipt.related``).

    ``relation``: ``target`` (the memory the decision acted on), ``same_slot``, ``sibling`` (another value of the same
    multi-valued slot), ``other_slot``, ``other_subject`` or ``similar`` (no slot known); ``score`` is the search
    relevance (0..1; 0 when found through its key only)."""
    model_config = ConfigDict(defer_build=True)  # built on first use: a cold command uses few

    key: str
    version: int
    text: str
    score: float
    relation: str


Decision = Literal["new", "add", "reaffirm", "supersede", "correct", "retire", "conflict"]


class EntityLink(BaseModel):
    """A person a ``remember`` statement names or is about (``RememberReceipt.entities``; docs/relations.md).

    ``effect``: ``created`` (a new entity, tied to the user by ``relation_type``), ``linked`` (a known entity, newly
    tied), ``known`` (already so tied), ``about`` (the statement opens with their name: it was read as said of them,
    in their slots), ``ambiguous`` (the name is shared by ``candidates``: nothing linked, never guessed),
    ``not_linked`` (a tie of one person only, another holds it: relate to change it). ``key`` and ``version`` name
    the relation version recorded, if any."""
    model_config = ConfigDict(defer_build=True)

    name: str
    relation_type: str | None
    effect: Literal["created", "linked", "known", "about", "ambiguous", "not_linked"]
    entity_id: str | None = None
    key: str | None = None
    version: int | None = None
    candidates: list[str] = Field(default_factory=list)


class RememberReceipt(Receipt):
    """What ``remember`` returns: the receipt of the event that recorded the statement, plus how slot resolution
    decided (``decision``; ``key`` is the slot it landed in), which memories it weighed (``related``) and why
    (``explanation``: the rule and the figures). ``extra`` holds the receipts of any other events recorded in the
    same save (a legacy key closed, a candidate marked contested); ``entities`` the people the statement names or is
    about (:class:`EntityLink`), with the relation versions recorded for them in the same save."""

    decision: Decision
    related: list[RelatedMemory] = Field(default_factory=list)
    explanation: str
    extra: list[Receipt] = Field(default_factory=list)
    entities: list[EntityLink] = Field(default_factory=list)


class FactFields(BaseModel):
    """The fields every view of one fact version shares (a profile's :class:`FactView`, time travel's
    ``BeliefView``), in their ``--json`` order: ``value`` (JSON), ``text``, ``version`` (1-based), ``recorded_at``
    (system time, UTC), ``valid_from``/``valid_to`` (valid time, UTC; ``valid_to`` None = open), ``source`` and
    ``confidence`` (0..1). Subclasses add ``status`` and their own fields after these."""
    model_config = ConfigDict(defer_build=True)  # built on first use: a cold command uses few

    value: Any
    text: str | None
    version: int
    recorded_at: datetime
    valid_from: datetime
    valid_to: datetime | None
    source: str
    confidence: float
    #: the sensitivity label of a version the read did not ask to see (``allow_sensitive``): its ``value`` and
    #: ``text`` (and what is read from them) are None. Absent from the output unless set (docs/erasure.md, "Labels
    #: gate every read"); :func:`memledger.sensitivity.gate` sets it.
    withheld: str | None = Field(default=None, exclude_if=lambda v: v is None)


class FactView(FactFields):
    """One current fact in a profile (``memledger profile --json``: the value under ``facts[KEY]``).

    ``hedged``: the statement hedged ("I think", "maybe", 可能 ...): recorded with confidence at most 0.6, shown as
    uncertain in ``context`` until an unhedged statement of the same value (docs/hygiene.md). ``attribute``,
    ``extracted_value`` and ``ended``: what a free-text fact's sentence is about and says (docs/resolution.md,
    "What an agent reads"); None / False where nothing was read."""

    status: Literal["current", "contested"]
    hedged: bool = False
    # what the sentence says, read again at each read (ledger/attributes.py): the attribute the fact is about (a
    # catalogue slot's label, or the phrase read from the sentence), the value found for it as written, and whether
    # the sentence says the attribute ended (a cessation: "咪咪去世了"); ``text`` stays the sentence as said
    attribute: str | None = None
    extracted_value: str | None = None
    ended: bool = False


class ErasedMark(BaseModel):
    """Says that the user a read is about was erased, and when (system time, UTC), so an erased user never reads as
    an empty one. Both fields appear in the ``--json`` output only for an erased user: the output of every other
    read is unchanged."""
    model_config = ConfigDict(defer_build=True)  # built on first use: a cold command uses few

    # pydantic's exclude_if (2.11+): absent from the output unless set, so the schema still lists them (optional)
    erased: bool = Field(default=False, exclude_if=lambda v: not v)
    erased_at: datetime | None = Field(default=None, exclude_if=lambda v: v is None)


class Profile(ErasedMark):
    """``memledger profile USER --json``: the current facts of one user, by key."""

    user_id: str
    facts: dict[str, FactView]


class HistoryRow(BaseModel):
    """One event of a fact's history (``memledger history --json`` lists these in log order).

    ``valid_from``/``valid_to`` are the version's valid range as known now (a superseded value shows its closed
    range; a corrected-away or retracted value shows an empty range, valid_to == valid_from). ``status`` says what
    became of the version: current, contested, superseded, misreported, retracted, closed, or for events that are
    not versions of a value: reaffirmation, contesting, retraction.
    """
    model_config = ConfigDict(defer_build=True)  # built on first use: a cold command uses few

    key: str
    value: Any
    kind: Kind
    reason: str | None
    version: int
    recorded_at: datetime
    valid_from: datetime | None
    valid_to: datetime | None
    source: str
    source_ref: str | None
    position: int
    # additive fields (not in the original contract; never rename the ones above)
    event_id: str
    text: str | None
    observed_at: datetime | None
    status: str
    replaces: int | None
    replaced_by: int | None
    confidence: float
    session_id: str | None
    actor: str | None
    trace_id: str | None
    derived_from: list[str]
    role: RoleContext | None
    sensitivity: str | None = None
    #: the label of a version the read did not ask to see: ``value``, ``text`` and ``reason`` are None (absent
    #: from the output unless set; see :attr:`FactFields.withheld`)
    withheld: str | None = Field(default=None, exclude_if=lambda v: v is None)
