"""Time travel and audit: believed / true_at / diff / audit with exact answers, both axes, the CLI
contract, bad input refused, and a hypothesis property test holding the indexed answers equal to a replay of the
log to the same cutoff (replay/cutoff.py)."""

from __future__ import annotations

import contextlib
import json
import tempfile
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger import BadInput, MemoryLedger
from ledger.timeutil import OPEN, from_micros, to_micros
from replay.cutoff import replay_believed

from .test_bad_input import snapshot

UTC = timezone.utc


def dt(s: str) -> datetime:
    return datetime.fromisoformat(s.replace("Z", "+00:00")).astimezone(UTC)


def iso(t: datetime) -> str:
    return t.isoformat()


# -- the session ---------------------------------------------------------------------------------------------------
def run_session(ml: MemoryLedger) -> dict[int, datetime]:
    """Corrections, a change of mind, a retraction with an earlier valid_to, a backfill and a contest.

    Returns position -> recorded_at (system time) of each event. Positions 1..9 are:
    1 tea (new), 2 coffee (supersede), 3 espresso (correct), 4 Paris (new), 5 retract Paris valid_to May,
    6 water (backfill, imported), 7 chess (new), 8 go (agent inference: contest), 9 another user's fact.
    """
    ml.assert_fact("u1", "preference.drink", "tea", observed_at="2024-01-01T09:00:00+08:00", source_ref="m1",
                   actor="agent-a", trace_id="t1")
    ml.assert_fact("u1", "preference.drink", "coffee", observed_at="2024-03-01T00:00:00Z", source_ref="m2",
                   actor="agent-a", trace_id="t2")
    ml.correct_fact("u1", "preference.drink", "espresso", reason="misheard", observed_at="2024-03-01T00:05:00Z",
                    source_ref="m3", actor="agent-a", trace_id="t2")
    ml.assert_fact("u1", "profile.city", "Paris", observed_at="2024-02-01T00:00:00Z", source_ref="m4")
    ml.retract_fact("u1", "profile.city", reason="moved away", valid_to="2024-05-01T00:00:00Z",
                    observed_at="2024-06-01T00:00:00Z", source_ref="m5")
    ml.assert_fact("u1", "preference.drink", "water", valid_from="2023-06-01T00:00:00Z",
                   observed_at="2023-06-01T00:00:00Z", source="external_import", source_ref="doc1",
                   derived_from=["import-1"], actor="importer")
    ml.assert_fact("u1", "hobby", "chess", observed_at="2024-04-01T00:00:00Z", source_ref="m7")
    ml.assert_fact("u1", "hobby", "go", observed_at="2024-04-02T00:00:00Z", source="agent_inference",
                   actor="agent-b", reason="saw a go board in a photo")
    ml.assert_fact("u2", "preference.drink", "milk", observed_at="2024-01-01T00:00:00Z")
    times = {h.position: h.recorded_at for u in ("u1", "u2") for h in ml.history(u)}
    assert sorted(times) == list(range(1, 10))
    return times


@pytest.fixture
def session(fresh_ledger):
    return fresh_ledger, run_session(fresh_ledger)


def slim(beliefs) -> dict:
    """key -> (value, version, valid_from, valid_to, status) of a Beliefs answer."""
    return {k: (b.value, b.version, b.valid_from, b.valid_to, b.status) for k, b in beliefs.facts.items()}


JAN1 = dt("2024-01-01T01:00:00Z")  # 09:00 +08:00
MAR1 = dt("2024-03-01T00:00:00Z")
FEB1 = dt("2024-02-01T00:00:00Z")
MAY1 = dt("2024-05-01T00:00:00Z")
APR1 = dt("2024-04-01T00:00:00Z")
JUN23 = dt("2023-06-01T00:00:00Z")


