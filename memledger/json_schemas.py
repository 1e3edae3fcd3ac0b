"""JSON Schemas of every ``--json`` output of the CLI and of the JSONL ingest line, generated from the models.

``python -m memledger.json_schemas [DIR]`` writes one ``<name>.schema.json`` per entry of :data:`OUTPUTS` into
``DIR`` (default ``docs/schemas``); tests/test_json_schemas.py fails when the committed files differ from what the
models generate, and validates the recorded outputs of tests/fixtures/json_contract.json against them. The schemas
follow pydantic's ``model_json_schema`` (JSON Schema draft 2020-12) in ``serialization`` mode for outputs (what
``model_dump(mode="json")`` prints) and ``validation`` mode for inputs (what ``ingest --format jsonl`` accepts).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, TypeAdapter

from ledger.schemas import FactCommand, HistoryRow, Profile, Receipt

from .context import Context
from .hygiene import DueList, QuarantineList, Stats
from .withdrawal import SourceRetraction
from .message_search import MessageHit
from .forget import ForgetReceipt, ScopeForgetReceipt
from .erasure import ErasureReceipt, UserExport
from .identity import IdentityLinks, IdentityReceipt
from .relations import Entities, RelationReceipt, Relations
from .sensitivity import _audit_models
from .sharding.rebalance import RebalanceReport
from .search import SearchHit
from .sessions import Resume, SessionReceipt, SummaryGaps
from .sharding.sharded import ShardsStatus
from .timetravel import Beliefs, Diff


class IngestMessages(BaseModel):
    """Conversation turns logged as messages by an ingest."""

    commands: int
    logged: int
    replayed: int


class IngestReport(BaseModel):
    """``memledger ingest --json``: commands read, events recorded, commands already recorded (a re-ingest records
    nothing new), how many of the recorded were quarantined (recorded, not believed: docs/hygiene.md), commands
    per user, and the messages logged."""

    commands: int
    recorded: int
    replayed: int
    quarantined: int
    users: dict[str, int]
    messages: IngestMessages
    #: remember lines (JSONL text without key, or LoCoMo --resolve): how many took each decision
    decisions: dict[str, int] | None = Field(default=None, exclude_if=lambda v: v is None)


class ProjectReport(BaseModel):
    """``memledger project --json``: the log position the projections reached."""

    position: int


class RebuildOutput(BaseModel):
    """``memledger rebuild --json`` (replay/rebuild.py ``RebuildReport.as_json``); ``seconds`` wall time of the
    replay, ``model_seconds`` the embedding-model load before it (not in ``seconds`` nor ``events_per_second``)."""

    projections: list[str]
    mode: Literal["blue-green", "in-place"]
    events: int
    position: int
    seconds: float
    events_per_second: float
    serving: dict[str, str]
    resumed: list[str]
    model_seconds: float


class VerifyOutput(BaseModel):
    """One element of ``memledger verify --json`` (replay/verify.py ``VerifyResult.as_json``)."""

    projection: str
    ok: bool
    position: int
    checksum: str
    replay_checksum: str
    difference: dict[str, Any] | None


class ErrorDetail(BaseModel):
    """What was refused: the field as the caller wrote it (None for a failure that is not bad input)."""

    field: str | None
    problem: str
    fix: str


class ErrorOutput(BaseModel):
    """With ``--json``, the last line on stderr of a failed command; ``exit`` is its exit code (2 bad input,
    1 failure)."""

    error: ErrorDetail
    exit: int


def _outputs() -> dict[str, tuple[Any, str, str]]:
    audit_cls, _entry = _audit_models()
    outputs: dict[str, tuple[Any, str, str]] = {
        # name: (type, mode, the commands that print it)
        "receipt": (Receipt, "serialization", "assert, correct, retract"),
        "session-receipt": (SessionReceipt, "serialization", "session start|log|card|summarize|end"),
        "ingest": (IngestReport, "serialization", "ingest"),
        "profile": (Profile, "serialization", "profile"),
        "history": (list[HistoryRow], "serialization", "history"),
        "search": (list[SearchHit], "serialization", "search"),
        "beliefs": (Beliefs, "serialization", "believed, true-at"),
        "diff": (Diff, "serialization", "diff"),
        "audit": (audit_cls, "serialization", "audit"),
        "session-gaps": (SummaryGaps, "serialization", "session gaps"),
        "session-search": (list[MessageHit], "serialization", "session search"),
        "resume": (Resume, "serialization", "resume"),
        "context": (Context, "serialization", "context"),
        "quarantine": (QuarantineList, "serialization", "quarantine"),
        "due": (DueList, "serialization", "due"),
        "stats": (Stats, "serialization", "stats"),
        "retract-source": (SourceRetraction, "serialization", "retract-source"),
        "export": (UserExport, "serialization", "export"),
        "erase": (ErasureReceipt, "serialization", "erase"),
        "forget": (ForgetReceipt, "serialization", "forget"),
        "forget-scope": (ScopeForgetReceipt, "serialization", "forget --agent A / --run R"),
        "project": (ProjectReport, "serialization", "project"),
        "rebuild": (RebuildOutput, "serialization", "rebuild"),
        "verify": (list[VerifyOutput], "serialization", "verify"),
        "error": (ErrorOutput, "serialization", "any command given --json, on failure (last line of stderr)"),
        "ingest-jsonl-fact": (FactCommand, "validation", "ingest --format jsonl: a fact command line"),
        "shards-status": (ShardsStatus, "serialization", "shards status"),
        "shards-rebalance": (RebalanceReport, "serialization", "shards rebalance"),
        "relation-receipt": (RelationReceipt, "serialization", "relate, correct-relation, unrelate"),
        "relations": (Relations, "serialization", "relations"),
        "entities": (Entities, "serialization", "entities"),
        "identity-receipt": (IdentityReceipt, "serialization", "identity link, identity unlink"),
        "identity-links": (IdentityLinks, "serialization", "identity list"),
    }
    try:  # the free-text verb's receipt, where it exists
        from ledger.schemas import RememberReceipt  # type: ignore[attr-defined]

        outputs["remember"] = (RememberReceipt, "serialization", "remember")
    except ImportError:  # pragma: no cover
        pass
    return outputs


OUTPUTS = _outputs()


def schema(name: str) -> dict[str, Any]:
    """The JSON Schema of output ``name`` (a key of :data:`OUTPUTS`), with ``$id``-like title and description."""
    tp, mode, commands = OUTPUTS[name]
    out = TypeAdapter(tp).json_schema(mode=mode)  # type: ignore[arg-type]
    out = {"$schema": "https://json-schema.org/draft/2020-12/schema", "title": f"memledger {name}",
           "description": f"printed by: memledger {commands}", **{k: v for k, v in out.items() if k != "title"}}
    return out


def render(name: str) -> str:
    """The committed text of ``<name>.schema.json``."""
    return json.dumps(schema(name), ensure_ascii=False, indent=2, sort_keys=True) + "\n"


def write(directory: Path) -> list[Path]:
    """Write every schema into ``directory``; returns the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in OUTPUTS:
        path = directory / f"{name}.schema.json"
        path.write_text(render(name))
        paths.append(path)
    return paths


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "docs" / "schemas"
    for p in write(target):
        print(p)
