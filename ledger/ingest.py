"""Turn files into validated commands: LoCoMo conversations and JSONL command files.

LoCoMo (Maharana et al., ACL 2024; CC BY-NC 4.0): each speaker is a user; each per-session observation becomes a
free-text fact whose key is derived from its content (``memory.<12 hex of sha256>``), with ``observed_at`` and
``valid_from`` = its session's ``date_time``, ``source_ref`` = the evidence turn id(s), ``source`` =
``user_statement``. LoCoMo's times carry no zone; they are read as UTC (stated here because a naive time is never
guessed anywhere else). Each command carries an idempotency key derived from (sample, session, speaker, text), so
ingesting the same file twice records nothing new.

JSONL: one command object per line (``op`` defaults to ``assert``); blank lines are skipped.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from datetime import timezone
from pathlib import Path
from typing import Any

from .errors import BadInput
from .schemas import FactCommand, validate_command

FORMATS = ("locomo", "jsonl")


def content_key(text: str, prefix: str = "memory") -> str:
    """The key of a free-text memory: ``memory.`` + the first 12 hex digits of sha256 of its NFC text."""
    digest = hashlib.sha256(unicodedata.normalize("NFC", text).encode()).hexdigest()[:12]
    return f"{prefix}.{digest}"


def parse_locomo_time(text: str, field: str) -> str:
    """LoCoMo's "1:56 pm on 8 May, 2023" -> ISO 8601 in UTC, parsed by ``dateparser``."""
    import dateparser

    dt = dateparser.parse(text, languages=["en"], settings={"TIMEZONE": "UTC", "RETURN_AS_TIMEZONE_AWARE": True})
    if dt is None:
        raise BadInput(field, f"{text!r} is not a date LoCoMo's format allows", "e.g. '1:56 pm on 8 May, 2023'")
    return dt.astimezone(timezone.utc).isoformat()


def locomo_commands(data: Any, where: str = "") -> list[FactCommand]:
    """Commands for every observation of every conversation in a LoCoMo file (a list, or one conversation)."""
    conversations = data if isinstance(data, list) else [data]
    out: list[FactCommand] = []
    for ci, conv in enumerate(conversations):
        loc = f"{where}conversation[{ci}]"
        if not isinstance(conv, dict) or "observation" not in conv or "conversation" not in conv:
            raise BadInput(loc, "is not a LoCoMo conversation (needs 'conversation' and 'observation')",
                           "pass a LoCoMo JSON file, or use --format jsonl")
        sample = str(conv.get("sample_id", ci))
        sessions = conv["conversation"]
        observations = conv["observation"]
        for skey in sorted(observations, key=lambda s: int(re.sub(r"\D", "", s) or 0)):
            n = re.sub(r"\D", "", skey)
            when_text = sessions.get(f"session_{n}_date_time")
            if not when_text:
                raise BadInput(f"{loc}.{skey}", f"session_{n}_date_time is missing", "every session needs a date")
            when = parse_locomo_time(when_text, f"{loc}.session_{n}_date_time")
            for speaker, items in observations[skey].items():
                for oi, item in enumerate(items):
                    text, ref = item[0], item[1]
                    ref = ",".join(ref) if isinstance(ref, list) else str(ref)
                    digest = hashlib.sha256(f"{sample}|{n}|{speaker}|{text}".encode()).hexdigest()[:20]
                    out.append(validate_command({
                        "op": "assert", "user_id": speaker, "key": content_key(text), "value": text, "text": text,
                        "observed_at": when, "valid_from": when, "source": "user_statement", "source_ref": ref,
                        "session_id": f"{sample}:session_{n}", "idempotency_key": f"locomo:{digest}",
                    }, where=f"{loc}.{skey}.{speaker}[{oi}]."))
    return out


def jsonl_commands(path: Path) -> list[FactCommand]:
    out = []
    with path.open(encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise BadInput(f"line {lineno}", f"is not JSON ({exc.msg})", "one command object per line") from None
            if not isinstance(obj, dict):
                raise BadInput(f"line {lineno}", "is not a JSON object", "one command object per line")
            out.append(validate_command({"op": "assert", **obj}, where=f"line {lineno}: "))
    return out


def load_commands(path: Path, fmt: str) -> list[FactCommand]:
    """Read and validate every command of a file before anything is written. Raises BadInput."""
    if fmt not in FORMATS:
        raise BadInput("--format", f"{fmt!r} is not a known format", "use one of " + ", ".join(FORMATS))
    if not path.is_file():
        raise BadInput("FILE", f"{str(path)!r} does not exist or is not a file", "give the path of a data file")
    if fmt == "jsonl":
        return jsonl_commands(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BadInput("FILE", f"{str(path)!r} is not a JSON file ({exc})", "pass a LoCoMo JSON file") from None
    return locomo_commands(data)
