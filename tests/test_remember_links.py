"""``remember`` and the relation layer: a statement naming someone by their tie links them as an entity ("my sister
Anna"), a later statement opening with their name revises what was said of them ("Anna moved to Munich"), two
people of one role keep their own slots, and what is not certain (a shared name, a tie someone else holds) is
reported and never guessed. Through the CLI on SQLite and PostgreSQL, plus the reading rules on their own."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from ledger.mentions import Known, mentions, read
from memledger import MemoryLedger


def remember(cli: Any, text: str, *extra: str) -> dict[str, Any]:
    return cli.json("remember", "u1", text, *extra)


def links(r: dict[str, Any]) -> list[tuple[str, str, str | None]]:
    return [(e["name"], e["effect"], e["relation_type"]) for e in r["entities"]]


def current(cli: Any) -> dict[str, str]:
    doc = cli.json("profile", "u1")
    return {key: f["text"] for key, f in doc["facts"].items()}


def ties(cli: Any) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for e in cli.json("relations", "u1")["relations"]:
        out.setdefault(e["relation_type"], []).append(e["entity"])
    return out


def test_a_named_sister_is_linked_and_a_statement_opening_with_her_name_revises_her_city(cli: Any) -> None:
    r = remember(cli, "My sister Anna lives in Berlin", "--observed-at", "2024-01-05T09:00:00Z")
    assert (r["decision"], r["key"]) == ("new", "family.sister.residence.city")
    assert links(r) == [("Anna", "created", "sister")]
    anna = r["entities"][0]["entity_id"]
    assert r["entities"][0]["key"] == f"self.sister.{anna}" and r["entities"][0]["version"] == 1
    assert ties(cli) == {"sister": ["Anna"]}

    r = remember(cli, "Anna moved to Munich", "--observed-at", "2024-06-01T09:00:00Z")
    assert (r["decision"], r["key"], r["version"]) == ("supersede", "family.sister.residence.city", 2)
    assert links(r) == [("Anna", "about", "sister")] and r["entities"][0]["entity_id"] == anna
    facts = current(cli)
    assert facts["family.sister.residence.city"] == "Anna moved to Munich"
    assert not any("Berlin" in t for t in facts.values())
    # the user's own city is another slot: untouched
    r = remember(cli, "I live in Lisbon")
    assert (r["decision"], r["key"], r["entities"]) == ("new", "residence.city", [])
    assert current(cli)["family.sister.residence.city"] == "Anna moved to Munich"

    # "why": the statement's evidence names the link, and the tie's version carries the sentence that made it
    versions = cli.json("history", "u1", "family.sister.residence.city")
    assert versions[0]["reason"].endswith(f"entities: Anna created {anna} as sister")
    assert versions[1]["reason"].endswith(f"entities: Anna about {anna} as sister")
    [edge] = cli.json("relations", "u1")["relations"]
    assert edge["source"] == "user_statement" and edge["valid_from"] == "2024-01-05T09:00:00Z"


def test_two_sisters_keep_their_own_slots(cli: Any) -> None:
    remember(cli, "My sister Anna lives in Berlin")
    r = remember(cli, "My sister Beth lives in Paris")
    assert (r["decision"], r["key"]) == ("new", "family.sister-beth.residence.city")
    r = remember(cli, "Beth moved to Rome")
    assert (r["decision"], r["key"]) == ("supersede", "family.sister-beth.residence.city")
    facts = current(cli)
    assert facts["family.sister.residence.city"] == "My sister Anna lives in Berlin"
    assert facts["family.sister-beth.residence.city"] == "Beth moved to Rome"
    assert sorted(ties(cli)["sister"]) == ["Anna", "Beth"]


def test_a_person_not_linked_keeps_out_of_the_first_persons_slots(cli: Any) -> None:
    remember(cli, "My sister Anna lives in Berlin")
    tom = remember(cli, "My friend Tom likes jazz music")["key"]
    assert tom == "family.friend.preference.music"
    r = remember(cli, "My friend Anna likes jazz")  # another Anna, or the same? not linked, and not Tom's
    assert links(r) == [("Anna", "ambiguous", "friend")]
    assert r["key"] == "family.friend-anna.preference.music"
    assert current(cli)[tom] == "My friend Tom likes jazz music"


def test_names_in_any_alphabet_keep_their_own_slots(cli: Any) -> None:
    assert remember(cli, "My brother Élodie lives in Lyon")["key"] == "family.brother.residence.city"
    r = remember(cli, "My brother Zoë lives in Oslo")
    assert (r["decision"], r["key"]) == ("new", "family.brother-zoe.residence.city")
    assert current(cli)["family.brother.residence.city"] == "My brother Élodie lives in Lyon"


def test_chinese_a_wife_named_once_is_the_wife_of_later_statements(cli: Any) -> None:
    r = remember(cli, "我老婆小丽喜欢喝茶")
    assert (r["key"], links(r)) == ("family.wife.preference.drink", [("小丽", "created", "wife")])
    r = remember(cli, "小丽最近改喝咖啡了")
    assert (r["decision"], r["key"]) == ("supersede", "family.wife.preference.drink")
    assert links(r) == [("小丽", "about", "wife")]
    # the same person said by the role alone lands in the same slots
    r = remember(cli, "我老婆现在只喝白开水")
    assert (r["decision"], r["key"]) == ("supersede", "family.wife.preference.drink")
    assert ties(cli) == {"wife": ["小丽"]}


def test_what_is_not_certain_is_reported_and_never_guessed(cli: Any) -> None:
    remember(cli, "My sister Anna lives in Berlin")
    before = ties(cli)
    # another "Anna" by another tie: another person, or the same? nothing is linked
    r = remember(cli, "My colleague Anna is vegetarian")
    assert links(r) == [("Anna", "ambiguous", "colleague")]
    assert "was not linked as colleague" in r["explanation"]
    assert ties(cli) == before
    # a one-person tie someone else holds is not moved by a passing name
    remember(cli, "My wife Maria likes jazz")
    r = remember(cli, "my wife's name is Lena")
    assert links(r) == [("Lena", "not_linked", "wife")]
    assert ties(cli)["wife"] == ["Maria"]

    # two people answer to "Anna": a statement opening with it is a conflict to confirm, placed under neither
    code, out, err = cli("relate", "u1", "friend", "Anna Kowalski", "--alias", "Anna")
    assert code == 0, err
    r = remember(cli, "Anna moved to Munich")
    assert r["decision"] == "conflict" and r["key"].startswith("memory.")
    [amb] = r["entities"]
    assert (amb["effect"], amb["entity_id"], len(amb["candidates"])) == ("ambiguous", None, 2)
    assert current(cli)["family.sister.residence.city"] == "My sister Anna lives in Berlin"


def test_an_agents_note_in_the_third_person_names_the_users_people(cli: Any) -> None:
    # "Jon's sister Anna ..." written of user Jon is about the sister: never Jon's own city
    assert cli.json("remember", "Jon", "Jon lives in Paris")["key"] == "residence.city"
    r = cli.json("remember", "Jon", "Jon's sister Anna lives in Berlin", "--source", "agent_inference")
    assert (r["decision"], r["key"]) == ("new", "family.sister.residence.city")
    assert [(e["name"], e["effect"], e["relation_type"]) for e in r["entities"]] == [("Anna", "created", "sister")]
    r = cli.json("remember", "Jon", "The user's doctor's phone number is 555 0101")
    assert r["key"] == "family.doctor.contact.phone"
    facts = cli.json("profile", "Jon")["facts"]
    assert facts["residence.city"]["text"] == "Jon lives in Paris"


def test_a_retry_links_once_and_concurrent_statements_create_one_person(store_args: dict[str, Any]) -> None:
    with MemoryLedger(**store_args) as ml:
        a = ml.remember("u1", "My brother Tom lives in Leeds", idempotency_key="k1")
        b = ml.remember("u1", "My brother Tom lives in Leeds", idempotency_key="k1")
        assert (a.event_id, [e.effect for e in a.entities]) == (b.event_id, ["created"])
        errors: list[BaseException] = []

        def say(text: str) -> None:
            try:
                ml.remember("u1", text)
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=say, args=(f"My friend Sara likes {x}",)) for x in ("tea", "chess")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        names = sorted(e.name for e in ml.entities("u1").entities)
        assert names == ["Sara", "Tom"]


@pytest.mark.parametrize("text, expected", [
    ("My sister Anna lives in Berlin", [("sister", "Anna")]),
    ("Omar, my manager, prefers email", [("manager_of", "Omar")]),
    ("my boss Omar's phone is 555-1234", [("manager_of", "Omar")]),
    ("my wife's name is Maria", [("wife", "Maria")]),
    ("my son is called Leo", [("son", "Leo")]),
    ("my doctor is Dr. Lee", [("doctor_of", "Dr. Lee")]),
    ("Dr. O'Brien, my dentist, moved", [("dentist_of", "Dr. O'Brien")]),
    ("My older brother Tom Smith is a nurse", [("brother", "Tom Smith")]),
    ("I had lunch with my friend Tom and Sara", [("friend", "Tom")]),
    ("My brother Élodie lives in Lyon", [("brother", "Élodie")]),
    ("my friend Łukasz moved to Gdańsk", [("friend", "Łukasz")]),
    ("我老婆小丽喜欢喝茶", [("wife", "小丽")]),
    ("我同事叫王磊，人很好", [("colleague", "王磊")]),
    ("我的朋友阿强搬去深圳了", [("friend", "阿强")]),
    # no name: a capitalised word that is not one, a group, a word after the role
    ("my sister In Berlin is nice", []),
    ("My wife is French", []),
    ("my parents Anna and Jo", []),
    ("我妹妹小学毕业了", []),
    ("我妈妈最近在学游泳", []),
    ("My friend said Monday works", []),
])
def test_mentions(text: str, expected: list[tuple[str, str]]) -> None:
    assert [(m.relation_type, m.name) for m in mentions(text)] == expected


ANNA = Known("e1", "Anna", (), ("sister",), ("sister",), 1)
BETH = Known("e2", "Beth", (), ("sister",), ("sister",), 2)
XIAOLI = Known("e3", "小丽", (), ("wife",), ("wife",), 3)


@pytest.mark.parametrize("text, slot_key, about", [
    ("Anna moved to Munich", "family.sister.residence.city", "Anna"),
    ("Oh, Anna moved to Munich", "family.sister.residence.city", "Anna"),
    ("Beth moved to Paris", "family.sister-beth.residence.city", "Beth"),
    ("Anna's phone number is 555 0101", "family.sister.contact.phone", "Anna"),
    ("小丽最近在学游泳", "family.wife.hobby", "小丽"),
    ("小丽的电话是13800001111", "family.wife.contact.phone", "小丽"),
    # the user is a subject too, or the name is another word: read as it stands
    ("Anna and I went hiking", "hobby", None),
    ("小丽和我去爬山", "hobby", None),
    ("Annabel moved to Munich", None, None),
    # the clause naming her is what is said of her; the user comes in a clause of their own
    ("Anna just moved to Munich for her boyfriend's job, so my trip to see her will look different",
     "family.sister.residence.city", "Anna"),
])
def test_a_statement_opening_with_a_linked_name_is_about_that_person(text: str, slot_key: str | None,
                                                                    about: str | None) -> None:
    rd = read(text, [ANNA, BETH, XIAOLI], user_name="u1")
    assert (rd.typing.slot_key, rd.about and rd.about.name) == (slot_key, about)


def test_about_files_a_relatives_statement_under_them_and_leaves_the_users_own(cli: Any) -> None:
    remember(cli, "My sister Anna lives in Berlin")
    remember(cli, "I like green tea")
    r = remember(cli, "I like black coffee", "--about", "Anna")
    assert (r["decision"], r["key"]) == ("new", "family.sister.preference.drink")
    assert links(r) == [("Anna", "about", "sister")]
    r = remember(cli, "I moved to Munich", "--about", "anna")  # names fold case
    assert (r["decision"], r["key"]) == ("supersede", "family.sister.residence.city")
    # the people a relative names are theirs; what they say of them stays under the relative
    r = remember(cli, "My husband Mark is a carpenter", "--about", "Anna")
    assert r["key"].startswith("family.sister.memory.")
    assert links(r)[0] == ("Mark", "created", "husband")
    [edge] = [e for e in cli.json("relations", "u1", "--hops", "2")["relations"] if e["entity"] == "Mark"]
    assert (edge["subject"], edge["relation_type"], edge["hops"]) == ("Anna", "husband", 2)
    facts = current(cli)
    assert facts["preference.drink"] == "I like green tea"
    assert facts["family.sister.preference.drink"] == "I like black coffee"
    # the agent reads whose each of them is: never "I like black coffee" as the user's
    text = cli.json("context", "u1")["text"]
    assert "- [sister Anna] I like black coffee (" in text
    assert "- [sister Anna] My husband Mark is a carpenter (" in text
    assert "- I like green tea (" in text
    assert not any(k.startswith(("residence.", "family.husband.")) for k in facts)

    # nothing of the user's own is acted on by what a relative said (a name of the user's wife stays)
    remember(cli, "my wife's name is Lena")
    r = remember(cli, "My wife is French", "--about", "Anna")
    assert r["key"].startswith("family.sister.") and all(not m["key"].startswith("memory.") or m["relation"] != "target"
                                                          for m in r["related"])
    assert "my wife's name is Lena" in current(cli).values()

    before = current(cli)
    for args, field in ((("--about", "Bob"), "about"), (("--about", "Anna", "--key", "x.y"), "about"),
                        (("--about", " "), "about")):
        code, _, err = cli("remember", "u1", "I like tea", *args)
        assert code == 2 and err.startswith(f"error: {field}:"), err
    assert current(cli) == before


def test_about_through_http_and_mcp(store_args: dict[str, Any]) -> None:
    import asyncio

    from fastapi.testclient import TestClient

    from memledger.servers.http import create_app
    from memledger.servers.keys import APIKeyStore
    from memledger.servers.mcp import build_mcp
    from memledger.servers.ops import Service

    with MemoryLedger(**store_args) as ml:
        ml.remember("u1", "My brother Tom lives in Leeds")
        secret = APIKeyStore(ml).create(["u1"]).secret
        with TestClient(create_app(Service(ml), mcp=False), headers={"Authorization": f"Bearer {secret}"}) as http:
            r = http.post("/v1/users/u1/memories", json={"text": "I play the drums", "about": "Tom"})
            assert r.status_code == 201, r.text
            assert r.json()["key"].startswith("family.brother.hobby")
            bad = http.post("/v1/users/u1/memories", json={"text": "I play the drums", "about": "Zed"})
            assert bad.status_code == 422 and bad.json()["field"] == "about"

        async def run() -> Any:
            from mcp import Client

            async with Client(build_mcp(Service(ml), user="u1")) as c:
                return await c.call_tool("remember", {"text": "I moved to York", "about": "Tom"})

        out = asyncio.run(run())
        assert not out.is_error and out.structured_content["key"] == "family.brother.residence.city"
        assert out.structured_content["decision"] == "supersede"


def test_a_users_own_change_never_acts_on_what_a_relative_said(cli: Any) -> None:
    remember(cli, "My sister Beth lives in Paris")
    assert remember(cli, "I like black coffee", "--about", "Beth")["key"] == "family.sister.preference.drink"
    remember(cli, "Beth's favourite band is Queen")
    for text in ("I quit coffee", "I switched to green tea", "My favourite band is Muse now"):
        r = remember(cli, text)
        assert not r["key"].startswith("family.sister."), r
        assert all(e["key"] is None or not e["key"].startswith("family.sister.") for e in r["extra"])
    facts = current(cli)
    assert facts["family.sister.preference.drink"] == "I like black coffee"
    assert any(t == "Beth's favourite band is Queen" for t in facts.values())


def test_a_later_clause_keeps_its_values_and_its_marks() -> None:
    from ledger.mentions import read as read_of

    lily = Known("e9", "Lily", (), ("daughter",), ("daughter",), 1)
    rd = read_of("Lily's piano lessons are with Mr. Alvarez — I got mixed up before, Mrs. Henderson was her teacher",
                 [lily], user_name="u1")
    # the clause names her; the correction said after it still marks the statement, and no value is cut away
    assert rd.about is lily and rd.typing.correction and "Alvarez" in rd.text and "Henderson" in rd.text
    rd = read_of("Lily starts at Oakfield Primary, and the bus is the 42", [lily], user_name="u1")
    assert rd.full_text is not None and "42" in rd.full_text


def test_nothing_said_after_the_clause_naming_the_person_is_lost(minilm_ledger: Any) -> None:
    ml = minilm_ledger
    ml.remember("lily", "My daughter Lily's piano teacher is Mrs. Henderson.")
    r = ml.remember("lily", "Lily's piano lessons are with Mr. Alvarez — I got mixed up before, Mrs. Henderson was "
                            "her teacher two years ago.")
    assert r.decision != "reaffirm"
    texts = [f.text for f in ml.profile("lily").facts.values()]
    assert any("Alvarez" in (t or "") for t in texts)
