"""The log's recorder on PostgreSQL: eventsourcing's ``PostgresApplicationRecorder`` with the stream lookups the
ledger needs before a save, named by :meth:`ledger.backend.PostgresBackend.event_store_env` in
``APPLICATION_RECORDER_TOPIC`` (ledger/recorders.py explains the choice; this module imports psycopg, so only a
PostgreSQL store loads it)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from eventsourcing.postgres import PostgresApplicationRecorder
from psycopg.sql import SQL, Identifier


class LedgerPostgresRecorder(PostgresApplicationRecorder):
    """eventsourcing's PostgreSQL application recorder, plus :meth:`stream_absent` and :meth:`existing_streams`."""

    def stream_absent(self, stream_id: uuid.UUID) -> bool:
        """False ("not known"): on PostgreSQL a lookup before the library's load would cost one more round trip,
        as dear as the load it might spare, so every single-command load is the library's."""
        return False

    def existing_streams(self, stream_ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
        """Which of ``stream_ids`` have events, in one query (``= ANY`` of an array: one round trip)."""
        sql = SQL("SELECT DISTINCT originator_id FROM {}.{} WHERE originator_id = ANY(%s)").format(
            Identifier(self.datastore.schema), Identifier(self.events_table_name))
        with self.datastore.transaction(commit=False) as c:
            c.execute(sql, (list(stream_ids),))
            return {uuid.UUID(str(row["originator_id"])) for row in c.fetchall()}
