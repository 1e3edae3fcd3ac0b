"""API keys of the servers: only hashes stored, in the store (SQLite home or PostgreSQL schema);
create/list/revoke, expiry, admin keys; ``memledger keys`` prints the secret once and exits 2 on bad input."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from ledger.errors import BadInput
from memledger import MemoryLedger
from memledger.servers.keys import APIKeyStore


def test_keys_on_both_backends(store_args: dict[str, Any]) -> None:
    with MemoryLedger(**store_args) as ml:
        ks = APIKeyStore(ml)
        k1 = ks.create(["u1"], note="agent A")
        k2 = ks.create(["u1", "u2"], allow_sensitive=["health"])
        adm = ks.create([], admin=True)
        p = ks.authenticate(k1.secret)
        assert p is not None and p.users == {"u1"} and p.allows("u1") and not p.allows("u2") and not p.admin
        assert ks.authenticate(k2.secret).allow_sensitive == {"health"}
        pa = ks.authenticate(adm.secret)
        assert pa.admin and pa.all_users and pa.allows("anyone")
        # only the hash is stored, never the secret
        with ml.db.read() as cur:
            rows = cur.execute("SELECT key_id, secret_sha256 FROM api_keys ORDER BY key_id").fetchall()
        stored = {kid: digest for kid, digest in rows}
        assert stored[k1.key_id] == hashlib.sha256(k1.secret.encode()).hexdigest()
        assert all(k1.secret not in str(r) for r in rows)
        # a tampered secret with the right id, an unknown id, garbage: no principal
        assert ks.authenticate(k1.secret[:-1] + ("A" if k1.secret[-1] != "A" else "B")) is None
        assert ks.authenticate("mlk_ffffffffffff_" + "a" * 43) is None
        assert ks.authenticate("Bearer nonsense") is None and ks.authenticate("") is None
        assert [k.key_id for k in ks.list()] == [k1.key_id, k2.key_id, adm.key_id]
        assert ks.revoke(k1.key_id).active is False
        assert ks.authenticate(k1.secret) is None
        assert ks.revoke(k1.key_id).revoked_at is not None  # idempotent
        with pytest.raises(BadInput):
            ks.revoke("000000000000")
        with pytest.raises(BadInput):
            ks.create([])  # no user and not admin
        with pytest.raises(BadInput):
            ks.create(["u1"], expires="2001-01-01T00:00:00Z")
        with pytest.raises(BadInput):
            ks.create(["u1"], expires="2999-01-01T00:00:00")  # naive
        soon = ks.create(["u1"], expires="2999-01-01T00:00:00Z")
        assert ks.authenticate(soon.secret) is not None and soon.expires_at.year == 2999
        with ml.db.transaction() as cur:  # let it expire
            cur.execute("UPDATE api_keys SET expires_at = ? WHERE key_id = ?", (1, soon.key_id))
        assert ks.authenticate(soon.secret) is None
        assert [k.active for k in ks.list() if k.key_id == soon.key_id] == [False]


def test_keys_cli(cli: Any) -> None:
    code, out, err = cli("keys", "create", "--user", "u1")
    assert code == 0 and out.strip().startswith("mlk_") and "shown only once" in err
    created = cli.json("keys", "create", "--user", "u2", "--user", "u3", "--admin", "--note", "ops")
    assert created["secret"].startswith("mlk_") and created["users"] == ["u2", "u3"] and created["admin"]
    listed = cli.json("keys", "list")
    assert len(listed) == 2 and all("secret" not in k for k in listed)
    assert created["secret"] not in json.dumps(listed)
    assert cli.json("keys", "revoke", created["key_id"])["active"] is False
    code, _, err = cli("keys", "create")
    assert code == 2 and "--user" in err
    code, _, err = cli("keys", "create", "--user", "u1", "--expires", "tomorrow")
    assert code == 2 and "--expires" in err
    code, _, err = cli("keys", "revoke", "nope")
    assert code == 2
    code, _, err = cli("serve", "mcp", "--transport", "carrier-pigeon")
    assert code == 2 and "--transport" in err
    code, _, err = cli("serve", "http", "--port", "70000")
    assert code == 2 and "--port" in err


def test_keys_refuse_malformed_labels(tmp_path: Any) -> None:
    """`--allow-sensitive bogus` labels were accepted (a typo grants nothing, silently). Labels are
    lowercase identifiers, as recorded ones (SQLite only: the check runs before the store is written)."""
    from tests.conftest import CLI

    store_args = {"home": tmp_path / "h"}
    cli = CLI(store_args)
    for bad in ("Bogus Label", "x" * 65):
        code, _, err = cli("keys", "create", "--user", "u1", "--allow-sensitive", bad)
        assert code == 2 and "--allow-sensitive" in err and ("not a label" in err or "characters long" in err), err
    created = cli.json("keys", "create", "--user", "u1", "--allow-sensitive", "health", "--allow-sensitive",
                       "special-category_2")
    assert created["allow_sensitive"] == ["health", "special-category_2"]
    with pytest.raises(BadInput, match="sensitivity: 'Bogus Label' is not a label"), MemoryLedger(**store_args) as ml:
        ml.assert_fact("u1", "health.lungs", "asthma", sensitivity="Bogus Label")
    code, _, err = cli("assert", "u1", "health.lungs", "asthma", "--sensitivity", "Health")
    assert code == 2 and "not a label" in err, err


def test_keys_commands_open_the_store_without_the_vectors_projection(monkeypatch: pytest.MonkeyPatch,
                                                                      tmp_path: Any) -> None:
    from typer.testing import CliRunner

    from memledger.cli import app

    opened: list[Any] = []
    original = MemoryLedger.__init__

    def spy(self: MemoryLedger, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        opened.append(self.vectors_projection)

    monkeypatch.setattr(MemoryLedger, "__init__", spy)
    result = CliRunner().invoke(app, ["--home", str(tmp_path / "h"), "keys", "create", "--user", "u1", "--json"])
    assert result.exit_code == 0, result.output
    assert opened == [None]
