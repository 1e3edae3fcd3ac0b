"""Tokeniser and BM25 index (projections.retrieval.lexical)."""

import math

import numpy as np
import pytest

import json
from pathlib import Path

import projections.retrieval.lexical as lexical
from projections.retrieval.lexical import (CJK_INTERROGATIVE_CHARS, CJK_STOP_BIGRAMS, STOP_WORDS, TOKENIZER_VERSION,
                                 LexicalIndex, stem, tokenize)

DATA = Path(__file__).parent / "data"


def test_tokenize_mixed_chinese_english_exact():
    text = "我喜欢用OneNote记笔记, Hello World 2023年的《活着》！"
    assert tokenize(text) == [
        # 我 is a stop character: its unigram goes, the bigram 我喜 stays
        "我喜", "喜", "喜欢", "欢", "欢用", "用",
        "onenot",              # Snowball English stem of "onenote"
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
    assert "鼓浪".encode("utf-8") in data


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



def test_english_words_are_stemmed_so_inflections_match():
    assert tokenize("Hiking trips: she PAINTED paintings") == ["hike", "trip", "paint", "paint"]
    assert [stem(w) for w in ("hike", "hikes", "hiking", "adoption", "adopting")] == [
        "hike", "hike", "hike", "adopt", "adopt"]
    # stop words are dropped on the surface form, before stemming ("does" is a stop word, "doe" is not)
    assert tokenize("does it") == []
    # only ASCII words are stemmed: the English rules would mangle other scripts
    assert stem("naïveties") == "naïveties" and stem("походы") == "походы"
    with pytest.raises(TypeError):
        stem(None)  # type: ignore[arg-type]
    idx = LexicalIndex.from_documents([("a", "Caroline went on a hike in the mountains."),
                                       ("b", "Caroline adopted a puppy.")])
    assert [d for d, _ in idx.search("hiking", k=5)] == ["a"]
    assert [d for d, _ in idx.search("adoption", k=5)] == ["b"]


def test_stemming_is_thread_safe():
    from concurrent.futures import ThreadPoolExecutor

    words = ["hiking", "paintings", "adoption", "running", "counseling", "generously"] * 200
    expected = [stem(w) for w in words]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: [stem(w) for w in words], range(8)))
    assert all(r == expected for r in results)


def test_chinese_interrogatives_yield_no_term():
    # 什么 goes with the bigrams around it (有什, 么事); 最近 and the rest stay
    assert tokenize("最近有什么事？") == ["最", "最近", "近", "近有", "有", "事"]
    # the other character of 哪里 / 怎么样 stays a unigram (里面, 样子), only the interrogative one goes
    assert tokenize("哪里") == ["里"] and tokenize("谁") == [] and tokenize("怎么样") == ["样"]
    # 如何 / 为何 / 多少: only the bigram goes, the characters keep their other uses (如果, 任何, 很多)
    assert tokenize("如何") == ["如", "何"] and tokenize("多少") == ["多", "少"]
    assert tokenize("任何") == ["任", "任何", "何"]
    # exactly the documented sets, no more: every other character still yields its unigram
    assert CJK_INTERROGATIVE_CHARS == frozenset("什么哪怎谁啥")
    assert CJK_STOP_BIGRAMS == frozenset({"如何", "为何", "多少"})
    assert tokenize("呢吗") == ["呢吗"]  # sentence particles: stop unigrams (STOP_WORDS), bigram kept as before
    assert not CJK_INTERROGATIVE_CHARS & STOP_WORDS


