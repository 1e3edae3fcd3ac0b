"""The shard map: which PostgreSQL servers hold the ledger's users, and which one holds a given user.

A shard is an ordinary memledger store (its own log, projections, key store and worker) on a PostgreSQL server,
named in a TOML file given as ``memledger --shards FILE`` or ``$MEMLEDGER_SHARDS``::

    [directory]                      # optional: where placements and API keys live
    dsn = "postgresql://postgres@127.0.0.1:5432/postgres"
    schema = "memledger_directory"   # default: the first shard's server, schema memledger_directory

    [shards.a]
    dsn = "postgresql://postgres@127.0.0.1:5433/postgres"
    schema = "memledger"             # optional, default memledger

    [shards.b]
    dsn = "postgresql://postgres@127.0.0.1:5434/postgres"

A user is placed by rendezvous (highest-random-weight) hashing of ``user_id`` over the shard names (Thaler and
Ravishankar, "A Name-Based Mapping Scheme for Rendezvous", 1996/1998): every shard scores the user with a hash of
(shard name, user id) and the highest score wins. Adding a shard to N moves only the users the new shard now wins,
about 1/(N+1) of them, and removing one moves only that shard's users; no table of all users is needed. The
directory (:mod:`memledger.sharding.directory`) overrides the hash for users being moved or already moved.
"""

from __future__ import annotations

import hashlib
import os
import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from ledger.errors import BadInput

SHARDS_ENV = "MEMLEDGER_SHARDS"
#: The directory's default schema, on the first shard's server.
DIRECTORY_SCHEMA = "memledger_directory"
_NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")
_SCHEMA_RE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")


