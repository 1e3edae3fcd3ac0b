"""LoCoMo files with wrong types, clock-relative dates, repeated turn ids or oversized turns are refused before
anything is written, naming the field (raw AttributeError/TypeError with exit 1, or
exit 2 after the file's facts were recorded, or "yesterday" accepted and the re-ingest then refused)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Callable

import pytest

from ledger.errors import BadInput
from memledger import MemoryLedger
from memledger.ingest import parse_locomo_time

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = json.loads((ROOT / "samples" / "locomo_conv30.json").read_text(encoding="utf-8"))
CONV = "conversation[0]"


def _set(path: list[Any], value: Any) -> Callable[[Any], None]:
    def change(data: Any) -> None:
        node = data[0]
        for part in path[:-1]:
            node = node[part]
        node[path[-1]] = value
    return change


DATE = ["conversation", "session_1_date_time"]
BAD = [
    (_set(DATE, 12345), f"{CONV}.session_1_date_time"),
    (_set(DATE, True), f"{CONV}.session_1_date_time"),
    (_set(DATE, ["a"]), f"{CONV}.session_1_date_time"),
    (_set(DATE, None), f"{CONV}.session_1_date_time"),
    (_set(DATE, "  "), f"{CONV}.session_1_date_time"),
    (_set(DATE, "yesterday"), f"{CONV}.session_1_date_time"),
    (_set(DATE, "Monday"), f"{CONV}.session_1_date_time"),
    (_set(DATE, "2 days ago"), f"{CONV}.session_1_date_time"),
    (_set(DATE, "01/02/2023"), f"{CONV}.session_1_date_time"),
    (_set(DATE, "13:04 pm on 20 January, 2023"), f"{CONV}.session_1_date_time"),
    (_set(DATE, "4:04 pm on 31 February, 2023"), f"{CONV}.session_1_date_time"),
    (_set(["observation", "session_1_observation", "Gina", 0], [123, "D1:3"]),
     f"{CONV}.session_1_observation.Gina[0]"),
    (_set(["observation", "session_1_observation", "Gina", 0], ["only text"]),
     f"{CONV}.session_1_observation.Gina[0]"),
    (_set(["observation", "session_1_observation", "Gina", 0], ["text", {"no": 1}]),
     f"{CONV}.session_1_observation.Gina[0][1]"),
    (_set(["observation", "session_1_observation", "Gina"], "notalist"), f"{CONV}.session_1_observation.Gina"),
    (_set(["observation", "session_1_observation"], []), f"{CONV}.session_1_observation"),
    (_set(["conversation", "session_1"], "notalist"), f"{CONV}.session_1"),
    (_set(["conversation", "session_1", 0], "a turn"), f"{CONV}.session_1[0]"),
    (_set(["conversation", "session_1", 0, "text"], None), f"{CONV}.session_1[0].text"),
    (_set(["conversation", "session_1", 0, "text"], 7), f"{CONV}.session_1[0].text"),
    (_set(["conversation", "session_1", 1, "dia_id"], "D1:1"), f"{CONV}.session_1[1].dia_id"),
    (_set(["conversation", "session_1", 0, "text"], "x" * 4_000_001), f"{CONV}.session_1[0].text"),
    (_set(["sample_id"], None), f"{CONV}.sample_id"),
    (_set(["sample_id"], ""), f"{CONV}.sample_id"),
]


@pytest.mark.parametrize("change,field", BAD, ids=[f"{i}:{f}" for i, (_, f) in enumerate(BAD)])
def test_bad_locomo_input_is_refused_naming_the_field_and_nothing_is_written(
        tmp_path: Path, change: Callable[[Any], None], field: str) -> None:
    data = copy.deepcopy(SAMPLE)
    change(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with MemoryLedger(home=tmp_path / "h", embedder="hash") as ml:
        with pytest.raises(BadInput) as err:
            ml.ingest(path)
        assert err.value.field == field
        assert ml.head() == 0  # nothing of the file was recorded


def test_the_cli_says_which_field_with_exit_2(tmp_path: Path) -> None:
    from tests.conftest import run_cli

    data = copy.deepcopy(SAMPLE)
    _set(DATE, "yesterday")(data)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    code, _, err = run_cli(["--home", str(tmp_path / "h"), "ingest", str(path), "--json"])
    assert code == 2, err
    error = json.loads(err.strip().splitlines()[-1])["error"]
    assert error["field"] == f"{CONV}.session_1_date_time" and "yesterday" in error["problem"]
    assert "Traceback" not in err


@pytest.mark.parametrize("text,iso", [
    ("4:04 pm on 20 January, 2023", "2023-01-20T16:04:00+00:00"),
    ("4:04 PM on 20 January 2023", "2023-01-20T16:04:00+00:00"),
    ("4:04 pm on 20 January, 2023 PST", "2023-01-21T00:04:00+00:00"),
    ("2023-01-20T16:04:00Z", "2023-01-20T16:04:00+00:00"),
    ("2023-01-20 16:04", "2023-01-20T16:04:00+00:00"),
    ("20 January 2023, 4:04 pm", "2023-01-20T16:04:00+00:00"),
    ("Jan 20, 2023", "2023-01-20T00:00:00+00:00"),
])
def test_absolute_dates_are_read(text: str, iso: str) -> None:
    assert parse_locomo_time(text, "f") == iso


def test_a_repeated_identical_turn_is_logged_once_and_reingest_is_idempotent(tmp_path: Path) -> None:
    data = copy.deepcopy(SAMPLE)
    turns = data[0]["conversation"]["session_1"]
    turns.insert(1, dict(turns[0]))  # the very same turn twice
    _set(DATE, "2023-01-20T16:04:00Z")(data)
    path = tmp_path / "twice.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with MemoryLedger(home=tmp_path / "h", embedder="hash") as ml:
        first = ml.ingest(path)
        assert first["messages"]["logged"] == 2 * 369  # each turn once, in both speakers' ledgers
        again = ml.ingest(path)
        assert (again["recorded"], again["messages"]["logged"]) == (0, 0)
