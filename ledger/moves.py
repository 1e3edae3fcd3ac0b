"""A user's arrival on a shard: the marker a shard move saves in front of the user's copied events (docs/scale.md).

When memledger/sharding/rebalance.py copies a user's events from one shard's log to another's, they land after events the
target recorded later; the catch-up's monotonic system time (replay/events.py ``decode``: an event's system time is
raised to the previous event's, for writers with skewed clocks) would then restamp every copied event with the
target's latest time, and time travel on the moved user would change. So the copy is saved, in one transaction, as
``UserArrived`` followed by the copied events, and the catch-up restarts its monotonic clock at the marker's
``since`` (the first copied event's system time): the copies keep the system times the old shard gave them, and
events written afterwards are later than all of them anyway.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from eventsourcing.domain import Aggregate, event

from .domain import NAMESPACE


class ShardArrival(Aggregate):
    """One stream per move of one user onto this shard, holding the single ``UserArrived`` event."""

    TOPIC = "memledger:ShardArrival"

    class Created(Aggregate.Created):
        TOPIC = "memledger:ShardArrival.Created"

    class UserArrived(Aggregate.Created):
        """``user_id`` moved here from shard ``source``; the next ``events`` events of the log (same transaction) are
        the copies, the first of them stamped ``since`` (system time, UTC). Plaintext metadata only (the user id is
        stream metadata anyway), so it stays readable after an erasure."""

        TOPIC = "memledger:UserArrived"
        ENCRYPTED_FIELDS = frozenset()
        user_id: str
        source: str
        events: int
        since: datetime

    @staticmethod
    def create_id(user_id: str, source: str, **_: Any) -> uuid.UUID:
        # a fresh stream per move: a user may move onto the same shard again after moving away
        return uuid.uuid5(NAMESPACE, f"arrival\x1f{user_id}\x1f{source}\x1f{uuid.uuid4()}")

    @event(UserArrived)
    def __init__(self, user_id: str, source: str, events: int, since: datetime) -> None:
        self.user_id = user_id
        self.source = source
        self.events = events
        self.since = since


#: The event class the catch-up restarts its monotonic system time at.
UserArrived = ShardArrival.UserArrived
