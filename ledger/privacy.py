"""Privacy in the domain: which fields are encrypted, the key store of a store, and the privacy events.

The verbs that use them are in memledger/erasure.py (erase, export) and memledger/sensitivity.py (the sensitivity
filter on search and context).

See docs/erasure.md for the why. In short (crypto-shredding):

* Every personal payload field of every event (:data:`ENCRYPTED_FIELDS`) is encrypted with the user's own
  AES-256-GCM data key by :class:`ledger.crypto.EncryptingMapper`, wired in
  :meth:`ledger.application.LedgerApplication.construct_mapper`. Keys live in their own store
  (:func:`open_keystore`: ``keys.db`` in the home directory, or ``<schema>.user_keys`` on PostgreSQL).
* :func:`erase_user` records :class:`SubjectErased` (plaintext metadata only), destroys the key, purges every
  projection (``Projection.purge_user``) and any snapshot, then compacts the SQLite files so deleted bytes leave
  the disk. From then on the user's old events decode with ``None`` content and are skipped by the catch-up loop
  (replay/catchup.py), and a replay meeting ``SubjectErased`` purges again, so a full rebuild brings nothing back.
* :func:`export_user` gathers everything held about a user into one :class:`UserExport` (right of access).
* :class:`SensitiveFactIncluded` records, in the log, each time a fact carrying a sensitivity label was let into
  an agent's context (``projections/disclosures.py`` keeps them queryable, ``memledger export`` shows them).

This module, like all of ``ledger/``, imports nothing from ``projections/``, ``replay/`` or ``memledger/``.
"""

from __future__ import annotations

import os
import uuid
from typing import TYPE_CHECKING, Any

from eventsourcing.domain import Aggregate, event

from .crypto import DEFAULT_ENCRYPTED_FIELDS, KeyStore
from .domain import NAMESPACE
from .errors import BadInput

if TYPE_CHECKING:  # pragma: no cover
    from .config import Settings

__all__ = [
    "Disclosure",
    "SubjectErasure",
    "subject_id",
    "KEY_CACHE_TTL",
    "ENCRYPTED_FIELDS",
    "ENCRYPTION_ENV",
    "SensitiveFactIncluded",
    "SubjectErased",
    "encryption_enabled",
    "open_keystore",
]

#: Payload fields encrypted under the user's key. Fact events: ``value_json``, ``text``, ``reason`` (the
#: content) and ``command_fingerprint`` (a sha256 over the whole command, value included: a hash of a
#: low-entropy value such as a birth year can be brute-forced, so it is personal too). Session events
#: (ledger/sessions.py): message ``text`` and ``speaker`` (a name), its ``fingerprint`` (a hash of the text),
#: summary ``text``, the state ``card`` and its patch ``ops``, the session ``task`` and an ``inherited_card``.
#: Keys (``preference.drink``), ids, times and provenance stay plaintext: replay, audit and idempotency need them,
#: and they must not carry personal content (docs/erasure.md).
ENCRYPTED_FIELDS: frozenset[str] = DEFAULT_ENCRYPTED_FIELDS | {
    "command_fingerprint", "speaker", "fingerprint", "ops", "task", "inherited_card",
    # a disclosure's purpose is the caller's free text ("review dave's leukemia plan"): content, not metadata
    # (in plaintext it would survive erasure). Earlier disclosures keep theirs in plaintext.
    "purpose",
    # an entity's name and aliases (ledger/relations.py): "Anna", "my sister"
    "name", "aliases",
}

#: Seconds a live data key stays cached in a process (scripts/bench_encryption.py: decoding pays a key-store
#: lookup per event without it -- a SQL query on SQLite, a network round trip on PostgreSQL). Destroying a key
#: clears this process's cache at once; another process may decode a destroyed user's events for up to this long,
#: which cannot bring content back: events before the tombstone are purged when ``SubjectErased`` is applied, and
#: writes check ``is_destroyed`` uncached (docs/erasure.md).
KEY_CACHE_TTL = 5.0

#: ``MEMLEDGER_ENCRYPTION=off`` turns per-user encryption off for a *new* store (benchmarks, legacy). Default on.
ENCRYPTION_ENV = "MEMLEDGER_ENCRYPTION"


