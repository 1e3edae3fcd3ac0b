"""Projection sealing: the personal content the read models keep (values, texts, reasons, messages, summaries, cards,
disclosure purposes, names, search documents and their vectors, per-user index files) is stored encrypted under the
user's own data key, the key that encrypts their events in the log (ledger/crypto.py). Destroying the key at erasure
therefore also shreds every copy of the projection database the store cannot reach: its WAL, its backups and its
replicas (docs/erasure.md).

A sealed value is a token that names its user, so any reader can open it without knowing which column or table it
came from: text ``mls1:<user id, base64url>:<ciphertext, base64>`` and bytes ``MLS1 <2-byte id length> <id>
<ciphertext>``. The cipher is AES-256-GCM-SIV with a fixed nonce: deterministic (one plaintext of one user always
seals to one token), which keeps equality lookups, rebuild checksums and ``verify`` working on sealed columns, at the
price of showing which of a user's rows hold equal values. The associated data binds a token to its user: a token
copied into another user's row does not open. A token whose user's key is destroyed opens to None (the content is
gone); a value that is no token (a row written before sealing, or with sealing off) is returned as it is.
"""

from __future__ import annotations

import base64
import threading
from typing import Any

PREFIX = "mls1:"
BYTES_PREFIX = b"MLS1"
_NONCE = bytes(12)  # GCM-SIV: a fixed nonce gives deterministic, still authenticated, encryption
_AAD = b"memledger-projection|"
_CACHE = 256  # AEAD objects kept, by data key
#: opened text tokens kept, by token: a warm read of the same rows opens nothing again (tokens are deterministic, so a
#: row rewritten with other content is another token). Cleared when full, and of a user at erasure.
_OPENED = 50_000


class Sealer:
    """Seals and opens projection values under each user's data key, taken from ``keystore`` (its own cache
    decides how long a key is reused; a destroyed key is never used again once the store says so). ``writes``
    False: :meth:`seal` leaves values as they are (``$MEMLEDGER_PROJECTION_SEALING=off``), while tokens written
    before still open."""

    def __init__(self, keystore: Any, writes: bool = True) -> None:
        self.keystore = keystore
        self.writes = writes
        self._aeads: dict[bytes, Any] = {}
        self._opened: dict[str, str | None] = {}
        self._lock = threading.Lock()

    def _aead(self, key: bytes) -> Any:
        aead = self._aeads.get(key)
        if aead is None:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCMSIV

            with self._lock:
                if len(self._aeads) >= _CACHE:
                    self._aeads.clear()
                aead = self._aeads[key] = AESGCMSIV(key)
        return aead

    def seal(self, user_id: str, value: Any) -> Any:
        """``value`` (str or bytes) sealed for ``user_id``; None and other types unchanged.

        Raises:
            SubjectErasedError: the user's key was destroyed (nothing of an erased user is written).
        """
        if not self.writes or value is None or not isinstance(value, (str, bytes, bytearray, memoryview)):
            return value
        aead = self._aead(self.keystore.get_or_create(user_id))
        uid = user_id.encode("utf-8")
        if isinstance(value, str):
            ct = aead.encrypt(_NONCE, value.encode("utf-8"), _AAD + uid)
            return f"{PREFIX}{base64.urlsafe_b64encode(uid).decode('ascii')}:{base64.b64encode(ct).decode('ascii')}"
        ct = aead.encrypt(_NONCE, bytes(value), _AAD + uid)
        return BYTES_PREFIX + len(uid).to_bytes(2, "big") + uid + ct

    def open(self, value: Any) -> Any:
        """The plaintext of a sealed ``value`` (str or bytes, as sealed), None when its user's key is gone, or
        ``value`` itself when it is no token.

        Raises:
            ValueError: a token that does not open (altered, or moved from another user's row).
        """
        hit = self._opened.get(value) if value.__class__ is str else None
        if hit is not None:
            return hit
        if isinstance(value, str):
            if not value.startswith(PREFIX):
                return value
            uid_b64, _, ct_b64 = value[len(PREFIX):].partition(":")
            uid = base64.urlsafe_b64decode(uid_b64)
            plain = self._decrypt(uid, base64.b64decode(ct_b64))
            if plain is None:
                return None
            text = plain.decode("utf-8")
            if len(self._opened) >= _OPENED:
                self._opened.clear()
            self._opened[value] = text
            return text
        if isinstance(value, memoryview):
            value = bytes(value)
        if isinstance(value, (bytes, bytearray)) and value[:4] == BYTES_PREFIX:
            n = int.from_bytes(value[4:6], "big")
            # the ciphertext as a view: a 70 MB vectors pack is not copied before its decryption
            return self._decrypt(bytes(value[6:6 + n]), memoryview(value)[6 + n:])
        return value

    def forget_user(self, user_id: str) -> None:
        """Drop what this process keeps opened of ``user_id`` (at erasure)."""
        mark = f"{PREFIX}{base64.urlsafe_b64encode(user_id.encode('utf-8')).decode('ascii')}:"
        with self._lock:
            self._opened = {t: v for t, v in self._opened.items() if not t.startswith(mark)}

    def _decrypt(self, uid: bytes, ct: bytes | memoryview) -> bytes | None:
        from cryptography.exceptions import InvalidTag

        key = self.keystore.get(uid.decode("utf-8"))
        if key is None:
            return None  # erased: the content is gone with the key
        try:
            return self._aead(key).decrypt(_NONCE, ct, _AAD + uid)
        except InvalidTag:
            raise ValueError(f"a sealed projection value of user {uid.decode('utf-8', 'replace')!r} does not open: "
                             "it was altered, or moved from another user's row") from None


def is_sealed(value: Any) -> bool:
    """Whether ``value`` is a sealed token (text or bytes)."""
    if isinstance(value, str):
        return value.startswith(PREFIX)
    return isinstance(value, (bytes, bytearray, memoryview)) and bytes(value[:4]) == BYTES_PREFIX
