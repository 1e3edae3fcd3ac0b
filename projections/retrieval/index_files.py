"""The index files of the ``vectors`` projection, under ``<home>/vectors/<model-slug>/<copy>/``: per user a BM25
``.lex`` file and a ``.vec`` file (the user's vectors, main and companion, in one array each: one blob, sealed under
the user's key, opened in one call), and ``manifest.json``. They only make opening faster: they are used only when
the manifest's model, generation, position and digests match the table exactly; otherwise the mirror is rebuilt from
the table. A manifest without vectors files (written before them) has its vectors read from the table's rows.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

from ..db import Cursor
from ..files import atomic_write
from .documents import lexical_version, model_slug, user_file_stem
from .mirror import Memory, UserIndex

#: the first line of a ``.vec`` file; a JSON header line (dimensions, dtypes, doc ids) follows, then the matrices
VEC_MAGIC = b"memledger.vectors/1\n"


def vectors_to_bytes(u: UserIndex) -> bytes:
    """A user's vectors as one blob: the main index's and the companion's doc ids and matrices, float16 when every
    component is one (vectors read from the table's float16 rows), else float32."""
    import numpy as np

    header: dict = {}
    parts = []
    for name, index in (("main", u.vectors), ("cjk", u.cjk)):
        if index is None:
            continue
        docs, mat = index.export()
        half = mat.astype("<f2")
        exact = bool(np.array_equal(half.astype(np.float32), mat))
        header[name] = {"dim": index.dim, "dtype": "<f2" if exact else "<f4", "docs": docs}
        parts.append(half.tobytes() if exact else mat.astype("<f4").tobytes())
    return VEC_MAGIC + json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode() + b"\n" + b"".join(parts)


def vectors_from_bytes(data: bytes, dim: int, cjk_dim: int | None) -> tuple[Any, Any]:
    """The main and companion (None: none) :class:`UserVectorIndex` of a blob of :func:`vectors_to_bytes`.

    Raises:
        ValueError: not such a blob, or its dimensions are not the table's."""
    import numpy as np

    from .vector_store import UserVectorIndex

    if not data.startswith(VEC_MAGIC):
        raise ValueError("not a vectors file")
    end = data.index(b"\n", len(VEC_MAGIC))
    header = json.loads(data[len(VEC_MAGIC):end])
    at, out = end + 1, []
    for name, want in (("main", dim), ("cjk", cjk_dim)):
        h = header.get(name)
        if h is None:
            out.append(None)
            continue
        if h["dim"] != want:
            raise ValueError(f"a vectors file of {h['dim']}-d vectors, the table's are {want}-d")
        n, width = len(h["docs"]), np.dtype(h["dtype"]).itemsize
        mat = np.frombuffer(data, dtype=h["dtype"], count=n * want, offset=at).astype(np.float32).reshape(n, want)
        at += n * want * width
        out.append(UserVectorIndex.from_matrix(want, [str(x) for x in h["docs"]], mat))
    if at != len(data) or out[0] is None:
        raise ValueError("a vectors file of another length")
    return out[0], out[1]


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

        Each user's vectors come from their ``.vec`` file: one blob opened in one call, instead of every row's
        vector read and opened (at 100,000 memories, 100,000 openings: seconds). A manifest written before the
        ``.vec`` files has its vectors read from the table's ``vector`` / ``cjk_vector`` columns, and the files are
        written at close. The BM25 files spare tokenizing every text."""
        d = self._files_dir()
        if d is None or dim is None or not (d / "manifest.json").is_file():
            return None
        from .lexical import TOKENIZER_VERSION, LexicalIndex
        from .vector_store import UserVectorIndex

        try:
            man = json.loads((d / "manifest.json").read_text(encoding="utf-8"))
            if (man.get("model_id"), man.get("dim"), man.get("generation"), man.get("position"),
                    man.get("tokenizer"), man.get("table"), man.get("cjk_model_id"),
                    man.get("cjk_dim")) != (self.model_id, dim, generation, position,
                                            lexical_version(TOKENIZER_VERSION),
                                            self.table("docs"), self.cjk_model_id, cjk_dim):
                return None
            lexical, digests, vectors, vector_digests = {}, {}, {}, {}
            stored = man.get("vectors")  # {stem: digest} of each user's vectors file; None: written before them
            for user_id, stem in man["users"].items():
                data = (d / f"{stem}.lex").read_bytes()
                digests[stem] = hashlib.sha256(data).hexdigest()
                if man["digests"][stem] != digests[stem]:
                    return None  # a file of another state (copied back, another user's): not this manifest's
                # a user's file is one sealed blob (ledger/sealing.py), opened in one call: None once erased
                lexical[user_id] = LexicalIndex.from_bytes(data if cur.sealer is None else cur.sealer.open(data))
                if stored is not None:
                    data = (d / f"{stem}.vec").read_bytes()
                    vector_digests[stem] = hashlib.sha256(data).hexdigest()
                    if stored[stem] != vector_digests[stem]:
                        return None
                    vectors[user_id] = vectors_from_bytes(data if cur.sealer is None else cur.sealer.open(data),
                                                          dim, cjk_dim)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        mem = Memory(generation=generation, position=position, dim=dim, cjk_dim=cjk_dim, digests=digests,
                     vector_digests=vector_digests)
        for user_id, li in lexical.items():
            if stored is None:
                mem.users[user_id] = UserIndex(UserVectorIndex(dim), li)
                mem.dirty.add(user_id)  # its vectors file is written at close
            else:
                main, cjk = vectors[user_id]
                if len(main) != len(li) or set(main.doc_ids()) != set(li.doc_ids()):
                    return None  # the two files of one user do not hold the same documents
                mem.users[user_id] = UserIndex(main, li, cjk)
            if li.stale_format:  # written again, in today's form, at close
                mem.dirty.add(user_id)
        if stored is not None:
            return mem
        return mem if self._read_rows(cur, mem, lexical_from_files=True) else None

    def save_files(self) -> None:
        """Write the serving copy's changed per-user index files and the manifest (at close; atomic per file).

        The manifest is first rewritten with position -1, so a crash half-way leaves files that no open trusts.
        """
        d = self._files_dir()
        mem = self._memories.get(self.suffix)
        if d is None or mem is None or mem.dim is None or mem.budget is not None:
            return  # a bounded mirror holds some users only: the files (every user's) are left as they are
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
                data = u.lexical.to_bytes()
                sealer = getattr(self, "sealer", None)
                if sealer is not None and sealer.writes:  # the words of the user's memories, sealed in one blob
                    data = sealer.seal(user_id, data)
                atomic_write(d / f"{stem}.lex", data)
                mem.digests[stem] = hashlib.sha256(data).hexdigest()
                data = vectors_to_bytes(u)
                if sealer is not None and sealer.writes:  # the user's vectors, sealed in one blob
                    data = sealer.seal(user_id, data)
                atomic_write(d / f"{stem}.vec", data)
                mem.vector_digests[stem] = hashlib.sha256(data).hexdigest()
            mem.digests = {stem: h for stem, h in mem.digests.items() if stem in keep}
            mem.vector_digests = {stem: h for stem, h in mem.vector_digests.items() if stem in keep}
            # The digest of each file: an open trusts a file only if it is the very one this manifest was written
            # with (an older file copied back, or two users' files of the same document ids swapped, would otherwise
            # be trusted and rank by stale or foreign words).
            manifest["digests"] = dict(sorted(mem.digests.items()))
            manifest["vectors"] = dict(sorted(mem.vector_digests.items()))
            for p in d.iterdir():
                # an erased user's files go, and FAISS files a store written before kept (vectors are read from
                # the table now, see _load_files)
                if p.suffix == ".faiss" or (p.suffix in (".lex", ".vec") and p.stem not in keep):
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
