"""The index files of the ``vectors`` projection, under ``<home>/vectors/<model-slug>/<copy>/``: per user a BM25
``.lex`` file (sealed under the user's key, opened in one call), and ``manifest.json``. They only make opening
faster: they are used only when the manifest's model, generation, position and digests match the table exactly;
otherwise the mirror is rebuilt from the table. The vectors are not in a file: each user's are one blob in the
table ``vectors_packs`` (projections/retrieval/packs.py), their one stored copy; ``.vec`` files a store wrote
before are deleted at the next save.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from concurrent.futures import ThreadPoolExecutor
from importlib import import_module
from typing import Any, Callable

from ..db import Cursor
from ..files import atomic_write
from ..lazy import lazy_module
from ..base import value_json_of
from .documents import decode_vector, lexical_document, lexical_version, model_slug, user_file_stem
from .mirror import Memory, UserIndex

np = lazy_module("numpy")

#: a BM25 file longer than this is read and parsed in a thread, beside the reading of its user's vectors packs
_PARSE_BESIDE = 1 << 20
#: evicted users waiting for the writer thread (:meth:`IndexFiles.write_user_files_later`) beyond which an eviction
#: writes its own: the queue holds their indexes, memory beyond the budget
WRITES_QUEUED = 16


class _Done:
    """A result already there, read as a future's."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def result(self) -> Any:
        """The value."""
        return self.value


