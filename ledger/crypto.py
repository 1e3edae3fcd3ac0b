"""Crypto-shredding: per-user data keys and a field-encrypting event mapper.

Every user's personal payload fields are encrypted (AES-256-GCM, ``cryptography`` package) with that user's own
32-byte *data key*. Erasing the user destroys the key; the append-only log keeps only unreadable ciphertext plus
the plaintext metadata needed to replay and audit it (topic, originator id and version, ``user_id``, timestamps,
provenance, every field not listed for encryption).

Pieces
------
* :class:`KeyStore` -- the protocol: ``get_or_create`` / ``get`` / ``destroy`` / ``is_destroyed``.
* :class:`~ledger.keystores.SQLiteKeyStore` -- table ``user_keys`` in its own SQLite file (embedded default).
* :class:`~ledger.keystores.PostgresKeyStore` -- table ``<schema>.user_keys`` over psycopg 3 (both in
  ledger/keystores.py and ledger/keystore_postgres.py; ledger/keystore_base.py wraps data keys under the master key).
* :class:`EncryptingMapper` -- an ``eventsourcing.persistence.Mapper`` that encrypts the listed fields of every
  event whose state has a non-empty ``user_id``, before the library's transcoder / compressor / cipher run.
* :func:`is_erased` -- tells whether a decoded event belonged to a user whose key was destroyed.

Plugging it into an ``eventsourcing`` Application (9.5.6)
---------------------------------------------------------
``Application.__init__`` calls ``self.construct_mapper()`` (no arguments) right after building ``self.factory``,
so the key store must exist before ``super().__init__()``::

    class Ledger(Application):
        def __init__(self, env=None, *, keystore: KeyStore):
            self.keystore = keystore                      # must be set before super().__init__()
            super().__init__(env)

        def construct_mapper(self) -> Mapper:
            return EncryptingMapper(
                transcoder=self.construct_transcoder(),  # keeps the UUID/Decimal/datetime transcodings
                compressor=self.factory.compressor(),    # COMPRESSOR_TOPIC still honoured
                cipher=self.factory.cipher(),            # CIPHER_TOPIC / CIPHER_KEY still honoured
                keystore=self.keystore,
            )

``MAPPER_TOPIC`` cannot be used on its own: ``InfrastructureFactory.mapper()`` constructs the mapper class with
only ``transcoder``, ``cipher`` and ``compressor``, so it has no way to hand over a key store; constructing an
:class:`EncryptingMapper` without one raises a ``TypeError`` that says so.

Where the mapper hooks in
-------------------------
``Mapper.to_stored_event`` turns ``vars(event)`` into a dict, pops originator id/version, transcodes the dict to
bytes, then compresses, then (optionally) encrypts the whole blob. We encrypt the listed fields *in the state
dict*, before transcoding, by handing the base class a shallow copy of the event whose ``__dict__`` holds the
tokens -- so class_version, the compressor and the library's whole-record cipher all still apply unchanged.
On the way back we re-implement ``to_domain_event`` step for step (cipher -> compressor -> transcoder) and
decrypt the fields right after transcoding and *before* upcasting, because tokens are bound to the field name
and version they were written under; upcasters therefore see plaintext (or ``None`` after erasure).

Each encrypted field's value is first encoded with the mapper's own transcoder, so any JSON value (str, dict,
list, number, registered types such as datetime/UUID) round-trips with its type; it is then stored as the
string ``"enc:v1:" + base64(nonce12 + ciphertext_and_tag)``.

What decoding an erased user's event yields
-------------------------------------------
If the user's key was destroyed, every encrypted field decodes to ``None`` and the event is marked instead of
raising, so replays after erasure proceed and simply see no content:

* if the event class declares a dataclass field named ``erased``, it is set to ``True``;
* otherwise the key ``"_erased": True`` is put in the event's ``__dict__``. eventsourcing builds decoded events
  with ``object.__new__`` + ``object.__setattr__(event, "__dict__", state)``, so this works with its frozen
  dataclasses; it is not a dataclass field, so it takes no part in ``==``/``repr``/``asdict``, and
  ``@event``-decorated methods ignore it (the library only passes parameters a method names). Use
  :func:`is_erased` to test for either form. The marker is dropped again if such an event is ever re-encoded.

A field whose stored value is not a token (an event written before encryption was switched on) is passed
through unchanged. A token that fails authentication (tampered, or moved from another field/event/user) raises
:class:`FieldDecryptionError` (a ``MapperDeserialisationError``); so does a token whose user has no key at all
(wrong key store).

Snapshots
---------
Snapshot events carry the aggregate's whole ``__dict__`` under ``state``. If that dict has a non-empty
``user_id``, the listed names inside it are encrypted too (bound to ``"state.<name>"``). Aggregate attributes
that hold personal data under *other* names are NOT covered: either name them like the event fields or leave
snapshotting off for such aggregates.

Opting an event class out
-------------------------
An event class may set an (un-annotated) class attribute ``ENCRYPTED_FIELDS = frozenset({...})`` to override the
mapper's set for its instances -- e.g. ``frozenset()`` for an erasure event whose ``reason`` must remain
readable after the key is gone (recording an event with something to encrypt for an erased user raises
:class:`SubjectErasedError`).

Per-fact keys (``memledger forget``)
------------------------------------
A fact event that carries a plaintext ``fact_key_id`` (every ``Fact`` event written since per-fact keys exist:
a random id given when its key is made, else the event's own ``event_id``) has its fields encrypted not with the
user's data key but with a *per-fact* data key: 32 random bytes, stored in the key store (``fact_keys`` beside
``user_keys``) wrapped with AES-256-GCM under the user's data key, the associated data binding the user id and the
key id (:func:`wrap_fact_key`), so a wrapped key cannot be moved to another fact or user. ``forget`` destroys that
row (``destroy_fact_keys``); from then on the event decodes with its encrypted fields ``None`` and the key
``"_forgotten": True`` in its ``__dict__`` (:func:`is_forgotten`), which the projections replay as a placeholder.
Erasing the user still shreds everything at once: the per-fact keys are useless without the user's key (and
``destroy`` deletes them too). Events without a ``fact_key_id`` (written before per-fact keys) use the user's key
and cannot be shredded alone. The application calls :meth:`EncryptingMapper.prepare_fact_keys` before saving
(``LedgerApplication.save_events``): it hands each event a key already stored, from a per-user pool refilled in one
key-store transaction; an event encoded without it gets a key made and stored on the spot. Decoding a batch
(:meth:`EncryptingMapper.to_domain_events`) reads its fact keys in one query. A key store without
``put_fact_keys`` (a custom one) gets no per-fact keys: events are then encrypted under the user's key, and
``forget`` refuses them.

Master key (key wrapping) -- the trade-off
------------------------------------------
Data keys are stored either raw or wrapped (AES-256-GCM, associated data bound to the user id, so wrapped keys
cannot be swapped between users) with a 32-byte master key, given as ``master_key=`` or base64 in the
environment variable ``MEMLEDGER_MASTER_KEY``.

* Raw: nothing more to manage, but whoever gets a copy of the key store *and* the event log reads everything,
  and every copy of the key store (backup, replica, snapshot of the disk) taken before an erasure still holds
  that user's key -- erasure is only as good as the retention of key-store copies.
* Wrapped: a stolen key store is useless without the master key, which can live elsewhere (secrets manager,
  KMS, env of the service only). Copies of the key store still hold the *wrapped* key, so an old copy plus the
  master key still recovers it: keep key-store backups short-lived (or rotate the master key) to make erasure
  final. Losing the master key loses every user's data.
A store written raw cannot be read with a master key configured (and vice versa): that mismatch is refused
rather than silently mixing formats.

Physical deletion
-----------------
SQLite: ``PRAGMA secure_delete=ON`` on every connection and ``journal_mode=DELETE`` (see :class:`SQLiteKeyStore`).
PostgreSQL: an UPDATE leaves the old row version (with the key) in the heap until VACUUM reclaims and reuses the
space, and in WAL segments / base backups; :meth:`PostgresKeyStore.vacuum` rewrites the table (VACUUM FULL),
but WAL archives and backups are the operator's to expire. Prefer a master key with PostgreSQL.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import threading
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import fields as dataclass_fields
from dataclasses import is_dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from eventsourcing.persistence import (
    Cipher,
    Compressor,
    Mapper,
    MapperDeserialisationError,
    StoredEvent,
    Transcoder,
    find_id_convertor,
)
from eventsourcing.utils import resolve_topic

from ledger.errors import MemledgerError, SubjectErasedError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM


class _Cryptography:
    """``cryptography``'s ``AESGCM`` and ``InvalidTag``, imported on first use: the package is slow to import,
    which a cold command that seals and opens nothing (``memledger profile``: projections hold plaintext) need not
    pay. After the first access they are plain attributes (no lookup cost on the hot path)."""

    def __getattr__(self, name: str) -> Any:
        from cryptography.exceptions import InvalidTag
        from cryptography.hazmat.primitives.ciphers.aead import AESGCM

        self.AESGCM, self.InvalidTag = AESGCM, InvalidTag
        return getattr(self, name)


_lib = _Cryptography()

__all__ = [
    "DEFAULT_ENCRYPTED_FIELDS",
    "ERASED_MARKER",
    "FACT_KEY_FIELD",
    "FORGOTTEN_MARKER",
    "MASTER_KEY_ENV",
    "TOKEN_PREFIX",
    "EncryptingMapper",
    "FieldDecryptionError",
    "KeyStore",
    "KeyStoreError",
    "SubjectErasedError",
    "is_erased",
    "is_forgotten",
    "load_master_key",
    "unwrap_fact_key",
    "wrap_fact_key",
]

MASTER_KEY_ENV = "MEMLEDGER_MASTER_KEY"
TOKEN_PREFIX = "enc:v1:"
ERASED_MARKER = "_erased"
#: the plaintext state field naming an event's per-fact key (see "Per-fact keys" above)
FACT_KEY_FIELD = "fact_key_id"
#: put in a decoded event's ``__dict__`` when its per-fact key was destroyed (``memledger forget``)
FORGOTTEN_MARKER = "_forgotten"
#: the plaintext state flag of a stored event whose ``value_json`` is its ``text`` as a JSON string (a free-text
#: memory: ``remember``, an ingested observation): the value is not stored (and encrypted) a second time beside the
#: text; decoding gives it back from the decrypted text, so every reader sees the event as it was recorded
VALUE_IS_TEXT = "value_is_text"
DEFAULT_ENCRYPTED_FIELDS: frozenset[str] = frozenset(
    {"value_json", "text", "reason", "summary", "card", "message_text"}
)

DATA_KEY_BYTES = 32
_NONCE_BYTES = 12
_TAG_BYTES = 16
_FORMAT_RAW = "raw"
_FORMAT_WRAPPED = "aesgcm-v1"
_WRAP_AAD_PREFIX = b"memledger:user-key:v1|"
_FACT_WRAP_AAD_PREFIX = b"memledger:fact-key:v1|"
_FRESH_LIMIT = 100_000  # per-fact keys prepared but not used yet (a failed save's) kept at most
# Reserve of the second refill of a user's pool (a process writing for the user again). A key-store commit is a
# rollback-journal write and an fsync on SQLite: the larger the reserve, the fewer of them a user's first
# single-command saves pay (scripts/bench_append.py measures it). The reserve is handed
# back when the application closes (EncryptingMapper.release_unused_fact_keys), so its size costs no disk after a
# clean exit; after a crash at most _POOL_MAX spare rows a user remain.
_POOL_MIN = 64
_POOL_MAX = 64  # largest reserve of stored per-fact keys a process keeps per user (EncryptingMapper.prepare_fact_keys)
#: Spare keys reserved at a process's FIRST write for a user. A long-lived process (the Python API in an agent, the
#: servers) reserves at once, which saves its second write for the user a key-store commit; the reserve is
#: handed back at close, so a short script pays one more commit, at close. The CLI's one-shot verbs set it to 0
#: (memledger/cli ``main``): a one-shot call stores exactly the keys it uses.
FIRST_RESERVE = _POOL_MIN
# Spare keys a process holds over all its users at most: a server writing twice for each of 10,000 users would
# otherwise reserve 640,000 keys (~140 MB of keys.db, left behind by a crash); past it a refill reserves nothing.
_POOL_TOTAL = 4096
_AEAD_CACHE_SIZE = 256  # AESGCM objects an EncryptingMapper keeps (by data key)


# --------------------------------------------------------------------------------------------------- errors


class KeyStoreError(MemledgerError):
    """The key store is misconfigured or holds something it cannot read (wrong/missing master key...)."""


class FieldDecryptionError(MapperDeserialisationError, MemledgerError):
    """An encrypted field of a stored event could not be decrypted.

    Raised for a token that fails AES-GCM authentication (tampered, or moved from another field, event or user)
    or is malformed, and for a token whose user has no key in the key store. Never raised for erased users:
    their fields decode to ``None``.
    """


def _erased_error(user_id: str) -> SubjectErasedError:
    err = SubjectErasedError(
        f"user_id {user_id!r}: the subject was erased (their data key was destroyed); "
        "nothing more can be recorded for this user"
    )
    err.user_id = user_id  # type: ignore[attr-defined]
    return err


# --------------------------------------------------------------------------------------------------- keys


def load_master_key(environ: Mapping[str, str] | None = None) -> bytes | None:
    """Returns the master key from ``MEMLEDGER_MASTER_KEY`` (base64 of 32 bytes), or None if unset/empty."""
    env = os.environ if environ is None else environ
    value = env.get(MASTER_KEY_ENV, "").strip()
    if not value:
        return None
    try:
        key = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError) as e:
        msg = f"{MASTER_KEY_ENV} is not valid base64 ({e}); set it to base64 of 32 random bytes"
        raise KeyStoreError(msg) from None
    _check_master_key(key, MASTER_KEY_ENV)
    return key


def _check_master_key(key: bytes, where: str) -> None:
    if len(key) != DATA_KEY_BYTES:
        msg = f"{where}: the master key must be 32 bytes, got {len(key)}"
        raise KeyStoreError(msg)


def _fact_aad(user_id: str, key_id: str) -> bytes:
    # "\x1f" cannot occur in a user id (ledger/schemas.py refuses control characters) nor in a key id (a UUID).
    return _FACT_WRAP_AAD_PREFIX + f"{user_id}\x1f{key_id}".encode()


def wrap_fact_key(user_key: bytes | AESGCM, user_id: str, key_id: str, fact_key: bytes) -> bytes:
    """``fact_key`` (32 bytes) sealed with AES-256-GCM under the user's data key (the key, or an ``AESGCM`` of it):
    ``nonce12 + ciphertext + tag``.

    The associated data binds the user id and the key id, so a wrapped key copied to another fact's row (or
    another user's) fails to unwrap instead of decrypting the wrong fact.
    """
    aead = user_key if isinstance(user_key, _lib.AESGCM) else _lib.AESGCM(user_key)
    nonce = os.urandom(_NONCE_BYTES)
    return nonce + aead.encrypt(nonce, fact_key, _fact_aad(user_id, key_id))


def unwrap_fact_key(user_key: bytes | AESGCM, user_id: str, key_id: str, blob: bytes) -> bytes:
    """The per-fact key sealed by :func:`wrap_fact_key`. Raises :class:`KeyStoreError` if it fails to authenticate
    (altered, or moved from another fact or user) or is not 32 bytes."""
    aead = user_key if isinstance(user_key, _lib.AESGCM) else _lib.AESGCM(user_key)
    blob = bytes(blob)
    try:
        key = aead.decrypt(blob[:_NONCE_BYTES], blob[_NONCE_BYTES:], _fact_aad(user_id, key_id))
    except _lib.InvalidTag:
        msg = (f"user_id {user_id!r}, fact key {key_id!r}: cannot unwrap the per-fact key -- it was altered, or "
               "moved here from another fact or user")
        raise KeyStoreError(msg) from None
    if len(key) != DATA_KEY_BYTES:
        msg = f"user_id {user_id!r}, fact key {key_id!r}: {len(key)} bytes, expected {DATA_KEY_BYTES}"
        raise KeyStoreError(msg)
    return key


@runtime_checkable
class KeyStore(Protocol):
    """Per-user data keys. Implementations must be safe across threads (and processes, for shared stores)."""

    def get_or_create(self, user_id: str) -> bytes:
        """Returns the user's 32-byte data key, creating it on first use.

        Raises :class:`SubjectErasedError` if the user's key was destroyed: a late event for an erased user must
        never silently get a fresh key.
        """
        ...

    def get(self, user_id: str) -> bytes | None:
        """Returns the user's data key, or None if there is none (never created, or destroyed)."""
        ...

    def destroy(self, user_id: str) -> bool:
        """Destroys the user's key, leaving a tombstone (key NULL, destroyed_at set).

        Returns True if a live key was destroyed, False if it was already destroyed or never existed (a
        tombstone is recorded then too, so the user cannot get a key later).
        """
        ...

    def is_destroyed(self, user_id: str) -> bool:
        """True once the user's key was destroyed (or the user was erased before ever having one)."""
        ...

    # Per-fact keys (optional: both stores of ledger/keystores.py have them; see "Per-fact keys" above):
    # ``put_fact_keys([(user_id, key_id, wrapped)])`` stores new wrapped keys in one transaction;
    # ``get_fact_key(user_id, key_id)`` returns the wrapped key, False once destroyed, None if there is no row;
    # ``destroy_fact_keys(user_id, key_ids)`` destroys them and returns how many live keys it destroyed;
    # ``get_fact_keys({(user_id, key_id)})`` reads many at once: ``{pair: wrapped key or False}`` (rows found only).


