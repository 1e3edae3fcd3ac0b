"""The value-bearing parts of a statement, normalised so that a reworded value compares equal and a changed one
does not. No I/O, no model.

Slot resolution may record *nothing new* for a statement (``reaffirm``: a paraphrase of what is current) only when
every value-bearing part of the two statements is equal (docs/resolution.md, "No value is ever lost"). The parts:

* ``number``  amounts with their magnitude: ``2,200`` = ``2.2k`` = ``two thousand two hundred`` = ``两千二`` =
  ``2200``; a currency sign or unit word is kept apart (``unit``) and compared only when both sides name one.
* ``time``    clock times as ``HH:MM``: ``8am`` = ``8 o'clock in the morning`` = ``早上八点`` = ``08:00``;
  ``8:30`` = ``八点半``.
* ``date``    calendar dates as ``MM-DD`` or ``YYYY-MM-DD``: ``March 3`` = ``3月3日``.
* ``every``   how often, as a rate per day: ``once a week`` = ``一周一次`` (ledger/frequency.py).
* ``email``, ``url``, ``phone`` (its digits), ``code`` (a token mixing letters and digits: plates, passwords,
  locker and account numbers, lower-cased without separators).
* ``name``    capitalised words inside an English sentence (Aldi, Dr. Patel, Meta), lower-cased.
* ``negated`` whether the statement is negated ("I don't ...", 不, 没).
* qualifiers: ``tod`` (morning, evening, 早上, 晚上), ``day`` (weekdays, Mondays, 周末), ``season`` (summer, 冬天),
  ``place`` (at home, at work, 在家, 在公司) and ``whom`` (for my son, 给儿子). Two statements under different
  qualifiers of one kind are about different things (siblings), not one replacing the other.
"""

from __future__ import annotations

import functools
import itertools
import re
import unicodedata
from dataclasses import dataclass, field

from .lexicon import LANGUAGE_RE, language_names
from .text import has_cjk
from .numerals import (EN_SCALES, EN_UNITS, HEIGHT, ZH_DIGITS, ZH_SCALES, en_number_words, fmt_number, has_han,
                       height_cm, split_number_words, zh_number)
from .frequency import frequencies, same_rate
from .value_words import names_within

#: the part kinds that carry a value (a difference in any of them is new information)
VALUE_KINDS = ("number", "time", "date", "email", "url", "phone", "code", "name", "every")
#: the qualifier kinds (a difference makes a sibling, not a replacement)
QUALIFIER_KINDS = ("tod", "day", "season", "place", "whom")

_MONTHS = {m: i + 1 for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct",
                                           "nov", "dec"))}