def encryption_enabled(environ: dict[str, str] | None = None) -> bool:
    """True unless ``$MEMLEDGER_ENCRYPTION`` is ``off``/``0``/``false``/``no`` (case-insensitive).

    Raises:
        BadInput: for any other non-empty value (naming the variable and the accepted values).
    """
    value = (os.environ if environ is None else environ).get(ENCRYPTION_ENV, "").strip().lower()
    if value in ("", "on", "1", "true", "yes"):
        return True
    if value in ("off", "0", "false", "no"):
        return False
    raise BadInput(ENCRYPTION_ENV, f"{value!r} is not on or off", "set it to on (default) or off")


def open_keystore(settings: Settings, encrypt: bool | None = None) -> KeyStore | None:
    """The key store of a ledger: ``<home>/keys.db`` (SQLite) or table ``<schema>.user_keys`` (PostgreSQL).

    Returns None when encryption is off (``encrypt=False`` or ``$MEMLEDGER_ENCRYPTION=off``). A master key in
    ``$MEMLEDGER_MASTER_KEY`` (base64 of 32 bytes) wraps the data keys (ledger/crypto.py).

    Raises:
        MemledgerError: encryption off for an embedded store that already has a ``keys.db`` -- its log holds
            ciphertext that only the key store can read, so switching off would return tokens as content.
    """
    if encrypt is None:
        encrypt = encryption_enabled()
    return settings.backend.keystore(encrypt, KEY_CACHE_TTL, ENCRYPTION_ENV)


# ----------------------------------------------------------------------------------------------------- events


def subject_id(user_id: str) -> uuid.UUID:
    """The stream id of a user's erasure record: ``uuid5(NAMESPACE, "subject\\x1f<user_id>")``."""
    return uuid.uuid5(NAMESPACE, f"subject\x1f{user_id}")


class SubjectErasure(Aggregate):
    """One stream per erased user, holding the single ``SubjectErased`` tombstone (so a second erasure of the
    same user finds it and records nothing new)."""

    TOPIC = "memledger:SubjectErasure"

    class Created(Aggregate.Created):
        # eventsourcing redefines ``Created`` on each aggregate class; with an explicit aggregate TOPIC every
        # event class on it needs one too.
        TOPIC = "memledger:SubjectErasure.Created"

    class SubjectErased(Aggregate.Created):
        """The tombstone: who was erased, when (the event's timestamp), by whom, and how much was purged.

        Never encrypted (``ENCRYPTED_FIELDS`` empty): it must stay readable after the key is gone, and holds no
        personal content -- only the user id, which the log keeps anyway as stream metadata.
        """

        TOPIC = "memledger:SubjectErased"
        ENCRYPTED_FIELDS = frozenset()
        user_id: str
        actor: str | None
        facts: int
        events: int

    @staticmethod
    def create_id(user_id: str, **_: Any) -> uuid.UUID:
        return subject_id(user_id)

    @event(SubjectErased)
    def __init__(self, user_id: str, actor: str | None, facts: int, events: int) -> None:
        self.user_id = user_id
        self.actor = actor
        self.facts = facts
        self.events = events


#: The event class the catch-up loop reacts to (purge the user from every projection).
SubjectErased = SubjectErasure.SubjectErased


class Disclosure(Aggregate):
    """One stream per disclosure: a labelled fact let into an agent's context (a stream each, so concurrent
    context assemblies never conflict on a version)."""

    TOPIC = "memledger:Disclosure"

    class Created(Aggregate.Created):
        TOPIC = "memledger:Disclosure.Created"

    class SensitiveFactIncluded(Aggregate.Created):
        """A fact labelled ``sensitivity`` (health, finance, ...) was included in context because the caller
        allowed that label. Metadata only (key, version, label, purpose): the content stays in the fact's own
        encrypted events."""

        TOPIC = "memledger:SensitiveFactIncluded"
        user_id: str
        key: str
        version: int
        sensitivity: str
        session_id: str | None
        purpose: str | None
        trace_id: str | None

    @event(SensitiveFactIncluded)
    def __init__(self, user_id: str, key: str, version: int, sensitivity: str, session_id: str | None,
                 purpose: str | None, trace_id: str | None) -> None:
        self.user_id = user_id


SensitiveFactIncluded = Disclosure.SensitiveFactIncluded
