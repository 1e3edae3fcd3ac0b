"""The ``memledger`` command line (typer + rich). ``--json`` output is a stable contract for other tools.

One module per group of verbs, each registering on the ``app`` of ``common``: ``facts``, ``timetravel``,
``sessions``, ``admin``, ``serve`` (the MCP and HTTP servers), ``keys`` (their API keys). Exit codes: 0 success;
2 bad input (a message naming the field and the fix, nothing written); 1 any other failure. No traceback is
printed for either; set ``MEMLEDGER_DEBUG=1`` to see one.
"""

from __future__ import annotations

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


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: runs the CLI and maps errors to exit codes without tracebacks."""
    command = typer.main.get_command(app)
    try:
        rv = command.main(args=argv, prog_name="memledger", standalone_mode=False)
        # Without standalone mode click *returns* the code of a `typer.Exit(n)` instead of exiting with it.
        if isinstance(rv, int) and rv != 0:
            sys.exit(rv)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except ClickException as exc:  # usage errors: exit 2, as click does
        exc.show()
        sys.exit(exc.exit_code)
    except (KeyboardInterrupt, typer.Abort):
        err.print("aborted")
        sys.exit(1)
    except BrokenPipeError:  # `memledger ... | head`
        sys.exit(0)
    except BadInput as exc:
        err.print(f"error: {exc}", markup=False)
        sys.exit(2)
    except MemledgerError as exc:
        err.print(f"error: {exc}", markup=False)
        sys.exit(exc.exit_code)
    except Exception as exc:  # noqa: BLE001 - a failure, not bad input: exit 1, traceback only on request
        if os.environ.get("MEMLEDGER_DEBUG"):
            raise
        err.print(f"error: {type(exc).__name__}: {exc}", markup=False)
        sys.exit(1)
    sys.exit(0)


if __name__ == "__main__":
    main()
