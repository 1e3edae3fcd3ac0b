"""Slot resolution rules: which key a free-text statement lands in, and what it does there. No LLM, no I/O.

The caller (memledger/remember.py) types the statement (ledger/slots.py), gathers candidates — the user's current
memories that could be the same slot: the slot's own key or siblings, plus the best dense + lexical search hits —
and calls :func:`resolve`. The rules run in order: a duplicate; a catalogue slot, single-valued (correct, retire,
reaffirm, supersede) or multi-valued (the sibling it names, or a new sibling); outside the catalogue, what it names,
its opposite, the same meaning, the same attribute, a replaced value, then the nearest memory; otherwise a new
memory under a fresh key that owes nothing to the text. docs/resolution.md lists every rule with its figures and
examples; each decision names its rule in the evidence. Two things hold whatever rule decided: a reaffirmation never
drops what the statement adds (a value word inside it supersedes, a clause of its own is kept beside), and another
subject ("my brother ...", 我哥哥...) is another slot, so it never touches the user's own.

Every other candidate is reported as ``related`` with its relation (``same_slot``, ``sibling``, ``other_slot``,
``other_subject``, ``similar``), and nothing about them changes: related-but-not-same memories all stay.
"""

from __future__ import annotations

import re
from typing import Any

from .attributes import opposite_polarity, read_statement, same_attribute, substitution
from .decision import Candidate, Resolution, clearly_closest, companion_ahead, nfc, prepare, relation_of
from .guards import guard
from .lexicon import language_names, slot_values
from .naming import named as named_memories
from .revision_cues import (CHANGE_STEMS, FAVOURITE, INSTEAD, NOW, PAST_EVENT, PERSONAL, PREPOSITIONS,
                            REVISION_HINT, STATE_VERBS, cue_clause_tokens, cue_words, is_narrative, lexicon_blind,
                            listed_words, names_replacement, narrows, negation_elsewhere, partner_renamed, says_more_of,
                            wrong_value_holder)
from .slots import (_GENERIC_STEMS, CATALOGUE_VERSION, GENERIC, REGISTRY, KeyRegistry, Typing, compound_shared,
                    content_tokens, has_cjk, linked_slot_keys, names_several, overlap, says_all)
from .resolution_figures import (CHANGE_FREE, CLEAR_MARGIN, MEANING_PARAPHRASE, NEAREST, NEAREST_ALONE,
    NEAREST_ALONE_MARGIN, NEAREST_COMPANION_MARGIN, NEAREST_DENSE, NEAREST_DENSE_MARGIN, NEAREST_MARGIN, NEAREST_MODELS,
    PARAPHRASE, PARAPHRASE_FREE, RELATED_FREE, WEAK_MATCH, dense_thresholds)
from .unmarked import JOB_PAIRS, job_left, unmarked_target
from .value_words import cjk_bigrams, clause_unsaid, names_relative, names_within, numbered_nouns
from .values import (_STRONG_KINDS, VALUE_KINDS, aspect_of, differing, name_words, other_case, qualifier_kinds,
                     qualifiers_clash, value_parts, zh_numerals)

DECISIONS = ("new", "add", "reaffirm", "supersede", "correct", "retire", "conflict")
#: the rules whose conflict an adjudicator may settle (unsure which memory, or whether it replaces it); a partial
#: cessation is never settled by one: retiring the memory would lose its other values
ADJUDICABLE = ("free_unsure", "named_unsure", "multi_unsure")


