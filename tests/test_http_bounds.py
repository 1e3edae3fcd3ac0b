"""Bounded requests on the HTTP API: size limits refused at once with a 4xx, CPU-heavy work off the event loop."""

from __future__ import annotations

import statistics
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from memledger import MemoryLedger
from memledger.search import MAX_QUERY
from memledger.servers.http import MAX_BODY
from tests.serve_util import Server, create_key

WORDS = "tea coffee Lyon Berlin chess violin dentist locker rent train bike garden piano sister Monday".split()


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Any:
    home = tmp_path_factory.mktemp("bounds") / "h"
    with MemoryLedger(home=home) as ml:
        for start in range(0, 5000, 2000):  # a user big enough that one maximal search takes well over 100 ms
            ml.record([{"user_id": "u1", "key": f"memory.n{i}", "value": f"note {i}",
                        "text": " ".join(WORDS[(i * 7 + j) % len(WORDS)] for j in range(12)) + f" number {i}"}
                       for i in range(start, min(start + 2000, 5000))])
    key = create_key(home, "--user", "u1")
    server = Server(home, "http")
    server.wait_ready()
    client = httpx.Client(base_url=server.base, timeout=60, headers={"Authorization": f"Bearer {key}"})
    yield client
    client.close()
    server.stop()


def test_a_query_over_the_limit_is_refused_naming_the_field(api: httpx.Client) -> None:
    for r in (api.post("/v1/users/u1/search", json={"query": "x" * (MAX_QUERY + 1)}),
              api.get("/v1/users/u1/search", params={"query": "x" * (MAX_QUERY + 1)}),
              api.post("/v1/users/u1/context", json={"query": "x" * (MAX_QUERY + 1)})):
        assert r.status_code == 422, r.text
        assert r.json()["field"] == "query" and r.json()["fix"] == f"shorten it to at most {MAX_QUERY} characters"


def test_a_body_over_the_limit_is_refused_before_it_is_read(api: httpx.Client) -> None:
    r = api.post("/v1/users/u1/search", content=b'{"query": "' + b"x" * (MAX_BODY + 10) + b'"}',
                 headers={"Content-Type": "application/json"})
    assert r.status_code == 413 and r.json()["field"] == "body"
    assert api.get("/v1/health").status_code == 200


def test_health_answers_within_100_ms_while_maximal_searches_run(api: httpx.Client) -> None:
    query = " ".join(WORDS[i % len(WORDS)] for i in range(MAX_QUERY // 8))[:MAX_QUERY]
    assert api.post("/v1/users/u1/search", json={"query": query, "k": 1000}).status_code == 200
    stop = threading.Event()
    searches = {"n": 0}

    def search_loop() -> None:
        with httpx.Client(base_url=str(api.base_url), headers=dict(api.headers), timeout=60) as c:
            while not stop.is_set():
                assert c.post("/v1/users/u1/search", json={"query": query, "k": 1000}).status_code == 200
                searches["n"] += 1

    t = threading.Thread(target=search_loop)
    t.start()
    try:
        time.sleep(0.5)
        took = []
        for _ in range(15):
            start = time.perf_counter()
            assert api.get("/v1/health").status_code == 200
            took.append(time.perf_counter() - start)
            time.sleep(0.05)
    finally:
        stop.set()
        t.join()
    assert searches["n"] >= 1
    assert statistics.median(took) < 0.1, took
    assert max(took) < 0.5, took


def test_a_chunked_body_over_the_limit_is_refused_with_413(api: httpx.Client) -> None:
    def chunks():
        yield b'{"query": "'
        for _ in range(9):
            yield b"x" * (1024 * 1024)
        yield b'"}'

    r = api.post("/v1/users/u1/search", content=chunks(), headers={"Content-Type": "application/json"})
    assert r.status_code == 413 and r.json()["field"] == "body"

    def small():
        yield b'{"query": "tea"}'

    r = api.post("/v1/users/u1/search", content=small(), headers={"Content-Type": "application/json"})
    assert r.status_code == 200 and r.json()


def test_a_message_or_summary_over_the_text_limit_is_refused_naming_text(api: httpx.Client) -> None:
    from ledger.schemas import MAX_TEXT

    long = "x" * (MAX_TEXT + 1)
    r = api.post("/v1/users/u1/sessions/s1/messages", json={"role": "user", "message_id": "m1", "text": long})
    assert r.status_code == 422 and r.json()["field"] == "text", r.text
    r = api.post("/v1/users/u1/sessions/s1/summaries", json={"text": long})
    assert r.status_code == 422 and r.json()["field"] == "text", r.text


@pytest.mark.parametrize("route,body,field", [
    ("search", {"query": "tea", "k": "5"}, "k"), ("search", {"query": "tea", "k": 5.5}, "k"),
    ("context", {"budget": "100"}, "budget"), ("context", {"memories": "3"}, "memories"),
])
def test_a_whole_number_sent_as_a_string_is_refused_naming_the_field(api: httpx.Client, route: str, body: dict,
                                                                     field: str) -> None:
    r = api.post(f"/v1/users/u1/{route}", json=body)
    assert r.status_code == 422 and r.json()["field"] == field, r.text
    good = {"k": 5, "budget": 500, "memories": 3}[field]
    assert api.post(f"/v1/users/u1/{route}", json={**body, field: good}).status_code == 200
    assert api.get(f"/v1/users/u1/{route}?{field}={good}" + ("&query=tea" if route == "search" else "")
                   ).status_code == 200


def test_every_number_of_a_write_body_is_a_json_number_too(api: httpx.Client) -> None:
    r = api.post("/v1/users/u1/facts/preference.drink", json={"value": "tea", "confidence": "0.9"})
    assert r.status_code == 422 and r.json()["field"] == "confidence", r.text
    r = api.post("/v1/users/u1/search", json={"query": "tea", "min_score": "0.3"})
    assert r.status_code == 422 and r.json()["field"] == "min_score", r.text
    assert api.post("/v1/users/u1/facts/preference.drink", json={"value": "tea", "confidence": 0.9}).status_code == 201


@pytest.mark.parametrize("now", ["0001-01-01T00:00:00%2B10:00", "2024-01-01T00:00:00", "garbage"])
def test_a_bad_resume_now_names_now(api: httpx.Client, now: str) -> None:
    r = api.get(f"/v1/users/u1/resume?now={now}")
    assert r.status_code == 422 and r.json()["field"] == "now", r.text
