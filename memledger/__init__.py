"""memledger: an event-sourced memory ledger for long-running LLM agents.

``from memledger import MemoryLedger`` is the documented import (memledger/api.py). The packages, arrows one way:
``memledger`` (the faces: Python API, CLI, servers) -> ``replay`` -> ``projections`` -> ``ledger`` (the domain and
the write side); docs/ARCHITECTURE.md.
"""

from ledger.errors import BadInput, ConflictError, MemledgerError, NotCaughtUp

from .api import MemoryLedger

__all__ = ["MemoryLedger", "BadInput", "ConflictError", "MemledgerError", "NotCaughtUp"]
