"""People a statement names, and whom it is about: how ``remember`` reads the relation layer (docs/relations.md).

A statement may name someone by their tie to the user and their name: "my sister Anna", "Omar, my manager,", "my
wife's name is Maria", "my doctor is Dr. Lee", 我老婆小丽, 我同事叫王磊. Each is a :class:`Mention`: ``remember``
links that person as an entity with that relation, in the same save as the statement.

A statement may also open with the name of someone already linked by a role ("Anna moved to Munich", "Anna's new
number is ...", 小丽最近在学游泳). It is about that person: it is read as if the role were said ("my sister moved
to Munich"), so it lands in that person's slots (``family.sister.residence.city``) and revises what the user said
of them. A name that several linked people share is never guessed: the statement is read as it stands.

Whose slots: the first person ever linked by a role owns the role's slug (``family.sister.*``, where the
statements that name no one ("my sister lives in Berlin") already are); another person of a multi-valued role gets
a slug of their own (``family.sister-beth.*``), so two sisters' cities never replace each other.
"""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from .errors import BadInput
from .relations import SELF
from .schemas import check_text
from .slots import REGISTRY, KeyRegistry, Typing, type_statement
from .subjects import RELATIONS_EN, RELATIONS_ZH, ROLES_EN, ROLES_ZH

#: the relation type a role's subject slug is recorded as (the others are their own type: sister, friend, ...)
SLUG_RELATION = {"boss": "manager_of", "manager": "manager_of", "doctor": "doctor_of", "dentist": "dentist_of",
                 "therapist": "therapist_of"}
#: the subject slug a relation type keys its person's facts under (the inverse of SLUG_RELATION, one slug each)
RELATION_SLUG = {"manager_of": "manager", "doctor_of": "doctor", "dentist_of": "dentist", "therapist_of": "therapist"}
#: roles that name a group or a thing, not one person with a name
_NOT_ONE = {"parents", "in_laws", "grandparents", "children", "team", "company", "gym", "school"}

_ROLE_WORDS_EN = sorted((w for w, s in {**RELATIONS_EN, **ROLES_EN}.items() if s not in _NOT_ONE),
                        key=len, reverse=True)
_ROLE_WORDS_ZH = sorted((w for w, s in {**RELATIONS_ZH, **ROLES_ZH}.items() if s not in _NOT_ONE),
                        key=len, reverse=True)
#: a capitalised word that follows a role word without being a name ("my sister In Berlin", "my friend And I")
_NOT_NAMES = {"i", "i'm", "i've", "i'd", "i'll", "the", "a", "an", "and", "but", "or", "so", "in", "on", "at", "to",
              "from", "for", "with", "who", "that", "this", "we", "he", "she", "they", "it", "is", "was", "has",
              "had", "just", "still", "now", "also", "then", "today", "yesterday", "tomorrow", "monday", "tuesday",
              "wednesday", "thursday", "friday", "saturday", "sunday", "january", "february", "march", "april",
              "may", "june", "july", "august", "september", "october", "november", "december", "christmas",
              "easter", "english", "french", "german", "spanish", "italian", "chinese", "japanese"}
