"""Tokeniser and BM25 index (projections.lexical)."""

import math

import pytest

from projections.lexical import TOKENIZER_VERSION, LexicalIndex, tokenize


def test_tokenize_mixed_chinese_english_exact():
    text = "我喜欢用OneNote记笔记, Hello World 2023年的《活着》！"
    assert tokenize(text) == [
        # 我 is a stop character: its unigram goes, the bigram 我喜 stays
        "我喜", "喜", "喜欢", "欢", "欢用", "用",
        "onenote",
        "记", "记笔", "笔", "笔记", "记",
        "hello", "world",
        "2023",
        "年", "年的",          # 的 dropped as a unigram
        "活", "活着",          # 着 dropped; 《》 and ！ only separate
    ]


def test_tokenize_japanese_korean_and_latin_rules():
    assert tokenize("食べる 한국어") == ["食", "食べ", "べ", "べる", "る", "한", "한국", "국", "국어", "어"]
    # English stop words removed, case folded, underscores and punctuation split
    assert tokenize("The Cat is on the_mat.") == ["cat", "mat"]
    # a Latin word glued to CJK is split at the script boundary
    assert tokenize("HIIT和重量训练") == ["hiit", "和重", "重", "重量", "量", "量训", "训", "训练", "练"]


def test_tokenize_nfc_only_no_other_folding():
    decomposed = "cafe\u0301"
    assert decomposed != "café"
    assert tokenize(decomposed) == tokenize("café") == ["café"]
    # full-width Latin is NOT folded to ASCII (NFC only, byte-exact otherwise)
    assert tokenize("ＡＢＣ") == ["ａｂｃ"]
    assert tokenize("") == [] and tokenize("，。！") == []
    with pytest.raises(TypeError):
        tokenize(None)  # type: ignore[arg-type]


MEMORIES = {
    "m0": "我最近去了厦门，最喜欢的景点是鼓浪屿。",
    "m1": "我去看了周杰伦的演唱会，最喜欢的歌是《听妈妈的话》。",
    "m2": "做菜的话，我比较喜欢川菜和粤菜。",
    "m3": "I switched from coffee to green tea last spring.",
}


def _index(**params):
    return LexicalIndex.from_documents(MEMORIES.items(), **params)


def test_bm25_ranks_the_right_doc_first():
    idx = _index()
    assert len(idx) == 4
    assert idx.search("在厦门我最爱哪个景点？", k=3)[0][0] == "m0"
    assert idx.search("我在演唱会上听了哪首歌", k=3)[0][0] == "m1"
    assert idx.search("喜欢哪些菜系", k=3)[0][0] == "m2"
    assert idx.search("What tea do I drink?", k=3)[0][0] == "m3"
    # no shared term -> no result at all, not a zero-score filler
    assert idx.search("量子力学", k=3) == []
    assert idx.search("厦门", k=0) == []
    with pytest.raises(ValueError):
        idx.search("厦门", k=-1)


def test_bm25_score_matches_the_formula():
    idx = LexicalIndex(k1=1.2, b=0.75)
    idx.add("a", "tea tea coffee")
    idx.add("b", "coffee milk")
    idx.add("c", "water")
    (doc, score), = idx.search("tea", k=5)
    n, df, tf, dl, avgdl = 3, 1, 2, 3, (3 + 2 + 1) / 3
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
    expected = idf * tf * (1.2 + 1) / (tf + 1.2 * (1 - 0.75 + 0.75 * dl / avgdl))
    assert doc == "a"
    assert score == pytest.approx(expected, rel=1e-12)
    # repeated query terms are counted once
    assert idx.search("tea tea tea", k=5)[0][1] == pytest.approx(expected, rel=1e-12)


def test_remove_really_removes():
    idx = _index()
    vocab_before = idx.vocabulary_size()
    assert idx.remove("m0") is True
    assert "m0" not in idx and len(idx) == 3
    assert idx.remove("m0") is False  # idempotent
    assert all(d != "m0" for d, _ in idx.search("厦门 鼓浪屿 景点 喜欢", k=10))
    assert idx.search("鼓浪屿", k=10) == []  # its unique terms are gone from the postings
    assert idx.vocabulary_size() < vocab_before
    # statistics (N, df, avgdl) are exactly those of an index that never had m0
    fresh = LexicalIndex.from_documents((d, t) for d, t in MEMORIES.items() if d != "m0")
    assert idx.search("最喜欢的歌", k=10) == fresh.search("最喜欢的歌", k=10)


def test_add_same_id_replaces():
    idx = _index()
    idx.add("m3", "Now I drink oolong.")
    assert len(idx) == 4
    assert idx.search("coffee", k=5) == []
    assert idx.search("oolong", k=5)[0][0] == "m3"
    with pytest.raises(TypeError):
        idx.add(3, "x")  # type: ignore[arg-type]


def test_round_trip_bytes_and_file(tmp_path):
    idx = _index(k1=1.3, b=0.6)
    queries = ["在厦门我最爱哪个景点？", "喜欢", "green tea", "《听妈妈的话》"]
    data = idx.to_bytes()
    back = LexicalIndex.from_bytes(data)
    assert (back.k1, back.b) == (1.3, 0.6)
    assert back.doc_ids() == idx.doc_ids()
    for q in queries:
        assert back.search(q, k=4) == idx.search(q, k=4)
    assert back.to_bytes() == data

    path = tmp_path / "sub" / "user.lex"
    idx.save(path)
    loaded = LexicalIndex.load(path)
    for q in queries:
        assert loaded.search(q, k=4) == idx.search(q, k=4)
    assert [p.name for p in path.parent.iterdir()] == ["user.lex"]  # no temp file left behind
    # text is stored as tokens, byte-exact: the CJK bigram survives the round trip
    assert "鼓浪" in data.decode("utf-8")


def test_from_bytes_refuses_foreign_or_stale_data():
    with pytest.raises(ValueError):
        LexicalIndex.from_bytes(b"\x00not json")
    with pytest.raises(ValueError, match="magic"):
        LexicalIndex.from_bytes(b'{"magic": "other"}')
    stale = _index().to_bytes().replace(TOKENIZER_VERSION.encode(), b"cjk-old")
    with pytest.raises(ValueError, match="rebuild"):
        LexicalIndex.from_bytes(stale)


def test_bad_parameters():
    with pytest.raises(ValueError):
        LexicalIndex(k1=-1)
    with pytest.raises(ValueError):
        LexicalIndex(b=1.5)

