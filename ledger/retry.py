"""The one retry policy for writes that lose an optimistic-concurrency race.

Every write decides its events from the streams' current state, then saves them in one transaction; eventsourcing
refuses the save (``RecordConflictError``) when another writer took a version first. The whole attempt — load,
decide, save — is then run again on the winner's state, so two writers racing on one stream never lose an update.
Back-off is exponential with full jitter (AWS Architecture Blog, "Exponential Backoff and Jitter"), so racing writers
stop colliding in step; after :data:`MAX_RETRIES` re-runs the write gives up with a :class:`ConflictError` (exit 1,
nothing of the batch saved). Fact commands and session commands both run through :func:`on_conflict`.
"""

from __future__ import annotations

import random
import time
from typing import Callable, TypeVar

from eventsourcing.persistence import RecordConflictError

from .errors import ConflictError

T = TypeVar("T")

#: re-runs after the first attempt before a write gives up
MAX_RETRIES = 30
#: the longest single back-off, in seconds
MAX_BACKOFF = 0.05


def backoff(attempt: int) -> None:
    """Sleep before re-run ``attempt`` (0-based): uniform in [0, min(MAX_BACKOFF, 1 ms * 2**attempt)] seconds."""
    time.sleep(random.uniform(0, min(MAX_BACKOFF, 0.001 * 2 ** attempt)))


def on_conflict(attempt: Callable[[int], T], what: str) -> T:
    """Run ``attempt(n)`` (n = 0, 1, ...) until it returns without a ``RecordConflictError``; return its result.

    ``attempt`` must load, decide and save afresh each time (nothing of a lost attempt is saved). Any other error
    (a refusal, ``BadInput``) propagates at once. ``what`` names the streams in the error ("fact(s)", "session(s)").

    Raises:
        ConflictError: the save lost the race ``MAX_RETRIES + 1`` times.
    """
    for n in range(MAX_RETRIES + 1):
        try:
            return attempt(n)
        except RecordConflictError:
            backoff(n)
    raise ConflictError(f"gave up after {MAX_RETRIES + 1} attempts: other writers kept changing the same {what}; "
                        "retry the command")