def test_believed_as_of_each_step(session):
    ml, T = session
    assert slim(ml.believed("u1", T[1], "2024-02-01T00:00:00Z")) == {
        "preference.drink": ("tea", 1, JAN1, None, "believed")}
    assert slim(ml.believed("u1", T[2], "2024-04-01T00:00:00Z")) == {
        "preference.drink": ("coffee", 2, MAR1, None, "believed")}
    # Once superseded, tea's range is closed at coffee's valid_from — from T2's system time on.
    assert slim(ml.believed("u1", T[2], "2024-02-01T00:00:00Z")) == {
        "preference.drink": ("tea", 1, JAN1, MAR1, "believed")}
    assert slim(ml.believed("u1", T[3], "2024-04-01T00:00:00Z")) == {
        "preference.drink": ("espresso", 3, MAR1, None, "believed")}
    # Before anything was recorded: nothing.
    assert slim(ml.believed("u1", T[1] - timedelta(microseconds=1), "2024-02-01T00:00:00Z")) == {}


def test_as_of_is_inclusive_and_valid_at_defaults_to_as_of(session):
    ml, T = session
    at = ml.believed("u1", T[3], "2024-04-01T00:00:00Z")
    assert at.facts["preference.drink"].value == "espresso"  # the event recorded exactly at T3 counts
    just_before = ml.believed("u1", T[3] - timedelta(microseconds=1), "2024-04-01T00:00:00Z")
    assert just_before.facts["preference.drink"].value == "coffee"
    b = ml.believed("u1", T[9])
    assert (b.as_of, b.valid_at, b.axis, b.user_id) == (T[9], T[9], "system", "u1")
    assert slim(b) == {"hobby": ("chess", 1, APR1, None, "contested"),
                       "preference.drink": ("espresso", 3, MAR1, None, "believed")}


def test_retraction_with_earlier_valid_to_closes_range_from_its_system_time_on(session):
    ml, T = session
    # As of before the retraction (recorded at T5), Paris's range is still open: we believed it on 15 May.
    assert slim(ml.believed("u1", T[4], "2024-05-15T00:00:00Z")) == {
        "preference.drink": ("espresso", 3, MAR1, None, "believed"),
        "profile.city": ("Paris", 1, FEB1, None, "believed")}
    # From T5 on, the range is [Feb 1, May 1): nothing on 15 May, Paris on 15 April.
    assert slim(ml.believed("u1", T[5], "2024-05-15T00:00:00Z")) == {
        "preference.drink": ("espresso", 3, MAR1, None, "believed")}
    assert slim(ml.believed("u1", T[5], "2024-04-15T00:00:00Z"))["profile.city"] == (
        "Paris", 1, FEB1, MAY1, "believed")
    # Valid ranges are half-open: valid_to itself is outside.
    assert "profile.city" not in ml.true_at("u1", "2024-05-01T00:00:00Z").facts
    assert "profile.city" in ml.true_at("u1", "2024-04-30T23:59:59.999999Z").facts


def test_true_at_as_known_now(session):
    ml, _ = session
    assert slim(ml.true_at("u1", "2023-07-01T00:00:00Z")) == {
        "preference.drink": ("water", 4, JUN23, JAN1, "believed")}
    assert slim(ml.true_at("u1", "2024-02-15T00:00:00Z")) == {
        "preference.drink": ("tea", 1, JAN1, MAR1, "believed"),
        "profile.city": ("Paris", 1, FEB1, MAY1, "believed")}
    assert slim(ml.true_at("u1", "2024-05-15T00:00:00Z")) == {
        "hobby": ("chess", 1, APR1, None, "contested"),
        "preference.drink": ("espresso", 3, MAR1, None, "believed")}
    assert slim(ml.true_at("u1", "2023-01-01T00:00:00Z")) == {}
    # user isolation: u2's milk never shows for u1, and u1's facts never for u2
    assert slim(ml.true_at("u2", "2024-05-15T00:00:00Z")) == {
        "preference.drink": ("milk", 1, dt("2024-01-01T00:00:00Z"), None, "believed")}
    ans = ml.true_at("u1", "2024-05-15T00:00:00Z")
    assert (ans.as_of, ans.valid_at) == (None, dt("2024-05-15T00:00:00Z"))
    drink = ans.facts["preference.drink"]
    assert (drink.source_ref, drink.position, drink.observed_at) == ("m3", 3, dt("2024-03-01T00:05:00Z"))


