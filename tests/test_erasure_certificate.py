"""The erasure certificate: what an erasure destroyed, signed with the store's Ed25519 key, checked by an auditor
with the certificate and the store's public key alone (docs/erasure.md), on both backends."""

from __future__ import annotations

import copy
import os
import json
from pathlib import Path
from typing import Any

import pytest

from memledger.erasure import verify_certificate


def seeded(ml: Any) -> None:
    ml.assert_fact("u1", "profile.city", "Lyon", text="I live in Lyon")
    ml.assert_fact("u1", "preference.drink", "tea", text="I drink tea")
    ml.log_message("u1", "s1", role="user", text="hello", message_id="m1")
    ml.assert_fact("u2", "profile.city", "Oslo", text="I live in Oslo")


def test_the_certificate_says_what_was_destroyed_and_its_signature_holds(fresh_ledger: Any) -> None:
    ml = fresh_ledger
    seeded(ml)
    receipt = ml.erase("u1", actor="dpo@example.com")
    cert = receipt.certificate
    assert (cert.user_id, cert.actor, cert.tombstone_position, cert.key_ids, cert.key_destroyed_now, cert.events) == (
        "u1", "dpo@example.com", receipt.position, ["user_keys:u1"], True, 2)
    assert (cert.first_position, cert.last_position) == (1, 2)  # u1's two facts; the message is a session event
    assert cert.rows_purged["profile.facts"] == 2 and cert.rows_purged["history.versions"] == 2
    assert cert.rows_purged["messages.log"] == 1
    assert cert.signature["key_id"] == ml.signing_key()["key_id"]
    doc = receipt.model_dump(mode="json")
    assert ml.verify_certificate(doc) is None  # the whole receipt, or the certificate alone
    assert verify_certificate(doc["certificate"], ml.signing_key()["public_key"]) is None


def test_an_altered_certificate_or_another_key_fails(fresh_ledger: Any) -> None:
    ml = fresh_ledger
    seeded(ml)
    cert = ml.erase("u1").model_dump(mode="json")["certificate"]
    for field, value in (("rows_purged", {"profile.facts": 0}), ("user_id", "u2"), ("events", 99),
                         ("certified_at", "2020-01-01T00:00:00Z")):
        forged = copy.deepcopy(cert)
        forged[field] = value
        assert "altered" in (ml.verify_certificate(forged) or ""), field
    other_key = "11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="  # a valid Ed25519 public key that is not the store's
    assert "not with the trusted key" in verify_certificate(cert, other_key)
    # re-signed by someone else with their own key: it verifies against its own key, never against the store's
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from ledger import signing

    class Mallory:
        def get_or_create(self, _id: str) -> bytes:
            return Ed25519PrivateKey.generate().private_bytes_raw()

    forged = {k: v for k, v in cert.items() if k != "signature"} | {"events": 0}
    forged["signature"] = signing.sign(Mallory(), {k: v for k, v in forged.items()})
    assert verify_certificate(forged) is None  # internally consistent ...
    assert "not with the trusted key" in ml.verify_certificate(forged)  # ... but not the store's


def test_erasing_again_certifies_again_and_the_key_is_the_stores_own(fresh_ledger: Any) -> None:
    ml = fresh_ledger
    seeded(ml)
    first = ml.erase("u1").certificate
    again = ml.erase("u1").certificate
    assert again.tombstone_position is None and again.key_destroyed_now is False and again.erased_at == first.erased_at
    assert ml.verify_certificate(again.model_dump(mode="json")) is None
    # the signing seed lives in the key store under a reserved id, never listed as a user
    assert all(u in ("u1", "u2") for u, _ in ml.keystore.users())


