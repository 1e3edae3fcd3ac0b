"""Closed vocabularies of slot values, in English and Chinese: languages, allergens and diets.

A value said in other words is the same value ("Cantonese" / 粤语 / 广东话; "peanuts" / 花生; "I don't eat meat" /
vegetarian / 吃素). Slots whose values come from a small, closed set compare statements by these canonical values, so
a reworded statement is a paraphrase and a new value is never taken for one. Outside these sets nothing is assumed.
"""

from __future__ import annotations

import re
import unicodedata

#: languages by name (ISO 639 codes)
_LANGUAGES = {"english": "en", "英语": "en", "英文": "en", "japanese": "ja", "日语": "ja", "日文": "ja",
              "french": "fr", "法语": "fr", "法文": "fr", "german": "de", "德语": "de", "德文": "de",
              "korean": "ko", "韩语": "ko", "韩文": "ko", "spanish": "es", "西班牙语": "es", "russian": "ru", "俄语": "ru",
              "italian": "it", "意大利语": "it", "portuguese": "pt", "葡萄牙语": "pt", "arabic": "ar", "阿拉伯语": "ar",
              "mandarin": "zh", "普通话": "zh", "国语": "zh", "chinese": "zh", "中文": "zh", "汉语": "zh",
              "cantonese": "yue", "粤语": "yue", "广东话": "yue", "thai": "th", "泰语": "th", "vietnamese": "vi",
              "越南语": "vi", "hindi": "hi", "dutch": "nl", "荷兰语": "nl", "greek": "el", "希腊语": "el",
              "turkish": "tr", "土耳其语": "tr", "polish": "pl", "波兰语": "pl", "swedish": "sv", "瑞典语": "sv",
              "tagalog": "tl", "filipino": "tl", "他加禄语": "tl", "urdu": "ur", "bengali": "bn", "punjabi": "pa",
              "swahili": "sw", "malay": "ms", "马来语": "ms", "indonesian": "id", "印尼语": "id", "hebrew": "he",
              "persian": "fa", "farsi": "fa", "ukrainian": "uk", "czech": "cs", "finnish": "fi", "norwegian": "no",
              "danish": "da", "hungarian": "hu", "romanian": "ro", "tamil": "ta", "telugu": "te", "gujarati": "gu",
              "闽南语": "nan", "hokkien": "nan", "客家话": "hak", "hakka": "hak", "上海话": "wuu", "shanghainese": "wuu"}
LANGUAGE_RE = re.compile(r"(?<![a-z])(?:" + "|".join(sorted(map(re.escape, _LANGUAGES), key=len, reverse=True))
                         + r")(?![a-z])", re.I)

#: common allergens: what a person is allergic to, by canonical name
_ALLERGENS = {
    "peanut": r"peanuts?|花生", "tree nut": r"tree nuts?|(?<!pea)nuts\b|坚果", "walnut": r"walnuts?|核桃",
    "cashew": r"cashews?|腰果", "almond": r"almonds?|杏仁", "shellfish": r"shellfish|海鲜|贝类",
    "shrimp": r"shrimps?|prawns?|(?<!龙)虾", "crab": r"crabs?|螃蟹|蟹", "lobster": r"lobsters?|龙虾",
    "fish": r"\bfish\b|(?<!鱿)鱼(?!腥草)", "egg": r"\beggs?\b|鸡蛋|蛋类", "milk": r"\bmilk\b|dairy|lactose|牛奶|乳制品|乳糖|奶制品",
    "wheat": r"wheat|gluten|小麦|麸质|麦麸", "soy": r"\bsoy|soya|大豆|黄豆", "sesame": r"sesame|芝麻",
    "mustard": r"mustard|芥末", "celery": r"celery|芹菜", "penicillin": r"penicillin|amoxicillin|青霉素|阿莫西林",
    "cephalosporin": r"cephalosporins?|头孢", "aspirin": r"aspirin|阿司匹林", "ibuprofen": r"ibuprofen|布洛芬",
    "latex": r"latex|乳胶", "pollen": r"pollen|hay ?fever|花粉", "dust": r"dust(?: mites?)?|尘螨|灰尘",
    "cat": r"\bcats?\b|cat hair|cat dander|猫毛|猫", "dog": r"\bdogs?\b|dog hair|狗毛|狗", "bee": r"bee stings?|\bbees?\b|wasps?|蜜蜂|蜂蜇",
    "mango": r"mangos?|mangoes|芒果", "kiwi": r"kiwis?|猕猴桃", "strawberry": r"strawberr(?:y|ies)|草莓",
    "peach": r"peach(?:es)?|桃子|桃(?!花)", "pineapple": r"pineapples?|菠萝", "mould": r"mou?ld|霉菌",
    "alcohol": r"alcohol|酒精", "sulphite": r"sulph?ites?|亚硫酸", "grass": r"\bgrass\b|草(?!莓)",
}
_ALLERGEN_RE = [(name, re.compile(p, re.I)) for name, p in _ALLERGENS.items()]