CURRENCIES = frozenset({"usd", "eur", "gbp", "cny"})
_DAYS = {"monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "weekday", "weekend"}
_UNIT_WORDS = {
    "$": "usd", "usd": "usd", "dollar": "usd", "dollars": "usd", "bucks": "usd", "€": "eur", "eur": "eur",
    "euro": "eur", "euros": "eur", "£": "gbp", "gbp": "gbp", "pound": "gbp", "pounds": "gbp", "quid": "gbp", "¥": "cny", "元": "cny",
    "块": "cny", "rmb": "cny", "yuan": "cny", "kg": "kg", "kilo": "kg", "kilos": "kg", "公斤": "kg", "km": "km",
    "kilometre": "km", "kilometres": "km", "kilometer": "km", "kilometers": "km", "公里": "km", "mile": "mi", "miles": "mi", "minute": "min", "minutes": "min", "mins": "min", "分钟": "min",
    "hour": "h", "hours": "h", "小时": "h", "year": "y", "years": "y", "岁": "y", "percent": "%", "%": "%",
    "g": "g", "gram": "g", "grams": "g", "gramme": "g", "grammes": "g", "克": "g", "mg": "mg", "milligram": "mg",
    "milligrams": "mg", "毫克": "mg", "ml": "ml", "millilitre": "ml", "millilitres": "ml", "milliliter": "ml",
    "milliliters": "ml", "毫升": "ml", "cm": "cm", "centimetre": "cm", "centimetres": "cm", "centimeter": "cm",
    "centimeters": "cm", "厘米": "cm", "lb": "lb", "lbs": "lb", "oz": "oz", "ounce": "oz", "ounces": "oz",
}
#: an amount written with its unit glued on ("50g", "5mg", "500ml"): an amount, not a code
_GLUED_UNIT = re.compile(r"(?<![A-Za-z0-9._])(\d+(?:\.\d+)?)\s?(mg|g|ml|cm|lbs?|oz)(?![A-Za-z0-9])", re.I)

_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")
_URL = re.compile(r"(?<![A-Za-z0-9])(?:https?://|www\.)[^\s，。,]+|(?<![A-Za-z0-9_.])[a-z0-9][A-Za-z0-9_-]{2,}(?:\.[A-Za-z0-9_-]+)*\.(?:com|org|net|io|cn|de|uk|dev|"
                  r"app|art|studio|me|co|info|blog|site|xyz|ai|tv|fm|page|shop|design|photo|online)(?:/[^\s，。,]*)?\b",
                  re.I)
#: digits said one by one ("3-8-1-5", "4 4 7 1"): a combination or a PIN, the same as "3815"
_SPELLED_DIGITS = re.compile(r"(?<![\w.,:-])\d(?:-\d){2,7}(?![\w.,:-]?\d)|(?<![\w.,:-])\d(?: \d){3,7}(?![\w.,:-]?\d)")
#: Chinese digits said one by one (零五二七 = 0527, 四七一九二 = 47192): four or more, or three after a leading 零; no
#: 十/百/千 between them (三四五 is "three to five" more often than 345)
_ZH_SPELLED_DIGITS = re.compile(r"[零〇][零〇一二三四五六七八九]{2,}|[一二三四五六七八九][零〇一二三四五六七八九]{3,}")
#: a distance run, walked or swum: "5k" there is kilometres
_RACE = re.compile(r"\b(?:run|runs|running|ran|race|races|jog|jogs|jogging|parkrun|walk|walks|swim|row|cycle)\b", re.I)
#: a unit word right after a number said in words ("eight years", "twenty minutes")
_UNIT_AFTER_WORDS = re.compile(r"[\s-]?(dollars?|bucks|quid|euros?|pounds?|kg|kilomet(?:re|er)s?|kilos?|km|miles?|minutes?|mins|hours?|"
                               r"years?|percent|grams?|grammes?|milligrams?|millilit(?:re|er)s?|centimet(?:re|er)s?|"
                               r"ounces?)\b", re.I)
_PHONE = re.compile(r"(?<![\w.])\+?\d[\d\s\-()]{6,}\d(?!\w|\.\d)")
#: a token mixing letters and digits (plates, passwords, flight and locker codes): 沪A12345, tulip88, B-12
_CODE = re.compile(r"(?<![A-Za-z0-9@_])[\u4e00-\u9fff]?(?=[A-Za-z0-9_-]*\d)(?=[A-Za-z0-9_-]*[A-Za-z])"
                   r"[A-Za-z0-9][A-Za-z0-9_-]*(?![A-Za-z0-9@_])")
_QUOTED_NAME = re.compile(r"(?:叫|名叫|叫做|名字是|called|named|name is)\s*[“\"「『‘]([^”\"」』’]{1,40})[”\"」』’]", re.I)
#: a name after 叫 / 名叫 / 名字是 that ends its clause (叫外卖, 叫车 go on: no name)
_ZH_CALLED = re.compile(r"(?:名字(?:叫|是)|名叫|叫做|叫)(?!外卖|车|醒|人|我|你|他|她|它)([\u4e00-\u9fff]{2,3})"
                        r"(?<![了吗呢吧啊的])(?=[，,。！!？?~～\s]|$)")
#: a place named after a verb of going or being somewhere (去西郊水库, 在钟书阁碰头, 到青龙湖, 在小林家客厅): the
#: words before a place noun, up to five characters, are its name; someone's home (小林家, 老刘家) is a place too
_ZH_SURNAMED = re.compile(r"(阿姨|老师|师傅|医生|大夫|律师|教练)姓([\u4e00-\u9fff])")
_ZH_PLACE = re.compile(r"(?:去|在|到|于|来|住在|搬到)(?:那个|那家|这家|这个)?"
                       r"((?:(?![爬登逛上下进出回])[\u4e00-\u9fff]{1,5}?(?:水库|湖|公园|广场|商场|超市|图书馆|书店|书阁|书城|体育馆|健身房|"
                       r"游泳馆|球馆|馆|中心|医院|诊所|药店|菜市场|市场|小区|花园|山|寺|庙|村|镇|路|街|桥|站|港|码头|"
                       r"海滩|河|江|岛|酒店|宾馆|餐厅|饭店|食堂|咖啡馆|茶馆|书院|会所|俱乐部|店))(?<!公司路)(?<!单位路)(?<!学校路)(?!上)|"
                       r"(?:小|老|大)[\u4e00-\u9fff]家|[\u4e00-\u9fff]{1,2}(?:阿姨|老师|叔|姐|哥)家)"
                       r"(?![\u4e00-\u9fff]{0,1}(?:人|们|长|员|口))")
#: a level below ground said in Chinese (负二层, 地下1层): the code B2, B1 as written on a car park's signs
_BASEMENT = re.compile(r"(?:负|地下)\s*([1-9一二两三四五六七八九])\s*(?:层|楼)")
#: a code ending in a keypad symbol ("1234#", "0000*"): the symbol is part of it
_KEYPAD = re.compile(r"(?<![\w#*])\d{2,}[#*](?![\w#*])")
_PROVINCES = set("京津沪渝冀豫云辽黑湘皖鲁新苏浙赣鄂桂甘晋蒙陕吉闽贵粤青藏川宁琼")
#: an amount with a scale suffix ("2.2k", "1.5m"), read before codes so that it is not one
_SCALED = re.compile(r"(?<![A-Za-z0-9.])([$€£¥])?(\d+(?:\.\d+)?)\s?([kmw])(?![A-Za-z0-9])", re.I)
_TIME_EN = re.compile(
    r"(?<![A-Za-z0-9.:])(\d{1,2})(?::(\d{2}))?\s*(a\.?m\.?|p\.?m\.?|o'?clock)?(?:\s+(?:in the|at)\s+(morning|afternoon|evening|night))?"
    r"(?![A-Za-z0-9]|[,.]\d)", re.I)
_HALF_PAST = re.compile(r"\b(half|quarter) (past|to) (\w+)\b(?:\s+(?:in the|at)\s+(morning|afternoon|evening|night))?", re.I)
_ZH_NAME = re.compile(r"[王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗郑梁谢宋唐许韩冯邓曹彭曾肖田董袁潘于蒋蔡余杜叶程苏魏吕丁任沈"
                      r"姚卢姜崔钟谭陆汪范金石廖贾夏韦付方白邹孟熊秦邱江尹薛闫段雷侯龙史陶黎贺顾毛郝龚邵万钱严覃武戴莫孔向汤]"
                      r"(?:阿姨|老师|师傅|先生|女士|医生|大夫|律师|经理|教练|姐|哥|叔|伯)")
_HALF_HOUR = re.compile(r"\bhalf (one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)\b"
                        r"(?:\s+(?:in the|at)\s+(morning|afternoon|evening|night))?", re.I)
_HOURS = r"one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve"
_MIN_PAST = re.compile(r"\b(five|ten|twenty|twenty[- ]five|\d{1,2})(?: minutes)? (past|to|after) (" + _HOURS + r"|\d{1,2})\b"
                       r"(?:\s+(?:in the|at)\s+(morning|afternoon|evening|night))?", re.I)
#: "six in the morning", "seven thirty pm", "eleven at night"
_WORD_CLOCK = re.compile(r"\b(" + _HOURS + r")(?:[ -](fifteen|thirty|forty[- ]five|oh[- ]five|ten|twenty|forty|fifty))?"
                         r"\s+(?:(a\.?m\.?|p\.?m\.?)|(?:in the|at)\s+(morning|afternoon|evening|night)|o'?clock)", re.I)
#: a clock time said as two number words after a word of time ("the seven forty-two", "at six fifteen"): never a sum
_MINUTE_WORDS = (r"oh[- ](?:one|two|three|four|five|six|seven|eight|nine)|ten|eleven|twelve|thirteen|fourteen|fifteen|"
                 r"sixteen|seventeen|eighteen|nineteen|(?:twenty|thirty|forty|fifty)(?:[- ](?:one|two|three|four|five|six|"
                 r"seven|eight|nine))?")
_SPOKEN_CLOCK = re.compile(r"\b(?:at|the|by|until|till|from|around|about|before|after)\s+(" + _HOURS + r")[ -](" +
                           _MINUTE_WORDS + r")\b(?!\s*(?:minutes?|hours?|days?|weeks?|years?|percent|%|dollars|pounds|"
                           r"euros|quid|bucks|k)\b)", re.I)
_AT_EVERY = re.compile(r"\bat (" + _HOURS + r"|\d{1,2}) (?:every|each) (morning|afternoon|evening|night)\b", re.I)
#: durations said in words, in minutes ("three quarters of an hour" = 45, 一个半小时 = 90)
_DURATION_PHRASES = {"half an hour": 30, "half hour": 30, "an hour and a half": 90, "one and a half hours": 90,
                     "an hour and a quarter": 75, "three quarters of an hour": 45, "a quarter of an hour": 15,
                     "quarter of an hour": 15, "an hour": 60, "one hour": 60, "a couple of hours": 120,
                     "一个半小时": 90, "半个小时": 30, "半小时": 30, "一个小时": 60, "一小时": 60, "两个小时": 120,
                     "一刻钟": 15, "三刻钟": 45, "两个半小时": 150}
_DURATION = re.compile("|".join(re.escape(k) for k in sorted(_DURATION_PHRASES, key=len, reverse=True)), re.I)
#: an amount of hours or minutes, in minutes ("1.5 hours" = 90, "90 mins", 90分钟)
_HOURS_MINUTES = re.compile(r"(?<![A-Za-z0-9.])(\d+(?:\.\d+)?|[零一二两三四五六七八九十百]+|(?:one|two|three|four|five|six|"
                            r"seven|eight|nine|ten|fifteen|twenty|thirty|forty|forty-five|fifty|sixty|ninety)"
                            r"(?:[ -](?:five))?)\s?(hours?|hrs?|minutes?|mins?|小时|个小时|分钟)(?![A-Za-z])", re.I)
_TIME_ZH = re.compile(r"(早上|早晨|上午|中午|下午|傍晚|晚上|夜里|凌晨)?\s*([零〇一二两三四五六七八九十\d]{1,3})\s*[点點]"
                      # 十二点一次, 十点两回: a count of times after the hour, not its minutes
                      r"\s*(半|一刻|三刻|[零〇一二两三四五六七八九十\d]{1,3}\s*分?(?![次回遍趟下]))?")
_CLOCK_AFTER = re.compile(r"\s*(?:钟|整|左右|前|以前|之前|以后|之后|开|出发|发车|起床|上课|下班|上班|见|的)")
#: a time said as minutes before the hour: 差一刻八点 (07:45), 差五分九点
_TIME_ZH_TO = re.compile(r"(早上|早晨|上午|中午|下午|傍晚|晚上|夜里|凌晨)?\s*差\s*(一刻|三刻|[零〇一二两三四五六七八九十\d]{1,2}\s*分钟?)"
                         r"\s*([零〇一二两三四五六七八九十\d]{1,3})\s*[点點]")
#: a character before 一点 that makes it "a bit more so" (早一点, 便宜一点): never a clock time
_COMPARATIVE = set("早晚快慢多少好大小高低短长近远轻重简宜贵有")
_DAY_OF_MONTH = re.compile(r"(?<![0-9])(0?[1-9]|[12][0-9]|3[01])[号日](?![0-9线楼])|\bthe (\d{1,2})(?:st|nd|rd|th)\b", re.I)
_DATE_ISO = re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b")
_DATE_ZH = re.compile(r"(?:(\d{4}|[零〇一二两三四五六七八九]{4})\s*年\s*)?([\d一二三四五六七八九十]{1,3})\s*月\s*"
                      r"([\d一二三四五六七八九十]{1,3})\s*[日号]")
_DATE_EN = re.compile(r"\b(jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.? (\d{1,2})(?:st|nd|rd|th)?\b|"
                      r"\b(\d{1,2})(?:st|nd|rd|th)? (?:of )?(jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\b",
                      re.I)
_ORDINAL_UNITS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7, "eighth": 8,
                  "ninth": 9}
