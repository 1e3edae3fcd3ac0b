"""Smoke test of scripts/bench_growth.py and scripts/bench_peers.py at a tiny size: they run and print their tables'
columns. No model is loaded (hash embedder; bench_peers only where mem0 is absent) and nothing is timed or asserted
about speed."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from tests.conftest import ROOT


def run(*args: str) -> str:
    p = subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout


def header(out: str, first: str) -> list[str]:
    lines = [line for line in out.splitlines() if line.startswith(f"| {first} |")]
    assert lines, out
    return [c.strip() for c in lines[0].strip("|").split("|")]


def test_bench_growth_prints_its_four_tables():
    out = run("scripts/bench_growth.py", "--facts", "400", "--batch", "100", "--window", "200", "--early", "200",
              "--probes", "2", "--footprint", "--footprint-embedder", "hash:64", "--data",
              "samples/locomo_conv30.json", "--rss-memories", "200")
    assert header(out, "events")[0] == "events"
    assert header(out, "measure") == ["measure", "p50 at 200", "p95 at 200", "load", "p50 at 400", "p95 at 400",
                                      "load", "ratio"]
    rows = [line for line in out.splitlines() if line.startswith("| append: record() of 1 fact")]
    assert len(rows) == 2 and all(len(r.strip("|").split("|")) == 8 for r in rows)
    assert any(line.startswith("| believed(as_of=now), user of 20 facts") for line in out.splitlines())
    assert any(line.startswith("| bytes on disk per fact") for line in out.splitlines())
    assert header(out, "where") == ["where", "bytes", "bytes per memory", "share", "ratio to the text"]
    assert any(line.startswith("| **all files** |") for line in out.splitlines())
    assert any(line.startswith("| events.db: stored_events") for line in out.splitlines())
    big = [line for line in out.splitlines() if line.startswith("| measure | 1,000 memories (baseline) |")]
    assert big and [c.strip() for c in big[0].strip("|").split("|")] == [
        "measure", "1,000 memories (baseline)", "200 memories", "ratio", "load"]
    assert any(line.startswith("| first search ms (the user's index loaded) |") for line in out.splitlines())
    assert "per memory" in out.split("Disk of that store")[1]


@pytest.mark.skipif(importlib.util.find_spec("mem0") is not None, reason="mem0 installed: a run would load the model")
def test_bench_peers_skips_cleanly_without_mem0():
    out = run("scripts/bench_peers.py", "--limit", "5")
    assert out.startswith("bench_peers: skipped: mem0 is not importable") and "pip install mem0ai" in out
