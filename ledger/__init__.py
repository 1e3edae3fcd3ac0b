"""memledger's domain and write side: events, aggregates, the belief policy, commands, the log, crypto.

Nothing here imports ``projections``, ``replay`` or ``memledger`` (docs/ARCHITECTURE.md; a test holds it) with one
exception: ``from ledger import MemoryLedger`` was the documented import before the ``memledger`` package existed,
so ``MemoryLedger`` is re-exported lazily, on first attribute access, for old callers. Write
``from memledger import MemoryLedger``.
"""

from typing import Any

from .errors import BadInput, ConflictError, MemledgerError, NotCaughtUp

__all__ = ["MemoryLedger", "BadInput", "ConflictError", "MemledgerError", "NotCaughtUp", "EVENT_MODULES"]

#: Every module that defines stored event or aggregate classes. Their explicit topics (``"memledger:SessionStarted"``)
#: are registered with eventsourcing when a module is imported; ``memledger.__getattr__`` imports these so that a
#: process that has not (a cold CLI imports only its verb's modules) can still decode every event in the log.
EVENT_MODULES = ("ledger.domain", "ledger.sessions", "ledger.privacy", "ledger.moves", "ledger.relations")


def __getattr__(name: str) -> Any:
    if name == "MemoryLedger":
        # The one allowed back-reference (ledger -> memledger), lazy so that importing ledger never loads the faces.
        from memledger.api import MemoryLedger

        return MemoryLedger
    raise AttributeError(f"module 'ledger' has no attribute {name!r}")
