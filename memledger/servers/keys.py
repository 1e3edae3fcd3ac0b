"""API keys of the HTTP API and of MCP over HTTP: per-user, hashed, revocable (docs/interfaces.md).

A key is ``mlk_<key_id>_<secret>``: ``key_id`` (12 hex digits) names it in ``keys list`` and ``keys revoke``; only
the SHA-256 of the whole key is stored (a 256-bit random secret needs no slow hash), in the ``api_keys`` table of
the store's projection database (the SQLite home's ``projections.db`` or the PostgreSQL schema). The key itself
is printed once by ``memledger keys create``.

A key holds a list of users; it can read and write those users only. A key limited to an agent (``--agent A``)
also reaches A's own memories (``/v1/agents/A/...``), and with no ``--user`` those alone. ``--admin`` adds the erase route
(``DELETE /v1/users/{user_id}``, with a ``Confirm-Erase: <user_id>`` header); an admin key created without users
holds every user. ``--allow-sensitive LABEL`` lets the key's caller pass that label to ``recall``/``context``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from ledger.agent_spaces import space_of
from ledger.errors import BadInput
from ledger.schemas import check_identifier, check_label, check_user_id
from projections.history import add_missing_column
from ledger.timeutil import from_micros, now_utc, parse_instant, to_micros

DDL = """
CREATE TABLE IF NOT EXISTS api_keys (
    key_id TEXT PRIMARY KEY,
    secret_sha256 TEXT NOT NULL,
    users TEXT NOT NULL,
    admin INTEGER NOT NULL,
    allow_sensitive TEXT NOT NULL,
    note TEXT,
    created_at BIGINT NOT NULL,
    expires_at BIGINT,
    revoked_at BIGINT,
    agent TEXT
)"""

KEY_RE = re.compile(r"^mlk_([0-9a-f]{12})_([A-Za-z0-9_\-]{20,100})$")


@dataclass(frozen=True)
class Principal:
    """Who a request speaks for: the key's users (``all_users`` for an admin key without users), admin rights,
    the sensitivity labels it may let in. ``None`` principal = a trusted local caller (MCP over stdio)."""

    key_id: str
    users: frozenset[str] = field(default_factory=frozenset)
    admin: bool = False
    all_users: bool = False
    allow_sensitive: frozenset[str] = field(default_factory=frozenset)
    #: the one agent the key writes and reads as (docs/interfaces.md, "Keys limited to an agent"); None: any
    agent: str | None = None

    def allows(self, user_id: str) -> bool:
        return self.all_users or user_id in self.users

    def allows_agent(self, agent_id: str) -> bool:
        """Whether the key may reach agent ``agent_id``'s own memories (written without a user): a key limited to
        an agent reaches that agent's own and no other's; any other key only when it holds every user."""
        return self.agent == agent_id if self.agent is not None else self.all_users

    @property
    def scope(self) -> frozenset[str] | None:
        """The users this key's reads are limited to in the database (``projections.db.request_scope``): its
        users (and, for a key limited to an agent, that agent's own memories' id), or None (every user) for an
        admin key without users."""
        if self.all_users:
            return None
        return self.users | {space_of(self.agent)} if self.agent is not None else self.users


class KeyInfo(BaseModel):
    """One key as ``memledger keys list --json`` shows it (never the secret)."""

    key_id: str
    users: list[str]
    admin: bool
    allow_sensitive: list[str]
    note: str | None
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    active: bool
    #: the agent the key is limited to; absent from the JSON of a key that is not
    agent: str | None = Field(default=None, exclude_if=lambda v: v is None)


class CreatedKey(KeyInfo):
    """``memledger keys create --json``: the key's record and, once, its ``secret``."""

    secret: str


