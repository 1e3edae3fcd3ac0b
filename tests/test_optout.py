"""Opt-out sessions: ``session start --no-memory`` keeps messages only until the session ends; the log
holds nothing of it but the ``NoMemorySessionEnded`` tombstone; facts asserted in it are refused."""

from __future__ import annotations

from typing import Any

import pytest

from memledger import MemoryLedger
from tests.test_erasure import found, store_bytes

SECRET = "Narwhal-Cardamom-6604"
SECRET_ZH = "我不想让你记住这件事"


@pytest.fixture(autouse=True)
def _hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLEDGER_EMBEDDER", "hash")


def topics(ml: MemoryLedger) -> list[str]:
    return [n.topic for n in ml.app.recorder.select_notifications(start=1, limit=100)]


def test_no_memory_session_leaves_only_a_tombstone(fresh_ledger: MemoryLedger, store_args: dict) -> None:
    ml = fresh_ledger
    r = ml.session_start("alice", "private", no_memory=True)
    assert (r.event, r.position, r.replayed) == ("NoMemorySessionStarted", 0, False)
    assert ml.session_start("alice", "private", no_memory=True).replayed is True
    ml.log_message("alice", "private", role="user", message_id="m1", text=SECRET)
    ml.log_message("alice", "private", role="assistant", message_id="m2", text=SECRET_ZH)
    assert ml.log_message("alice", "private", role="user", message_id="m1", text=SECRET).replayed is True
    assert [(m["message_id"], m["seq"], m["text"], m["no_memory"]) for m in ml.messages("alice", "private")] == [
        ("m1", 1, SECRET, True), ("m2", 2, SECRET_ZH, True)]
    assert topics(ml) == []  # nothing in the log while it runs
    assert [s["session_id"] for s in ml.export("alice").sessions] == ["private"]

    end = ml.end_session("alice", "private")
    assert (end.event, end.position) == ("NoMemorySessionEnded", 1)
    assert topics(ml) == ["memledger:NoMemorySessionEnded"]
    tomb = ml.app.mapper.to_domain_event(ml.app.recorder.select_notifications(start=1, limit=1)[0])
    assert (tomb.user_id, tomb.session_id, tomb.messages) == ("alice", "private", 2)
    assert ml.messages("alice", "private") == [] and ml.sessions("alice") == []
    from ledger.errors import BadInput

    with pytest.raises(BadInput, match="nothing is held about 'alice'"):  # nothing was kept: nothing to export
        ml.export("alice")
    assert found(store_bytes(ml, store_args), SECRET, SECRET_ZH) == []


def test_refusals_write_nothing(fresh_ledger: MemoryLedger) -> None:
    from ledger.errors import BadInput

    ml = fresh_ledger
    ml.session_start("alice", "private", no_memory=True)
    ml.log_message("alice", "private", role="user", message_id="m1", text=SECRET)
    with pytest.raises(BadInput, match=r"session_id: session 'private' of 'alice' was started with --no-memory"):
        ml.assert_fact("alice", "preference.secret", SECRET, session_id="private")
    with pytest.raises(BadInput, match="no state card is kept"):
        ml.update_card("alice", "private", progress="half done")
    with pytest.raises(BadInput, match="no summary is kept"):
        ml.summarize("alice", "private", text="a summary")
    with pytest.raises(BadInput, match="--task"):
        ml.session_start("alice", "other", no_memory=True, task="a task")
    ml.session_start("alice", "open")
    with pytest.raises(BadInput, match="--no-memory: session 'open' of 'alice' was already started with memory"):
        ml.session_start("alice", "open", no_memory=True)
    assert topics(ml) == ["memledger:SessionStarted"]
    ml.end_session("alice", "private")
    with pytest.raises(BadInput, match="ended"):
        ml.log_message("alice", "private", role="user", message_id="m9", text="later")
    with pytest.raises(BadInput, match="was started with --no-memory"):
        ml.assert_fact("alice", "k", 1, session_id="private")
    assert topics(ml) == ["memledger:SessionStarted", "memledger:NoMemorySessionEnded"]


def test_erase_purges_open_no_memory_sessions(fresh_ledger: MemoryLedger, store_args: dict) -> None:
    fresh_ledger.session_start("alice", "private", no_memory=True)
    fresh_ledger.log_message("alice", "private", role="user", message_id="m1", text=SECRET)
    fresh_ledger.erase("alice")
    assert fresh_ledger.export("alice").sessions == []
    assert found(store_bytes(fresh_ledger, store_args), SECRET) == []


def test_cli_no_memory(cli: Any, store_args: dict) -> None:
    assert cli.json("session", "start", "alice", "private", "--no-memory")["event"] == "NoMemorySessionStarted"
    cli.json("session", "log", "alice", "private", "--role", "user", "--message-id", "m1", "--text", SECRET_ZH)
    code, _, err = cli("assert", "alice", "k", "v", "--session", "private")
    assert code == 2 and "--no-memory" in err and "Traceback" not in err
    code, _, err = cli("session", "card", "alice", "private", "--progress", "p")
    assert code == 2 and "no state card" in err
    exported = cli.json("export", "alice")
    assert [m["text"] for s in exported["sessions"] for m in s["messages"]] == [SECRET_ZH]
    # The agent reads its open no-memory session back through context (was exit 2: "not a session of 'alice'").
    ctx = cli.json("context", "alice", "--session", "private", "--now", "2999-01-01T00:00:00Z")
    msg_lines = next(sec["lines"] for sec in ctx["sections"] if sec["name"] == "messages")
    assert len(msg_lines) == 1 and msg_lines[0].endswith(f"user: {SECRET_ZH}")
    assert cli.json("session", "end", "alice", "private")["event"] == "NoMemorySessionEnded"
    code, _, err = cli("context", "alice", "--session", "private")  # ended: nothing of it is kept
    assert code == 2 and "is not a session of 'alice'" in err
    code, _, err = cli("export", "alice")  # the ended session left nothing: nothing to export
    assert code == 2 and "nothing is held about 'alice'" in err
    with MemoryLedger(**store_args) as ml:
        assert topics(ml) == ["memledger:NoMemorySessionEnded"]
        assert found(store_bytes(ml, store_args), SECRET_ZH) == []
