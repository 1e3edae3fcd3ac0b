"""Idempotency keys: a retried command records nothing new and returns the first receipt."""

from __future__ import annotations

import pytest

from ledger import BadInput


def test_retry_with_same_key_returns_first_receipt(fresh_ledger):
    first = fresh_ledger.assert_fact("u1", "preference.drink", "tea", idempotency_key="turn-7")
    again = fresh_ledger.assert_fact("u1", "preference.drink", "tea", idempotency_key="turn-7")
    assert again.replayed is True and first.replayed is False
    assert (again.event_id, again.version, again.position) == (first.event_id, first.version, first.position)
    assert len(fresh_ledger.history("u1")) == 1


def test_retry_after_later_writes_still_returns_first_receipt(fresh_ledger):
    first = fresh_ledger.assert_fact("u1", "preference.drink", "tea", idempotency_key="k1")
    fresh_ledger.assert_fact("u1", "preference.drink", "coffee")
    again = fresh_ledger.assert_fact("u1", "preference.drink", "tea", idempotency_key="k1")
    assert (again.version, again.position, again.replayed) == (1, first.position, True)
    assert fresh_ledger.profile("u1").facts["preference.drink"].value == "coffee"


def test_same_key_different_command_is_refused(fresh_ledger):
    fresh_ledger.assert_fact("u1", "preference.drink", "tea", idempotency_key="k1")
    with pytest.raises(BadInput) as exc:
        fresh_ledger.assert_fact("u1", "preference.drink", "milk", idempotency_key="k1")
    assert exc.value.field == "idempotency_key"
    assert len(fresh_ledger.history("u1")) == 1


def test_reingest_records_nothing_new(fresh_ledger):
    from tests.conftest import ROOT

    first = fresh_ledger.ingest(ROOT / "samples" / "locomo_conv30.json")
    second = fresh_ledger.ingest(ROOT / "samples" / "locomo_conv30.json")
    assert (first["recorded"], first["replayed"]) == (169, 0)
    assert (second["recorded"], second["replayed"]) == (0, 169)
    assert len(fresh_ledger.history("Jon")) == 86


def test_events_store_a_digest_of_the_fingerprint_and_old_json_fingerprints_still_match(fresh_ledger):
    """The whole canonical command used to be stored (867 bytes per event, the log's largest field); a digest is
    enough for a retry check, and events recorded before it keep matching their retries."""
    from ledger.domain import fingerprint_digest, same_fingerprint

    ml = fresh_ledger
    first = ml.assert_fact("u1", "preference.drink", "tea", idempotency_key="k1", observed_at="2024-01-01T00:00:00Z")
    again = ml.assert_fact("u1", "preference.drink", "tea", idempotency_key="k1", observed_at="2024-01-01T00:00:00Z")
    assert (again.replayed, again.version) == (True, first.version)
    from ledger.domain import fact_id

    stored = list(ml.app.events.get(fact_id("u1", "preference.drink")))[0].command_fingerprint
    assert stored.startswith("sha256:") and len(stored) == 71
    old = '{"key":"preference.drink","op":"assert","value":"tea"}'
    assert same_fingerprint(old, fingerprint_digest(old)) is True
    assert same_fingerprint(old, fingerprint_digest(old.replace("tea", "coffee"))) is False
    assert same_fingerprint(fingerprint_digest(old), fingerprint_digest(old)) is True
    assert same_fingerprint("", fingerprint_digest(old)) is False
