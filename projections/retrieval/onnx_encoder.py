"""The same sentence-transformers model through ONNX Runtime: no torch at query time.

A Transformer -> mean Pooling -> Normalize model is exported once per machine to an ONNX file (checked against the
torch model on :data:`ONNX_PROBES`), then served by :class:`_OnnxEncoder`: the Rust tokenizer and an ONNX Runtime
session, float32 unit rows. :func:`_onnx_encoder` gives the shared encoder of a model, or None when the torch path
must serve it.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from ..lazy import lazy_module
from .st_model import _load_sentence_transformer, _static_dim

np = lazy_module("numpy")


#: Environment variable: ``off`` keeps every sentence-transformers model on the torch path; a directory puts the
#: exported ONNX files there (default ``$XDG_CACHE_HOME/memledger/models``, else ``~/.cache/memledger/models``).
ONNX_ENV = "MEMLEDGER_ONNX"
#: Environment variable: ONNX Runtime threads per inference (default 2, 1 on a one-core machine; never spinning:
#: a second *spinning* thread made a one-query call 2-3x slower on a shared 2-core machine).
ONNX_THREADS_ENV = "MEMLEDGER_ONNX_THREADS"
#: batches of one passage call run side by side on this many threads (default: 2, or 1 on a 1-core machine)
ONNX_STREAMS_ENV = "MEMLEDGER_ONNX_STREAMS"
#: Largest difference allowed between the ONNX and the torch vector of a probe text (per component) before an
#: export is kept; the exported graph gives about 2e-7 on all-MiniLM-L6-v2.
ONNX_ATOL = 1e-4
#: Texts every export is checked on (empty, short, CJK, long past the truncation, padding inside a batch).
ONNX_PROBES = ("", "Hello", "what job did he lose", "  Jon lost his job as a banker the day before.  ",
               "我喜欢喝咖啡", "Café déjà vu, naïve résumé", "x " * 400)
_ONNX: dict[str, object] = {}  # "model dir|onnx file" -> _OnnxEncoder, or False once it is known unusable
_ONNX_LOCK = threading.Lock()
_ONNX_WARNED: set[str] = set()


def onnx_dir() -> Path | None:
    """Where exported ONNX files live, or None when ``$MEMLEDGER_ONNX`` is ``off`` (torch path only).

    One directory per user, not per store: the file is derived from the installed model package alone (never from
    a store's data), so every store on the machine shares one export and a fresh store (every test) pays nothing.
    """
    raw = os.environ.get(ONNX_ENV, "").strip()
    if raw.lower() in ("off", "0", "false", "no", "torch"):
        return None
    if raw and raw.lower() not in ("on", "1", "true", "yes"):
        return Path(raw).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "memledger" / "models"


def _mean_pooling_stack(path: Path) -> int | None:
    """``max_seq_length`` when the model is Transformer -> mean Pooling (-> Normalize) with a ``tokenizer.json``
    (what the ONNX graph reproduces), else None (the torch path serves it)."""
    if _static_dim(path) is None or not (path / "tokenizer.json").is_file():
        return None
    try:
        modules = json.loads((path / "modules.json").read_text(encoding="utf-8"))
        pooling = next(m for m in modules if m.get("type", "").endswith(".Pooling"))
        cfg = json.loads((path / pooling["path"] / "config.json").read_text(encoding="utf-8"))
        if cfg.get("pooling_mode") not in (None, "mean") or (
                cfg.get("pooling_mode") is None and cfg.get("pooling_mode_mean_tokens") is not True):
            return None
        st_cfg = json.loads((path / "sentence_bert_config.json").read_text(encoding="utf-8"))
        if st_cfg.get("do_lower_case"):
            return None
        return int(st_cfg.get("max_seq_length") or 512)
    except (OSError, ValueError, KeyError, TypeError, StopIteration):
        return None


class _OnnxEncoder:
    """One exported model: tokenizer (``tokenizers``, Rust) + ONNX Runtime session; ``encode(texts)`` gives float32
    ``(n, dim)`` unit rows, the graph ending in mean pooling and L2 normalisation as the torch stack does.

    Texts are stripped (as sentence-transformers does before tokenizing), truncated to ``max_seq_length`` tokens,
    sorted by length and run ``batch_size`` at a time, padded only to the longest in each batch.
    """

    def __init__(self, onnx_path: Path, model_dir: Path, max_len: int, batch_size: int) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        tok.enable_truncation(max_length=max_len)
        tok.no_padding()
        self.tokenizer = tok
        so = ort.SessionOptions()
        # Two intra-op threads (no spinning) by default: a query is faster than on one, on a quiet 2-core machine and
        # with the other core busy; passage batches the same either way beside two streams. (With spinning on, a
        # second thread made a query slower on a shared machine: hence allow_spinning=0.)
        two = min(2, os.cpu_count() or 1)
        so.intra_op_num_threads = _env_count(ONNX_THREADS_ENV, two, "threads per inference")
        so.inter_op_num_threads = 1
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")  # no busy-wait on a shared machine
        self.session = ort.InferenceSession(str(onnx_path), so, providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]
        self.batch_size = batch_size
        self.streams = _env_count(ONNX_STREAMS_ENV, two, "threads per passage call")

    def _run(self, encs: list[Any], chunk: list[int]) -> np.ndarray:
        """One padded batch of the tokenized texts ``encs[i] for i in chunk`` through the session."""
        width = max(len(encs[i].ids) for i in chunk)
        ids = np.zeros((len(chunk), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        types = np.zeros_like(ids)
        for row, i in enumerate(chunk):
            e = encs[i]
            n = len(e.ids)
            ids[row, :n] = e.ids
            mask[row, :n] = 1
            types[row, :n] = e.type_ids
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
        return self.session.run(None, {k: feed[k] for k in self.inputs})[0]

    def encode(self, texts: list[str]) -> np.ndarray:
        """float32 ``(len(texts), dim)`` unit rows (``texts`` non-empty), in the order given.

        The batches run on up to :attr:`streams` threads at once (``$MEMLEDGER_ONNX_STREAMS``), each taking every
        n-th batch of the length-sorted texts so the threads get even work: ONNX Runtime's ``Run`` may be called
        concurrently on one session and releases the GIL, and no thread spins. LoCoMo's 353 observations, 2 cores,
        one intra-op thread per run: 1.63 s on one stream, 0.94 s on two. With two intra-op threads (the default) one
        stream was ~10% faster on a quiet machine (0.90-1.03 against 1.07-1.14 s) and two streams ~20% faster with
        the other core busy (1.44-1.54 against 1.77-1.80 s): ingest writes on the other core, so two stay.
        A query (one text, one batch) never starts a thread."""
        encs = self.tokenizer.encode_batch([t.strip() for t in texts], add_special_tokens=True)
        order = sorted(range(len(texts)), key=lambda i: len(encs[i].ids))
        batches = [order[start:start + self.batch_size] for start in range(0, len(order), self.batch_size)]
        first = self._run(encs, batches[0])
        out = np.empty((len(texts), first.shape[1]), dtype=np.float32)
        out[batches[0]] = first
        rest = batches[1:]
        streams = min(self.streams, len(rest))
        failures: list[BaseException] = []

        def work(i: int) -> None:
            try:
                for chunk in rest[i::max(1, streams)]:
                    out[chunk] = self._run(encs, chunk)  # disjoint rows of ``out`` per thread
            except BaseException as exc:  # noqa: BLE001 - raised on the caller's thread below
                failures.append(exc)

        helpers = [threading.Thread(target=work, args=(i,), name=f"memledger-encode-{i}", daemon=True)
                   for i in range(1, streams)]
        for t in helpers:
            t.start()
        work(0)
        for t in helpers:
            t.join()
        if failures:
            raise failures[0]
        return out


_BAD_SETTINGS: set[tuple[str, str]] = set()  # (variable, value) already warned about


def _env_count(name: str, default: int, what: str) -> int:
    """The positive integer in ``$name`` (``what`` it counts), or ``default`` when unset or blank; at most
    ``max(4, 2 x cores)`` (a larger value is capped, with a warning).

    Any other value gives ``default`` and one warning naming the variable, the value and the fix (logger
    ``memledger``): a typo in a tuning knob once made the encoder's constructor fail, and every call then fell
    back to torch (8-20x slower) with advice to turn ONNX off. Never raises.
    """
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        n = int(raw)
    except ValueError:
        n = 0
    most = max(4, 2 * (os.cpu_count() or 1))
    if n > most:  # 10000 would leave a process with thousands of ONNX threads that never exit
        use, why = most, f"is more than this machine can use ({what}); using {most}."
    elif n >= 1:
        return n
    else:
        use, why = default, (f"is not a positive integer ({what}); using {default}. Set it to e.g. {default}, "
                             "or unset it.")
    if (name, raw) not in _BAD_SETTINGS:  # said once per process
        _BAD_SETTINGS.add((name, raw))
        import logging

        logging.getLogger("memledger").warning("memledger: %s=%r %s", name, raw, why)
    return use


def onnx_file(model_dir: Path, model_id: str) -> Path | None:
    """Where the ONNX export of the model ``model_id`` (directory ``model_dir``) lives, or None (ONNX off)."""
    d = onnx_dir()
    if d is None:
        return None
    slug = "".join(c if c.isalnum() or c in "-_." else "_" for c in model_id)
    return d / f"{slug}.onnx"


def export_onnx(model_dir: Path, dest: Path, max_len: int) -> float:
    """Export the sentence-transformers model in ``model_dir`` (Transformer -> mean Pooling -> Normalize) to the
    ONNX file ``dest`` and check it: every text of :data:`ONNX_PROBES`, alone and as one padded batch, must give the
    torch model's vector within :data:`ONNX_ATOL`. Returns the largest difference seen.

    The one-time cost of the ONNX path (needs torch, transformers and the ``onnx`` package; about 10-20 s on these
    machines, the torch import and the model load included). The file appears whole or not at all (written beside
    ``dest``, renamed into place), so processes racing to export never read a torn file.

    Raises:
        RuntimeError: the export differs from the torch model by more than :data:`ONNX_ATOL` (nothing kept).
    """
    import tempfile

    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    import warnings

    import torch
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # a CLI command's stderr is for the user: no "Loading weights" bars

    model = AutoModel.from_pretrained(str(model_dir), attn_implementation="eager")
    model.eval()

    class _Sentence(torch.nn.Module):  # the graph: token states -> masked mean -> unit length
        def __init__(self, m: object) -> None:
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, token_type_ids):  # type: ignore[no-untyped-def]
            h = self.m(input_ids=input_ids, attention_mask=attention_mask,
                       token_type_ids=token_type_ids).last_hidden_state
            w = attention_mask.unsqueeze(-1).to(h.dtype)
            v = (h * w).sum(1) / w.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(v, p=2, dim=1)

    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=dest.stem + ".", suffix=".tmp", dir=dest.parent)
    os.close(fd)
    try:
        example = torch.tensor([[101, 7592, 2088, 102]])
        axes = {"batch": 0, "tokens": 1}
        names = ["input_ids", "attention_mask", "token_type_ids"]
        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                _Sentence(model), (example, torch.ones_like(example), torch.zeros_like(example)), tmp,
                input_names=names, output_names=["embedding"], opset_version=17, dynamo=False,
                dynamic_axes={**{n: {v: k for k, v in axes.items()} for n in names}, "embedding": {0: "batch"}})
        enc = _OnnxEncoder(Path(tmp), model_dir, max_len, batch_size=len(ONNX_PROBES))
        probes = list(ONNX_PROBES)
        ref = np.asarray(_load_sentence_transformer(model_dir).encode(
            probes, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False), dtype=np.float32)
        gap = max(float(np.abs(enc.encode(probes) - ref).max()),
                  float(np.abs(np.vstack([enc.encode([t]) for t in probes]) - ref).max()))
        if not gap <= ONNX_ATOL:
            raise RuntimeError(f"ONNX export of {model_dir} differs from torch by {gap:.3g} (> {ONNX_ATOL:g})")
        os.chmod(tmp, 0o644)
        os.replace(tmp, dest)
        return gap
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _model_name(model_id: str) -> str:
    """The model's name for a message: ``st:all-MiniLM-L6-v2@3f2a...`` -> ``all-MiniLM-L6-v2`` (the directory of the
    packaged model is just called ``model``, which a message named it by)."""
    return model_id.split(":", 1)[-1].split("@", 1)[0] or model_id


def _onnx_encoder(model_dir: Path, model_id: str, batch_size: int) -> _OnnxEncoder | None:
    """The shared ONNX encoder of this model (exported on first use, see :func:`export_onnx`), or None when the
    torch path must serve it: ONNX off, a model the graph does not reproduce, ``onnxruntime``/``tokenizers`` not
    installed, or an export that failed or missed the tolerance (one warning line on logger ``memledger``)."""
    os.environ["HF_HUB_OFFLINE"] = "1"  # as the torch path does: a local model, never the Hub
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    dest = onnx_file(model_dir, model_id)
    key = f"{model_dir}|{dest}"
    enc = _ONNX.get(key)
    if enc is not None:
        return enc or None  # type: ignore[return-value]
    with _ONNX_LOCK:
        enc = _ONNX.get(key)
        if enc is None:
            enc = False
            max_len = _mean_pooling_stack(model_dir)
            if dest is not None and max_len is not None:
                try:
                    if not dest.is_file():
                        import logging

                        # seconds of silence on a first search otherwise, no word said
                        logging.getLogger("memledger").warning(
                            "memledger: first use of %s on this machine: exporting it to ONNX for fast queries "
                            "(once per machine, about 10-20 s; kept in %s)", _model_name(model_id), dest.parent)
                        export_onnx(model_dir, dest, max_len)
                    enc = _OnnxEncoder(dest, model_dir, max_len, batch_size)
                except Exception as exc:  # noqa: BLE001 - any failure leaves the torch path, which is always right
                    if key not in _ONNX_WARNED:
                        _ONNX_WARNED.add(key)
                        import logging

                        logging.getLogger("memledger").warning(
                            "memledger: ONNX path for %s unavailable (%s: %s); using torch (set %s=off to silence)",
                            _model_name(model_id), type(exc).__name__, str(exc).splitlines()[0] if str(exc) else "",
                            ONNX_ENV)
            _ONNX[key] = enc
    return enc or None  # type: ignore[return-value]

