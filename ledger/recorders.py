"""The log's recorder on SQLite: eventsourcing's ``SQLiteApplicationRecorder`` with the stream lookups the ledger
needs before a save (which streams already have events).

eventsourcing's factory constructs it: :meth:`ledger.backend.SQLiteBackend.event_store_env` names it in
``APPLICATION_RECORDER_TOPIC``, the library's public way to choose the application recorder class (its factory
checks the class is a ``SQLiteApplicationRecorder``). So the backend is chosen once, by the library, and the
ledger never asks which recorder it holds. The queries read the library's own events table through the recorder's
public ``datastore`` and ``events_table_name`` (eventsourcing 9.5). The PostgreSQL twin is
ledger/recorders_postgres.py, a module of its own so that a SQLite store never imports psycopg.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from eventsourcing.sqlite import SQLiteApplicationRecorder


class LedgerSQLiteRecorder(SQLiteApplicationRecorder):
    """eventsourcing's SQLite application recorder, plus :meth:`stream_absent` and :meth:`existing_streams`."""

    def stream_absent(self, stream_id: uuid.UUID) -> bool:
        """True if the log holds no event of ``stream_id``.

        One autocommit SELECT on the library's connection pool (``get_connection`` and ``cursor``), outside a
        transaction: one statement is its own consistent snapshot in SQLite, and it spares the BEGIN and ROLLBACK
        (and context managers) of the library's ``select_events`` (ledger/application.py ``load_fact`` says why
        that matters)."""
        with self.datastore.get_connection(commit=False) as conn, conn.cursor() as cur:
            cur.execute(f"SELECT 1 FROM {self.events_table_name} WHERE originator_id = ? LIMIT 1", (stream_id.hex,))
            return cur.fetchone() is None

    def existing_streams(self, stream_ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
        """Which of ``stream_ids`` have events, in one query (the caller keeps a chunk within SQLite's limit of
        bound parameters)."""
        sql = (f"SELECT DISTINCT originator_id FROM {self.events_table_name} "
               f"WHERE originator_id IN ({', '.join('?' * len(stream_ids))})")
        with self.datastore.transaction(commit=False) as c:
            c.execute(sql, [sid.hex for sid in stream_ids])
            return {uuid.UUID(str(row["originator_id"])) for row in c.fetchall()}
