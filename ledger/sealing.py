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

A big blob (a user's vectors pack, tens of MB) is sealed in *chunks* (:meth:`Sealer.seal_chunks`): ``MLS2
<2-byte id length> <id> <4-byte count> <count 8-byte chunk lengths> <chunks>``, each chunk ``<12-byte random nonce>
<AES-256-GCM ciphertext and tag>`` under a key derived from the user's data key (HKDF-SHA256, its own label, so the
one key never serves two cipher modes). Why: AES-GCM-SIV opened 73 MB in ~0.15 s here, AES-GCM in ~0.045 s, and
chunks open in two threads (the cipher releases the GIL), each straight into the caller's buffer
(:meth:`SealedChunks.open_into`). Such a token is not deterministic (a random nonce per chunk: 2^32 chunks per user
key stay far out of reach); it is never looked up by equality, and ``verify`` compares the vectors inside, not the
tokens. A chunk's associated data names its user, the token's chunk table, its index and the previous chunk's tag,
so chunks cannot be moved between users or tokens, reordered, dropped or added. Destroying the user's key shreds
every chunk (the derived key is derived from it, never stored); :meth:`Sealer.open` returns the whole plaintext.
"""

from __future__ import annotations

import base64
import os
import threading
from typing import Any, Sequence

PREFIX = "mls1:"
BYTES_PREFIX = b"MLS1"
#: a bytes token sealed in chunks (:meth:`Sealer.seal_chunks`)
CHUNKS_PREFIX = b"MLS2"
_TAG = 16  # the AEAD tag, at the end of each ciphertext
_CHUNK_NONCE = 12  # AES-GCM's nonce, random, in front of each chunk's ciphertext
_CHUNK_KEY_INFO = b"memledger-projection-chunks|aes-256-gcm|1"  # the HKDF label of the chunks' key
#: chunks opened at once by :meth:`SealedChunks.open_into` (the caller's thread and one more)
OPEN_THREADS = 2
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

    def _chunk_aead(self, key: bytes) -> Any:
        """The AES-GCM of the chunks sealed under ``key`` (a user's data key): its own key, derived (HKDF-SHA256)."""
        aead = self._aeads.get(b"chunks|" + key)
        if aead is None:
            from cryptography.hazmat.primitives import hashes
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM
            from cryptography.hazmat.primitives.kdf.hkdf import HKDF

            derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_CHUNK_KEY_INFO).derive(key)
            with self._lock:
                if len(self._aeads) >= _CACHE:
                    self._aeads.clear()
                aead = self._aeads[b"chunks|" + key] = AESGCM(derived)
        return aead

    def seal_chunks(self, user_id: str, chunks: Sequence[bytes | bytearray | memoryview]) -> bytes:
        """``chunks`` sealed for ``user_id`` as one chunked token (module doc), which :meth:`open` opens to their
        concatenation and :meth:`chunks` chunk by chunk; their concatenation itself when sealing is off.

        Raises:
            SubjectErasedError: the user's key was destroyed (nothing of an erased user is written).
        """
        if not self.writes:
            return b"".join(chunks)
        aead = self._chunk_aead(self.keystore.get_or_create(user_id))
        uid = user_id.encode("utf-8")
        table = len(chunks).to_bytes(4, "big") + b"".join(
            (_CHUNK_NONCE + len(c) + _TAG).to_bytes(8, "big") for c in chunks)
        out, tag = [CHUNKS_PREFIX, len(uid).to_bytes(2, "big"), uid, table], b""
        for i, c in enumerate(chunks):
            nonce = os.urandom(_CHUNK_NONCE)
            ct = aead.encrypt(nonce, bytes(c), _chunk_aad(uid, table, i, tag))
            tag = ct[-_TAG:]
            out += (nonce, ct)
        return b"".join(out)

    def chunks(self, value: bytes | bytearray | memoryview) -> SealedChunks | None:
        """A chunked token (:meth:`seal_chunks`) to open chunk by chunk; None when its user's key is gone.

        Raises:
            ValueError: ``value`` is no chunked token, or a truncated one."""
        view = memoryview(value)
        if bytes(view[:4]) != CHUNKS_PREFIX:
            raise ValueError("not a chunked sealed token")
        n = int.from_bytes(view[4:6], "big")
        uid = bytes(view[6:6 + n])
        at = 6 + n
        count = int.from_bytes(view[at:at + 4], "big")
        table = bytes(view[at:at + 4 + 8 * count])
        lengths = [int.from_bytes(table[4 + 8 * i:12 + 8 * i], "big") for i in range(count)]
        at += len(table)
        if (len(table) != 4 + 8 * count or any(x < _CHUNK_NONCE + _TAG for x in lengths)
                or at + sum(lengths) != len(view)):
            raise ValueError("a chunked sealed token of another length (truncated or altered)")
        key = self.keystore.get(uid.decode("utf-8"))
        if key is None:
            return None  # erased: the content is gone with the key
        cts = []
        for x in lengths:
            cts.append(view[at:at + x])
            at += x
        return SealedChunks(self._chunk_aead(key), uid, table, cts)

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
        if isinstance(value, (bytes, bytearray)) and value[:4] == CHUNKS_PREFIX:
            chunks = self.chunks(value)
            if chunks is None:
                return None
            out = bytearray(sum(chunks.sizes))  # the chunks opened straight into it, in two threads
            view, at, targets = memoryview(out), 0, []
            for i, size in enumerate(chunks.sizes):
                targets.append((i, view[at:at + size]))
                at += size
            chunks.open_into(targets)
            return out
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


