"""What every group of CLI verbs shares: the typer ``app``, the store options, output helpers, shared flags.

Exit codes: 0 success; 2 bad input (a message naming the field and the fix, nothing written); 1 any other failure.
No traceback is printed for either; set ``MEMLEDGER_DEBUG=1`` to see one.
"""

from __future__ import annotations

import json
import re
import sys
from contextlib import contextmanager
from typing import Any, Iterator, List, Optional

import typer
from rich.console import Console

from ledger.errors import BadInput

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="memledger: an event-sourced memory ledger for LLM agents.")


class StreamConsole:
    """``out`` and ``err``: the rich Console of whatever ``sys.stdout`` / ``sys.stderr`` is when a command prints.

    A Console settles at construction what its stream is (a terminal or not: colours, and ``out``'s width). Built
    once at import, the two consoles kept the streams of the moment ``memledger.cli`` was first imported, so a
    program running the CLI in its own process (``memledger.cli.main([...])`` under typer's ``CliRunner``, which
    swaps sys.stdout and sys.stderr for every call, as the test suite does) could get the colour codes and width of
    a terminal it no longer writes to. One Console is kept, and built again when the stream has changed.

    Piped output (scripts, `| head`) gets wide tables instead of rich's 80-column default, so cells are not cut.
    No markup and no emoji codes: a memory is printed as it was said (rich's default turned a user's ":thumbs_up:"
    into an emoji, and loaded its ~3,600 emoji names on every cold call to do so).
    """

    def __init__(self, *, stderr: bool) -> None:
        self._stderr = stderr
        self._held: tuple[Any, Console] | None = None  # (the stream, its Console)

    def current(self) -> Console:
        """The Console of the stream as it is now (``console=`` of a rich Progress)."""
        stream = sys.stderr if self._stderr else sys.stdout
        held = self._held
        if held is None or held[0] is not stream:
            width = None if self._stderr or stream.isatty() else 200
            held = self._held = (stream, Console(stderr=self._stderr, highlight=False, soft_wrap=True, markup=False,
                                                 emoji=False, width=width))
        return held[1]

    def print(self, *objects: Any, **kwargs: Any) -> None:
        self.current().print(*objects, **kwargs)

    def __getattr__(self, name: str) -> Any:  # the rest of rich's Console (is_terminal, width, ...)
        if name.startswith("_"):  # not ours to forward (and no recursion before __init__ has run)
            raise AttributeError(name)
        return getattr(self.current(), name)


out = StreamConsole(stderr=False)
err = StreamConsole(stderr=True)


def _print_version(wanted: bool) -> None:
    if wanted:
        from importlib.metadata import version as dist_version

        out.print(f"memledger {dist_version('memledger')}")
        raise typer.Exit(0)


@app.callback()
def _root(
    ctx: typer.Context,
    home: Optional[str] = typer.Option(None, "--home", help="Ledger directory (default $MEMLEDGER_HOME or ./.memledger)."),
    dsn: Optional[str] = typer.Option(None, "--dsn", help="postgresql://... to use PostgreSQL (default $MEMLEDGER_DSN)."),
    projection_mode: Optional[str] = typer.Option(
        None, "--projection-mode",
        help="inline (default, $MEMLEDGER_PROJECTION_MODE): catch projections up in this process; worker: a "
             "`memledger project --follow` process does."),
    shards: Optional[str] = typer.Option(
        None, "--shards",
        help="A TOML shard map (default $MEMLEDGER_SHARDS): users partitioned across PostgreSQL servers, each verb "
             "routed by user (docs/scale.md)."),
    version: bool = typer.Option(False, "--version", is_eager=True, callback=lambda v: _print_version(v),
                                 help="Print memledger's version and exit."),
) -> None:
    ctx.obj = {"home": home, "dsn": dsn, "projection_mode": projection_mode, "shards": shards}