_ORDINALS = {**_ORDINAL_UNITS, "tenth": 10, "eleventh": 11, "twelfth": 12, "thirteenth": 13, "fourteenth": 14,
             "fifteenth": 15, "sixteenth": 16, "seventeenth": 17, "eighteenth": 18, "nineteenth": 19, "twentieth": 20,
             "thirtieth": 30, **{f"twenty-{w}": 20 + n for w, n in _ORDINAL_UNITS.items()}, "thirty-first": 31}
_ORDINAL_RE = "|".join(sorted((w.replace("-", "[ -]") for w in _ORDINALS), key=len, reverse=True))
_MONTH_RE = r"(jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*"
#: a day of the month in words, said of a date ("due on the first", "on the 15th of each month" is read above):
#: only where the clause or "of the month" ends it, so "on the first try" is no date
_DAY_OF_MONTH_WORDS = re.compile(rf"\bon the ({_ORDINAL_RE})\b(?=\s*(?:of (?:the|each|every) month\b|[,.;!?)]|$))", re.I)
_DATE_EN_WORDS = re.compile(rf"\b(?:the )?({_ORDINAL_RE}) (?:of )?{_MONTH_RE}\b|\b{_MONTH_RE} (?:the )?({_ORDINAL_RE})\b",
                            re.I)
_NUM = re.compile(r"(?<![A-Za-z0-9.])([$€£¥])?\s?(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?\s?(thousand|grand|million|hundred)?"
                  r"(?![A-Za-z0-9])\s?(%|percent|dollars?|bucks|quid|euros?|pounds?|usd|eur|gbp|rmb|yuan|元|块|kg|kilomet(?:re|er)s?|kilos?|公斤|km|"
                  r"公里|"
                  r"miles?|minutes?|mins|分钟|hours?|小时|years?|岁)?", re.I)
#: digits said one by one ("four eight two one", "oh seven"): "oh" is a zero only here
_DIGIT_WORDS = {**{w: n for w, n in EN_UNITS.items() if n < 10}, "oh": 0}
# scales written as words: a lone letter (k, m, w) is a scale only right after digits (2.2k, 15w), never as a word
# ("I'm thirty-four" is 34, not a million and 34)
_WORD_SCALES = {w: v for w, v in EN_SCALES.items() if len(w) > 1}
_NUM_WORDS = re.compile(r"\b(?:(?:" + "|".join(sorted((*EN_UNITS, *_WORD_SCALES), key=len, reverse=True))
                        + r"|and|a)[\s-]+)*(?:" + "|".join(sorted(EN_UNITS, key=len, reverse=True))
                        + r"|hundred|thousand|million)\b(?:[\s-]+(?:" + "|".join(sorted((*EN_UNITS, *_WORD_SCALES),
                                                                                         key=len, reverse=True))
                        + r"|and(?=[\s-]+(?:" + "|".join(sorted(EN_UNITS, key=len, reverse=True)) + r")\b))\b)*"
                        r"(?:\s+and a half\b(?:\s+(?:hundred|thousand|grand|million)\b)?)?", re.I)
#: "one" as a pronoun: after a determiner ("the one", "this one", "no one") or before "of" ("one of my ...")
_ONE_PRONOUN_BEFORE = re.compile(r"\b(?:the|this|that|which|no|every|any|some|each|another|a|new|old|little|big|single)\s+$|"
                                 r"\b(?:the|that|this) (?!number\b)[a-z][\w'-]*\s+$",
                                 re.I)
#: a number word that is part of a name: "five-a-side" (football), "one-on-one", "three-way"
_NAMED_BY_NUMBER = re.compile(r"-(?:a-side|on-(?:one|two|three|five)|way)\b", re.I)
_ONE_PRONOUN_AFTER = re.compile(r"\s+(?:of|another)\b", re.I)
#: "and" between two numbers said in words where no scale comes before it: a list, not one number
_LIST_AND = re.compile(r"(?<!hundred)(?<!thousand)(?<!million)(?<!grand)\s+and\s+(?!a half\b)", re.I)
_KUAI = re.compile(r"(?<![0-9.])(\d+)块(\d)(?![0-9])")
#: a count per period ("twice a week"); "once every ten days" counts nothing "every ten days" does not say
_TIMES_A = re.compile(r"\b(?:(once)\b(?= (?:a|an|per)\b)|(twice|thrice)\b(?= (?:a|an|per|every|each)\b))", re.I)
#: 俩 / 仨 are two / three with their measure word in them (俩肉包, 仨孩子, 我们俩)
_ZH_PAIR = re.compile(r"[俩仨]")
#: a run of Chinese numerals; one after a scale's trailing digit is a count of its own (一万二 | 一个月: 12000, not 10001)
_ZH_NUM = re.compile(r"[零〇一二两三四五六七八九十百千万亿]+?(?=[一两][个只次回天年月周遍趟]|$|[^零〇一二两三四五六七八九十百千万亿])"
                     r"(?<=[万千百十][一二两三四五六七八九])|[零〇一二两三四五六七八九十百千万亿]+(?:点[零〇一二三四五六七八九]+)?")
#: measure words after which a lone Chinese digit is a count (两只猫), not part of a word (一起, 一直)
_ZH_MEASURE = "元块岁个只条位次回遍趟号层楼分米斤天年月周张本辆台件套间家门双部首杯瓶公千克小钟节"
#: two or more capitalised words opening a sentence ("Eagle Ridge is ...", "Tony Stark fixed ..."); one alone is
#: only the sentence's first word
_LEAD_NAME = re.compile(r"^[A-Z][\w'&.-]*(?: (?:[A-Z][\w'&.-]*|of|de|van|von))* [A-Z][\w'&.-]*(?= |[,.;:!?]|$)")
#: a run of capitalised words; "of", "de", "van", "von" join two of them ("Bank of America"), never end one
_NAME = re.compile(r"(?<=[\w,;:)] )(?:[A-Z][\w'&.-]*)(?: (?:[A-Z][\w'&.-]*|(?:of|de|van|von)(?= [A-Z])))*")
_NEGATION = re.compile(r"\bno(?! (?:exceptions?|matter|doubt|problem|worries|way|kidding|joke|idea|question)\b)\b|"
                       r"\b(?:not|never|don'?t|doesn'?t|didn'?t|isn'?t|aren'?t|wasn'?t|won'?t|can'?t|cannot|"
                       r"nobody|nothing)\b|n't\b|"
                       # 不 and 没 negate, but not inside 差不多, 不错, 不少, 不过, 没关系, 别的 ..., nor 不 asking (有…不？)
                       r"(?<!差)不(?!多|错|少|过(?!敏)|仅|但|久|然|同|如|断|停|管|论|止|好意思|\s*[？?])|没有?(?!关系|事儿?|错|问题|意见)|"
                       r"别(?=[吃喝买去做用忘])|未(?!来)|勿")