class IndexFiles:
    """The index files' half of :class:`projections.vectors.VectorsProjection` (a mixin)."""

    def _files_dir(self) -> Path | None:
        if self.home is None:
            return None
        return self.home / "vectors" / model_slug(self.model_id) / (self.suffix or "serving")

    def _load_files(self, cur: Cursor, generation: int, position: int, dim: int | None,
                    cjk_dim: int | None = None) -> Memory | None:
        """The memory from the index files, if the manifest matches this table exactly (companion model and dim
        included), every file is the one the manifest was written with (its digest) and each user's two files hold
        the same documents; else None (the caller rebuilds everything from the table).

        Each user's vectors come from their pack (one blob opened in one call, projections/retrieval/packs.py) and
        the rows whose vectors are not packed yet: the live documents are those of the user's BM25 file (the
        manifest's position is the table's), a pack entry of any other document is stale and left out. The BM25
        files spare tokenizing every text."""
        d = self._files_dir()
        if d is None or dim is None or not (d / "manifest.json").is_file():
            return None
        from .lexical import TOKENIZER_VERSION, LexicalIndex

        try:
            man = json.loads((d / "manifest.json").read_text(encoding="utf-8"))
            if (man.get("model_id"), man.get("dim"), man.get("generation"), man.get("position"),
                    man.get("tokenizer"), man.get("table"), man.get("cjk_model_id"),
                    man.get("cjk_dim")) != (self.model_id, dim, generation, position,
                                            lexical_version(TOKENIZER_VERSION),
                                            self.table("docs"), self.cjk_model_id, cjk_dim):
                return None
            sealer = cur.sealer

            def lexical_of(stem: str) -> tuple[str, Any]:
                """The digest of a user's BM25 file and its index; ValueError when the file is not the manifest's."""
                data = (d / f"{stem}.lex").read_bytes()
                digest = hashlib.sha256(data).hexdigest()
                if man["digests"][stem] != digest:
                    raise ValueError("a file of another state (copied back, another user's): not this manifest's")
                # a user's file is one sealed token (ledger/sealing.py: in chunks, or whole as written before),
                # opened in one call: None once erased
                return digest, LexicalIndex.from_bytes(data if sealer is None else sealer.open(data))

            with ThreadPoolExecutor(2, thread_name_prefix="memledger-load") as pool:
                # FAISS (and numpy) imported beside the reading and decryption of the files and packs, which release
                # the GIL; the import in _vectors_of then finds it done (or waits for it on the import lock)
                pool.submit(import_module, f"{__package__}.vector_store")
                lexical = {}
                for user_id, stem in man["users"].items():
                    # a big user's BM25 file is read, digested, opened and parsed beside the reading and decryption
                    # of their vectors packs (all but the parsing release the GIL): their first search pays the
                    # longer of the two, not their sum
                    lexical[user_id] = (pool.submit(lexical_of, stem) if (d / f"{stem}.lex").stat().st_size
                                        > _PARSE_BESIDE else _Done(lexical_of(stem)))
                live = {u: (lambda f=f: f.result()[1].doc_ids()) for u, f in lexical.items()}
                vectors = self._vectors_of(cur, live, dim, cjk_dim)
                done = {u: f.result() for u, f in lexical.items()}
            digests = {man["users"][u]: digest for u, (digest, _) in done.items()}
            lexical = {u: li for u, (_, li) in done.items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        if vectors is None:
            return None
        mem = Memory(generation=generation, position=position, dim=dim, cjk_dim=cjk_dim, digests=digests)
        for user_id, li in lexical.items():
            main, cjk = vectors[user_id]
            mem.users[user_id] = UserIndex(main, li, cjk)
            if li.stale_format:  # written again, in today's form, at close
                mem.dirty.add(user_id)
        return mem

    def _vectors_of(self, cur: Cursor, live: dict[str, Callable[[], list[str]]], dim: int,
                    cjk_dim: int | None, user: str | None = None) -> dict[str, tuple[Any, Any]] | None:
        """Each user's main and companion (None: no CJK document) vector indexes of exactly the documents
        ``live[user]()`` (asked for once the user's packs are read and their base opened): from their base pack,
        less its stale entries, then their delta pack and any row holding its own vector (which win, in that
        order). None when a live document has no vector anywhere, or a row holds one for a document not live (the
        files are not this table's). ``user``: ``live`` holds that one user only (a bounded mirror's load), whose rows
        alone are read."""
        from .packs import DELTA, lookup

        # no ORDER BY: sorting by doc id made SQLite scan the whole table in key order (~40-80 ms at 100,000 rows)
        # instead of reading the partial index of the rows holding a vector (none, once packed); sorted here
        if user is None:
            cur.execute(f"SELECT user_id, doc_id, vector, cjk_vector FROM {self.table('docs')} "
                        "WHERE vector IS NOT NULL")
        else:
            cur.execute(f"SELECT user_id, doc_id, vector, cjk_vector FROM {self.table('docs')} "
                        "WHERE user_id = ? AND vector IS NOT NULL", (user,))
        rows: dict[str, dict[str, tuple[Any, Any]]] = {}
        for user_id, doc_id, vec, cvec in sorted(cur.fetchall(), key=lambda r: (r[0], r[1])):
            rows.setdefault(user_id, {})[doc_id] = (vec, cvec)
        if not set(rows) <= set(live):
            return None
        out: dict[str, tuple[Any, Any]] = {}
        for user_id, docs in live.items():
            # the base as stored: its header opened now, its matrices later, straight into FAISS's storage
            base = self.stored_pack(cur, user_id)
            delta = self.read_pack(cur, user_id, DELTA)
            d_main, d_cjk = lookup(delta)
            own = rows.get(user_id, {})
            wanted: dict[str, str] | None = None
            parts = []
            for name, want, col in (("main", dim, 0), ("cjk", cjk_dim, 1)):
                b_docs, b_dtype = ([], "<f2") if base is None or name not in base.parts else base.parts[name][1:]
                if b_docs and base.parts[name][0] != want:  # type: ignore[union-attr]
                    return None
                # FAISS's storage sized for the base and every newer vector, the base's matrix opened into it
                # (before the live documents are asked for: their BM25 file is parsed meanwhile in a thread)
                newer_max = len(d_main if col == 0 else d_cjk) + sum(1 for v in own.values() if v[col] is not None)
                from .vector_store import F16_MAX, UserVectorIndex

                index = store = None
                if want is not None and len(b_docs) + newer_max:
                    index, store = UserVectorIndex.reserve(want, len(b_docs) + newer_max, wide=b_dtype == "<f4")
                if b_docs:
                    base.matrix_into(name, store[:len(b_docs)])  # type: ignore[union-attr]
                if wanted is None:
                    # the live documents, each id mapped to itself: the BM25 index's own string, which the vector
                    # index then shares (the pack's copy of each id is dropped: ~6 MB less at 100,000 memories)
                    wanted = {d: d for d in docs()}
                    if not own.keys() <= wanted.keys():
                        return None
                    newer = {d: (v, d_cjk.get(d)) for d, v in d_main.items() if d in wanted}
                    newer.update(own)  # a row's own vector wins over the packs
                # the base's entries of live documents not rewritten since, then the newer ones; the common case
                # (every base entry live, none rewritten) checked by C loops, not a Python one
                ids = list(map(wanted.get, b_docs))
                whole = None not in ids and newer.keys().isdisjoint(b_docs)
                keep = (range(len(b_docs)) if whole
                        else [i for i, d in enumerate(b_docs) if d in wanted and d not in newer])
                fresh = [(d, v[col]) for d, v in newer.items() if v[col] is not None]
                if name == "main" and len(keep) + len(fresh) != len(wanted):
                    return None  # a live document without a vector
                if not keep and not fresh:
                    parts.append(None)
                    continue
                if not whole:  # stale entries: the kept ones moved up, in order (numpy's take copies first)
                    store[:len(keep)] = store[list(keep)]
                    ids = [ids[i] for i in keep]
                if fresh:
                    if not own and delta and name in delta and [d for d, _ in fresh] == delta[name][1]:
                        mat = delta[name][2]  # the whole delta, in its order (the common case): its matrix as it is
                    else:
                        vecs = [v if isinstance(v, np.ndarray) else decode_vector(v, want) for _, v in fresh]
                        if any(v.shape != (want,) for v in vecs):
                            raise ValueError("a stored vector of another dimension")
                        mat = np.stack(vecs)
                    if not np.isfinite(mat).all():
                        raise ValueError("vectors contain NaN or inf")
                    if b_dtype == "<f2" and mat.dtype != np.float16 and float(np.abs(mat).max()) > F16_MAX:
                        # beyond float16's range (an embedder that does not normalise): the index is float32
                        index = UserVectorIndex.from_blocks(want, [(ids, store[:len(ids)].copy()),
                                                                   ([wanted[d] for d, _ in fresh], mat)])
                        parts.append(index)
                        continue
                    np.copyto(store[len(ids):len(ids) + len(fresh)], mat)  # rounded to float16 as stored
                    ids.extend(wanted[d] for d, _ in fresh)
                index.adopt(ids)
                parts.append(index)
            if parts[0] is None:
                from .vector_store import UserVectorIndex

                parts[0] = UserVectorIndex(dim)
            out[user_id] = (parts[0], parts[1])
        return out

    def _lex_stamp(self, user_id: str, generation: int, position: int) -> dict[str, Any]:
        """What a user's BM25 file says it holds: that user's live documents of this copy's table, at ``position``
        of ``generation``, made by this tokenizer and document form (:meth:`stored_lexical` trusts nothing else)."""
        from .lexical import TOKENIZER_VERSION

        return {"user": user_id, "table": self.table("docs"), "generation": generation, "position": position,
                "lexical": lexical_version(TOKENIZER_VERSION)}

    def write_user_file(self, user_id: str, lexical: Any, generation: int, position: int) -> str | None:
        """Write ``user_id``'s BM25 file (``lexical``, a LexicalIndex holding exactly their live documents at
        ``position`` of ``generation``), stamped with that (:meth:`_lex_stamp`) and sealed under their key in chunks;
        atomic. Returns the file's sha256 (hex), or None when this copy keeps no files (no home: PostgreSQL).

        Raises:
            SubjectErasedError: the user's key was destroyed (nothing of an erased user is written).
            OSError: the file could not be written.
        """
        d = self._files_dir()
        if d is None:
            return None
        data = lexical.to_bytes(self._lex_stamp(user_id, generation, position))
        sealer = getattr(self, "sealer", None)
        if sealer is not None and sealer.writes:
            # the words of the user's memories, sealed in chunks (ledger/sealing.py) opened two at a time
            from .packs import CHUNK_BYTES

            data = sealer.seal_chunks(user_id, [data[i:i + CHUNK_BYTES]
                                                for i in range(0, max(len(data), 1), CHUNK_BYTES)])
        atomic_write(d / f"{user_file_stem(user_id)}.lex", data)
        return hashlib.sha256(data).hexdigest()

    def write_user_files(self, users: list[tuple[str, Any]], generation: int, position: int) -> int:
        """A bounded mirror's users (``(user_id, UserIndex)`` pairs, each holding their live documents at
        ``position`` of ``generation``: evicted, or loaded at close) written to their BM25 files
        (:meth:`write_user_file`), best effort: a user erased meanwhile, or a file that cannot be written, is
        skipped (the files only make a load faster; a load that finds none reads the rows). Returns the files
        written."""
        from ledger.errors import SubjectErasedError

        written = 0
        for user_id, u in users:
            try:
                written += self.write_user_file(user_id, u.lexical, generation, position) is not None
            except (SubjectErasedError, OSError):
                continue
        return written

    def write_user_files_later(self, users: list[tuple[str, Any]], generation: int, position: int) -> None:
        """:meth:`write_user_files` on this object's writer thread, so that the search evicting them does not wait
        for the file system (each file is fsynced: ~4 ms here, as long as a 100-memory user's whole load); written
        here when more than :data:`WRITES_QUEUED` users already wait (their indexes are held until written)."""
        with self._lock:
            pool = self.__dict__.get("_lex_writer")
            if pool is None:
                pool = self._lex_writer = ThreadPoolExecutor(1, thread_name_prefix="memledger-lex")
            queued = self.__dict__.get("_lex_queued", 0)
            if queued + len(users) <= WRITES_QUEUED:
                self._lex_queued = queued + len(users)
                pool.submit(self._write_queued, users, generation, position)
                return
        self.write_user_files(users, generation, position)

    def _write_queued(self, users: list[tuple[str, Any]], generation: int, position: int) -> None:
        try:
            self.write_user_files(users, generation, position)
        finally:
            with self._lock:
                self._lex_queued -= len(users)

    def wait_for_writes(self) -> None:
        """Wait until the BM25 files queued by :meth:`write_user_files_later` are written (at close)."""
        with self._lock:
            pool = self.__dict__.pop("_lex_writer", None)
        if pool is not None:
            pool.shutdown(wait=True)

    def stored_lexical(self, cur: Cursor, user_id: str, generation: int, at: int) -> tuple[Any, int] | None:
        """``user_id``'s BM25 index read from their file and the position it holds their documents at, or None: no
        file (PostgreSQL keeps none), it does not open (the user erased: their key is gone), it is of another
        format or tokenizer, or its stamp (:meth:`_lex_stamp`) names another user, table or ``generation``, or a
        position past ``at`` (the reader's snapshot)."""
        d = self._files_dir()
        if d is None:
            return None
        from .lexical import LexicalIndex

        try:
            data = (d / f"{user_file_stem(user_id)}.lex").read_bytes()
            sealer = cur.sealer
            opened = data if sealer is None else sealer.open(data)
            if opened is None:
                return None
            li = LexicalIndex.from_bytes(opened)
        except (OSError, ValueError, TypeError):
            return None
        stamp = li.stamp or {}
        position = stamp.get("position")
        if ({k: stamp.get(k) for k in ("user", "table", "generation", "lexical")}
                != {k: v for k, v in self._lex_stamp(user_id, generation, 0).items() if k != "position"}
                or not isinstance(position, int) or not 0 <= position <= at):
            return None
        return li, position

    def load_user(self, cur: Cursor, mem: Memory, user_id: str, at: int) -> tuple[UserIndex | None, bool] | None:
        """``user_id``'s index loaded from their stored form in this snapshot (``at``: its position), as the whole
        mirror loads every user: the vectors from their packs (opened into FAISS's storage) and the BM25 index from
        their file (:meth:`stored_lexical`) with their rows changed since it was written applied, or, without a
        usable file, tokenised from their live rows. Returns ``(index, dirty)`` (index None: no live document;
        dirty: the file is missing or behind, worth writing), or None when the stored form does not hold the
        user's live documents (the caller reads their rows, vectors included)."""
        if mem.dim is None:
            return None
        from .lexical import LexicalIndex

        t = self.table("docs")
        held: dict[str, Any] = {}

        def live_docs(found: tuple[Any, int] | None) -> list[str]:
            """The user's live documents, their BM25 index made from ``found`` (the file's) or their rows."""
            li: Any = None
            dirty = True
            if found is not None:
                li, since = found
                cur.execute(f"SELECT doc_id, live, key, text, value_json FROM {t} WHERE user_id = ? "
                            "AND position > ? ORDER BY position", (user_id, since))
                changed = cur.fetchall()
                for doc_id, live, key, text, value in changed:
                    if live:
                        li.add(doc_id, lexical_document(key, text, value_json_of(value, text)))
                    else:
                        li.remove(doc_id)
                dirty = bool(changed) or li.stale_format
                cur.execute(f"SELECT COUNT(*) FROM {t} WHERE user_id = ? AND live = 1", (user_id,))
                if int(cur.fetchone()[0]) != len(li):  # not this table's file after all: the rows decide
                    li, dirty = None, True
            if li is None:
                cur.execute(f"SELECT doc_id, key, text, value_json FROM {t} WHERE user_id = ? AND live = 1 "
                            "ORDER BY doc_id", (user_id,))
                li = LexicalIndex()
                for doc_id, key, text, value in cur.fetchall():
                    li.add(doc_id, lexical_document(key, text, value_json_of(value, text)))
            held["lexical"], held["dirty"] = li, dirty
            return li.doc_ids()

        d = self._files_dir()
        try:
            big = d is not None and (d / f"{user_file_stem(user_id)}.lex").stat().st_size > _PARSE_BESIDE
        except OSError:
            big = False
        try:
            if big:
                # as the whole mirror's load: a big user's BM25 file read, opened and parsed (and FAISS imported)
                # beside the reading and decryption of their packs, which release the GIL
                with ThreadPoolExecutor(2, thread_name_prefix="memledger-load") as pool:
                    pool.submit(import_module, f"{__package__}.vector_store")
                    lexical = pool.submit(self.stored_lexical, cur, user_id, mem.generation, at)
                    vectors = self._vectors_of(cur, {user_id: lambda: live_docs(lexical.result())}, mem.dim,
                                               mem.cjk_dim, user=user_id)
            else:
                found = self.stored_lexical(cur, user_id, mem.generation, at)
                vectors = self._vectors_of(cur, {user_id: lambda: live_docs(found)}, mem.dim, mem.cjk_dim,
                                           user=user_id)
        except (ValueError, KeyError, TypeError):
            return None
        if vectors is None or "lexical" not in held:
            return None
        if not len(held["lexical"]):
            return None, False
        main, cjk = vectors[user_id]
        return UserIndex(main, held["lexical"], cjk), held["dirty"]

    def save_files(self) -> None:
        """Write the serving copy's changed per-user index files and the manifest (at close; atomic per file).
        A bounded mirror writes its loaded users' changed files only (:meth:`write_user_files`), no manifest: it
        holds some users, and the manifest speaks for every user's file.

        The manifest is first rewritten with position -1, so a crash half-way leaves files that no open trusts.
        """
        d = self._files_dir()
        mem = self._memories.get(self.suffix)
        self.wait_for_writes()
        if d is None or mem is None or mem.dim is None:
            return
        if mem.budget is not None:
            with mem.lock:
                users = [(u, mem.users[u]) for u in sorted(mem.dirty) if u in mem.users]
                mem.dirty.clear()
                self.write_user_files(users, mem.generation, mem.position)
            return
        from .lexical import TOKENIZER_VERSION

        with mem.lock:
            d.mkdir(parents=True, exist_ok=True)
            manifest = {
                "model_id": self.model_id, "dim": mem.dim,
                "normalized": bool(getattr(self.embedder, "normalized", True)),
                "generation": mem.generation, "tokenizer": lexical_version(TOKENIZER_VERSION),
                "table": self.table("docs"),
                "cjk_model_id": self.cjk_model_id, "cjk_dim": mem.cjk_dim,
                "users": {u: user_file_stem(u) for u in sorted(mem.users)},
            }
            atomic_write(d / "manifest.json", json.dumps({**manifest, "position": -1}).encode())
            keep = set(manifest["users"].values())  # type: ignore[union-attr]
            for user_id in sorted(mem.dirty):
                stem = user_file_stem(user_id)
                u = mem.users.get(user_id)
                if u is None:
                    continue
                digest = self.write_user_file(user_id, u.lexical, mem.generation, mem.position)
                assert digest is not None
                mem.digests[stem] = digest
            mem.digests = {stem: h for stem, h in mem.digests.items() if stem in keep}
            # The digest of each file: an open trusts a file only if it is the very one this manifest was written
            # with (an older file copied back, or two users' files of the same document ids swapped, would otherwise
            # be trusted and rank by stale or foreign words).
            manifest["digests"] = dict(sorted(mem.digests.items()))
            for p in d.iterdir():
                # an erased user's files go, and the FAISS and vectors files a store written before kept (each
                # user's vectors are one blob in the table now, its one stored copy: projections/retrieval/packs.py)
                if p.suffix in (".faiss", ".vec") or (p.suffix == ".lex" and p.stem not in keep):
                    p.unlink(missing_ok=True)
            if (d / "cjk").is_dir():
                shutil.rmtree(d / "cjk", ignore_errors=True)
            atomic_write(d / "manifest.json", json.dumps({**manifest, "position": mem.position}).encode())
            mem.dirty.clear()

    def try_save_files(self) -> bool:
        """:meth:`save_files`, best effort: a file that cannot be written (a read-only or full disk, a directory in
        its place) is reported on logger ``memledger`` and False returned. Why: the files only make the next open
        faster, and the command saving them has done its work (one unwritable ``.lex`` file must not make
        ``remember`` exit 1 after recording, or every user's search fail). The manifest, written first with
        position -1, keeps whatever was left half-written untrusted."""
        try:
            self.save_files()
            return True
        except OSError as exc:
            import logging

            logging.getLogger("memledger").warning(
                "memledger: the search index files under %s were not saved (%s); they only make opening faster, "
                "so nothing is lost, but the next open rebuilds them from the table. Fix: make that directory "
                "writable, or remove what is in the way.", self._files_dir(), exc)
            return False
