"""``export``: everything held about a user, gated and recorded as a read (docs/erasure.md, "memledger export").

:func:`memledger.erasure.export_user` gathers the document; this applies the sensitivity rule to it (complete for the
operator and an admin key, every labelled version shown recorded as a disclosure) and adds the people and
relations. A scoped export (an agent, a run: memledger/scopes.py) holds the facts written in that scope and the
run's session; entities and relations are not written by scope, so it leaves them out.
"""

from __future__ import annotations

from typing import Any

from . import erasure, relations, sensitivity
from .scopes import check_scope
from .store import Store

__all__ = ["export"]


def export(ml: Store, user_id: str, *, purpose: str | None = None, complete: bool = True,
           allow_sensitive: Any = None, agent_id: str | None = None,
           run_id: str | None = None) -> erasure.UserExport:
    """``MemoryLedger.export``: the user's :class:`~memledger.erasure.UserExport`, complete (``complete``: every
    label the user's versions and relations carry is granted, with ``purpose`` or
    :data:`memledger.sensitivity.PURPOSE_EXPORT`) or gated by ``allow_sensitive``; limited to ``agent_id`` /
    ``run_id`` when given.

    Raises:
        BadInput: an invalid ``user_id``, label, purpose, ``agent_id`` or ``run_id`` (checked before anything is
            read), or a user id the ledger holds nothing about.
    """
    grant = sensitivity.check_grant(allow_sensitive, purpose)
    scope = check_scope(agent_id, run_id)
    doc = erasure.export_user(ml, user_id, scope)
    if complete:
        grant = sensitivity.Grant(sensitivity.export_labels(ml, doc.user_id) | relations.labels(ml, doc.user_id),
                                  grant.purpose or sensitivity.PURPOSE_EXPORT)
    doc = sensitivity.gate(ml, doc.user_id, doc, grant)
    if doc.erased or scope:
        return doc
    return doc.model_copy(update={"entities": relations.entities(ml, doc.user_id, grant).entities,
                                  "relations": relations.versions(ml, doc.user_id, grant, record=False)})