@contextmanager
def open_ledger(ctx: typer.Context, *, embedder: str | None = None) -> Iterator[Any]:
    """The store named by the root options, closed afterwards. A command about one USER that completes for an
    erased user says so on stderr (exit 0; ``--json`` objects also carry ``"erased": true`` and when), so an erased
    user never reads as an empty one. ``embedder="none"`` opens it without the vectors projection (a command that
    never searches, such as ``keys``: no embedder is resolved and the semantic index is not touched)."""
    obj = ctx.find_root().obj or {}
    ml = open_store(obj, embedder=embedder)
    try:
        yield ml
        user = ctx.params.get("user")
        if user == NO_USER and isinstance(ctx.params.get("agent") or ctx.params.get("actor"), str):
            from ledger.agent_spaces import space_of

            user = space_of(ctx.params.get("agent") or ctx.params.get("actor"))  # opened by cli_user
        if isinstance(user, str) and ctx.info_name != "erase":
            at = ml.erased_at(user)
            if at is not None:
                err.print(f"note: {user} was erased at {at.isoformat()}: nothing is held about them "
                          "(erasure is irreversible)")
    finally:
        ml.close()


def shard_map_given(obj: dict[str, Any]) -> bool:
    """True when the root options (``ctx.find_root().obj``) or ``$MEMLEDGER_SHARDS`` name a shard map."""
    import os

    return obj.get("shards") is not None or bool(os.environ.get("MEMLEDGER_SHARDS"))


def open_store(obj: dict[str, Any], *, embedder: str | None = None) -> Any:
    """A ``MemoryLedger`` for ``--home``/``--dsn``, or a ``ShardedLedger`` for ``--shards``/``$MEMLEDGER_SHARDS``
    (given together with --home or --dsn: bad input)."""
    # only a shard map pays for importing the sharding modules (a cold CLI call opens here: docs/performance.md)
    if shard_map_given(obj):
        from memledger.sharding.sharded import shard_map_from_env

        shard_map = shard_map_from_env(obj.get("shards"))
    else:
        shard_map = None
    if shard_map is not None:
        if obj.get("home") is not None or obj.get("dsn") is not None:
            raise BadInput("--shards", "given together with --home or --dsn",
                           "a shard map names every store: leave --home and --dsn out (or unset $MEMLEDGER_SHARDS)")
        from memledger.sharding.sharded import ShardedLedger

        return ShardedLedger(shard_map, projection_mode=obj.get("projection_mode"), embedder=embedder)
    from memledger.api import MemoryLedger

    return MemoryLedger(home=obj.get("home"), dsn=obj.get("dsn"), projection_mode=obj.get("projection_mode"),
                        **({"embedder": embedder} if embedder is not None else {}))


