"""A ledger partitioned by user across separate PostgreSQL servers (docs/scale.md).

The servers are the extra clusters of scripts/pg_shards.sh (ports 5433-5435; ``$MEMLEDGER_TEST_SHARD_DSNS`` overrides,
comma-separated). Without them these tests skip, unless ``MEMLEDGER_REQUIRE_SHARDS=1`` (.ci/run) makes that a
failure. Each test uses its own schema on every server and its own directory schema, dropped afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest

from memledger.sharding.shardmap import ShardMap, rendezvous
from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parent.parent
DSNS = (os.environ.get("MEMLEDGER_TEST_SHARD_DSNS") or ",".join(
    f"postgresql://postgres@127.0.0.1:{p}/postgres" for p in (5433, 5434, 5435))).split(",")


def _reachable() -> str | None:
    import psycopg

    for dsn in DSNS:
        try:
            with psycopg.connect(dsn, connect_timeout=3) as conn:
                conn.execute("SELECT 1")
        except Exception as exc:  # noqa: BLE001 - any failure means "no shard servers"
            return f"no PostgreSQL shard server at {dsn} ({type(exc).__name__}); run scripts/pg_shards.sh"
    return None


@pytest.fixture
def maps(tmp_path: Path) -> Any:
    """(two.toml, three.toml): shards a, b (and c) on separate servers, one fresh schema, one directory schema."""
    reason = _reachable()
    if reason is not None:
        if os.environ.get("MEMLEDGER_REQUIRE_SHARDS") == "1":
            pytest.fail(f"MEMLEDGER_REQUIRE_SHARDS=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    schema = f"t_{uuid.uuid4().hex[:12]}"
    directory = f'[directory]\ndsn = "{DSNS[0]}"\nschema = "{schema}_dir"\n'
    shard = '[shards.{}]\ndsn = "{}"\nschema = "{}"\n'
    two, three = tmp_path / "two.toml", tmp_path / "three.toml"
    two.write_text(directory + "".join(shard.format(n, d, schema) for n, d in zip("ab", DSNS)))
    three.write_text(directory + "".join(shard.format(n, d, schema) for n, d in zip("abc", DSNS)))
    yield two, three
    import psycopg

    for dsn in DSNS:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}_dir" CASCADE')


def cli(shards: Path, *args: str, env: dict[str, str] | None = None, process: bool = False) -> tuple[int, str, str]:
    """``memledger --shards SHARDS ARGS``: in this process (tests/conftest.py ``run_cli``), or as a ``python -m
    memledger`` process with ``process=True`` (a run that kills itself)."""
    overrides = {"MEMLEDGER_CJK_EMBEDDER": "none", **(env or {})}
    if not process:
        return run_cli(["--shards", str(shards), *args], env=overrides)
    proc = subprocess.run([sys.executable, "-m", "memledger", "--shards", str(shards), *args], capture_output=True,
                          text=True, cwd=ROOT, env={**os.environ, **overrides}, timeout=300)
    return proc.returncode, proc.stdout, proc.stderr


def cli_json(shards: Path, *args: str) -> Any:
    code, out, err = cli(shards, *args, "--json")
    assert code == 0, (err, out)
    return json.loads(out)


def opened(path: Path) -> Any:
    from memledger.sharding.sharded import ShardedLedger

    return ShardedLedger(path, embedder="hash", cjk_embedder="none")


def strip_positions(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: strip_positions(x) for k, x in v.items()
                if k not in ("position", "shard") and not k.endswith("_position")}
    if isinstance(v, list):
        return [strip_positions(x) for x in v]
    return v


def live_holders(ml: Any, user: str) -> list[str]:
    """The shards holding a live data key of ``user`` (every write creates one; erasing the old copy destroys it)."""
    return [name for name, shard in ml.each()
            if shard.keystore.get(user) is not None and not shard.keystore.is_destroyed(user)]


def answers(ml: Any, user: str) -> dict[str, Any]:
    """What a moved user's reads must keep: history, belief now and as of the first fact, search, export."""
    history = [r.model_dump(mode="json") for r in ml.history(user)]
    first = history[0]["recorded_at"]
    return strip_positions({
        "history": history,
        "believed_now": ml.believed(user, "2099-01-01T00:00:00Z").model_dump(mode="json"),
        "believed_first": ml.believed(user, first).model_dump(mode="json"),
        "search": [h.model_dump(mode="json") for h in ml.search(user, "coffee city", k=5)],
        "export": {k: v for k, v in ml.export(user).model_dump(mode="json").items() if k != "exported_at"},
    })