def _diff(d) -> dict:
    out = {}
    for change in ("added", "changed", "dropped"):
        for key, e in getattr(d, change).items():
            out[key] = (change, None if e.before is None else (e.before.value, e.before.status),
                        None if e.after is None else (e.after.value, e.after.status),
                        e.event.position, e.event.effect, e.event.reason)
    return out


def test_diff_each_change_with_the_event_that_did_it(session):
    ml, T = session
    d = ml.diff("u1", T[2], T[9], valid_at="2024-04-01T00:00:00Z")
    assert _diff(d) == {
        "hobby": ("added", None, ("chess", "contested"), 7, "new", None),
        "preference.drink": ("changed", ("coffee", "believed"), ("espresso", "believed"), 3, "correct", "misheard"),
        "profile.city": ("added", None, ("Paris", "believed"), 4, "new", None),
    }
    assert _diff(ml.diff("u1", T[4], T[5], valid_at="2024-05-15T00:00:00Z")) == {
        "profile.city": ("dropped", ("Paris", "believed"), None, 5, "retract", "moved away")}
    assert _diff(ml.diff("u1", T[7], T[8], valid_at="2024-05-15T00:00:00Z")) == {
        "hobby": ("changed", ("chess", "believed"), ("chess", "contested"), 8, "contest",
                  "saw a go board in a photo")}
    assert _diff(ml.diff("u1", T[5], T[6], valid_at="2023-07-01T00:00:00Z")) == {
        "preference.drink": ("added", None, ("water", "believed"), 6, "backfill", None)}
    # The same valid instant on both sides, so reaching a new valid range without an event is not a change.
    assert _diff(ml.diff("u1", T[9], T[9])) == {}
    d = ml.diff("u1", T[1], T[3], valid_at="2024-04-01T00:00:00Z")
    assert (d.from_, d.to, d.valid_at) == (T[1], T[3], APR1)
    assert d.model_dump(mode="json")["from"] == T[1].isoformat().replace("+00:00", "Z")


def test_audit_chain_who_when_from_what_replaced_why(session):
    ml, T = session
    a = ml.audit("u1")
    assert sorted(a.facts) == ["hobby", "preference.drink"]  # Paris is not believed now
    drink = a.facts["preference.drink"]
    assert (drink.belief.value, drink.belief.version, drink.replaced) == ("espresso", 3, [2, 1])
    assert [(r.position, r.effect, r.value, r.actor, r.source, r.source_ref, r.replaces, r.replaced_by, r.reason)
            for r in drink.chain] == [
        (1, "new", "tea", "agent-a", "user_statement", "m1", None, 2, None),
        (2, "supersede", "coffee", "agent-a", "user_statement", "m2", 1, 3, None),
        (3, "correct", "espresso", "agent-a", "user_statement", "m3", 2, None, "misheard"),
        (6, "backfill", "water", "importer", "external_import", "doc1", None, None, None),
    ]
    assert [r.recorded_at for r in drink.chain] == [T[1], T[2], T[3], T[6]]
    assert [r.observed_at for r in drink.chain] == [JAN1, MAR1, dt("2024-03-01T00:05:00Z"), JUN23]
    assert drink.chain[3].derived_from == ["import-1"]
    assert [r.trace_id for r in drink.chain] == ["t1", "t2", "t2", None]
    hobby = a.facts["hobby"]
    assert (hobby.belief.status, hobby.replaced) == ("contested", [])
    assert [(r.effect, r.value, r.source, r.actor) for r in hobby.chain] == [
        ("new", "chess", "user_statement", None), ("contest", "go", "agent_inference", "agent-b")]


