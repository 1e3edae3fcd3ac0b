"""search applies the sensitivity rule of context: a labelled fact is withheld unless its label is allowed, and
every labelled fact returned is recorded as a disclosure (it leaked through search before)."""

from __future__ import annotations

import json


def seed(cli):
    assert cli("assert", "zed", "health.condition", "diabetes", "--text", "Zed has diabetes",
               "--sensitivity", "health")[0] == 0
    assert cli("assert", "zed", "preference.food", "sushi", "--text", "Zed loves sushi and diabetes-friendly food"
               )[0] == 0
    assert cli("assert", "zed", "profile.city", "Oslo", "--text", "Zed lives in Oslo")[0] == 0


def test_a_labelled_fact_is_withheld_without_allow_sensitive(cli):
    seed(cli)
    hits = cli.json("search", "zed", "diabetes", "-k", "3")
    assert [h["key"] for h in hits] == ["preference.food", "profile.city"]  # page not shortened below what exists
    assert [h["rank"] for h in hits] == [1, 2]
    assert cli.json("export", "zed")["disclosures"] == []


def test_an_allowed_label_is_returned_and_recorded(cli):
    seed(cli)
    hits = cli.json("search", "zed", "diabetes", "-k", "1", "--allow-sensitive", "health", "--purpose", "diet plan")
    assert [(h["key"], h["rank"]) for h in hits] == [("health.condition", 1)]
    disclosures = cli.json("export", "zed")["disclosures"]
    assert [(d["key"], d["version"], d["sensitivity"], d["purpose"]) for d in disclosures] == [
        ("health.condition", 1, "health", "diet plan")]
    # another label does not open health
    hits = cli.json("search", "zed", "diabetes", "-k", "3", "--allow-sensitive", "finance")
    assert "health.condition" not in [h["key"] for h in hits]
    # the export before recorded itself (each labelled fact it held): only the search's disclosure is not it
    assert [d["purpose"] for d in cli.json("export", "zed")["disclosures"]] == [
        "diet plan", "export (everything held about the user)"]


def test_a_bad_label_is_refused_before_anything_is_read(cli):
    code, out, err = cli("search", "zed", "x", "--allow-sensitive", ",", "--json")
    assert (code, out) == (2, "")
    # a search's refusals name the field as its other options' do: the flag without its dashes
    assert json.loads(err.strip().splitlines()[-1])["error"]["field"] == "allow_sensitive"
    assert "allow_sensitive: '' is not a label" in err


def test_the_python_api_applies_the_same_rule(fresh_ledger):
    fresh_ledger.assert_fact("zed", "health.condition", "diabetes", text="Zed has diabetes", sensitivity="health")
    assert fresh_ledger.search("zed", "diabetes") == []
    hits = fresh_ledger.search("zed", "diabetes", allow_sensitive=["health"], purpose="triage", trace_id="t-1")
    assert [h.key for h in hits] == ["health.condition"]
    [d] = fresh_ledger.disclosures("zed")
    assert (d.key, d.purpose, d.trace_id) == ("health.condition", "triage", "t-1")