class ShardSpec(BaseModel):
    """One shard: ``name`` (lower-case letters, digits, ``-``/``_``; at most 32), a ``postgresql://`` ``dsn`` and
    the ``schema`` its store uses (default ``memledger``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    dsn: str
    schema_: str = "memledger"

    @property
    def schema(self) -> str:
        return self.schema_

    @property
    def where(self) -> tuple[str, str]:
        """(server address without credentials, schema): two shards may not share one. The host is resolved to
        its address, so ``localhost`` and ``127.0.0.1`` name the same server."""
        import socket
        from urllib.parse import urlparse

        u = urlparse(self.dsn)
        host = u.hostname or "127.0.0.1"
        try:
            host = socket.gethostbyname(host)
        except (OSError, UnicodeError):
            pass  # an unresolvable name stays as written (connecting will say it is unreachable)
        return (f"{host}:{u.port or 5432}{u.path or '/postgres'}", self.schema_)


class ShardMap(BaseModel):
    """The parsed map: ``shards`` in file order, and the ``directory`` store (a :class:`ShardSpec` named
    ``directory``). Build it with :func:`load_shard_map` or :meth:`from_dict`."""

    model_config = ConfigDict(frozen=True)

    shards: tuple[ShardSpec, ...]
    directory: ShardSpec
    source: str = "<dict>"

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.shards]

    def spec(self, name: str) -> ShardSpec:
        """The shard called ``name``. Raises BadInput naming the known shards."""
        for s in self.shards:
            if s.name == name:
                return s
        raise BadInput("shard", f"{name!r} is not in the shard map {self.source}",
                       f"use one of: {', '.join(self.names)}")

    @classmethod
    def from_dict(cls, data: Any, source: str = "<dict>") -> ShardMap:
        """Validate a parsed TOML document. Raises :class:`BadInput` naming the table and field
        (``--shards: shards.b.dsn ...``) and the fix."""
        def bad(where: str, problem: str, fix: str) -> BadInput:
            return BadInput("--shards", f"{source}: {where}{problem}", fix)

        if not isinstance(data, dict):
            raise bad("", "is not a TOML table", "write [shards.NAME] tables with a dsn each")
        unknown = sorted(set(data) - {"shards", "directory"})
        if unknown:
            raise bad(f"{unknown[0]}: ", "is not a known table", "use [shards.NAME] and an optional [directory]")
        raw = data.get("shards")
        if not isinstance(raw, dict) or not raw:
            raise bad("", "names no shards", 'add at least one [shards.NAME] table with dsn = "postgresql://..."')
        specs = [_spec(name, table, f"shards.{name}", bad) for name, table in raw.items()]
        seen: dict[tuple[str, str], str] = {}
        for s in specs:
            if s.where in seen:
                raise bad(f"shards.{s.name}: ", f"uses the same server and schema as shards.{seen[s.where]}",
                          "give each shard its own server or schema")
            seen[s.where] = s.name
        d = data.get("directory", {})
        if not isinstance(d, dict):
            raise bad("directory: ", "is not a table", "write [directory] with dsn and schema, or leave it out")
        d = {"dsn": specs[0].dsn, "schema": DIRECTORY_SCHEMA, **d}
        directory = _spec("directory", d, "directory", bad, check_name=False)
        if directory.where in seen:
            raise bad("directory: ", f"uses the same schema as shards.{seen[directory.where]}",
                      f"give the directory its own schema (default {DIRECTORY_SCHEMA})")
        return cls(shards=tuple(specs), directory=directory, source=source)


def _spec(name: str, table: Any, where: str, bad: Any, check_name: bool = True) -> ShardSpec:
    if check_name and not _NAME_RE.match(str(name)):
        raise bad(f"{where}: ", "is not a plain shard name",
                  "use lower-case letters, digits, '-' and '_' (at most 32, starting with a letter)")
    if not isinstance(table, dict):
        raise bad(f"{where}: ", "is not a table", f'write [{where}] with dsn = "postgresql://..."')
    extra = sorted(set(table) - {"dsn", "schema"})
    if extra:
        raise bad(f"{where}.{extra[0]}: ", "is not a known field", f"[{where}] has dsn and an optional schema")
    dsn = table.get("dsn")
    example = 'e.g. dsn = "postgresql://postgres@127.0.0.1:5433/postgres"'
    if dsn is None:
        raise bad(f"{where}.dsn: ", "is missing", example)
    if not isinstance(dsn, str) or not dsn.startswith(("postgresql://", "postgres://")):
        raise bad(f"{where}.dsn: ", f"{dsn!r} is not a postgresql:// URL", example)
    try:
        from urllib.parse import urlparse

        urlparse(dsn).port  # noqa: B018 - raises ValueError for a port out of range or not a number
    except ValueError as exc:
        raise bad(f"{where}.dsn: ", f"{dsn!r} has a bad port ({exc})", example) from None
    schema = table.get("schema", "memledger")
    if not isinstance(schema, str) or not _SCHEMA_RE.match(schema):
        raise bad(f"{where}.schema: ", f"{schema!r} is not a plain PostgreSQL schema name",
                  "use lower-case letters, digits and '_' (at most 63, not starting with a digit)")
    try:
        return ShardSpec(name=name, dsn=dsn, schema_=schema)
    except ValidationError as exc:  # pragma: no cover - the checks above cover every field
        raise bad(f"{where}: ", str(exc.errors()[0]["msg"]), "fix the table") from None


def load_shard_map(path: str | os.PathLike[str]) -> ShardMap:
    """Read and validate the TOML shard map at ``path``.

    Raises:
        BadInput: (field ``--shards``) the file is missing, unreadable, not TOML, or a table or field is wrong;
            the message names it and the fix.
    """
    p = Path(path).expanduser()
    if not str(path).strip():
        raise BadInput("--shards", "is empty", f"give a TOML shard map, or leave --shards and ${SHARDS_ENV} unset")
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInput("--shards", f"{str(p)!r} does not exist", "give the path of a TOML shard map") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput("--shards", f"cannot read {str(p)!r}: {exc}", "give a readable UTF-8 TOML file") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BadInput("--shards", f"{str(p)!r} is not valid TOML ({exc})", "fix the file's syntax") from None
    return ShardMap.from_dict(data, source=str(p))


def score(shard: str, user_id: str) -> int:
    """The rendezvous weight of ``user_id`` on ``shard``: the first 8 bytes of BLAKE2b(shard NUL user), as an
    unsigned integer. Stable across processes, machines and Python versions (no ``hash()`` salt)."""
    digest = hashlib.blake2b(f"{shard}\x00{user_id}".encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def rendezvous(user_id: str, shards: list[str]) -> str:
    """The shard of ``shards`` with the highest :func:`score` for ``user_id`` (ties, never seen in practice, go to
    the smaller name). Raises ValueError on an empty list."""
    if not shards:
        raise ValueError("no shards")
    return max(shards, key=lambda s: (score(s, user_id), [-ord(c) for c in s]))