#: a negation that says the value holds ("my lottery line never changes", 雷打不动, 从没换过): no negated statement
_CONSTANT = re.compile(r"\b(?:never|not|(?:does|has|have|did)n'?t|hasn'?t) (?:ever |once )?(?:chang(?:es|ed|e)|"
                       r"var(?:y|ies|ied)|miss(?:es|ed)?)\b|雷打不动|从来?没(?:变|换)过?|没(?:变|换)过|一直没变")

#: a limit, not a negation: "no more than twice a week", "every 10 days, no more"
_LIMIT = re.compile(r"\b(?:no|not) (?:more|less|later|earlier|fewer|longer|sooner) than\b|"
                    r"(?:\d|\b(?:days?|weeks?|months?|years?|hours?|minutes?|times|once|twice|a day|a week))\s*,?\s*"
                    r"no (?:more|less|later|earlier)\b(?! than\b)")

#: weekdays said as a list after one 周 / 星期 / 礼拜 (周一三五, 星期二、四)
_ZH_WEEKDAYS = re.compile(r"(?:周|星期|礼拜)([一二三四五六日天](?:[、和及]?[一二三四五六日天])*)(?![次回趟遍个]|下(?!午))")
_ZH_DAY_NAMES = {"一": "monday", "二": "tuesday", "三": "wednesday", "四": "thursday", "五": "friday", "六": "weekend",
                 "日": "weekend", "天": "weekend"}
#: set phrases whose numerals count nothing (隔三差五 = every so often, 一清二楚 = perfectly clear)
_ZH_IDIOMS = re.compile(r"隔三差五|三天两头|三番五次|一五一十|乱七八糟|七上八下|三心二意|一清二楚|十全十美|四面八方|"
                        r"九牛一毛|不三不四|五花八门|千方百计|千万别|万一|一模一样|独一无二|三言两语|接二连三|"
                        r"七嘴八舌|五颜六色|一举两得|十有八九|百分之百")
#: what follows a number that says a time from now or ago: 三天后, 两周前, 五个月后
_ZH_RELATIVE = re.compile(r"(?:个)?(?:天|日|周|星期|礼拜|月|年|小时|分钟)(?:以?后|以?前|之后|之前)")
_ZH_NUMERAL_BEFORE_RELATIVE = re.compile(r"[零〇一二两三四五六七八九十百千万]+(?=" + _ZH_RELATIVE.pattern + ")")

_QUALIFIERS: dict[str, tuple[tuple[str, str], ...]] = {
    "tod": ((r"\b(?:in the )?mornings?\b|\bbreakfast\b|早上|早晨|上午|早饭|早餐", "morning"),
            (r"\b(?:in the )?afternoons?\b|\blunch\b|下午|午饭|午餐|中午", "afternoon"),
            (r"\b(?:in the )?evenings?\b|\bat night\b|\btonight\b|\bdinner\b|\bnight(?:s|time)?\b(?! shifts?\b)|\bovernight\b|"
             r"晚上|夜里|夜间|晚饭|晚餐|睡前", "evening"),
            # the day as against the night ("daytime thermostat: 22", 白天空调开24度)
            (r"\bday ?time\b|\bduring the day\b|\bby day\b|\bday(?= [a-z]+ ?:)|白天|日间", "day")),
    "day": ((r"\bweekdays?\b|\bwork ?days?\b|\bmondays? to fridays?\b|周一到周五|星期一到星期五|工作日|平时|平日", "weekday"),
            (r"\bweekends?\b|\bsaturdays?\b|\bsundays?\b|周末|周六|周日|星期六|星期天|星期日|礼拜天", "weekend"),
            *((rf"\b{d}s?\b|(?:{z})(?![次回趟遍个]|下(?!午))", d) for d, z in (("monday", "周一|星期一"), ("tuesday", "周二|星期二"),
                                                   ("wednesday", "周三|星期三"), ("thursday", "周四|星期四"),
                                                   ("friday", "周五|星期五")))),
    "season": ((r"\bsummers?\b|夏天|夏季", "summer"), (r"\bwinters?\b|冬天|冬季", "winter"),
               (r"\bspring\b|春天|春季", "spring"), (r"\bautumn\b|\bfall\b(?= |$)|秋天|秋季", "autumn"),
               # the weather names a case the same way: "when it rains I take a cab", 下雨天就打车
               (r"\b(?:when|if) it(?:'s| is)? rain(?:s|ing|y)?\b|\brainy days?\b|\bin the rain\b|下雨|雨天", "rain"),
               (r"\b(?:when|if) it(?:'s| is)? snow(?:s|ing|y)?\b|\bsnowy days?\b|下雪|雪天", "snow")),
    "place": ((r"\bat home\b|\bhome office\b|\b(?:home|personal|private) (?:phone|mobile|cell|line|laptop|e-?mail|computer|number|"
               r"account|wifi|wi-fi|network|address|car)\b|在家|家里的?|家用|私人|个人的?", "home"),
              (r"\bat (?:work|the office|my office)\b|\bin the office\b|\bwork-related\b|\bfor work\b|"
               r"\b(?:work|office|company|business) (?:phone|mobile|cell|line|laptop|e-?mail|computer|number|account|wifi|wi-fi|network|address|car)\b|在公司|在单位|上班时|"
               r"\bwhile (?:i'm )?(?:at )?work(?:ing)?\b|\bduring work\b|上班(?:的时候|那会儿?|期间)|工作(?:的时候|时)|"
               r"(?:公司|单位|办公室)的?(?:电话|手机|手机号|邮箱|电脑|笔记本|地址|账号|车|网络|wifi|储物柜|柜子|工位|车位)|(?:公司|单位)那边|工作用的?|"
               r"工作(?:邮箱|电话|手机|电脑|号码?)", "work"),
              (r"\bat school\b|在学校", "school"),
              # "at the leisure centre pool i always grab locker 48", 游泳馆那边我用58号柜: the gym's locker is another
              (r"\bgym\b|\b(?:at|in) (?:the |my )?(?:local )?(?:leisure cent(?:re|er)|(?:swimming )?pool|sports cent(?:re|er)|"
               r"fitness cent(?:re|er)|health club|lido)\b|健身房|游泳馆|游泳池|体育馆|健身中心", "gym"), (r"\bwhen travell?ing\b|\bon trips?\b|出差|旅行时|旅游时", "travel")),
    "whom": ((r"\bfor (?:my |the )?(son|daughter|kids?|children|wife|husband|partner|mom|mum|dad|mother|father|"
              r"baby|family|boss|team)\b", "\\1"),
             (r"给(?:我)?(儿子|女儿|孩子|老婆|老公|妈妈|爸爸|家人|宝宝)", "\\1")),
}
_WEEKDAY_RANGE = re.compile(r"\bmondays? to fridays?\b|周一到周五|星期一到星期五")
_WHOM_ALIASES = {"kids": "kid", "children": "kid", "孩子": "kid", "宝宝": "baby", "儿子": "son", "女儿": "daughter",
                 "老婆": "wife", "老公": "husband", "妈妈": "mother", "mom": "mother", "mum": "mother",
                 "爸爸": "father", "dad": "father", "家人": "family"}