_TITLE = r"(?:(?:Dr|Mr|Mrs|Ms|Prof)\.? )"
_TITLE_ALONE = re.compile(r"(?:Dr|Mr|Mrs|Ms|Prof)\.?")
#: a word of a name in any alphabet ("Élodie", "Łukasz", "O'Brien", "Mary-Jane"); that it is capitalised is checked
#: after the match (:func:`_clean`), since a regular expression here cannot ask for a capital outside ASCII
_WORD = r"(?:[^\W\d_]'[^\W\d_]+|[^\W\d_]+(?:-[^\W\d_]+)?)"
_NAME = rf"(?:{_TITLE}?{_WORD}(?: {_WORD})?)"
_ROLE = r"(?i:" + "|".join(re.escape(w) for w in _ROLE_WORDS_EN) + ")"
_MY = r"(?i:\b(?:my|our) (?:(?:older|younger|elder|big|little|baby|twin|oldest|youngest|new|old) )?)"
_MENTIONS_EN = [
    # "my sister Anna", "my boss, Omar,", "my friend named Tom", "my wife's name is Maria", "my son is called Leo"
    re.compile(rf"{_MY}(?P<role>{_ROLE})(?:(?:'s name is| is (?:called|named)| (?:called|named)) |,? )"
               rf"(?P<name>{_NAME})(?![\w-])"),
    # "Anna, my sister,", "Omar (my manager)"
    re.compile(rf"(?<![\w.'])(?P<name>{_NAME}),? \(?{_MY}(?P<role>{_ROLE})\b"),
    # "my doctor is Dr. Lee": a titled name after "is"
    re.compile(rf"{_MY}(?P<role>{_ROLE}) is (?P<name>{_TITLE}{_WORD})(?![\w-])"),
]
_ROLE_ZH = "|".join(_ROLE_WORDS_ZH)
#: a Chinese name said after a role: 叫 and two or three characters, or a familiar 小X / 阿X
_MENTIONS_ZH = [
    re.compile(rf"(?:我们?的?)(?P<role>{_ROLE_ZH})(?:名字)?(?:叫|名叫)(?P<name>[\u4e00-\u9fff]{{2,3}}?)"
               r"(?=[，,。.！!？?、；;\s的是在住去说也都就和跟今昨最刚]|$)"),
    re.compile(rf"(?:我们?的?)(?P<role>{_ROLE_ZH})(?P<name>[小阿](?![时区孩狗猫学说心姐伙朋吃店组姨事儿面])[\u4e00-\u9fff])"),
]
#: the user named beside someone else
_FIRST_PERSON = re.compile(r"(?i:\b(?:i|me|my|we|us|our)\b|i'(?:m|ve|d|ll))|我")
#: where a clause ends: what follows is said apart from the clause naming the person
_CLAUSE_END = re.compile(r"[,;!?，。；！？—–]|(?<!Mr)(?<!Ms)(?<!Dr)(?<!St)(?<!Mrs)(?<!\d)\.(?!\d)|"
                         r"\b(?:so|but|because|and then)\b|所以|但是|因为")
#: words a statement may open with before its subject ("Oh, Anna moved", "对了，小丽...")
_OPENING = re.compile(r"^(?:(?:oh|btw|fyi|update|so|also|and|actually|well|by the way|quick update|对了|还有|另外|哦|嗯)"
                      r"(?![a-z])[\s,，:：;.!-]*)*", re.IGNORECASE)


@dataclass(frozen=True)
class Mention:
    """One person a statement names with their tie: ``relation_type`` (sister, manager_of, ...), ``slug`` (the
    role's subject slug: sister, manager), ``name`` as written, and ``start`` (character offset in the text)."""

    relation_type: str
    slug: str
    name: str
    start: int


@dataclass(frozen=True)
class Known:
    """An entity of the user as ``remember`` needs it: id, name, aliases, and the roles it holds or held towards
    the user (relation types, in the order first recorded) with whether each is current."""

    entity_id: str
    name: str
    aliases: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    current: tuple[str, ...] = ()
    position: int = 0

    def names(self) -> set[str]:
        return {fold(self.name), *(fold(a) for a in self.aliases)}


@dataclass
class Reading:
    """How ``remember`` reads a statement with the user's people in mind: its ``typing`` (the subject slug set to
    the person it is about, if any), the ``text`` resolution reads (an opening name said as the role), the
    ``about`` entity, the ``mentions``, and ``ambiguous``: names at the opening that several people share."""

    typing: Typing
    text: str
    about: Known | None = None
    #: the whole statement said of them, when ``text`` is only the clause naming them (what a "said again" decision
    #: must be checked against: a value in a later clause is still a value)
    full_text: str | None = None
    slug: str | None = None
    mentions: list[Mention] = field(default_factory=list)
    ambiguous: list[tuple[str, list[Known]]] = field(default_factory=list)


#: longest entity name or alias
MAX_NAME = 200
#: how the user is named in a path and a sentence (so no person may be given that name)
USER_NAME = "user"


def check_name(value: Any, field: str = "entity") -> str:
    """A name or alias: non-blank text, no control characters, at most 200 characters (NFC), never how relations name the user.

    Raises:
        BadInput: naming ``field``.
    """
    if not isinstance(value, str) or not value.strip():
        raise BadInput(field, f"{value!r} is not a name", "give the entity's name (\"Anna\") or its id")
    if len(value) > MAX_NAME:
        raise BadInput(field, f"is {len(value)} characters long", f"use at most {MAX_NAME}")
    check_text(value, field)
    if any(ch in value.strip() for ch in "\n\r\t\v\f\u2028\u2029"):
        raise BadInput(field, f"{value!r} holds a line break or tab", "give the name on one line")
    if fold(value) in (SELF, USER_NAME):
        raise BadInput(field, f"{value!r} is how relations name the user", "give the person's own name")
    return unicodedata.normalize("NFC", value.strip())


