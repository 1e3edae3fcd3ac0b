"""Entities and relations: the manager on a date across a supersede and a correction (both time axes, through the
CLI), walks of 1-3 hops, aliases, the fact policy on relations (contest, multi-valued correction, retraction with
valid_to), erasure, the health label withheld and disclosed, and bad input refused with nothing written. Every test
runs on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from typing import Any

import pytest

from ledger.errors import BadInput
from memledger import MemoryLedger

UTC = timezone.utc


def now_iso() -> str:
    t = datetime.now(UTC).isoformat()
    time.sleep(0.01)  # the next event is recorded strictly later
    return t


def manager(cli: Any, *extra: str) -> list[str]:
    doc = cli.json("relations", "u1", *extra)
    return [e["entity"] for e in doc["relations"] if e["relation_type"] == "manager_of"]


def test_who_was_the_manager_on_a_date_across_a_supersede_and_a_correction(cli: Any) -> None:
    on = ("--valid-at", "2024-03-01T00:00:00Z")
    r = cli.json("relate", "u1", "manager_of", "Dana", "--valid-from", "2023-01-01T00:00:00Z",
                 "--observed-at", "2023-01-02T09:00:00Z")
    assert (r["effect"], r["entity"], r["key"], r["version"]) == ("new", "Dana", "self.manager_of", 1)
    assert manager(cli, *on) == ["Dana"]
    t1 = now_iso()

    # "Dana left, Omar runs my team now" -- since 1 February: Dana's valid range closes there
    r = cli.json("relate", "u1", "manager_of", "Omar", "--valid-from", "2024-02-01T00:00:00Z",
                 "--observed-at", "2024-02-02T09:00:00Z")
    assert (r["effect"], r["version"]) == ("supersede", 2)
    assert manager(cli, *on) == ["Omar"]
    assert manager(cli, "--valid-at", "2023-06-01T00:00:00Z") == ["Dana"]
    assert manager(cli, *on, "--as-of", t1) == ["Dana"]  # as the ledger believed before the supersede
    t2 = now_iso()

    # "sorry, not Omar: Priya" -- Omar was never the manager; Priya takes his whole range
    r = cli.json("correct-relation", "u1", "manager_of", "Priya", "--was", "Omar", "--reason", "misheard")
    assert (r["kind"], r["effect"], r["version"]) == ("corrected", "correct", 3)
    doc = cli.json("relations", "u1", *on)
    [edge] = [e for e in doc["relations"] if e["relation_type"] == "manager_of"]
    assert (edge["entity"], edge["valid_from"], edge["valid_to"], edge["status"]) == (
        "Priya", "2024-02-01T00:00:00Z", None, "current")
    assert manager(cli, *on, "--as-of", t2) == ["Omar"]
    assert manager(cli, *on, "--as-of", t1) == ["Dana"]
    assert manager(cli, "--valid-at", "2023-06-01T00:00:00Z") == ["Dana"]
    assert manager(cli, "--valid-at", "2022-06-01T00:00:00Z") == []

    # the stream's history keeps the misreport: Omar's range is empty, so no instant finds him
    code, out, err = cli("relations", "u1", "--valid-at", "2024-03-01T00:00:00Z")
    assert code == 0 and "Priya" in out and "Omar" not in out, err


def test_walks_follow_relations_up_to_three_hops_and_aliases_name_one_entity(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    anna = ml.relate("u1", "sister", "Anna", aliases=["my sister", "我姐姐"], observed_at="2024-01-05T00:00:00Z")
    assert anna.created == [anna.entity_id]
    berlin = ml.relate("u1", "lives_in", "Berlin", of="my sister", observed_at="2024-01-05T00:00:00Z")
    assert berlin.subject_id == anna.entity_id and berlin.key == f"{anna.entity_id}.lives_in"
    ml.relate("u1", "works_at", "Charité", of="我姐姐", observed_at="2024-01-05T00:00:00Z")
    ml.relate("u1", "located_in", "Germany", of="Berlin", kind="place", observed_at="2024-01-05T00:00:00Z")
    again = ml.relate("u1", "sister", "ANNA", aliases=["Annie"])  # the same entity, one alias more
    assert (again.entity_id, again.effect, again.created) == (anna.entity_id, "reaffirm", [])

    [entity] = [e for e in ml.entities("u1").entities if e.entity_id == anna.entity_id]
    assert (entity.kind, entity.name, entity.aliases) == ("person", "Anna", ["my sister", "我姐姐", "Annie"])
    assert {e.name for e in ml.entities("u1").entities} == {"Anna", "Berlin", "Charité", "Germany"}

    one = ml.relations("u1")
    assert [(e.hops, e.path, e.relation_type) for e in one.relations] == [(1, ["user", "Anna"], "sister")]
    three = ml.relations("u1", hops=3)
    assert sorted((e.hops, tuple(e.path)) for e in three.relations) == [
        (1, ("user", "Anna")), (2, ("user", "Anna", "Berlin")), (2, ("user", "Anna", "Charité")),
        (3, ("user", "Anna", "Berlin", "Germany"))]
    assert [e.reads for e in three.relations if e.hops == 2 and e.relation_type == "lives_in"] == [
        "Anna lives in Berlin"]
    # from an entity, both directions: Berlin is where Anna lives and is in Germany
    around = ml.relations("u1", "Berlin")
    assert sorted((e.relation_type, e.path[-1]) for e in around.relations) == [
        ("lives_in", "Anna"), ("located_in", "Germany")]
    with pytest.raises(BadInput) as exc:
        ml.relations("u1", hops=4)
    assert exc.value.field == "hops"


def test_relations_follow_the_fact_policy(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    ml.relate("u1", "wife", "Maria", aliases=["my wife", "我老婆"], observed_at="2024-01-01T00:00:00Z")
    # an agent's guess never displaces what the user said: it is recorded and contests it
    guess = ml.relate("u1", "wife", "Mara", source="agent_inference", confidence=0.9)
    assert guess.effect == "contest"
    [edge] = ml.relations("u1").relations
    assert (edge.entity, edge.status) == ("Maria", "contested")
    assert ml.relate("u1", "wife", "我老婆").effect == "reaffirm"  # the user repeating it clears the contest
    assert ml.relations("u1").relations[0].status == "current"
    with pytest.raises(BadInput) as exc:
        ml.unrelate("u1", "wife", source="agent_inference")
    assert exc.value.field == "source"

    # a multi-valued type: a second sister is another edge; correcting one names the wrong one
    ml.relate("u1", "sister", "Anna")
    ml.relate("u1", "sister", "Bea")
    with pytest.raises(BadInput) as exc:
        ml.correct_relation("u1", "sister", "Cleo")
    assert exc.value.field == "was"
    ml.correct_relation("u1", "sister", "Cleo", was="Bea")
    sisters = sorted(e.entity for e in ml.relations("u1").relations if e.relation_type == "sister")
    assert sisters == ["Anna", "Cleo"]
    # ending one at a date: true until then, not after
    ml.unrelate("u1", "wife", valid_to="2025-01-01T00:00:00Z", reason="divorced")
    assert [e.entity for e in ml.relations("u1", valid_at="2024-06-01T00:00:00Z").relations
            if e.relation_type == "wife"] == ["Maria"]
    assert [e for e in ml.relations("u1", valid_at="2025-06-01T00:00:00Z").relations if e.relation_type == "wife"] == []
    # relations never reach the facts: the profile holds none of them
    assert ml.profile("u1").facts == {}
    assert all(v.ok for v in ml.verify() if v.projection in ("relations", "profile", "history"))


def test_a_name_that_names_two_entities_is_refused_not_guessed(fresh_ledger: MemoryLedger) -> None:
    ml = fresh_ledger
    a = ml.relate("u1", "sister", "Anna")
    ml.relate("u1", "friend", "Anna K", aliases=["Anna"])
    head = ml.head()
    with pytest.raises(BadInput) as exc:
        ml.relate("u1", "lives_in", "Berlin", of="Anna")
    assert exc.value.field == "of" and a.entity_id in exc.value.problem
    assert ml.head() == head  # nothing written
    ml.relate("u1", "lives_in", "Berlin", of=a.entity_id)  # the id settles it


def test_health_relation_is_withheld_without_the_grant_and_disclosed_with_it(cli: Any) -> None:
    cli.json("relate", "u1", "doctor_of", "Dr. Lee", "--observed-at", "2024-02-01T00:00:00Z")
    cli.json("relate", "u1", "works_at", "City Clinic", "--of", "Dr. Lee")
    doc = cli.json("relations", "u1", "--hops", "2")
    [edge] = doc["relations"]  # the walk does not go through a withheld relation
    assert (edge["relation_type"], edge["sensitivity"], edge["withheld"]) == ("doctor_of", "health", "health")
    assert (edge["entity"], edge["aliases"], edge["reads"], edge["path"]) == (None, None, None, ["user", None])
    names = [e["name"] for e in cli.json("entities", "u1")["entities"]]
    assert "Dr. Lee" not in names and None in names

    doc = cli.json("relations", "u1", "--hops", "2", "--allow-sensitive", "health", "--purpose", "book a check-up")
    assert sorted((e["hops"], e["entity"]) for e in doc["relations"]) == [(1, "Dr. Lee"), (2, "City Clinic")]
    rows = cli.json("export", "u1")["disclosures"]
    assert [(r["key"].split(".")[1], r["sensitivity"], r["purpose"]) for r in rows] == [
        ("doctor_of", "health", "book a check-up")]


def test_erasure_removes_entities_and_relations(cli: Any, store_args: dict[str, Any]) -> None:
    cli.json("relate", "u1", "sister", "Anna", "--alias", "my sister")
    cli.json("relate", "u1", "lives_in", "Berlin", "--of", "Anna")
    cli.json("relate", "u2", "friend", "Zoe")
    code, _, err = cli("erase", "u1", "--yes")
    assert code == 0, err
    assert cli.json("relations", "u1", "--hops", "3")["relations"] == []
    assert cli.json("entities", "u1")["entities"] == []
    assert [e["entity"] for e in cli.json("relations", "u2")["relations"]] == ["Zoe"]
    with MemoryLedger(**store_args) as ml:
        ml.rebuild(["relations"])  # a replay brings nothing back
        assert ml.entities("u1").entities == [] and ml.relations("u1", hops=3).relations == []
        t = ml.relations_projection
        with ml.db.read() as cur:
            for short in t.tables:
                cur.execute(f"SELECT COUNT(*) FROM {t.table(short)} WHERE user_id = ?", ("u1",))
                assert cur.fetchone()[0] == 0
        assert all(v.ok for v in ml.verify() if v.projection == "relations")


@pytest.mark.parametrize("args, field", [
    (["relate", "u1", "Best Friend", "Zoe"], "relation_type"),
    (["relate", "u1", "friend", " "], "entity"),
    (["relate", "u1", "friend", "Zoe", "--kind", "robot"], "--kind"),
    (["relate", "u1", "friend", "Zoe", "--of", "Nobody"], "of"),
    (["relate", "u1", "friend", "Zoe", "--valid-from", "yesterday"], "valid_from"),
    (["relate", "u1", "friend", "Zoe", "--observed-at", "2024-01-01T00:00:00"], "observed_at"),
    (["relate", "u1", "friend", "Zoe", "--source", "rumour"], "source"),
    (["relations", "u1", "--hops", "4"], "--hops"),
    (["relations", "u1", "--valid-at", "2024-03-01"], "valid_at"),
    (["relations", "u1", "--entity", "Nobody"], "entity"),
    (["unrelate", "u1", "manager_of"], "entity"),
    (["correct-relation", "u1", "manager_of", "Omar"], "relation_type"),
])
def test_bad_input_names_the_field_and_writes_nothing(cli: Any, store_args: dict[str, Any], args: list[str],
                                                      field: str) -> None:
    with MemoryLedger(**store_args) as ml:
        ml.relate("u1", "sister", "Anna")
        head = ml.head()
    code, out, err = cli(*args)
    assert code == 2, (out, err)
    assert f"{field}:" in err and "(" in err  # the field, the problem and the fix
    with MemoryLedger(**store_args) as ml:
        assert ml.head() == head


def test_an_entity_past_its_cap_folds_its_least_recently_used_relations(cli: Any) -> None:
    cli.env["MEMLEDGER_MAX_LIVE_RELATIONS"] = "3"
    for name, since in (("Tom", "2019-03-01"), ("Sara", "2020-05-01"), ("Lee", "2021-01-01")):
        assert cli("relate", "u1", "friend", name, "--valid-from", f"{since}T00:00:00Z")[0] == 0
    assert cli("relate", "u1", "friend", "Tom")[0] == 0  # Tom said again: used, so not among the oldest
    before = now_iso()
    assert cli("relate", "u1", "colleague", "Ann")[0] == 0  # the fourth live relation: two fold into one
    live = {(e["relation_type"], e["entity"]) for e in cli.json("relations", "u1")["relations"]}
    assert live == {("friend", "Tom"), ("colleague", "Ann"), ("folded", "2 earlier ties, 2020-05-01 to 2021-01-01")}
    [summary] = [e for e in cli.json("relations", "u1")["relations"] if e["relation_type"] == "folded"]
    assert summary["reads"] == "user → folded → 2 earlier ties, 2020-05-01 to 2021-01-01"
    # the events keep everything: as believed before, and true before the fold
    then = {e["entity"] for e in cli.json("relations", "u1", "--as-of", before)["relations"]}
    assert then == {"Tom", "Sara", "Lee"}
    assert {"Sara", "Lee"} <= {e["entity"] for e in cli.json("relations", "u1", "--valid-at",
                                                               "2022-01-01T00:00:00Z")["relations"]}
    # a bad cap is refused before anything is written
    cli.env["MEMLEDGER_MAX_LIVE_RELATIONS"] = "1"
    code, _, err = cli("relate", "u1", "friend", "Zed")
    assert code == 2 and err.startswith("error: MEMLEDGER_MAX_LIVE_RELATIONS:")
    del cli.env["MEMLEDGER_MAX_LIVE_RELATIONS"]
    assert "Zed" not in {e["name"] for e in cli.json("entities", "u1")["entities"]}


def test_export_holds_the_entities_and_every_relation_version_gated_like_every_read(cli: Any,
                                                                                    store_args: dict[str, Any]) -> None:
    assert cli("relate", "u1", "sister", "Anna", "--alias", "my sister")[0] == 0
    assert cli("relate", "u1", "manager_of", "Dana")[0] == 0
    assert cli("relate", "u1", "manager_of", "Omar")[0] == 0  # supersedes Dana: both versions are exported
    assert cli("relate", "u1", "doctor_of", "Dr. Lee")[0] == 0
    doc = cli.json("export", "u1")
    assert sorted(e["name"] for e in doc["entities"]) == ["Anna", "Dana", "Dr. Lee", "Omar"]
    rows = [(r["relation_type"], r["effect"], r["withheld"]) for r in doc["relations"]]
    assert rows == [("sister", "new", None), ("manager_of", "new", None), ("manager_of", "supersede", None),
                    ("doctor_of", "new", None)]
    assert [r["status"] for r in doc["relations"] if r["relation_type"] == "manager_of"] == ["superseded", "current"]

    from memledger import MemoryLedger

    with MemoryLedger(**store_args) as ml:
        gated = ml.export("u1", complete=False)
    [doctor] = [r for r in gated.relations if r.relation_type == "doctor_of"]
    assert (doctor.text, doctor.withheld) == (None, "health")
    assert None in [e.name for e in gated.entities] and "Dr. Lee" not in [e.name for e in gated.entities]

    assert cli("erase", "u1", "--yes")[0] == 0
    erased = cli.json("export", "u1")
    assert (erased["erased"], erased["entities"], erased["relations"]) == (True, [], [])


def test_a_person_behind_a_labelled_tie_is_named_by_no_relation_of_theirs(cli: Any, store_args: dict[str, Any]) -> None:
    assert cli("relate", "u1", "doctor_of", "Dr. Hidden")[0] == 0
    assert cli("relate", "u1", "lives_in", "Secretville", "--of", "Dr. Hidden")[0] == 0
    assert cli("relate", "u1", "sister", "Anna")[0] == 0
    entities = cli.json("entities", "u1")["entities"]
    place = next(e["entity_id"] for e in entities if e["withheld"] and e["kind"] == "place")
    walk = cli.json("relations", "u1", "--entity", place, "--hops", "2")
    assert "Hidden" not in json.dumps(walk) and "Secretville" not in json.dumps(walk)

    from memledger import MemoryLedger
    from memledger.ui import user_view
    from memledger.ui.render import user_page

    with MemoryLedger(**store_args) as ml:
        gated = ml.export("u1", complete=False).model_dump_json()
        page = user_page(user_view(ml, "u1"))
        assert "Hidden" not in gated and "Secretville" not in gated and "Anna" in gated
        assert "Hidden" not in page and "Secretville" not in page and "sister Anna" in page
        shown = ml.relations("u1", hops=2, allow_sensitive="health", purpose="appointment")
        assert "Dr. Hidden lives in Secretville" in [e.reads for e in shown.relations]


def test_identity_types_are_written_by_identity_links_only(cli: Any) -> None:
    for verb in (("relate", "u1", "same_person", "user:victim"), ("relate", "u1", "may_be_same_person", "x"),
                 ("unrelate", "u1", "same_person", "user:victim")):
        code, _, err = cli(*verb)
        assert code == 2 and err.startswith("error: relation_type:") and "identity link" in err
    assert cli.json("entities", "u1")["entities"] == []


def test_the_timeline_of_a_user_with_relations_only(cli: Any, tmp_path: Any) -> None:
    assert cli("relate", "u1", "manager_of", "Dana", "--valid-from", "2023-01-01T00:00:00Z")[0] == 0
    page = tmp_path / "u1.html"
    code, _, err = cli("timeline", "u1", "--html", str(page))
    assert code == 0, err
    assert 'data-lane-name="people"' in page.read_text() and "manager_of Dana" in page.read_text()
    code, _, err = cli("timeline", "nobody", "--html", str(tmp_path / "n.html"))
    assert code == 2 and "no fact, session, relation or erasure" in err


@pytest.mark.parametrize("name", ["An\nna", "An\tna", "self", "User"])
def test_a_name_on_two_lines_or_naming_the_user_is_refused(cli: Any, name: str) -> None:
    code, _, err = cli("relate", "u1", "sister", name)
    assert code == 2 and err.startswith("error: entity:"), err
    assert cli.json("entities", "u1")["entities"] == []

