"""Writes tests/data/freetext_dev.jsonl: the labelled dev set of free-text resolution.

Each case: a fresh user says ``old``, then neutral ``between`` memories (distractors, 3 per case from a fixed pool),
then ``new``. ``kind`` says what should happen:
  change, correction, cessation  -> old is no longer current; new is; ``probe`` should find new first
  paraphrase                     -> merged (no second current memory), old stays current
  multi, other_subject, related  -> both stay current (old must not be retired)
Distractors must always stay current. Hand-written; run this script to regenerate the JSONL.
"""

import json
from pathlib import Path

EN_POOL = [
    "I went hiking in the mountains last weekend", "The meeting on Friday was moved to 3 pm",
    "I am reading a novel about a lighthouse keeper", "My sister visited us for the holidays",
    "I prefer window seats on long flights", "We watched a documentary about octopuses",
    "The printer at the office keeps jamming", "I need to renew my passport before June",
    "Our team won the quiz night at the pub", "I bought new curtains for the living room",
    "The dentist appointment is next Tuesday", "I started a puzzle with a thousand pieces",
]
ZH_POOL = [
    "上周末我去爬了山", "周五的会议改到下午三点", "我在读一本关于灯塔看守人的小说", "我妹妹假期来看我们",
    "长途飞行我喜欢靠窗的座位", "我们看了一部关于章鱼的纪录片", "办公室的打印机老是卡纸", "我得在六月前续签护照",
    "我们队在酒吧问答之夜赢了", "我给客厅买了新窗帘", "下周二要去看牙医", "我开始拼一个一千片的拼图",
]

