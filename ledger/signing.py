"""The store's signing key, and signed documents an auditor can check later (the erasure certificate,
memledger/erasure.py).

The key is Ed25519. Its 32-byte seed is kept in the store's own key store, as the data key of a reserved id that no
user id can be (it holds control characters, which ``ledger.schemas.check_user_id`` refuses): wrapped by the master
key like every data key, backed up and restored with them, on SQLite and PostgreSQL alike. A document is signed over
its canonical JSON (keys sorted, no spaces, UTF-8); the signature block names the algorithm, the public key and a
short key id (``ed25519:`` and the first 16 hex digits of the public key's SHA-256), so a certificate can be checked
against the key it names, and an auditor pins that key (``memledger signing-key``) to know it is the store's.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

#: the key-store id of the store's signing seed: control characters, so never a user's id
SIGNING_KEY_ID = "\x1fmemledger\x1fstore-signing-key"
ALGORITHM = "ed25519"


def is_reserved(user_id: str) -> bool:
    """Whether a key-store id is the store's own (not a user's): listings of users leave it out."""
    return user_id == SIGNING_KEY_ID


def _private(keystore: Any) -> Any:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    return Ed25519PrivateKey.from_private_bytes(keystore.get_or_create(SIGNING_KEY_ID))


def _raw_public(private: Any) -> bytes:
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    return private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)


def key_id(public_key: bytes) -> str:
    """``ed25519:<16 hex digits>``: the first 64 bits of the public key's SHA-256."""
    return f"{ALGORITHM}:{hashlib.sha256(public_key).hexdigest()[:16]}"


def _named(raw: bytes) -> dict[str, str]:
    return {"algorithm": ALGORITHM, "key_id": key_id(raw), "public_key": base64.b64encode(raw).decode("ascii")}


def decode_public_key(text: str) -> bytes:
    """The 32 raw bytes of an Ed25519 public key given in base64.

    Raises:
        ValueError: not base64, or not 32 bytes.
    """
    raw = base64.b64decode(text.strip(), validate=True)
    if len(raw) != 32:
        raise ValueError(f"{len(raw)} bytes, not the 32 of an Ed25519 public key")
    return raw


def public_key(keystore: Any) -> dict[str, str]:
    """``{"algorithm", "key_id", "public_key"}`` (the public key in base64) of the store's signing key, created on
    first use."""
    return _named(_raw_public(_private(keystore)))


def canonical(body: dict[str, Any]) -> bytes:
    """The bytes a signature covers: the JSON of ``body`` with keys sorted, no whitespace, UTF-8."""
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def sign(keystore: Any, body: dict[str, Any]) -> dict[str, str]:
    """The signature block of ``body`` (a JSON-ready dict): ``algorithm``, ``key_id``, ``public_key``, ``value``
    (base64 of the 64-byte Ed25519 signature over :func:`canonical` of ``body``)."""
    private = _private(keystore)
    return {**_named(_raw_public(private)), "value": base64.b64encode(private.sign(canonical(body))).decode("ascii")}


def verify(body: dict[str, Any], signature: dict[str, Any], trusted_public_key: str | None = None) -> str | None:
    """Check a signature block against ``body``: None when it holds, else why not (one sentence).

    ``trusted_public_key`` (base64): the key the signature must be made with (the store's, pinned by the auditor);
    None accepts the key the block names, which proves only that the document was not altered since signing.
    """
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    if not isinstance(signature, dict) or signature.get("algorithm") != ALGORITHM:
        return f"the signature is not an {ALGORITHM} signature block"
    try:
        raw = base64.b64decode(str(signature.get("public_key", "")), validate=True)
        value = base64.b64decode(str(signature.get("value", "")), validate=True)
        key = Ed25519PublicKey.from_public_bytes(raw)
    except ValueError:
        return "the signature block's public key or value is not valid base64 of the right length"
    if trusted_public_key is not None:
        try:
            trusted = decode_public_key(trusted_public_key)
        except ValueError:
            return "the trusted public key is not an Ed25519 public key in base64"
        if trusted != raw:
            return (f"signed with {key_id(raw)}, not with the trusted key {key_id(trusted)}")
    if signature.get("key_id") != key_id(raw):
        return "the key id does not match the public key"
    try:
        key.verify(value, canonical(body))
    except InvalidSignature:
        return "the signature does not match the document: it was altered after signing, or signed by another key"
    return None
