"""The optional adjudicator (memledger/adjudicator.py): a scripted OpenAI-compatible server on localhost settles the
conflicts the rules leave; down, slow or nonsensical, it leaves them; its question and answer are evidence."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

T1, T2 = "2024-01-01T09:00:00Z", "2024-02-01T09:00:00Z"
OLD, NEW = "The team offsite with Dana is in Lisbon", "The team offsite with Dana has changed"


class Script:
    """What the scripted server answers next, and what it was asked."""

    def __init__(self) -> None:
        self.reply: object = {"verdict": "replaces", "why": "the offsite changed"}
        self.delay = 0.0
        self.requests: list[dict] = []


@pytest.fixture
def server(monkeypatch):
    script = Script()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            script.requests.append({"path": self.path, "body": body})
            time.sleep(script.delay)
            content = script.reply if isinstance(script.reply, str) else json.dumps(script.reply)
            out = json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)
            except BrokenPipeError:  # the client gave up first (the slow case): nothing to answer
                pass

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    monkeypatch.setenv("MEMLEDGER_ADJUDICATOR_URL", f"http://127.0.0.1:{httpd.server_port}/v1")
    monkeypatch.setenv("MEMLEDGER_ADJUDICATOR_MODEL", "scripted")
    monkeypatch.setenv("MEMLEDGER_ADJUDICATOR_TIMEOUT", "1")
    yield script
    httpd.shutdown()


@pytest.mark.parametrize("verdict,decision,old_status", [("replaces", "supersede", None), ("corrects", "correct", None),
                                                           ("both_true", "add", "current")])
def test_a_verdict_settles_the_conflict_and_is_evidence(fresh_ledger, server, verdict, decision, old_status):
    ml = fresh_ledger
    a = ml.remember("u", OLD, observed_at=T1)
    server.reply = {"verdict": verdict, "why": "scripted"}
    r = ml.remember("u", NEW, observed_at=T2)
    assert (r.decision, r.extra) == (decision, [])
    assert f"adjudicator scripted at http://127.0.0.1:" in r.explanation and f": {verdict} (scripted)" in r.explanation
    facts = {k: (f.value, f.status) for k, f in ml.profile("u").facts.items()}
    assert facts.get(a.key, (None, None))[1] == old_status if decision == "add" else facts[a.key] == (NEW, "current")
    assert server.requests[0]["path"] == "/v1/chat/completions"
    asked = json.loads(server.requests[0]["body"]["messages"][1]["content"])
    assert asked == {"OLD": OLD, "NEW": NEW}
    reasons = [row.reason or "" for row in ml.history("u", r.key)]
    assert any(f"{verdict} (scripted)" in reason for reason in reasons)


@pytest.mark.parametrize("reply,delay", [({"verdict": "maybe"}, 0.0), ("not json at all", 0.0),
                                         ({"verdict": "replaces"}, 2.0)])
def test_a_down_slow_or_confused_adjudicator_leaves_the_conflict(fresh_ledger, server, reply, delay):
    ml = fresh_ledger
    a = ml.remember("u", OLD, observed_at=T1)
    server.reply, server.delay = reply, delay
    r = ml.remember("u", NEW, observed_at=T2)
    assert r.decision == "conflict"
    assert "the conflict stays" in r.explanation
    assert ml.profile("u").facts[a.key].status == "contested"


def test_unset_the_adjudicator_is_never_asked(fresh_ledger, monkeypatch):
    monkeypatch.delenv("MEMLEDGER_ADJUDICATOR_URL", raising=False)
    ml = fresh_ledger
    ml.remember("u", OLD, observed_at=T1)
    r = ml.remember("u", NEW, observed_at=T2)
    assert r.decision == "conflict" and "adjudicator" not in r.explanation