def fold(name: str) -> str:
    """A name compared without case or width ("ANNA" = "anna", full-width letters = ASCII)."""
    return unicodedata.normalize("NFKC", name).casefold().strip()


def _role(word: str) -> tuple[str, str] | None:
    w = word.lower()
    slug = RELATIONS_EN.get(w) or RELATIONS_ZH.get(word) or ROLES_EN.get(w) or ROLES_ZH.get(word)
    if slug is None or slug in _NOT_ONE:
        return None
    rtype = SLUG_RELATION.get(slug, slug)
    return rtype, RELATION_SLUG.get(rtype, rtype)


def mentions(text: str, user_name: str | None = None) -> list[Mention]:
    """The people ``text`` names with their tie, in order of appearance, each (type, name) once. An agent's note
    of the user in the third person ("the user's sister Anna", "Jon's sister Anna" with ``user_name`` Jon) names
    them as "my sister Anna" does."""
    t = unicodedata.normalize("NFC", text).replace("’", "'")
    owner = r"\b(?:the user|user" + (f"|{re.escape(user_name)}" if user_name else "") + r")'s\b"
    t = re.sub(owner, lambda m: "my".rjust(len(m.group(0))), t, flags=re.IGNORECASE)  # offsets kept
    found: dict[tuple[str, str], Mention] = {}
    for pattern in (*_MENTIONS_EN, *_MENTIONS_ZH):
        for m in pattern.finditer(t):
            role = _role(m.group("role"))
            name = _clean(m.group("name"))
            if role is None or name is None:
                continue
            found.setdefault((role[0], fold(name)), Mention(role[0], role[1], name, m.start()))
    return sorted(found.values(), key=lambda m: m.start)


def _clean(name: str) -> str | None:
    """The name as written, without the words after it that are no name (lower-case, "In", "And"); None when it
    does not start as a name (a capital letter, not a title alone, no CJK)."""
    if _cjk(name[:1]):
        return name  # a Chinese name was read by its own patterns (叫 / 小 / 阿)
    words = name.split(" ")
    while words and (words[-1].lower().rstrip(".") in _NOT_NAMES or not _capitalised(words[-1])):
        words.pop()
    if not words or words[0].lower().rstrip(".") in _NOT_NAMES or (len(words) == 1 and _TITLE_ALONE.fullmatch(
            words[0])):
        return None
    return " ".join(words)


def _capitalised(word: str) -> bool:
    return word[:1].isupper() and not _cjk(word[:1]) and not word.isupper() or word in ("Dr.", "Mr.", "Mrs.", "Ms.")


def slugs(known: list[Known]) -> dict[str, str]:
    """The subject slug of each entity that holds or held a role towards the user (entity id -> slug): the first
    one linked by a role owns the role's slug (``sister``), a later one of the same role gets ``sister-beth``
    (its name in ASCII letters, else its id). An entity with several roles is keyed by its first."""
    out: dict[str, str] = {}
    taken: set[str] = set()
    for k in sorted(known, key=lambda k: k.position):
        if not k.roles:
            continue
        base = RELATION_SLUG.get(k.roles[0], k.roles[0])
        slug = base if base not in taken else f"{base}-{_ascii(k.name) or k.entity_id}"
        if slug in taken:
            slug = f"{base}-{k.entity_id}"
        taken.add(slug)
        out[k.entity_id] = slug
    return out


def new_slug(rtype: str, name: str, entity_id: str, taken: set[str]) -> str:
    """The slug a person linked now by ``rtype`` gets (the role's own, unless an earlier person holds it)."""
    base = RELATION_SLUG.get(rtype, rtype)
    if base not in taken:
        return base
    slug = f"{base}-{_ascii(name) or entity_id}"
    return slug if slug not in taken else f"{base}-{entity_id}"


def _ascii(name: str) -> str:
    """The name as a key segment: letters without their accents ("Zoë" -> "zoe"), other characters as "-"."""
    plain = unicodedata.normalize("NFKD", fold(name)).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "-", plain).strip("-")[:40]


