"""Bring memories kept by another system into the ledger: mem0 (:mod:`memledger.importers.mem0`) and a LangGraph
store (:mod:`memledger.importers.langgraph`); ``memledger import mem0 PATH`` / ``memledger import langgraph PATH``.

Each importer reads its file into commands first (nothing is written when the file is unreadable), then records
them in batches through :meth:`~memledger.api.MemoryLedger.record`. Every item keeps its original creation time as
the observed time (system time stays the import's) and its id as ``source_ref``; each command carries an
idempotency key made from the source system, the item's id and the step of its history, so running the import
again records nothing new. An item that cannot be carried over is skipped and named in the report with the reason;
the rest are recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ledger.agent_spaces import PREFIX
from ledger.errors import BadInput

#: commands per save (a batch holds at most 2,000)
BATCH = 500


@dataclass
class ImportReport:
    """What an import did: ``items`` read from the file, ``commands`` made of them, ``recorded`` (new events),
    ``replayed`` (already recorded by an earlier run), ``users`` (commands per user), ``agents`` (commands per
    agent whose own memories items without a user were carried into, memledger/agent_space.py), ``skipped`` (one
    ``{"item", "reason"}`` per item not carried over)."""

    source: str
    items: int = 0
    commands: int = 0
    recorded: int = 0
    replayed: int = 0
    users: dict[str, int] = field(default_factory=dict)
    agents: dict[str, int] = field(default_factory=dict)
    skipped: list[dict[str, str]] = field(default_factory=list)

    def skip(self, item: str, reason: str) -> None:
        self.skipped.append({"item": item, "reason": reason})

    def as_json(self) -> dict[str, Any]:
        """The report as the CLI's ``--json`` prints it (the fields above)."""
        return {"source": self.source, "items": self.items, "commands": self.commands, "recorded": self.recorded,
                "replayed": self.replayed, "users": dict(sorted(self.users.items())), "agents": dict(sorted(self.agents.items())),
                "skipped": self.skipped}


def checked(commands: list[tuple[str, dict[str, Any]]], report: ImportReport) -> list[dict[str, Any]]:
    """The commands that pass the ledger's own validation; each item with one that does not is skipped whole and
    reported with the field and the problem (``user_id: ' 张伟' has surrounding spaces``)."""
    from ledger.schemas import validate_command

    bad: dict[str, str] = {}
    for item, cmd in commands:
        if item in bad:
            continue
        try:
            validate_command(cmd)
        except BadInput as exc:
            bad[item] = f"{exc.field}: {exc.problem}"
    for item, reason in bad.items():
        report.skip(item, reason)
    return [cmd for item, cmd in commands if item not in bad]


def record_all(ml: Any, commands: list[dict[str, Any]], report: ImportReport) -> ImportReport:
    """Record ``commands`` in batches of :data:`BATCH`, counting what was new and what an earlier run recorded.
    Raises BadInput naming ``path`` (nothing written) when the file held items and none could be carried over."""
    report.commands = len(commands)
    if not commands and report.skipped:
        first = report.skipped[0]
        raise BadInput("path", f"none of its {report.items} items can be carried over ({first['item']}: "
                       f"{first['reason']})", f"give a {report.source} file of the shape `memledger import "
                       f"{report.source} --help` describes")
    for i in range(0, len(commands), BATCH):
        try:
            receipts = ml.record(commands[i:i + BATCH])
        except BadInput as exc:
            if exc.field.endswith("idempotency_key"):
                raise BadInput("source", "these items were imported before with another --source (or another "
                               "version of the file changed an item's history)",
                               "run it with the --source of the first import; an item is imported once") from None
            raise
        for r in receipts:
            if r.replayed:
                report.replayed += 1
            else:
                report.recorded += 1
            if r.user_id.startswith(PREFIX):
                agent = r.user_id[len(PREFIX):]
                report.agents[agent] = report.agents.get(agent, 0) + 1
            else:
                report.users[r.user_id] = report.users.get(r.user_id, 0) + 1
    return report