def _chunk_aad(uid: bytes, table: bytes, i: int, prev_tag: bytes) -> bytes:
    # the user, the token's chunk table, the chunk's place and the chunk before it: a chunk opens only where sealed
    return _AAD + uid + b"|chunks|" + table + i.to_bytes(4, "big") + prev_tag


class SealedChunks:
    """The chunks of one chunked token (:meth:`Sealer.chunks`), opened on demand. ``sizes``: each chunk's plaintext
    length in bytes, in order."""

    def __init__(self, aead: Any, uid: bytes, table: bytes, cts: list[memoryview]) -> None:
        self._aead, self._uid, self._table, self._cts = aead, uid, table, cts
        self.sizes = [len(c) - _CHUNK_NONCE - _TAG for c in cts]

    def _aad(self, i: int) -> bytes:
        return _chunk_aad(self._uid, self._table, i, bytes(self._cts[i - 1][-_TAG:]) if i else b"")

    def _failed(self) -> ValueError:
        return ValueError(f"a sealed projection value of user {self._uid.decode('utf-8', 'replace')!r} does not "
                          "open: it was altered, or moved from another user's row")

    def open(self, i: int) -> bytes:
        """Chunk ``i``'s plaintext. Raises ValueError: it does not open (altered, moved)."""
        from cryptography.exceptions import InvalidTag

        try:
            ct = self._cts[i]
            return self._aead.decrypt(ct[:_CHUNK_NONCE].tobytes(), ct[_CHUNK_NONCE:], self._aad(i))
        except InvalidTag:
            raise self._failed() from None

    def open_into(self, targets: Sequence[tuple[int, Any]]) -> None:
        """Open each ``(chunk index, writable buffer of exactly its size)`` into its buffer (a numpy array, a
        memoryview), :data:`OPEN_THREADS` at a time: the caller's thread and one more take chunks in turn.

        Raises:
            ValueError: a chunk does not open (altered, moved), or a buffer is not its chunk's size; what was
                written into the buffers then is not to be used."""
        from cryptography.exceptions import InvalidTag

        for i, out in targets:
            if memoryview(out).nbytes != self.sizes[i]:
                raise ValueError(f"chunk {i} opens to {self.sizes[i]} bytes, not {memoryview(out).nbytes}")
        todo = iter(list(targets))
        lock = threading.Lock()

        def work() -> None:
            while True:
                with lock:
                    job = next(todo, None)
                if job is None:
                    return
                i, out = job
                try:
                    ct = self._cts[i]
                    self._aead.decrypt_into(ct[:_CHUNK_NONCE].tobytes(), ct[_CHUNK_NONCE:], self._aad(i), out)
                except InvalidTag:
                    raise self._failed() from None

        helper = None
        if len(targets) > 1 and OPEN_THREADS > 1:
            from concurrent.futures import ThreadPoolExecutor

            helper = ThreadPoolExecutor(OPEN_THREADS - 1, thread_name_prefix="memledger-open")
            jobs = [helper.submit(work) for _ in range(OPEN_THREADS - 1)]
        try:
            work()
        finally:
            if helper is not None:
                helper.shutdown(wait=True)
        if helper is not None:
            for j in jobs:
                j.result()  # a chunk the helper could not open raises here


def is_sealed(value: Any) -> bool:
    """Whether ``value`` is a sealed token (text, bytes, or bytes in chunks)."""
    if isinstance(value, str):
        return value.startswith(PREFIX)
    return isinstance(value, (bytes, bytearray, memoryview)) and bytes(value[:4]) in (BYTES_PREFIX, CHUNKS_PREFIX)
