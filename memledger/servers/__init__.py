"""The agent faces of memledger (docs/interfaces.md): an MCP server, an HTTP API with per-user keys, a
change feed.

- ``models`` — the pydantic argument models shared by the MCP tools and the HTTP routes (one per verb).
- ``ops`` — :class:`~memledger.servers.ops.Service`: one opened ledger behind a lock, and the verbs the faces call
  (the same :class:`~memledger.api.MemoryLedger` methods the CLI calls, so the JSON is the CLI's ``--json``).
- ``keys`` — the API-key table (hashes only) and :class:`~memledger.servers.keys.Principal`.
- ``mcp`` — the MCP server (``mcp`` >= 2.3, ``MCPServer``): tools, resources, user pinning.
- ``http`` — the FastAPI app: routes, problem+json errors, key checks, the SSE change feed, MCP at ``/mcp``.

Arrows: the CLI (``memledger/cli/serve.py``, ``memledger/cli/keys.py``) imports these modules; they import the
rest of ``memledger`` and never the CLI.
"""