# (kind, old, new, probe)
EN = [
    ("change", "I love iced americano", "I switched to hot lattes", "What coffee do I drink?"),
    ("change", "I live in Berlin", "I moved to Lisbon last month", "Which city do I live in?"),
    ("change", "I work as a nurse", "I now work as a software developer", "What is my job?"),
    ("change", "I drive a Toyota Corolla", "I bought a Tesla and sold the Corolla", "What car do I drive?"),
    ("change", "My favourite food is sushi", "These days my favourite food is ramen", "What is my favourite food?"),
    ("change", "I mostly listen to jazz", "I listen to hip-hop now", "What music do I listen to?"),
    ("change", "I am single", "I got married in May", "What is my relationship status?"),
    ("change", "I use an Android phone", "I switched to an iPhone", "What phone do I use?"),
    ("change", "I work at Acme Corp", "I joined Globex as a designer and left Acme", "Where do I work?"),
    ("change", "My phone number is 555 0100", "My new phone number is 555 0199", "What is my phone number?"),
    ("change", "I drink green tea in the afternoon", "I drink matcha lattes now instead of tea", "What do I drink?"),
    ("change", "I am vegetarian", "I became vegan this year", "What is my diet?"),
    ("change", "I live in Shanghai", "We relocated to Shenzhen", "Where do I live?"),
    ("change", "I work as a banker", "I became a teacher", "What do I do for a living?"),
    ("change", "I use a ThinkPad laptop", "I got a new MacBook for work", "What laptop do I use?"),
    ("change", "I am dating Alex", "Alex and I got engaged", "What is my relationship status?"),
    ("change", "My favourite band is Coldplay", "My favourite band is now Radiohead", "Which band do I like?"),
    ("correction", "I was born in 1990", "Sorry, I meant I was born in 1995", "When was I born?"),
    ("correction", "My email address is ana@old.example", "Correction: my email address is ana@new.example",
     "What is my email?"),
    ("correction", "I live in Portland, Maine", "Actually I live in Portland, Oregon, not Maine", "Where do I live?"),
    ("correction", "My birthday is on March 3", "My mistake, my birthday is on March 13", "When is my birthday?"),
    ("correction", "I work as an accountant", "I misspoke: I work as an auditor", "What is my job?"),
    ("correction", "I drink oat milk lattes", "Sorry, I meant almond milk lattes, not oat milk", "What do I drink?"),
    ("cessation", "I am training for the Berlin marathon", "I dropped the marathon plan", "Am I running a marathon?"),
    ("cessation", "I work as a banker", "I lost my job as a banker", "What is my job?"),
    ("cessation", "I drink coffee every morning", "I don't drink coffee anymore", "Do I drink coffee?"),
    ("cessation", "I am a vegetarian", "I am no longer vegetarian", "What is my diet?"),
    ("cessation", "I own a motorcycle", "I sold my motorcycle", "Do I have a motorcycle?"),
    ("cessation", "I am dating Sam", "Sam and I broke up", "Am I dating anyone?"),
    ("cessation", "I plan to move to Canada next year", "We cancelled the plan to move to Canada",
     "Am I moving to Canada?"),
    ("paraphrase", "I love iced americano", "Iced americano is what I love", "What coffee do I drink?"),
    ("paraphrase", "I live in Berlin", "I'm living in Berlin", "Where do I live?"),
    ("paraphrase", "I am vegan", "I'm still vegan", "What is my diet?"),
    ("paraphrase", "I work as a nurse", "I'm working as a nurse", "What is my job?"),
    ("paraphrase", "My favourite food is sushi", "Sushi is my favourite food", "What is my favourite food?"),
    ("paraphrase", "I use an iPhone", "My phone is an iPhone", "What phone do I use?"),
    ("paraphrase", "I listen to a lot of jazz", "I listen to jazz a lot", "What music do I like?"),
    ("paraphrase", "I drive a Tesla", "I drive a Tesla these days too", "What car do I drive?"),
    ("paraphrase", "I am married", "I'm married", "Am I married?"),
    ("multi", "I have a cat called Miso", "We adopted a dog called Biscuit", "What pets do I have?"),
    ("multi", "I am allergic to peanuts", "I am also allergic to shellfish", "What am I allergic to?"),
    ("multi", "I speak French", "I also speak Japanese", "Which languages do I speak?"),
    ("multi", "My hobby is painting", "I took up rock climbing for fun", "What are my hobbies?"),
    ("multi", "I play the guitar", "I play tennis on weekends", "What do I do for fun?"),
    ("multi", "I have a hamster named Pip", "I have a parrot named Kiwi", "What pets do I have?"),
    ("multi", "I am learning Spanish", "I speak fluent German", "Which languages do I speak?"),
    ("other_subject", "I drink iced americano", "My brother drinks hot lattes", "What coffee do I drink?"),
    ("other_subject", "I live in Berlin", "My sister lives in Madrid", "Where do I live?"),
    ("other_subject", "I work as a nurse", "My wife works as a lawyer", "What is my job?"),
    ("other_subject", "I am vegan", "My husband eats meat every day", "What is my diet?"),
    ("other_subject", "I have a cat called Miso", "My mother has a dog called Rex", "What pets do I have?"),
    ("other_subject", "My favourite band is Coldplay", "My son's favourite band is BTS", "Which band do I like?"),
    ("related", "I work at Org-X", "I administer the Org-X code host", "Where do I work?"),
    ("related", "I live in Berlin", "I love the museums in Berlin", "Where do I live?"),
    ("related", "I drink iced americano", "The cafe near my office sells cheap pastries", "What do I drink?"),
    ("related", "I am training for the Berlin marathon", "I bought new running shoes",
     "Am I training for a marathon?"),
    ("related", "I have a cat called Miso", "I bought a scratching post for the living room", "What pets do I have?"),
    ("related", "I work as a nurse", "The hospital cafeteria closes at 8 pm", "What is my job?"),
    # slots/5: the failure kinds seen by a new user (other-subject corrections, questions and plans, a lost job,
    # one of several values, people by role), each with the usual three distractors
    ("other_subject", "I live in Boston", "Sorry, I meant my brother lives in Portland", "Where do I live?"),
    ("other_subject", "I drink black coffee", "Actually my wife is the one who drinks green tea", "What do I drink?"),
    ("related", "I drink coffee every morning", "Do you think I should drink more water?", "What do I drink?"),
    ("related", "I live in Boston", "I might move to Berlin next year", "Where do I live?"),
    ("related", "I love iced americano", "I'm thinking about switching to tea", "What do I drink?"),
    ("related", "I work as a nurse", "I'm planning to become a teacher", "What is my job?"),
    ("cessation", "I work at Google", "I lost my job", "Where do I work?"),
    ("cessation", "I work at Google", "Google laid me off last month", "Where do I work?"),
    ("multi", "I have two cats, Luna and Mochi", "Luna passed away", "What pets do I have?"),
    ("change", "My landlord is Mr. Lee", "My landlord changed, it's now Mrs. Park", "Who is my landlord?"),
    ("paraphrase", "I'm a member of the Teamsters union", "I'm still in the Teamsters union", "Am I in a union?"),
]

