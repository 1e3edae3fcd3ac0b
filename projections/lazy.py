"""Deferred imports of heavy libraries with the standard library's :class:`importlib.util.LazyLoader`.

``numpy`` takes about a quarter of a second to import, and only search, ingest and rebuild use it; a cold
``memledger profile`` or ``assert`` opens the vectors projection (its tables are part of the store) but never
computes with a vector. :func:`lazy_module` returns the module object at once and runs its code on the first
attribute access (``np.asarray``), so modules can keep the usual ``np = lazy_module("numpy")`` at the top.
The recipe is the one in the Python documentation of ``importlib.util.LazyLoader``.
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType


def lazy_module(name: str) -> ModuleType:
    """The module ``name``, loaded on first attribute access (the module itself if it is already imported).

    Raises ModuleNotFoundError at once when ``name`` is not installed (only its execution is deferred)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    return module
