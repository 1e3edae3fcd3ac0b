"""The browser views of a user's memory and of the store's health (docs/timeline.md).

- :func:`user_html`: the bitemporal timeline of one user (one row per key, each version a bar over its valid time,
  a system-time slider, the audit of each version, sessions, messages and disclosures), served at
  ``/ui/users/{user_id}`` by ``memledger serve http`` and written to one self-contained file by
  ``memledger timeline USER --html FILE``.
- :func:`health_html`: the store's memory health over time, at ``/ui/health``.

The view models (:mod:`memledger.ui.model`) read the history, timeline, session, message and disclosure
projections; the renderer (:mod:`memledger.ui.render`) escapes every stored text; the script and style are package
data (``static/``), served by memledger itself: nothing is fetched from anywhere else, at install or at run time.
The pages and the export are read-only, but showing a labelled (sensitive) fact is recorded as a disclosure, as in
``context``.
"""

from __future__ import annotations

from typing import Any

from .model import PURPOSE_EXPORT, PURPOSE_PAGE, health_view, record_shown, user_view
from .render import health_page, user_page


def user_html(ml: Any, user_id: str, *, allow_sensitive: Any = frozenset(), inline: bool = False,
              now: Any = None, purpose: str | None = None, agent_id: str | None = None,
              run_id: str | None = None) -> tuple[str, dict[str, Any]]:
    """The timeline page of ``user_id`` as HTML, and its view model.

    ``allow_sensitive``: labels whose facts are shown (others are shown withheld); each labelled version shown is
    recorded as a disclosure with ``purpose`` (default: the page's or the export's). ``inline``: one
    self-contained file (script and style inside; a Content-Security-Policy that fetches nothing). ``agent_id`` /
    ``run_id``: only what that agent wrote / that run held (:func:`memledger.ui.model.user_view`).

    Raises:
        BadInput: an invalid user id, label, ``now``, ``agent_id`` or ``run_id``.
    """
    from ..sensitivity import check_allow_sensitive

    labels = check_allow_sensitive(list(allow_sensitive) if allow_sensitive else None)
    view = user_view(ml, user_id, allow_sensitive=labels, now=now, agent_id=agent_id, run_id=run_id)
    page = user_page(view, inline=inline)
    record_shown(ml, view, purpose or (PURPOSE_EXPORT if inline else PURPOSE_PAGE))
    return page, view


def health_html(ml: Any, *, points: int = 12, now: Any = None) -> str:
    """The store's memory health page (:func:`memledger.ui.model.health_view` rendered)."""
    return health_page(health_view(ml, points=points, now=now))


__all__ = ["health_html", "health_view", "user_html", "user_view"]