def named(text: str, known: list[Known]) -> tuple[list[Known], str, bool]:
    """The linked people (those with a role) whose name or alias ``text`` opens with, the rest of the text after
    the name, and whether the name is possessive ("Anna's"). Several entries: the name is shared (ambiguous)."""
    t = unicodedata.normalize("NFC", text).replace("’", "'").strip()
    start = _OPENING.match(t)
    body = t[start.end() if start else 0:]
    low = fold(body)
    best: tuple[int, list[Known]] = (0, [])
    for k in known:
        if not k.roles:
            continue
        for n in k.names():
            if not n or n.startswith(("my ", "我")) or not low.startswith(n):
                continue
            after = low[len(n):len(n) + 1]
            if after and (after.isalnum() and not _cjk(n[-1])):
                continue  # "Annabel" does not open with "Anna"
            if len(n) > best[0]:
                best = (len(n), [k])
            elif len(n) == best[0] and k not in best[1]:
                best[1].append(k)
    if not best[1]:
        return [], t, False
    rest = body[best[0]:]
    if _FIRST_PERSON.search(_CLAUSE_END.split(rest, maxsplit=1)[0]):
        # "Anna and I went hiking", 小丽和我去爬山: about the user too, read as it stands ("Anna moved to Munich, so
        # my trip changes" is about Anna: the user comes in a clause of their own)
        return [], t, False
    possessive = bool(re.match(r"'s?\b|的", rest))
    rest = re.sub(r"^(?:'s?\b|的)", "", rest)
    return best[1], rest, possessive


def owners(text: str, known: list[Known]) -> list[Known]:
    """The linked people (those with a role) named in ``text`` as owners of something ("Theo's swim lesson",
    豆豆的疫苗), wherever the name stands; a name that is part of a longer word ("Annabel's") is not theirs."""
    low = fold(unicodedata.normalize("NFC", text).replace("’", "'"))
    out = []
    for k in known:
        if k.roles and any(n and not n.startswith(("my ", "我")) and re.search(
                (r"(?<![\w])" + re.escape(n) + r"'s\b") if not _cjk(n[-1]) else re.escape(n) + "的", low)
                for n in k.names()):
            out.append(k)
    return out


def _cjk(ch: str) -> bool:
    return "\u4e00" <= ch <= "\u9fff"


def read(text: str, known: list[Known], registry: KeyRegistry = REGISTRY, user_name: str | None = None,
         pending: dict[tuple[str, str], str] | None = None, about: Known | None = None) -> Reading:
    """Read ``text`` with the user's linked people in mind (see the module docstring). ``known``: the user's
    entities; ``pending``: the slugs of people this statement links now, by (relation type, folded name).
    ``about``: the person who said it, or for whom it was said (``remember --about``): what it says of "I" or of no
    one is theirs, in their slots; the people it names are theirs ("my husband Mark" is Anna's husband)."""
    typing = type_statement(text, registry, user_name=None if about is not None else user_name)
    ms = mentions(text, None if about is not None else user_name)
    reading = Reading(typing=typing, text=text, mentions=ms)
    by_id = slugs(known)
    if about is not None:
        reading.about, reading.slug = about, by_id.get(about.entity_id)
        if typing.subject in ("self", "none"):
            reading.typing = dataclasses.replace(typing, subject=reading.slug or typing.subject,
                                                 tentative_of=_prefixed(typing.tentative_of, reading.slug))
        else:  # "my husband Mark is a carpenter" said by Anna: her husband's, never the user's husband's slot
            reading.typing = dataclasses.replace(typing, subject=reading.slug or typing.subject, slot=None,
                                                 cardinality="single", tentative_of=None)
        return reading
    if not known and not ms:
        return reading
    lead = ms[0] if ms and typing.subject != "self" and ms[0].start <= _lead_len(text) else None
    if lead is not None and lead.slug == _base(typing.subject):
        # "My sister Anna lives in Berlin": about Anna, in the slots of the sister she is
        holders = [k for k in known if fold(lead.name) in k.names() and lead.relation_type in k.roles]
        if len(holders) == 1:
            reading.about, reading.slug = holders[0], by_id.get(holders[0].entity_id)
        elif not holders and pending and (lead.relation_type, fold(lead.name)) in pending:
            reading.slug = pending[(lead.relation_type, fold(lead.name))]
        elif lead.slug in by_id.values() and _multi(lead.relation_type) and _ascii(lead.name):
            # "my friend Anna" not linked (another Anna is known): not the first friend's slots, but her own
            reading.slug = f"{lead.slug}-{_ascii(lead.name)}"
    elif typing.subject in ("none", "self", "other") and not ms:
        people, rest, possessive = named(text, known)
        if len(people) > 1:
            reading.ambiguous.append((people[0].name, people))
        elif people:
            # in English the clause that names them is what is said of them ("Anna moved to Munich, so my trip
            # changes"); a Chinese sentence runs on across its commas (小丽跳槽了，去了一家律所当财务主管)
            full = rest.lstrip()
            rest = (rest if _cjk(people[0].name[:1]) else _CLAUSE_END.split(rest, maxsplit=1)[0]).lstrip()
            if _cjk(rest[:1]) or _cjk(people[0].name[-1:]):
                opener = "我的" if possessive else "我"
            else:
                opener = "my " if possessive else "she "
            said, whole = opener + rest, opener + full
            retyped = type_statement(said, registry, user_name=None)
            if retyped.subject == "self":
                reading.about, reading.slug = people[0], by_id.get(people[0].entity_id)
                reading.typing, reading.text, reading.full_text = retyped, said, whole
                if whole != said:
                    # a correction or a change said in a later clause ("Lily's lessons are with Mr. Alvarez — I got
                    # mixed up before") still marks it: then the whole statement is read, in the clause's slot
                    marks = type_statement(whole, registry, user_name=None)
                    if (marks.correction, marks.cessation, marks.change) != (retyped.correction, retyped.cessation,
                                                                           retyped.change):
                        reading.typing = dataclasses.replace(
                            retyped, correction=retyped.correction or marks.correction,
                            cessation=retyped.cessation or marks.cessation, change=retyped.change or marks.change,
                            negated_tokens=retyped.negated_tokens | marks.negated_tokens)
                        reading.text = whole
    if reading.slug is None and typing.subject == "none" and not ms:
        # "a snack to pack for Theo's Wednesday swim lesson": a statement about no one that names one linked person's
        # thing is about that person, wherever in the sentence the name stands
        holders = owners(text, known)
        if len(holders) == 1:
            reading.about, reading.slug = holders[0], by_id.get(holders[0].entity_id)
    if reading.slug is not None and reading.slug != reading.typing.subject:
        ty = reading.typing
        reading.typing = dataclasses.replace(ty, subject=reading.slug,
                                             tentative_of=_prefixed(ty.tentative_of, reading.slug))
    return reading