# --------------------------------------------------------------------------------------------- placement (no servers)
def test_rendezvous_is_stable_and_moves_only_to_the_new_shard() -> None:
    users = [f"user-{i}" for i in range(3000)]
    two = {u: rendezvous(u, ["a", "b"]) for u in users}
    three = {u: rendezvous(u, ["a", "b", "c"]) for u in users}
    moved = [u for u in users if two[u] != three[u]]
    assert all(three[u] == "c" for u in moved)  # nobody moves between a and b
    assert 0.30 < len(moved) / len(users) < 0.37  # about 1/3
    # pinned values: a change of the hash would misroute every stored user
    assert [rendezvous(u, ["a", "b", "c"]) for u in ("alice", "bob", "carol", "张伟")] == \
        [three_of("alice"), three_of("bob"), three_of("carol"), three_of("张伟")]
    assert rendezvous("alice", ["b", "a"]) == rendezvous("alice", ["a", "b"])  # order of the map does not matter


def three_of(user: str) -> str:
    from memledger.sharding.shardmap import score

    return max("abc", key=lambda s: score(s, user))


def test_score_is_blake2b_of_name_and_user() -> None:
    import hashlib

    from memledger.sharding.shardmap import score

    want = int.from_bytes(hashlib.blake2b(b"a\x00alice", digest_size=8).digest(), "big")
    assert score("a", "alice") == want


