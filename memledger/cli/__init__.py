"""The ``memledger`` command line (typer + rich). ``--json`` output is a stable contract for other tools.

One module per group of verbs, each registering on the ``app`` of ``common``: ``facts``, ``timetravel``,
``sessions``, ``admin``, ``serve`` (the MCP and HTTP servers), ``keys`` (their API keys). Exit codes: 0 success;
2 bad input (a message naming the field and the fix, nothing written); 1 any other failure. No traceback is
printed for either; set ``MEMLEDGER_DEBUG=1`` to see one.

A command imports only the module of its own verb (:data:`VERB_MODULES`), so typer builds a handful of commands
instead of all of them and ``memledger assert`` never imports the servers, time travel or session verbs (the
cold start). ``--help``, no verb, or a verb missing from the map imports every module of this package, as does
reading ``memledger.cli.app``.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import pkgutil
import re
import sys
from typing import Any, Iterator

# pydantic looks for plugins (the ``pydantic`` entry-point group) when it builds its first model, by reading the
# metadata of every installed distribution: a cost on every cold command in a venv holding torch and
# transformers. The CLI uses none; set before any model is built (``import memledger`` builds none), and a value
# the user set is kept. The Python API leaves pydantic as it finds it.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

import typer  # noqa: E402

from ledger.errors import BadInput, MemledgerError  # noqa: E402

from .common import err  # noqa: E402

#: The module of this package that registers each top-level verb on ``common.app``. A verb missing here still
#: works (every module is imported then); listing it only makes its start faster. tests/test_cli_core.py checks
#: that every verb listed here is defined by the module named.
VERB_MODULES = {
    "project": "admin", "erase": "admin", "export": "admin", "rebuild": "admin", "verify": "admin",
    "signing-key": "admin", "verify-certificate": "admin",
    "assert": "facts", "correct": "facts", "retract": "facts", "remember": "facts", "unlink": "facts",
    "profile": "facts", "history": "facts", "search": "facts", "ingest": "facts",
    "keys": "keys", "serve": "serve", "session": "sessions", "resume": "sessions", "context": "sessions",
    "believed": "timetravel", "true-at": "timetravel", "diff": "timetravel", "audit": "timetravel",
    "quarantine": "hygiene", "due": "hygiene", "stats": "hygiene", "retract-source": "hygiene",
    "forget": "forget", "timeline": "timeline", "shards": "shards",
    "relate": "relations", "correct-relation": "relations", "unrelate": "relations", "relations": "relations",
    "entities": "relations", "identity": "relations", "import": "imports",
}
#: Verbs that embed a query in a fresh process: the ONNX session is prewarmed for them (:func:`main`).
_QUERY_VERBS = ("search", "context", "remember")
#: Verbs that run until stopped (servers, workers): they keep the Python API's reserve of per-fact keys.
_LONG_LIVED_VERBS = ("serve", "project")
#: Root options that take a value (``--home DIR``), skipped when looking for the verb in the arguments.
_ROOT_VALUE_OPTIONS = ("--home", "--dsn", "--projection-mode", "--shards")


def verb_modules() -> list[str]:
    """Every module of this package that registers verbs, in name order (the order ``--help`` lists them)."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name != "common")


def _verb(args: list[str]) -> str | None:
    """The verb of ``args`` (the first argument that is neither a root option nor its value), or None."""
    i = 0
    while i < len(args):
        a = args[i]
        if a in _ROOT_VALUE_OPTIONS:
            i += 2
            continue
        if a.startswith("-"):
            i += 1
            continue
        return a
    return None


def load_verbs(args: list[str] | None = None) -> Any:
    """Import the module of the verb in ``args`` (all of them for None, ``--help``, or an unlisted verb) and
    return the typer ``app`` with those verbs registered."""
    from .common import app

    module = VERB_MODULES.get(_verb(args) or "") if args is not None else None
    if args is not None and ("--help" in args or "-h" in args) and _verb(args) is None:
        module = None
    for name in [module] if module is not None else verb_modules():
        importlib.import_module(f"{__name__}.{name}")
    return app


def __getattr__(name: str) -> Any:
    if name == "app":  # ``from memledger.cli import app``: the whole command, every verb registered
        return load_verbs()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

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