@dataclass(frozen=True)
class ValueParts:
    """The value-bearing parts of one statement (see the module docstring): ``parts`` maps a kind to the frozenset
    of its normalised values; ``qualifiers`` maps a qualifier kind to its values; ``negated`` is a bool."""

    parts: dict[str, frozenset[str]] = field(default_factory=dict)
    qualifiers: dict[str, frozenset[str]] = field(default_factory=dict)
    negated: bool = False
    residue: str = ""  # the statement with its value-bearing spans blanked: what it says *about* its values

    @property
    def empty(self) -> bool:
        return not any(self.parts.get(k) for k in VALUE_KINDS)

    def describe(self) -> str:
        out = [f"{k}={'/'.join(sorted(v))}" for k, v in sorted(self.parts.items()) if v]
        out += [f"{k}:{'/'.join(sorted(v))}" for k, v in sorted(self.qualifiers.items()) if v]
        if self.negated:
            out.append("negated")
        return ", ".join(out) or "none"


def _clock(h: int, m: int, mer: str | None) -> str | None:
    mer = (mer or "").lower().replace(".", "")
    if mer in ("pm", "afternoon", "evening", "night", "下午", "傍晚", "晚上", "夜里") and h < 12:
        h += 12
    if mer in ("am", "morning", "凌晨", "早上", "早晨", "上午") and h == 12:
        h = 0
    if not (0 <= h <= 24 and 0 <= m < 60):
        return None
    return f"{h:02d}:{m:02d}"


def _blank(text: str, span: tuple[int, int]) -> str:
    return text[: span[0]] + " " * (span[1] - span[0]) + text[span[1]:]


