"""Numbers said in words: English number words ("two thousand two hundred", "a dozen") and Chinese numerals
(两千二, 一万二, 二零二四) read as numbers, for the value-bearing parts of a statement (ledger/values.py). No I/O."""

from __future__ import annotations

import re

EN_UNITS = {"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
             "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
             "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30,
             "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90, "dozen": 12}
EN_SCALES = {"hundred": 100, "thousand": 1000, "grand": 1000, "million": 1_000_000, "k": 1000, "m": 1_000_000,
              "w": 10_000}  # 15w = 十五万, as written in Chinese chat
ZH_DIGITS = {"零": 0, "〇": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8,
              "九": 9}
ZH_SCALES = {"十": 10, "百": 100, "千": 1000, "万": 10_000, "亿": 100_000_000}


def has_han(s: str) -> bool:
    """Whether ``s`` holds a Han character (a Chinese numeral or word)."""
    return any("\u4e00" <= c <= "\u9fff" for c in s)


def fmt_number(x: float) -> str:
    """A number as the value parts write it: 2200.0 -> "2200", 3.5 -> "3.5"."""
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def zh_number(s: str) -> float | None:
    """A Chinese numeral as a number: 三千五 = 3500, 两千二 = 2200 (a bare digit after a scale is the next scale
    down, as spoken), 一万二 = 12000, 十五 = 15, 二零二四 = 2024, 三点五 = 3.5. None when it is not one."""
    if not s:
        return None
    if "点" in s:
        whole, _, frac = s.partition("点")
        w = zh_number(whole)
        if w is None or not frac or any(c not in ZH_DIGITS for c in frac):
            return None
        return float(f"{fmt_number(w)}.{''.join(str(ZH_DIGITS[c]) for c in frac)}")
    if all(c in ZH_DIGITS for c in s):
        return float("".join(str(ZH_DIGITS[c]) for c in s)) if len(s) > 1 else float(ZH_DIGITS[s])
    total, section, digit, last_scale = 0.0, 0.0, None, 1
    for c in s:
        if c in ZH_DIGITS:
            digit = ZH_DIGITS[c]
        elif c in ZH_SCALES:
            scale = ZH_SCALES[c]
            if scale >= 10_000:
                section = (section + (digit or 0)) * scale
                total += section
                section, digit = 0.0, None
            else:
                section += (1 if digit is None else digit) * scale
                digit = None
            last_scale = scale
        else:
            return None
    if digit is not None:
        # 两千二 = 2200, 一万二 = 12000: a trailing digit counts in the scale below the last one
        section += digit * (last_scale // 10 if last_scale >= 10 and s[-2] in ZH_SCALES else 1)
    return total + section


def en_number_words(s: str) -> float | None:
    """English number words as a number ("two thousand two hundred" = 2200, "a dozen" = 12); None if none."""
    words = [w for w in re.split(r"[\s-]+", s.lower()) if w and w != "and"]
    total, current, seen = 0.0, 0.0, False
    if words[-2:] == ["a", "half"] and len(words) > 2:
        rest = en_number_words(" ".join(words[:-2]))
        return None if rest is None else rest + 0.5
    if len(words) > 3 and words[-3:-1] == ["a", "half"] and words[-1] in EN_SCALES:
        rest = en_number_words(" ".join(words[:-3]))  # "two and a half grand" = 2,500
        return None if rest is None else (rest + 0.5) * EN_SCALES[words[-1]]
    if words and words[0] == "oh":
        words = words[1:]
    for i, w in enumerate(words):
        if w == "a":
            # "a hundred" is 100, but "a five kilometre run" and "a dozen" hold no extra one
            if i + 1 < len(words) and words[i + 1] in EN_SCALES:
                current = max(current, 1)
            continue
        if w in EN_UNITS:
            current += EN_UNITS[w]
            seen = True
        elif w in EN_SCALES:
            current = max(current, 1) * EN_SCALES[w]
            if EN_SCALES[w] >= 1000:
                total += current
                current = 0.0
            seen = True
        else:
            return None
    return total + current if seen else None


def _rank(word: str) -> str | None:
    """A number word's part in a spoken number: "unit" (one to nine), "teen" (ten to nineteen, a dozen), "tens"
    (twenty to ninety), "scale" (hundred, thousand, ...), or None for a joining word ("and", "a", "half")."""
    if word in EN_SCALES:
        return "scale"
    v = EN_UNITS.get(word)
    if v is None:
        return None
    return "unit" if v < 10 else "teen" if v < 20 else "tens"


#: which part may follow which inside one spoken number: "forty two", "two hundred", never "seven forty" or
#: "nineteen twenty" (two numbers: a clock time, a year, a count and a price)
_FOLLOWS = {"unit": {"scale"}, "teen": {"scale"}, "tens": {"unit", "scale"}, "scale": {"unit", "teen", "tens", "scale"}}


def split_number_words(s: str) -> list[str]:
    """A run of English number words cut where one number ends and the next begins: "seven twenty" gives
    ["seven", "twenty"], "two hundred forty two" stays whole; hyphens and "and" are kept with their number."""
    words = [w for w in re.split(r"(\s+|-)", s) if w]
    pieces, current, last = [], "", None
    for w in words:
        r = _rank(w.lower()) if w.strip() and w != "-" else None
        if r is not None and last is not None and r not in _FOLLOWS[last]:
            pieces.append(current.strip(" -"))
            current = ""
        current += w
        if r is not None:
            last = r
    pieces.append(current.strip(" -"))
    return [p for p in pieces if p]


#: a height said in metres, read as centimetres: "1.83m", "1.83 metres", "1m83", "one metre eighty-three", 一米七五,
#: 1米75, 一米八 (180), 1.75米. "1.8m" alone is a height only beside a word of height (else millions, as in a budget)
HEIGHT = re.compile(
    r"(?<![\d.])([12])\.(\d{1,2})\s?(metres?|meters?|m(?![a-z]))|(?<![\d.])([12])m(\d{2})\b"
    r"|\b(one|two|1|2)\s+(?:metre|meter)s?(?:\s+and)?\s+(\d{1,2}|[a-z]+(?:[- ][a-z]+)?)\b"
    r"|([一两二12])米([一二三四五六七八九零\d]{1,2})(?![\d万千百])|([12])\.(\d{1,2})米", re.I)
_HEIGHT_WORD = re.compile(r"\b(?:tall|height|short|cm|centimet)|身高|个子|个头|高", re.I)


def height_cm(m: re.Match[str], text: str) -> str | None:
    """The centimetres of a :data:`HEIGHT` match in ``text`` ("183"), or None when it is no height."""
    g = m.groups()

    def whole(s: str) -> int | None:
        n = int(s) if s.isdigit() else (ZH_DIGITS.get(s) if len(s) == 1 else None)
        return n if n in (1, 2) else None

    if g[0]:  # 1.83m: a height when said in metres, or beside a word of height
        if g[2].lower() == "m" and not _HEIGHT_WORD.search(text):
            return None
        return str(int(g[0]) * 100 + int(g[1].ljust(2, "0")))
    if g[3]:
        return str(int(g[3]) * 100 + int(g[4]))
    if g[5]:
        metres = 1 if g[5].lower() in ("one", "1") else 2
        rest = int(g[6]) if g[6].isdigit() else en_number_words(g[6])
        return None if rest is None or not 0 <= rest < 100 else str(metres * 100 + int(rest))
    if g[7]:
        metres, frac = whole(g[7]), g[8]
        digits = frac if frac.isdigit() else "".join(str(ZH_DIGITS[c]) for c in frac)
        return None if metres is None else str(metres * 100 + int(digits.ljust(2, "0")))
    return str(int(g[9]) * 100 + int(g[10].ljust(2, "0")))