@pytest.mark.parametrize("text, needle", [
    ("", "names no shards"),
    ("[shards]\n", "names no shards"),
    ('[shards.A]\ndsn = "postgresql://x/y"\n', "shards.A: is not a plain shard name"),
    ('[shards.a]\ndsn = "mysql://x"\n', "shards.a.dsn: 'mysql://x' is not a postgresql:// URL"),
    ('[shards.a]\ndsn = "postgresql://h/d"\nschema = "Bad-Name"\n', "shards.a.schema:"),
    ('[shards.a]\ndsn = "postgresql://h/d"\nport = 5\n', "shards.a.port: is not a known field"),
    ('[shards.a]\ndsn = "postgresql://h/d"\n[shards.b]\ndsn = "postgresql://h/d"\n',
     "shards.b: uses the same server and schema as shards.a"),
    ('[shardz.a]\ndsn = "postgresql://h/d"\n', "shardz: is not a known table"),
    ("[shards.a\n", "is not valid TOML"),
])
def test_bad_shard_map_exits_2_naming_the_table(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "map.toml"
    path.write_text(text)
    code, out, err = cli(path, "profile", "u1")
    assert code == 2, (out, err)
    assert "--shards" in err and needle in err, err
    assert "Traceback" not in err


def test_missing_map_and_home_with_shards_are_bad_input(tmp_path: Path) -> None:
    code, _, err = cli(tmp_path / "nope.toml", "profile", "u1")
    assert code == 2 and "does not exist" in err
    path = tmp_path / "map.toml"
    path.write_text('[shards.a]\ndsn = "postgresql://postgres@127.0.0.1:1/x"\n')
    code, _, err = run_cli(["--home", str(tmp_path / "h"), "--shards", str(path), "profile", "u1"])
    assert code == 2 and "--shards: given together with --home or --dsn" in err


def test_shard_map_from_dict_defaults_the_directory_to_the_first_server() -> None:
    m = ShardMap.from_dict({"shards": {"a": {"dsn": DSNS[0]}, "b": {"dsn": DSNS[1], "schema": "s2"}}})
    assert m.names == ["a", "b"]
    assert (m.directory.dsn, m.directory.schema) == (DSNS[0], "memledger_directory")
    assert m.spec("b").schema == "s2"


# ------------------------------------------------------------------------------------------------ on real servers
def test_each_user_lives_on_exactly_one_shard(maps: Any) -> None:
    two, _ = maps
    users = [f"u{i}" for i in range(24)]
    with opened(two) as ml:
        for u in users:
            r = ml.record([{"user_id": u, "key": "food.coffee", "value": f"latte {u}"},
                           {"user_id": u, "key": "home.city", "value": "Paris"}])
            assert {x.shard for x in r} == {rendezvous(u, ["a", "b"])}
        for u in users:
            holders = [name for name, shard in ml.each() if shard.profile(u).facts]
            assert holders == [rendezvous(u, ["a", "b"])], u
            assert ml.profile(u).facts["food.coffee"].value == f"latte {u}"
        counts = {name: len(shard.keystore.users()) for name, shard in ml.each()}
        assert sum(counts.values()) == len(users) and min(counts.values()) > 0
    # the CLI routes the same way, and status counts them
    status = cli_json(two, "shards", "status")
    assert {s["name"]: s["users"] for s in status["shards"]} == counts
    assert cli_json(two, "profile", "u3")["facts"]["home.city"]["value"] == "Paris"
    stats = cli_json(two, "stats")  # every shard's counts added, rates from the sums
    assert (stats["users"], stats["facts"], stats["conflict_rate"], stats["freshness_7d"]) == (24, 48, 0.0, 1.0)


def test_a_batch_across_shards_is_refused_naming_the_users(maps: Any) -> None:
    two, _ = maps
    users = [f"u{i}" for i in range(10)]
    on_a = next(u for u in users if rendezvous(u, ["a", "b"]) == "a")
    on_b = next(u for u in users if rendezvous(u, ["a", "b"]) == "b")
    from ledger.errors import BadInput

    with opened(two) as ml:
        with pytest.raises(BadInput) as info:
            ml.record([{"user_id": on_a, "key": "k.x", "value": 1}, {"user_id": on_b, "key": "k.x", "value": 2}])
        assert info.value.field == "commands"
        assert f"a: {on_a}" in info.value.problem and f"b: {on_b}" in info.value.problem
        assert ml.heads() == {"a": 0, "b": 0}  # nothing written anywhere


def test_rebalance_two_to_three_moves_only_changed_users_and_keeps_their_answers(maps: Any) -> None:
    two, three = maps
    users = [f"user{i}" for i in range(30)]
    moving = {u for u in users if rendezvous(u, ["a", "b"]) != rendezvous(u, ["a", "b", "c"])}
    assert moving and len(moving) < len(users)
    erased = sorted(moving)[0]
    with opened(two) as ml:
        for u in users:
            ml.assert_fact(u, "food.coffee", "latte", observed_at="2024-01-01T09:00:00Z")
            ml.remember(u, "I moved to Berlin", observed_at="2024-03-01T09:00:00Z")
            ml.correct_fact(u, "food.coffee", "flat white", reason="misheard")
        ml.session_start(sorted(moving)[1], "s1", task="plan a trip")
        ml.log_message(sorted(moving)[1], "s1", role="user", message_id="m1", text="I like trains")
        ml.erase(erased)
        before = {u: answers(ml, u) for u in users if u != erased}
        heads = ml.heads()
    planned = cli_json(three, "shards", "rebalance", "--dry-run")
    assert {m["user_id"] for m in planned["moves"] if m["status"] == "planned"} == moving - {erased}
    assert erased not in {m["user_id"] for m in planned["moves"]}  # erase pinned it where its record is
    with opened(two) as ml:
        assert ml.heads() == heads  # a dry run changes nothing

    report = cli_json(three, "shards", "rebalance")
    assert sorted((m["user_id"], m["target"], m["status"]) for m in report["moves"]) == sorted(
        (u, "c", "moved") for u in moving - {erased})
    assert all(m["events"] >= 3 for m in report["moves"] if m["status"] == "moved")  # assert, remember, correct

    with opened(three) as ml:
        for u in users:
            if u == erased:
                continue
            assert answers(ml, u) == before[u], u
            assert live_holders(ml, u) == [rendezvous(u, ["a", "b", "c"])], u
        assert ml.erased_at(erased) is not None  # still reads as erased (pinned to the shard with its record)
        assert ml.directory.ring() == (["a", "b", "c"], None)
        assert [p.user_id for p in ml.directory.placements()] == [erased]
        # writes after the move go to the new shard and show up in reads
        u = sorted(moving - {erased})[0]
        assert ml.assert_fact(u, "food.tea", "green").shard == "c"
        assert ml.profile(u).facts["food.tea"].value == "green"
    from ledger.errors import MemledgerError

    with opened(two) as ml:  # a process still on the old file: told to use the new one, for moved users only
        with pytest.raises(MemledgerError, match="use the current shard map file"):
            ml.assert_fact(u, "food.tea", "black")
        stay = next(x for x in users if x not in moving)
        assert ml.assert_fact(stay, "food.tea", "black").shard == rendezvous(stay, ["a", "b"])
    results = cli_json(three, "verify")
    assert results and all(r["ok"] for r in results), [r for r in results if not r["ok"]]
    assert {r["projection"].split("/")[0] for r in results} == {"a", "b", "c"}
    # a second rebalance has nothing to do
    assert cli_json(three, "shards", "rebalance")["moves"] == []


def test_rebalance_under_concurrent_writes_loses_nothing(maps: Any) -> None:
    two, three = maps
    users = [f"w{i}" for i in range(16)]
    with opened(two) as ml:
        for u in users:
            ml.assert_fact(u, "counter.start", 0)
    acked: dict[str, list[int]] = {u: [] for u in users}
    errors: list[str] = []
    stop = threading.Event()

    def writer(mine: list[str], map_path: Path) -> None:
        from memledger.sharding.directory import UserMoving

        with opened(map_path) as ml:
            ml.directory.move_wait = 30.0
            n = 0
            while not stop.is_set():
                for u in mine:
                    n += 1
                    try:
                        ml.assert_fact(u, f"counter.n{n}", n)
                        acked[u].append(n)
                    except UserMoving:
                        pass  # not written: retried by the next loop with another key
                    except Exception as exc:  # noqa: BLE001 - collected and failed below
                        errors.append(f"{u}: {type(exc).__name__}: {exc}")
                        return

    # the writers hold the new map file from before the rebalance (the documented order: roll the file out, then
    # rebalance): the directory's ring keeps them routing each user to where its data is until the switch
    threads = [threading.Thread(target=writer, args=(users[:8], three)),
               threading.Thread(target=writer, args=(users[8:], three))]
    for t in threads:
        t.start()
    try:
        code, out, err = cli(three, "shards", "rebalance", "--json", "--grace", "0.2")
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=120)
    assert code == 0, err
    assert not errors, errors[:3]
    assert all(len(acked[u]) >= 2 for u in users), {u: len(v) for u, v in acked.items()}  # writes ran throughout
    moved = {m["user_id"] for m in json.loads(out)["moves"]}
    assert moved == {u for u in users if rendezvous(u, ["a", "b"]) != rendezvous(u, ["a", "b", "c"])}
    with opened(three) as ml:
        for u in users:
            facts = ml.profile(u).facts
            got = sorted(int(k.split(".n")[1]) for k in facts if k.startswith("counter.n"))
            assert got == sorted(acked[u]), (u, set(acked[u]) ^ set(got))
            assert len(ml.history(u)) == len(acked[u]) + 1  # nothing doubled
    results = cli_json(three, "verify")
    assert all(r["ok"] for r in results), [r for r in results if not r["ok"]]