@functools.lru_cache(maxsize=8192)
def value_parts(text: str) -> ValueParts:
    """Read the value-bearing parts of ``text`` (see the module docstring). Pure; cached."""
    t = unicodedata.normalize("NFKC", text)
    parts: dict[str, set[str]] = {k: set() for k in (*VALUE_KINDS, "unit")}

    def take(kind: str, pattern: re.Pattern[str], norm) -> None:  # noqa: ANN001
        nonlocal t
        for m in list(pattern.finditer(t)):
            v = norm(m)
            if v:
                parts[kind].add(_in_the_evening(v, m, t) if kind == "time" else v)
                t = _blank(t, m.span())

    # 周一三五, 星期二和四: weekdays (qualifiers, read below), never the number 135; 隔三差五: no number either
    for m in [*_ZH_IDIOMS.finditer(t), *_ZH_WEEKDAYS.finditer(t)]:
        t = _blank(t, m.span())
    # 负二层 / 地下二层 is the level written B2 (a car park, a basement): one code however it is said
    take("code", _BASEMENT, lambda m: f"B{int(m.group(1)) if m.group(1).isdigit() else fmt_number(zh_number(m.group(1)) or 0)}")
    for span, rate in frequencies(t):  # "once a week" = 一周一次: a rate per day (ledger/frequency.py)
        parts["every"].add(rate)
        t = _blank(t, span)
    for m in list(HEIGHT.finditer(t)):  # 1.83m = one metre eighty-three = 183 cm, 一米七五 = 175 cm
        if (cm := height_cm(m, t)) is not None:
            parts["number"].add(cm)
            parts["unit"].add("cm")
            t = _blank(t, m.span())
    take("email", _EMAIL, lambda m: m.group(0).lower())
    take("url", _URL, lambda m: re.sub(r"^(?:https?://)?(?:www\.)?", "", m.group(0).lower()).rstrip("/"))
    take("date", _DATE_ISO, lambda m: f"{int(m.group(1)):04d}-{int(m.group(2)):02d}-{int(m.group(3)):02d}")

    def zh_date(m: re.Match[str]) -> str | None:
        mo, d = zh_number(m.group(2)) if not m.group(2).isdigit() else int(m.group(2)), (
            zh_number(m.group(3)) if not m.group(3).isdigit() else int(m.group(3)))
        if mo is None or d is None:
            return None
        return f"{int(mo):02d}-{int(d):02d}"

    take("date", _DATE_ZH, zh_date)

    def en_date(m: re.Match[str]) -> str:
        if m.group(1):
            return f"{_MONTHS[m.group(1).lower()[:3]]:02d}-{int(m.group(2)):02d}"
        return f"{_MONTHS[m.group(4).lower()[:3]]:02d}-{int(m.group(3)):02d}"

    take("date", _DATE_EN, en_date)
    # "the twelfth of March", "March the twelfth": ordinals in words
    take("date", _DATE_EN_WORDS, lambda m: f"{_MONTHS[(m.group(2) or m.group(3)).lower()[:3]]:02d}-"
                                           f"{_ORDINALS[(m.group(1) or m.group(4)).lower().replace(' ', '-')]:02d}")
    # a day of the month without one: 每月1号, "on the 1st"
    take("date", _DAY_OF_MONTH, lambda m: f"day-{int(m.group(1) or m.group(2)):02d}")
    take("date", _DAY_OF_MONTH_WORDS, lambda m: f"day-{_ORDINALS[m.group(1).lower().replace(' ', '-')]:02d}")

    def zh_time(m: re.Match[str]) -> str | None:
        hs = m.group(2)
        if hs == "一" and not m.group(1) and not m.group(3) and (
                not _CLOCK_AFTER.match(t, m.end()) or (m.start() > 0 and t[m.start() - 1] in _COMPARATIVE)):
            return None  # 一点 alone is "a bit" (简短一点, 早一点), not one o'clock: 一点钟, 凌晨一点, 一点半 are
        h = int(hs) if hs.isdigit() else zh_number(hs)
        if h is None:
            return None
        mins = m.group(3) or ""
        if mins == "半":
            mm = 30
        elif mins == "一刻":
            mm = 15
        elif mins == "三刻":
            mm = 45
        elif mins:
            raw = mins.replace("分", "").strip()
            mm = int(raw) if raw.isdigit() else zh_number(raw)
            if mm is None:
                return None
        else:
            mm = 0
        # a bare number before 点 with no minutes and no part of day is a clock time only when it is small
        return _clock(int(h), int(mm), m.group(1))

    def zh_time_to(m: re.Match[str]) -> str | None:
        before = {"一刻": 15, "三刻": 45}.get(m.group(2))
        if before is None:
            raw = re.sub(r"分钟?", "", m.group(2)).strip()
            before = int(raw) if raw.isdigit() else zh_number(raw)
        h = int(m.group(3)) if m.group(3).isdigit() else zh_number(m.group(3))
        if h is None or before is None or not 0 < before < 60:
            return None
        return _clock(int(h) - 1, 60 - int(before), m.group(1))

    take("time", _TIME_ZH_TO, zh_time_to)
    take("time", _TIME_ZH, zh_time)

    def half_past(m: re.Match[str]) -> str | None:
        h = en_number_words(m.group(3)) if not m.group(3).isdigit() else int(m.group(3))
        if h is None:
            return None
        mm = 30 if m.group(1).lower() == "half" else 15
        if m.group(2).lower() == "to":
            h, mm = h - 1, 60 - mm
        return _clock(int(h), mm, m.group(4))

    take("time", _HALF_PAST, half_past)
    # "half nine" = 9:30 (British)
    take("time", _HALF_HOUR, lambda m: _clock(int(en_number_words(m.group(1)) or 0), 30, m.group(2)))

    def to_past(m: re.Match[str]) -> str | None:
        mm = en_number_words(m.group(1)) if not m.group(1).isdigit() else int(m.group(1))
        h = en_number_words(m.group(3)) if not m.group(3).isdigit() else int(m.group(3))
        if mm is None or h is None or not (0 < mm < 60):
            return None
        if m.group(2).lower() == "to":
            h, mm = h - 1, 60 - mm
        return _clock(int(h), int(mm), m.group(4))

    take("time", _MIN_PAST, to_past)

    def word_clock(m: re.Match[str]) -> str | None:
        h = en_number_words(m.group(1))
        mm = en_number_words(m.group(2)) if m.group(2) else 0
        if h is None or mm is None or not (1 <= h <= 12):
            return None
        return _clock(int(h), int(mm), m.group(3) or m.group(4))

    take("time", _WORD_CLOCK, word_clock)
    take("time", _SPOKEN_CLOCK, lambda m: _clock(int(en_number_words(m.group(1)) or 99),
                                                 int(en_number_words(m.group(2)) or 99), None))
    # "at eight every morning", "at 7 each night": a clock time said with the habit (a count has no "at")
    take("time", _AT_EVERY, lambda m: _clock(int(m.group(1)) if m.group(1).isdigit() else int(
        en_number_words(m.group(1)) or 99), 0, m.group(2)))
    for word, hhmm in (("noon", "12:00"), ("midday", "12:00"), ("midnight", "00:00")):
        if re.search(rf"\b{word}\b", t, re.I):
            parts["time"].add(hhmm)
            t = re.sub(rf"\b{word}\b", " ", t, flags=re.I)

    def en_time(m: re.Match[str]) -> str | None:
        if not (m.group(2) or m.group(3) or m.group(4)):
            before = t[max(0, m.start() - 24):m.start()].lower()
            # "at 8", "by 9", and a clock said of a time ("bedtime is 8", "curfew's 11")
            if not (re.search(r"\b(?:at|by|until|till|before|after|around|from)\s*$|\b(?:bedtime|curfew|lights out|"
                              r"alarm|wake-up time|check-in|check-out|pick-?up|drop-off)(?:'s| is| was)\s*$", before)
                    and int(m.group(1)) <= 12 and not re.match(r"\s*(?:%|percent|years?|kg|km|miles?|minutes?|hours?|"
                                                                  r"people|kids|times|days|weeks|months)", t[m.end():], re.I)):
                return None  # a bare number is a time only after "at", "by", "until", ...
        h = int(m.group(1))
        mer = m.group(3) or m.group(4)
        if (mer or "").lower().startswith("o"):
            mer = m.group(4)
        return _clock(h, int(m.group(2) or 0), mer)

    for m in list(_TIME_EN.finditer(t)):
        v = en_time(m)
        if v:
            parts["time"].add(_in_the_evening(v, m, t))
            t = _blank(t, m.span())
    # number words in English ("seven o'clock", "two thousand two hundred")
    for m in list(re.finditer(r"\b(\w+(?:[\s-]\w+)?) o'?clock(?:\s+(?:in the|at)\s+(morning|afternoon|evening|night))?",
                              t, re.I)):
        h = en_number_words(m.group(1).split()[-1])
        if h is not None:
            v = _clock(int(h), 0, m.group(2))
            if v:
                parts["time"].add(v)
                t = _blank(t, m.span())
    def scaled(m: re.Match[str]) -> str:
        if m.group(1):
            parts["unit"].add(_UNIT_WORDS[m.group(1)])
        elif m.group(3).lower() == "k" and _RACE.search(t):
            parts["unit"].add("km")  # "I run 5k": a distance, five kilometres, not five thousand
            return fmt_number(float(m.group(2)))
        return fmt_number(float(m.group(2)) * EN_SCALES[m.group(3).lower()])

    take("number", _SCALED, scaled)
    # 2块5 = 2.5 (yuan), 3毛5 in 块 too: the digit after 块 is tenths, as spoken
    take("number", _KUAI, lambda m: (parts["unit"].add("cny"), fmt_number(float(f"{m.group(1)}.{m.group(2)}")))[1])
    def duration(m: re.Match[str]) -> str:
        parts["unit"].add("min")
        return fmt_number(_DURATION_PHRASES[m.group(0).lower().replace("  ", " ")])

    take("number", _DURATION, duration)

    def hours(m: re.Match[str]) -> str | None:
        raw = m.group(1)
        x = float(raw) if re.fullmatch(r"\d+(?:\.\d+)?", raw) else (zh_number(raw) if has_han(raw) else en_number_words(raw))
        if x is None:
            return None
        parts["unit"].add("min")
        return fmt_number(x * 60 if m.group(2).lower().startswith(("h", "小")) else x)

    take("number", _HOURS_MINUTES, hours)
    def phone(m: re.Match[str]) -> str | None:
        raw, digits = m.group(0), re.sub(r"\D", "", m.group(0))
        # a phone number is written with a separator, a + or a leading 0, or is long; "12345678" is an account number
        if len(digits) >= 7 and (re.search(r"[\s\-()]", raw.strip()) or raw.lstrip().startswith(("+", "0"))
                                 or len(digits) >= 10):
            return digits
        return None

    take("phone", _PHONE, phone)

    for m in list(_SPELLED_DIGITS.finditer(t)):
        digits = re.sub(r"\D", "", m.group(0))
        # "0-4-2-0" is the code "0420", as "0420" is; "3-8-1-5" the number 3815, as "3815" is
        parts["code" if digits.startswith("0") else "number"].add(digits if digits.startswith("0") else fmt_number(float(digits)))
        t = _blank(t, m.span())
    for m in list(_ZH_SPELLED_DIGITS.finditer(t)):
        digits = "".join(str(ZH_DIGITS[c]) for c in m.group(0))
        parts["code" if digits.startswith("0") else "number"].add(digits if digits.startswith("0") else fmt_number(float(digits)))
        t = _blank(t, m.span())
    def code(m: re.Match[str]) -> str:
        c = m.group(0)
        if c and not c[0].isascii() and c[0] not in _PROVINCES:
            c = c[1:]  # a CJK character glued to a code is part of it only as a plate's province
        return c  # as written: a password's case and a code's hyphen are part of it (tulip88 is not Tulip-88)

    take("code", _KEYPAD, lambda m: m.group(0))
    # "50g", "5mg": an amount and its unit, as "fifty grams" and "five-milligram" are, not a code
    take("number", _GLUED_UNIT, lambda m: (parts["unit"].add(_UNIT_WORDS[m.group(2).lower()]),
                                           fmt_number(float(m.group(1))))[1])
    take("code", _CODE, code)

    def num(m: re.Match[str]) -> str | None:
        digits = m.group(2).replace(",", "")
        if len(digits) > 1 and digits.startswith("0") and not m.group(3):
            parts["code"].add(digits)  # "0420" is a PIN or a code, not the amount 420
            return None
        x = float(digits + ("." + m.group(3) if m.group(3) else ""))
        scale = (m.group(4) or "").lower()
        unit = (m.group(1) or m.group(5) or "").lower()
        if scale:
            x *= EN_SCALES[scale]
        if unit in _UNIT_WORDS:
            parts["unit"].add(_UNIT_WORDS[unit])
        return fmt_number(x)

    take("number", _NUM, num)

    def words(m: re.Match[str]) -> str | None:
        if m.group(0).strip().lower() in ("a", "an", "and"):
            return None
        if _NAMED_BY_NUMBER.match(t, m.end()):
            return None  # "five-a-side", "one-on-one": a name of a thing, no number of it
        spelled = re.split(r"[\s-]+", m.group(0).strip().lower())
        if re.search(r"\boh[\s-]+$", t[:m.start()], re.I):
            spelled.insert(0, "oh")  # "oh four two seven": the leading zero said as "oh"
        if len(spelled) >= 3 and all(w in _DIGIT_WORDS for w in spelled):
            # "four eight two one" is the code 4821 said digit by digit, as "4-8-2-1" is
            digits = "".join(str(_DIGIT_WORDS[w]) for w in spelled)
            if digits.startswith("0"):
                parts["code"].add(digits)
                return None
            return fmt_number(float(digits))
        pieces = [q for p in _LIST_AND.split(m.group(0)) for q in split_number_words(p)]
        if len(pieces) > 1:
            # "nineteen and thirty-three" lists two numbers; "two hundred and five" (after a scale) is one
            for piece in pieces[:-1]:
                x = en_number_words(piece)
                if x is not None:
                    parts["number"].add(fmt_number(x))
            x = en_number_words(pieces[-1])
            return None if x is None else fmt_number(x)
        if m.group(0).strip().lower() == "one" and (
                _ONE_PRONOUN_BEFORE.search(t[:m.start()]) or _ONE_PRONOUN_AFTER.match(t, m.end())):
            return None  # "the one who fixes my car", "one of my friends": a pronoun, no number
        x = en_number_words(m.group(0))
        if x is not None and (u := _UNIT_AFTER_WORDS.match(t, m.end())):
            parts["unit"].add(_UNIT_WORDS[u.group(1).lower()])  # "eight years" as "8 years"
        return None if x is None else fmt_number(x)

    take("number", _NUM_WORDS, words)
    take("number", _TIMES_A, lambda m: {"once": "1", "twice": "2", "thrice": "3"}[(m.group(1) or m.group(2)).lower()])

    def zh(m: re.Match[str]) -> str | None:
        s = m.group(0)
        after = t[m.end():m.end() + 1]
        if len(s) == 1 and s not in ZH_SCALES and (after not in _ZH_MEASURE or not after):
            return None  # a lone digit inside a word (一起, 一直, 万一) is no number
        if s == "一" and (after not in "元块岁号层楼" or t[m.end():m.end() + 2] == "块儿"):
            return None  # 一个 / 一只 is the article "a", as in English; 两只 / 三只 are counts
        if s in ZH_SCALES and len(s) == 1 and not (after and after in "兆块元米"):
            return None  # 十分 (very), 万 alone; but 千兆 is a thousand
        if _ZH_RELATIVE.match(t, m.end()):
            return None  # 三天后, 两周前: a time from now, which the relative-time reading resolves
        x = zh_number(s)
        return None if x is None else fmt_number(x)

    take("number", _ZH_NUM, zh)
    # 俩 / 仨 are two / three said with their measure word in them (俩狗子 = 两条狗, 仨孩子 = 三个孩子)
    take("number", _ZH_PAIR, lambda m: "2" if m.group(0) == "俩" else "3")
    for u in ("元", "块", "公斤", "公里", "岁"):
        # a unit after an amount: 三十块, 20块; not 那块 / 一块儿 (that piece, together)
        if re.search(rf"[\d零〇一二两三四五六七八九十百千万亿半]\s*{u}(?!儿)", text):
            parts["unit"].add(_UNIT_WORDS[u])
    nfc_text = unicodedata.normalize("NFC", text)
    lead = _LEAD_NAME.match(nfc_text)  # "Eagle Ridge is the trail ...": a name may open the sentence too
    names = itertools.chain([lead] if lead else [],
                            (m for m in _NAME.finditer(nfc_text) if not lead or m.start() >= lead.end()))
    if has_cjk(text):  # Chinese has no spaces: a capitalised Latin word inside it is a name (Tony, Kevin, Netflix)
        names = itertools.chain(names, re.finditer(r"(?<![A-Za-z])[A-Z][a-z]+(?![A-Za-z])", text))
    if has_cjk(text):  # 王阿姨, 李老师, 张师傅: a surname and a form of address name one person
        names = itertools.chain(names, _ZH_NAME.finditer(text))
    codes = {c.lower() for c in parts["code"]}
    # a capital inside a code is no name ("Xk" of ChinaNet-8Xk2)
    parts["name"] = {n for n in (_name_of(m.group(0)) for m in names) if n and not any(n in c for c in codes)}
    # a name said in quotes after "called" or 叫 (家里网络的名字叫“别蹭了谢谢”): as written, whatever its words
    parts["name"] |= {m.group(1).strip().lower() for m in _QUOTED_NAME.finditer(nfc_text)}
    if has_cjk(text):  # 我家猫叫团团, 名字叫球球: what something is called, ending its clause, is a name
        parts["name"] |= {m.group(1) for m in _ZH_CALLED.finditer(nfc_text)}
        parts["name"] |= {m.group(1) for m in _ZH_PLACE.finditer(nfc_text)}
        # 古筝老师姓周: the teacher is 周老师, as a surname and a form of address name one person
        parts["name"] |= {m.group(2) + m.group(1) for m in _ZH_SURNAMED.finditer(nfc_text)}
    langs = language_names(text)
    if langs:
        # a language is one value however it is written ("Cantonese" / 粤语 / 广东话); "the two languages I speak",
        # 这三种, counts the ones listed and says nothing more
        parts["name"] = {n for n in parts["name"] if not LANGUAGE_RE.fullmatch(n)} | {f"lang:{c}" for c in langs}
        if len(langs) >= 2 and {float(x) for x in parts["number"]} == {float(len(langs))}:
            parts["number"] = set()
    low = unicodedata.normalize("NFC", text).lower()
    quals: dict[str, set[str]] = {}
    ranged = _WEEKDAY_RANGE.search(low) is not None
    past = _PAST_VERB.search(low) is not None
    for kind, table in _QUALIFIERS.items():
        for pattern, label in table:
            for m in re.finditer(pattern, low):
                if kind in ("day", "tod") and _occasion(low, m, past):
                    continue  # "cancelled it this morning", "sold them on Sunday": when it happened, not a case
                value = m.expand(label) if "\\" in label else label
                value = _WHOM_ALIASES.get(value, value)
                if kind == "day" and ranged and value not in ("weekday", "weekend"):
                    continue  # "Monday to Friday" is weekdays, not Mondays and Fridays
                if kind == "tod" and parts["time"]:
                    continue  # "8 in the morning": part of the time, not a qualifier of its own
                quals.setdefault(kind, set()).add(value)
    if not ranged:
        for m in _ZH_WEEKDAYS.finditer(low):
            if _occasion(low, m, past):
                continue
            quals.setdefault("day", set()).update(_ZH_DAY_NAMES[c] for c in m.group(1) if c in _ZH_DAY_NAMES)
    return ValueParts(parts={k: frozenset(v) for k, v in parts.items() if v},
                      qualifiers={k: frozenset(v) for k, v in quals.items()},
                      negated=bool(_NEGATION.search(_LIMIT.sub(" ", _CONSTANT.sub(" ", low)))), residue=t)


