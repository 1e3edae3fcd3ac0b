"""memledger: an event-sourced memory ledger for long-running LLM agents.

``from memledger import MemoryLedger`` is the documented import (memledger/api.py); ``AsyncMemoryLedger``
(memledger/aio.py) has the same verbs as coroutines. The packages, arrows one way:
``memledger`` (the faces: Python API, CLI, servers) -> ``replay`` -> ``projections`` -> ``ledger`` (the domain and
the write side); docs/ARCHITECTURE.md.
"""

import importlib
import threading
from typing import TYPE_CHECKING, Any

from ledger.errors import BadInput, ConflictError, MemledgerError, NotCaughtUp

if TYPE_CHECKING:
    from .aio import AsyncMemoryLedger
    from .api import MemoryLedger

__all__ = ["MemoryLedger", "AsyncMemoryLedger", "BadInput", "ConflictError", "MemledgerError", "NotCaughtUp"]

_resolving = threading.local()


def __dir__() -> list[str]:
    """The module's names and ``__all__`` (``MemoryLedger`` included before its first use: editors complete it)."""
    return sorted(set(globals()) | set(__all__))


def __getattr__(name: str) -> Any:
    """A stored event's class, by the name in its topic (``"memledger:SessionStarted"`` -> ``SessionStarted``).

    Why: eventsourcing resolves a topic it has not seen registered by importing the module named before the colon
    (this package) and reading the attribute (``eventsourcing.utils.resolve_topic``). A process registers a class's
    topic only once it has imported the class's module, and a cold CLI imports only its own verb's modules, so a
    ``memledger verify`` on a log holding session events failed with TopicError. The event modules
    (:data:`ledger.EVENT_MODULES`) are imported here, and the topic is resolved from the registry they fill.
    """
    if name == "MemoryLedger":
        # Imported on first use, not by ``import memledger``: the CLI (memledger/cli/__init__.py) must get to run
        # before pydantic builds the API's models, so it can spare itself pydantic's plugin scan.
        from .api import MemoryLedger

        globals()["MemoryLedger"] = MemoryLedger
        return MemoryLedger
    if name == "AsyncMemoryLedger":  # imported on first use, as MemoryLedger (it imports memledger/api.py)
        from .aio import AsyncMemoryLedger

        globals()["AsyncMemoryLedger"] = AsyncMemoryLedger
        return AsyncMemoryLedger
    # Topics name classes (capitalised); anything else, a submodule the import system looks for (``memledger.cli``)
    # included, is an ordinary missing attribute and must not import the event modules.
    if not name[:1].isupper() or getattr(_resolving, "active", False):
        raise AttributeError(f"module 'memledger' has no attribute {name!r}")
    from eventsourcing.utils import TopicError, resolve_topic

    from ledger import EVENT_MODULES

    for module in EVENT_MODULES:
        importlib.import_module(module)
    _resolving.active = True  # an unregistered name makes resolve_topic come back here: answer AttributeError then
    try:
        return resolve_topic(f"memledger:{name}")
    except TopicError:
        raise AttributeError(f"module 'memledger' has no attribute {name!r}") from None
    finally:
        _resolving.active = False