def test_bad_certificates_are_bad_input_naming_the_field(fresh_ledger: Any) -> None:
    from ledger.errors import BadInput

    cert = {"format": "x", "user_id": "u", "erased_at": "2024-01-01T00:00:00Z", "certified_at": "2024-01-01T00:00:00Z",
            "actor": None, "tombstone_position": 1, "key_ids": [], "key_destroyed_now": True, "events": 0,
            "first_position": None, "last_position": None, "rows_purged": {}, "snapshots_deleted": 0,
            "files_compacted": [], "signature": {}}
    for doc, field in (({}, "user_id"), ({**cert, "events": "many"}, "events"), ([1, 2], "certificate"),
                       (cert, "format")):
        with pytest.raises(BadInput) as exc:
            verify_certificate(doc)
        assert exc.value.field == field, exc.value


def test_the_cli_verifies_with_the_store_or_with_the_public_key_alone(cli: Any, tmp_path: Path) -> None:
    assert cli("assert", "u1", "profile.city", "Lyon")[0] == 0
    receipt = cli.json("erase", "u1", "--yes")
    path = tmp_path / "cert.json"
    path.write_text(json.dumps(receipt))
    code, out, err = cli("verify-certificate", str(path))
    assert code == 0 and "valid" in out and receipt["certificate"]["signature"]["key_id"] in out, err
    key = cli.json("signing-key")
    assert key["key_id"] == receipt["certificate"]["signature"]["key_id"]
    # an auditor: no store at all, the certificate and the pinned key
    from tests.conftest import run_cli

    code, out, err = run_cli(["--home", str(tmp_path / "nothing-here"), "verify-certificate", str(path),
                              "--public-key", key["public_key"], "--json"])
    assert code == 0 and json.loads(out) == {"valid": True, "problem": None, "key_id": key["key_id"]}, err
    assert not (tmp_path / "nothing-here").exists()
    receipt["certificate"]["rows_purged"]["profile.facts"] = 0
    path.write_text(json.dumps(receipt))
    code, out, err = cli("verify-certificate", str(path))
    assert code == 1 and "altered" in err
    path.write_text("{not json")
    code, out, err = cli("verify-certificate", str(path))
    assert code == 2 and "FILE" in err and "Traceback" not in err
    code, out, err = cli("verify-certificate", str(tmp_path / "missing.json"))
    assert code == 2 and "cannot be read" in err


def test_verify_certificate_refuses_what_is_no_certificate_or_no_key_with_exit_2(cli: Any, tmp_path: Path) -> None:
    from tests.conftest import run_cli

    assert cli("assert", "u1", "profile.city", "Lyon")[0] == 0
    receipt = cli.json("erase", "u1", "--yes")
    key = cli.json("signing-key")
    good = tmp_path / "cert.json"
    good.write_text(json.dumps(receipt))
    empty = tmp_path / "no-store-here"

    def verify(*args: str, home: Path | None = None) -> tuple[int, str, str]:
        return run_cli(["--home", str(home), "verify-certificate", *args]) if home else cli("verify-certificate", *args)

    # no store and no --public-key: nothing to check against, and nothing is created
    code, _, err = verify(str(good), home=empty)
    assert code == 2 and "--public-key" in err and not empty.exists()
    code, _, err = run_cli(["--home", str(empty), "signing-key"])
    assert code == 2 and not empty.exists()
    # the key as `signing-key` prints it (id and key) is taken; a malformed one is bad input, not "altered"
    line = f"{key['key_id']} {key['public_key']}"
    assert verify(str(good), "--public-key", line, home=empty)[0] == 0
    for bad in ("garbage", "", "AAAA"):
        code, _, err = verify(str(good), "--public-key", bad, home=empty)
        assert code == 2 and "--public-key" in err, bad
    # files that are no certificate: binary, too deep, too big, a key twice, a receipt naming another user
    cases = {"bin": os.urandom(64), "deep": b"[" * 200_000 + b"]" * 200_000, "big": b" " * 1_000_001,
             "twice": json.dumps(receipt["certificate"]).replace('"user_id": "u1"', '"user_id": "eve", "user_id": "u1"',
                                                                 1).encode(),
             "other": json.dumps({**receipt, "user_id": "mallory"}).encode()}
    for name, data in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        code, _, err = verify(str(path), "--public-key", key["public_key"], home=empty)
        assert code == 2 and "Traceback" not in err and "Error:" not in err.split("\n")[0], (name, err)
