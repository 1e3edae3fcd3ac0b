"""The ``memledger`` command line (typer + rich). ``--json`` output is a stable contract for other tools.

One module per group of verbs, each registering on the ``app`` of ``common``: ``facts``, ``timetravel``,
``sessions``, ``admin``, ``serve`` (the MCP and HTTP servers), ``keys`` (their API keys). Exit codes: 0 success;
2 bad input (a message naming the field and the fix, nothing written); 1 any other failure. No traceback is
printed for either; set ``MEMLEDGER_DEBUG=1`` to see one.
"""

from __future__ import annotations

import json
import os
import sys

import typer

from ledger.errors import BadInput, MemledgerError

from . import admin, facts, keys, serve, sessions, timetravel  # noqa: F401 (each registers its verbs on `app`)
from .common import app, err

try:  # typer >= 0.2x vendors click as typer._click; older typer uses click itself
    from typer._click.exceptions import ClickException
except ImportError:  # pragma: no cover
    from click import ClickException  # type: ignore[no-redef,assignment]

__all__ = ["app", "main"]


def _plain(message: str) -> str:
    """A usage error's message without pydantic's phrasing: "Input should be a valid number, unable to parse string
    as a number" -> "is not a number" (typer converts option values through pydantic)."""
    import re

    message = re.sub(r"Input should be a valid (number|integer)[^.]*", lambda m: "is not a " + (
        "number" if m.group(1) == "number" else "whole number"), message)
    return re.sub(r"Input should be ", "must be ", message)


def _json_error(field: str | None, problem: str, fix: str, code: int) -> None:
    """With ``--json``, the last line on stderr is the error as JSON: ``{"error": {"field", "problem", "fix"},
    "exit": N}`` (docs/schemas/error.schema.json), after the human sentence."""
    sys.stderr.flush()
    sys.stderr.write(json.dumps({"error": {"field": field, "problem": problem, "fix": fix}, "exit": code},
                                ensure_ascii=False) + "\n")
    sys.stderr.flush()


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: runs the CLI and maps errors to exit codes without tracebacks.

    Exit 0 success, 2 bad input (usage errors included), 1 any other failure. With ``--json`` anywhere in the
    arguments, an error also ends stderr with one JSON line (:func:`_json_error`).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in args
    command = typer.main.get_command(app)
    try:
        rv = command.main(args=args, prog_name="memledger", standalone_mode=False)
        # Without standalone mode click *returns* the code of a `typer.Exit(n)` instead of exiting with it.
        if isinstance(rv, int) and rv != 0:
            sys.exit(rv)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except ClickException as exc:  # usage errors: exit 2, as click does
        exc.message = _plain(exc.message)  # typer converts values with pydantic: word its refusals as ours
        exc.show()
        if as_json:
            hint = getattr(exc, "param_hint", None) or getattr(getattr(exc, "param", None), "name", None)
            field = hint if isinstance(hint, str) else None
            _json_error(field, exc.format_message(), "see --help", exc.exit_code)
        sys.exit(exc.exit_code)
    except (KeyboardInterrupt, typer.Abort):
        err.print("aborted")
        sys.exit(1)
    except BrokenPipeError:  # `memledger ... | head`
        sys.exit(0)
    except BadInput as exc:
        err.print(f"error: {exc}", markup=False)
        if as_json:
            _json_error(exc.field, exc.problem, exc.fix, 2)
        sys.exit(2)
    except MemledgerError as exc:
        err.print(f"error: {exc}", markup=False)
        if as_json:  # a failure that names its field (RebuildInProgress) says so, like bad input
            _json_error(getattr(exc, "field", None), getattr(exc, "problem", None) or str(exc),
                        getattr(exc, "fix", "") or "", exc.exit_code)
        sys.exit(exc.exit_code)
    except Exception as exc:  # noqa: BLE001 - a failure, not bad input: exit 1, traceback only on request
        if os.environ.get("MEMLEDGER_DEBUG"):
            raise
        err.print(f"error: {type(exc).__name__}: {exc}", markup=False)
        if as_json:
            _json_error(None, f"{type(exc).__name__}: {exc}", "", 1)
        sys.exit(1)
    sys.exit(0)

if __name__ == "__main__":
    main()
