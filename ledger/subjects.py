"""Who a statement is about: the words that name a relative or another person by their tie to the user ("my
sister", 我姐姐, "Mum"), mapped to the subject slug that keys what is said of them (``family.sister.*``)."""

from __future__ import annotations

import re

RELATIONS_EN = {
    "brother": "brother", "sister": "sister", "mother": "mother", "mom": "mother", "mum": "mother",
    "father": "father", "dad": "father", "wife": "wife", "husband": "husband", "son": "son", "daughter": "daughter",
    "spouse": "spouse", "partner": "partner", "girlfriend": "partner", "boyfriend": "partner", "friend": "friend",
    "best friend": "friend", "parents": "parents", "in-laws": "in_laws", "grandparents": "grandparents",
    "colleague": "colleague", "coworker": "colleague", "boss": "boss",
    "grandmother": "grandmother", "grandma": "grandmother", "grandfather": "grandfather", "grandpa": "grandfather",
    "roommate": "roommate", "flatmate": "roommate", "housemate": "roommate", "neighbour": "neighbour",
    "neighbor": "neighbour", "cousin": "cousin",
    "aunt": "aunt", "uncle": "uncle", "kids": "children", "children": "children",
}

RELATIONS_ZH = {
    "哥哥": "brother", "弟弟": "brother", "姐姐": "sister", "妹妹": "sister", "妈妈": "mother", "母亲": "mother",
    "爸爸": "father", "父亲": "father", "老婆": "wife", "妻子": "wife", "太太": "wife", "老公": "husband",
    "丈夫": "husband", "儿子": "son", "女儿": "daughter", "男朋友": "partner", "女朋友": "partner",
    "朋友": "friend", "同事": "colleague", "老板": "boss", "奶奶": "grandmother", "外婆": "grandmother",
    "爷爷": "grandfather", "外公": "grandfather", "室友": "roommate", "邻居": "neighbour", "表哥": "cousin",
    "表姐": "cousin", "表妹": "cousin", "表弟": "cousin", "堂哥": "cousin", "堂姐": "cousin", "堂妹": "cousin",
    "堂弟": "cousin", "舅舅": "uncle", "叔叔": "uncle", "伯伯": "uncle", "姑姑": "aunt", "姨妈": "aunt", "小姨": "aunt",
    "舅妈": "aunt", "婶婶": "aunt", "孩子": "children", "爸": "father", "老爸": "father", "妈": "mother", "老妈": "mother",
    "哥": "brother", "姐": "sister", "弟": "brother", "妹": "sister", "闺女": "daughter", "媳妇": "wife",
    "对象": "partner", "爱人": "spouse", "婆婆": "mother_in_law", "岳母": "mother_in_law", "公公": "father_in_law", "岳父": "father_in_law",
}
#: people named by a tie that is not kinship: "同事请我喝咖啡" is about the user as much as the colleague
NOT_KIN_ZH = {"朋友", "同事", "老板", "室友", "邻居", "孩子", "对象"}


#: Someone known by their role ("my landlord", 我房东), mapped to the subject slug that keys what is said of them
ROLES_EN = {"landlord": "landlord", "landlady": "landlord", "doctor": "doctor", "dentist": "dentist",
            "therapist": "therapist", "manager": "manager", "accountant": "accountant", "lawyer": "lawyer",
            "hairdresser": "hairdresser", "barber": "hairdresser", "trainer": "trainer", "coach": "trainer",
            "vet": "vet", "teacher": "teacher", "mechanic": "mechanic", "tutor": "tutor", "nanny": "nanny",
            "babysitter": "nanny", "team": "team", "company": "company", "gym": "gym", "school": "school"}
ROLES_ZH = {"房东": "landlord", "医生": "doctor", "牙医": "dentist", "律师": "lawyer", "会计": "accountant",
            "经理": "manager", "领导": "manager", "上司": "manager", "教练": "trainer", "理发师": "hairdresser",
            "老师": "teacher", "兽医": "vet", "保姆": "nanny", "阿姨": "nanny"}