ZH = [
    ("change", "我喜欢喝冰美式", "我现在改喝热拿铁了", "我喝什么咖啡？"),
    ("change", "我住在北京", "我上个月搬到上海了", "我住在哪个城市？"),
    ("change", "我的工作是护士", "我现在的工作是程序员", "我做什么工作？"),
    ("change", "我单身", "我五月份结婚了", "我的感情状况？"),
    ("change", "我用安卓手机", "我换了苹果手机", "我用什么手机？"),
    ("change", "我爱吃火锅", "最近我最爱吃寿司", "我最喜欢吃什么？"),
    ("change", "我平时听摇滚", "我现在听爵士", "我听什么音乐？"),
    ("change", "我在腾讯上班", "我跳槽到阿里巴巴了", "我在哪工作？"),
    ("change", "我喝奶茶", "我改喝豆浆了", "我喝什么？"),
    ("change", "我吃素", "我现在开始吃肉了", "我的饮食习惯？"),
    ("change", "我住在杭州", "我们搬去成都了", "我住哪里？"),
    ("change", "我开的是燃油车", "我换了电动车", "我开什么车？"),
    ("change", "我的手机号是13800000000", "我的新手机号是13900000000", "我的手机号是多少？"),
    ("correction", "我是1990年出生的", "说错了，我是1995年出生的", "我哪年出生？"),
    ("correction", "我的生日是三月三日", "更正一下，我的生日是三月十三日", "我的生日是哪天？"),
    ("correction", "我住在广州", "不是广州而是深圳，我住在深圳", "我住在哪？"),
    ("correction", "我的工作是会计", "我记错了，我的工作是审计", "我做什么工作？"),
    ("correction", "我喝燕麦拿铁", "口误，我喝的是杏仁拿铁", "我喝什么？"),
    ("cessation", "我在准备跑马拉松", "我放弃了马拉松计划", "我还跑马拉松吗？"),
    ("cessation", "我每天早上喝咖啡", "我不再喝咖啡了", "我喝咖啡吗？"),
    ("cessation", "我在银行上班", "我辞职了，不在银行上班了", "我在哪工作？"),
    ("cessation", "我有一辆摩托车", "我把摩托车卖了", "我有摩托车吗？"),
    ("cessation", "我有男朋友", "我和男朋友分手了", "我有对象吗？"),
    ("cessation", "我吃素", "我不再吃素了", "我吃素吗？"),
    ("cessation", "我打算明年去加拿大", "去加拿大的计划取消了", "我要去加拿大吗？"),
    ("paraphrase", "我喜欢喝冰美式", "冰美式是我的最爱，我喜欢喝", "我喝什么咖啡？"),
    ("paraphrase", "我住在北京", "我现在住在北京", "我住在哪个城市？"),
    ("paraphrase", "我吃素", "我一直吃素", "我吃素吗？"),
    ("paraphrase", "我的工作是护士", "我是做护士工作的", "我做什么工作？"),
    ("paraphrase", "我爱吃火锅", "火锅是我爱吃的", "我最喜欢吃什么？"),
    ("paraphrase", "我用苹果手机", "我的手机是苹果手机", "我用什么手机？"),
    ("paraphrase", "我平时听爵士", "我常常听爵士", "我听什么音乐？"),
    ("paraphrase", "我已经结婚了", "我结婚了", "我结婚了吗？"),
    ("paraphrase", "我喜欢喝奶茶", "奶茶我很喜欢喝", "我喝什么？"),
    ("multi", "我养了一只猫叫咪咪", "我们又养了一只狗叫旺财", "我有什么宠物？"),
    ("multi", "我对花生过敏", "我对海鲜也过敏", "我对什么过敏？"),
    ("multi", "我会说法语", "我也会说日语", "我会说哪些语言？"),
    ("multi", "我的爱好是画画", "我业余时间爱爬山", "我的爱好是什么？"),
    ("multi", "我会弹吉他", "我周末打羽毛球", "我业余做什么？"),
    ("multi", "我养了一只仓鼠", "我还养了一只鹦鹉", "我有什么宠物？"),
    ("other_subject", "我喜欢喝冰美式", "我哥哥喜欢喝热拿铁", "我喝什么咖啡？"),
    ("other_subject", "我住在北京", "我姐姐住在上海", "我住在哪？"),
    ("other_subject", "我的工作是护士", "我老婆的工作是律师", "我做什么工作？"),
    ("other_subject", "我吃素", "我老公每天吃肉", "我的饮食？"),
    ("other_subject", "我养了一只猫", "我妈妈养了一只狗", "我有什么宠物？"),
    ("other_subject", "我爱吃火锅", "我儿子爱吃饺子", "我爱吃什么？"),
    ("related", "我在腾讯上班", "我负责管理腾讯的代码仓库", "我在哪工作？"),
    ("related", "我住在北京", "我很喜欢北京的博物馆", "我住在哪？"),
    ("related", "我喜欢喝冰美式", "公司楼下的面包店很便宜", "我喝什么？"),
    ("related", "我在准备跑马拉松", "我买了新的跑鞋", "我在准备马拉松吗？"),
    ("related", "我养了一只猫叫咪咪", "我给客厅买了一个猫抓板", "我有什么宠物？"),
    ("related", "我的工作是护士", "医院食堂晚上八点关门", "我做什么工作？"),
    # slots/5 (see EN)
    ("other_subject", "我住在上海", "说错了，我哥哥住在天津", "我住在哪？"),
    ("related", "我住在上海", "我明年可能搬到深圳", "我住在哪？"),
    ("related", "我在腾讯上班", "我打算跳槽到阿里巴巴", "我在哪工作？"),
    ("related", "我喜欢喝咖啡", "我该不该改喝茶？", "我喝什么？"),
    ("cessation", "我在腾讯上班", "我失业了", "我在哪工作？"),
    ("cessation", "我喜欢打篮球", "我不再打篮球了", "我有什么爱好？"),
    ("multi", "我养了两只猫，露娜和麻薯", "露娜去世了", "我有什么宠物？"),
    ("change", "我的房东是李先生", "房东换了，现在是朴女士", "我的房东是谁？"),
]


def main() -> None:
    out = Path(__file__).resolve().parents[1] / "tests" / "data" / "freetext_dev.jsonl"
    lines = []
    for lang, cases, pool in (("en", EN, EN_POOL), ("zh", ZH, ZH_POOL)):
        counts: dict[str, int] = {}
        for i, (kind, old, new, probe) in enumerate(cases):
            counts[kind] = counts.get(kind, 0) + 1
            between = [pool[(3 * i + j) % len(pool)] for j in range(3)]
            lines.append(json.dumps({"id": f"{lang}-{kind}-{counts[kind]:02d}", "lang": lang, "kind": kind,
                                     "old": old, "between": between, "new": new, "probe": probe},
                                    ensure_ascii=False))
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{len(lines)} cases -> {out}")


if __name__ == "__main__":
    main()
