"""The key registry and statement typing over the slot catalogue (its data: ledger/catalogue.py): what a free-text
memory is *about*, typed without an LLM.

A **slot** is what a statement is about (``preference.drink``, ``residence.city``, ``pet``). Each slot is
single-valued (a new value supersedes the old one) or multi-valued (values accumulate as sibling facts:
``pet.1``, ``pet.2``, each its own stream). The catalogue ships with the package and is versioned
(:data:`CATALOGUE_VERSION`, recorded in every resolution's evidence); each slot has English and Chinese cues
(regular expressions over the NFC, lower-cased text) and a default sensitivity label — only for the special
categories of personal data (health, religion, politics, sex life, ethnicity, biometrics, union membership).

:class:`KeyRegistry` (ledger/registry.py, re-exported here) is the product's one key registry: the cardinality of
a key prefix, which the catalogue fills.

:func:`type_statement` reads a statement: its subject (the user, or a family member / other person: "my
brother's ...", "我哥哥..."), its slot, and whether it says it corrects, stops, or changes something. It also
keeps the statement's *value tokens* — its content words minus the cues, stopwords and markers — which the
resolution rules compare to tell a paraphrase from a new value.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from .owned import owned_car, owned_phone
from .places import home_city
from .subjects import FIRST_DAYS, NOT_KIN_ZH, RELATIONS_EN, RELATIONS_ZH, about_self
from .subjects import ROLES_EN as _ROLES_EN
from .subjects import ROLES_ZH as _ROLES_ZH
from .text import STOP_ZH, has_cjk

# the catalogue's data (ledger/catalogue.py), re-exported: its readers import it from here
from .catalogue import CATALOGUE, CATALOGUE_VERSION, SPECIAL_CATEGORIES, Cardinality, Slot  # noqa: F401


from .registry import REGISTRY, KeyRegistry, on_change  # noqa: F401  (re-exported: its readers import it from here)


# -- subject, markers --------------------------------------------------------------------------------------------
class _LazyPattern:
    """A regular expression compiled on first use; it answers ``search``, ``match``, ``finditer``, ... as the
    compiled pattern does. Why: the ~125 free-text patterns below took ~14 ms to compile at import, paid by every cold
    ``memledger profile`` or ``assert``, which never classify a sentence (docs/performance.md, the cold CLI)."""

    def __init__(self, pattern: str, flags: int = 0) -> None:
        self.pattern, self.flags = pattern, flags

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = getattr(re.compile(self.pattern, self.flags), name)
        self.__dict__[name] = value  # the next lookup of ``name`` finds it without coming here
        return value


def _lazy_re(pattern: str, flags: int = 0) -> _LazyPattern:
    return _LazyPattern(pattern, flags)


#: Discourse and correction markers a sentence may open with before naming its subject: "Sorry, I meant my brother
#: lives in Portland" is about the brother, "说错了，我哥哥住在天津" about 哥哥, "不是我哥哥而是我姐姐..." about 姐姐.
_LEAD_EN = (r"^(?:(?:and|also|oh|btw|by the way|sorry|oops|wait|no|nope|actually|correction|well|so|"
            r"(?:what )?i (?:mean|meant)(?: to say| was| is)?|sorry,? i meant|to correct(?: myself| that)?|my mistake|"
            r"my bad|i misspoke|let me correct(?: that)?|i was wrong|that'?s wrong|scratch that|rather|in fact|typo|"
            r"no wait|quick correction|update|fyi|heads up)\b"
            r"\s*[,:;.!\-\u2013\u2014]*\s*)*(?:that |it'?s |it is )?")
_LEAD_ZH = (r"^(?:(?:还有|另外|说错了|不对|更正一下|更正|纠正一下|纠正|我是说|我的意思是|其实|搞错了|记错了|口误|抱歉|"
            r"不好意思|对不起|哦|嗯|刚才)[，,。：:！!\s]*)*(?:不是.{1,16}?[，,]?而是|应该是|是)?")
# a kinship word used as a name may open the sentence alone: "Mum moved to Leeds", 奶奶给我发了一张照片
_REL_EN_RE = _lazy_re(_LEAD_EN + r"(?:(?:my|our) |(?=(?:mum|mom|dad|grandma|grandpa)\b))(" + "|".join(
    sorted(RELATIONS_EN, key=len, reverse=True)) + r")(?:'s|s'|’s)?\b")
_REL_ZH_RE = _lazy_re(_LEAD_ZH + r"(?:(?:我|我们)(?:的|家)?|(?=" + "|".join(w for w in RELATIONS_ZH if len(w) > 1 and w not in NOT_KIN_ZH)
                      + "))(" + "|".join(sorted(RELATIONS_ZH, key=len, reverse=True)) + ")")
#: Someone known by their role, as the owner of what follows ("my landlord's phone number", 我房东的电话): the
#: statement is about them, not the user ("my landlord is Mr. Lee" names the role's holder: slot person.landlord).
_ROLE_EN_RE = _lazy_re(_LEAD_EN + r"(?:my|our|the) (" + "|".join(sorted(_ROLES_EN, key=len, reverse=True))
                       + r")(?:'s|s'|’s)\s(?!(?:a|an|the|called|named|still|now|just)\b)")  # "my barber's a guy": is
_ROLE_ZH_RE = _lazy_re(_LEAD_ZH + r"(?:我|我们)?(?:的|家)?(" + "|".join(sorted(_ROLES_ZH, key=len, reverse=True)) + ")的")

#: "not" before a word of degree or manner negates how, not what ("I speak Portuguese too, not perfectly but enough",
#: "not very often"): no value said to be wrong
_NOT_DEGREE = (r"(?!(?:\w+ly|very|quite|that|too|so|much|always|often|sure|great|bad|fluent|fluently|perfect|"
               r"a lot|at all|yet)\b)")
_CORRECTION = [_lazy_re(p) for p in (
    r"\bsorry,? i meant\b", r"\bi meant\b", r"\bcorrection\b", r"\bi misspoke\b", r"\bmy mistake\b",
    r"\bi was wrong\b", r"\bto correct\b", r"^(?:actually|oh|sorry|wait),? no\b(?! (?:longer|more)\b)", r"\bactually,? (?:it'?s|it is|i'?m|i am|my)\b.*\bnot\b", r"\btypo\b",
    r"\bmisremembered\b", r"\bnot " + _NOT_DEGREE + r"\w+(?: \w+)?,? but\b", r"\bi said .* but (?:it|i)\b", r"\bscratch that\b",
    r"^oops\b", r"^sorry,? not\b", r"\bno wait\b", r"^(?:no,? )?hang on\b|^(?:no,? )?hold on,? (?:it'?s|it was|i)\b", r"^wait,? no\b", r"\bi mixed (?:it|them|that) up\b", r"\b(?:got|get|was|were) (?:\w+ )?mixed up\b", r"\bgot (?:it|that) wrong\b",
    r"\bmeant to say\b", r"\b(?:it|that) (?:was|is) never\b", r"\b(?:read|looked at|saw|gave you|had) the wrong\b", r"\bwrong (?:number|date|time|day|name)\b", r"\bi misread\b", r"^no,? it'?s\b",
    r"\bactually\b.*\bnot\b(?! " + _NOT_DEGREE[3:-1] + r")", r", not " + _NOT_DEGREE + r"[\w .'-]+[.!]?$",
    r"不是.{1,12}而是", r"说错了", r"^不对", r"更正", r"纠正", r"我是说", r"搞错了", r"记错了", r"口误", r"写错了",
    r"[记说写打搞弄看填报](?:错|岔)了?(?:日子|时间|号|数|名字|地址|号码|字|日期|一位|位)了", r"打错了", r"说反了", r"搞混了", r"弄错了", r"看错了", r"^不好意思[，,]", r"应该是.{1,12}不是", r"[，,]不是[^，,是]{1,10}$",
    r"\bautocorrect", r"\bwrong row\b", r"\bdid i (?:say|write|type)\b", r"\bfat[- ]?finger", r"\bhad (?:it|that) wrong\b",
    r"\b(?:typed|wrote|spelt|spelled|entered|put|gave you)(?= (?:[\w']+ ){1,4}?(?:down |in )?wrong\b)",
    r"刚才?说的.{0,8}(?:不对|错了)", r"打成.{1,8}了", r"(?:我|之前|刚才|前面|上次)(?:之前|刚才|前面|上次|又|都|给)?[写记说看]成[^，,。]{1,8}了", r"^抱歉[，,]",
    r"[报填输算]错了", r"[，,]\s*不是\s*[\d一二两三四五六七八九十]+[^，,。]{0,3}[，,。]", r"打错字", r"看岔", r"[记写说看听打]反了", r"^(?:哦|噢|啊|嗯)?[，,]?不对",
    r"^不是[^，,。]{1,12}[，,]\s*(?:应该|其实)?是",
    r"\b(?:swapped|transposed|flipped|reversed) (?:the |two |a couple of )?(?:digits|numbers|letters|characters)\b",
    r"[记弄说]混了", r"\bno idea (?:where|how|why) i (?:got|came up with|thought of)\b", r"的是[^，,。不]{1,8}不是[^，,。]{1,8}",
)]
#: A question states nothing about the user ("Do you think I should drink more water?", "我该不该换工作？").
_QUESTION = _lazy_re(r"[?？]\s*[)\"'”]?\s*$|^(?:do|does|did|should|shall|could|would|can|will|is|are|am|was|were|have|"
                       r"has)\s+(?:i|you|we|my|it|he|she|they|there)\b|[吗嘛]\s*[。.]?\s*$|"
                       # 呢 asks beside a question word (现在去哪儿呢); 我天天早上抹面包呢 states
                       r"^(?=.*(?:什么|怎么|哪|谁|多少|几[个点时天号岁]|为什么|咋|啥|如何|还是|是不是|有没有|要不要)).*呢\s*[。.]?\s*$|你觉得|你认为|要不要|该不该|"
                       r"是不是应该|能不能|可不可以")
#: A statement about oneself followed by a request ("I'm vegan, so could you swap the honey?", 我对花生过敏，帮我换个
#:菜？) states what it says before the request: it is a statement, not a question.
#: a question, then a statement about oneself ("Can you help me word an out-of-office? I'm a pharmacist at St.
#: Luke's and ..."): it states what it says after the question
_ASKED_THEN_STATED = _lazy_re(r"[?？]\s*(?:i'?m|i am|i work|i live|i'?ve|i have|my \w+(?: \w+)? (?:is|are))\b|"
                              r"[?？]\s*我(?:是|在|住|现在)")
_STATED_THEN_ASKED = _lazy_re(r"^(?:i'm|i am|i've|i have|i don't|i do not|i can't|i cannot|i live|i work|i'm now|"
                              r"my \w+(?: \w+)? (?:is|are))\b[^?？]{2,80}?[,;.!—–-]\s*(?:so|and|but)?\s*"
                              r"(?:could|can|would|will) you\b|"
                              r"^我[^？?，,]{2,30}[，,。！!]\s*(?:所以|那)?\s*(?:你)?(?:能不能|可不可以|能|可以|帮我|麻烦)|"
                              # a whole sentence said, then one asked ("Payslip came through: 46k before tax. Can we
                              # redo the budget?", "...wants to plan our first trip. Thinking Lisbon?")
                              r"^[^?？]{15,}?[.!。！]\s*[^.!。！?？]{2,80}[?？]\s*$")
#: A plan, possibility or hypothetical is not (yet) a change of the current value ("I might move to Berlin next
#: year", "I'm thinking about switching to tea", 我明年可能搬到深圳, 我打算换工作): it is recorded as a plan.
_TENTATIVE = _lazy_re(r"\b(?:might|(?:maybe|perhaps)(?! (?:\d|one|two|three|four|five|a few|twice|once)\b)|possibly|"
                        r"(?:will|'ll|would|gonna) probably|probably (?:will|going to|gonna|move|switch)|"
                        r"thinking (?:about|of)|considering|"
                        r"contemplating|hoping to|hope to|would like to|i'?d like to|not sure (?:if|whether)|"
                        r"wondering (?:if|whether)|someday|some day|(?:i|we) may|"
                        r"may (?:move|switch|start|quit|get|go|take)|could (?:move|switch|start|quit|get)|"
                        r"in the future|whether to)\b|^if\b|可能|也许|或许|大概(?![\d一二两三四五六七八九十百千万])|说不定|考虑|如果|要是|将来|有机会")
#: Plan words make a statement tentative too ("I'm planning to switch to tea", 我打算换工作), except when the plan
#: itself is what stops ("We cancelled the plan to move to Canada", 去加拿大的计划取消了: a cessation of the plan).
_PLANNING = _lazy_re(r"(?<!not )(?<!n't )(?<!no )(?<!phone )(?<!data )(?<!mobile )(?<!payment )(?<!meal )(?<!pension )"
                     r"(?<!insurance )(?<!dental )(?<!subscription )(?<!tariff )\bplan(?:s|ning)? (?:to|on)\b|"
                     # "I stopped going to yoga", "I keep going to the gym": going, not a plan
                     r"(?<!not )(?<!n't )(?<!stopped )(?<!quit )(?<!keep )(?<!kept )(?<!been )(?<!started )(?<!enjoy )"
                     r"\bgoing to\b(?! the| a )|"
                     r"(?<![不没])(?:打算|计划|准备)|(?<![不没])想(?:去|搬|换|学|买)")
_PLAN_NOUN = _lazy_re(r"\b(?:the|my|our|that|this|those|these) plans?\b|的计划|计划(?:取消|泡汤|搁置|作废|放弃|没了)|"
                        r"(?:放弃|取消|不再)了?.{0,8}计划")
# "too" adds only where it means "as well": "way too much", "too late", "too hot" say a degree
_ADDITIVE = _lazy_re(r"\b(?:also|too(?! (?:much|many|little|few|late|early|soon|long|far|often|big|small|hot|cold|"
                      r"expensive|cheap|tired|busy|hard|high|low|heavy|loud)\b)|as well|in addition|besides|as much as|another|one more|a second|"
                      r"on top of that)\b|(?<!再)也(?![算好罢行许太就够]|是(?![\d零一二两三四五六七八九十百千万])|真是|不算|没那么|不怎么)|(?:^|[，,。；;！!])\s*还有|还有(?=[一两二三几])|另外|又(?=养|买|添|多了|报了|加了|交了|办了|认识|学了|开了|有了?一)|另一|之一|还(?=会|要|在|喜欢|爱|养|学|想|经常|常|会再)|再(?=存|买|养|学|加)")
_NEGATED = [_lazy_re(p) for p in (r"不是(.{1,12}?)而是", r"不是([^，,]{1,12}?)[，,]\s*(?:应该|其实)?是",
                                   r"[，,]不是([^，,是]{1,10})$", r"是[^，,]{1,12}[，,]\s*不是([^，,是]{1,10})[，,。！!；;]",
                                   r"\bnot " + _NOT_DEGREE + r"([\w' ]{1,30}?)(?:[,.;!]|$| but\b)",
                                   # "no idea where I got Hendricks from": the name said before was wrong
                                   r"\bno idea (?:where|how|why) i (?:got|came up with|thought of) ([\w' ]{1,30}?) from\b")]
_CESSATION = [_lazy_re(p) for p in (
    r"\bno longer\b", r"\bnot anymore\b",
    # "any more" stops only under a negation ("I don't eat meat any more"); "any more and it wilts" is a limit
    r"(?:n't|\b(?:not|never|no|nobody|nothing|none|nor|hardly|barely|rarely|without))\b[^,.;!?]{0,50}?\bany ?more\b", r"\bstopped\b(?! (?:at|by|in|for)\b)", r"\bquit\b", r"\bgave up\b",
    r"\bgiven up\b", r"\bdropped\b", r"\blost (?:my|his|her|their) job\b", r"\bleft (?:my|his|her) job\b",
    r"\blaid (?:\w+ )?off\b", r"\b(?:was|got|been|get) fired\b", r"\bfired (?:me|him|her)\b",
    r"\blet (?:me|him|her) go\b", r"\blet \w+ go\b", r"\b(?:got|was|been) let go\b", r"\bmade redundant\b", r"\bout of work\b", r"\bbetween jobs\b", r"\bjobless\b",
    r"\bretired\b", r"\bpassed away\b", r"\bdied\b", r"\bsold (?:my|his|her|our|the|both|all|them|it)\b", r"\bstepped away from\b",
    r"\bgot rid of\b", r"\bcancell?ed\b", r"\bbroke up\b", r"\bmoved out of\b", r"\bmoved away\b",
    # "every 10 days, no more" is a limit, not a stop
    r"(?<!\d, )(?<!\d )(?<!days, )(?<!days )(?<!weeks, )(?<!times, )(?<!once, )(?<!twice, )\bno more\b(?! than\b)",
    r"\bcalled off\b", r"\bcalled it (?:quits|a day)\b", r"\b(?:wrapped|wound) up\b(?=[^.;!?]{0,60}\bfor good\b)",
    # a request to forget ("please forget that I like spicy food", 别记我喜欢蓝色了，忘了吧) ends what it names; "don't
    # forget ..." and 别忘了 are reminders, not requests to forget
    r"(?<!don't )(?<!do not )(?<!never )\bforget (?:that|what i (?:said|told you)|about (?:my|the|what|that)|i said)\b",
    r"\bdon'?t remember (?:that|this)\b", r"别记|忘了吧|忘掉吧|不用记(?:了|住|着)",
    r"\bwound down\b", r"\b(?:we|i) buried\b", r"\b(?:said|say) (?:our |my )?goodbyes? to\b", r"\b(?:packed|pack|packing) (?:it )?in\b(?! (?:the|my|a|our) (?:car|bag|boot|"
    r"suitcase|box|van)\b)", r"\b(?:we|i) lost (?!(?:the|a|an|my|our|all|some|\d)\b)[a-z]+\b(?= (?:last|this|yesterday|today|on|over)\b)",
    r"\b(?:we|i) lost (?:our|my) (?:dog|cat|rabbit|hamster|budgie|parrot|bird|horse|pony|tortoise|guinea pig|fish)\b",
    r"\bput (?:\w+ )?to sleep\b", r"\brainbow bridge\b", r"\b(?:split up|disbanded)\b",
    r"\b(?:is|are|'s|'re) (?:done|over|finished)(?! (?:with|by|at|in)\b)(?=[,.;!]|$| now\b| for good\b| for (?:me|us|him|her|them)\b)", r"\bsince (?:my|the) last (?:cigarette|smoke|cig|drink|vape)\b",
    r"\b(?:had to |have to |having to )?put (?:\w+ )?down\b(?= (?:on|last|this|yesterday|today)\b|[.,!]|$)", r"\bhung up (?:my|the|his|her) (?:boots|gloves|racket|skates|cleats)\b", r"\bunemployed\b", r"\bended\b(?! up\b)", r"\bdon'?t (?:\w+ )?(?:drink|eat|have|"
    r"play|do|own|go)\b", r"\bdo not\b", r"\bnot (?:a|an) \w+ any\b", r"\bnever again\b",
    r"不再", r"戒了", r"放弃", r"辞职", r"离职", r"失业", r"被.{0,6}(?:裁|辞退|开除)", r"下岗", r"丢了工作", r"分手", r"去世", r"卖了", r"卖掉", r"卖给[^，,。！？!?；;]{1,6}了",
    r"取消", r"搬离", r"停了", r"不(?!被)(?!能再[多少高低贵长短])(?!会再[多少高低贵])(?!.{0,2}[多少]了)[^，,。！？!?；;]{1,4}了", r"没有[^，,。！？!?；;]{1,6}了", r"送人了", r"不养",
    r"\blet .{1,40}?(?:lapse|expire)\b", r"戒(?=烟|酒|糖|掉|了)", r"放下了|先放一放|搁置了|暂停了|停掉了",
    r"\bhung up (?:my|the|his|her) (?:boots|gloves|apron)\b|\bhanded in (?:my|his|her) notice\b|\b(?:was|is) my last (?:\w+ )?(?:day|shift|session|class|match|game)\b",
    r"\band left\b", r"\bleft (?:the )?\w+ (?:club|gym|team|group|choir|band|company|firm|school|church|league|class)\b", r"\bgave (?:it|them|that) up\b", r"\bdid(?:n'?t| not) renew\b",
    r"\bwon'?t (?:be )?renew", r"\btook (?:me|him|her) off\b", r"\bfinished (?:with )?(?:physio|therapy|treatment|rehab|my course|the course)\b",
    r"\bunsubscribed\b", r"\bdone with\b", r"\b(?:handed|gave|given|took|taken)(?= (?:[\w']+ ){1,4}?back (?:to|in)\b)",
    r"\bsplit up\b", r"\bthat'?s(?= (?:[\w']+ ){1,2}done\b)", r"送回|送走了|给.{1,4}养了", r"\bsigned (?:me|him|her|us) off\b", r"\bfinished with\b",
    r"\bclosed (?:my|the|our)\b", r"\bshut down\b", r"\bmoved on from\b", r"\bstepped down\b",
    r"退掉|退了|退订|停订|停掉|没续|不续|辞掉|没再|关掉|关了|注销|卖掉|退出|停办|拆了|扔了|不去了|停用|不用再|不再需要",
    r"\bis over\b", r"\bended the\b", r"\bcleared out\b", r"\blast day (?:at|with|of)\b",
    r"好久没(?:碰|喝|吃|去|玩|练)了?", r"告别了", r"不让再", r"没养活", r"送给.{1,6}了", r"不再需要",
    # 走了 / 没了 ending a clause: gone (a pet or a person died, or left); 走了一万步 is a walk
    r"(?:走|没)了(?=[，,。！!；;…\s]|$)",
)]
#: the one before this one ("比我之前那台强", "my old one"): a thing said in passing that replaced it, not one more
_PREVIOUS = _lazy_re(r"之前那?[台辆部个]|以前那[台辆部个]|上一[台辆部个]|\bmy (?:old|last|previous) one\b")
#: a message opening with the first days somewhere ("first week in the hospital dispensary done"): a new job
_NEW_JOB = _lazy_re(rf"^(?:(?:so|well|ok|okay|phew|finally|my) )?{FIRST_DAYS} (?:done |over )?(?:in|at|as|with) ")
#: how long a value has held ("for ages now", "for three years now", 住了快八年): what is said again, not changed
_SO_FAR = _lazy_re(r"\bfor (?:ages|years|decades|months|a while|a long time|(?:\w+ ){1,2}(?:years|months|weeks))\b"
                   r"|\b(?:all my life|my whole life|ever since|since (?:i was|forever))\b|住了[^，,。]{0,4}年|"
                   r"都[^，,。]{0,4}年了|这么多年|好多年了")
_CHANGE = [_lazy_re(p) for p in (
    r"\bnow\b", r"\bswitched\b", r"\bswitch(?:ing)? to\b", r"\bchanged\b", r"\bthese days\b", r"\binstead\b",
    r"\bmoved to\b", r"\bstarted\b", r"\bended up (?:buying|getting|with|going)\b",
    r"\b(?:down|cut back|cut down|dropped|back) to (?=\d|one|two|three|four|five|six|seven|eight|nine|ten|a |an )",
    r"\bup to (?=[£$€¥]?\d|one|two|three|four|five|six|seven|eight|nine|ten)(?!.*\b(?:maximum|max|limit)\b)", r"\bgot (?:totall?ed|written off)\b",
    # "new", but not in a name (the New York Times, New Zealand, New Balance)
    r"\bnew\b(?! (?:york|zealand|jersey|mexico|delhi|orleans|england|hampshire|haven|balance|order|brunswick|"
    r"south wales|year'?s? (?:eve|day)|testament|wave|age)\b)", r"\bnowadays\b", r"\bbecame\b", r"\bbecome\b", r"\bupgraded\b",
    r"(?<!i've )(?<!we've )(?<!i have )(?<!we have )(?<!'ve )\bgot (?:a|an)\b", r"\bturned\b(?! (?:inside|upside|off|on|up|down|around|round|away|back|out|over|left|right|the|my|his|her|our|their|it|a|an|in|to)\b)", r"\bfrom now on\b", r"\bmoving to\b", r"\brelocated\b", r"\bjoined\b",
    r"现在", r"改(?!造|善|进|革|编|装)", r"(?<!交)换(?!乘|别[人的家])", r"最近", r"开始", r"搬到", r"搬去", r"变成", r"转", r"如今", r"以后",
    r"升职|升为|晋升|当上|升到|涨到|降到|调到", r"\bpromoted\b", r"\brenamed\b", r"\bgot (?:pushed|moved|bumped)\b",
    r"\b(?:raised|reset|bumped|reshuffled|relocated|rescheduled|re-?registered|upped|hiked|lowered)\b",
    r"\b(?:bumping|raising|upping|lowering|increasing|increased|decreasing|decreased|reducing|reduced)\b|\bhiking (?:up|the|my|our|their|its|prices?|rents?|fees?)\b",
    r"\bgot new\b", r"\bgot the keys\b", r"^(?:teaching|taught) (?:my|our) (?:very )?first\b",
    r"(?:第一天|头一天)(?:去|到)[^，,。]{1,8}上班", r"去[^，,。]{1,8}报到了?|入职了", r"涨价|降价|改到|调整|换了|搬到", r"\bstarting (?:this|next|today|from)\b",
    r"\bpushed (?:back|forward|to|up|the)\b|\bbrought forward\b|\brerouted\b|\bre-?timed\b",
    r"\bmoved (?:my|our|the|his|her) (?:[\w'-]+ ){1,3}?(?:up |back |forward )?to\b",  # "moved my run to 5:45"
    r"调课|挪到|换到|调到|改成|上瘾了|跳槽|转行|改行|入职|重新分配|重新安排|领证|领了证|扯证", r"\bgoing forward\b|\b(?:moved|gone|switched|went) (?:over|across) to\b", r"\b(?:gone|went|jumped|risen|rose|dropped|fallen|fell|climbed) (?:up |down )?from\b", r"\b(?:i|we) start (?:at|with|on)\b(?! \d)",
)]
# "now" in "I don't ... anymore, I now drink tea" marks a new value after a cessation: then it is a change.

_STOP_EN = set("""
a an the i i'm im me my mine we our us you your he his him she her they their them it its is am are was were be
been being do does did doing have has had having to of in on at for with from by about as and or but so that this
these those there here just really very also too still again now then than not no any anymore more most much
some such what which who whom when where why how all both each few other own same can will would should could
may might must shall really quite lot lots bit always usually often sometimes every week weeks year
years time times like likes liked love loves loved enjoy enjoys prefer prefers favourite favorite go goes going
went get gets got getting make makes made one thing things kind sort pretty well since last next ago today
tomorrow yesterday morning evening night actually sorry mean meant said say says tell told think thought
know knew want wants wanted need needs feel feels felt
""".split())
_ZH_FUNCTION_WORDS = re.compile("已经|曾经|经常|正在|刚才|其实|什么|怎么|非常|特别")


#: Words that name a slot rather than a value ("drink", "live", "工作"): left out of a statement's value tokens, so
#: "I drink tea" and "I drink beer" share no value, and "I love sushi" / "sushi is my favourite food" share all.
GENERIC = set("""
drink drinks drinking drank live lives living lived work works working worked job jobs occupation profession career
food dish eat eats eating ate music listen listening band singer phone number mobile cell email address born
birthday speak speaks speaking language languages fluent learn learning pet pets hobby hobbies play plays playing
fun free spare drive drives driving car laptop computer use uses using diet plan plans planning training goal
called named adopted have has own owns company employer employed date birth reach city town home
old age player support supports study studying studies major majoring degree university college team club fan
show series movie film book novel author colour color originally grew raised shift shifts
""".split()) | set("喝住工作班上职业吃爱喜欢听音乐手机号码生日出说会语养只叫名字开用平时常直一们又还也做个种最岁老家球员队专大学")


def _generic_stems() -> set[str]:
    return {_stem(w) for w in GENERIC if w.isascii()}


def nfc_lower(text: str) -> str:
    return unicodedata.normalize("NFC", text).lower().replace("’", "'")




def _stem(w: str) -> str:
    """A crude stem: plural and verb endings off, so "smoke", "smokes", "smoking" and "smoked" meet ("smok")."""
    for suf in ("ies", "es", "s"):
        if len(w) > 4 and w.endswith(suf) and not w.endswith("ss"):
            w = w[: -len(suf)] + ("y" if suf == "ies" else "")
            break
    if len(w) > 5 and w.endswith("ing"):
        w = w[:-3]
    elif len(w) > 4 and w.endswith("ed") and not w.endswith("eed"):
        w = w[:-2]
    if len(w) > 3 and w.endswith("e") and not w.endswith("ee"):
        w = w[:-1]
    return w


def content_tokens(text: str) -> set[str]:
    """Content tokens of a text: ASCII words (crudely stemmed, a possessive 's dropped) not in the stopword list,
    and CJK characters not in the CJK stopword set."""
    t = nfc_lower(text)
    out = {_stem(w.removesuffix("'s")) for w in re.findall(r"[a-z0-9][a-z0-9'\-]*", t)
           if w not in _STOP_EN and len(w) > 1}
    # function words of two characters go whole, so that their characters (经 of 已经) still count in other words
    t = _ZH_FUNCTION_WORDS.sub(" ", t)
    out |= {c for c in t if has_cjk(c) and c not in STOP_ZH}
    return out


#: endings that make a noun of a noun or verb ("membership" of "member"): a word with one is the same thing said
#: of the shorter word
_DERIVED = ("ship", "ships", "er", "ers", "hood", "ment", "ments")


def compound_shared(a: set[str], b: set[str]) -> set[str]:
    """The English content tokens of ``a`` that name a token of ``b`` as a part of a compound word ("hive" of
    "beehive", "gym" of "PureGym") or with a derived ending ("member" of "membership"): the same thing, written as
    one word. The shorter word has at least three letters."""
    out = set()
    for x in a:
        for y in b:
            if x == y or not (x.isascii() and y.isascii()) or min(len(x), len(y)) < 3:
                continue
            short, long = (x, y) if len(x) < len(y) else (y, x)
            if long.endswith(short) or (long.startswith(short) and long[len(short):] in _DERIVED):
                out.add(x)
    return out


_GENERIC_STEMS: set[str] = set()


@dataclass
class Typing:
    """What :func:`type_statement` read in a statement."""

    slot: str | None  # catalogue slot (key or key prefix), None if no cue matched
    cardinality: str  # single | multi (single when no slot)
    subject: str  # "self" or a relation slug ("brother", "wife", ...)
    correction: bool
    cessation: bool
    change: bool
    value_tokens: set[str]
    cue_weight: float = 0.0
    sensitivity: str | None = None
    negated_tokens: set[str] = field(default_factory=set)  # the value a correction says it was not ("not Maine")
    additive: bool = False  # "also", "too", "as well", 也, 还有: adds to what is known rather than replacing it
    mood: str = "statement"  # statement | question (states nothing) | tentative (a plan or possibility)
    tentative_of: str | None = None  # tentative: the slot it would change ("residence.city"), recorded as a plan
    #: the home city, car or phone the slot was read from when said in passing ("aberdeen" of "the aberdeen place",
    #: "kia" of "my Kia Niro"), lower-case; None otherwise
    in_passing: str | None = None

    @property
    def slot_key(self) -> str | None:
        """The key (single) or key prefix (multi) this statement's slot has for its subject."""
        if self.slot is None:
            return None
        return self.slot if self.subject == "self" else f"family.{self.subject}.{self.slot}"

    def describe(self) -> str:
        flags = [n for n in ("correction", "cessation", "change") if getattr(self, n)]
        if self.mood == "question":
            flags.append("question (it asks, it states nothing: no current memory is replaced)")
        elif self.mood == "tentative":
            flags.append("tentative (a plan or possibility, not a fact yet"
                         + (f": the current {self.tentative_of} stays" if self.tentative_of else "") + ")")
        return (f"slot {self.slot_key or 'none'} ({self.cardinality}), subject {self.subject}"
                + (", " + ", ".join(flags) if flags else ""))


#: someone who treats the user, named as theirs: what is said of them is labelled health, whatever slot it lands in
_TREATS = _lazy_re(r"\bmy (?:therapist|psychiatrist|psychologist|counsell?or|gp|doctor|dentist|physio(?:therapist)?|"
                   r"oncologist|cardiologist|dermatologist|gynae?cologist)(?:'s)?\b|我的?(?:心理医生|心理咨询师|主治医生|牙医)")
#: a Chinese statement opening with someone's nickname and a verb (小李搬到广州了, 老王辞职了, 阿杰去深圳了)
_THIRD_PERSON_ZH = re.compile(r"(?:小|老|阿)[\u4e00-\u9fff](?=[搬去在住换辞跳买卖要也都还刚已就说被把])|"
                              # 新来的实习生坐我斜对面, 隔壁邻居搬走了: someone new or next door
                              r"(?:新来的|隔壁的?|对门的?|楼上的?|楼下的?)[\u4e00-\u9fff]{1,4}?(?=[坐住在是搬去叫换也都])|"
                              # 同事老张的工位是A-31: a colleague's, a friend's (named or not)
                              r"^(?:我的?)?(?:同事|朋友|室友|邻居|同学|闺蜜|哥们|老板)(?:[老小阿][\u4e00-\u9fff]|[\u4e00-\u9fff]{2})?的")
#: a clause opening with someone's name ("Marco moved to Portland"): not a pronoun, a sentence word or a greeting
_NAMED_OPENING = re.compile(r"(?!(?:I|I'm|I've|I'd|I'll|My|We|We're|Our|The|This|That|These|Those|It|It's|There|Here|Just|"
                            r"So|And|But|Also|Then|Now|Today|Tonight|Yesterday|Tomorrow|Finally|Oh|Well|Ok|Okay|Yes|No|"
                            r"Any|What|How|Why|When|Where|Who|Can|Could|Should|Would|Will|Do|Does|Did|Is|Are|Was|Were|"
                            r"Have|Has|Had|Not|Never|Still|Last|Next|Since|After|Before|Every|Each|Our|Your|His|Her|"
                            r"Their|Sorry|Hey|Hi|Btw|Update|Quick|Moved|Started|Switched|He|She|They|He's|She's|They're|User)\b)"
                            r"([A-Z][a-z]+)"
                            # and a verb said of them: "Marco moved", "Anna lives"; "Gave up coffee", "First week" open
                            # with no name
                            r" (?:just |now |finally |recently )?(?:[a-z]+(?:s|ed)|is|was|has|had|got|left|took|went)\b")
_FIRST_PERSON_EN = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|we|we're|our|us)\b", re.I)
_CLAUSE_EDGE = re.compile(r"[.!?;,:—–]|\s(?:so|and|but|because|since)\s")


def _said_of_another(cased: str, cues: list[re.Match[str]], user_name: str | None) -> bool:
    """Whether every cue of a statement's slot sits in an English clause about someone else: a clause that opens
    with a person's name (not the user's own, ``user_name``) and has no first-person word ("Marco moved to Portland,
    so I've been seeing Priya")."""
    if not cues or has_cjk(cased):
        return False
    edges = [0, *(m.end() for m in _CLAUSE_EDGE.finditer(cased)), len(cased)]
    for cue in cues:
        start = max(e for e in edges if e <= cue.start())
        end = min(e for e in edges if e > cue.start())
        clause = cased[start:end].strip()
        named = _NAMED_OPENING.match(clause)
        if not named or _FIRST_PERSON_EN.search(clause) or (user_name or "").lower() == named.group(1).lower():
            return False
    return True


def _strip(text: str, spans: list[tuple[int, int]]) -> str:
    chars = list(text)
    for a, b in spans:
        for i in range(a, b):
            chars[i] = " "
    return "".join(chars)


#: the statement is about how things used to be, not the current value ("we used to drink matcha", "小时候")
#: a value said as the old one, which no longer holds: "my old number was ...", "our previous address was ..."
OLD_VALUE = r"\b(?:my|our) (?:old|previous|former) (?:[\w-]+ ){0,2}?(?:was|were|is)\b"
_PAST = _lazy_re(r"\bused to\b|\bas a (?:kid|child|student)\b|\bwhen i was (?:a kid|young|little)\b|"
                   + OLD_VALUE + "|"
                   r"\bbefore (?:i|we) (?:moved|came|relocated)\b|"
                   r"小时候|以前|过去|当年")


def type_statement(text: str, registry: KeyRegistry = REGISTRY, user_name: str | None = None) -> Typing:
    """Type one statement against the catalogue: subject, slot, markers and value tokens. ``user_name``: the
    user's id, which third-person statements ("Jon works as a banker") name. Typings with the shipped registry
    are cached (a remember types its ~8 candidates, which recur from call to call); treat them as read-only."""
    if registry is REGISTRY:
        return _typed(text, user_name)
    return _type_statement(text, registry, user_name)


@functools.lru_cache(maxsize=8192)
def _typed(text: str, user_name: str | None) -> Typing:
    return _type_statement(text, REGISTRY, user_name)


on_change(_typed.cache_clear)


#: the user named in the third person as the owner of a tie ("the user's sister", "Jon's doctor's number"): an
#: agent's note saying "my sister", so the statement is about the sister, never the user's own slot
_TIES = "|".join(sorted({*RELATIONS_EN, *_ROLES_EN}, key=len, reverse=True))


@functools.lru_cache(maxsize=256)
def _owner_re(user_name: str | None) -> re.Pattern[str]:
    names = "the user|user" + (f"|{re.escape(user_name.lower())}" if user_name else "")
    return re.compile(rf"(?<![\w-])(?:{names})(?:'s|’s) (?=(?:(?:older|younger|elder|big|little|baby|twin|oldest|"
                      rf"youngest) )?(?:{_TIES})(?:'s|s'|’s)?\b)")


def _type_statement(text: str, registry: KeyRegistry, user_name: str | None) -> Typing:
    t = _owner_re(user_name).sub("my ", nfc_lower(text).strip())
    subject = "self"
    spans: list[tuple[int, int]] = []
    m = _REL_EN_RE.match(t) or _REL_ZH_RE.match(t)
    role = None if m else (_ROLE_EN_RE.match(t) or _ROLE_ZH_RE.match(t))
    if m:
        rel = m.group(1)
        subject = RELATIONS_EN.get(rel) or RELATIONS_ZH.get(rel) or "other"
        spans.append(m.span())
    elif role:
        subject = _ROLES_EN.get(role.group(1)) or _ROLES_ZH.get(role.group(1)) or "other"
        spans.append(role.span())
    elif _THIRD_PERSON_ZH.match(t):
        subject = "other"  # 小李搬到广州了, 老王辞职了，去了腾讯: someone named by a nickname; what follows is theirs
    elif not about_self(t, user_name):
        subject = "none"
    body = _strip(t, spans)
    best: tuple[float, int, Slot | None, list[re.Match[str]]] = (0.0, 0, None, [])
    for order, s in enumerate(CATALOGUE):
        ms = s.matches(body)
        if not ms:
            continue
        # weight: characters covered by cues (a longer, more specific cue says more than a bare word)
        weight = s.weight * sum(max(2, mm.end() - mm.start()) if not has_cjk(mm.group(0))
                                else 3 * (mm.end() - mm.start()) for mm in ms)
        if weight > best[0]:
            best = (weight, -order, s, ms)
    # where the user lives or what they drive or use, said in passing: "the aberdeen place is absolutely baltic", 杭州
    # 这梅雨季…衣服晾三天都不干, "the tyres on my Kia Niro"; the statement is about that slot whatever else it names
    city, car, phone = home_city(text), owned_car(text), owned_phone(text)
    thing = city or car or phone
    home = ("residence.city" if city else "vehicle" if car else "device.phone" if phone
            else "work.employer" if _NEW_JOB.match(t) else None)
    if home is not None and subject in ("self", "none"):
        subject = "self"
        said = next(s for s in CATALOGUE if s.key == home)
        best = (max(best[0], 1000.0), 0, said, [*said.matches(body)])
    slot = best[2]
    cased = unicodedata.normalize("NFC", text).replace("’", "'").strip()  # names are read by their capitals
    if slot is not None and subject == "self" and len(cased) == len(t) and _said_of_another(cased, best[3], user_name):
        slot = None  # "Marco moved to Portland so I've been seeing Priya": the move is Marco's, not the user's
    correction = any(p.search(t) for p in _CORRECTION)
    cess = [mm for p in _CESSATION for mm in p.finditer(body)]
    if slot is not None and slot.key == "diet":
        # "I don't eat meat or fish", 肉和海鲜都不碰: a diet said by what one does not eat, not a diet that stopped
        cess = [mm for mm in cess if not re.match(r"don'?t|do not|不(?!再)", mm.group(0))]
    chg = [mm for p in _CHANGE for mm in p.finditer(body)]
    if _SO_FAR.search(body):  # "Norwich has been home for ages now", 都住了快八年: how long it has held, not a change
        chg = [mm for mm in chg if mm.group(0).lower() not in ("now", "现在", "如今", "nowadays", "these days")]
    if subject in ("none", "other") or (_PAST.search(t) and not cess and not chg):
        slot = None  # not about the user, or about how things used to be: a memory, not a slot's value
    mood, tentative_of = "statement", None
    # a question or a plan about a special category ("我可能对花生过敏", "is my asthma getting worse?") keeps its label
    sensitivity = None if slot is None else slot.sensitivity
    if sensitivity is None and _TREATS.search(t):
        sensitivity = "health"  # "my therapist appointment is every Tuesday": who treats the user is health
    asked = bool(_QUESTION.search(t)) and not _STATED_THEN_ASKED.search(t) and not _ASKED_THEN_STATED.search(t)
    planned = bool(_TENTATIVE.search(body) or (_PLANNING.search(body) and not (cess and _PLAN_NOUN.search(t))))
    if asked and (_PRESUPPOSED.search(t) or home is not None):
        asked = False
    if (asked or planned) and _stated_apart(_strip(cased, spans) if len(cased) == len(t) else body, best[3]):
        # "What snack should I bring? Book club meets at Hannah's these days, so I'd like to bring something": the
        # question and the wish are clauses of their own; the clause holding the value states it
        asked = planned = False
    if asked:
        # a question asks; it is a memory of its own, never a slot's value (and marks nothing stopped or changed)
        mood, slot = "question", None
    elif planned:
        # a plan or possibility: it changes nothing yet; with a slot it becomes a plan (a multi-valued slot)
        mood = "tentative"
        if slot is not None and slot.key != "plan":
            tentative_of = slot.key if subject == "self" else f"family.{subject}.{slot.key}"
            slot = next(s for s in CATALOGUE if s.key == "plan")
    elif cess and slot is not None and _PLAN_NOUN.search(t):
        slot = next(s for s in CATALOGUE if s.key == "plan")  # "we cancelled the plan to move": the plan stops
    # markers are stripped, but a marker spanning a wildcard (不…了, 没有…了) keeps what it encloses
    strip = [(mm.start(), mm.end()) if ".{" not in mm.re.pattern else (mm.start(), mm.start() + 1)
             for mm in cess + chg]
    strip += [(mm.end() - 1, mm.end()) for mm in cess + chg if ".{" in mm.re.pattern]
    strip += [(mm.start(), mm.end()) for p in _CORRECTION for mm in p.finditer(body)]
    value = content_tokens(_strip(body, strip)) - GENERIC - _GENERIC_STEMS
    negated: set[str] = set()
    if correction:
        for p in _NEGATED:
            for mm in p.finditer(body):
                negated |= content_tokens(mm.group(1)) - GENERIC - _GENERIC_STEMS
    card = "single" if slot is None else registry.cardinality(slot.key)
    if mood != "statement":  # what is asked or only possible neither corrects nor stops anything
        correction, cess, negated = False, [], set()
    return Typing(slot=None if slot is None else slot.key, cardinality=card, subject=subject,
                  correction=correction, cessation=bool(cess), change=bool(chg), value_tokens=value,
                  cue_weight=best[0], sensitivity=sensitivity,
                  negated_tokens=negated, additive=_adds(body, chg) and not (home and _PREVIOUS.search(body)), mood=mood,
                  tentative_of=tentative_of,
                  # said in passing when it asks, or says more than the thing (我的手机是苹果手机 says the phone again)
                  in_passing=thing if thing is not None and slot is not None and subject == "self" and (
                      bool(_QUESTION.search(t)) or len(value - content_tokens(thing)) > 2) else None)


#: where a message's clauses part: its sentences, a consequence after ", so" / "，所以", a clause after "；"
_CLAUSE_SPLIT = _lazy_re(r"(?<=[.!?])\s+|[。！？；;]|[,，]\s*(?=so\b|所以|那你|你(?:推荐|觉得|说|看)|准备|打算|计划)|(?<=[?？])|"
                         # an emoji ends what it follows, as a full stop does ("... from april 😩 is that allowed?")
                         r"[\U0001F300-\U0001FAFF\u2600-\u27BF]+\s*|"
                         r"[,，—–]\s*(?=any (?:\w+ )?(?:tips|advice|ideas|suggestions|recommendations)\b|(?:what|how) "
                         r"(?:should|do|can|would) i\b|(?:can|could|would) you\b|有没有|有什么|怎么办|求推荐|推荐一下|"
                         r"(?:送|带|买|吃|准备)(?:[她他它]|[她他]们)?点?啥|有啥|咋|(?:附近|周边|这边|那边)有|哪(?:里|儿|家)有?|"
                         r"(?:周末|今天|明天|今晚|这周末?|最近|平时|晚上)(?:有啥|有什么|有没有|去哪|干啥|吃啥|玩啥))")
#: a question that takes a new value for granted ("any tips for my new flat in Leeds?", "good cafes near my new
#: office at Canary Wharf?"): it states that value, whatever it asks
_PRESUPPOSED = _lazy_re(r"\bas (?:a|an) new (?:[\w-]+ ){1,2}at [a-z]|\bmy first (?:day|week|month|shift) as (?:a|an) "
                        r"(?:[\w-]+ ){1,2}at [a-z]|\bnow that i'?m (?:at|with|working at|working for) [a-z]|"
                        r"\bmy new (?:flat|place|house|apartment|home|job|office|workplace|school|(?:flat|house|room)mates?|"
                        r"neighbou?rs) (?:in|at|near) "
                        r"(?!the\b|a\b)\w+|"
                        # "is it weird that cycling to work is the best part of my day?": it asks about what it says
                        r"^(?:is it (?:weird|strange|odd|bad|normal|silly|crazy|wrong)|am i (?:weird|crazy|wrong)) (?:that|if) "
                        r"(?:i\b|my\b|\w+ing\b)")


#: a move or a new job said in a clause of its own: stated, whatever a plan or a question beside it says
_STATED_CHANGE = _lazy_re(r"跳槽|搬到|搬去|入职|转行|改行|辞职|\bmoved to\b|\bstarted (?:at|a new job)\b|\bjoined\b")


def _stated_apart(body: str, cues: list[re.Match[str]]) -> bool:
    """Whether a message that asks or plans also states, in a clause of its own, something holding a value
    ("...? Book club gets together at Hannah's house these days, so I'd like to bring something nice"): a clause
    neither asked nor planned that holds every cue of the statement's slot (刚搬到杭州，有什么好吃的推荐吗？), or, with no
    slot, a value-bearing part (a name, number, code, day) or a stop. A plan said beside a remark without a value ("I might move
    to Berlin. Rents are crazy") is still a plan."""
    from .values import value_parts  # values reads the subjects and lexicon modules only: no cycle at run time

    bounds, start = [], 0
    for m in _CLAUSE_SPLIT.finditer(body):
        if m.start() > start:
            bounds.append((start, m.start()))
        start = m.end()
    bounds.append((start, len(body)))
    bounds = [(a, b) for a, b in bounds if body[a:b].strip()]
    if len(bounds) < 2:
        return False
    low = body.lower()
    plain = [(a, b) for a, b in bounds if not (_QUESTION.search(low[a:b].strip()) or _TENTATIVE.search(low[a:b])
                                               or _PLANNING.search(low[a:b]))]
    if not cues and not any(not value_parts(body[a:b]).empty or value_parts(body[a:b]).qualifiers.get("day")
                            or any(p.search(low[a:b]) for p in _CESSATION)  # "so I cancelled my gym membership"
                            or _STATED_CHANGE.search(low[a:b])  # 王磊跳槽去无锡了，…准备今年买房
                            for a, b in plain):
        return False
    # the clause stating the value holds a cue; a cue word repeated in the question ("去腾讯报到，送她点啥入职礼物好？")
    # does not make the statement a question
    return not cues or any(a <= cue.start() < b for a, b in plain for cue in cues) or any(
        _STATED_CHANGE.search(low[a:b]) for a, b in plain)


def _adds(body: str, changes: list[re.Match[str]]) -> bool:
    """Whether the statement adds ("also", 也) rather than replaces: an additive word in a clause after the one that
    says what changed speaks of something else (最近都喝燕麦拿铁了，美式太苦，胃也受不了: the stomach "also")."""
    add = _ADDITIVE.search(body)
    if add is None:
        return False
    first_change = min((m.start() for m in changes), default=None)
    return first_change is None or first_change > add.start() or not _CLAUSE_BREAK.search(
        body, first_change, add.start())


_CLAUSE_BREAK = re.compile(r"[，,。.;；!！?？]")


def overlap(a: set[str], b: set[str]) -> float:
    """|a & b| / min(|a|, |b|) (0 when either is empty): how much the smaller value is contained in the other."""
    if not a or not b:
        return 0.0
    return len(a & b) / min(len(a), len(b))


_GENERIC_STEMS |= _generic_stems()  # "lives" stems to "liv": a slot word too


#: A statement naming several values of one slot: "I have two cats, Luna and Mochi", "I speak French, German and
#: Dutch", "我养了两只猫". A cessation naming one of them must not retire the whole memory (ledger/resolution.py).
_SEVERAL_CI = _lazy_re(r"(?<!-)(?<!'s )(?<!is )(?<!aged )(?<!age )(?<!turned )\b(?:two|three|four|five|six|seven|eight|nine|ten|both|several|a couple of|a few)\b"
                         r"(?!-)(?! (?:times|days|hours|minutes|weeks|months|years|o'clock|am|pm)\b)|"
                         r"\ban? \w+(?: \w+){0,3} and (?:an?|the) \w+|[两二三四五六七八九几]\s*[只个条位种门辆台本]|、|"
                         r"[一两二三四五六七八九几]\s*[只个条位种门辆台本].{1,8}和.{0,2}[一两二三四五六七八九几]?\s*[只个条位种门辆台本]")
_SEVERAL_CS = _lazy_re(r"\b[A-Z][\w'-]+,? (?:and|&) [A-Z][\w'-]+\b|\b[A-Z][\w'-]+, [A-Z][\w'-]+\b")
_ALL = _lazy_re(r"\b(?:both|all|every one of|each of)\b|都|全部|全都")


def names_several(text: str) -> bool:
    """Whether a statement names several values ("two cats, Luna and Mochi", "a cat and a dog", 两只猫, 、)."""
    t = unicodedata.normalize("NFC", text)
    return bool(_SEVERAL_CI.search(t.lower()) or _SEVERAL_CS.search(t))


def says_all(text: str) -> bool:
    """Whether a statement speaks of all the values it refers to ("both cats died", 两只都送人了)."""
    return bool(_ALL.search(nfc_lower(text)))


#: A cessation in one slot that ends another too: losing one's job ("I lost my job", "Google laid me off", 失业,
#: typed work.occupation) ends the current employer as well. (Not the reverse: "I no longer work at Google" ends the
#: employer, and a nurse who leaves a hospital is still a nurse.)
CESSATION_LINKS: dict[str, tuple[str, ...]] = {"work.occupation": ("work.employer",)}


def linked_slot_keys(slot_key: str | None) -> tuple[str, ...]:
    """The slot keys a cessation in ``slot_key`` also ends (with the same family prefix, if any)."""
    if slot_key is None:
        return ()
    prefix, base = "", slot_key
    if slot_key.startswith("family."):
        parts = slot_key.split(".")
        prefix, base = ".".join(parts[:2]) + ".", ".".join(parts[2:])
    return tuple(prefix + k for k in CESSATION_LINKS.get(base, ()))
