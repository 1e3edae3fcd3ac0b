"""The recorded ``--json`` outputs of every read verb and write receipt stay identical (tests/json_contract.py).

The golden file was recorded on the shipped sample before the code was re-laid into four packages; a change here
is a change of a contract other tools call, and must be deliberate (regenerate with
``python -m tests.json_contract --update`` and say why in the commit).
"""

from __future__ import annotations

import json

from tests.json_contract import GOLDEN, SCRIPT, run_scenario


def test_every_json_output_matches_the_recorded_contract(tmp_path):
    expected = json.loads(GOLDEN.read_text())
    actual = run_scenario(tmp_path / "ledger")
    assert list(actual) == [name for name, _ in SCRIPT] == sorted(expected, key=list(actual).index)
    for name in actual:
        assert actual[name] == expected[name], f"--json output of {name!r} changed"


def test_mask_blanks_clock_instants_and_ids_only():
    from tests.json_contract import mask

    assert mask({"recorded_at": "2026-12-01T12:00:00Z", "valid_from": "2023-01-20T16:04:00Z",
                 "event_id": "abc", "ids": ["0191e0a4-58c4-7a4b-9d3c-2f1e0a4b58c4"], "n": 3}) == {
        "recorded_at": "<masked>", "valid_from": "2023-01-20T16:04:00Z", "event_id": "<masked>",
        "ids": ["<masked>"], "n": 3}