#: diets, by canonical name; the first that fits wins (vegan before vegetarian)
_DIETS = (
    ("vegan", r"\bvegan\b|纯素|全素|不吃任何动物"),
    ("pescatarian", r"pesc[ae]tarian|只吃鱼|(?:fish|seafood) but (?:no|not) meat|吃鱼.{0,4}不吃肉"),
    ("vegetarian", r"vegetarian|veggie\b|素食|吃素|(?:don'?t|do not|never|won'?t|can'?t) eat (?:any )?(?:meat|animals)|"
                   r"\bno meat\b|meat[- ]free|不吃肉|不吃荤|肉.{0,8}(?:不碰|不吃|不沾)|(?:不碰|不沾)肉"),
    ("halal", r"halal|清真"), ("kosher", r"kosher"), ("keto", r"\bketo|生酮"),
    ("gluten-free", r"gluten[- ]free|无麸质"), ("low-carb", r"low[- ]carb|低碳水"),
)
_DIET_RE = [(name, re.compile(p, re.I)) for name, p in _DIETS]


def _norm(text: str) -> str:
    return unicodedata.normalize("NFC", text).lower().replace("’", "'")


def language_names(text: str) -> set[str]:
    """The languages ``text`` names, as ISO 639 codes ("I speak Cantonese" and 我会说广东话 both give {"yue"})."""
    return {_LANGUAGES[m.group(0).lower()] for m in LANGUAGE_RE.finditer(_norm(text))}


def allergens(text: str) -> set[str]:
    """The common allergens ``text`` names, by canonical name ("peanut allergy", 花生 -> {"peanut"})."""
    t = _norm(text)
    return {name for name, rx in _ALLERGEN_RE if rx.search(t)}


#: a diet that stopped ("no longer vegetarian", 不再吃素了) states none
_STOPPED = re.compile(r"\bno longer\b|\bany ?more\b|\bstopped\b|\bgave up\b|\bquit\b|\bnot (?:a |an )?(?:vegan|vegetarian|"
                      r"pescatarian|keto)|不再|不.{1,4}了|戒了|放弃")


def diet_of(text: str) -> str | None:
    """The diet ``text`` states, by canonical name ("I don't eat meat or fish", 我吃素 -> "vegetarian"), or None (none,
    or one said to have stopped: "I'm not vegetarian any more")."""
    t = _norm(text)
    if _STOPPED.search(t):
        return None
    return next((name for name, rx in _DIET_RE if rx.search(t)), None)


#: the slots whose values come from a closed vocabulary, and how to read them
SLOT_VALUES = {"profile.languages": language_names, "health.allergy": allergens,
               "diet": lambda text: {d} if (d := diet_of(text)) else set()}


def base_slot(slot: str | None) -> str:
    """A slot key without a relative's prefix ("family.son.health.allergy" -> "health.allergy"); "" for None."""
    if not slot:
        return ""
    return slot.split(".", 2)[2] if slot.startswith("family.") else slot


def slot_values(slot: str | None, text: str) -> set[str]:
    """The canonical values ``text`` names for the catalogue slot ``slot`` (its base key: "health.allergy" also for
    "family.son.health.allergy"); empty when the slot has no closed vocabulary or the text names none of it."""
    read = SLOT_VALUES.get(base_slot(slot))
    return set(read(text)) if read else set()