def _multi(relation_type: str) -> bool:
    from .relations import RELATION_TYPES

    return RELATION_TYPES.get(relation_type).cardinality == "multi"


def _prefixed(slot: str | None, slug: str | None) -> str | None:
    """A slot key under ``slug``'s prefix ("residence.city" -> "family.sister.residence.city")."""
    if slot is None or slug is None:
        return slot
    return f"family.{slug}.{slot.split('.', 2)[2] if slot.startswith('family.') else slot}"


def named_in(query: str, known: list[Known]) -> list[tuple[Known, bool]]:
    """The linked people a query speaks of: by a name or alias it contains ("where does Anna live?"), or by the
    role they hold towards the user ("my sister", 我老婆: every current holder). Each with ``by_role``: True when
    only the role named them (the name is not in the query). In the order of ``known``."""
    t = unicodedata.normalize("NFC", query).replace("’", "'")
    low = fold(t)
    roles: set[str] = set()
    for w in _ROLE_WORDS_EN:
        if re.search(rf"(?<![\w-]){re.escape(w)}(?:'s|s)?(?![\w-])", low):
            roles.add(_role(w)[0])  # type: ignore[index]
    for w in _ROLE_WORDS_ZH:
        if w in t:
            roles.add(_role(w)[0])  # type: ignore[index]
    out: list[tuple[Known, bool]] = []
    for k in known:
        if names_any(low, k.names()):
            out.append((k, False))
        elif roles & set(k.current):
            out.append((k, True))
    return out


def names_any(folded: str, names: set[str]) -> bool:
    """Whether a folded text (:func:`fold`) names someone by one of ``names`` (folded): a whole word in an
    alphabet, a substring in Chinese. A role alias ("my sister", 我姐姐) is no name."""
    return any(n and not n.startswith(("my ", "我")) and (
        n in folded if _cjk(n[:1]) else re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", folded)) for n in names)


def _base(subject: str) -> str:
    rtype = SLUG_RELATION.get(subject, subject)
    return RELATION_SLUG.get(rtype, rtype)


def _lead_len(text: str) -> int:
    m = _OPENING.match(text.strip())
    return (m.end() if m else 0) + 12


__all__ = ["Known", "Mention", "Reading", "RELATION_SLUG", "SLUG_RELATION", "fold", "mentions", "named", "named_in",
           "names_any",
           "new_slug", "read", "slugs"]
