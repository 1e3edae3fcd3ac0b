"""memledger's write side and public API: ``from ledger import MemoryLedger``."""

from .errors import BadInput, ConflictError, MemledgerError, NotCaughtUp
from .facade import MemoryLedger

__all__ = ["MemoryLedger", "BadInput", "ConflictError", "MemledgerError", "NotCaughtUp"]
