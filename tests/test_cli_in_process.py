"""The CLI run inside another program's process (``memledger.cli.main([...])``, as the test suite runs it): each call
prints to the streams of that call and leaves the process as it found it; and the suite's in-process runner
(tests/conftest.py ``run_cli``) answers as a ``python -m memledger`` process does."""

from __future__ import annotations

import io
import json
import re
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

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
    before = list(logging.getLogger("memledger").handlers)  # what the process had (another test's server, say)
    logging.getLogger().addHandler(host)
    try:
        code, _, err = call(["--home", str(home), "profile", "u1"])
    finally:
        logging.getLogger().removeHandler(host)
    assert code == 0 and "can be read by other local accounts" in err and f"chmod -R go-rwx {home}" in err
    assert logging.getLogger("memledger").handlers == before  # the command's handler went with it


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


def test_a_call_in_the_test_process_answers_as_a_memledger_process_does(cli: Any, cli_process: Any) -> None:
    """The suite runs the CLI in its own process (tests/conftest.py ``run_cli``); here the same calls go to
    ``python -m memledger`` processes too, on the same store, and exit code, stdout and stderr must be the same: a
    usage error, bad input with its JSON error line, a --json read, --help, stdin that is no terminal, and a
    failure (exit 1)."""
    from tests.conftest import CLI

    assert cli("assert", "u1", "preference.drink", "tea")[0] == 0
    for args in (["profile"], ["assert", "u1", "Bad Key", "x", "--json"], ["history", "u1", "--json"],
                 ["profile", "--help"], ["erase", "u1"]):
        assert cli(*args, input="y\n") == cli_process(*args, input="y\n"), args
    nowhere = {"home": "/proc/nowhere/h"}
    failed = CLI(nowhere)("profile", "u1")
    assert failed[0] == 1 and failed == CLI(nowhere, subprocess=True)("profile", "u1")


def test_an_exception_escaping_main_comes_back_as_a_traceback_and_exit_1() -> None:
    """What a process would die of (here: MEMLEDGER_DEBUG=1 lets an unexpected error through) is, in the test
    process, exit 1 with the traceback on stderr, so ``"Traceback" not in err`` still sees it."""
    from memledger import cli
    from tests.conftest import run_cli

    @cli.app.command("zz-raise-probe", hidden=True)
    def _probe() -> None:
        raise RuntimeError("an unexpected failure")

    try:
        assert run_cli(["zz-raise-probe"]) == (1, "", "error: RuntimeError: an unexpected failure\n")
        code, out, err = run_cli(["zz-raise-probe"], env={"MEMLEDGER_DEBUG": "1"})
        assert (code, out) == (1, "") and err.startswith("Traceback (most recent call last):")
        assert err.rstrip().endswith("RuntimeError: an unexpected failure")
    finally:
        cli.app.registered_commands = [c for c in cli.app.registered_commands if c.name != "zz-raise-probe"]
