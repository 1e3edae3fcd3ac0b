"""Turn files into validated commands: LoCoMo conversations and JSONL command files.

LoCoMo (Maharana et al., ACL 2024; CC BY-NC 4.0): each speaker is a user; each per-session observation becomes a
free-text fact whose key is derived from its content (``memory.<12 hex of sha256>``), with ``observed_at`` and
``valid_from`` = its session's ``date_time``, ``source_ref`` = the evidence turn id(s), ``source`` =
``user_statement``. LoCoMo's times carry no zone; they are read as UTC (stated here because a naive time is never
guessed anywhere else). Each command carries an idempotency key derived from (sample, session, speaker, text), so
ingesting the same file twice records nothing new.

JSONL: one command object per line (``op`` defaults to ``assert``); blank lines are skipped. A line with ``text``
and no ``key`` (and no ``op``) is a ``remember``: slot resolution decides its key (docs/resolution.md).
A remember line without ``idempotency_key`` gets one derived from (user_id, text, observed_at, source_ref) as
written in the line (:func:`remember_idempotency_key`): re-ingesting the file records nothing new. Two lines of one
user with the same text, observed_at and source_ref are therefore one statement (the second is a replay); give them
distinct ``idempotency_key``s (or source_refs) to record both.

``--resolve`` (LoCoMo): each observation goes through ``remember`` instead of landing under a content-derived key;
its idempotency key is derived from the source (conversation, session, speaker, observation index and evidence turn
ids), never from the text, so re-ingesting records nothing new either way.

Sessions: LoCoMo turns are also logged as messages of their session (:func:`locomo_messages`), and
``--format memorybank`` ingests MemoryBank histories as sessions of messages (:func:`memorybank_messages`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import unicodedata
from datetime import datetime, timezone
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger.errors import BadInput
from ledger.schemas import MAX_BATCH_BYTES, FactCommand, check_batch_size, content_bytes, validate_command

FORMATS = ("locomo", "jsonl", "memorybank")


@dataclass
class RememberLine:
    """A free-text statement of an ingested file, validated, to be recorded through ``remember``."""

    user_id: str
    text: str
    fields: dict[str, Any]
    where: str = ""
    #: the line as the verb's request, checked once (memledger/requests/remember.py)
    request: Any = None


def remember_line(obj: dict[str, Any], where: str) -> RememberLine:
    """Validate a remember line (``{"user_id", "text", ...}`` without ``key``) into its
    :class:`~memledger.requests.RememberRequest`. Raises BadInput naming the line."""
    from .requests import RememberRequest

    allowed = {"user_id", "text", "observed_at", "valid_from", "source", "source_ref", "session_id", "actor",
               "trace_id", "confidence", "role", "sensitivity", "idempotency_key"}
    extra = sorted(set(obj) - allowed)
    if extra:
        raise BadInput(where + extra[0], "is not a field of a remember line (a line with text and no key)",
                       "remove it, or give a key to make the line an assert; known fields are " + ", ".join(sorted(allowed)))
    fields = {k: v for k, v in obj.items() if k not in ("user_id", "text")}
    fields.setdefault("source", "user_statement")
    try:
        request = RememberRequest(user_id=obj.get("user_id"), text=obj.get("text"), **fields)
    except BadInput as exc:
        raise BadInput(where + exc.field, exc.problem, exc.fix) from None
    return RememberLine(obj["user_id"], obj["text"], fields, where, request)


def remember_idempotency_key(ml: Any, line: RememberLine) -> str:
    """The idempotency key of a remember line that has none: ``ingest:`` + 32 hex of HMAC-SHA256 over (user_id,
    text, observed_at, source_ref), keyed with the user's data key when the store encrypts (so after erasure the
    key cannot confirm a guessed sentence; without encryption the text is in the log anyway, and the HMAC key is a
    constant). observed_at and source_ref are taken as written in the line (absent: empty)."""
    import hmac

    secret = b"memledger:ingest:remember"
    keystore = getattr(ml, "keystore", None)
    if keystore is not None:
        try:
            secret = keystore.get_or_create(line.user_id)
        except Exception:  # noqa: BLE001 - an erased user: remember refuses the line with its own error
            pass
    msg = "\x1f".join([line.user_id, unicodedata.normalize("NFC", line.text.strip()),
                       str(line.fields.get("observed_at") or ""), str(line.fields.get("source_ref") or "")])
    return "ingest:" + hmac.new(secret, msg.encode("utf-8"), hashlib.sha256).hexdigest()[:32]


def content_key(text: str, prefix: str = "memory") -> str:
    """The key of a free-text memory: ``memory.`` + the first 12 hex digits of sha256 of its NFC text."""
    digest = hashlib.sha256(unicodedata.normalize("NFC", text).encode()).hexdigest()[:12]
    return f"{prefix}.{digest}"


def parse_locomo_time(text: str, field: str) -> str:
    """LoCoMo's "1:56 pm on 8 May, 2023" -> ISO 8601 in UTC. Also ISO 8601 (a naive one read as UTC) and other
    absolute English dates naming a month and a four-digit year ("8 May 2023, 1:56 pm", "... PST" converts).

    Refused (BadInput naming ``field``): dates relative to the clock ("yesterday", "Monday", "2 days ago"), which
    would date a re-ingest of the same file differently and so break its idempotency (the second
    ingest would be refused); numeric-only dates ("01/02/2023": which is the month?); LoCoMo's own shape with an impossible
    time or day ("13:04 pm", "31 February")."""
    if not isinstance(text, str):
        raise BadInput(field, f"is a {type(text).__name__}, not a date string", "e.g. '1:56 pm on 8 May, 2023'")
    iso = _locomo_instant(text)
    if iso is None:
        raise BadInput(field, f"{text!r} is not an absolute date this ingest reads",
                       "write it as LoCoMo does ('1:56 pm on 8 May, 2023') or as ISO 8601 ('2023-05-08T13:56:00Z'); "
                       "dates relative to today (yesterday, Monday) are refused: a re-ingest would date them again")
    return iso


#: LoCoMo's date strings, "1:56 pm on 8 May, 2023" (English month names: strptime's C locale).
_LOCOMO_FORMAT = "%I:%M %p on %d %B, %Y"
#: a string in LoCoMo's shape (time, "on", date, year), and the part of it strptime reads (a zone may follow)
_LOCOMO_SHAPE = re.compile(r"(\d{1,2}:\d{2}\s*[ap]m\s+on\s+\d{1,2}\s+[A-Za-z]+,?\s+\d{4})(?:\s+\S.*)?", re.IGNORECASE)
_MONTH_NAME = re.compile(r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?(?![a-z])", re.IGNORECASE)
_YEAR = re.compile(r"(?<!\d)\d{4}(?!\d)")


@functools.lru_cache(maxsize=4096)
def _locomo_instant(text: str) -> str | None:
    # Every observation and turn of a session carries the session's date string: parsed once each (dateparser is
    # slow per call). LoCoMo's own format is read by strptime first: dateparser's first call also loads its language
    # data. Only absolute dates reach dateparser (see parse_locomo_time).
    s = text.strip()
    try:
        return datetime.strptime(s, _LOCOMO_FORMAT).replace(tzinfo=timezone.utc).isoformat()
    except ValueError:
        pass
    shape = _LOCOMO_SHAPE.fullmatch(s)
    if shape is not None:
        try:
            datetime.strptime(re.sub(r",?\s+(\d{4})$", r", \1", shape.group(1)), _LOCOMO_FORMAT)
        except ValueError:
            return None  # LoCoMo's shape with an impossible time or date: dateparser would guess one
    try:
        dt = datetime.fromisoformat(s)
    except ValueError:
        dt = None
    if dt is None:
        if not (_YEAR.search(s) and _MONTH_NAME.search(s)):
            return None  # relative to the clock, or numeric only (day and month order unknown)
        import dateparser

        dt = dateparser.parse(s, languages=["en"], settings={
            "TIMEZONE": "UTC", "RETURN_AS_TIMEZONE_AWARE": True, "REQUIRE_PARTS": ["day", "month", "year"]})
        if dt is None:
            return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)  # naive: UTC, as LoCoMo's own times are read
    return dt.astimezone(timezone.utc).isoformat()


def _sample_id(conv: dict[str, Any], ci: int, loc: str) -> str:
    """A conversation's ``sample_id`` (its index when absent): a non-empty string or an integer."""
    if "sample_id" not in conv:
        return str(ci)
    sample = conv["sample_id"]
    if isinstance(sample, bool) or not isinstance(sample, (str, int)) or not str(sample).strip():
        raise BadInput(f"{loc}.sample_id", f"{sample!r} is not a conversation id",
                       "give a non-empty string such as 'conv-30', or leave sample_id out (its index is used)")
    return str(sample)


