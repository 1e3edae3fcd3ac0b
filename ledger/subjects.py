"""Who a statement is about: the words that name a relative or another person by their tie to the user ("my
sister", 我姐姐, "Mum"), mapped to the subject slug that keys what is said of them (``family.sister.*``)."""

from __future__ import annotations

RELATIONS_EN = {
    "brother": "brother", "sister": "sister", "mother": "mother", "mom": "mother", "mum": "mother",
    "father": "father", "dad": "father", "wife": "wife", "husband": "husband", "son": "son", "daughter": "daughter",
    "partner": "partner", "girlfriend": "partner", "boyfriend": "partner", "friend": "friend",
    "best friend": "friend", "parents": "parents", "in-laws": "in_laws", "grandparents": "grandparents",
    "colleague": "colleague", "coworker": "colleague", "boss": "boss",
    "grandmother": "grandmother", "grandma": "grandmother", "grandfather": "grandfather", "grandpa": "grandfather",
    "roommate": "roommate", "neighbour": "neighbour", "neighbor": "neighbour", "cousin": "cousin",
    "aunt": "aunt", "uncle": "uncle", "kids": "children", "children": "children",
}

RELATIONS_ZH = {
    "哥哥": "brother", "弟弟": "brother", "姐姐": "sister", "妹妹": "sister", "妈妈": "mother", "母亲": "mother",
    "爸爸": "father", "父亲": "father", "老婆": "wife", "妻子": "wife", "太太": "wife", "老公": "husband",
    "丈夫": "husband", "儿子": "son", "女儿": "daughter", "男朋友": "partner", "女朋友": "partner",
    "朋友": "friend", "同事": "colleague", "老板": "boss", "奶奶": "grandmother", "外婆": "grandmother",
    "爷爷": "grandfather", "外公": "grandfather", "室友": "roommate", "邻居": "neighbour", "表哥": "cousin",
    "表姐": "cousin", "孩子": "children", "爸": "father", "老爸": "father", "妈": "mother", "老妈": "mother",
    "哥": "brother", "姐": "sister", "弟": "brother", "妹": "sister", "闺女": "daughter", "媳妇": "wife",
    "对象": "partner", "婆婆": "mother_in_law", "岳母": "mother_in_law", "公公": "father_in_law", "岳父": "father_in_law",
}
#: people named by a tie that is not kinship: "同事请我喝咖啡" is about the user as much as the colleague
NOT_KIN_ZH = {"朋友", "同事", "老板", "室友", "邻居", "孩子", "对象"}