@pytest.mark.parametrize("step", ["mark", "copy", "verify", "switch", "erase"])
def test_a_rebalance_killed_at_any_step_finishes_on_rerun(maps: Any, step: str) -> None:
    two, three = maps
    users = [f"k{i}" for i in range(12)]
    moving = {u for u in users if rendezvous(u, ["a", "b"]) != rendezvous(u, ["a", "b", "c"])}
    with opened(two) as ml:
        for u in users:
            ml.assert_fact(u, "home.city", "Paris", observed_at="2024-01-01T00:00:00Z")
            ml.assert_fact(u, "home.city", "Berlin", observed_at="2024-06-01T00:00:00Z")
        before = {u: answers(ml, u) for u in users}
    code, _, _ = cli(three, "shards", "rebalance", env={"MEMLEDGER_KILL_AT": step}, process=True)
    assert code == -9  # SIGKILL, at the step named
    with opened(three) as ml:  # reads are served meanwhile, from wherever the user's data is
        for u in users:
            assert ml.profile(u).facts["home.city"].value == "Berlin"
    report = cli_json(three, "shards", "rebalance")
    statuses = {m["status"] for m in report["moves"]}
    assert statuses <= {"moved", "resumed", "erased-old-copy"}, report
    with opened(three) as ml:
        for u in users:
            assert answers(ml, u) == before[u], u
            assert live_holders(ml, u) == [rendezvous(u, ["a", "b", "c"])], (u, live_holders(ml, u))
        assert ml.directory.ring() == (["a", "b", "c"], None)
        assert ml.directory.placements() == []
        assert {u for u in users if ml.shard_of(u) == "c"} == moving
    assert all(r["ok"] for r in cli_json(three, "verify"))


def test_a_write_during_a_move_waits_then_fails_clearly(maps: Any) -> None:
    two, _ = maps
    from memledger.sharding.directory import UserMoving

    with opened(two) as ml:
        ml.assert_fact("mover", "k.a", 1)
        home = ml.shard_of("mover")
        with ml.directory.db.transaction() as cur:
            ml.directory.put(cur, "mover", home, "moving", source=home, target="zz", step="copy")
        ml.directory.move_wait = 0.3
        with pytest.raises(UserMoving) as info:
            ml.assert_fact("mover", "k.b", 2)
        assert f"from shard {home} to zz" in str(info.value) and "nothing was written" in str(info.value)
        assert ml.profile("mover").facts.keys() == {"k.a"}  # reads are served meanwhile
    code, _, err = cli(two, "assert", "mover", "k.b", "2", env={})
    assert code == 1 and "is being moved" in err and "Traceback" not in err


