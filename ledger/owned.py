"""A car the user owns, said in passing by its make or model: "how often should I rotate the tyres on my Kia
Niro?", 我那台比亚迪秦PLUS跑高速掉电快不快, 比亚迪海豹……我这台刚提两周. The catalogue's vehicle slot knows the words of
driving and of cars; this reads the car itself, from the makes and well-known models below, only where the user
says it is theirs ("my", "our", 我的/我那台/我这辆), so a car talked about is no car owned."""

from __future__ import annotations

import re

#: car makes, and models known by their own name; those that are common words or names (Golf, Focus, Leaf, Polo, Seat,
#: Civic, Puma, Zoe, A4) are left out: "my focus", "my seat in the office", "my civic duty"
_MAKES_EN = ("alfa romeo|aston martin|audi|bentley|bmw|buick|byd|cadillac|chevrolet|chevy|chrysler|citroen|citroën|"
             "cupra|dacia|dodge|ferrari|fiat|ford|genesis|gmc|honda|hyundai|infiniti|jaguar|jeep|kia|lamborghini|"
             "land rover|range rover|lexus|lincoln|lotus|lucid|maserati|mazda|mclaren|mercedes|merc|mg|mitsubishi|"
             "nissan|opel|peugeot|polestar|porsche|renault|rivian|rolls royce|saab|skoda|škoda|subaru|suzuki|"
             "tesla|toyota|vauxhall|volkswagen|vw|volvo|nio|xpeng|"
             # models said without their make
             "corolla|camry|prius|rav4|accord|fiesta|mondeo|qashqai|juke|yaris|octavia|model [3sxy]|"
             "mustang|wrangler|f-150|ioniq|niro|sportage|tucson|cr-v|hr-v|cx-5|mx-5|"
             "[1-5] series|c-class|e-class|clio|megane|corsa|astra|insignia|kuga|ibiza|fabia|"
             "xc40|xc60|xc90|e-tron|taycan|macan|cayenne|model y")
_OWNED_EN = re.compile(rf"\b(?:my|our)\s+(?:new\s+|old\s+|trusty\s+|little\s+|(?:19|20)\d\d\s+)?({_MAKES_EN})\b", re.I)
#: Chinese makes and models; words of everyday speech (理想, 长城, 现代, 长安, 问界) only after 我那台/我的 and before 车
_MAKES_ZH = ("比亚迪|特斯拉|蔚来|小鹏|极氪|零跑|埃安|吉利|领克|哈弗|五菱|宏光|奇瑞|红旗|荣威|名爵|传祺|别克|雪佛兰|福特|"
             "起亚|马自达|斯柯达|沃尔沃|保时捷|丰田|本田|日产|大众|奥迪|宝马|奔驰|凯迪拉克|路虎|雷克萨斯|英菲尼迪|标致|雪铁龙|"
             "卡罗拉|凯美瑞|雷凌|汉兰达|雅阁|思域|飞度|轩逸|天籁|朗逸|速腾|迈腾|帕萨特|宝来|途观|高尔夫|捷达|秦PLUS|宋PLUS|"
             r"元PLUS|海豹|海豚|汉EV|唐DM|小米SU7|Model ?[3YSX]|(?:理想|问界|长安|长城|现代)(?:汽车|车|[A-Z]\d)")
_OWNED_ZH = re.compile(rf"我(?:的|那|这|家|们家)?(?:台|辆|部|个)?(?:新)?({_MAKES_ZH})|({_MAKES_ZH})[^，,。？?！!]{{0,24}}"
                       rf"[，,。？?！!]?\s*我(?:这|那|的|家)(?:台|辆)?(?:车)?(?:刚|才|新)?(?:提|买|入手|开)", re.I)


def owned_car(text: str) -> str | None:
    """The make or model of the car ``text`` says the user owns, lower-case ("kia" of "tyres on my Kia Niro"),
    or None: "my Kia", "our 2019 Corolla", 我那台比亚迪, 比亚迪海豹……我这台刚提两周. Not a car named without "my"
    ("is a Kia Niro worth it?") nor a model whose name is a common word ("my focus", "my golf swing")."""
    m = _OWNED_EN.search(text) or _OWNED_ZH.search(text)
    return None if m is None else next(g for g in m.groups() if g).lower()