def test_audit_of_a_key_filters_and_as_of(session):
    ml, T = session
    city = ml.audit("u1", "profile.city").facts["profile.city"]
    assert city.belief is None
    assert [(r.effect, r.reason, r.replaced_by) for r in city.chain] == [
        ("new", None, 2), ("retract", "moved away", None)]
    assert list(ml.audit("u1", source_ref="m1").facts) == ["preference.drink"]
    assert list(ml.audit("u1", trace_id="t2").facts) == ["preference.drink"]
    assert ml.audit("u1", source_ref="nope").facts == {}
    assert ml.audit("u1", "no.such.key").facts == {}
    # As of T1 the chain holds only what had been recorded, and tea was not yet replaced by anything.
    then = ml.audit("u1", as_of=T[1], valid_at="2024-02-01T00:00:00Z")
    entry = then.facts["preference.drink"]
    assert (entry.belief.value, entry.replaced, [(r.position, r.replaced_by) for r in entry.chain]) == (
        "tea", [], [(1, None)])
    # As of T4, Paris was believed (open range) on 15 May, with its one event.
    then = ml.audit("u1", "profile.city", as_of=T[4], valid_at="2024-05-15T00:00:00Z")
    assert then.facts["profile.city"].belief.valid_to is None
    assert [r.position for r in then.facts["profile.city"].chain] == [4]


def test_observed_axis(session):
    ml, _ = session
    # Said by 15 Feb 2024: tea (still open then) and Paris.
    assert slim(ml.believed("u1", "2024-02-15T00:00:00Z", axis="observed")) == {
        "preference.drink": ("tea", 1, JAN1, None, "believed"),
        "profile.city": ("Paris", 1, FEB1, None, "believed")}
    # Inclusive: coffee was said at exactly 2024-03-01T00:00Z; the correction five minutes later is not in yet.
    assert slim(ml.believed("u1", "2024-03-01T00:00:00Z", axis="observed"))["preference.drink"] == (
        "coffee", 2, MAR1, None, "believed")
    assert slim(ml.believed("u1", "2024-06-01T00:00:00Z", "2024-05-15T00:00:00Z", axis="observed")) == {
        "hobby": ("chess", 1, APR1, None, "contested"),
        "preference.drink": ("espresso", 3, MAR1, None, "believed")}
    # Observed time is monotonic along each fact's log: the water import was recorded after tea (observed
    # 2024-01-01), so it counts from then on, not from 2023 (docs/time-travel.md).
    assert slim(ml.believed("u1", "2023-07-01T00:00:00Z", axis="observed")) == {}
    d = ml.diff("u1", "2024-02-15T00:00:00Z", "2024-06-01T00:00:00Z", valid_at="2024-04-15T00:00:00Z",
                axis="observed")
    assert _diff(d) == {
        "hobby": ("added", None, ("chess", "contested"), 7, "new", None),
        "preference.drink": ("changed", ("tea", "believed"), ("espresso", "believed"), 3, "correct", "misheard"),
        "profile.city": ("changed", ("Paris", "believed"), ("Paris", "believed"), 5, "retract", "moved away"),
    }
    a = ml.audit("u1", "preference.drink", as_of="2024-03-01T00:00:00Z", axis="observed")
    assert [r.position for r in a.facts["preference.drink"].chain] == [1, 2]


def test_same_instant_in_other_offsets_gives_identical_answers(session):
    ml, T = session
    t3 = T[3]
    a = ml.believed("u1", t3.astimezone(timezone(timedelta(hours=5, minutes=30))).isoformat(),
                    "2024-04-01T05:30:00+05:30")
    b = ml.believed("u1", t3.isoformat().replace("+00:00", "Z"), "2024-04-01T00:00:00Z")
    c = ml.believed("u1", t3.astimezone(timezone(timedelta(hours=-7))), datetime(2024, 3, 31, 17, tzinfo=timezone(
        timedelta(hours=-7))))
    assert a.model_dump(mode="json") == b.model_dump(mode="json") == c.model_dump(mode="json")
    assert a.as_of.utcoffset() == timedelta(0)
    x = ml.true_at("u1", "2024-02-15T09:00:00+09:00")
    y = ml.true_at("u1", "2024-02-15T00:00:00Z")
    assert x.model_dump(mode="json") == y.model_dump(mode="json")


