"""An optional adjudicator for the decisions slot resolution leaves at ``conflict``: an OpenAI-compatible chat
endpoint (a local Ollama or vLLM server) asked whether the new statement replaces the memory it may replace.

Off by default. Set ``MEMLEDGER_ADJUDICATOR_URL`` to the endpoint's base URL (``http://127.0.0.1:11434/v1``; the
request goes to ``{url}/chat/completions``), optionally ``MEMLEDGER_ADJUDICATOR_MODEL`` (default ``llama3.1``),
``MEMLEDGER_ADJUDICATOR_TIMEOUT`` (seconds, default 5) and ``MEMLEDGER_ADJUDICATOR_KEY`` (a bearer token, if the
server wants one). The product never needs it: when the endpoint is down, slow, or answers anything but one of the
three verdicts below, the conflict stays as the rules left it. Whatever happens, the question's inputs and the
answer (or the failure) go into the event's evidence, so ``audit`` shows why.

Verdicts: ``replaces`` (a change of mind or of the world: supersede), ``corrects`` (the old statement was wrong:
correct), ``both_true`` (both stay current, nothing contested).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

#: the environment variables (class-constant style, as eventsourcing names its settings)
URL_ENV = "MEMLEDGER_ADJUDICATOR_URL"
MODEL_ENV = "MEMLEDGER_ADJUDICATOR_MODEL"
TIMEOUT_ENV = "MEMLEDGER_ADJUDICATOR_TIMEOUT"
KEY_ENV = "MEMLEDGER_ADJUDICATOR_KEY"
DEFAULT_MODEL = "llama3.1"
DEFAULT_TIMEOUT = 5.0
VERDICTS = ("replaces", "corrects", "both_true")

PROMPT = (
    "You keep a user's memory. An OLD statement is current; the user now said a NEW one. Decide one of: "
    "\"replaces\" (the NEW one is a change: the OLD one was true until now), \"corrects\" (the OLD one was never "
    "true: a mistake), \"both_true\" (they are about different things, or both hold). Answer with JSON only: "
    "{\"verdict\": \"replaces\" | \"corrects\" | \"both_true\", \"why\": \"<a short reason>\"}."
)


@dataclass(frozen=True)
class Verdict:
    """The adjudicator's answer: ``verdict`` (one of :data:`VERDICTS`, or None when there is none to use) and
    ``evidence`` (one line for the event's reason: model, inputs' roles, answer or failure)."""

    verdict: str | None
    evidence: str


def configured() -> bool:
    """Whether an adjudicator endpoint is set (``MEMLEDGER_ADJUDICATOR_URL``)."""
    return bool(os.environ.get(URL_ENV, "").strip())


def ask(old: str, new: str) -> Verdict:
    """Ask the configured endpoint about ``old`` (current) and ``new``; never raises. Timeout in seconds from
    ``MEMLEDGER_ADJUDICATOR_TIMEOUT``."""
    import httpx

    url = os.environ.get(URL_ENV, "").strip().rstrip("/")
    model = os.environ.get(MODEL_ENV, "").strip() or DEFAULT_MODEL
    try:
        timeout = float(os.environ.get(TIMEOUT_ENV, "") or DEFAULT_TIMEOUT)
    except ValueError:
        timeout = DEFAULT_TIMEOUT
    headers = {"Authorization": f"Bearer {os.environ[KEY_ENV]}"} if os.environ.get(KEY_ENV) else {}
    body = {"model": model, "temperature": 0, "messages": [
        {"role": "system", "content": PROMPT},
        {"role": "user", "content": json.dumps({"OLD": old, "NEW": new}, ensure_ascii=False)}]}
    where = f"adjudicator {model} at {url}"
    try:
        r = httpx.post(f"{url}/chat/completions", json=body, headers=headers, timeout=timeout)
        r.raise_for_status()
        content = r.json()["choices"][0]["message"]["content"]
        answer = json.loads(content[content.find("{"): content.rfind("}") + 1])
        verdict = answer.get("verdict")
        why = str(answer.get("why", ""))[:200]
    except (httpx.HTTPError, ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        return Verdict(None, f"{where}: no answer ({type(exc).__name__}); the conflict stays")
    if verdict not in VERDICTS:
        return Verdict(None, f"{where}: unusable answer {str(verdict)[:40]!r}; the conflict stays")
    return Verdict(verdict, f"{where}: {verdict} ({why})")