def _damaged_store(exc: BaseException) -> tuple[str, str] | None:
    """(problem, fix) for SQLite reporting a damaged file after the open's checks passed (a malformed page met by a
    read), else None. SQLite does not say which file, so the fix says how to find it (rather than a bare "error:
    DatabaseError: database disk image is malformed")."""
    from ledger.errors import is_store_damage

    if not is_store_damage(exc):
        return None
    return (f"a file of the store is damaged (SQLite: {exc})",
            "find which with `sqlite3 FILE 'PRAGMA integrity_check'` on events.db, projections.db and keys.db: "
            "projections.db can be moved aside (with its -wal and -shm) and is rebuilt from the log; restore the "
            "others from a backup")


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: runs the CLI and maps errors to exit codes without tracebacks.

    Exit 0 success, 2 bad input (usage errors included), 1 any other failure. With ``--json`` anywhere in the
    arguments, an error also ends stderr with one JSON line (:func:`_json_error`).
    """
    args = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in args
    verb = _verb(args)
    if verb in _QUERY_VERBS and "--help" not in args:
        # the query encoder's session loads on a thread while the ledger is imported and opened
        from projections.retrieval.embedders import prewarm_default_onnx

        prewarm_default_onnx()
    # A one-shot call stores exactly the per-fact keys it uses (ledger/crypto.py FIRST_RESERVE); servers and workers
    # keep the reserve. Restored after, for a caller running the CLI in its own process (tests). Every verb that
    # writes imports ledger.crypto anyway.
    from ledger import crypto

    kept = crypto.FIRST_RESERVE
    if verb not in _LONG_LIVED_VERBS:
        crypto.FIRST_RESERVE = 0
    try:
        with _warnings_to_stderr():
            _run(args, as_json)
    finally:
        crypto.FIRST_RESERVE = kept


@contextlib.contextmanager
def _warnings_to_stderr() -> Iterator[None]:
    """The warnings the ledger logs (``memledger`` logger: an exposed home, a damaged embedding cache, an index file
    not saved) are part of a command's stderr, as Python's last-resort handler prints them in a process of its own
    ("memledger: ..."). A program that configures logging, or runs the CLI in its own process (``main([...])``, as
    the tests do), replaces that handler, and the warnings left the command's stderr. A handler of the command's
    own, for its duration, keeps them there: same stream, same level, same one-line format."""
    import logging

    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    logger = logging.getLogger("memledger")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)  # tolerates its absence (`serve` sets the logger's handlers itself)


#: the flags that give an agent id and a run id: the name a request's refusal gives each (the flag without its
#: dashes), and the names of the Python API and the recorded field, which the caller did not type
_SCOPE_FLAGS = {"--agent": ("agent", ("agent_id", "actor")), "--actor": ("actor", ("agent_id",)),
                "--run": ("run", ("run_id", "session_id")), "--session": ("session", ("run_id",))}


def _scope_worded(exc: BadInput, args: list[str]) -> BadInput:
    """A refusal of an agent or run id named as the flag the caller gave it with (``--agent``, not ``actor``, the
    field ``assert --agent A`` records it in; a request's ``agent`` stays as it is), its fix too."""
    field = exc.field or ""
    bare = field.rsplit(".", 1)[-1]
    for flag, (own, others) in _SCOPE_FLAGS.items():
        if bare in (own, *others) and any(a == flag or a.startswith(flag + "=") for a in args):
            fix = re.sub(rf"\bleave (?:{'|'.join((own, *others))}) out\b", f"leave {flag} out", exc.fix or "")
            return BadInput(flag if bare in others else field, exc.problem, fix)
    return exc


def _worded(exc: BadInput, command: Any, args: list[str]) -> BadInput:
    """A request's refusal (memledger/requests.py) in the terms of the command that built the request: its fields
    named by their flags (``--in``, ``-k``), an agent or run id's by the flag given (:func:`_scope_worded`); any
    other refusal as it is."""
    return _scope_worded(_worded_request(exc, command, args), args)


def _worded_request(exc: BadInput, command: Any, args: list[str]) -> BadInput:
    own = re.search(r"give agent_id=('[^']*') alone$", exc.fix or "") if exc.field == "user_id" else None
    if own is not None:  # an agent's own memories, in the CLI's terms
        return BadInput(exc.field, exc.problem, exc.fix[:own.start()] + f"give USER - with --agent {own.group(1)[1:-1]}")
    worded = getattr(exc, "worded", None)
    if worded is None and exc.field == "agent_id":  # the Python API's agent_id is the CLI's --agent
        return BadInput("--agent", exc.problem,
                        re.sub(r"agent_id=('[^']*'|\"[^\"]*\")", lambda m: f"--agent {m.group(1)[1:-1]}", exc.fix or ""))
    sub = getattr(command, "commands", {}).get(_verb(args) or "")
    if worded is None or sub is None:
        return exc
    from .common import request_names

    return worded(request_names(sub))


def _run(args: list[str], as_json: bool) -> None:
    """:func:`main` once the process is set up: run the command, map its errors to exit codes (``sys.exit``)."""
    command = typer.main.get_command(load_verbs(args))
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
        exc = _worded(exc, command, args)
        if not exc.fix:  # every refusal says what to send instead
            verb = _verb(args)
            exc = BadInput(exc.field, exc.problem, f"see `memledger {verb} --help` for what it takes" if verb else
                           "see `memledger --help`")
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
        damaged = _damaged_store(exc)
        if damaged is not None:  # found past the open's checks (a damaged page): say what to do, as they do
            err.print(f"error: {damaged[0]}; {damaged[1]}", markup=False)
            if as_json:
                _json_error(None, damaged[0], damaged[1], 1)
            sys.exit(1)
        err.print(f"error: {type(exc).__name__}: {exc}", markup=False)
        if as_json:
            _json_error(None, f"{type(exc).__name__}: {exc}", "", 1)
        sys.exit(1)
    sys.exit(0)

if __name__ == "__main__":
    main()