# --------------------------------------------------------------------------------------------------- mapper


def is_erased(event: object) -> bool:
    """True if ``event`` was decoded after its user's key had been destroyed (its encrypted fields are None)."""
    state = getattr(event, "__dict__", {})
    return bool(state.get(ERASED_MARKER)) or state.get("erased") is True


def is_forgotten(event: object) -> bool:
    """True if ``event`` was decoded after its per-fact key had been destroyed (``memledger forget``): its
    encrypted fields are None. An erased user's event is :func:`is_erased` instead (checked first)."""
    return bool(getattr(event, "__dict__", {}).get(FORGOTTEN_MARKER))


def _has_erased_field(cls: type) -> bool:
    return is_dataclass(cls) and any(f.name == "erased" for f in dataclass_fields(cls))


class EncryptingMapper(Mapper[Any]):
    """A Mapper that encrypts personal fields per user (AES-256-GCM) before the library's own pipeline.

    :param transcoder: as for ``Mapper`` (pass ``app.construct_transcoder()``).
    :param compressor: as for ``Mapper`` (``app.factory.compressor()``), applied to the whole record.
    :param cipher: as for ``Mapper`` (``app.factory.cipher()``), applied to the whole record.
    :param keystore: where per-user data keys live (required).
    :param fields: names of state fields to encrypt; default :data:`DEFAULT_ENCRYPTED_FIELDS`.
    :param user_id_field: the state field naming whose data it is; default ``"user_id"``.
    """

    def __init__(
        self,
        transcoder: Transcoder,
        compressor: Compressor | None = None,
        cipher: Cipher | None = None,
        *,
        keystore: KeyStore | None = None,
        fields: Iterable[str] = DEFAULT_ENCRYPTED_FIELDS,
        user_id_field: str = "user_id",
    ) -> None:
        if keystore is None:
            msg = (
                "EncryptingMapper needs a keystore=...; it cannot be built from MAPPER_TOPIC alone -- "
                "override Application.construct_mapper() instead (see ledger.crypto's docstring)"
            )
            raise TypeError(msg)
        super().__init__(transcoder=transcoder, compressor=compressor, cipher=cipher)
        self.keystore = keystore
        self.fields: frozenset[str] = frozenset(fields)
        self.user_id_field = user_id_field
        # AESGCM objects by data key: building one costs as much as sealing a field, and a batch seals
        # and opens several fields per event under a handful of users' keys. The key itself is still fetched from
        # the key store for every event (so a destroyed key is never used again); bounded, cleared when full.
        self._aeads: dict[bytes, AESGCM] = {}
        # Per-fact keys made by prepare_fact_keys (already stored), by (user_id, key_id), until their event is encoded.
        self._fresh: dict[tuple[str, str], bytes] = {}
        self.fact_keys = callable(getattr(keystore, "put_fact_keys", None))
        # stored per-fact keys not yet given to an event, per user, and the reserve of the next refill
        self._pools: dict[str, list[tuple[str, bytes]]] = {}
        self._reserve: dict[str, int] = {}
        self._spare = 0  # keys in all the pools (bounded by _POOL_TOTAL)
        self._pool_lock = threading.Lock()
        self._pool_pid = os.getpid()

    # ---- helpers

    def _fields_for(self, cls: type) -> frozenset[str]:
        override = getattr(cls, "ENCRYPTED_FIELDS", None)
        return self.fields if override is None else frozenset(override)

    def _aead(self, key: bytes) -> AESGCM:
        aead = self._aeads.get(key)
        if aead is None:
            if len(self._aeads) >= _AEAD_CACHE_SIZE:
                self._aeads.clear()
            aead = self._aeads[key] = _lib.AESGCM(key)
        return aead

    def _fact_key_for_write(self, user_id: str, key_id: str, user_key: bytes) -> bytes:
        """The per-fact key to encrypt a new event with: the one :meth:`prepare_fact_keys` stored for it, else a new
        one stored now (one key-store write)."""
        key = self._fresh.pop((user_id, key_id), None)
        if key is None:
            key = os.urandom(DATA_KEY_BYTES)
            self.keystore.put_fact_keys([(user_id, key_id, wrap_fact_key(self._aead(user_key), user_id, key_id, key))])
        return key

    def prepare_fact_keys(self, events: Iterable[Any]) -> int:
        """Give each event about to be saved (with a ``fact_key_id``, a user and something to encrypt) a per-fact key
        that is already stored, and set the event's ``fact_key_id`` to that key's id; :meth:`to_stored_event` then
        uses it. Returns how many keys were stored now (0 when the process's pool had enough).

        Why a pool: a key-store commit per event (a journal write and fsync on SQLite) would more than double
        the cost of a one-event save (scripts/bench_append.py: 1,226 -> 513 events/s one per save). Keys are made per
        user, for the events that need one plus a reserve: :data:`FIRST_RESERVE` at a process's first write for a user
        (none in a one-shot CLI call, which stores exactly what it uses), then :data:`_POOL_MIN`, doubling per refill
        up to :data:`_POOL_MAX`, while the process's spare keys over all users stay within :data:`_POOL_TOTAL` (past
        it a refill reserves nothing); all
        in one key-store transaction, together with the data keys of users new to the store (``store_fact_keys``).
        The unused reserve is handed back when the application closes (:meth:`release_unused_fact_keys`); keys left
        by a crash or by a save that failed after this are harmless rows: random bytes wrapped under the user's
        key, never referenced by the log.

        Raises:
            SubjectErasedError: an event's user was erased (nothing is stored).
        """
        if not self.fact_keys:
            return 0
        wanted: dict[str, list[Any]] = {}
        for event in events:
            state = vars(event)
            user_id = self._user_of(state)
            if not state.get(FACT_KEY_FIELD) or user_id is None:
                continue
            if any(state.get(n) is not None for n in self._fields_for(type(event))):
                wanted.setdefault(user_id, []).append(event)
        if not wanted:
            return 0
        with self._pool_lock:
            if self._pool_pid != os.getpid():
                # forked: the parent's reserve is the parent's; sharing it would give two events one key
                self._pools, self._reserve, self._pool_pid, self._spare = {}, {}, os.getpid(), 0
            made: dict[str, list[tuple[str, bytes]]] = {}
            reserves: dict[str, int] = {}
            budget = _POOL_TOTAL - self._spare  # spare keys this batch may still add over all users
            for user_id, evs in wanted.items():
                short = len(evs) - len(self._pools.get(user_id, ()))
                if short <= 0:
                    continue
                reserve = min(self._reserve.get(user_id, FIRST_RESERVE), max(0, budget))
                budget -= reserve
                made[user_id] = [(str(uuid.UUID(bytes=os.urandom(16), version=4)), os.urandom(DATA_KEY_BYTES))
                                 for _ in range(short + reserve)]
                reserves[user_id] = min(max(_POOL_MIN, 2 * self._reserve.get(user_id, FIRST_RESERVE)), _POOL_MAX)
            if made:
                # stored before any event names them, new users' data keys in the same transaction where the store
                # can (SQLiteKeyStore.store_fact_keys); SubjectErasedError after erasure, with nothing stored
                store = getattr(self.keystore, "store_fact_keys", None)
                if store is not None:
                    store(made, lambda user_key, u, key_id, key: wrap_fact_key(self._aead(user_key), u, key_id, key))
                else:
                    aeads = {u: self._aead(self.keystore.get_or_create(u)) for u in made}
                    self.keystore.put_fact_keys([(u, key_id, wrap_fact_key(aeads[u], u, key_id, key))
                                                 for u, pairs in made.items() for key_id, key in pairs])
                self._reserve.update(reserves)
            rows = [pair for pairs in made.values() for pair in pairs]
            if len(self._fresh) > _FRESH_LIMIT:
                self._fresh.clear()
            for user_id, evs in wanted.items():
                pool = self._pools.setdefault(user_id, [])
                pool.extend(made.get(user_id, ()))
                self._spare += len(made.get(user_id, ())) - len(evs)
                for event in evs:
                    key_id, key = pool.pop(0)
                    # the event names the stored key (events are frozen dataclasses: set it as the library decodes)
                    event.__dict__[FACT_KEY_FIELD] = key_id
                    self._fresh[(user_id, key_id)] = key
        return len(rows)

    def release_unused_fact_keys(self) -> int:
        """Hand back this process's unused reserve of per-fact keys: delete their rows from the key store (one
        transaction per user; ``release_fact_keys``). Called when the application closes, so a clean exit leaves no
        spare key behind; a crash leaves at most ``_POOL_MAX`` per user and ``_POOL_TOTAL`` in all, harmless rows no
        event names. Keys already
        given to an event (even one whose save failed) are never in the pool, so none of those is touched.
        Returns how many rows were deleted; a key store that cannot delete keeps them (0)."""
        release = getattr(self.keystore, "release_fact_keys", None)
        if release is None:
            return 0
        n = 0
        with self._pool_lock:
            if self._pool_pid != os.getpid():  # forked: the pool is the parent's, and the parent may still use it
                return 0
            pools, self._pools, self._reserve, self._spare = self._pools, {}, {}, 0
            for user_id, pool in pools.items():
                if pool:
                    try:
                        n += release(user_id, [key_id for key_id, _ in pool])
                    except NotImplementedError:
                        return n
        reclaim = getattr(self.keystore, "reclaim_space", None)
        if n and reclaim is not None:
            reclaim()
        return n

    @staticmethod
    def _aad(user_id: str, field: str, originator_id: Any, originator_version: int) -> bytes:
        # Associated data binds each ciphertext to its place: user, field, event stream and position. AES-GCM
        # authenticates it, so a token copied into another field ("text" -> "reason"), another event of the
        # same stream, another stream, or another user's event fails to decrypt instead of silently showing
        # the right words in the wrong place (which an attacker with write access to the log could otherwise
        # use to forge history out of genuine ciphertext). Parsing is unambiguous for a given key (= user):
        # field names contain no "|" and the version after the last "|" is an int.
        return f"{user_id}|{field}|{originator_id}|{originator_version}".encode()

    def _encrypt_fields(
        self,
        state: dict[str, Any],
        names: frozenset[str],
        user_id: str,
        originator_id: Any,
        originator_version: int,
        prefix: str = "",
    ) -> bool:
        """Encrypts in place. Returns True if a field was encrypted (the state changed)."""
        todo = [n for n in names if state.get(n) is not None]
        if not todo:
            return False
        user_key = self.keystore.get_or_create(user_id)  # raises SubjectErasedError after erasure
        key_id = state.get(FACT_KEY_FIELD) if not prefix and self.fact_keys else None
        # a per-fact key serves one event: built directly, not cached (it would evict the users' keys)
        aesgcm = self._aead(user_key) if not key_id else _lib.AESGCM(
            self._fact_key_for_write(user_id, str(key_id), user_key))
        oid = str(originator_id)  # once per event, not per field
        nonces = os.urandom(_NONCE_BYTES * len(todo))  # one read of the OS's CSPRNG for the event's fields
        for i, name in enumerate(todo):
            plaintext = self.transcoder.encode(state[name])
            nonce = nonces[i * _NONCE_BYTES:(i + 1) * _NONCE_BYTES]
            aad = self._aad(user_id, prefix + name, oid, originator_version)
            sealed = nonce + aesgcm.encrypt(nonce, plaintext, aad)
            state[name] = TOKEN_PREFIX + base64.b64encode(sealed).decode("ascii")
        return True

    def _decrypt_fields(
        self,
        state: dict[str, Any],
        names: frozenset[str],
        user_id: str,
        originator_id: Any,
        originator_version: int,
        topic: str,
        prefix: str = "",
        fact_keys: Mapping[tuple[str, str], bytes | bool] | None = None,
    ) -> str:
        """Decrypts in place. Returns ``"erased"`` if the user was erased, ``"forgotten"`` if the event's per-fact
        key was destroyed (their token fields were set to None either way), else ``""``."""
        todo = [n for n in names if isinstance(state.get(n), str) and state[n].startswith(TOKEN_PREFIX)]
        if not todo:
            return ""

        def fail(name: str, problem: str) -> FieldDecryptionError:
            return FieldDecryptionError(
                f"cannot decrypt field {prefix + name!r} of stored event with topic {topic!r}, "
                f"originator_id {str(originator_id)!r}, originator_version {originator_version} "
                f"(user_id {user_id!r}): {problem}"
            )

        key = self.keystore.get(user_id)
        if key is None:
            if self.keystore.is_destroyed(user_id):
                for name in todo:
                    state[name] = None
                return "erased"
            raise fail(todo[0], "the key store has no data key for this user (wrong key store?)")
        key_id = state.get(FACT_KEY_FIELD) if not prefix and self.fact_keys else None
        if key_id:
            pair = (user_id, str(key_id))
            found = fact_keys[pair] if fact_keys is not None and pair in fact_keys \
                else self.keystore.get_fact_key(user_id, str(key_id))
            if found is None:
                raise fail(todo[0], f"the key store has no per-fact key {key_id!r} (wrong key store?)")
            if found is False:  # destroyed by forget
                for name in todo:
                    state[name] = None
                return "forgotten"
            try:
                aesgcm = _lib.AESGCM(unwrap_fact_key(self._aead(key), user_id, str(key_id), found))
            except KeyStoreError as exc:
                raise fail(todo[0], str(exc)) from None
        else:
            aesgcm = self._aead(key)
        oid = str(originator_id)
        for name in todo:
            try:
                sealed = base64.b64decode(state[name][len(TOKEN_PREFIX) :], validate=True)
            except (binascii.Error, ValueError):
                raise fail(name, "the token is not valid base64 (corrupted)") from None
            if len(sealed) < _NONCE_BYTES + _TAG_BYTES:
                raise fail(name, "the token is too short (corrupted)")
            aad = self._aad(user_id, prefix + name, oid, originator_version)
            try:
                plaintext = aesgcm.decrypt(sealed[:_NONCE_BYTES], sealed[_NONCE_BYTES:], aad)
            except _lib.InvalidTag:
                raise fail(
                    name,
                    "authentication failed -- the ciphertext was altered, or was moved here from another "
                    "field, event or user",
                ) from None
            state[name] = self.transcoder.decode(plaintext)
        return ""

    def _user_of(self, state: Mapping[str, Any]) -> str | None:
        user_id = state.get(self.user_id_field)
        if user_id is None or user_id == "":
            return None
        return str(user_id)

    # ---- Mapper API

    def to_stored_event(self, domain_event: Any) -> StoredEvent:
        cls = type(domain_event)
        state = dict(vars(domain_event))
        state.pop(ERASED_MARKER, None)
        state.pop(FORGOTTEN_MARKER, None)
        names = self._fields_for(cls)
        originator_id = state["originator_id"]
        originator_version = state["originator_version"]
        changed = False
        user_id = self._user_of(state)
        if user_id is not None and names:
            changed = _elide_value(state, names)
            changed = self._encrypt_fields(state, names, user_id, originator_id, originator_version) or changed
        nested = state.get("state")
        if isinstance(nested, dict) and names:
            nested_user = self._user_of(nested)
            if nested_user is not None:
                nested = dict(nested)
                nested.pop(ERASED_MARKER, None)
                self._encrypt_fields(
                    nested, names, nested_user, originator_id, originator_version, prefix="state."
                )
                state["state"] = nested
                changed = True
        if not changed and ERASED_MARKER not in vars(domain_event) and FORGOTTEN_MARKER not in vars(domain_event):
            return super().to_stored_event(domain_event)
        # Hand the base class a shallow copy carrying the tokens, the same way eventsourcing itself builds
        # decoded events; so class_version, compressor and cipher handling stay the library's.
        proxy = object.__new__(cls)
        object.__setattr__(proxy, "__dict__", state)
        return super().to_stored_event(proxy)

    def to_domain_events(self, stored_events: Iterable[StoredEvent]) -> list[Any]:
        """:meth:`to_domain_event` for many stored events, with the per-fact keys they need read from the key store
        in one query (``get_fact_keys``) instead of one lookup per event: a replay of fact events otherwise pays a
        key-store round trip per event (a network round trip on PostgreSQL). replay/events.py ``decode`` uses it."""
        stored_events = list(stored_events)
        getter = getattr(self.keystore, "get_fact_keys", None)
        if not self.fact_keys or getter is None or len(stored_events) < 2:
            return [self.to_domain_event(se) for se in stored_events]
        states = [self._state_of(se) for se in stored_events]
        pairs = set()
        for state in states:
            user_id, key_id = self._user_of(state), state.get(FACT_KEY_FIELD)
            if user_id is not None and key_id:
                pairs.add((user_id, str(key_id)))
        found = getter(pairs) if pairs else {}
        return [self._to_domain_event(se, st, found) for se, st in zip(stored_events, states)]

    def to_domain_event(self, stored_event: StoredEvent) -> Any:
        return self._to_domain_event(stored_event, self._state_of(stored_event), None)

    def _state_of(self, stored_event: StoredEvent) -> dict[str, Any]:
        """The stored event's state dict: cipher, compressor, transcoder, as eventsourcing 9.5.6 does."""
        stored_state = stored_event.state
        try:
            if self.cipher:
                stored_state = self.cipher.decrypt(stored_state)
            if self.compressor:
                stored_state = self.compressor.decompress(stored_state)
            event_state: dict[str, Any] = self.transcoder.decode(stored_state)
        except Exception as e:
            msg = (
                f"Failed to deserialise state of stored event with "
                f"topic '{stored_event.topic}', "
                f"originator_id '{stored_event.originator_id}' and "
                f"originator_version {stored_event.originator_version}: {e}"
            )
            raise MapperDeserialisationError(msg) from e
        return event_state

    def _to_domain_event(self, stored_event: StoredEvent, event_state: dict[str, Any],
                         fact_keys: Mapping[tuple[str, str], bytes | bool] | None) -> Any:
        # Same steps as eventsourcing 9.5.6 Mapper.to_domain_event, with decryption inserted between
        # transcoding and upcasting.
        cls = resolve_topic(stored_event.topic)
        id_convertor = find_id_convertor(cls, type(stored_event.originator_id))
        originator_id = id_convertor(stored_event.originator_id)
        originator_version = stored_event.originator_version

        names = self._fields_for(cls)
        erased = forgotten = False
        if names:
            user_id = self._user_of(event_state)
            if user_id is not None:
                outcome = self._decrypt_fields(
                    event_state, names, user_id, originator_id, originator_version, stored_event.topic,
                    fact_keys=fact_keys,
                )
                erased, forgotten = outcome == "erased", outcome == "forgotten"
            if event_state.pop(VALUE_IS_TEXT, False):  # the value stored once, as the text (to_stored_event)
                text = event_state.get("text")
                event_state["value_json"] = None if text is None else json.dumps(text, ensure_ascii=False)
            nested = event_state.get("state")
            if isinstance(nested, dict):
                nested_user = self._user_of(nested)
                if nested_user is not None:
                    erased |= "erased" == self._decrypt_fields(
                        nested,
                        names,
                        nested_user,
                        originator_id,
                        originator_version,
                        stored_event.topic,
                        prefix="state.",
                    )

        event_state["originator_id"] = originator_id
        event_state["originator_version"] = originator_version
        class_version = getattr(cls, "class_version", 1)
        from_version = event_state.pop("class_version", 1)
        while from_version < class_version:
            getattr(cls, f"upcast_v{from_version}_v{from_version + 1}")(event_state)
            from_version += 1

        if erased:
            if _has_erased_field(cls):
                event_state["erased"] = True
            else:
                event_state[ERASED_MARKER] = True
        elif forgotten:
            event_state[FORGOTTEN_MARKER] = True

        domain_event = object.__new__(cls)
        object.__setattr__(domain_event, "__dict__", event_state)
        return domain_event


def _elide_value(state: dict[str, Any], names: frozenset[str]) -> bool:
    """Store an event's value once when it is exactly its text as a JSON string (:data:`VALUE_IS_TEXT`): the two
    were each encrypted (~180 bytes of token apiece for a LoCoMo observation). Lossless: only an exact match is
    elided, and decoding writes the same string back. Returns whether it elided."""
    if "value_json" not in names or "text" not in names:
        return False
    text, value = state.get("text"), state.get("value_json")
    if not isinstance(text, str) or not isinstance(value, str) or value != json.dumps(text, ensure_ascii=False):
        return False
    del state["value_json"]
    state[VALUE_IS_TEXT] = True
    return True
