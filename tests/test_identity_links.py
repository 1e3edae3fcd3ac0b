"""Identity links between two user ids of one person: a "may be" link is shown and merges nothing, a confirmed link
makes a search of either id read the other's memories (each hit with its id), unlinking ends it, erasing one id
leaves the other's own memories intact and reads nothing of the erased one, and over a server only a key holding
both ids sees the merge. Through the CLI on SQLite and PostgreSQL, and the HTTP and MCP faces."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime, timezone
from typing import Any

from fastapi.testclient import TestClient

from memledger import MemoryLedger
from memledger.servers.http import create_app
from memledger.servers.keys import APIKeyStore
from memledger.servers.mcp import build_mcp
from memledger.servers.ops import Service


def whose(cli: Any, user: str, query: str, *extra: str) -> dict[str, str]:
    return {h["text"]: h.get("user_id") for h in cli.json("search", user, query, "-k", "5", *extra)}


def seed(cli: Any) -> None:
    cli.env["MEMLEDGER_EMBEDDER"] = "hash:384"
    for user, text in (("app-1", "I like green tea"), ("web-1", "I drive a blue Golf"), ("web-1", "I live in Porto")):
        assert cli("remember", user, text)[0] == 0


def test_may_be_shows_confirmed_merges_unlink_ends(cli: Any) -> None:
    seed(cli)
    r = cli.json("identity", "link", "app-1", "web-1", "--may-be", "--reason", "same e-mail")
    assert (r["status"], len(r["receipts"])) == ("may_be", 2)
    assert "I drive a blue Golf" not in whose(cli, "app-1", "what car do I drive")
    people = [s for s in cli.json("context", "app-1")["sections"] if s["name"] == "people"][0]["lines"]
    assert any("may be the same person as user:web-1 (not confirmed)" in line for line in people)
    assert cli.json("identity", "list", "app-1")["links"][0]["status"] == "may_be"

    r = cli.json("identity", "link", "app-1", "web-1", "--confirmed")
    assert r["status"] == "confirmed"
    assert [(x["other"], x["status"]) for x in cli.json("identity", "list", "web-1")["links"]] == [
        ("app-1", "confirmed")]
    hits = whose(cli, "app-1", "what car do I drive")
    assert hits["I drive a blue Golf"] == "web-1" and hits["I like green tea"] == "app-1"
    assert whose(cli, "web-1", "what do I drink")["I like green tea"] == "app-1"  # both ways
    assert "I drive a blue Golf" not in whose(cli, "app-1", "what car do I drive", "--not-linked")
    # each user's own profile stays its own
    assert set(cli.json("profile", "app-1")["facts"]) == {"preference.drink"}

    linked_at = datetime.now(timezone.utc).isoformat()
    time.sleep(0.01)
    assert cli.json("identity", "unlink", "app-1", "web-1")["status"] is None
    assert "I drive a blue Golf" not in whose(cli, "app-1", "what car do I drive")
    assert cli.json("identity", "list", "app-1")["links"] == []
    # the link is history: as the ledger believed before the unlink, the two were the same person
    then = cli.json("relations", "app-1", "--as-of", linked_at)["relations"]
    assert [(e["relation_type"], e["entity"]) for e in then] == [("same_person", "user:web-1")]
    code, _, err = cli("identity", "unlink", "app-1", "web-1")
    assert code == 2 and "are not linked" in err


def test_erasing_one_id_keeps_the_others_own_and_reads_nothing_of_it(cli: Any) -> None:
    seed(cli)
    cli.json("identity", "link", "app-1", "web-1", "--confirmed")
    assert cli("erase", "web-1", "--yes")[0] == 0
    hits = whose(cli, "app-1", "what car do I drive")
    assert hits == {"I like green tea": "app-1"}
    [link] = cli.json("identity", "list", "app-1")["links"]
    assert (link["other"], link["erased"]) == ("web-1", True)
    code, _, err = cli("identity", "link", "app-1", "web-1", "--confirmed")
    assert code == 2 and err.startswith("error: other:") and "erased" in err


def test_bad_input_writes_nothing(cli: Any) -> None:
    seed(cli)
    for args, field in ((("app-1", "app-1", "--confirmed"), "other"), (("app-1", "web-1"), "--may-be/--confirmed"),
                        (("app-1", "web-1", "--may-be", "--confirmed"), "--may-be/--confirmed")):
        code, _, err = cli("identity", "link", *args)
        assert code == 2 and err.startswith(f"error: {field}:"), err
    for args, field in ((("unlink", "app-1", "app-1"), "other"), (("unlink", "app-1", "web-1"), "other"),
                        (("unlink", "", "web-1"), "user_id"), (("list", ""), "user_id"),
                        (("link", "app-1", "", "--may-be"), "other")):
        code, _, err = cli("identity", *args)
        assert code == 2 and err.startswith(f"error: {field}:") and "Traceback" not in err, (args, err)
    assert cli.json("identity", "list", "app-1")["links"] == []
    assert cli.json("identity", "list", "web-1")["links"] == []


def test_servers_merge_only_what_the_key_holds(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    ml.remember("app-1", "I like green tea")
    ml.remember("web-1", "I drive a blue Golf")
    keys = APIKeyStore(ml)
    both, one = keys.create(["app-1", "web-1"]).secret, keys.create(["app-1"]).secret
    app = create_app(Service(ml), mcp=False)
    with TestClient(app, headers={"Authorization": f"Bearer {one}"}) as http:
        refused = http.post("/v1/users/app-1/identity-links", json={"other": "web-1", "status": "confirmed"})
        assert refused.status_code == 403 and refused.json()["field"] == "other"
        assert ml.identity_links("app-1").links == []
        ok = http.post("/v1/users/app-1/identity-links", json={"other": "web-1", "status": "confirmed"},
                       headers={"Authorization": f"Bearer {both}"})
        assert ok.status_code == 201, ok.text
        bad = http.post("/v1/users/app-1/identity-links", json={"other": "web-1", "status": "maybe"},
                        headers={"Authorization": f"Bearer {both}"})
        assert bad.status_code == 422 and bad.json()["field"] == "status"

        def users(key: str, **params: Any) -> set[str]:
            r = http.get("/v1/users/app-1/search", params={"query": "car", "k": 5, **params},
                         headers={"Authorization": f"Bearer {key}"})
            assert r.status_code == 200, r.text
            return {h.get("user_id") or "app-1" for h in r.json()}

        for bad in ({"linked": "no"}, {"linked": 0}, {"expand": True}, {"expand": "2"}):
            r = http.post("/v1/users/app-1/search", json={"query": "car", **bad},
                          headers={"Authorization": f"Bearer {both}"})
            assert r.status_code == 422 and r.json()["field"] == next(iter(bad)), (bad, r.text)
        assert users(both) == {"app-1", "web-1"}
        assert users(one) == {"app-1"}  # the key does not hold web-1: nothing of it is read
        assert users(both, linked="false") == {"app-1"}
        listed = http.get("/v1/users/web-1/identity-links", headers={"Authorization": f"Bearer {both}"}).json()
        assert [(x["other"], x["status"]) for x in listed["links"]] == [("app-1", "confirmed")]
        refused = http.post("/v1/users/app-1/identity-links/removals", json={"other": "web-1"})
        assert refused.status_code == 403 and refused.json()["field"] == "other"
        gone = http.post("/v1/users/app-1/identity-links/removals", json={"other": "web-1", "reason": "two people"},
                         headers={"Authorization": f"Bearer {both}"})
        assert gone.status_code == 201 and gone.json()["status"] is None
        assert users(both) == {"app-1"}

    async def run() -> Any:
        from mcp import Client

        async with Client(build_mcp(Service(ml))) as c:
            link = await c.call_tool("identity_link", {"user_id": "app-1", "other": "web-1", "status": "confirmed"})
            hits = await c.call_tool("recall", {"user_id": "web-1", "query": "tea", "k": 5})
            maybe = await c.call_tool("identity_link", {"user_id": "app-1", "other": "web-1", "status": "may_be"})
            return link, hits.structured_content, maybe

    link, hits, maybe = asyncio.run(run())
    assert not link.is_error and link.structured_content["status"] == "confirmed"
    assert {h.get("user_id") for h in hits["hits"]} >= {"app-1"}
    assert not maybe.is_error and ml.identity_links("web-1").links[0].status == "may_be"
