"""Default values that the API's signatures name, kept apart so that ``memledger.api`` need not import the modules
that use them (memledger/search.py, memledger/sessions.py) to define its methods."""

#: score added to a search hit recorded under the ``role`` asked for (memledger/search.py; docs/retrieval.md)
DEFAULT_ROLE_BONUS = 0.1
#: hours after which an open task's session counts as stale in ``resume`` (memledger/sessions.py; docs/sessions.md)
DEFAULT_EXPIRY_HOURS = 48.0
