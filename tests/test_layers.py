"""The package layout holds: arrows one way (memledger -> replay -> projections -> ledger), no import cycle.

The contracts live in pyproject.toml ([tool.importlinter]) and are checked by import-linter, which reads every import
statement through grimp, lazy (function-level) and TYPE_CHECKING imports included. The last two tests show the check
can fail: they break the layout in a copy of the tree and expect `lint-imports` to refuse it, naming the import.
A module holds one job: at most :data:`MAX_MODULE_LINES` lines, unless it is on the allow-list below.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGES = ("memledger", "replay", "projections", "ledger")
LINT = str(Path(sys.executable).with_name("lint-imports"))

#: A module longer than this does more than one job: split it by job (as projections/vectors.py was split into
#: projections/retrieval/) rather than raise the limit.
MAX_MODULE_LINES = 800
#: Modules allowed past the limit, at most three, each with why it is still one job.
LONG_MODULES: set[str] = set()  # none today; at most three, each with a comment saying why


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(root))
    return subprocess.run([LINT, str(root / "pyproject.toml"), "--no-cache"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A copy of the four packages and pyproject.toml to break."""
    for p in PACKAGES:
        shutil.copytree(ROOT / p, tmp_path / p, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_layout_contracts_are_kept():
    proc = lint(ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 kept, 0 broken" in proc.stdout


def test_an_upward_lazy_import_from_ledger_breaks_the_layers(tree: Path):
    with open(tree / "ledger" / "domain.py", "a") as f:
        f.write("\n\ndef _upward():\n    from memledger import MemoryLedger\n\n    return MemoryLedger\n")
    proc = lint(tree)
    assert proc.returncode == 1
    assert "Arrows one way: memledger -> replay -> projections -> ledger BROKEN" in proc.stdout
    assert "ledger.domain -> memledger" in proc.stdout


def test_a_type_only_cycle_between_two_modules_is_refused(tree: Path):
    # ledger.application imports ledger.errors; a TYPE_CHECKING import back makes a cycle.
    with open(tree / "ledger" / "errors.py", "a") as f:
        f.write("\n\nfrom typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from ledger import application\n")
    proc = lint(tree)
    assert proc.returncode == 1
    assert "No import cycle between the modules (or sub-packages) of any package BROKEN" in proc.stdout
    assert "- .errors -> .application (1 import)" in proc.stdout


def test_both_imports_work_and_name_the_same_class():
    import ledger
    import memledger
    from ledger import MemoryLedger as Old
    from memledger import MemoryLedger

    assert Old is MemoryLedger is memledger.MemoryLedger
    assert MemoryLedger.__module__ == "memledger.api"
    assert "MemoryLedger" in ledger.__all__
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        ledger.Nope  # noqa: B018


def test_python_dash_m_memledger_is_the_cli():
    proc = subprocess.run([sys.executable, "-m", "memledger", "--help"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0
    for verb in ("assert", "profile", "believed", "session", "context", "rebuild", "verify"):
        assert verb in proc.stdout


def _line_counts() -> dict[str, int]:
    out = {}
    for p in PACKAGES:
        for path in sorted((ROOT / p).rglob("*.py")):
            with path.open(encoding="utf-8") as f:
                out[path.relative_to(ROOT).as_posix()] = sum(1 for _ in f)
    return out


def test_no_module_is_over_the_line_limit_unless_allowed():
    assert len(LONG_MODULES) <= 3, "at most three modules may pass the limit: split one instead"
    counts = _line_counts()
    too_long = {m: n for m, n in counts.items() if n > MAX_MODULE_LINES and m not in LONG_MODULES}
    assert not too_long, (f"modules over {MAX_MODULE_LINES} lines (split them by job, or, at most three, allow "
                          f"them in LONG_MODULES with why): {too_long}")
    stale = {m for m in LONG_MODULES if counts.get(m, 0) <= MAX_MODULE_LINES}
    assert not stale, f"allowed but no longer over the limit (remove them from LONG_MODULES): {stale}"


#: Where the backend is chosen and where each backend's behaviour is written: the store's backend
#: (ledger/config.py ``Settings.backend`` chooses, ledger/backend.py implements), the read side's SQL dialect
#: (projections/db.py), the log's recorders (ledger/recorders*.py). Anywhere else, code asks the chosen object.
BACKEND_MODULES = {"ledger/config.py", "ledger/backend.py", "ledger/recorders.py", "ledger/recorders_postgres.py",
                   "projections/db.py"}
#: What choosing a backend again looks like: an ``if`` on the settings, on the dialect's name, on the library's
#: recorder classes; and a private name of eventsourcing.
BACKEND_BRANCHES = (
    r"settings\.home is (not )?None", r"settings\.dsn is (not )?None", r"\bdialect [!=]=", r"\bdialect\.name [!=]=",
    r"isinstance\([^)]*(SQLite|Postgres)\w*Recorder", r'sys\.modules\.get\("eventsourcing',
    r"from eventsourcing[\w.]* import [^\n]*\b_\w+", r"\._(record|take_snapshots|notify)\(",
)


def _backend_branches(root: Path) -> dict[str, list[str]]:
    import re

    pattern = re.compile("|".join(f"(?:{p})" for p in BACKEND_BRANCHES))
    out: dict[str, list[str]] = {}
    for p in PACKAGES:
        for path in sorted((root / p).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if rel in BACKEND_MODULES:
                continue
            hits = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if pattern.search(line)]
            if hits:
                out[rel] = hits
    return out


def test_the_backend_is_chosen_in_one_place():
    assert _backend_branches(ROOT) == {}


def test_a_backend_branch_outside_the_backend_modules_is_found(tree: Path):
    with open(tree / "memledger" / "locks.py", "a") as f:
        f.write("\n\ndef _where(store):\n    return 'file' if store.settings.home is not None else 'server'\n")
    with open(tree / "memledger" / "optout.py", "a") as f:
        f.write("\n\ndef _wal(ml):\n    return ml.db.dialect == 'sqlite'\n")
    assert _backend_branches(tree) == {
        "memledger/locks.py": ["return 'file' if store.settings.home is not None else 'server'"],
        "memledger/optout.py": ["return ml.db.dialect == 'sqlite'"],
    }