#: a time phrase a Chinese statement may open with before its (dropped) subject: 上个月搬去成都了, 周一去字节报到了
_ZH_WHEN = (r"(?:上|这|下|本)(?:个)?(?:月|周|礼拜|星期)(?:初|末|底|[一二三四五六日天])?|周[一二三四五六日末]|星期[一二三四五六日天]|"
            r"[昨今前明]天|[去今前]年|最近|前(?:几|两)天|前阵子|这阵子|这段时间|年[初底]|月[初底]|刚刚?|上周末|(?:今天)?早上|今早|晚上|"
            r"天天|每天|平时|平常|现在|目前")
#: the first days of something, said of oneself ("first week teaching year 9", "first day as a nurse")
FIRST_DAYS = r"(?:first|1st) (?:day|week|month|term|shift)s?"
#: a statement that opens with a past-tense verb and drops its subject ("Joined Stripe last week", "Picked up the new
#: car yesterday", "Finally got the keys ..."): a note the user writes of themself
_DROPPED_I = (r"^(?:just |finally |recently |so |oh |well |ok |okay )?(?!(?:rained|snowed|looked|seemed|sounded|"
              r"happened|turned out)\b)(?:[a-z]{3,}ed|got|sold|bought|left|took|began|quit|signed|went|found|made|gave|threw|"
              r"done with|finished|started|hung|" + FIRST_DAYS + r")\b")
_SELF_EN = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|myself|we|we're|we've|our|us|user|user's)\b|"
                      r"^(?:im|ive)\b|"  # "im on an iphone 11": the apostrophe dropped, as chat drops it
                      r"^(?:he|she|they|likes?|loves?|prefers?|drinks?|lives?|works?|is|has|switched|moved|"
                      r"stopped|quit|dropped|enjoys?|speaks?|owns?)\b|^(?:first|new) (?:day|week|month|shift|job)s? (?:done |over |in )?(?:at|in|as)\b|"
                      + _DROPPED_I)
_SELF_ZH = re.compile(r"我|用户|^[他她]|房东|(?:这边|那边)(?:新|刚)租的|^(?:" + _ZH_WHEN + r")?(?:终于把|上班|上秤|坚持|骑|坐|打车|走路|步行|[和跟](?=.{1,8}(?:领证|结婚|订婚|分手|在一起|搬家|同居))|联系电话|手机号|电话号码|邮箱|[喜爱想在是住养会喝吃用开听做有刚去换改搬不每已最还也对]|[提买卖练学]了|玩(?![具家])|第一天|头一天|入职|辞职|跳槽|转岗|升职|离职|退休|毕业)")


#: where a sentence or a Chinese clause ends: what follows opens a statement of its own
_SENTENCE_START = re.compile(r"[.!?;]\s+|[。！？；，]\s*|[,，]\s*(?=刚|已经|上周|上个月|这周|昨天)")

#: a note the user keeps, a label and one value ("garage keypad: 9032", "wifi: tiger123"): the user's own
_NOTE = re.compile(r"^[a-z\u4e00-\u9fff][\w\s'’-]{1,40}[:：]\s*[\w#*+\-./@!$%&?]+\s*[.!。]?$")


def about_self(t: str, user_name: str | None = None) -> bool:
    """Whether a (lower-cased) statement speaks of the user: a first-person word, "the user", a leading he/she/they
    or bare verb (an agent's note), the user's own name; for Chinese, 我/用户 or a leading verb. "The cafe near
    the office serves a great latte" and "公司附近的咖啡店..." do not: they open no slot of the user's. A note of a
    label and one value ("garage keypad: 9032") is the user's own."""
    if user_name and re.search(r"(?<!\w)" + re.escape(user_name.lower()) + r"(?!\w)", t):
        return True
    if _SELF_EN.search(t) or _SELF_ZH.search(t) or _NOTE.match(t):
        return True
    # a later sentence may open the same way: "Any tips for a flat in Leeds? Just got the keys", "济南有啥好玩的？刚搬过来"
    # ("她叫林筱" later on is about whoever was named before: a leading he/she is the user's only opening a note)
    return any((_SELF_EN.match(c) or _SELF_ZH.match(c)) and not re.match(r"(?:he|she|they)\b|[他她]", c)
               for c in _SENTENCE_START.split(t)[1:] if c)
