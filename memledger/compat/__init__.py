"""Drop-in surfaces of other memory libraries over the ledger.

- :mod:`memledger.compat.mem0`: ``Memory`` and ``AsyncMemory`` with mem0 2.x's methods, arguments and result shapes
  (``from memledger.compat.mem0 import Memory`` instead of ``from mem0 import Memory``; docs/interfaces.md lists
  what differs).
"""