def test_a_receipt_from_the_old_shard_is_told_the_user_moved(maps: Any) -> None:
    two, three = maps
    from memledger.sharding.sharded import UserMoved

    user = next(f"m{i}" for i in range(100) if rendezvous(f"m{i}", ["a", "b"]) != rendezvous(f"m{i}", ["a", "b", "c"]))
    with opened(two) as ml:
        receipt = ml.assert_fact(user, "k.a", 1)
    assert cli(three, "shards", "rebalance")[0] == 0
    with opened(three) as ml:
        with pytest.raises(UserMoved) as info:
            ml.profile(user, after=receipt)
        assert f"moved from shard {receipt.shard} to shard c" in str(info.value)
        assert ml.profile(user).facts["k.a"].value == 1


def test_http_api_on_a_shard_map_routes_by_user_and_names_the_shard(maps: Any, tmp_path: Path) -> None:
    import httpx

    from tests.serve_util import free_port

    two, three = maps
    users = [f"h{i}" for i in range(12)]
    moving = next(u for u in users if rendezvous(u, ["a", "b"]) != rendezvous(u, ["a", "b", "c"]))
    staying = next(u for u in users if rendezvous(u, ["a", "b"]) == rendezvous(u, ["a", "b", "c"]))
    assert cli(two, "shards", "status")[0] == 0  # the first map a directory sees names its serving shards
    code, out, err = cli(three, "keys", "create", "--user", moving, "--user", staying, "--json")  # in the directory
    assert code == 0, err
    secret = json.loads(out)["secret"]
    port = free_port()
    log = open(tmp_path / "server.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "memledger", "--shards", str(three), "serve", "http", "--host",
                             "127.0.0.1", "--port", str(port)], stdout=subprocess.DEVNULL, stderr=log, cwd=ROOT,
                            env={**os.environ, "MEMLEDGER_CJK_EMBEDDER": "none"})
    base, auth = f"http://127.0.0.1:{port}", {"Authorization": f"Bearer {secret}"}
    try:
        import time

        deadline = time.monotonic() + 60
        while True:
            try:
                health = httpx.get(base + "/v1/health", timeout=1).json()
                break
            except httpx.HTTPError:
                assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "server.log").read_text()
                time.sleep(0.2)
        assert health["shards"] == {"a": 0, "b": 0, "c": 0}
        for u in (moving, staying):
            r = httpx.post(f"{base}/v1/users/{u}/facts/home.city", json={"value": "Paris"}, headers=auth)
            assert r.status_code == 201, r.text
            # before the rebalance the ring still serves a and b: the user goes where the old hash says
            assert r.headers["X-Ledger-Shard"] == r.json()["shard"] == rendezvous(u, ["a", "b"])
            assert r.headers["X-Ledger-Position"] == str(r.json()["position"])
        assert cli(three, "shards", "rebalance")[0] == 0
        r = httpx.post(f"{base}/v1/users/{moving}/facts/home.city", json={"value": "Berlin"}, headers=auth)
        assert r.status_code == 201 and r.headers["X-Ledger-Shard"] == "c", r.text
        profile = httpx.get(f"{base}/v1/users/{moving}/profile", headers=auth).json()
        assert profile["facts"]["home.city"]["value"] == "Berlin"
        history = httpx.get(f"{base}/v1/users/{moving}/history", headers=auth).json()
        assert [h["value"] for h in history if h["key"] == "home.city"] == ["Paris", "Berlin"]
        # a write while the user is being moved: 503 with Retry-After, nothing written
        with opened(three) as ml:
            with ml.directory.db.transaction() as cur:
                ml.directory.put(cur, staying, rendezvous(staying, ["a", "b", "c"]), "moving",
                                 source=rendezvous(staying, ["a", "b", "c"]), target="c", step="copy")
        r = httpx.post(f"{base}/v1/users/{staying}/facts/home.city", json={"value": "Rome"}, headers=auth,
                       timeout=30)
        assert r.status_code == 503 and r.headers["Retry-After"] == "2", r.text
        assert r.json()["title"] == "User moving"
        assert httpx.get(f"{base}/v1/users/{staying}/profile", headers=auth).json()["facts"]["home.city"][
            "value"] == "Paris"
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def test_mcp_server_on_a_shard_map_routes_each_user_to_its_shard(maps: Any) -> None:
    import asyncio

    from mcp import Client, StdioServerParameters

    two, _ = maps
    users = [f"p{i}" for i in range(10)]
    on = {s: next(u for u in users if rendezvous(u, ["a", "b"]) == s) for s in ("a", "b")}
    params = StdioServerParameters(command=sys.executable, args=["-m", "memledger", "--shards", str(two), "serve",
                                                                 "mcp"],
                                   env={**os.environ, "MEMLEDGER_CJK_EMBEDDER": "none"}, cwd=str(ROOT))

    async def run() -> None:
        async with Client(params) as c:
            for shard, user in on.items():
                r = await c.call_tool("remember", {"user_id": user, "text": f"I live in {shard.upper()}ville"})
                assert not r.is_error, r.content[0].text
                assert r.structured_content["shard"] == shard
                pos = r.structured_content["position"]
                r = await c.call_tool("profile", {"user_id": user, "after": pos})
                assert [f["text"] for f in r.structured_content["facts"].values()] == [f"I live in {shard.upper()}ville"]
                r = await c.call_tool("recall", {"user_id": user, "query": "where do I live"})
                assert [h["text"] for h in r.structured_content["hits"]] == [f"I live in {shard.upper()}ville"]

    asyncio.run(run())
    with opened(two) as ml:  # each user's memory is on its own shard only
        for shard, user in on.items():
            other = "b" if shard == "a" else "a"
            assert ml.shard(shard).profile(user).facts and not ml.shard(other).profile(user).facts