def clip(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters for a table cell, the cut marked with "…" (``--json`` has it whole).
    A value cut with no mark would read as a shorter value."""
    return text if len(text) <= width else text[: width - 1] + "\u2026"


#: a value that opens a JSON object, or a list whose first item is JSON ("[1,", '["a"'), not "[WIP] notes"
_JSON_OPENING = re.compile(r'\s*(?:\{|\[\s*(?:[-\d"\[{\]]|true\b|false\b|null\b))')


def parse_value(raw: str) -> Any:
    """VALUE is JSON when it parses as JSON (NaN/Infinity excluded), else the string itself. A value that opens a
    JSON object or list ("{...", "[1, ...") but does not parse is refused (BadInput naming VALUE): it was meant as
    JSON, and storing the broken text as a string would hide the typo; "[WIP] notes" is text."""

    def no_constants(name: str) -> Any:
        raise ValueError(name)

    try:
        return json.loads(raw, parse_constant=no_constants)
    except ValueError as exc:
        if _JSON_OPENING.match(raw):
            raise BadInput("VALUE", f"opens a JSON {'object' if raw.lstrip()[0] == '{' else 'list'} but is not valid "
                           f"JSON ({str(exc).split(':')[0]})",
                           "fix the JSON, or quote it as a JSON string to store the text itself") from None
        return raw
    except RecursionError:
        raise BadInput("VALUE", "is JSON nested too deeply to be stored", "flatten it") from None


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2, sort_keys=False) + "\n")


def emit_receipt(receipt: Any, as_json: bool) -> None:
    if as_json:
        emit_json(receipt.model_dump(mode="json"))
        return
    note = " (idempotent retry: nothing new recorded)" if receipt.replayed else ""
    out.print(f"{receipt.kind} {receipt.user_id} {receipt.key} v{receipt.version} [{receipt.effect}] "
              f"at position {receipt.position}{note}")


# Options shared by assert / correct ---------------------------------------------------------------------------
TextOpt = typer.Option(None, "--text", help="The human sentence of the fact.")
ObservedOpt = typer.Option(None, "--observed-at", help="When the source said it (ISO 8601 with offset).")
SourceOpt = typer.Option(None, "--source", help="user_statement | agent_inference | external_import | system_feedback")
SourceRefOpt = typer.Option(None, "--source-ref", help="Message or document id it came from.")
SessionOpt = typer.Option(None, "--session", help="Session id.")
ConfidenceOpt = typer.Option(None, "--confidence", help="0..1 (default by source).")
IdemOpt = typer.Option(None, "--idempotency-key", help="A retried command with the same key records nothing new.")
ActorOpt = typer.Option(None, "--actor", help="Who or what recorded it.")
TraceOpt = typer.Option(None, "--trace", help="Trace id of the agent turn.")
ReasonOpt = typer.Option(None, "--reason", help="Why (kept in history).")
JsonOpt = typer.Option(False, "--json", help="Print JSON (a stable contract).")

# Scopes (memledger/scopes.py): on a write, the agent and run it is written in (the same fields as --actor and
# --session); on a read, the agent and run it is limited to, each that is named must match
AgentOpt = typer.Option(None, "--agent", help="The agent writing it: its scope, recorded as the actor (the same "
                        "field as --actor).")
RunOpt = typer.Option(None, "--run", help="The run it is written in: its scope, recorded as the session (the same "
                      "field as --session).")
AgentReadOpt = typer.Option(None, "--agent", help="Only memories written by this agent (recorded as their actor).")
RunReadOpt = typer.Option(None, "--run", help="Only memories written in this run (recorded as their session).")


def scoped(actor: Optional[str], agent: Optional[str], session: Optional[str],
           run: Optional[str]) -> tuple[Optional[str], Optional[str]]:
    """(actor, session) of a write from ``--actor``/``--agent`` and ``--session``/``--run``, two spellings of the
    same fields. Raises BadInput naming the flag when both spellings are given and differ (exit 2)."""
    for flag, given, other, have in (("--agent", agent, "--actor", actor), ("--run", run, "--session", session)):
        if given is not None and have is not None and given != have:
            raise BadInput(flag, f"{given!r} differs from {other} {have!r} (the same field, spelled twice)",
                           f"give one of {flag} and {other}")
    return (agent if agent is not None else actor), (run if run is not None else session)


def cli_scope(agent: Optional[str], run: Optional[str]) -> Any:
    """The :class:`memledger.scopes.Scope` of a read from ``--agent`` / ``--run``, checked before the store is
    opened (BadInput naming the flag: exit 2)."""
    from ledger.schemas import check_identifier
    from memledger.scopes import Scope

    return Scope(check_identifier(agent, "--agent"), check_identifier(run, "--run"))


#: USER spelled as no user: with --agent A, agent A's own memories (memledger/agent_space.py)
NO_USER = "-"


def cli_user(ctx: typer.Context, user: str, agent: Optional[str]) -> str:
    """USER as the verb takes it: the user id given, or for ``-`` with ``--agent A`` (``--actor A`` on a write)
    the id of agent A's own memories (``~agent/A``), which this command may then name until it ends.

    Raises:
        BadInput: ``-`` with no agent (exit 2), or a malformed agent id.
    """
    if user != NO_USER:
        return user
    if agent is None:
        raise BadInput("USER", "'-' names no user, and no --agent says whose own memories these are",
                       "give --agent A for agent A's own memories, or a user id")
    from ledger.agent_spaces import opened, space_of
    from ledger.schemas import check_identifier

    return ctx.with_resource(opened(space_of(check_identifier(agent, "--agent"))))


AfterOpt = typer.Option(None, "--after", help="A receipt's position: answer only once the projections include it.")
TimeoutOpt = typer.Option(10.0, "--timeout", help="Seconds to wait for --after (then exit 1).")

# Options of every read that shows fact values: the sensitivity grant (docs/erasure.md, "Labels gate every read") ---
AllowSensitiveOpt = typer.Option(
    None, "--allow-sensitive", help="Show facts with these sensitivity labels (comma-separated, e.g. health); each "
    "one shown is recorded as a disclosure. Default: their value and text are withheld.")
PurposeOpt = typer.Option(None, "--purpose", help="Why the labelled facts are shown (kept with each disclosure).")


def labels_given(allow_sensitive: Optional[List[str]]) -> Optional[str]:
    """``--allow-sensitive`` given once or more (``--allow-sensitive health --allow-sensitive finance``, or
    ``health,finance``) as one comma-separated list: every label given counts, none silently replaces another."""
    return None if not allow_sensitive else ",".join(allow_sensitive)


def half_lives_given(pairs: List[str]) -> dict[str, Any]:
    """``--half-life PREFIX=SECONDS`` given once or more as ``{prefix: seconds}`` (checked by the ledger's
    ``check_half_lives``). Raises BadInput naming ``--half-life`` for a pair without ``=`` or a number."""
    out: dict[str, Any] = {}
    for pair in pairs:
        prefix, sep, seconds = pair.partition("=")
        try:
            out[prefix] = float(seconds) if sep else None
        except ValueError:
            out[prefix] = None
        if out[prefix] is None:
            raise BadInput("--half-life", f"{pair!r} is not PREFIX=SECONDS",
                           "e.g. --half-life preference.=7776000 (90 days)")
    return out


def grant(allow_sensitive: Optional[List[str]], purpose: Optional[str]) -> Any:
    """The read's :class:`memledger.sensitivity.Grant` from ``--allow-sensitive`` (repeatable) / ``--purpose``,
    checked before the store is opened (BadInput naming the flag: exit 2)."""
    from memledger.sensitivity import check_grant

    return check_grant(labels_given(allow_sensitive), purpose, field="--allow-sensitive", purpose_field="--purpose")


def value_cell(item: Any, width: int) -> str:
    """A table cell for an item's value: its JSON, or ``withheld (LABEL)`` (the timeline page's words)."""
    label = getattr(item, "withheld", None)
    if label:
        return f"withheld ({label})"
    return clip(json.dumps(item.value, ensure_ascii=False), width)


#: a command's parameter -> the request field it gives, where the CLI names it otherwise (memledger/requests.py)
REQUEST_FIELDS = {"user": "user_id", "trace": "trace_id", "half_life": "half_lives", "session": "session_id",
                  "agent": "agent_id", "run": "run_id"}


def request_names(command: Any) -> Any:
    """How the click ``command`` spells its request's fields in a refusal (:class:`memledger.requests.Names`):
    each option by its flag (``within`` -> ``--in``, ``k`` -> ``-k``), read from the command's own options; an
    argument (USER, QUERY) keeps the request's name."""
    from memledger.requests import Names

    fields = {}
    for p in getattr(command, "params", ()):
        if getattr(p, "param_type_name", "") == "option" and p.opts:
            fields[REQUEST_FIELDS.get(p.name, p.name)] = p.opts[0]
    return Names("cli", fields)

