"""Deferred imports of heavy libraries: a stand-in module that imports the real one on first attribute access.

``numpy`` takes about a quarter of a second to import, and only search, ingest and rebuild use it; a cold
``memledger profile`` or ``assert`` opens the vectors projection (its tables are part of the store) but never
computes with a vector. :func:`lazy_module` returns a stand-in at once, and the first attribute access
(``np.asarray``) imports the module the ordinary way and copies its namespace into the stand-in, so later accesses
cost what a module's do. Modules keep the usual ``np = lazy_module("numpy")`` at the top.

Why not :class:`importlib.util.LazyLoader`: it puts the half-made module in ``sys.modules``, so another library's
``import numpy`` (onnxruntime's, when the query encoder loads) gets it and runs numpy's ``__init__`` inside its own
import; numpy came out of that without ``numpy._core._multiarray_umath`` bound, and the next import of scipy
(sentence-transformers, the torch path) failed with AttributeError. The stand-in never enters ``sys.modules``.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType
from typing import Any


class _Deferred(ModuleType):
    """Stands for the module ``__name__`` until an attribute is read; then holds a copy of its namespace."""

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") and attr.endswith("__"):  # introspection (copy, pickle, doctest) loads nothing
            raise AttributeError(attr)
        real = importlib.import_module(self.__name__)
        vars(self).update({k: v for k, v in vars(real).items() if not k.startswith("__")})
        return getattr(real, attr)  # a submodule imported later (numpy.random) is looked up here each time


def lazy_module(name: str) -> ModuleType:
    """The module ``name``, imported on first attribute access (the module itself if it is already imported).

    Raises ModuleNotFoundError at once when ``name`` is not installed (only its import is deferred)."""
    if name in sys.modules:
        return sys.modules[name]
    if importlib.util.find_spec(name) is None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    return _Deferred(name)
