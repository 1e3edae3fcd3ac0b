"""What each catalogue slot is about, in words (English and Chinese): the attribute ``profile`` and ``context`` name
for a fact of a slot, and the words search adds to a fact's lexical document."""

from __future__ import annotations

from .catalogue import _ROLES

#: What each catalogue slot is about, in words: the attribute ``profile`` and ``context`` name for a fact of the slot.
SLOT_LABELS: dict[str, str] = {
    "health.allergy": "allergy", "health.condition": "health condition", "religion": "religion",
    "politics": "politics", "union": "union membership", "orientation": "orientation",
    **{f"person.{role}": role for role, _en, _zh in _ROLES},
    "contact.phone": "phone number", "contact.email": "e-mail address", "profile.name": "name", "profile.age": "age",
    "profile.weight": "weight", "profile.hometown": "hometown", "education": "education", "preference.sport_team": "favourite team",
    "preference.movie": "films and shows", "preference.book": "favourite book", "preference.color": "favourite colour",
    "profile.birth_date": "birthday", "profile.languages": "language", "pet": "pet",
    "relationship.status": "relationship status", "work.occupation": "occupation", "work.employer": "employer", "work.salary": "salary",
    "commute": "commute", "work.shift": "work shift", "residence.housing": "housing", "residence.city": "home city",
    "diet": "diet", "preference.drink": "drink", "preference.food": "favourite food", "preference.music": "music",
    "device.phone": "phone", "device.computer": "computer", "vehicle": "car", "schedule": "schedule", "plan": "plan",
    "hobby": "hobby",
}

#: The same in Chinese, for the slots people ask about most: a Chinese question finds the fact by its slot's words
#: (我的手机号是多少 finds "换号了：13912345678", which says neither 手机 nor 号码).
SLOT_LABELS_ZH: dict[str, str] = {
    "contact.phone": "手机号码 电话", "contact.email": "邮箱", "profile.name": "名字", "profile.age": "年龄 岁",
    "profile.weight": "体重", "profile.hometown": "老家", "residence.city": "住在 城市", "work.employer": "公司 单位", "work.occupation": "职业 工作", "work.salary": "工资 收入",
    "preference.drink": "喝 饮料", "preference.food": "吃 食物", "preference.music": "音乐", "pet": "宠物",
    "profile.birth_date": "生日", "health.allergy": "过敏", "health.condition": "病 健康", "vehicle": "车",
    "profile.languages": "语言", "relationship.status": "感情", "schedule": "时间安排", "hobby": "爱好",
}


def slot_words(key: str) -> str:
    """The words of the catalogue slot a key is in (its label, in English and Chinese), or ``""``: a relative's key
    (``family.sister.residence.city``) counts as its slot. Search adds them to a fact's lexical document, so a
    question in other words ("what number do I ring") finds the fact ("my mobile is 07700 900 587")."""
    best = ""
    for slot in SLOT_LABELS:
        if (key == slot or key.startswith(slot + ".") or key.endswith("." + slot) or f".{slot}." in key) \
                and len(slot) > len(best):
            best = slot
    return " ".join(w for w in (SLOT_LABELS.get(best, ""), SLOT_LABELS_ZH.get(best, "")) if w)