def _session_time(sessions: dict[str, Any], n: str | int, loc: str) -> str:
    """The ISO instant of ``session_<n>_date_time``. Raises BadInput naming that field."""
    field = f"{loc}.session_{n}_date_time"
    when_text = sessions.get(f"session_{n}_date_time")
    if when_text is None or (isinstance(when_text, str) and not when_text.strip()):
        raise BadInput(field, "is missing or empty", "every session needs a date, e.g. '1:56 pm on 8 May, 2023'")
    return parse_locomo_time(when_text, field)


def _mapping(value: Any, field: str, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BadInput(field, f"is a {type(value).__name__}, not {what}", "pass a LoCoMo JSON file")
    return value


def locomo_commands(data: Any, where: str = "", resolve: bool = False) -> list[Any]:
    """Commands for every observation of every conversation in a LoCoMo file (a list, or one conversation).

    ``resolve``: :class:`RememberLine` items instead (slot resolution decides the keys)."""
    conversations = data if isinstance(data, list) else [data]
    out: list[FactCommand] = []
    for ci, conv in enumerate(conversations):
        loc = f"{where}conversation[{ci}]"
        if not isinstance(conv, dict) or "observation" not in conv or "conversation" not in conv:
            raise BadInput(loc, "is not a LoCoMo conversation (needs 'conversation' and 'observation')",
                           "pass a LoCoMo JSON file, or use --format jsonl")
        sample = _sample_id(conv, ci, loc)
        sessions = _mapping(conv["conversation"], f"{loc}.conversation", "an object of sessions")
        observations = _mapping(conv["observation"], f"{loc}.observation", "an object of sessions' observations")
        for skey in sorted(observations, key=lambda s: int(re.sub(r"\D", "", s) or 0)):
            n = re.sub(r"\D", "", skey)
            when = _session_time(sessions, n, loc)
            per_speaker = _mapping(observations[skey], f"{loc}.{skey}", "an object of speakers' observations")
            for speaker, items in per_speaker.items():
                if not isinstance(items, list):
                    raise BadInput(f"{loc}.{skey}.{speaker}", f"is a {type(items).__name__}, not a list",
                                   "give a list of [text, evidence] pairs")
                for oi, item in enumerate(items):
                    here = f"{loc}.{skey}.{speaker}[{oi}]"
                    if not isinstance(item, list) or len(item) < 2 or not isinstance(item[0], str):
                        raise BadInput(here, f"{item!r} is not an observation",
                                       "give [text, evidence]: the sentence and its dia_id(s), e.g. "
                                       "[\"Jon lost his job\", \"D1:2\"]")
                    text, ref = item[0], item[1]
                    if isinstance(ref, list) and all(isinstance(r, str) for r in ref):
                        ref = ",".join(ref)
                    elif isinstance(ref, (str, int)) and not isinstance(ref, bool):
                        ref = str(ref)
                    else:
                        raise BadInput(here + "[1]", f"{ref!r} is not evidence",
                                       "give the dia_id of the turn(s), e.g. \"D1:2\" or [\"D1:2\", \"D1:3\"]")
                    if resolve:
                        out.append(remember_line({
                            "user_id": speaker, "text": text, "observed_at": when, "valid_from": when,
                            "source": "user_statement", "source_ref": ref, "session_id": f"{sample}:session_{n}",
                            "idempotency_key": f"locomo:{sample}:session_{n}:{speaker}:{oi}:{ref}"[:512],
                        }, where=f"{loc}.{skey}.{speaker}[{oi}]."))
                        continue
                    digest = hashlib.sha256(f"{sample}|{n}|{speaker}|{text}".encode()).hexdigest()[:20]
                    out.append(validate_command({
                        "op": "assert", "user_id": speaker, "key": content_key(text), "value": text, "text": text,
                        "observed_at": when, "valid_from": when, "source": "user_statement", "source_ref": ref,
                        "session_id": f"{sample}:session_{n}", "idempotency_key": f"locomo:{digest}",
                    }, where=f"{loc}.{skey}.{speaker}[{oi}]."))
    return out


class _DuplicateField(ValueError):
    """A JSON object naming one field twice (json.loads would keep the last one silently)."""


def _no_duplicate_fields(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateField(k)
        out[k] = v
    return out


def _lines(path: Path) -> list[str]:
    """The lines of a UTF-8 text file (a leading byte-order mark is dropped). Raises BadInput naming FILE."""
    try:
        return path.read_text(encoding="utf-8-sig").splitlines()
    except UnicodeDecodeError as exc:
        raise BadInput("FILE", f"{str(path)!r} is not UTF-8 text (byte {exc.start})",
                       "give a UTF-8 JSONL file: one command object per line") from None


def jsonl_commands(path: Path) -> list[Any]:
    out = []
    for lineno, line in enumerate(_lines(path), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line, object_pairs_hook=_no_duplicate_fields)
        except json.JSONDecodeError as exc:
            raise BadInput(f"line {lineno}", f"is not JSON ({exc.msg})", "one command object per line") from None
        except _DuplicateField as exc:
            raise BadInput(f"line {lineno}", f"has the field {exc.args[0]!r} twice",
                           "give each field once (JSON keeps only the last, silently)") from None
        except RecursionError:
            raise BadInput(f"line {lineno}", "is JSON nested too deeply to be stored",
                           "flatten it (a few levels of nesting at most)") from None
        if not isinstance(obj, dict):
            raise BadInput(f"line {lineno}", "is not a JSON object", "one command object per line")
        if "text" in obj and "key" not in obj and "op" not in obj:
            out.append(remember_line(obj, where=f"line {lineno}: "))
            continue
        out.append(validate_command({"op": "assert", **obj}, where=f"line {lineno}: "))
    return out


def load_commands(path: Path, fmt: str, resolve: bool = False) -> list[Any]:
    """Read and validate every command of a file before anything is written: :class:`FactCommand` and
    :class:`RememberLine` items, in file order. ``resolve``: LoCoMo observations as remember lines. Raises BadInput."""
    if fmt not in FORMATS:
        raise BadInput("--format", f"{fmt!r} is not a known format", "use one of " + ", ".join(FORMATS))
    if not path.is_file():
        raise BadInput("FILE", f"{str(path)!r} does not exist or is not a file", "give the path of a data file")
    if fmt == "jsonl":
        return jsonl_commands(path)
    if fmt == "memorybank":
        memorybank_messages(_read_json(path, "a MemoryBank history file"))  # validate now: nothing written on error
        return []  # MemoryBank has no observations: its turns are messages (load_session_commands)
    data = _read_json(path, "a LoCoMo JSON file")
    return locomo_commands(data, resolve=resolve)


def ingest(ml: Any, path: Path, fmt: str, *, on_progress: Any = None, batch_size: int = 500,
           resolve: bool = False, keep: Any = None) -> dict[str, Any]:
    """``MemoryLedger.ingest``: everything validated first, then commands in batches of ``batch_size`` (one save
    each) and remember lines one by one, in file order. Returns the ingest report (see ``MemoryLedger.ingest``).

    ``keep``: a predicate on user ids; only the lines of users it keeps are written (a sharded ledger ingests each
    shard's users into that shard, memledger/sharding/sharded.py). The whole file is still validated first."""
    commands = load_commands(path, fmt, resolve=resolve)
    messages = load_session_commands(path, fmt)  # conversation turns as messages, validated before writing
    if keep is not None:
        commands = [c for c in commands if keep(c.user_id)]
        messages = [m for m in messages if keep(m.user_id)]
    # every batch is checked before the first is written: a refusal must leave the store as it was
    message_batches = _batches(messages, batch_size)
    finish_warm = _warm_vectors(ml, commands)
    try:
        report = _write(ml, commands, message_batches, len(messages), on_progress, batch_size)
    finally:
        finish_warm(_load_search)
    return report


def _load_search() -> None:
    """Import the search path (its pydantic models), run while ``ingest`` waits for the model anyway."""
    from . import search, sensitivity  # noqa: F401


def _warm_vectors(ml: Any, commands: list[Any]) -> Any:
    """Start embedding the texts the commands will make current while they are recorded (``finish()`` returned).

    The vectors projection is deferred (the first search embeds what the writes left), so an ingest followed by a
    search ran the model after every event was written; the texts are known once the file is validated, and the
    model releases the GIL, so embedding them now overlaps the recording (projections/retrieval/embedding.py
    ``warm_in_background``). Texts already in the embedding cache cost one lookup; remember lines are left out
    (``remember`` embeds its sentence as its search query and keeps that vector)."""
    vp = getattr(ml, "vectors_projection", None)
    if vp is None:
        return lambda while_waiting=None: None
    facts = [c for c in commands if isinstance(c, FactCommand) and c.op in ("assert", "correct") and c.text is not None]
    return vp.warm_in_background([c.text for c in facts], ml.db, [(c.user_id, c.key) for c in facts])


def _batches(items: list[Any], batch_size: int) -> list[list[Any]]:
    """``items`` cut into batches of at most ``batch_size`` that each pass :func:`check_batch_size` (a batch closes
    early when the next item would carry it past :data:`MAX_BATCH_BYTES`). Raises BadInput for an item that alone
    is too large (found before anything is written, not once the file's facts are recorded: a 500-message batch
    holding one 2 MB turn)."""
    out: list[list[Any]] = []
    batch: list[Any] = []
    size = 0
    for i, item in enumerate(items):
        n = content_bytes(item)
        if n > MAX_BATCH_BYTES:
            check_batch_size([item], field=f"message {i + 1}")  # raises, naming it
        if batch and (len(batch) >= batch_size or size + n > MAX_BATCH_BYTES):
            out.append(batch)
            batch, size = [], 0
        batch.append(item)
        size += n
    if batch:
        out.append(batch)
    return out


def _write(ml: Any, commands: list[Any], message_batches: list[list[Any]], n_messages: int, on_progress: Any,
           batch_size: int) -> dict[str, Any]:
    """The writing half of :func:`ingest`: commands in batches (one save each), remember lines one by one, then the
    conversation turns as messages. Returns the ingest report."""
    recorded = replayed = quarantined = 0
    users: dict[str, int] = {}
    decisions: dict[str, int] = {}
    done = 0
    i = 0
    while i < len(commands):
        if isinstance(commands[i], RememberLine):
            line = commands[i]
            request = line.request
            if request.idempotency_key is None:
                # a key derived here is an identifier of the request's own form ("ingest:" + hex): no check needed
                request = request.model_copy(update={"idempotency_key": remember_idempotency_key(ml, line)})
            try:
                r = ml.remember_request(request)
            except BadInput as exc:
                raise BadInput(line.where + exc.field, exc.problem, exc.fix) from None
            decisions[r.decision] = decisions.get(r.decision, 0) + 1
            results, chunk = [r], [line]
            i += 1
        else:
            j, size = i, 0
            while j < len(commands) and j - i < batch_size and not isinstance(commands[j], RememberLine):
                n = content_bytes(commands[j])  # a command alone is within the limit (value 1 MB, texts 100k chars)
                if j > i and size + n > MAX_BATCH_BYTES:
                    break  # close the batch early rather than have record() refuse it after earlier batches
                size += n
                j += 1
            chunk = commands[i:j]
            results = ml.record(chunk)
            i = j
        for r in results:
            replayed += r.replayed
            recorded += not r.replayed
            quarantined += not r.replayed and r.effect == "quarantine"
        for c in chunk:
            users[c.user_id] = users.get(c.user_id, 0) + 1
        done += len(chunk)
        if on_progress is not None and (done % batch_size == 0 or done == len(commands)
                                        or not isinstance(chunk[0], RememberLine)):
            on_progress(done, len(commands))
    logged = already = 0  # messages are idempotent on message id: re-ingesting logs nothing new
    for batch in message_batches:
        for sr in ml.record_session(batch):
            already += sr.replayed
            logged += not sr.replayed
    report = {"commands": len(commands), "recorded": recorded, "replayed": replayed, "quarantined": quarantined,
              "users": users, "messages": {"commands": n_messages, "logged": logged, "replayed": already}}
    if decisions:
        report["decisions"] = dict(sorted(decisions.items()))
    return report


# -- sessions: conversation turns as logged messages -------------------------------------------------------------
def _read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8-sig"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BadInput("FILE", f"{str(path)!r} is not a JSON file ({exc})", f"pass {what}") from None
    except RecursionError:
        raise BadInput("FILE", f"{str(path)!r} holds JSON nested too deeply", f"pass {what}") from None


def locomo_messages(data: Any, where: str = "") -> list[Any]:
    """Session commands logging every LoCoMo turn in its session, once per speaker's own ledger.

    Each speaker is a user (as for observations) and each LoCoMo session is a session of both speakers,
    ``<sample_id>:session_<n>`` (the observations' ``session_id``). Every turn is logged in both speakers' sessions
    with the turn id (``D1:3``) as message id, the session's ``date_time`` (read as UTC) as ``observed_at`` and the
    real speaker's name as ``speaker``; ``role`` is ``user`` in the speaker's own ledger and ``assistant`` (the
    other seat of the conversation) in the other's, so who said what is never lost. A shared photo's caption is
    appended as ``[shares a photo: ...]``. Re-ingesting logs nothing new (message ids are idempotent).
    """
    from ledger.sessions import validate_session_command

    conversations = data if isinstance(data, list) else [data]
    out: list[Any] = []
    for ci, conv in enumerate(conversations):
        loc = f"{where}conversation[{ci}]"
        if not isinstance(conv, dict) or not isinstance(conv.get("conversation"), dict):
            raise BadInput(loc, "is not a LoCoMo conversation (needs 'conversation')", "pass a LoCoMo JSON file")
        sample = _sample_id(conv, ci, loc)
        sessions = conv["conversation"]
        speakers = [sessions.get("speaker_a"), sessions.get("speaker_b")]
        if not all(isinstance(s, str) and s for s in speakers):
            raise BadInput(f"{loc}.speaker_a", "speaker_a / speaker_b are missing", "every conversation names both")
        numbers = sorted(int(k.split("_")[1]) for k in sessions if re.fullmatch(r"session_\d+", k))
        for n in numbers:
            turns = sessions[f"session_{n}"]
            if not isinstance(turns, list):
                raise BadInput(f"{loc}.session_{n}", f"is a {type(turns).__name__}, not a list of turns",
                               "give the session's turns as a list of {speaker, dia_id, text} objects")
            when = _session_time(sessions, n, loc)
            logged: dict[str, tuple[Any, ...]] = {}  # dia_id -> the turn it names (a repeat must be the same turn)
            for ti, turn in enumerate(turns):
                here = f"{loc}.session_{n}[{ti}]"
                if not isinstance(turn, dict):
                    raise BadInput(here, f"is a {type(turn).__name__}, not a turn",
                                   "give a {speaker, dia_id, text} object")
                text, caption = turn.get("text"), turn.get("blip_caption")
                for name, part in (("text", text), ("blip_caption", caption)):
                    if part is not None and not isinstance(part, str):
                        raise BadInput(f"{here}.{name}", f"is a {type(part).__name__}, not a string",
                                       "give the turn's words as a string")
                text = text or ""
                if caption:
                    text = f"{text} [shares a photo: {caption}]".strip()
                if not text.strip():
                    raise BadInput(f"{here}.text", "is missing or empty",
                                   "give the turn's words (or a blip_caption for a shared photo)")
                if len(text.encode("utf-8")) > MAX_BATCH_BYTES:
                    raise BadInput(f"{here}.text", f"holds {len(text.encode('utf-8'))} bytes; a message takes at most "
                                   f"{MAX_BATCH_BYTES}", "shorten the turn (or split it into several turns)")
                message_id = turn.get("dia_id") or f"D{n}:{ti + 1}"
                if not isinstance(message_id, str):
                    raise BadInput(f"{here}.dia_id", f"{message_id!r} is not a turn id", "give a string such as 'D1:3'")
                previous = logged.get(message_id)
                if previous is not None:
                    if previous != (text, turn.get("speaker")):
                        raise BadInput(f"{here}.dia_id", f"{message_id!r} names two different turns of session_{n}",
                                       "give each turn its own dia_id (a message id is logged once)")
                    continue  # the very same turn twice: logged once, as a re-ingest would
                logged[message_id] = (text, turn.get("speaker"))
                for owner in speakers:
                    out.append(validate_session_command({
                        "op": "log", "user_id": owner, "session_id": f"{sample}:session_{n}",
                        "message_id": message_id, "text": text,
                        "speaker": turn.get("speaker"), "observed_at": when,
                        "role": "user" if turn.get("speaker") == owner else "assistant",
                    }, where=f"{here}."))
    return out


def memorybank_messages(data: Any) -> list[Any]:
    """Session commands for a MemoryBank history file (``memory_bank_en.json`` / ``memory_bank_cn.json``; MIT).

    Each top-level name is a user (surrounding spaces stripped: the English file has ``" Jason "``); each dated day
    of ``history`` is a session ``memorybank:<YYYY-MM-DD>``; each turn's ``query`` is logged as role ``user``
    (speaker = the name) and its ``response`` as role ``assistant``, message ids ``<date>#<n>q`` / ``<date>#<n>r``.
    MemoryBank dates carry no time or zone: ``observed_at`` is that date at 00:00 UTC (stated, never guessed
    silently), and order within the day is the turn order (``seq``).
    """
    from ledger.sessions import validate_session_command

    if not isinstance(data, dict) or not all(isinstance(v, dict) and "history" in v for v in data.values()):
        raise BadInput("FILE", "is not a MemoryBank history file (name -> {history: {date: [turns]}})",
                       "pass memory_bank_en.json or memory_bank_cn.json")
    out: list[Any] = []
    for name, user in data.items():
        user_id = name.strip()
        for day in sorted(user["history"]):
            if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", day):
                raise BadInput(f"{user_id}.history.{day}", "is not a YYYY-MM-DD date", "MemoryBank days are dates")
            for i, turn in enumerate(user["history"][day], 1):
                for part, role, speaker in (("query", "user", user_id), ("response", "assistant", None)):
                    text = turn.get(part)
                    if not text:
                        continue
                    out.append(validate_session_command({
                        "op": "log", "user_id": user_id, "session_id": f"memorybank:{day}",
                        "message_id": f"{day}#{i}{part[0]}", "role": role, "speaker": speaker, "text": text,
                        "observed_at": f"{day}T00:00:00+00:00",
                    }, where=f"{user_id}.history.{day}[{i - 1}].{part}: "))
    return out


def load_session_commands(path: Path, fmt: str) -> list[Any]:
    """The session commands of a file (LoCoMo turns, MemoryBank turns; none for JSONL), validated. Raises BadInput."""
    if fmt == "locomo":
        return locomo_messages(_read_json(path, "a LoCoMo JSON file"))
    if fmt == "memorybank":
        return memorybank_messages(_read_json(path, "a MemoryBank history file"))
    return []