@pytest.mark.parametrize("call,field", [
    (lambda ml: ml.believed("u1", "2024-01-01T00:00:00"), "as_of"),
    (lambda ml: ml.believed("u1", datetime(2024, 1, 1)), "as_of"),
    (lambda ml: ml.believed("u1", None), "as_of"),
    (lambda ml: ml.believed("u1", "2024-01-01T00:00:00Z", "2024-01-01"), "valid_at"),
    (lambda ml: ml.believed("u1", "2024-01-01T00:00:00Z", axis="valid"), "axis"),
    (lambda ml: ml.true_at("u1", "yesterday"), "valid_at"),
    (lambda ml: ml.true_at("", "2024-01-01T00:00:00Z"), "user_id"),
    (lambda ml: ml.diff("u1", "2024-02-01T00:00:00Z", "2024-01-01T00:00:00Z"), "to"),
    (lambda ml: ml.diff("u1", "2024-02-01T00:00:00", "2024-03-01T00:00:00Z"), "from"),
    (lambda ml: ml.audit("u1", "bad key"), "key"),
    (lambda ml: ml.audit("u1", trace_id=" "), "trace"),
    (lambda ml: ml.audit("u1", as_of="2024-01-01T00:00:00"), "as_of"),
])
def test_api_refuses_bad_input(session, call, field):
    ml, _ = session
    before = [h.model_dump() for h in ml.history("u1")]
    with pytest.raises(BadInput) as exc:
        call(ml)
    assert exc.value.field == field
    assert [h.model_dump() for h in ml.history("u1")] == before


# -- CLI -----------------------------------------------------------------------------------------------------------
def test_cli_json_matches_api_and_tz_renders(cli, store_args):
    with MemoryLedger(**store_args) as ml:
        T = run_session(ml)
        api = ml.believed("u1", T[4], "2024-05-15T00:00:00Z").model_dump(mode="json")
        api_diff = ml.diff("u1", T[2], T[9], valid_at="2024-04-01T00:00:00Z").model_dump(mode="json")
        api_audit = ml.audit("u1", "preference.drink").model_dump(mode="json")
    assert cli.json("believed", "u1", "--as-of", T[4].isoformat(), "--valid-at", "2024-05-15T00:00:00Z") == api
    got = cli.json("diff", "u1", "--from", T[2].isoformat(), "--to", T[9].isoformat(),
                   "--valid-at", "2024-04-01T00:00:00Z")
    assert got == api_diff and sorted(got) == ["added", "axis", "changed", "dropped", "from", "to", "user_id",
                                                "valid_at"]
    got = cli.json("audit", "u1", "preference.drink")
    assert got["facts"]["preference.drink"]["chain"] == api_audit["facts"]["preference.drink"]["chain"]
    tokyo = cli.json("true-at", "u1", "--valid-at", "2024-02-15T00:00:00Z", "--tz", "Asia/Tokyo")
    assert tokyo["valid_at"] == "2024-02-15T09:00:00+09:00"
    assert tokyo["facts"]["profile.city"]["valid_from"] == "2024-02-01T09:00:00+09:00"
    assert tokyo["facts"]["profile.city"]["valid_to"] == "2024-05-01T09:00:00+09:00"
    assert tokyo["facts"]["preference.drink"]["value"] == "tea"
    plain = cli.json("true-at", "u1", "--valid-at", "2024-02-15T09:00:00+09:00")
    assert plain["valid_at"] == "2024-02-15T00:00:00Z"
    obs = cli.json("believed", "u1", "--as-of", "2024-02-15T00:00:00Z", "--axis", "observed")
    assert (obs["axis"], sorted(obs["facts"])) == ("observed", ["preference.drink", "profile.city"])
    code, out, err = cli("audit", "u1")
    assert code == 0 and "preference.drink: believed \"espresso\" (v3), replaced v2, v1" in out


