"""The slot catalogue's data: each slot's key, cardinality, English and Chinese cues and default sensitivity label,
in priority order, with the version recorded in every resolution's evidence. ledger/slots.py reads it (the key
registry, statement typing); nothing here is code beyond the :class:`Slot` record and its lazily compiled cues.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

Cardinality = Literal["single", "multi"]

#: Bumped whenever a cue, slot or marker changes: recorded in each resolution's evidence.
CATALOGUE_VERSION = "slots/10"

#: Labels of the special categories of personal data; nothing else gets a default label.
SPECIAL_CATEGORIES = ("health", "religion", "politics", "sex_life", "ethnicity", "biometrics", "union_membership")


@dataclass(frozen=True)
class Slot:
    """One catalogue entry. ``key`` is the slot's key (single) or key prefix of its siblings (multi)."""

    key: str
    cardinality: Cardinality
    en: tuple[str, ...]
    zh: tuple[str, ...] = ()
    sensitivity: str | None = None
    weight: float = 1.0  # multiplies the cue weight: time-of-day cues say less than a named drink

    @cached_property
    def patterns(self) -> tuple[re.Pattern[str], ...]:
        """The cues compiled, on first use: the ~200 patterns of the catalogue took ~20 ms to compile, which every
        process paid at import, a cold ``memledger profile`` included (docs/performance.md, "The cold CLI")."""
        return (tuple(re.compile(r"\b(?:" + e + r")\b") for e in self.en)
                + tuple(re.compile(z) for z in self.zh))

    def matches(self, text: str) -> list[re.Match[str]]:
        out = []
        for p in self.patterns:
            out.extend(p.finditer(text))
        return out


def _slot(key: str, cardinality: Cardinality, en: tuple[str, ...], zh: tuple[str, ...] = (),
          sensitivity: str | None = None, weight: float = 1.0) -> Slot:
    return Slot(key, cardinality, en, zh, sensitivity, weight)


_DRINKS = (r"coffee|decaf|tea|chai|latte|lattes|negroni|cocktails?|gin|vodka|rum|sake|mojito|margarita|"
           r"americano|americanos|espresso|cappuccino|mocha|matcha|beer|wine|juice|"
           r"smoothie|soda|cola|whisky|whiskey|milk tea|oat milk|flat whites?|cold brew|kombucha|lemonade")
_PETS = r"dog|dogs|cat|cats|puppy|kitten|hamster|parrot|rabbit|bunny|goldfish|turtle|tortoise|retriever|labrador|poodle|pet|pets"

#: People in the user's life known by their role ("my landlord is Mr. Lee", "我的房东是李先生"): one slot each,
#: single-valued, so "my landlord changed, it's now Mrs. Park" replaces Mr. Lee. Weighted down: "my doctor says I
#: have diabetes" is about the condition (a special category), not about who the doctor is.
_ROLES = (("landlord", "landlord|landlady", "我(?:们)?(?:的|家)?房东|房东"),
          ("doctor", "doctor|gp|family doctor", "我(?:们)?(?:的|家)(?:家庭)?医生"),
          ("dentist", "dentist", "我(?:们)?(?:的|家)?牙医"), ("therapist", "therapist|psychologist", "我的(?:心理医生|咨询师)"),
          ("manager", "manager|line manager|supervisor", "我的(?:经理|主管|领导|上司)|我(?:们)?(?:领导|上司)"),
          ("accountant", "accountant", "我(?:们)?(?:的|家)会计"), ("lawyer", "lawyer|attorney", "我(?:们)?(?:的|家)律师"),
          ("hairdresser", "hairdresser|barber|stylist", "我的理发师"),
          ("trainer", "personal trainer|trainer|coach", "我的(?:私人)?教练"), ("vet", "vet|veterinarian", "兽医"))

#: Who treats the user says something of their health: labelled as the relation types doctor_of, dentist_of and
#: therapist_of are (docs/relations.md), so every read withholds them unless asked for.
_HEALTH_ROLES = {"doctor": "health", "dentist": "health", "therapist": "health"}

