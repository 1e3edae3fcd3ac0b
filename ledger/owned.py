"""A car or a phone the user owns, said in passing by its make or model: "how often should I rotate the tyres on my
Kia Niro?", "pixel 8 lasts me a full day", "what's the right tyre pressure for a kia niro? picked mine up saturday",
我那台比亚迪秦PLUS跑高速掉电快不快, 比亚迪海豹开起来是真的爽, 小米14拍夜景真的绝了，续航也比我之前那台强太多. The
catalogue's vehicle and phone slots know the words of driving and of phones; this reads the thing itself, from the
makes and well-known models below, only where the user says it is theirs ("my", "mine", "picked it up", 我那台,
入手, 开起来), so a car or phone talked about is none owned."""

from __future__ import annotations

import re

#: car makes, and models known by their own name; those that are common words or names (Golf, Focus, Leaf, Polo, Seat,
#: Civic, Puma, Zoe, A4) are left out: "my focus", "my seat in the office", "my civic duty"
_CARS_EN = ("alfa romeo|aston martin|audi|bentley|bmw|buick|byd|cadillac|chevrolet|chevy|chrysler|citroen|citroën|"
            "cupra|dacia|dodge|ferrari|fiat|ford|gmc|honda|hyundai|infiniti|jaguar|jeep|kia|lamborghini|"
            "land rover|range rover|lexus|lotus|lucid|maserati|mazda|mclaren|mercedes|merc|mg|mitsubishi|"
            "nissan|opel|peugeot|polestar|porsche|renault|rivian|rolls royce|saab|skoda|škoda|subaru|suzuki|"
            "tesla|toyota|vauxhall|volkswagen|vw|volvo|nio|xpeng|"
            "corolla|camry|prius|rav4|accord|fiesta|mondeo|qashqai|juke|yaris|octavia|model [3sxy]|"
            "mustang|wrangler|f-150|ioniq|niro|sportage|tucson|cr-v|hr-v|cx-5|mx-5|"
            "[1-5] series|c-class|e-class|clio|megane|corsa|astra|insignia|kuga|ibiza|fabia|"
            "xc40|xc60|xc90|e-tron|taycan|macan|cayenne")
_PHONES_EN = (r"iphone|pixel \d+|pixel phone|galaxy s\d+|galaxy z ?(?:fold|flip)\d*|galaxy a\d+|oneplus|xiaomi|huawei|"
              r"oppo|motorola|moto g\d*|xperia|fairphone|nothing phone")
#: Chinese makes and models; words of everyday speech (理想, 长城, 现代, 长安, 问界) only before 汽车 or a model
_CARS_ZH = ("比亚迪|特斯拉|蔚来|小鹏|极氪|零跑|埃安|吉利|领克|哈弗|五菱|宏光|奇瑞|红旗|荣威|名爵|传祺|别克|雪佛兰|福特|"
            "起亚|马自达|斯柯达|沃尔沃|保时捷|丰田|本田|日产|大众|奥迪|宝马|奔驰|凯迪拉克|路虎|雷克萨斯|英菲尼迪|标致|雪铁龙|"
            "卡罗拉|凯美瑞|雷凌|汉兰达|雅阁|思域|飞度|轩逸|天籁|朗逸|速腾|迈腾|帕萨特|宝来|途观|高尔夫|捷达|秦PLUS|宋PLUS|"
            r"元PLUS|海豹|海豚|汉EV|唐DM|小米SU7|Model ?[3YSX]|(?:理想|问界|长安|长城|现代)(?:汽车|车|[A-Z]\d)")
_PHONES_ZH = (r"苹果手机|iPhone ?\d*|华为(?:手机|mate ?\d+|Mate ?\d+|P\d0|nova ?\d+)|小米(?:手机|1[0-9]|[2-9]\d?)(?!SU)|"
              r"红米(?:手机|K?\d+)|荣耀(?:手机|\d+)|一加(?:手机|\d+)|三星(?:手机|S\d+)|vivo ?X?\d*|OPPO ?\w*|魅族\d*")
#: the user's own: "my", or said as theirs after the name ("picked mine up", "lasts me", 入手, 开起来, 比我之前那台)
_MINE_EN = (r"picked (?:mine|it|her|him|one) up|got mine|mine (?:arrived|came)|lasts me|best purchase|"
            r"(?:i|we)(?:'ve| have)? (?:just )?(?:got|bought|picked up) (?:mine|one|it)")
_MINE_ZH = r"入手|提车|刚提|刚买|新买的|买了|开起来|骑起来|用起来|到手|我这[台辆部]|比我之前那?[台辆部个]|我之前那[台辆部个]"


def _owned(things_en: str, things_zh: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    en = re.compile(rf"\b(?:my|our)\s+(?:new\s+|old\s+|trusty\s+|little\s+|(?:19|20)\d\d\s+)?({things_en})\b|"
                    rf"\b(?:picked up|got|bought|ordered|switched to) (?:a |an |the |my )?(?:new )?({things_en})\b|"
                    rf"\b({things_en})\b[^.!]{{0,80}}?\b(?:{_MINE_EN})\b", re.I)
    zh = re.compile(rf"我(?:的|那|这|家|们家|用的|现在用的|开的|骑的)?(?:车子?|爱车|手机)?(?:是)?(?:一?[台辆部个])?"
                    rf"(?:[白黑红蓝灰银绿]色的?|新)?({things_zh})|({things_zh})[^，,。？?！!]{{0,24}}"
                    rf"[，,。？?！!]?\s*[^，,。？?！!]{{0,12}}?(?:{_MINE_ZH})", re.I)
    return en, zh


_CAR = _owned(_CARS_EN, _CARS_ZH)
_PHONE = _owned(_PHONES_EN, _PHONES_ZH)


def _found(patterns: tuple[re.Pattern[str], re.Pattern[str]], text: str) -> str | None:
    m = patterns[0].search(text) or patterns[1].search(text)
    return None if m is None else next(g for g in m.groups() if g).lower()


def owned_car(text: str) -> str | None:
    """The make or model of the car ``text`` says the user owns, lower-case ("kia" of "tyres on my Kia Niro"),
    or None: "my Kia", "our 2019 Corolla", "a kia niro? picked mine up saturday", 我那台比亚迪, 比亚迪海豹开起来真爽.
    Not a car named without being the user's ("is a Kia Niro worth it?") nor a model whose name is a common word
    ("my focus", "my golf swing")."""
    return _found(_CAR, text)


def owned_phone(text: str) -> str | None:
    """The make or model of the phone ``text`` says the user owns, lower-case ("pixel 8" of "pixel 8 lasts me a full
    day"; 小米14 of 小米14拍夜景真的绝了，续航也比我之前那台强太多), or None."""
    return _found(_PHONE, text)