BAD_CLI = [
    (["believed", "u1", "--as-of", "2024-01-01T00:00:00"], "as_of"),
    (["believed", "u1"], "as_of"),
    (["believed", "u1", "--as-of", "2024-01-01T00:00:00Z", "--valid-at", "soon"], "valid_at"),
    (["believed", "u1", "--as-of", "2024-01-01T00:00:00Z", "--axis", "valid"], "axis"),
    (["believed", "", "--as-of", "2024-01-01T00:00:00Z"], "user_id"),
    (["true-at", "u1", "--valid-at", "2024-01-01 00:00"], "valid_at"),
    (["true-at", "u1"], "valid_at"),
    (["true-at", "u1", "--valid-at", "2024-01-01T00:00:00Z", "--tz", "Mars/Olympus"], "tz"),
    (["diff", "u1", "--from", "2024-02-01T00:00:00Z", "--to", "2024-01-01T00:00:00Z"], "to"),
    (["diff", "u1", "--to", "2024-01-01T00:00:00Z"], "from"),
    (["audit", "u1", "bad key"], "key"),
    (["audit", "u1", "--as-of", "2024-01-01T00:00:00"], "as_of"),
    (["audit", "u1", "--source-ref", ""], "source_ref"),
]


def test_cli_refuses_bad_input_exit_2_store_unchanged(cli, store_args, backend):
    # One store for every case: each refusal must leave it unchanged.
    assert cli("assert", "u1", "preference.drink", "tea")[0] == 0
    before = snapshot(store_args["home"]) if backend == "sqlite" else None
    history_before = cli.json("history", "u1")
    for args, field in BAD_CLI:
        code, out, err = cli(*args)
        assert code == 2, (args, out, err)
        assert f"error: {field}:" in err, (args, err)
        assert "Traceback" not in err
        if before is not None:
            assert snapshot(store_args["home"]) == before, args
    assert cli.json("history", "u1") == history_before


# -- indexed == replayed (hypothesis) ------------------------------------------------------------------------------
DAYS = [datetime(2024, 1, 1, tzinfo=UTC) + timedelta(days=d) for d in range(0, 120, 10)]
KEYS = ["k.a", "k.b", "k.c"]

command = st.fixed_dictionaries({
    "op": st.sampled_from(["assert", "assert", "assert", "correct", "retract"]),
    "key": st.sampled_from(KEYS),
    "value": st.integers(1, 3),
    "source": st.sampled_from(["user_statement", "user_statement", "agent_inference", "external_import"]),
    "observed": st.sampled_from(DAYS),
    "valid_from": st.one_of(st.none(), st.sampled_from(DAYS)),
    "valid_to": st.one_of(st.none(), st.sampled_from(DAYS)),
    "new_batch": st.booleans(),
})


def _to_record(c: dict) -> dict:
    data = {"op": c["op"], "user_id": "u", "key": c["key"], "source": c["source"],
            "observed_at": c["observed"].isoformat()}
    if c["op"] != "retract":
        data["value"] = c["value"]
    if c["op"] == "assert" and c["valid_from"] is not None:
        data["valid_from"] = c["valid_from"].isoformat()
    if c["op"] in ("assert", "retract") and c["valid_to"] is not None:
        data["valid_to"] = c["valid_to"].isoformat()
    return data


def _indexed(ans) -> list[tuple]:
    return [(k, b.version, json.dumps(b.value, sort_keys=True, separators=(",", ":")), to_micros(b.valid_from),
             to_micros(b.valid_to, OPEN), b.status) for k, b in ans.facts.items()]


def _replayed(rows) -> list[tuple]:
    return [(r.key, r.version, r.value_json, r.valid_from, r.valid_to, r.status) for r in rows]