def test_project_follow_runs_one_worker_per_shard(maps: Any) -> None:
    import signal
    import time

    two, _ = maps
    users = [f"f{i}" for i in range(8)]
    assert cli(two, "shards", "status")[0] == 0  # create the stores before the worker starts
    worker = subprocess.Popen([sys.executable, "-m", "memledger", "--shards", str(two), "project", "--follow",
                               "--interval", "0.1", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, cwd=ROOT, env={**os.environ, "MEMLEDGER_CJK_EMBEDDER": "none"})
    try:
        from memledger.sharding.sharded import ShardedLedger

        time.sleep(1.0)
        with ShardedLedger(two, embedder="hash", cjk_embedder="none", projection_mode="worker") as ml:
            receipts = {u: ml.assert_fact(u, "home.city", f"City of {u}") for u in users}
            assert {r.shard for r in receipts.values()} == {"a", "b"}
            for u, r in receipts.items():  # the worker of r.shard catches up; the read waits for it
                assert ml.profile(u, after=r, timeout=30).facts["home.city"].value == f"City of {u}"
    finally:
        worker.send_signal(signal.SIGTERM)
        out, err = worker.communicate(timeout=30)
    assert worker.returncode == 0, err
    positions = json.loads(out)["positions"]
    assert set(positions) == {"a", "b"} and sum(positions.values()) >= len(users)


def test_ingest_on_a_shard_map_writes_each_user_on_its_shard(maps: Any, tmp_path: Path) -> None:
    two, _ = maps
    users = [f"i{i}" for i in range(6)]
    lines = [{"user_id": u, "key": "home.city", "value": f"City {u}", "observed_at": "2024-01-01T00:00:00Z",
              "idempotency_key": f"line-{u}"} for u in users]
    lines += [{"user_id": u, "text": "I drink green tea", "observed_at": "2024-02-01T00:00:00Z"} for u in users[:3]]
    path = tmp_path / "in.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    report = cli_json(two, "ingest", str(path), "--format", "jsonl")
    assert (report["commands"], report["recorded"], report["replayed"]) == (9, 9, 0)
    assert report["users"] == {u: (2 if u in users[:3] else 1) for u in users}
    assert cli_json(two, "ingest", str(path), "--format", "jsonl")["replayed"] == 9  # a re-run records nothing
    with opened(two) as ml:
        for u in users:
            home = rendezvous(u, ["a", "b"])
            assert ml.shard(home).profile(u).facts["home.city"].value == f"City {u}"
            assert not ml.shard("b" if home == "a" else "a").profile(u).facts


def test_a_second_rebalance_and_a_map_without_a_serving_shard_are_refused(maps: Any, tmp_path: Path) -> None:
    two, three = maps
    with opened(two) as ml:
        ml.assert_fact("r1", "k.a", 1)
        with ml.directory.rebalance_lock():  # as if another rebalance were running
            code, _, err = cli(three, "shards", "rebalance")
            assert code == 1 and "another `memledger shards rebalance` is running" in err
        assert ml.directory.ring() == (["a", "b"], None)  # nothing started
    only_a = tmp_path / "only_a.toml"
    only_a.write_text("\n".join(line for line in two.read_text().split("[shards.b]")[0].splitlines()) + "\n")
    code, _, err = cli(only_a, "shards", "rebalance")
    assert code == 2 and "leaves out shard(s) b" in err and "removing a shard is not supported" in err


def test_search_with_also_merges_users_across_shards(maps: Any) -> None:
    two, _ = maps
    users = [f"s{i}" for i in range(10)]
    ua = next(u for u in users if rendezvous(u, ["a", "b"]) == "a")
    ub = next(u for u in users if rendezvous(u, ["a", "b"]) == "b")
    with opened(two) as ml:
        ml.assert_fact(ua, "hobby.sport", "chess", text="I play chess every weekend")
        ml.assert_fact(ub, "hobby.sport", "chess", text="I play chess in a club")
        hits = ml.search(ua, "chess", k=5, also=[ub])
        assert sorted(h.user_id for h in hits) == sorted([ua, ub])
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        alone = {u: ml.search(u, "chess", k=5)[0].score for u in (ua, ub)}
        assert {h.user_id: h.score for h in hits} == alone  # the same absolute scores as searched alone


def test_shards_are_opened_once_under_concurrent_first_use(maps: Any) -> None:
    two, _ = maps
    with opened(two) as ml:
        got: list[Any] = []
        threads = [threading.Thread(target=lambda: got.append(ml.shard("a"))) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(got) == 6 and len({id(x) for x in got}) == 1


def test_rebalance_refuses_shards_without_encryption(maps: Any) -> None:
    two, three = maps
    off = {"MEMLEDGER_ENCRYPTION": "off"}
    for i in range(6):
        assert cli(two, "assert", f"e{i}", "k.a", "1", env=off)[0] == 0
    code, _, err = cli(three, "shards", "rebalance", env=off)
    assert code == 1 and "encryption off" in err and "Traceback" not in err
    with opened(two) as ml:
        assert ml.directory.ring() == (["a", "b"], None)  # nothing switched: every user still reads its data


def test_verify_is_clean_after_moving_a_user_with_more_events_than_a_replay_batch(maps: Any) -> None:
    two, three = maps
    user = next(f"big{i}" for i in range(100) if rendezvous(f"big{i}", ["a", "b"]) != rendezvous(f"big{i}",
                                                                                                  ["a", "b", "c"]))
    with opened(two) as ml:
        for j in range(2):  # 3,000 events: the replay's batches and bulk pages end inside the copied run
            ml.record([{"user_id": user, "key": f"bulk{j}.k{i}", "value": i} for i in range(1500)])
        ml.assert_fact("other", "k.a", 1)  # an event after the user's, on the same log
        before = [r.model_dump(mode="json")["recorded_at"] for r in ml.history(user)]
    report = cli_json(three, "shards", "rebalance")
    assert [(m["user_id"], m["events"]) for m in report["moves"] if m["status"] == "moved"][:1] == [(user, 3000)]
    results = cli_json(three, "verify")
    assert all(r["ok"] for r in results), [r for r in results if not r["ok"]][:1]
    with opened(three) as ml:
        assert [r.model_dump(mode="json")["recorded_at"] for r in ml.history(user)] == before
        ml.shard("c").rebuild(["history"], blue_green=True)  # a rebuild keeps the copied times too
        assert [r.model_dump(mode="json")["recorded_at"] for r in ml.history(user)] == before
    assert all(r["ok"] for r in cli_json(three, "verify"))


def test_map_mistakes_found_by_a_fresh_user_are_bad_input(tmp_path: Path) -> None:
    cases = [
        ('[shards.a]\nschema = "x"\n', "shards.a.dsn: is missing"),
        ('[shards.a]\ndsn = "postgresql://postgres@127.0.0.1:99999/postgres"\n', "shards.a.dsn:"),
        ('[shards.a]\ndsn = "postgresql://p@127.0.0.1:5433/postgres"\n[shards.b]\n'
         'dsn = "postgresql://p@localhost:5433/postgres"\n', "shards.b: uses the same server and schema as shards.a"),
        ('[shards.a]\ndsn = "postgresql://p@127.0.0.1:5433/postgres"\n[directory]\nport = 1\n',
         "directory.port: is not a known field ([directory] has dsn"),
    ]
    for text, needle in cases:
        path = tmp_path / "m.toml"
        path.write_text(text)
        code, _, err = cli(path, "profile", "u1")
        assert code == 2 and needle in err and "Traceback" not in err, (text, err)


def test_an_unreachable_shard_is_named_with_its_table(maps: Any, tmp_path: Path) -> None:
    two, _ = maps
    broken = tmp_path / "broken.toml"
    broken.write_text(two.read_text() + '[shards.zz]\ndsn = "postgresql://postgres@127.0.0.1:1/postgres"\n')
    code, _, err = cli(broken, "shards", "status")
    assert code == 1 and "shard zz ([shards.zz] in" in err and "cannot connect" in err


def test_shard_errors_map_to_retryable_http_problems() -> None:
    from memledger.sharding.directory import UserMoving
    from memledger.servers.http import _problem_of
    from memledger.sharding.sharded import UnknownShard, UserMoved

    for exc, status, title in [(UserMoving("u", "a", "c", 10.0), 503, "User moving"),
                               (UnknownShard("c", "two.toml", ["a", "b"], "u"), 503, "Shard map out of date"),
                               (UserMoved("u", "a", "c"), 409, "User moved")]:
        r = _problem_of(exc)
        assert r is not None and r.status_code == status and json.loads(r.body)["title"] == title, exc
    assert _problem_of(UserMoving("u", "a", "c", 1.0)).headers["Retry-After"] == "2"


def test_every_verb_about_a_user_is_routed() -> None:
    """A verb added to MemoryLedger must be routed on a shard map too (else it raises AttributeError there)."""
    import inspect

    from memledger import MemoryLedger
    from memledger.sharding.sharded import USER_READS, USER_WRITES, ShardedLedger

    verbs = {name for name, fn in inspect.getmembers(MemoryLedger, inspect.isfunction)
             if not name.startswith("_") and list(inspect.signature(fn).parameters)[1:2] == ["user_id"]}
    own = {name for name in vars(ShardedLedger) if not name.startswith("_")}
    assert verbs - USER_READS - USER_WRITES - own == set()
    assert not USER_READS & USER_WRITES


def test_shard_verbs_refuse_bad_input_with_exit_2(maps: Any, tmp_path: Path) -> None:
    two, three = maps
    home = ["--home", str(tmp_path / "h")]
    for args, needle in [(["shards", "status"], "--shards: no shard map was given"),
                         (["shards", "rebalance"], "--shards: no shard map was given"),
                         (["project", "--shard", "a"], "--shard: given without a shard map")]:
        code, _, err = run_cli([*home, *args], env={"MEMLEDGER_SHARDS": None})
        assert code == 2 and needle in err and "Traceback" not in err, err
    assert not (tmp_path / "h").exists() or not (tmp_path / "h" / "events.db").exists()  # no store was made
    with opened(two) as ml:
        ml.assert_fact("g1", "k.a", 1)
        heads = ml.heads()
    for grace in ("-1", "nan", "4000"):
        code, _, err = cli(three, "shards", "rebalance", "--grace", grace)
        assert code == 2 and "--grace" in err, (grace, err)
    code, _, err = cli(two, "project", "--shard", "zz")
    assert code == 2 and "'zz' is not in the shard map" in err
    with opened(two) as ml:  # nothing moved, nothing written, the ring untouched
        assert ml.heads() == heads and ml.directory.ring() == (["a", "b"], None)
        assert ml.directory.placements() == []


def test_identity_links_hold_within_a_shard_and_are_refused_across(maps: Any) -> None:
    two, _ = maps
    with opened(two) as ml:
        users = [f"id-{i}" for i in range(12)]
        for u in users:
            ml.assert_fact(u, "preference.drink", "tea")
        by_shard: dict[str, list[str]] = {}
        for u in users:
            by_shard.setdefault(ml.shard_of(u), []).append(u)
        same = max(by_shard.values(), key=len)  # at least 6 of the 12
        r = ml.identity_link(same[0], same[1], "confirmed")
        assert r.status == "confirmed"
        assert [x.other for x in ml.identity_links(same[0]).links] == [same[1]]
        if len(by_shard) > 1:
            a, b = ([u for u in us if u not in same[:2]][0] for us in list(by_shard.values())[:2])
            from ledger.errors import BadInput

            with pytest.raises(BadInput) as exc:
                ml.identity_link(a, b, "may_be")
            assert exc.value.field == "other" and "different shards" in exc.value.problem
            assert ml.identity_links(a).links == []