def resolve(text: str, typing: Typing, candidates: list[Candidate], *, embedder: str | None = None,
            registry: KeyRegistry = REGISTRY, user_name: str | None = None) -> Resolution:
    """Decide where ``text`` (typed as ``typing``) lands among ``candidates`` (see the module docstring)."""
    prepare(candidates, registry, user_name)
    para_cos, rel_cos = dense_thresholds(embedder)
    mine = nfc(text)
    cjk_statement = has_cjk(text)
    for c in candidates:
        c.value_overlap = overlap(typing.value_tokens, c.typing.value_tokens if c.typing else set())
        if cjk_statement or has_cjk(c.text):
            # MiniLM reads Chinese characters as unknown tokens: any two Chinese sentences have a high cosine, which
            # says nothing about whether one paraphrases the other
            c.dense = None
    figures = {"catalogue": CATALOGUE_VERSION, "embedder": embedder, "paraphrase": PARAPHRASE,
               "dense_paraphrase": para_cos, "dense_related": rel_cos}
    mine_vp = value_parts(text)
    mine_rd = read_statement(text)
    # third-person narrative about the user ("Caroline is researching adoption agencies", an agent's or an import's
    # observation): its sentences share a subject and a copula without sharing an attribute, and most are episodes,
    # so the readings that revise across keys (attribute, value replacement) are not applied to it
    narrative = is_narrative(text, user_name)
    replacing = names_replacement(text)  # it says what it replaced ("instead", 改成): read once, used by many rules
    parsed = f"{mine_rd.describe()}; values {mine_vp.describe()}"

    def done(decision: str, key: str | None, rule: str, target: Candidate | None = None, **kw: Any) -> Resolution:
        related = [c for c in candidates if target is None or c.key != target.key]
        for c in related:
            if c.relation == "similar":
                c.relation = relation_of(typing, c)
        if target is not None:
            target.relation = "target"
        # what holds whatever rule decided (ledger/guards.py): nothing the statement says is dropped
        kept = guard(decision, rule, target.text if target is not None else None, text, typing,
                     target.key if target is not None else None)
        if kept is not None:
            decision, rule, kw = kept
            key = target.key if decision == "supersede" and target is not None else None
        return Resolution(decision, key, rule, typing, target, related=related, figures=figures, parsed=parsed,
                          **kw)

    def value_changed(c: Candidate) -> list[str]:
        """What the statement says that ``c`` does not: the value kinds that differ, or "value" when both name a
        value phrase for the same attribute and the phrases share too little ("the left side" / "my back")."""
        out = [k for k in differing(c.values, mine_vp)
               if k != "negation" or not negation_elsewhere(text, c.text, c.values.negated)]
        if (not out and not any(vp.parts.get(k) for vp in (c.values, mine_vp) for k in ("number", "time", "date"))
                and zh_numerals(c.text) != zh_numerals(text)):
            out.append("number")  # 研一 / 研二: a numeral inside a word, which value_parts leaves alone
        sub = substitution(c.text, text)
        if sub is not None and not out:
            # one place differs: unless both spans are the same amount reworded, the value there changed
            va, vb = value_parts(sub[0]), value_parts(sub[1])
            wa = content_tokens(sub[0]) - GENERIC - _GENERIC_STEMS
            wb = content_tokens(sub[1]) - GENERIC - _GENERIC_STEMS
            # the place that differs holds the value, and the whole sentences' values are equal: the same value
            # written another way ("7:40" / "twenty to eight": the span "7 40" alone reads as two numbers)
            reworded = not (va.empty and vb.empty) and any(mine_vp.parts.get(k) for k in _STRONG_KINDS) \
                and not differing(c.values, mine_vp)
            if (va.empty or vb.empty or differing(va, vb)) and (wa or wb or not (va.empty and vb.empty)) \
                    and not reworded:
                out.append("value")  # not a verb form or a slot word reworded ("work as" / "am working as")
        theirs = c.reading
        if not out and mine_rd.old_value:
            out.append("value")  # "went from a medium to a large": it says the value changed
        elif not out and mine_rd.value and theirs.value and same_attribute(theirs, mine_rd):
            # the value phrases' words besides their values ("$2,500" / "2.5k" are equal amounts, no words)
            a, b = content_tokens(value_parts(mine_rd.value).residue), content_tokens(value_parts(theirs.value).residue)
            if a and b and (overlap(a, b) < PARAPHRASE or (a - b and b - a)):
                out.append("value")  # "a medium flat white" / "a large flat white": a word replaced by another
        if not out and typing.change and replacing:
            # "我改成每周二四去健身房了" of "我每周一三五去健身房": the day or time it says it replaced
            out += [k for k in ("day", "tod") if c.values.qualifiers.get(k) and mine_vp.qualifiers.get(k)
                    and c.values.qualifiers[k] != mine_vp.qualifiers[k]]
        return out

    def names_theirs(c: Candidate) -> bool:  # "swim practice for my daughter" of a daughter's memory
        return c.typing is not None and names_relative(text, c.typing.subject)

    def moved_clash(c: Candidate) -> list[str]:
        # another weekday said as a change ("from this term Leo swims on Thursdays") moves the value, as does a time of
        # day said as a replacement ("以后改成周六上午来"); another season, place or person is a case kept beside it
        moved = ("day", "tod") if typing.change and replacing else ("day",)
        return [k for k in qualifiers_clash(c.values, mine_vp) if not (typing.change and k in moved)]

    def same_subject(c: Candidate) -> bool:
        # "the wifi password is ..." names no one: it is the user's as much as "my wifi password is ..."
        return c.typing is not None and ({c.typing.subject, typing.subject} <= {"self", "none"}
                                         or c.typing.subject == typing.subject)

    def beside(c: Candidate | None, both_named: bool = False) -> Resolution | None:
        """A statement that adds ("also", "too", 也) or speaks of another case (summer / winter, me / my son) is
        kept beside ``c``: a fresh key, nothing contested, nothing closed."""
        if typing.correction or typing.cessation:
            return None
        same_value = c is not None and bool(typing.value_tokens) and c.typing is not None and (
            typing.value_tokens <= c.typing.value_tokens) and not differing(c.values, mine_vp)
        if typing.additive and not replacing and not same_value:
            return done("add", None, "additive", None, fresh_key=True,
                        note="it says also/too/也: it adds to what is known, nothing is contested")
        clash = qualifiers_clash(c.values, mine_vp) if c is not None else []
        sub = substitution(c.text, text) if c is not None else None
        if sub is not None:
            # only the qualifier's words changed ("every Wednesday" -> "every Friday"): its value moved; one the old
            # sentence did not name is another case ("until 10pm" -> "until 11pm on weekends")
            clash = [k for k in clash if not c.values.qualifiers.get(k)]
        if (typing.change or both_named) and c is not None and not (
                c.typing is not None and narrows(c.typing.value_tokens, typing.value_tokens, mine_vp)):
            # "we moved to Bristol in the spring": a change may add a qualifier; only a changed one is another case.
            # So too in a catalogue slot: "I drink coffee every morning" after "I drink tea" is the drink changing
            clash = [k for k in clash if c.values.qualifiers.get(k)]
            if typing.change and replacing:
                # "以后改成周六上午来", "moved to Thursday mornings instead": the day and time are what was replaced
                clash = [k for k in clash if k not in ("day", "tod")]
        if clash and mine_rd.value and c is not None and same_attribute(c.reading, mine_rd):
            # "the piano lesson is on Tuesdays" -> "... on Thursdays": the qualifier is the value said of the attribute
            clash = [k for k in clash if k not in qualifier_kinds(mine_rd.value)
                     & qualifier_kinds(c.reading.value or "")]  # when both name one: else another case
        if clash:
            return done("add", None, "qualifier_sibling", None, fresh_key=True,
                        note=f"the same attribute for another {'/'.join(clash)}: a sibling, not a replacement")
        return None

    def by_attribute() -> Candidate | None:
        """The current memory of the same subject whose attribute is the statement's (best lemma overlap, then
        search score), or None."""
        if typing.mood != "statement" or narrative:
            return None
        live = [c for c in candidates if c.status in ("current", "contested") and same_subject(c)
                and nfc(c.text) != mine]
        # one place differs between the two sentences: the rest is the attribute, the place its value
        subs = [c for c in live if substitution(c.text, text) is not None]
        if subs:
            return max(subs, key=lambda c: c.score)
        if not mine_rd.found:
            return None
        found = [c for c in live if same_attribute(c.reading, mine_rd)]
        if not found:
            return None
        return max(found, key=lambda c: (len(c.reading.lemmas & mine_rd.lemmas) / len(c.reading.lemmas | mine_rd.lemmas),
                                         c.score))

    def value_paraphrase(pool: list[Candidate] | None = None, min_shared: float = 0.25) -> Candidate | None:
        """The current memory (of ``pool``, default every candidate) saying the very values of the statement about
        the same topic (a content word shared besides the values, or a close cosine), or None."""
        strong = ("number", "time", "date", "email", "url", "phone", "code", "every")
        if (typing.correction or typing.cessation or typing.change or typing.additive or narrative
                or not any(mine_vp.parts.get(k) for k in strong)):
            return None
        words = content_tokens(mine_vp.residue) - GENERIC - _GENERIC_STEMS
        live = [c for c in candidates if c.status in ("current", "contested")]
        best = None
        for c in (candidates if pool is None else pool):
            if c.status not in ("current", "contested") or not (same_subject(c) or names_theirs(c)) \
                    or value_changed(c):
                continue  # "the school bus picks my son up at twenty to eight" names the son of "my son's bus ..."
            if not any(c.values.parts.get(k) for k in strong) or qualifiers_clash(c.values, mine_vp):
                continue
            theirs = content_tokens(c.values.residue) - GENERIC - _GENERIC_STEMS
            shared = overlap(words, theirs)
            # a statement that is its values alone ("我二十八了", "thirty-four") says again what the one memory holding
            # them says; so too a code, a phone number, an e-mail or a URL that one memory alone holds ("seat 14A")
            holders = sum(1 for o in live if all(mine_vp.parts[k] <= o.values.parts.get(k, frozenset())
                                                 for k in strong if mine_vp.parts.get(k)))
            bare = holders == 1 and (not words or any(mine_vp.parts.get(k) for k in ("code", "phone", "email", "url")))
            if (shared >= min_shared or (c.dense or 0.0) >= rel_cos or bare) and (best is None or shared > best[0]):
                best = (shared, c)
        return None if best is None else best[1]

    def value_replacement(pool: list[Candidate] | None = None) -> Resolution | None:
        """A statement that says something changed or was wrong and gives a value of the kind a current memory of
        the same topic holds ("they reset the lockers, my code is 9025 now" / "my gym locker code is 4471";
        物业把门禁密码换了，现在是7126): that memory is revised (superseded, or corrected). Only the best such
        memory, strictly ahead of any other, with a content word shared besides the values."""
        if not (typing.change or typing.correction or REVISION_HINT.search(text)) or typing.mood != "statement" \
                or narrative or (typing.additive and not replacing) or (
                PAST_EVENT.search(text) and not NOW.search(text)):
            return None  # "... started playing guitar five years ago": an episode, not a value replaced
        kinds = {k for k in (*_STRONG_KINDS, "name") if mine_vp.parts.get(k)}
        if not kinds:
            return None
        every = content_tokens(mine_vp.residue) - CHANGE_STEMS
        words = every - GENERIC - _GENERIC_STEMS
        numbered = numbered_nouns(text)
        found = []
        for c in (candidates if pool is None else pool):
            if c.status not in ("current", "contested") or not (
                    same_subject(c) or names_theirs(c) or typing.subject == "none"
                    or (typing.subject not in ("self", "other") and names_relative(c.text, typing.subject))):
                # a sentence naming no one ("幼儿园改了作息，八点就得到") may revise what was said of a child, and one
                # about the child ("Arlo's pickup's 3:40 now") what the user said of them ("I pick up my son Arlo at 3:15")
                continue
            theirs_rd = c.reading
            if moved_clash(c):
                continue  # summer's setting is not replaced by winter's ("冬天开空调…我调到22度")
            if (mine_rd.head and theirs_rd.head and "+" not in mine_rd.head + theirs_rd.head
                    and mine_rd.head != theirs_rd.head and not same_attribute(theirs_rd, mine_rd)):
                continue  # "the rent on my storage unit" is not "my rent": two nouns read, two attributes
            theirs = {k for k in (*_STRONG_KINDS, "name") if c.values.parts.get(k)}
            shared_kinds = kinds & theirs
            if not shared_kinds or not any(mine_vp.parts[k] - c.values.parts[k] for k in shared_kinds):
                continue  # it must give a value the memory does not hold ("... with Dana has changed" gives none)
            if (shared_kinds == {"name"} and typing.slot_key is not None and c.slot_key != typing.slot_key
                    and (c.typing is None or c.typing.slot_key != typing.slot_key)
                    and not same_attribute(theirs_rd, mine_rd) and not name_words(mine_vp) & name_words(c.values)):
                # a name in a slot of its own ("call me Sam") replaces no name said of another thing (French), unless
                # it names the old one too ("Tony跳槽走了，我现在都找Kevin剪")
                continue
            their_every = content_tokens(c.values.residue) - CHANGE_STEMS
            # a topic word shared besides the values; the slot's own words ("phone number", 手机) count when the
            # sentences have no other
            share = overlap(words, their_every - GENERIC - _GENERIC_STEMS)
            if numbered & numbered_nouns(c.text):
                share = max(share, 0.5)  # "unit 318" of "storage unit 214": the noun both number is the topic
            only_holder = any(k in PERSONAL and sum(1 for o in candidates if o.status in ("current", "contested")
                                                     and o.values.parts.get(k)) == 1 for k in shared_kinds)
            topic = (every & their_every) & (GENERIC | _GENERIC_STEMS)  # the slot word both name: birthday, 手机
            if (share >= 0.2 or overlap(every, their_every) >= 0.5 or (c.dense or 0.0) >= rel_cos or only_holder
                    or topic):
                # an e-mail address, a phone number or a URL held by one memory only: it is the one replaced
                found.append((max(share, 0.5 if only_holder else 0.0), c.score, c))
        found.sort(key=lambda t: (-t[0], -t[1]))
        if not found or (len(found) > 1 and found[1][0] >= found[0][0]):
            return None
        target = found[0][2]
        if typing.correction:
            return done("correct", target.key, "value_correction", target, op="correct",
                        note="it says the value was wrong and gives one of the same kind")
        return done("supersede", target.key, "value_replaced", target,
                    note="it says the value changed and gives one of the same kind")

    def on_attribute(c: Candidate, close: str | None = None, key: str | None = None) -> Resolution:
        """Decide against the memory ``c`` holding the same attribute: correct, retire, supersede, or (every value
        equal, no change said) reaffirm. ``key``/``close``: where it lands when ``c`` is a legacy key of a slot."""
        key = c.key if key is None else key
        if typing.correction:
            return done("correct", key, "attribute_correction", c, op="correct" if close is None else "assert",
                        close_key=close, close_as="withdrawn")
        if typing.cessation:
            return done("retire", key, "attribute_cessation", c, close_key=close)
        changed = value_changed(c)
        if not typing.change and not mine_rd.old_value and mine_rd.form not in ("change", "set") \
                and aspect_of(c.values) != aspect_of(mine_vp):
            # the same noun, another aspect of it: "my rent is 1,900 a month" / "rent is due on the 1st",
            # 宽带是电信的 / 宽带每年九月到期: a value of another kind, kept beside it
            return done("add", None, "other_aspect", None, fresh_key=True,
                        note="a value of another kind for the same noun: both kept")
        if changed or typing.change:
            return done("supersede", key, "same_attribute", c, close_key=close,
                        note=f"same attribute, {('/'.join(changed) or 'value')} changed")
        return done("reaffirm", c.key, "attribute_paraphrase", c, note="same attribute, every value equal")

    def job_changed() -> Resolution | None:
        """One job at a time (ledger/unmarked.py ``job_left``): the other job slot's memory is the job left."""
        left = None if narrative else job_left(slot_key, typing, mine_vp, candidates, same_subject)
        return None if left is None else done("supersede", slot_key, "job_changed", left, close_key=left.key,
                                              note="one job at a time: the other job slot's memory is the job left")

    def unmarked() -> Resolution | None:
        """A change said with no word of change (ledger/unmarked.py): the one memory it replaces is superseded."""
        if (typing.mood != "statement" or narrative or typing.additive or typing.cessation or typing.correction
                or (PAST_EVENT.search(text) and not NOW.search(text))):
            return None  # "Stopped by unit 214 on Sunday": an episode, not the value replaced
        hit = unmarked_target(text, mine_vp, mine_rd, candidates, same_subject, typing.subject, typing.change)
        if hit is None:
            return None
        return done("supersede", hit[0].key, "unmarked_change", hit[0],
                    note=f"another {'/'.join(hit[1])} for the same topic"
                    + ("" if typing.change else ", said without a word of change"))

    def wrong_named() -> Resolution | None:
        """A correction naming the wrong value ("9pm, not 8", 我之前写成周三了): the one memory holding it is corrected."""
        hit = wrong_value_holder(text, candidates, lambda c: same_subject(c) or typing.subject == "self") \
            if typing.correction else None
        return done("correct", hit[0].key, "named_wrong_value", hit[0], op="correct", note=f"it says {hit[1][1]!r} "
                    f"was wrong and {hit[1][0]!r} is right") if hit else None

    def marked_nearest() -> Resolution | None:
        """A statement that says something changed, was wrong or stopped, where one current memory of the same
        subject is by far the nearest ("Switched carriers, new number: ..." of "my cell is ..."; 辞职了，去咖啡店当店长了
        of 我在银行当柜员): that memory is revised. Nothing else is near enough to be meant; "also" adds, another
        season or person is another case."""
        if not (typing.change or typing.correction or typing.cessation) or typing.mood != "statement" or narrative \
                or (typing.additive and not replacing):
            return None
        live = [c for c in candidates if c.status in ("current", "contested") and nfc(c.text) != mine]
        if not live:
            return None
        by_score = by_meaning = False
        if not cjk_statement and any(c.dense is not None for c in live):
            live = [c for c in live if c.dense is not None]  # a Chinese memory (no cosine) is not what English revises
        if all(c.dense is not None for c in live):
            # English: the cosine, which scores unrelated sentences near 0 ("my cell is ..." 0.39, the rest < 0.1)
            if not (embedder or "").startswith(NEAREST_MODELS):
                return None
            live.sort(key=lambda c: -(c.dense or 0.0))
            first, second = live[0].dense or 0.0, (live[1].dense or 0.0) if len(live) > 1 else 0.0
            if first < NEAREST_DENSE or first - second < NEAREST_DENSE_MARGIN:
                return None
        else:
            live.sort(key=lambda c: -c.score)
            by_score = not (live[0].score < NEAREST
                            or (len(live) > 1 and live[0].score - live[1].score < NEAREST_MARGIN))
            by_meaning = cjk_statement and companion_ahead(live, NEAREST_COMPANION_MARGIN)
            if not (by_score or by_meaning):
                return None
            if by_meaning and not by_score:
                live.sort(key=lambda c: -(c.companion or 0.0))
        best = live[0]
        # and the two share something besides their markers: a content word, a pair of Chinese characters (快递, 驿站),
        # a value of one kind (a code, a phone number, a date; a number, for a correction), or a close cosine
        mine_words, best_words = (content_tokens(t) - GENERIC - _GENERIC_STEMS - CHANGE_STEMS for t in (text, best.text))
        words = (mine_words & best_words) | compound_shared(mine_words, best_words)  # "hives" of "beehives"
        kinds = ("code", "phone", "email", "url", "time", "date") + (("number",) if typing.correction else ())
        clear = best.dense is not None and (best.dense >= NEAREST_ALONE
                                            and best.dense - (live[1].dense or 0.0 if len(live) > 1 else 0.0)
                                            >= NEAREST_ALONE_MARGIN) or (by_score and by_meaning)
        if not ({w for w in words if not has_cjk(w)} or cjk_bigrams(text) & cjk_bigrams(best.text)
                or any(mine_vp.parts.get(k) and best.values.parts.get(k) for k in kinds)
                or (best.dense or 0.0) >= rel_cos or clear):
            return None
        if not (same_subject(best) or names_theirs(best) or typing.subject == "none") or moved_clash(best) \
                or (best.typing is not None and best.typing.mood == "question"):
            return None
        heads = (mine_rd.head, best.reading.head)
        if not (typing.correction or typing.cessation) and all(heads) and "+" not in "".join(heads) \
                and heads[0] != heads[1] and heads[1] in mine_words and not same_attribute(best.reading, mine_rd):
            return None  # "the rent on my storage unit" is not "my rent": it names the memory's noun, of another
        if typing.correction:
            return done("correct", best.key, "nearest_correction", best, op="correct",
                        note="it says something was wrong, and one memory is by far the nearest")
        if typing.cessation and not (typing.change and typing.value_tokens - best.typing.value_tokens
                                     if best.typing else False):
            if partial(best):
                return done("conflict", None, "partial_cessation", best, contest_key=best.key, note=partial_note)
            return done("retire", best.key, "nearest_cessation", best,
                        note="it says something stopped, and one memory is by far the nearest")
        units = mine_vp.parts.get("unit", frozenset()) & best.values.parts.get("unit", frozenset())
        if best.slot_key and registry.cardinality(best.key) == "multi" and not replacing \
                and not (FAVOURITE.search(text) and FAVOURITE.search(best.text)) and not (units and words):
            # "I joined a chess club" beside "the running club": another of a list; not a favourite (我现在最喜欢走龙井那条线
            # of 我最喜欢的…是九溪十八涧) nor an amount of one thing in one unit ("50mg of sertraline" / "sertraline to 100mg")
            return None
        verbs = [r.lemmas - PREPOSITIONS for r in (mine_rd, best.reading) if r.form == "verb"]
        if len(verbs) == 2 and verbs[0] and verbs[1] and not verbs[0] & verbs[1] and verbs[0] | verbs[1] <= STATE_VERBS:
            return None  # "I work in Cambridge now" of "I live in Boston": another verb, another attribute
        gives = aspect_of(mine_vp) & {"time", "date"}  # not a number: "送到3号楼底下的丰巢柜" is the new place
        if gives and not gives & aspect_of(best.values) and not typing.correction:
            # "瑜伽馆…营业时间改成早九点到晚九点" of "在那家瑜伽馆办了年卡": a time where the memory holds none is
            # another aspect of the same thing, not its new value
            return None
        says_new = typing.value_tokens - (best.typing.value_tokens if best.typing else set()) - CHANGE_STEMS
        if (not says_new and not differing(best.values, mine_vp)) \
                or (typing.slot is None and says_more_of(text, best.text, mine_vp, best.values)):
            return None  # "the offsite has changed" says no new value; "换了个新过滤器" a part of the memory's thing
        return done("supersede", best.key, "nearest_change", best,
                    note="it says something changed, and one memory is by far the nearest")

    def meaning_paraphrase() -> Candidate | None:
        """The current memory of the same subject this unmarked statement says again in other words: by far the
        nearest in meaning (:data:`MEANING_PARAPHRASE`) and every value-bearing part equal (no number, time, code,
        name, unit or negation differs; no other season or person; no name added), or None."""
        if (typing.correction or typing.cessation or typing.change or typing.additive
                or typing.mood != "statement" or mine_rd.old_value):
            return None
        scored = []
        for c in candidates:
            if c.status not in ("current", "contested") or nfc(c.text) == mine:
                continue
            cos, model = (c.companion, c.companion_model) if cjk_statement else (c.dense, embedder)
            th = next((t for prefix, t in MEANING_PARAPHRASE.items() if (model or "").startswith(prefix)), None)
            if cos is not None and th is not None:
                scored.append((cos, th, c))
        if not scored:
            return None
        scored.sort(key=lambda t: -t[0])
        cos, (least, margin), best = scored[0]
        if narrative or cos < least or (len(scored) > 1 and cos - scored[1][0] < margin):
            return None
        if cjk_statement and clause_unsaid(text, best.text, lambda cl: not value_parts(cl).empty):
            return None  # "刘医生是口腔医院正畸科的，我这副牙套就是她给我戴的": a clause of its own is not said again
        if (not same_subject(best) or value_changed(best) or qualifiers_clash(best.values, mine_vp)
                or not names_within(name_words(mine_vp), name_words(best.values))
                or (best.typing is not None and (best.typing.cessation or best.typing.mood != "statement"))):
            return None
        return best

    # a home, car or phone said in passing that a current memory already names ("any tips for our flat in Bristol?"
    # beside "we also have a flat in Bristol"): news of that thing, kept beside whatever else is held
    thing = typing.in_passing
    held = [c for c in candidates if thing and c.status in ("current", "contested") and same_subject(c)
            and nfc(c.text) != mine and thing in c.text.lower()]
    if held:
        return done("add", None, "same_thing_in_passing", held[0], fresh_key=True,
                    note=f"it speaks of {thing!r}, which the memory names: both kept")
    # duplicate sentence
    for c in candidates:
        if nfc(c.text) == mine and c.status in ("current", "contested"):
            c.value_overlap = 1.0
            return done("reaffirm", c.key, "duplicate", c, reaffirm_value=None)

    if typing.mood == "question":
        # a question states nothing: it never replaces, retires or reaffirms a memory; it is a memory of its own
        return done("new", None, "question", note="a question is kept as asked; the current memories stay")

    def partial(target: Candidate) -> bool:
        # the memory names several values ("two cats, Luna and Mochi") and the cessation one of them ("Luna
        # passed away"): retiring the memory would lose the others
        return names_several(target.text) and not says_all(text) and not names_several(text)

    partial_note = "the memory names several values and this stops one of them: both kept, to confirm"

    cue_tokens = cue_clause_tokens(text, registry, user_name) if (typing.cessation or typing.correction) else set()

    def named(pool: list[Candidate]) -> tuple[list[tuple[float, float, Candidate]], bool]:
        return named_memories(pool, text, typing, mine_vp, cue_tokens)

    def stop_elsewhere(rule_note: str) -> Resolution | None:
        # a cessation whose object is held in another slot ("我每周打两次篮球" is a schedule; "我不打篮球了" a hobby):
        # the one memory outside the slot holding its value words is retired
        if not typing.cessation or typing.subject != "self" or not typing.value_tokens:
            return None
        found, unique = named([c for c in candidates if c.slot_key != typing.slot_key])
        if not unique:
            return None
        target = found[0][2]
        target.value_overlap = found[0][0]
        if partial(target):
            return done("conflict", None, "partial_cessation", target, contest_key=target.key, note=partial_note)
        return done("retire", target.key, "named_cessation", target, note=rule_note)
    was = partner_renamed(text, candidates) if typing.mood == "statement" and not typing.additive and not narrative else None
    if was is not None:  # "Marcus, my boyfriend, ..." of "My boyfriend Tom ...": the memory is no longer so
        return done("supersede", was.key, "partner_renamed", was, note="the user's partner has another name")
    slot_key = typing.slot_key
    if slot_key is not None and typing.cardinality == "single":
        own = [c for c in candidates if c.key == slot_key]
        legacy = [c for c in candidates if c.key != slot_key and c.slot_key == slot_key
                  and not registry.slot_of(c.key)]
        head = own[0] if own else (max(legacy, key=lambda c: c.score) if legacy else None)
        links = linked_slot_keys(slot_key)
        linked = [c for c in candidates if links and c.slot_key in links and c.status in ("current", "contested")
                  and (c.typing is None or not c.typing.cessation)] if typing.cessation else []
        if linked and not (typing.change and typing.value_tokens - {"right", "currently", "moment"}):
            # "I lost my job" with "I work at Google" current: the employer ends too (closed at valid_from)
            note = "losing one's job ends the current employer too"
            keys = sorted({c.key for c in linked})
            if head is None:
                first = max(linked, key=lambda c: c.score)
                return done("retire", slot_key, "cessation_linked", first, also_close=keys, note=note)
            if head.typing is None or not head.typing.cessation:
                return done("retire", slot_key, "cessation", head, close_key=head.key if head.key != slot_key else None,
                            also_close=keys, note=note)
        if head is None:
            elsewhere = stop_elsewhere(f"nothing current in {slot_key}; the memory holding its words is in another "
                                       "slot")
            if elsewhere is not None:
                return elsewhere
            job = job_changed()
            if job is not None or slot_key in JOB_PAIRS and any(c.slot_key == JOB_PAIRS[slot_key] and same_subject(c)
                                                                and c.status == "current" for c in candidates):
                return job or done("new", slot_key, "new_slot")  # "I work for Spotify now" of "I'm an engineer"
            am = by_attribute()
            if am is not None and not registry.slot_of(am.key):
                # the slot holds nothing, but a free-text memory is about the same attribute: it is revised
                return beside(am) or on_attribute(am)
            para = value_paraphrase()
            if para is not None:
                return done("reaffirm", para.key, "value_paraphrase", para, note="every value-bearing part equal")
            replaced = value_replacement([c for c in candidates if not registry.slot_of(c.key)])
            if replaced is not None:
                return replaced
            nearest = (wrong_named() or marked_nearest()) if typing.correction or typing.change else None
            if nearest is not None:
                # 我跳槽了，现在在字节做产品 of 我在美团做产品经理 held outside the slot: by far the nearest memory
                return nearest
            return unmarked() or done("new", slot_key, "new_slot")
        close = head.key if head.key != slot_key else None
        if typing.correction:
            return done("correct", slot_key, "correction", head, op="correct" if close is None else "assert",
                        close_key=close, close_as="withdrawn")
        new_value = bool(typing.value_tokens) and head.value_overlap < PARAPHRASE
        contained = bool(typing.value_tokens) and head.typing is not None and typing.value_tokens <= (
            head.typing.value_tokens)
        if head.typing is not None and head.typing.cessation and not typing.cessation:
            # "lost his job as a banker", then "works as a banker": the same words, the opposite state
            contained, new_value = False, True
        if typing.cessation and not (typing.change and new_value):
            if partial(head):
                return done("conflict", None, "partial_cessation", head, contest_key=head.key, note=partial_note)
            return done("retire", slot_key, "cessation", head, close_key=close)
        kept = beside(head, both_named=True)
        if kept is not None:
            return kept
        lex_mine, lex_head = slot_values(slot_key, text), slot_values(slot_key, head.text)
        if lex_mine and lex_head and not typing.change:
            # a closed vocabulary ("I'm vegetarian" / "I don't eat meat or fish", 素食者 / 吃素): equal values are
            # a paraphrase whatever the words; another value replaces it
            if lex_mine == lex_head and not lexicon_blind(value_changed(head), mine_vp, head.values):
                return done("reaffirm", head.key, "paraphrase", head, note=f"the same {slot_key}: "
                            + ", ".join(sorted(lex_mine)))
        changed = value_changed(head)
        hr = head.reading
        mine_noun, their_noun = (mine_rd.head or "").split("+")[0], (hr.head or "").split("+")[0]
        if (mine_noun and their_noun and mine_noun != their_noun and not same_attribute(hr, mine_rd)
                and not (typing.correction or typing.cessation)
                and mine_noun not in content_tokens(hr.value or "")
                and their_noun not in content_tokens(mine_rd.value or "")):  # "sushi is my favourite food": inverted
            # the slot's words, but another attribute of its topic ("my car is a Tesla" / "my car insurance renews
            # in October"): kept beside it
            return done("add", None, "other_attribute", None, fresh_key=True,
                        note=f"about {mine_rd.attribute!r}, not {hr.attribute!r}: both kept")
        names, theirs = name_words(mine_vp), name_words(head.values)
        said = {w for w in theirs if re.search(rf"(?<!\w){re.escape(w)}(?!\w)", text, re.I)}
        extra = typing.value_tokens - (head.typing.value_tokens if head.typing is not None else set())
        if not changed and not typing.change and theirs and (names <= theirs or theirs <= names) and (names or said) \
                and not cue_words(slot_key, extra, registry):  # "Alex and I got engaged": a value of the slot's own
            # "Sounders till I die, they're my club" / "I'm a massive Seattle Sounders fan": the same name, reworded
            return done("reaffirm", head.key, "paraphrase", head, note="the same name: " + ", ".join(sorted(theirs)))
        if changed and (contained or not typing.change):
            # no stated value is ever lost: a sentence whose number, time, code or name differs is a new value
            return done("supersede", slot_key, "value_changed", head, close_key=close,
                        note=f"{'/'.join(changed)} changed: not a paraphrase")
        would_reaffirm = contained or (not new_value and not typing.change and bool(typing.value_tokens))
        if would_reaffirm and not contained and extra and cue_words(slot_key, extra, registry):
            # "I am dating Alex" / "Alex and I got engaged": the word it adds is one of the slot's own values
            return done("supersede", slot_key, "value_changed", head, close_key=close,
                        note=f"it adds {', '.join(sorted(cue_words(slot_key, extra, registry)))}: a new value")
        if contained or (not new_value and not typing.change and typing.value_tokens):
            return done("reaffirm", head.key, "paraphrase", head)
        if not typing.value_tokens and not typing.change:
            return done("reaffirm", head.key, "paraphrase_no_value", head)
        if value_paraphrase([head], 0.0) is not None:
            # "my birthday is on the 3rd of May" / "my birthday falls on May 3": the same slot, every value equal
            return done("reaffirm", head.key, "value_paraphrase", head, note="every value-bearing part equal")
        return done("supersede", slot_key, "same_slot", head, close_key=close)

    if slot_key is not None:  # multi-valued
        siblings = [c for c in candidates if c.slot_key == slot_key]
        best = max(siblings, key=lambda c: (c.value_overlap, c.score), default=None)
        matched = best if best is not None and best.value_overlap > 0 else None
        if typing.correction or typing.cessation:
            target = matched or (siblings[0] if len(siblings) == 1 and not typing.value_tokens else None)
            if target is None:
                # 日语我放弃了 of 我在学日语: a sibling that names what it stops (a shared word, a name), alone
                found, unique = named(siblings)
                target = found[0][2] if unique else None
            if target is None:
                said = language_names(text)
                holding = [c for c in siblings if said & language_names(c.text)]
                target = holding[0] if said and len(holding) == 1 else None
            elsewhere = stop_elsewhere(f"no {slot_key} sibling holds its words; the memory holding them is in "
                                       "another slot") if target is None else None
            if elsewhere is not None:
                return elsewhere
            if target is None:
                am = by_attribute()
                if am is not None:
                    return on_attribute(am)
            if target is None and siblings and (not typing.value_tokens or best.score >= WEAK_MATCH):
                # "I stopped that" among several, or a sibling close to it ("日语先放下了，我开始学韩语" of "我在学日语"):
                # which one it ends is for the user to say
                return done("conflict", None, "multi_unsure", best, contest_key=best.key if best else None)
            if target is None and typing.correction:
                # 我记错日子了，体检其实是5月21号 of 我体检约的是5月12号 (a memory outside the slot): the one it corrects
                fixed = wrong_named() or value_replacement() or marked_nearest()
                if fixed is not None:
                    return fixed
            if target is None:
                # "I no longer play tennis" beside a locker filed under the same slot: it names nothing held, so it
                # is kept as said and contests nothing
                return done("add", None, "multi_new", note="it names no value of the slot held now")
            close = target.key if not target.key.startswith(slot_key + ".") else None
            key = target.key if close is None else None
            if typing.correction:
                return done("correct", key, "multi_correction", target, op="correct" if close is None else "assert",
                            close_key=close, close_as="withdrawn")
            if set(qualifiers_clash(target.values, mine_vp)) & {"day", "season"}:  # 小宝周三的游泳课取消了 of 每周一…
                return done("add", None, "other_case", note="another day's or season's stops: the memory stays")
            if partial(target):
                return done("conflict", None, "partial_cessation", target, contest_key=target.key, note=partial_note)
            return done("retire", key, "multi_cessation", target, close_key=close)
        lex_mine = slot_values(slot_key, text)
        same_lex = [c for c in siblings if lex_mine and slot_values(slot_key, c.text) == lex_mine
                    and c.status in ("current", "contested")]
        if (same_lex and not (typing.change or typing.additive) and (same_lex[0].typing is None
                                                                      or not same_lex[0].typing.cessation)
                and not lexicon_blind(value_changed(same_lex[0]), mine_vp, same_lex[0].values)):
            # a closed vocabulary ("peanuts are a hard no for me — allergy" / "I'm allergic to peanuts", 英文、广东话、
            # 国语 / 普通话、粤语和英语): the same values in other words
            return done("reaffirm", same_lex[0].key, "multi_paraphrase", same_lex[0],
                        note="the same " + ", ".join(sorted(lex_mine)))
        if (matched is not None and matched.value_overlap >= PARAPHRASE and matched.typing is not None
                and matched.typing.cessation and not typing.cessation):
            return done("supersede", matched.key, "multi_resumed", matched)
        if matched is not None and matched.value_overlap >= PARAPHRASE:
            close = matched.key if not matched.key.startswith(slot_key + ".") else None
            kept = beside(matched)
            if kept is not None:
                return kept
            changed = value_changed(matched)
            if changed:
                if same_subject(matched) and (same_attribute(matched.reading, mine_rd) or set(changed) <= {"day", "tod"}
                                              or substitution(matched.text, text) is not None):
                    return done("supersede", matched.key if close is None else None, "value_changed", matched,
                                close_key=close, note=f"same attribute, {'/'.join(changed)} changed")
                replaced = value_replacement([matched])
                if replaced is not None:
                    return replaced
                return unmarked() or done("add", None, "multi_new", note=f"{'/'.join(changed)} differs: another value")
            if typing.change and matched.value_overlap < 1.0:
                return done("supersede", matched.key if close is None else None, "multi_same_value", matched,
                            close_key=close)
            more = lex_mine - slot_values(slot_key, matched.text)
            extra = typing.value_tokens - (matched.typing.value_tokens if matched.typing is not None else set())
            more |= (cue_words(slot_key, extra, registry) | (name_words(mine_vp) - name_words(matched.values))
                     | (extra & listed_words(text)))
            if more:
                # "allergic to peanuts and shellfish" after "allergic to peanuts": the words overlap, but it names a
                # value the sibling does not hold; both are true, so the new statement is a sibling beside it
                return done("add", None, "multi_new", note=f"it adds {', '.join(sorted(more))}: another value")
            return done("reaffirm", matched.key, "multi_paraphrase", matched)
        para = value_paraphrase(siblings, 0.0) or value_paraphrase()
        if para is not None:
            return done("reaffirm", para.key, "value_paraphrase", para, note="every value-bearing part equal")
        para = meaning_paraphrase() if slot_key == "schedule" else None
        if para is not None:  # "i'd play it every night" typed a routine: what it says again is the memory it means
            return done("reaffirm", para.key, "meaning_paraphrase", para,
                        note="by far the nearest in meaning, every value-bearing part equal")
        am = by_attribute()
        if am is not None and beside(am) is None:
            return on_attribute(am)
        # a change landing in an empty list (typed a hobby by "swimming"): the nearest memory filed elsewhere is it
        return (value_replacement() or unmarked() or (marked_nearest() if typing.change and not siblings else None)
                or done("add", None, "multi_new"))

    fixed = wrong_named()
    if fixed is not None:
        return fixed

    # no slot, but it stops or corrects something it names ("I gave up chess", "Max passed away", "我放弃减肥了"):
    # the one current memory sharing its value words is the target
    if ((typing.cessation or typing.correction)
            and (typing.value_tokens or typing.negated_tokens)):
        found, unique = named(candidates)
        if unique:
            target = found[0][2]
            target.value_overlap = found[0][0]
            if typing.correction:
                return done("correct", target.key, "named_correction", target, op="correct")
            if partial(target):
                return done("conflict", None, "partial_cessation", target, contest_key=target.key, note=partial_note)
            if not typing.change and other_case(target.values, mine_vp):  # 周末就不喝美式了 of 工作日早上…冰美式
                return done("add", None, "qualifier_sibling", None, fresh_key=True, note="another case stops")
            return done("retire", target.key, "named_cessation", target)
        if len(found) > 1 and found[0][0] >= 0.5:
            return done("conflict", None, "named_unsure", found[0][2], contest_key=found[0][2].key)

    # no slot: "... instead of the 42 bus", "不再坐地铁，改骑车": the memory holding what it names is replaced
    instead = INSTEAD.search(text)
    if instead is not None and typing.subject in ("self", "none"):
        named_words = content_tokens(next(g for g in instead.groups() if g)) - GENERIC - _GENERIC_STEMS
        found = sorted(((overlap(named_words, content_tokens(c.text)), c.score, c) for c in candidates
                        if c.status in ("current", "contested") and same_subject(c)), key=lambda t: (-t[0], -t[1]))
        if found and found[0][0] >= 0.5 and (len(found) == 1 or found[1][0] < found[0][0]):
            target = found[0][2]
            return done("supersede", target.key, "instead_of", target, note="it names what it replaces")

    # no slot: the same words, negated or no longer ("I don't eat pork" / "I eat pork"): the newest holds
    flip = [c for c in candidates if c.status in ("current", "contested") and same_subject(c) and nfc(c.text) != mine
            and opposite_polarity(c.text, text)]
    if len(flip) == 1 and typing.mood == "statement" and not narrative:
        return done("supersede", flip[0].key, "opposite_polarity", flip[0], note="the opposite said: the newest holds")
    # no slot: "also" adds, whatever it resembles
    if typing.additive and not replacing and not typing.correction and not typing.cessation:
        return done("add", None, "additive", None, fresh_key=True,
                    note="it says also/too/也: it adds to what is known, nothing is contested")
    # no slot: the same thing said again in other words, by far the nearest in meaning, every value equal
    para = meaning_paraphrase()
    if para is not None:
        return done("reaffirm", para.key, "meaning_paraphrase", para,
                    note="by far the nearest in meaning, every value-bearing part equal")
    # no slot: a current memory about the same attribute (read from both sentences) is the one this revises
    am = by_attribute()
    if am is not None:
        return beside(am) or on_attribute(am)

    # no slot: it says a value changed (or was wrong) and gives one of the kind a memory of the same topic holds
    replaced = value_replacement()
    if replaced is not None:
        return replaced

    # no slot: the same values said of the same topic ("My rent is 2,200 a month" / "I pay 2.2k in rent every
    # month"): every value-bearing part equal and non-empty, a shared content word besides them, no marker
    para = value_paraphrase()
    if para is not None:
        return done("reaffirm", para.key, "value_paraphrase", para, note="every value-bearing part equal")

    # no slot: compare with the closest free-text memories
    free = [c for c in candidates]
    mine_tokens = content_tokens(text)
    best_c, best_ov = None, 0.0
    for c in free:
        ov = overlap(mine_tokens, content_tokens(c.text))
        c.value_overlap = ov
        strength = max(ov, c.dense or 0.0)
        if best_c is None or strength > max(best_ov, best_c.dense or 0.0):
            best_c, best_ov = c, ov
    if best_c is not None:
        same_len = min(len(mine_tokens), len(content_tokens(best_c.text))) >= 0.6 * max(
            len(mine_tokens), len(content_tokens(best_c.text)), 1)
        near = (best_ov >= PARAPHRASE_FREE and same_len) or (best_c.dense or 0.0) >= para_cos
        similar = best_ov >= RELATED_FREE or (best_c.dense or 0.0) >= rel_cos
        marked = typing.correction or typing.cessation or typing.change
        if near and not marked:
            changed = value_changed(best_c)
            if not changed:
                return done("reaffirm", best_c.key, "free_paraphrase", best_c)
            return unmarked() or done("new", None, "new_memory", note=f"close to {best_c.key}, but its "
                                      f"{'/'.join(changed)} differs: a memory of its own")
        if similar and marked and best_c.slot_key is None and not narrative and same_subject(best_c) \
                and not says_more_of(text, best_c.text, mine_vp, best_c.values):
            kept = beside(best_c) if moved_clash(best_c) or not qualifiers_clash(best_c.values, mine_vp) else None
            if kept is not None:  # summer / winter, also: both kept, nothing contested
                return kept
            clear = clearly_closest(best_c, [c for c in free if c.status in ("current", "contested")
                                             and c.slot_key is None and same_subject(c)], CLEAR_MARGIN)
            # a value it gives, not one it leaves out ("Noah started kindergarten" of "two kids, Noah and Ella")
            changed = [k for k in value_changed(best_c) if k not in VALUE_KINDS or mine_vp.parts.get(k)]
            # it must say what the value is now: "the offsite with Dana has changed" gives none (a conflict)
            says_new = bool(mine_tokens - content_tokens(best_c.text) - CHANGE_STEMS - GENERIC - _GENERIC_STEMS)
            if clear and says_new and not typing.cessation and (best_ov >= CHANGE_FREE or changed) \
                    and not moved_clash(best_c) and not (typing.additive and not replacing):
                # "Our Slack workspace got renamed to brightco-hq" / "... is called brightco-team": one memory
                # holds most of its words, well ahead of any other, and it says the value changed or was wrong
                if typing.correction:
                    return done("correct", best_c.key, "free_correction", best_c, op="correct",
                                note="one memory holds most of its words and it says that was wrong")
                return done("supersede", best_c.key, "free_change", best_c,
                            note="one memory holds most of its words and it says that changed")
            return marked_nearest() or done("conflict", None, "free_unsure", best_c, contest_key=best_c.key)
    return marked_nearest() or unmarked() or done("new", None, "new_memory")