@contextlib.contextmanager
def _scratch_ledger(backend: str):
    """A fresh, empty ledger per hypothesis example: a temporary home on SQLite, a new schema (dropped after) on
    PostgreSQL. Function-scoped fixtures would be shared by every example of one test, hence not used here."""
    if backend == "sqlite":
        with tempfile.TemporaryDirectory() as home, MemoryLedger(home=home) as ml:
            yield ml
        return
    from tests import pg

    schema = pg.new_schema()
    try:
        with MemoryLedger(dsn=pg.TEST_DSN, schema=schema) as ml:
            yield ml
    finally:
        pg.drop_schema(schema)


def _check_indexed_equals_replay(backend: str, commands, data) -> None:
    with _scratch_ledger(backend) as ml:
        batches: list[list[dict]] = []
        for c in commands:
            if c["new_batch"] or not batches:
                batches.append([])
            batches[-1].append(_to_record(c))
        for batch in batches:
            try:
                ml.record(batch)
            except BadInput:
                pass  # refused by validation or the policy: nothing of the batch is written
        rows = ml.history("u")
        recorded = sorted({to_micros(r.recorded_at) for r in rows})
        instants_sys = sorted({t + d for t in recorded for d in (-1, 0, 1)} | {0})
        observed = sorted({to_micros(d) for d in DAYS})
        instants_obs = sorted({t + d for t in observed for d in (-1, 0, 1)})
        valid = sorted({to_micros(d) + e for d in DAYS for e in (-1, 0)} | set(recorded))
        for _ in range(6):
            v = data.draw(st.sampled_from(valid))
            t = data.draw(st.sampled_from(instants_sys))
            assert _indexed(ml.believed("u", from_micros(t) if t else datetime(1970, 1, 1, tzinfo=UTC),
                                        from_micros(v))) == _replayed(replay_believed(ml.app, "u", t, v, "system"))
            t = data.draw(st.sampled_from(instants_obs))
            assert _indexed(ml.believed("u", from_micros(t), from_micros(v), axis="observed")) == _replayed(
                replay_believed(ml.app, "u", t, v, "observed"))
            assert _indexed(ml.true_at("u", from_micros(v))) == _replayed(replay_believed(ml.app, "u", None, v))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(commands=st.lists(command, min_size=1, max_size=14), data=st.data())
def test_indexed_answers_equal_replay_to_cutoff(commands, data):
    _check_indexed_equals_replay("sqlite", commands, data)


# The same property on PostgreSQL, with fewer examples: each one creates and drops a schema. ``backend`` is
# the conftest fixture with its PostgreSQL parameter only (it skips, or fails under MEMLEDGER_REQUIRE_POSTGRES=1,
# when no server answers); it is a constant string, so sharing it across examples is safe.
@pytest.mark.parametrize("backend", [pytest.param("postgres", marks=pytest.mark.postgres)], indirect=True)
@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(commands=st.lists(command, min_size=1, max_size=14), data=st.data())
def test_indexed_answers_equal_replay_to_cutoff_postgres(backend, commands, data):
    _check_indexed_equals_replay(backend, commands, data)


def test_diff_table_shows_a_status_change_of_the_same_value(cli):
    cli("assert", "u1", "preference.drink", "tea", "--observed-at", "2024-01-01T00:00:00Z")
    cli("assert", "u1", "preference.drink", "water", "--source", "agent_inference", "--confidence", "0.2",
        "--observed-at", "2024-02-01T00:00:00Z")
    code, out, err = cli("diff", "u1", "--axis", "observed", "--from", "2024-01-15T00:00:00Z", "--to",
                         "2024-03-01T00:00:00Z")
    assert code == 0, err
    [row] = [line for line in out.splitlines() if "preference.drink" in line]
    cells = [c.strip() for c in row.split("│")[1:-1]]
    assert cells[:5] == ["changed", "preference.drink", '"tea"', '"tea" (contested)', "asserted/contest"]
