"""The CLI run inside another program's process (``memledger.cli.main([...])``, as the test suite runs it): each call
prints to the streams of that call and leaves the process as it found it."""

from __future__ import annotations

import io
import json
import re
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from memledger.cli import main


def call(argv: list[str], stdout: io.StringIO | None = None) -> tuple[int, str, str]:
    out, err = stdout or io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err), pytest.raises(SystemExit) as exit_:
        main(argv)
    return exit_.value.code, out.getvalue(), err.getvalue()


def width(printed: str) -> int:
    """Columns of the widest line, colour codes left out."""
    return max(len(re.sub(r"\x1b\[[0-9;]*m", "", line)) for line in printed.splitlines())


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_each_call_prints_as_its_own_stdout_asks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The consoles were built once, at import, for the stdout of that moment: a call on a terminal after an import
    under a pipe got no colours and a piped width, and a piped call after an import on a terminal got colour codes
    and the terminal's width."""
    for name in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setenv("COLUMNS", "70")  # the terminal's width
    home = ["--home", str(tmp_path / "h")]
    assert call([*home, "assert", "u1", "preference.drink", "tea"])[0] == 0
    for _ in range(2):  # terminal, pipe, terminal, pipe
        code, on_terminal, _ = call([*home, "profile", "u1"], stdout=Terminal())
        assert code == 0 and "tea" in on_terminal
        assert "\x1b[1m" in on_terminal and width(on_terminal) <= 70  # a bold header
        code, piped, _ = call([*home, "profile", "u1"])
        assert code == 0 and "tea" in piped
        assert "\x1b[" not in piped and width(piped) > 70  # wide: cells are not cut


def test_the_ledgers_warnings_reach_the_commands_stderr_when_logging_is_configured(tmp_path: Path) -> None:
    """A warning of the ledger (here: a home others can read) reached stderr through Python's last-resort handler
    only, which a program that has configured logging replaces (pytest's own handlers do): it left the command."""
    import logging
    import os

    home = tmp_path / "h"
    assert call(["--home", str(home), "assert", "u1", "preference.drink", "tea"])[0] == 0
    os.chmod(home, 0o755)
    os.chmod(home / "projections.db", 0o644)
    host = logging.StreamHandler(io.StringIO())  # the host program's logging
    logging.getLogger().addHandler(host)
    try:
        code, _, err = call(["--home", str(home), "profile", "u1"])
    finally:
        logging.getLogger().removeHandler(host)
    assert code == 0 and "can be read by other local accounts" in err and f"chmod -R go-rwx {home}" in err
    assert logging.getLogger("memledger").handlers == []  # the command's handler went with it


def test_project_follow_puts_back_the_signal_handlers_it_found(tmp_path: Path) -> None:
    """``project --follow`` stops on SIGTERM or SIGINT; the handlers it set for that stayed after it returned, so
    the host program's Ctrl-C (KeyboardInterrupt) and SIGTERM handling were gone for good."""
    import os
    import signal
    import threading

    home = ["--home", str(tmp_path / "h")]
    assert call([*home, "assert", "u1", "preference.drink", "tea"])[0] == 0
    found = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}

    returned = threading.Event()

    def stop_when_following() -> None:  # SIGTERM only once the command's handler is in place
        while signal.getsignal(signal.SIGTERM) is found[signal.SIGTERM]:
            if returned.wait(0.01):
                return
        os.kill(os.getpid(), signal.SIGTERM)

    stopper = threading.Thread(target=stop_when_following)
    stopper.start()
    try:
        code, out, err = call([*home, "project", "--follow", "--json"])
    finally:
        returned.set()
        stopper.join()
        now = {sig: signal.getsignal(sig) for sig in found}
        for sig, handler in found.items():
            signal.signal(sig, handler)
    assert (code, json.loads(out)) == (0, {"position": 1}), err
    assert now == found