def test_a_question_word_no_longer_matches_the_memory_that_happens_to_contain_it(monkeypatch):
    # tests/data/cjk_pairs.jsonl zmt-01: "我之前提到的那部科幻片叫什么名字？" -> memory 5 (科幻电影《流浪地球》);
    # memory 9 (职业规划……朝什么方向发展) shares only 什么 and 到 with the question
    pair = json.loads((DATA / "cjk_pairs.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert pair["id"] == "zmt-01" and pair["answer_index"] == 5

    def ranking():
        idx = LexicalIndex.from_documents((str(i), m) for i, m in enumerate(pair["memories"]))
        return [d for d, _ in idx.search(pair["query"], k=3)]

    assert ranking()[0] == "5"
    monkeypatch.setattr(lexical, "CJK_INTERROGATIVE_CHARS", frozenset())  # 什么 a term again
    assert ranking()[0] == "9"


def _lexical_top1(path: Path) -> tuple[int, int]:
    hits = n = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        user = json.loads(line)
        idx = LexicalIndex.from_documents((str(i), m) for i, m in enumerate(user["memories"]))
        for q in user["questions"]:
            top = idx.search(q["query"], k=1)
            hits += bool(top) and int(top[0][0]) in q["answer_indexes"]
            n += 1
    return hits, n


#: BM25 top-1 on tests/data/cjk_heldout.jsonl (35 probing questions of 6 MemoryBank users not in cjk_pairs, every
#: user turn of theirs a memory): 20 with tokenizer cjk-uni-bi-v1, 21 with the interrogatives dropped (v2).
HELDOUT_LEXICAL_TOP1 = 21


def test_lexical_top1_on_the_held_out_memorybank_questions():
    hits, n = _lexical_top1(DATA / "cjk_heldout.jsonl")
    assert n == 35
    assert hits >= HELDOUT_LEXICAL_TOP1, f"lexical top-1 {hits}/{n}, measured {HELDOUT_LEXICAL_TOP1}"


def test_an_index_saved_by_the_previous_tokenizer_is_refused():
    assert TOKENIZER_VERSION != "cjk-uni-bi-v1"
    old = _index().to_bytes().replace(TOKENIZER_VERSION.encode(), b"cjk-uni-bi-v1")
    with pytest.raises(ValueError, match="cjk-uni-bi-v1.*rebuild"):
        LexicalIndex.from_bytes(old)


def test_a_store_whose_files_have_the_old_tokenizer_is_rebuilt_not_refused(tmp_path, monkeypatch):
    """Index files written under the previous tokenizer (no stemming) are not trusted on open: the BM25 index is
    rebuilt from the vectors table, so a query that matches only through the new stemming finds the memory."""
    from memledger import MemoryLedger

    monkeypatch.setenv("MEMLEDGER_PROJECTION_SEALING", "off")  # the files are read as JSON below, not sealed

    def unstemmed(text):
        return [w for w in (m.group(0).lower() for m in lexical._TOKEN_RE.finditer(text)) if w not in STOP_WORDS]

    with monkeypatch.context() as m:  # the old code: v1 version string, tokens not stemmed
        m.setattr(lexical, "TOKENIZER_VERSION", "cjk-uni-bi-v1")
        m.setattr(lexical, "tokenize", unstemmed)
        with MemoryLedger(home=tmp_path, embedder="hash") as ml:
            ml.assert_fact("u1", "hobby.outdoor", "hiking", text="Caroline went hiking in the mountains")
            ml.assert_fact("u1", "hobby.art", "pottery", text="Caroline took a pottery class")
            (hit,) = ml.search("u1", "hike", k=1)
            assert hit.parts.lexical is None  # "hike" is not a token of the unstemmed index
    (lex_file,) = tmp_path.rglob("*.lex")
    assert json.loads(lex_file.read_bytes().partition(b"\n")[0])["tokenizer"] == "cjk-uni-bi-v1"

    with MemoryLedger(home=tmp_path, embedder="hash") as ml:
        (hit,) = ml.search("u1", "hike", k=1)
        assert hit.key == "hobby.outdoor" and hit.parts.lexical_rank == 1 and hit.parts.lexical > 0
    saved = json.loads(lex_file.read_bytes().partition(b"\n")[0])
    assert saved["tokenizer"] == TOKENIZER_VERSION  # rewritten with the current tokenizer at close
    assert "hike" in list(LexicalIndex.from_bytes(lex_file.read_bytes())._terms)


def _reference_search(docs: dict[str, str], query: str, k: int, k1: float = 1.5, b: float = 0.75):
    """BM25 as one Python loop over per-document term counts: what LexicalIndex.search must give, bit for bit."""
    from collections import Counter
    import heapq
    import math

    tfs = {d: Counter(lexical.tokenize(t)) for d, t in docs.items()}
    n = len(tfs)
    total = sum(sum(tf.values()) for tf in tfs.values())
    avgdl = total / n if total else 1.0
    scores: dict[str, float] = {}
    for term in dict.fromkeys(lexical.tokenize(query)):
        holders = {d: tf[term] for d, tf in tfs.items() if term in tf}
        if not holders:
            continue
        df = len(holders)
        idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
        for d, tf in holders.items():
            length = sum(tfs[d].values())
            scores[d] = scores.get(d, 0.0) + idf * tf * (k1 + 1.0) / (tf + k1 * ((1.0 - b) + b * length / avgdl))
    return heapq.nsmallest(k, scores.items(), key=lambda kv: (-kv[1], kv[0]))


def test_search_matches_a_plain_bm25_loop_through_adds_removals_merges_and_a_round_trip(monkeypatch):
    """The compact postings (arrays, the dicts of documents added since, dead slots, ties among thousands of
    matched documents) give exactly the scores and order of one Python loop over every document."""
    import random

    monkeypatch.setattr(lexical, "_PY_TOP", 16)  # the numpy path for anything over 16 matched documents
    monkeypatch.setattr(lexical, "_OVERLAY_MIN", 50)
    rnd = random.Random(7)
    words = ["tea", "coffee", "hike", "paint", "blue", "red", "dog", "cat", "number", "passing", "喜欢", "厦门"]
    docs: dict[str, str] = {}
    idx = LexicalIndex()
    queries = ["tea coffee", "number passing", "dog", "喜欢 厦门 blue", "nothing here", "red red cat hike"]
    for step in range(600):
        d = f"d{rnd.randrange(400)}"
        if rnd.random() < 0.2 and d in docs:
            del docs[d]
            assert idx.remove(d)
        else:
            docs[d] = " ".join(rnd.choice(words) for _ in range(rnd.randrange(1, 6)))
            idx.add(d, docs[d])
        if step % 97 == 0:
            idx = LexicalIndex.from_bytes(idx.to_bytes())
        if step % 50 == 0:
            for q in queries:
                for k in (1, 5, 40, 1000):
                    assert idx.search(q, k) == _reference_search(docs, q, k), (step, q, k)
    assert sorted(idx.doc_ids()) == sorted(docs)
    for q in queries:
        assert idx.search(q, 30) == _reference_search(docs, q, 30)


def test_a_term_in_every_document_and_a_vocabulary_held_as_one_blob(monkeypatch):
    """A term every document holds is scored over slices (no gathers), a removed document's dead slot is still
    skipped, and the compact vocabulary (one UTF-8 blob, not a str per term) is searched like the sorted list."""
    monkeypatch.setattr(lexical, "_PY_TOP", 16)
    docs = {f"d{i:03d}": f"common word{i % 7} 喜欢 café" for i in range(300)}
    idx = LexicalIndex.from_bytes(LexicalIndex.from_documents(docs.items()).to_bytes())
    assert isinstance(idx._terms, lexical._Terms)
    vocab = sorted({t for text in docs.values() for t in lexical.tokenize(text)})
    assert list(idx._terms) == vocab and [idx._terms[i] for i in range(len(vocab))] == vocab
    queries = ["common", "common word3", "café 喜欢", "word6 unknown"]

    def same() -> None:
        for q in queries:
            for k in (1, 10, 1000):
                assert idx.search(q, k) == _reference_search(docs, q, k), (q, k)

    same()
    assert idx.remove("d005")  # a dead slot among the compact postings
    del docs["d005"]
    same()
    idx.add("d005", "common word1")  # back, in a new slot (postings added since)
    docs["d005"] = "common word1"
    same()
    assert LexicalIndex.from_bytes(idx.to_bytes()).search("common word1", 5) == _reference_search(
        docs, "common word1", 5)


def test_a_vocabulary_with_a_nul_stays_a_list():
    terms = ["a", "b\0c"]
    assert lexical._Terms.of(terms) is terms  # no separator it could be split on: kept as it is
    t = lexical._Terms.of(["", "é", "日本"])
    assert list(t) == ["", "é", "日本"] and len(t) == 3 and t[1] == "é"
    with pytest.raises(IndexError):
        t[3]


def _format2(idx: LexicalIndex) -> bytes:
    """``idx`` as format 2 wrote it (one JSON document, base64 arrays), the form a store written before holds."""
    import base64
    import json

    def b64(arr: object) -> str:
        return base64.b64encode(np.ascontiguousarray(arr, dtype="<i4").tobytes()).decode("ascii")

    back = LexicalIndex.from_bytes(idx.to_bytes())
    terms, offsets, slots, tfs = back._compact_postings()
    n = len(back._ids)
    return json.dumps({"magic": "memledger.lexical", "format": 2, "tokenizer": TOKENIZER_VERSION, "k1": back.k1,
                       "b": back.b, "docs": list(back._ids), "lengths": b64(back._length[:n]), "terms": list(terms),
                       "offsets": b64(offsets), "slots": b64(slots), "tfs": b64(tfs),
                       "order": b64(back._doc_order()[:n])}, ensure_ascii=False, separators=(",", ":")).encode()


def test_the_file_holds_its_terms_and_arrays_as_they_are_and_a_format_2_file_reads_the_same():
    idx = _index(k1=1.3, b=0.6)
    data = idx.to_bytes()
    head, _, body = data.partition(b"\n")
    header = json.loads(head)
    assert header["format"] == 3 and header["docs_count"] == len(idx.doc_ids())
    assert header["terms_count"] == len(idx._compact_postings()[0]) and "terms" not in header
    assert body.startswith("\0".join(idx.doc_ids()).encode("utf-8"))  # ids, then terms, NUL-separated
    old = LexicalIndex.from_bytes(_format2(idx))
    assert old.stale_format and not LexicalIndex.from_bytes(data).stale_format  # written again in format 3
    for q in ["在厦门我最爱哪个景点？", "喜欢", "green tea", "《听妈妈的话》", "oolong"]:
        assert old.search(q, k=6) == idx.search(q, k=6) == LexicalIndex.from_bytes(data).search(q, k=6)
    assert old.to_bytes() == data
    with pytest.raises(ValueError, match="another length"):
        LexicalIndex.from_bytes(data[:-1])
    with pytest.raises(ValueError, match="unsupported"):
        LexicalIndex.from_bytes(data.replace(b'"format":3', b'"format":2', 1))
    # a doc id holding a NUL (no tokenizer's term, an odd id) goes in the header instead
    odd = LexicalIndex.from_documents([("a\0b", "green tea"), ("c", "black tea")])
    back = LexicalIndex.from_bytes(odd.to_bytes())
    assert back.doc_ids() == ["a\0b", "c"] and back.search("green", k=2) == odd.search("green", k=2)