_MORNING = re.compile(r"\d\s*a\.?m\.?(?![a-z])|\ba\.m\.|\b(?:mornings?|breakfast)\b|早上|早晨|上午|凌晨|早饭|早餐")
#: a part of the day said within the time itself: "7pm", "eight in the evening", 晚上八点
_MERIDIEM = re.compile(r"[ap]\.?m\b|morning|afternoon|evening|night|[早晚午夜]|凌晨", re.I)


def _in_the_evening(hhmm: str, m: re.Match[str], t: str) -> str:
    """A clock time said without am or pm beside words of the afternoon or the evening and none of the morning: "half
    seven on Tuesday evenings" is 19:30, as 晚上8:30 is 20:30 (an hour that part of the day holds: 1 to 6 in the
    afternoon, 5 to 11 in the evening; "beside": within 25 characters of the time)."""
    if _MERIDIEM.search(m.group(0)):
        return hhmm
    near = t[max(0, m.start() - 25):m.end() + 25].lower()
    if _MORNING.search(near):
        return hhmm
    h = int(hhmm[:2])
    pm = [(1, 6)] if re.search(_QUALIFIERS["tod"][1][0], near) else []
    if re.search(_QUALIFIERS["tod"][2][0], near):
        pm.append((5, 11))
    return f"{h + 12:02d}{hhmm[2:]}" if any(lo <= h <= hi for lo, hi in pm) else hhmm


