"""Text helpers shared by the write side and the read side."""

from __future__ import annotations

import re

__all__ = ["has_cjk"]

#: Han (CJK Unified Ideographs, Extension A, compatibility ideographs), kana and Hangul
_CJK_RE = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]")


def has_cjk(text: str) -> bool:
    """True if ``text`` contains a Han, kana or Hangul character."""
    return bool(_CJK_RE.search(text))


#: Chinese characters that carry no content alone (function words, time units, pronouns): left out of content tokens
STOP_ZH = set("周天月年昨今早晚号点，。！？、；：,.!?我你他她它们的了是在很也都就还又吗呢吧啊呀和与跟及或而且但不没有这那个一些些么什么怎么为着过到说会能要想让被把给对从向于上下里中更最非常特别真太已正在刚才其实各俩")


#: characters that show nothing: a text of these alone is empty (white space, zero-width marks, no-break and
#: ideographic spaces, the soft hyphen)
INVISIBLE = " \t\n\r\f\v\u200b\u200c\u200d\u2060\ufeff\u00a0\u3000\u00ad"
