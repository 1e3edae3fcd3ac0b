"""The timeline limited to an agent or a run (``memledger timeline USER --agent A --run R``, ``/ui/users/{user_id}
?agent_id=A&run_id=R``), as a scoped audit shows it: the events written in the scope, their keys and disclosures,
the run's session; an agent's own memories with USER ``-``. Both backends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from memledger import MemoryLedger
from memledger.servers.http import create_app
from memledger.servers.keys import APIKeyStore
from memledger.servers.ops import Service
from memledger.ui.model import user_view


@pytest.fixture(autouse=True)
def _hash_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMLEDGER_EMBEDDER", "hash")


def _seed(ml: MemoryLedger) -> None:
    ml.session_start("u", "r1", observed_at="2024-01-01T00:00:00Z")
    ml.log_message("u", "r1", role="user", message_id="m1", text="let us talk about drinks")
    ml.session_start("u", "r2", observed_at="2024-01-01T00:00:00Z")
    ml.assert_fact("u", "preference.drink", "green tea", text="I drink green tea", agent_id="a", run_id="r1")
    ml.assert_fact("u", "home.city", "Berlin", text="I live in Berlin", agent_id="b", run_id="r2")
    ml.assert_fact("u", "home.city", "Munich", text="I live in Munich now", agent_id="a", run_id="r2")
    ml.assert_fact("u", "work.employer", "Acme", text="I work at Acme")
    ml.relate("u", "sister", "Anna")
    ml.assert_fact(key="style.length", value="short", text="keep answers short", agent_id="a")  # a's own


def _versions(view: dict[str, Any]) -> dict[str, list[tuple[Any, str | None, str | None]]]:
    return {k["key"]: [(v["value"], v["actor"], v["session_id"]) for v in k["versions"]] for k in view["keys"]}


def test_a_scoped_timeline_holds_what_the_scope_wrote(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    _seed(ml)
    whole = user_view(ml, "u")
    assert set(_versions(whole)) >= {"preference.drink", "home.city", "work.employer"} and whole["people"]
    assert whole["scope"] is None
    by_a = user_view(ml, "u", agent_id="a")
    assert _versions(by_a) == {"preference.drink": [("green tea", "a", "r1")], "home.city": [("Munich", "a", "r2")]}
    assert by_a["scope"] == {"agent_id": "a"}
    assert by_a["sessions"] == [] and by_a["people"] == []  # a message records no agent; relations no scope
    assert {t["version"] for k in by_a["keys"] if k["key"] == "home.city" for t in k["timeline"]} == {2}
    in_r2 = user_view(ml, "u", run_id="r2")
    assert _versions(in_r2) == {"home.city": [("Berlin", "b", "r2"), ("Munich", "a", "r2")]}
    assert [s["session_id"] for s in in_r2["sessions"]] == ["r2"]
    in_r1 = user_view(ml, "u", run_id="r1")
    assert [(s["session_id"], [m["text"] for m in s["messages"]]) for s in in_r1["sessions"]] == [
        ("r1", ["let us talk about drinks"])]
    assert _versions(user_view(ml, "u", agent_id="b", run_id="r2")) == {"home.city": [("Berlin", "b", "r2")]}
    assert _versions(user_view(ml, "u", agent_id="nobody")) == {}


def test_timeline_cli_takes_agent_and_run(fresh_ledger: MemoryLedger, cli: Any, tmp_path: Path) -> None:
    ml = fresh_ledger
    _seed(ml)
    target = tmp_path / "a.html"
    code, out, err = cli("timeline", "u", "--html", str(target), "--agent", "a")
    assert code == 0, err
    assert out.startswith(f"wrote {target}: 2 keys, 2 versions, 0 sessions")
    page = target.read_text(encoding="utf-8")
    assert "green tea" in page and "Munich" in page and "Only what was written by agent a." in page
    assert "Berlin" not in page and "Acme" not in page and "Anna" not in page
    code, out, err = cli("timeline", "u", "--html", str(target), "--run", "r2")
    assert code == 0, err
    assert out.startswith(f"wrote {target}: 1 keys, 2 versions, 1 sessions")
    page = target.read_text(encoding="utf-8")
    assert "Berlin" in page and "green tea" not in page and "in run r2" in page
    own = tmp_path / "own.html"
    code, out, err = cli("timeline", "-", "--agent", "a", "--html", str(own))
    assert code == 0, err
    page = own.read_text(encoding="utf-8")
    assert "keep answers short" in page and "green tea" not in page and "~agent/a" in page
    # bad input: exit 2 naming the flag, no file written, nothing recorded
    head = ml.head()
    for args, start in ((["--agent", ""], "error: --agent: is empty"),
                        (["--run", "r 1"], "error: --run: "),
                        (["--agent", "nobody"], "error: --agent: nothing of 'u' was written by agent 'nobody'"),
                        (["--agent", "a", "--run", "r9"], "error: --agent: nothing of 'u' was written by agent 'a' "
                                                          "in run 'r9'"),
                        (["--run", "r9"], "error: --run: nothing of 'u' was written in run 'r9'")):
        bad = tmp_path / "bad.html"
        code, out, err = cli("timeline", "u", "--html", str(bad), *args)
        assert (code, out) == (2, ""), (args, err)
        assert err.startswith(start), (args, err)
        assert not bad.exists()
    code, _, err = cli("timeline", "-", "--html", str(tmp_path / "bad.html"))
    assert code == 2 and err.startswith("error: USER: '-' names no user")
    assert ml.head() == head
    assert "--agent" in cli("timeline", "--help")[1] and "--run" in cli("timeline", "--help")[1]


def test_timeline_page_takes_agent_id_and_run_id(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    _seed(ml)
    secret = APIKeyStore(ml).create(["u"]).secret
    with TestClient(create_app(Service(ml), mcp=False), base_url="http://127.0.0.1") as http:
        http.cookies.set("memledger_ui", secret)
        page = http.get("/ui/users/u", params={"agent_id": "a"})
        assert page.status_code == 200, page.text
        assert "green tea" in page.text and "Munich" in page.text and "Berlin" not in page.text
        assert "Acme" not in page.text and "Only what was written by agent a." in page.text
        page = http.get("/ui/users/u", params={"run_id": "r1"})
        assert page.status_code == 200 and "green tea" in page.text and "Munich" not in page.text
        assert "Acme" in http.get("/ui/users/u").text  # unscoped: the whole memory, as before
        head = ml.head()
        bad = http.get("/ui/users/u", params={"agent_id": ""})
        assert bad.status_code == 422 and "agent_id: is empty" in bad.text
        bad = http.get("/ui/users/u", params={"agent_id": "nobody"})
        assert bad.status_code == 404 and "agent_id=nobody" in bad.text and "Berlin" not in bad.text
        assert ml.head() == head