def _sha(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


class APIKeyStore:
    """The ``api_keys`` table of one opened store (``ml.db``: SQLite or PostgreSQL, ``?`` placeholders)."""

    COLUMNS = "key_id, users, admin, allow_sensitive, note, created_at, expires_at, revoked_at, agent"

    def __init__(self, ml: Any) -> None:
        self.db = ml.db
        self._erased_at = getattr(ml, "erased_at", None)  # a Store's; None for a bare db holder
        with self.db.transaction() as cur:
            cur.execute(DDL)
            add_missing_column(cur, "api_keys", "agent", "TEXT")  # a table made before keys could name an agent

    def _info(self, row: tuple) -> KeyInfo:
        key_id, users, admin, allow, note, created, expires, revoked, agent = row
        now = to_micros(now_utc())
        active = revoked is None and (expires is None or expires > now)
        return KeyInfo(key_id=key_id, users=json.loads(users), admin=bool(admin), allow_sensitive=json.loads(allow),
                       note=note, created_at=from_micros(created), expires_at=from_micros(expires),
                       revoked_at=from_micros(revoked), active=active, agent=agent)

    def create(self, users: list[str], *, admin: bool = False, expires: Any = None,
               allow_sensitive: list[str] | None = None, note: str | None = None,
               agent: str | None = None) -> CreatedKey:
        """Mint a key; returns it with its ``secret`` (shown once; only its hash is kept). ``agent``: the key
        writes as that agent only and reads only what it wrote (memledger/servers/agent_keys.py), and reaches that
        agent's own memories (written without a user; with no ``users``, those alone).

        Raises:
            BadInput: no user, not admin and no agent; a malformed user id, label, agent or expiry, or an expiry in
                the past.
        """
        users = sorted({check_user_id(u, "--user") for u in users})
        agent = check_identifier(agent, "--agent")
        erased = [u for u in users if self._erased_at(u) is not None] if self._erased_at is not None else []
        if erased:  # an erased id stays burned: a key for it could only ever read "erased"
            raise BadInput("--user", f"{erased[0]!r} was erased", "an erased user id stays burned: use a new user id")
        if not users and not admin and agent is None:
            raise BadInput("--user", "no user given", "name the users the key may read and write (--user U, "
                           "repeatable), or create an --admin key (or --agent A alone: a key for agent A's own "
                           "memories)")
        labels = sorted({(x or "").strip() for x in (allow_sensitive or [])})
        if any(not x for x in labels):
            raise BadInput("--allow-sensitive", "an empty label", "give labels such as health or finance")
        for x in labels:  # a lowercase identifier, as recorded labels are: a typo would grant nothing, silently
            check_label(x, "--allow-sensitive")
        expires_at = None
        if expires is not None:
            expires_at = parse_instant(expires, "--expires")
            if expires_at <= now_utc():
                raise BadInput("--expires", f"{expires_at.isoformat()} is in the past", "give a future instant")
        key_id = secrets.token_hex(6)
        secret = f"mlk_{key_id}_{secrets.token_urlsafe(32)}"
        created = to_micros(now_utc())
        with self.db.transaction() as cur:
            cur.execute("INSERT INTO api_keys (key_id, secret_sha256, users, admin, allow_sensitive, note, "
                        "created_at, expires_at, revoked_at, agent) VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, ?)",
                        (key_id, _sha(secret), json.dumps(users), int(admin), json.dumps(labels), note, created,
                         to_micros(expires_at), agent))
        info = self.get(key_id)
        return CreatedKey(**info.model_dump(), secret=secret)

    def get(self, key_id: str) -> KeyInfo:
        with self.db.read() as cur:
            row = cur.execute(f"SELECT {self.COLUMNS} FROM api_keys WHERE key_id = ?", (key_id,)).fetchone()
        if row is None:
            raise BadInput("KEY_ID", f"no key {key_id!r} in this store", "see `memledger keys list`")
        return self._info(row)

    def list(self) -> list[KeyInfo]:
        with self.db.read() as cur:
            rows = cur.execute(f"SELECT {self.COLUMNS} FROM api_keys ORDER BY created_at, key_id").fetchall()
        return [self._info(r) for r in rows]

    def revoke(self, key_id: str) -> KeyInfo:
        """Revoke a key (idempotent): every later request with it is refused (401)."""
        self.get(key_id)
        with self.db.transaction() as cur:
            cur.execute("UPDATE api_keys SET revoked_at = ? WHERE key_id = ? AND revoked_at IS NULL",
                        (to_micros(now_utc()), key_id))
        return self.get(key_id)

    def authenticate(self, secret: str) -> Principal | None:
        """The principal of an active key, or None (unknown, wrong secret, revoked or expired)."""
        m = KEY_RE.match(secret or "")
        if m is None:
            return None
        with self.db.read() as cur:
            row = cur.execute("SELECT secret_sha256, users, admin, allow_sensitive, expires_at, revoked_at, agent "
                              "FROM api_keys WHERE key_id = ?", (m.group(1),)).fetchone()
        if row is None:
            return None
        digest, users, admin, allow, expires, revoked, agent = row
        if not hmac.compare_digest(digest, _sha(secret)):
            return None
        if revoked is not None or (expires is not None and expires <= to_micros(now_utc())):
            return None
        users_set = frozenset(json.loads(users))
        return Principal(key_id=m.group(1), users=users_set, admin=bool(admin),
                         all_users=bool(admin) and not users_set, allow_sensitive=frozenset(json.loads(allow)),
                         agent=agent)


#: The name this class had before ``ledger.crypto.KeyStore`` (the per-user data keys) and it were told apart.
KeyStore = APIKeyStore