#: words that make a day or a time of day one occasion: "this morning", "last Sunday", 昨天早上, 上周六
_OCCASION_BEFORE = re.compile(r"\b(?:this|last|yesterday|tomorrow|next|that)\s+$|(?:今天|昨天|前天|明天|后天|上个?|这个?|本|那个?)$")
#: a verb in the past tense: "on Sunday" after one is the day something happened
_PAST_VERB = re.compile(r"\b(?:\w{3,}ed|sold|quit|left|gave|went|got|took|made|had|did|was|were|came|bought|met|"
                        r"saw|told|said|found|lost|put|sent|spent|won|broke|ran)\b")


def _occasion(low: str, m: re.Match[str], past: bool) -> bool:
    """Whether the qualifier matched at ``m`` names one occasion (when something happened) rather than a case
    (which mornings, which days): "this morning", 昨天早上, 上周六; "on Sunday", said once, after a past-tense verb."""
    before = low[max(0, m.start() - 12):m.start()]
    if _OCCASION_BEFORE.search(before):
        return True
    word = m.group(0).strip()
    return past and word.isascii() and not word.endswith("s") and before.endswith("on ")


#: capitals that name a kind of code, never a thing with a name ("my debit card PIN is 4821")
_CODE_WORDS = {"pin", "id", "ssn", "atm", "vpn", "ip", "otp", "cvv", "zip", "iban", "swift", "nhs", "ni", "vin", "sim"}


def _not_name(word: str) -> bool:
    w = word.lower().rstrip(".").removesuffix("'s").removesuffix("’s")
    return (word in ("I", "I'm", "I've", "I'd", "I'll", "OK") or (word.isupper() and w in _CODE_WORDS) or w[:3] in _MONTHS or w.rstrip("s") in _DAYS
            or w in ("the", "my", "our", "a", "an", "this", "that", "every", "on", "in", "at", "last", "next"))


def _name_of(span: str) -> str | None:
    """A run of capitalised words as a name, lower-cased, without the pronoun, weekday or month at either end
    ("Sunday I" names no one; "Eagle Ridge" stays); None when nothing is left or it holds a digit."""
    if any(ch.isdigit() for ch in span):
        return None
    words = span.split(" ")
    while words and _not_name(words[0]):
        words.pop(0)
    while words and _not_name(words[-1]):
        words.pop()
    # "Ella's in third grade" names Ella: a possessive or a contracted "is" is no part of the name
    return re.sub(r"'s?$", "", " ".join(words).lower().rstrip(".")) or None


def differing(a: ValueParts, b: ValueParts) -> list[str]:
    """The value kinds on which ``b`` (the newer statement) differs from ``a`` (empty: every value-bearing part is
    equal). A unit counts when both name different ones, or ``b`` names a unit of measure ``a`` has none of (a
    currency said on one side only is the implied one); a name when ``b`` names one ``a`` does not (a paraphrase
    may drop a name the other repeats, never add one)."""
    out = [k for k in ("number", "time", "date", "email", "url", "phone", "code")
           if a.parts.get(k, frozenset()) != b.parts.get(k, frozenset())]
    if not same_rate(a.parts.get("every", frozenset()), b.parts.get("every", frozenset())):
        out.append("every")  # "every 10 days" / "once a week"; "every two weeks" is "half a month" said loosely
    ua, ub = a.parts.get("unit", frozenset()), b.parts.get("unit", frozenset())
    if ua and ub and ua != ub:
        out.append("unit")
    elif ub - ua - CURRENCIES - {"y"} and not ua:
        # "45 kg" after "45": a unit of measure is new information; a currency is mostly the implied one
        # ("两千二" / "2200元"), so one said on one side only is not, nor are years ("I'm 34" / "34 years old")
        out.append("unit")
    na, nb = a.parts.get("name", frozenset()), b.parts.get("name", frozenset())
    # by their words: "St Thomas'" is "St Thomas' Hospital" said short, "Sounders" the "Seattle Sounders"
    wa, wb = ({w.strip("'’") for n in ns for w in n.split()} for ns in (na, nb))
    if na and nb and not (na <= nb or nb <= na or names_within(wa, wb) or names_within(wb, wa)):
        out.append("name")
    elif na - nb and not nb:
        pass  # the name is only in the older sentence: the rewording dropped it, nothing new was said
    elif nb - na and not na:
        out.append("name")  # the new statement names something the old one did not: new information
    if a.negated != b.negated:
        out.append("negation")
    return out


def qualifiers_clash(old: ValueParts, new: ValueParts) -> list[str]:
    """The qualifier kinds on which ``new`` is about another case than ``old`` (summer vs winter, me vs my son):
    a kind both name with different values, or one only ``new`` names ("in winter I take the bus" after "I cycle
    to work")."""
    out = []
    for kind in QUALIFIER_KINDS:
        qa, qb = old.qualifiers.get(kind, frozenset()), new.qualifiers.get(kind, frozenset())
        if kind == "place" and not qa and qb == {"gym"}:
            continue  # 我把健身房换成超级猩猩了 of 我在乐刻办的健身卡: the gym is what it is about, not another place
        if qb and qa != qb and not (qa and qb <= qa):
            out.append(kind)
    return out


def other_case(old: ValueParts, new: ValueParts) -> list[str]:
    """The qualifier kinds both statements name, with different values (weekdays / weekends, summer / winter):
    what ``new`` says, even that something stopped (周末就不喝美式了), is of another case than ``old``."""
    return [k for k in qualifiers_clash(old, new) if old.qualifiers.get(k)]


def qualifier_kinds(text: str) -> set[str]:
    """The qualifier kinds named in ``text`` (a value phrase: "Saturday mornings" names day and time of day)."""
    low = unicodedata.normalize("NFC", text).lower()
    return {kind for kind, table in _QUALIFIERS.items() if any(re.search(p, low) for p, _ in table)}


#: the value kinds that tell an aspect of a noun apart (its price from its due date)
_STRONG_KINDS = ("number", "time", "date", "email", "url", "phone", "code")


def aspect_of(vp: ValueParts) -> frozenset[str]:
    """The kinds of value a statement gives (amount, time, date, code, ...; names and plain words count as one
    kind, "words"), which tell an aspect of a noun from another: its price from its due date."""
    # an amount and a code are one kind here: a combination may be "0718" or "2264", a locker "B-12" or "112"
    family = {"number": "id", "code": "id", "phone": "id", "email": "id", "url": "id", "time": "time",
              "date": "date"}
    kinds = frozenset(family[k] for k in _STRONG_KINDS if vp.parts.get(k))
    return kinds or frozenset({"words"})


def name_words(vp: ValueParts) -> set[str]:
    """The words of a statement's names ("spotify premium family" -> spotify, premium, family)."""
    return {w for name in vp.parts.get("name", ()) for w in name.split()}


def zh_numerals(text: str) -> set[str]:
    """The Chinese numeral characters of a text, with 两 read as 二 (一 left out: it is also "a"; weekdays, 周二四,
    and times from now, 两年前, left out: they are days and times)."""
    text = _ZH_WEEKDAYS.sub("", _ZH_IDIOMS.sub("", text))
    text = _ZH_NUMERAL_BEFORE_RELATIVE.sub("", text)  # 两年前: a time
    return {"二" if c == "两" else c for c in text if c in "二两三四五六七八九十百千万"}
