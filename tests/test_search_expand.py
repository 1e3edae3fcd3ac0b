"""Recall that follows the links (``search --expand N``): the memories of the people a query leads to along the
user's relations join the hits with their path, ranked by score; a labelled relation the read does not allow is
never walked; bad input is refused. Through the CLI on SQLite and PostgreSQL, and the HTTP and MCP faces' fields."""

from __future__ import annotations

from typing import Any

import pytest

FILLER = ["I like green tea", "I work as a nurse", "My cat is called Miso", "I play chess on Sundays",
          "I live in Lisbon", "I am allergic to peanuts", "My favourite colour is teal", "I drive a blue Golf"]


def seed(cli: Any) -> None:
    cli.env["MEMLEDGER_EMBEDDER"] = "hash:384"  # the hashing double, wide enough that unrelated texts do not collide
    for text in FILLER:
        assert cli("remember", "u1", text)[0] == 0
    assert cli("remember", "u1", "My sister Anna lives in Berlin")[0] == 0
    assert cli("relate", "u1", "husband", "Mark", "--of", "Anna")[0] == 0
    assert cli("relate", "u1", "works_at", "Siemens", "--of", "Mark")[0] == 0
    assert cli("remember", "u1", "Mark is a carpenter")[0] == 0
    assert cli("remember", "u1", "Siemens opened an office in Porto")[0] == 0


def found(cli: Any, query: str, *extra: str) -> dict[str, dict[str, Any]]:
    return {h["text"]: h for h in cli.json("search", "u1", query, "-k", "3", "--min-score", "0.1", *extra)}


def test_expand_follows_the_relations_to_the_people_the_query_leads_to(cli: Any) -> None:
    seed(cli)
    query = "what job does my sister's husband do?"
    plain = found(cli, query)
    assert "Mark is a carpenter" not in plain and all("path" not in h for h in plain.values())

    one = found(cli, query, "--expand", "1")
    hit = one["Mark is a carpenter"]
    assert hit["path"] == "sister Anna → husband Mark"
    assert hit["key"].startswith("memory.") and hit["status"] == "current"
    assert [h["rank"] for h in one.values()] == list(range(1, len(one) + 1))
    scores = [h["score"] for h in one.values()]
    assert scores == sorted(scores, reverse=True)
    # the plain hits that stay keep their score
    for text, h in one.items():
        if text in plain:
            assert h["score"] == plain[text]["score"] and "path" not in h

    # a hit brought by a person is about them, and no walk passes through the user to their other ties
    assert cli("relate", "u1", "wife", "Lena")[0] == 0
    assert cli("remember", "u1", "Lena loves the opera")[0] == 0
    wide = cli.json("search", "u1", query, "-k", "10", "--expand", "3")
    assert all("self" not in h.get("path", "") and "Lena" not in h.get("path", "") for h in wide)
    for h in wide:
        if "path" in h:
            name = h["path"].split(" ")[-1]
            assert name in h["text"] or h["key"].startswith("family.sister."), h

    # one hop reaches Mark, not Mark's employer; two hops do
    assert "Siemens opened an office in Porto" not in found(cli, "where is my sister's husband's company based?",
                                                            "--expand", "1")
    two = found(cli, "where is my sister's husband's company based?", "--expand", "2")
    assert two["Siemens opened an office in Porto"]["path"] == "sister Anna → husband Mark → works_at Siemens"

    # a name in the query is a seed too; the text table names the path
    assert found(cli, "what does Anna's husband do", "--expand", "1")["Mark is a carpenter"]["path"] == (
        "Anna → husband Mark")
    code, out, _ = cli("search", "u1", query, "-k", "3", "--expand", "1", "--min-score", "0.1")
    assert code == 0 and "via" in out and "husband Mark" in out


def test_expand_never_walks_a_labelled_relation_the_read_does_not_allow(cli: Any) -> None:
    cli.env["MEMLEDGER_EMBEDDER"] = "hash:384"
    for text in FILLER:
        cli("remember", "u1", text)
    assert cli("relate", "u1", "doctor_of", "Dr. Lee")[0] == 0
    assert cli("relate", "u1", "works_at", "Riverside Clinic", "--of", "Dr. Lee")[0] == 0
    assert cli("remember", "u1", "Riverside Clinic shuts at noon on Fridays")[0] == 0
    query = "when does my doctor's practice close?"
    assert all("path" not in h for h in cli.json("search", "u1", query, "-k", "3", "--expand", "2",
                                                 "--min-score", "0.1"))
    hits = cli.json("search", "u1", query, "-k", "3", "--expand", "2", "--allow-sensitive", "health",
                    "--purpose", "book a visit", "--min-score", "0.1")
    assert {h["text"]: h.get("path") for h in hits}["Riverside Clinic shuts at noon on Fridays"] == (
        "doctor_of Dr. Lee → works_at Riverside Clinic")


def test_expand_with_nobody_linked_is_the_plain_search(cli: Any) -> None:
    for text in FILLER:
        cli("remember", "u1", text)
    assert cli.json("search", "u1", "what do I drink", "--expand", "3") == cli.json("search", "u1", "what do I drink")


@pytest.mark.parametrize("value", ["4", "-1", "two"])
def test_a_bad_expand_is_refused_with_exit_2(cli: Any, value: str) -> None:
    code, out, err = cli("search", "u1", "tea", "--expand", value)
    assert code == 2 and "expand" in err and "Traceback" not in err


def test_every_face_takes_expand() -> None:
    from fastapi.testclient import TestClient

    from ledger.errors import BadInput
    from memledger.expansion import check_expand
    from memledger.servers.models import SearchBody

    assert SearchBody(query="q", expand=2).expand == 2
    with pytest.raises(Exception):
        SearchBody(query="q", expand=4)
    for bad in (True, 4, "1", -1):
        with pytest.raises(BadInput):
            check_expand(bad)
    assert TestClient  # the HTTP and MCP parameters are compared with the verb's in tests/test_face_parity.py


def test_context_shows_the_people_that_matter_to_the_query(cli: Any) -> None:
    cli.env["MEMLEDGER_EMBEDDER"] = "hash:384"
    assert "people" not in [s["name"] for s in cli.json("context", "u1")["sections"]]  # nobody linked: no section
    assert cli("remember", "u1", "My sister Anna lives in Berlin", "--observed-at", "2024-01-05T09:00:00Z")[0] == 0
    assert cli("relate", "u1", "husband", "Mark", "--of", "Anna", "--valid-from", "2019-06-01T00:00:00Z")[0] == 0
    assert cli("relate", "u1", "manager_of", "Omar", "--valid-from", "2024-02-01T00:00:00Z")[0] == 0
    assert cli("relate", "u1", "doctor_of", "Dr. Lee")[0] == 0

    def people(*extra: str) -> list[str]:
        doc = cli.json("context", "u1", *extra)
        [section] = [s for s in doc["sections"] if s["name"] == "people"]
        assert "## People" in doc["text"]
        return section["lines"]

    # the user's own ties, newest first; the labelled one stays out
    assert people() == ["- Omar is the user's manager (since 2024-02-01, the user said)",
                        "- Anna is the user's sister (since 2024-01-05, the user said)"]
    # a query naming the sister: her ties and her own relations
    assert people("--query", "what does my sister's husband do?") == [
        "- Anna is the user's sister (since 2024-01-05, the user said)",
        "- Mark is Anna's husband (since 2019-06-01, the user said)"]
    assert not any("Lee" in line for line in people("--query", "my doctor"))
