"""The requests of the verbs that every face offers: one pydantic model per verb, built once by whichever face took
the call (the Python API, the CLI, an MCP tool, an HTTP route) and passed down to the capability.

Each field exists here once, with its description, default and constraints; the faces' argument models are made
from these (memledger/servers/models.py), and ``tests/test_request_models.py`` checks that every face reaches every
field. The checks run here, once, when the request is built: a refusal is a :class:`RequestError` (a
:class:`~ledger.errors.BadInput`) naming the request's field, and nothing is read or written.

A refusal is worded once, in terms of the request: its problem and fix may name other fields or give an example,
and each face renders them in its own terms through :class:`Names` (the CLI's ``--as-of`` and ``--in all``, an MCP
argument or HTTP field ``as_of`` and ``within="all"``). The Python API shows the request's own names.

Flow: face -> request (validated here) -> capability (``memledger/search.py`` takes a :class:`SearchRequest`,
``memledger/context.py`` a :class:`ContextRequest`, ``memledger/remember.py`` a :class:`RememberRequest`; the
sensitivity gate, ``memledger/sensitivity.py``, wraps the reads).
"""

from __future__ import annotations

from .base import PYTHON, Names, Request, RequestError
from .checks import (MAX_EXPAND, MAX_K, MAX_QUERY, MAX_SCORE, MAX_USERS, SEARCH_IN, check_allow_sensitive, check_also,
                     check_expand, check_purpose, check_role_bonus, check_role_name)
from .context import ContextRequest
from .remember import RememberRequest
from .search import SearchRequest

__all__ = ["ContextRequest", "MAX_EXPAND", "MAX_K", "MAX_QUERY", "MAX_SCORE", "MAX_USERS", "Names", "PYTHON",
           "RememberRequest", "Request", "RequestError", "SEARCH_IN", "SearchRequest", "check_allow_sensitive",
           "check_also", "check_expand", "check_purpose", "check_role_bonus", "check_role_name"]