#: The shipped catalogue, in priority order (the first slot wins a tie of cue weights).
CATALOGUE: tuple[Slot, ...] = (
    _slot("health.allergy", "multi", (r"allergic|allergy|allergies",), ("过敏",), "health"),
    _slot("health.condition", "multi",
          (r"diagnosed|diabetes|diabetic|asthma|depression|anxiety disorder|adhd|migraines?|blood pressure|"
           r"medication|chronic",), ("确诊|糖尿病|哮喘|抑郁|高血压|偏头痛|在吃药|慢性病",), "health"),
    _slot("religion", "single", (r"religion|religious|christian|muslim|buddhist|hindu|jewish|atheist|church|"
                                 r"mosque|synagogue|convert(?:ed)? to",), ("信仰|基督教|佛教|伊斯兰|信教|教会|无神论",),
          "religion"),
    _slot("politics", "single", (r"vote[ds]? for|voting for|political party|conservative|liberal party|"
                                 r"labour party|democrat|republican",), ("投票给|政党|党员",), "politics"),
    _slot("union", "single", (r"union member(?:ship)?|trade union|labou?r union|union (?:rep|representative|dues|card|steward)|"
                              r"member of (?:the |a |my )?(?:[\w'&-]+ ){0,3}union|(?:joined|left|quit) (?:the |a |my )?"
                              r"(?:[\w'&-]+ ){0,2}union|(?:the|my|our) (?:[\w'&-]+ ){0,2}union(?! square| station| street| jack)|"
                              r"unionised|unionized|teamsters|shop steward",), ("工会",), "union_membership"),
    _slot("orientation", "single", (r"\bgay\b|lesbian|bisexual|queer|straight",), ("同性恋|双性恋",), "sex_life"),
    *(_slot(f"person.{role}", "single", (r"(?:my|our|new|switched|changed|changing|switching) (?:" + en + r")s?\b"
                                          r"(?! (?:appointment|visit|bill|office|check-?up|surgery|clinic|fee)s?\b)",),
            (zh,), _HEALTH_ROLES.get(role),
            weight=0.6) for role, en, zh in _ROLES),
    _slot("contact.phone", "single", (r"phone number|my number|mobile number|cell number|reach me at|"
                                      r"\bmy (?:cell|mobile)\b(?! (?:phone|provider|plan|bill|contract|case|screen)\b)|"
                                      r"\bas my (?:cell|mobile|number)\b",),
          # 号码 of a locker, a seat or a parking space (储物柜号码是112) is no phone number
          ("电话号码|手机号|电话是|换号|新号码|(?<![柜位座间牌卡证])号码是|联系电话|联系方式",)),
    # the work line is another number than the user's own mobile: a new mobile never replaces it
    _slot("contact.work_phone", "single", (r"(?:work|office|desk|business) (?:phone|number|line|mobile|cell)(?: number)?|"
                                           r"work extension",), ("工作电话|办公电话|座机|单位电话|公司电话",), weight=2.0),
    _slot("contact.email", "single", (r"e-?mail address|my e-?mail",), ("邮箱|电子邮件",)),
    _slot("profile.name", "single", (r"my name is|call me|i'm called|i am called",), ("我叫|我的名字是|叫我",)),
    _slot("profile.age", "single", (r"i(?:'m| am) \d{1,3}(?: years old)?\b(?!\.\d|\s*(?:cm|mm|kg|lbs?|ft|feet|foot|inches|in\b|m\b|"
                                    r"metres?|meters?|pounds|stone|km|miles|%|percent|minutes|mins))|years old|turn(?:ed|s) \d{1,3}|"
                                    # "is 7" said of a person: the relative's name stripped ("my son is 7"), he / she, or
                                    # an age; never of a thing ("my locker at the pool is 57", "my seat is 42")
                                    r"(?:(?<![a-z] )(?<![a-z])|(?:he|she|age|who)\s|^[a-z]+ )(?:is|'s) \d{1,2}\b(?![,.\-/:]\d)"
                                    r"(?! (?:am|pm|minutes|hours|kg|km|miles|euros|dollars))|\baged? \d{1,2}\b",),
          (r"我(?:今年)?\s*\d{1,3}\s*岁|我(?:今年)?[一二三四五六七八九十]{1,3}岁|^[^猫狗宠它他她娃宝孩儿女子爸妈哥姐弟妹车房树养]*?岁了|我今年\s*(?:\d{1,3}|[一二三四五六七八九十]{1,3})\s*(?:岁|了|[，,。](?!\s*\d)|$)|^我(?:今年|已经)?(?:\d{1,3}|[一二三四五六七八九十]{1,3})(?:岁)?了[。!！]?$",)),
    _slot("profile.hometown", "single", (r"grew up in|i(?:'m| am) from|originally from|hometown|was raised in|"
                                         r"born and raised in|(?:was|were) born in (?!(?:19|20)\d\d|(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\b|the (?:spring|summer|autumn|fall|winter|year|month)\b)[a-z]+",),
          ("(?<!住在)(?<!住回)(?<!回)老家|来自|在.{1,6}长大|家乡|我是.{1,6}人(?![吗嘛呢])|(?:出生|生)在(?![一二三四五六七八九十0-9]{1,4}年|[一二三四五六七八九十0-9]{1,2}月)[\u4e00-\u9fff]{2,}",)),
    _slot("education", "single", (r"study|studying|studies|my major|majoring in|degree in|university|college|"
                                  r"grad school|phd|master's|bachelor's",), ("专业|大学|读研|读博|在读|学位|毕业于|研[一二三]|大[一二三四](?:学生|了)?|高[一二三](?:学生|了)|博[一二三四五]",)),
    _slot("preference.sport_team", "single", (r"supporter of|(?:i|we) support|fan of|favou?rite (?:team|club|player)|"
                                              r"root for|(?:my|our) (?:football |soccer )?(?:club|team)\b|till i die|"
                                              r"\b(?:fc|united|city|rovers|sounders|[a-z]+s) fan\b",), ("球队|球星|最喜欢的球员|支持.{1,6}队|粉丝|(?:改|开始|转而|现在)支持",), weight=0.5),
    _slot("preference.movie", "single", (r"favou?rite (?:movie|film|tv show|show|series|director)|"
                                         r"watch(?:ing)? (?:\w+ )?(?:movies|films|documentaries|series|anime|dramas)",),
          ("最喜欢的电影|最爱的电影|最喜欢的电视剧|最爱看的剧|看.{0,4}(?:电影|纪录片|电视剧|动漫|片)|纪录片|电影",)),
    _slot("preference.book", "single", (r"favou?rite (?:book|novel|author|writer)",), ("最喜欢的书|最爱的书|最喜欢的作家",)),
    _slot("preference.color", "single", (r"favou?rite colou?r",), ("最喜欢的颜色|最爱的颜色|颜色|喜欢.{0,3}[红橙黄绿青蓝紫黑白粉灰]色",)),
    # the user's body weight: a new reading replaces the old ("Stepped on the scales: 77.5", 上秤一看 63 公斤); labelled
    # health, as who treats the user is, so every read withholds it unless asked for
    # (what the user weighs, never a suitcase's or a parcel's: no bare "weighs")
    _slot("profile.weight", "single", (r"i weigh (?:about |around |roughly |just )?(?:under |over )?\d+|my weight|weighed myself|"
                                       r"(?:step(?:ped)?|got|get|hopped) on the scales?|(?:i'm|i am|down to) \d{2,3}(?:\.\d)? ?"
                                       r"(?:kg|kilos?|lbs?|pounds|stone)",),
          (r"体重|上秤|称了?一?下体重|我(?:现在)?\s*\d{2,3}(?:\.\d)?\s*(?:公斤|斤)",), "health", weight=2.0),
    _slot("profile.birth_date", "single", (r"born on|born in (?=(?:19|20)\d\d|(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\b|the (?:spring|summer|autumn|fall|winter|year|month)\b)|birthday|date of birth",), ("生日|出生|我是(?:19|20)?\\d{2}年的|\\d{2}后",)),
    _slot("profile.languages", "multi",
          (r"speak|speaks|fluent|learning (?:french|spanish|german|japanese|chinese|mandarin|korean|italian|"
           r"portuguese|arabic|russian)|native language|language|mother tongue|grew up speaking",), ("会说|说.{0,3}语(?!文)|学.{0,3}语(?!文)|语言|母语|(?:英|日|法|德|韩|俄|西班牙|意大利|葡萄牙|阿拉伯|泰|越南)(?:语|文)(?!课本|书)|"
                                                  "粤语|普通话|国语|广东话|上海话|闽南话|四川话",)),
    _slot("pet", "multi", (_PETS,), ("狗|猫|宠物|仓鼠|鹦鹉|兔子|金鱼|乌龟|柯基|泰迪|金毛|哈士奇|柴犬|布偶|英短|养了?一?[只条头匹]",)),
    _slot("relationship.status", "single",
          (r"(?:i'?m|i am|still|been|being|stay(?:ing)?|currently|happily|now) single\b|\bsingle (?:again|now|mum|mom|dad|parent)\b|married|divorced|engaged|dating|(?<!\bher )(?<!\bhis )(?<!\btheir )(?<!\byour )(?:girlfriend|boyfriend)|fianc[eé]e?|broke up|widowed|"
           r"seeing (?:someone|somebody|a guy|a girl|a woman|a man|each other)|been seeing [a-z]+(?=[,.!;]| and (?:it|honestly|things)\b|$)|split up|"
           r"in a relationship|got married|separated",),
          ("单身|结婚|离婚|订婚|恋爱|女朋友|男朋友|分手|对象|脱单|在一起了|交往|谈恋爱|领证|领了证|扯证|办了?婚礼",)),
    _slot("work.occupation", "single",
          (r"work as|works as|working as|job as|(?:my|his|her) job is|occupation|profession|career|job title|"
           r"(?:my|his|her) (?:title|position|role) (?:is|was|changed)|promoted to|got promoted|"
           r"(?:i'm|i am|became|become|becoming|now an?) an? (?:[\w-]+ ){0,2}(?:teacher|nurse|doctor|engineer|developer|programmer|banker|designer|"
           r"lawyer|accountant|chef|writer|student|manager|consultant|artist|architect|scientist|driver|"
           r"pharmacist|journalist|analyst|paramedic|plumber|electrician|carpenter|barista|cashier|"
           r"librarian|translator|researcher|lecturer|professor|dentist|vet|surgeon|therapist|secretary|"
           r"receptionist|mechanic|pilot|photographer|technician|administrator|recruiter)|unemployed|laid (?:\w+ )?off|lost (?:my|his|her) job|quit (?:my|his|her) job|"
           r"(?:was|got|been|get) fired|fired (?:me|him|her)|let (?:me|him|her) go|(?:got|was|been) let go|"
           r"made redundant|out of work|"
           r"between jobs|jobless|"
           r"got (?:a|the) job|new job|works? in (?:finance|marketing|sales|tech|it)|"
           r"(?:first|1st) (?:day|week|month|shift)s?(?: done| in)? as an?\b|started (?:work |working |out )?as an?\b|"
           r"(?:i|he|she) teach(?:es)? (?:[\w-]+ ){1,3}at (?:a|an|the) |^(?:teaching|taught) (?:my|our) (?:very )?first\b|"
           r"\b(?:first|1st) (?:day|week|month|term|shift)s? (?:of )?(?:teaching|nursing|lecturing|coaching) (?:year|grade|my|a|the|\d)|"
           r"\bas (?:a|an) new (?:[\w-]+ ){1,2}at\b|"
           r"got the promotion|officially (?:a |an |the )?(?:senior |junior |lead |head )?\w+ (?:designer|engineer|developer|manager|analyst|nurse|teacher)",),
          ("工作是|职业|职位|岗位|职称|(?:第一天|头一天)(?:去|到)[^，,。]{1,8}上班|升职|升为|晋升|是一?[名个位]?(?:老师|护士|医生|工程师|程序员|设计师|律师|会计|厨师|经理|学生|司机|记者|药剂师)|我是[^，,。是的a-z]{1,6}?(?:老师|教师|护士|医生|工程师|程序员|设计师|律师|会计|厨师|经理|司机|记者|药剂师)|(?<!现)在[^，,。在]{1,8}(?:做|当)(?:产品经理|产品|经理|工程师|程序员|设计师|会计|销售|运营|测试|开发|律师|老师|医生|护士|主管|总监|店长|厨师|服务员|收银员|司机|老板|柜员|客服|保安|店员|出纳)|当.{0,6}(?:老师|护士|医生|工程师|程序员|设计师|律师|会计|厨师|经理)|在[^，,。]{1,6}教(?!练|室|堂|会|材)|做.{0,6}工作|转岗|转行|(?:现在|如今|目前)(?:做|当)(?:产品经理|产品|经理|工程师|程序员|设计师|会计|销售|运营|测试|开发|律师|老师|医生|护士|主管|总监)|辞职|离职|失业|被.{0,6}(?:裁|辞退|开除)|下岗|没工作了|丢了工作|换了?工作|新工作",)),
    _slot("work.employer", "single", (r"work (?:at|for)(?! \d)|works (?:at|for)(?! \d)|working (?:at|for)(?! \d)|employed by|"
                                      r"joined \w+(?: \w+)? as|employer|(?:i'm|i am) an? (?!member\b|regular\b|customer\b|client\b|patient\b|"
                                      r"volunteer\b|guest\b|fan\b|season ticket)(?:[\w-]+ ){1,3}at (?!home\b|night\b|work\b|school\b|"
                                      r"the (?:moment|weekend|gym|office)\b|heart\b|least\b|first\b|times\b|\d)|company i work|started (?:a new job |working )?at|new job at|first (?:day|week|month) at (?!school\b|uni\b|the gym\b|the (?:new )?(?:flat|house|place)\b)|"
                                      r"(?:i |will |i'll )start (?:a new job |working )?at (?!\d)|\bis where i work\b|(?:just |recently )?joined (?!the (?:gym|club|team|choir|band|union|church|class)\b|"
                                      r"a |an |my |our |us\b|them\b)\w+(?: \w+)?(?= last (?:week|month|year)| this (?:week|month|year)| recently| in \w+|$)",), ("(?<!现)在.{1,10}(?:公司|工作|上班)|去了[^，,。]{1,8}(?:工作|上班)|入职|跳槽|去.{1,8}报到|报到|换了?(?:份)?新?工作",)),
    _slot("commute", "single", (r"(?:take|takes|took|ride|rides|catch|catches|get|gets) the (?:[\w-]+ )?(?:bus|train|subway|metro|tube|"
                                r"tram|ferry|line)|(?:cycle|cycles|bike|bikes|walk|walks|drive|drives) to (?:work|the office|school)|"
                                r"(?<!less )(?<!no )(?<!shorter )commut(?:e|ing)|gets me to (?:work|the office)|"
                                r"\b(?:\d+|an?|one|half an?) (?:minutes?|mins?|hours?) (?:to|from) (?:work|the office)\b|\bdoor to door\b",), (r"坐地铁|坐公交|[0-9一二两三四五六七八九十]+\s*号线|骑车上班|开车上班|走路上班|通勤|坐.{0,6}上班|骑.{0,4}上班|开.{0,4}上班|^(?:每天|平时|一般|现在|最近)?(?:骑|开|坐|走路|步行|打车)[^，,。]{0,5}(?:到|去)(?:公司|单位)",),
          weight=1.5),
    # what the user is paid: a new figure replaces the old ("Payslip came through: 46k before tax" of "my salary's 42k")
    _slot("work.salary", "single", (r"salary|payslip|pay ?slip|pay ?check|wages?|(?:before|after) tax|take-home pay|"
                                    r"pay (?:rise|raise)|bumped me up to \d+",), ("工资(?!卡)|薪水|薪资|月薪|年薪|税后|税前|涨薪",), weight=1.5),
    _slot("work.shift", "single", (r"(?:night|day|early|late|morning|evening|weekend) shifts?",),
          ("夜班|白班|早班|晚班|倒班",), weight=1.5),
    _slot("residence.housing", "single", (r"rent(?:s|ing)? an? (?:apartment|flat|room|house|studio)|"
                                          r"bought an? (?:house|flat|apartment|home|condo)|mortgage|"
                                          r"(?:our|my) (?:house|flat|apartment) (?:is|has)",),
          ("租房|租了.{0,4}房|买了?.{0,4}房|房贷|公寓",)),
    _slot("residence.city", "single",
          (r"live (?:in|on|at|near)|lives (?:in|on|at|near)|living (?:in|on|at|near)|lived (?:in|on|at|near)|home for me is|(?<!at )(?<!\w )home is(?! \d)|(?<!was )(?<!been )(?<!is )(?<!got )(?<!get )(?<!be )(?<!were )moved to|(?<!is )moving to|move to|relocated to|based in|home is in|reside in|"
           r"resides in|moved out of|moved away|my city|hometown|(?:our|my) new (?:flat|house|room)mates? in (?!the\b|a\b|an\b)[a-z]+|my new neighbou?rs in (?!the\b|a\b|an\b)[a-z]+|did the move\b.{0,60}\bin [a-z]+|(?:our|my) new (?:flat|place|"
           r"house|apartment|home) in \w+|(?:our|my) (?:flat|apartment|condo|house) in (?!the\b|a\b|an\b|my\b)[a-z]+|(?:got|picked up) the keys to (?:our|my|the) (?:new )?(?:flat|place|house|apartment|home) in \w+|(?:flat|place|house|apartment|studio|home) in (?!the\b|a\b|an\b)[a-z]+\b.{0,80}\b(?:got the keys|moved in|moved here)\b|rent (?:a|an|my) (?:room|flat|studio|apartment|house|place) in (?!the\b|a\b|an\b)[a-z]+|(?:unpacking|unpacked) (?:the |all the )?boxes in (?:our|my|the) \w+",),
          ("住在|在.{1,6}住|[\u4e00-\u9fff]{2,4}(?:这边|那边)(?:新|刚)租的房|(?:刚|已经)?拿到(?:了)?(?:新房|新家|房子)的?钥匙|收房了|(?:^|[，,])我(?:们|家)?住(?![在院了过的])[\u4e00-\u9fff]{2}|我在.{1,6}生活|在[^，,。]{1,6}租的?房|搬到|搬去|搬来(?![一两几个张把台件])|搬回(?![来去])|搬回来住|搬过来(?![一两几个张把台件])|搬过来[一两几三四五六七八九十半]+个?(?:周|天|月|年|星期|礼拜)|搬家|定居|家在|(?<![我你他她们的])[\u4e00-\u9fff]{2}新家|住.{0,2}(?:北京|上海|广州|深圳|杭州|成都)|搬离|"
           # 住南山一个月了: the place lived in, said with how long (the subject dropped)
           "(?:^|[，,])住(?![院校宿])[\u4e00-\u9fff]{2,4}?[一两几半三四五六七八九十]+个?(?:月|年|周|星期|礼拜)了",)),
    _slot("diet", "single",
          (r"vegan|vegetarian|pescatarian|keto|paleo|gluten[- ]free|my diet|on a diet|eat meat|eating meat|(?:started|start|began|back to) eating (?:meat|fish|seafood|chicken|pork|beef)|"
           r"\bi (?:eat|have) (?:fish|meat|seafood|chicken|eggs|dairy)(?: again)? (?:these days|now|nowadays)\b|"
           r"dairy[- ]free|low[- ]carb|intermittent fasting",), ("素食|吃素|纯素|饮食|节食|不吃肉|吃肉|生酮|戒糖|开始吃(?:点|些)?(?:鱼|肉|海鲜|荤|鸡蛋|蛋)",)),
    _slot("preference.drink", "single", (_DRINKS + r"|drink|drinks|drinking",),
          ("喝|咖啡(?![店馆厅])|(?<![茶咖])茶(?![馆楼叶店])|拿铁|美式|奶茶|啤酒|果汁|红酒|可乐|豆浆|酸奶|抹茶",)),
    _slot("preference.food", "single",
          (r"favou?rite food|favou?rite dish|cuisine|sushi|pizza|pasta|ramen|curry|burgers?|noodles|dumplings|"
           r"tacos|steak|salad|love eating|like eating|food(?! bank| truck| poisoning)",), ("爱吃|喜欢吃|最爱吃|(?:[川湘粤鲁苏浙闽徽日韩泰西]|家常|东北|本帮)菜|菜系|[吃做点炒][^，,。]{0,3}菜(?![地园市场刀板])|火锅|饺子|面条|寿司|美食|料理",)),
    _slot("preference.music", "single",
          (r"music|listen to|listening to|band|singer|jazz|rock|hip[- ]hop|classical|k-pop|kpop|pop songs|"
           r"playlist|album",), ("音乐|听歌|歌手|乐队|爵士|摇滚|古典乐|流行歌|说唱",)),
    _slot("device.phone", "single", (r"iphone|android phone|pixel phone|galaxy phone|my phone is|new phone|"
                                     r"phone is an?|switched to (?:an? )?(?:iphone|android)",),
          ("苹果手机|安卓|华为手机|小米手机|换了?手机|新手机|手机是|手机换|华为(?:mate|p\\d)|mate ?\\d{2}|iphone ?\\d*|"
           "小米\\d+|荣耀\\d+|三星galaxy|pixel ?\\d",)),
    _slot("device.computer", "single", (r"laptop|macbook|thinkpad|desktop pc|my computer|new computer",),
          ("笔记本电脑|电脑|台式机",)),
    _slot("vehicle", "single", (r"drive an?|my car|new car|bought an? (?:\w+ )?car|electric car|tesla|"
                                r"motorbike|motorcycle|scooter|sold my car|(?:number |licen[cs]e |car )?plate|car reg(?:istration)?|"
                                r"\breg\b|registration (?:number|is)",), ("开车|车子|车牌|买了?.{0,4}车|(?:换|提)了?(?:一?[辆台])?新车|新车(?:是|到手|提了)|电动车|燃油车|汽车|开的是.{0,4}车|开的是一?辆|摩托|(?:^|[，,。])车子?[^，,。]{0,4}(?:卖|报废|送人|过户)",)),
    _slot("schedule", "multi",
          (r"every (?:morning|evening|night|day|week|monday|tuesday|wednesday|thursday|friday|saturday|sunday|"
           r"weekend)|on (?:mondays|tuesdays|wednesdays|thursdays|fridays|saturdays|sundays)|wake up at|"
           r"go to bed at|routine|weekly|daily",), ("每天|每周|每晚|每早|周[一二三四五六日末]|点起床|点睡|作息",), weight=0.3),
    _slot("plan", "multi", (r"(?<!phone )(?<!data )(?<!mobile )(?<!payment )(?<!meal )(?<!pension )(?<!insurance )"
                            r"(?<!subscription )(?<!tariff )plan to|planning to|plans to|my plan|training for|goal is|aim to|going to run|"
                            r"saving for|saving up|marathon|applying to|losing weight|trying to lose",),
          ("计划|打算|目标|准备.{0,6}(?:考|去|买|跑)|马拉松|减肥|存钱|攒钱",)),
    _slot("hobby", "multi",
          (r"hobby|hobbies|in my free time|in my spare time|for fun|i enjoy|enjoys|took up|taken up|"
           r"play(?:s|ing)? (?:the )?(?:guitar|piano|violin|drums|tennis|football|soccer|basketball|chess|golf|"
           r"badminton|volleyball|banjo|ukulele|cello|flute|saxophone|drums)|go(?:ing)? to the gym|(?<!at the )gym(?! (?:locker|membership|card|pass|fee|bag|code|number|id|is open|opens|closes|hours|is closed)\b)(?!.{0,12}\b(?:open|opens|closes|closed) (?:until|till|at|from)\b)|hiking|painting|knitting|photography|gardening|yoga|climbing|running|"
           r"swimming|cycling|surfing|skiing|baking|pottery|fishing|reading novels",),
          ("爱好|业余|兴趣|空闲时|健身(?!房)|去.{0,4}健身房|在健身房(?:锻炼|练|运动|健身)|健身房(?:锻炼|练)|学.{0,2}(?:吉他|钢琴|画|舞)|弹吉他|弹钢琴|打篮球|打羽毛球|踢足球|下棋|爬山|徒步|画画|摄影|瑜伽|跑步|游泳|钓鱼|烘焙|骑车",)),
)
