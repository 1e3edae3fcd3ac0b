"""``memledger timeline --html`` never replaces what is not a regular file, and refuses a user the ledger knows
nothing about (``--html /dev/null`` as root turned the device into a file)."""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import CLI


def test_a_symlink_or_a_special_file_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    cli = CLI({"home": tmp_path / "ledger"})
    assert cli("assert", "ana", "preference.drink", "tea")[0] == 0
    real = tmp_path / "real.html"
    real.write_text("keep me")
    link = tmp_path / "link.html"
    link.symlink_to(real)
    fifo = tmp_path / "pipe.html"
    os.mkfifo(fifo)
    for target in (link, fifo):
        code, _, err = cli("timeline", "ana", "--html", str(target))
        assert code == 2 and "--html" in err and "symlink or a special file" in err and "Traceback" not in err
    assert link.is_symlink() and real.read_text() == "keep me" and fifo.is_fifo()
    assert not list(tmp_path.glob(".timeline-*"))


def test_a_directory_that_takes_no_file_is_bad_input(tmp_path: Path) -> None:
    cli = CLI({"home": tmp_path / "ledger"})
    assert cli("assert", "ana", "preference.drink", "tea")[0] == 0
    code, _, err = cli("timeline", "ana", "--html", "/proc/self/timeline.html")
    assert code == 2 and "--html" in err and "cannot create a file" in err and "Traceback" not in err


def test_a_user_the_ledger_knows_nothing_about_is_refused(tmp_path: Path) -> None:
    cli = CLI({"home": tmp_path / "ledger"})
    assert cli("assert", "ana", "preference.drink", "tea")[0] == 0
    code, _, err = cli("timeline", "anna", "--html", str(tmp_path / "t.html"))
    assert code == 2 and "USER" in err and "holds nothing about 'anna'" in err
    assert not (tmp_path / "t.html").exists()
    code, out, _ = cli("timeline", "ana", "--html", str(tmp_path / "t.html"))
    assert code == 0 and "1 keys, 1 versions" in out and (tmp_path / "t.html").stat().st_size > 1000
