"""Default values that the API's signatures name, kept apart so that ``memledger.api`` need not import the modules
that use them (memledger/search.py, memledger/sessions.py) to define its methods."""

#: score added to a search hit recorded under the ``role`` asked for (memledger/search.py; docs/retrieval.md)
DEFAULT_ROLE_BONUS = 0.1
#: hours after which an open task's session counts as stale in ``resume`` (memledger/sessions.py; docs/sessions.md)
DEFAULT_EXPIRY_HOURS = 48.0
#: the environment variable a server reads for its index memory budget, in MB (``serve http --index-memory-mb``)
INDEX_MEMORY_ENV = "MEMLEDGER_INDEX_MEMORY_MB"
#: a server's default budget for loaded search indexes, in MB: about 1,300 users of 100 memories (MiniLM and the
#: CJK companion), or one user of 150,000 (projections/retrieval/mirror.py)
DEFAULT_INDEX_MEMORY_MB = 1024
