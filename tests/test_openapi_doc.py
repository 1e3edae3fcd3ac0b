"""``/openapi.json`` lists, on every route, the problem+json statuses it answers with, and ``/docs`` and ``/redoc``
load nothing from another host (memledger/servers/openapi_doc.py; docs/interfaces.md)."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from memledger import MemoryLedger
from memledger.servers.http import OPEN_PATHS, create_app
from memledger.servers.keys import APIKeyStore
from memledger.servers.ops import Service

BASE = "http://127.0.0.1:8000"


@pytest.fixture
def served(fresh_ledger: MemoryLedger):
    fresh_ledger.remember("u1", "I drink tea", observed_at="2024-01-01T00:00:00Z")
    fresh_ledger.remember("gone", "I live in Oslo", observed_at="2024-01-01T00:00:00Z")
    keys = APIKeyStore(fresh_ledger)
    plain = keys.create(["u1", "gone"]).secret
    admin = keys.create([], admin=True).secret
    fresh_ledger.erase("gone")
    with TestClient(create_app(Service(fresh_ledger)), base_url=BASE) as http:
        yield http, {"Authorization": f"Bearer {plain}"}, {"Authorization": f"Bearer {admin}"}


def test_every_keyed_route_lists_its_problem_statuses(served):
    http, _, _ = served
    doc = http.get("/openapi.json").json()
    assert "Problem" in doc["components"]["schemas"] and "HTTPValidationError" not in doc["components"]["schemas"]
    ops = [(p, m, op) for p, item in doc["paths"].items() for m, op in item.items()]
    assert len(ops) > 30
    for path, method, op in ops:
        listed = {int(s) for s in op["responses"] if s.startswith(("4", "5"))}
        if path in OPEN_PATHS:
            assert listed == set(), path
            continue
        assert {401, 403, 409, 422, 503} <= listed, (method, path, listed)
        assert ("{user_id}" in path or "{agent_id}" in path) == (410 in listed), (method, path)
        assert (method in ("post", "put", "patch")) == (413 in listed), (method, path)
        for status in listed:
            content = op["responses"][str(status)]["content"]
            assert content == {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}


def test_the_statuses_real_requests_answer_are_the_listed_ones(served):
    http, plain, admin = served
    doc = http.get("/openapi.json").json()

    def listed(path: str, method: str) -> set[int]:
        return {int(s) for s in doc["paths"][path][method]["responses"]}

    cases = [
        ("/v1/users/{user_id}/memories", "post", "/v1/users/u1/memories", {}, {"text": "x"}, 401),
        ("/v1/users/{user_id}/memories", "post", "/v1/users/u1/memories", plain, {"txt": "x"}, 422),
        ("/v1/users/{user_id}/memories", "post", "/v1/users/u9/memories", plain, {"text": "x"}, 403),
        ("/v1/users/{user_id}/profile", "get", "/v1/users/gone/profile", plain, None, 410),
        ("/v1/users/{user_id}/memories", "post", "/v1/users/gone/memories", admin, {"text": "x"}, 410),
        ("/v1/users/{user_id}/profile", "get", "/v1/users/u1/profile?after=999999", admin, None, 422),
        ("/v1/users/{user_id}/search", "post", "/v1/users/u1/search", plain, {"query": ""}, 422),
    ]
    for template, method, url, headers, body, want in cases:
        r = http.request(method.upper(), url, headers=headers, json=body)
        assert r.status_code == want, (url, r.status_code, r.text)
        assert r.status_code in listed(template, method), (template, r.status_code)
        assert r.headers["content-type"].startswith("application/problem+json")
        assert {"field", "problem", "fix"} <= set(r.json())


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_the_docs_pages_load_nothing_from_another_host(served, page):
    http, _, _ = served
    r = http.get(page)
    assert r.status_code == 200
    urls = re.findall(r"""(?:src|href|url)\s*[=:(]\s*['"]([^'"]+)['"]""", r.text)
    assert urls, r.text[:500]
    assert not [u for u in urls if re.match(r"(?:https?:)?//", u)], urls  # every asset from this server
    for u in urls:
        if u.startswith("/docs/static/"):
            asset = http.get(u)  # without a key: the docs' assets are public, as the pages are
            assert asset.status_code == 200 and len(asset.content) > 1000, u
