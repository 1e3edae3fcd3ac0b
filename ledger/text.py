"""Text helpers shared by the write side and the read side."""

from __future__ import annotations

import re

__all__ = ["has_cjk"]

#: Han (CJK Unified Ideographs, Extension A, compatibility ideographs), kana and Hangul
_CJK_RE = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def has_cjk(text: str) -> bool:
    """True if ``text`` contains a Han, kana or Hangul character."""
    return bool(_CJK_RE.search(text))
