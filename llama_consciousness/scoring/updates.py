"""Knowledge updates: does a later statement replace an earlier one?  The offline, deterministic judge.

Nobody writes ids in a conversation: "I live in Lyon" in March and "we moved
to Berlin last week" in September are two memories, and only their words say
that the second replaces the first.  This module reads those words.  A
statement is reduced to :class:`Fact` s (who, which attribute, what value),
found by patterns for attributes that hold **one value at a time**: where
someone lives, where they work and as what, their relationship status, a
favourite, their age, the state of a task, a number or a date something is
set to.  Two memories are an update when a fact of the later one gives the
same subject and attribute another value (or denies the earlier value: "no
longer", "not ... anymore", "quit").

Why patterns rather than similarity: two memories about the same thing with
different words are usually *both* true ("I went hiking", "I went
swimming"); what makes one outdated is an attribute that cannot hold both
values.  Patterns keep the judge deterministic, explainable (``why``) and
conservative: a statement no pattern reads is never an update, which is what
keeps false supersessions rare on conversations where facts rarely change.

Not facts, so never updates: hedged or hypothetical statements ("if", "might",
"thinking about moving"), the quoted past ("I used to live in Paris", "back in
2010"), reported speech ("Anna said she moved"), and attributes that hold many
values (hobbies, things liked or owned), unless the later statement denies the
earlier one; nor statements whose subject the judge cannot pin down (he,
she, they).  A *possible* update (linked, never expired) is a pair whose
older memory says much more than the changed fact, or whose two statements
hold from the same instant without a word of change.

Correction or change: "I was wrong", "actually it was", "turns out" without a
change verb make a ``discovered_false`` (the old statement was never true);
otherwise ``reality_changed``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from datetime import datetime
from typing import Any, Literal

__all__ = [
    "CONFIRM_AT", "DATE_PATTERN", "Fact", "about_words", "clauses_of", "UpdateJudgement", "Statement", "extract_facts", "judge_frames", "judge_update",
    "order_pair", "speaker_of", "statement_of", "states_something",
]

Verdict = Literal["update", "possible", "none"]

CONTENT_WORDS = True
CONFIRM_AT = 0.7
"""Confidence from which a judged update expires the older memory; below it (and above 0) it is only linked."""

LONG_STATEMENT_WORDS = 80
"""An older memory longer than this says more than the one fact that changed: never expired by it, only
linked as possibly outdated (expiring it would hide its other facts from current retrieval)."""

MAX_SENTENCE_CHARS = 400
"""Longer sentences are not read: patterns over them would cost more than they could find."""
MAX_SENTENCES = 200
"""Sentences read from one memory (a long document's first ones)."""

SELF = "self"
AMBIGUOUS = "?"

_FIRST_PERSON = {"i", "i'm", "im", "i've", "i'd", "i'll", "we", "we're", "we've", "me", "us", "myself", "ourselves"}
_FAMILY_SELF = re.compile(r"^(?:my|our)\s+(?:family|wife and i|husband and i|partner and i|kids and i)$")
_PRONOUNS = {"he", "she", "they", "he's", "she's", "they're", "it", "it's", "this", "that", "someone", "everyone",
             "who", "you", "you're", "y'all", "one"}
_NOT_NAMES = {"the", "a", "an", "and", "but", "so", "then", "now", "also", "just", "still", "finally", "recently",
              "actually", "yes", "no", "oh", "well", "hey", "wow", "since", "because", "when", "after", "before",
              "last", "next", "this", "that", "today", "yesterday"}

# -- cues ---------------------------------------------------------------------------

_HEDGE = re.compile(
    r"\b(?:if|might|maybe|perhaps|would|could|should|(?-i:may)|thinking (?:about|of)|considering|consider|hope|hoping|"
    r"wish|wishing|want to|wants to|wanna|dream(?:ing)? (?:of|about)|someday|one day|plan(?:s|ning)? to|"
    r"going to|gonna|will|won't|not sure|probably|possibly|suppose|imagine|pretend|what if|whether|unless|"
    r"rumou?r|apparently)\b|\?", re.IGNORECASE)
_PAST = re.compile(
    r"\b(?:used to|back in|back when|years ago|months ago|long ago|when i was|when we were|as a (?:kid|child|"
    r"teenager|student)|growing up|grew up|formerly|previously|once|in (?:19|20)\d\d|before (?:i|we) moved|"
    r"at the time|in the past|childhood)\b", re.IGNORECASE)
_REPORTED = re.compile(  # what others say ("I said X by mistake" is the speaker correcting themself)
    r"(?<!\bI )(?<!\bto )\b(?:said|says|say|told|tells|tell|mentioned|mentions|heard|hears|according to|claims?|"
    r"claimed|"
    r"thinks|thought|believes|believed|asked|wrote|texted|posted)\b", re.IGNORECASE)
_NEGATION = re.compile(
    r"\b(?:no longer|not anymore|not any more|(?:don't|do not|doesn't|does not|didn't|isn't|aren't|am not|"
    r"'m not|not)\b[^.;]{0,40}\b(?:anymore|any more))\b", re.IGNORECASE)
# What a denial is about: the words after "no longer", "not" or "n't" in their own clause.  A sentence that
# gives the new value and denies the old one in one breath ("I work at Microsoft now, no longer at Google")
# denies only the old one.
_NEGATOR = re.compile(r"\b(?:no longer|no more|not)\b|n't\b", re.IGNORECASE)
_CONTRAST = re.compile(r",\s*not\b", re.IGNORECASE)
_CLAUSE_BREAK = re.compile(r"[,;:!?]|\b(?:and|but|instead)\b", re.IGNORECASE)


def _negated(sentence: str, at: int) -> bool:
    """Whether the words at ``at`` in a sentence that denies something are what it denies: a negator before
    them in their clause ("I don't live in Lyon any more, I live in Berlin" denies Lyon, not Berlin; "I live
    in Berlin now, not in Lyon any more" the same)."""
    return _NEGATOR.search(_CLAUSE_BREAK.split(sentence[:at])[-1]) is not None


def _denied_words(sentence: str, words: Iterable[str]) -> frozenset[str]:
    """Of ``words`` (lower case: values or the words of names), those ``sentence`` denies (see ``_negated``);
    empty for a sentence without "no longer", "not ... any more" or ", not" ("it's Dr Moss, not Dr Hale")."""
    if not (_NEGATION.search(sentence) or _CONTRAST.search(sentence)):
        return frozenset()
    lower = sentence.lower()
    found = ((w, re.search(r"(?<!\w)" + re.escape(w) + r"(?!\w)", lower)) for w in words)
    return frozenset(w for w, m in found if m is not None and _negated(sentence, m.start()))


# -- values ------------------------------------------------------------------------

_STOP_VALUE = re.compile(
    r"\s+(?:with|for|since|because|and|but|so|after|before|when|while|last|this|next|about|from|near|"
    r"now|anymore|any more|too|as well|again|yet|already|though|although|where|which|who|that|on|at|in|as|"
    r"by|until|to)\b.*$", re.IGNORECASE)
_ARTICLE = re.compile(r"^(?:the|a|an|my|our|his|her|their|some|new|a new|another)\s+", re.IGNORECASE)
_PUNCT_END = re.compile(r"[\s,.;:!?\"')\]]+$")
_WORD = re.compile(r"[a-z0-9][a-z0-9'&.-]*")
_VALUE_STOP = {"the", "a", "an", "of", "my", "our", "new", "city", "town", "place", "company", "job"}


def _value(text: str) -> str:
    """The value phrase at the start of ``text``, cut at the first clause word, without articles."""
    text = text.strip().strip("\"'")
    text = re.split(r"[,.;:!?()\[\]\n]", text, maxsplit=1)[0]
    text = _STOP_VALUE.sub("", text)
    text = _ARTICLE.sub("", text.strip())
    return _PUNCT_END.sub("", text).strip().lower()


def _value_words(value: str) -> frozenset[str]:
    return frozenset(w.strip(".'") for w in _WORD.findall(value.lower()) if w not in _VALUE_STOP)


def _valuelike(raw: str) -> bool:
    """A value worth comparing: a name (capitalised), a number, or a state word; not an adjective like
    "amazing" (``my mom is amazing`` and ``my mom is sick`` are both true)."""
    raw = raw.strip()
    return bool(raw) and (raw[0].isupper() or raw[0].isdigit() or raw[0] in "$€£#")


# -- slots ----------------------------------------------------------------------------

_AT = r"(?<![\w'])"  # patterns start at their verb; the subject is read from the words before it
_ADV = r"(?:(?:now|currently|just|recently|finally|actually|still|officially|already|then|also|all|both)\s+)*"
_STATES = (r"resolved|fixed|blocked|done|finished|completed|complete|closed|open|reopened|cancelled|canceled|"
           r"in progress|on hold|pending|postponed|approved|rejected|merged|shipped|deployed|live|broken|paused|"
           r"stalled|delayed|on track|abandoned|solved|unresolved|unblocked|shelved|descoped|submitted|in review|"
           r"in qa|under review|waiting for review|through|scrapped|dropped|sorted|accepted|denied|declined")
_DATE = (r"(?:(?:mon|tues|wednes|thurs|fri|satur|sun)day|tomorrow|tonight|noon|midnight|"
         r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?\s+\d{1,2}(?:st|nd|rd|th)?|"
         r"\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*|"
         r"\d{4}-\d\d-\d\d|\d{1,2}/\d{1,2}(?:/\d{2,4})?|\d{1,2}(?::\d\d)?\s*(?:am|pm)|\d{1,2}:\d\d|"
         r"next (?:week|month|year|monday|tuesday|wednesday|thursday|friday|saturday|sunday))")
_DATE_RE = re.compile(_DATE, re.IGNORECASE)
_DAY_OF = re.compile(r"(?<![\d:/-])(\d{1,2})(?:st|nd|rd|th)?(?![\d:/])(?!\s*(?:am|pm))", re.IGNORECASE)
_ORDINAL_DAY = re.compile(r"\bthe\s+(\d{1,2})(?:st|nd|rd|th)\b", re.IGNORECASE)
DATE_PATTERN = _DATE
_DATE_HINT = re.compile(r"\d|day\b|tomorrow|tonight|noon|midnight|next|jan|feb|mar|apr|may|jun|jul|aug|sep|oct|"
                        r"nov|dec", re.IGNORECASE)
_EVENTS = (r"meeting|appointment|deadline|flight|wedding|party|trip|launch|release|interview|exam|dinner|call|"
           r"demo|review|standup|stand-up|presentation|surgery|concert|match|game|class|lesson|session|"
           r"ceremony|reunion|vacation|holiday|move|visit|sync|retro|kickoff|kick-off|due date|go-live|cutover")
_FUNCTIONAL = (r"boss|manager|doctor|dentist|therapist|landlord|address|email|e-mail|phone number|number|"
               r"username|team|team lead|lead|coach|teacher|mentor|partner|husband|wife|boyfriend|girlfriend|"
               r"fianc[eé]e?|car|phone|laptop|bank|gym|school|university|college|major|office|editor|ide|"
               r"stack|database|language|os|provider|plan|name|nickname|title|role|rank|salary|rent|budget|"
               r"price|rate|score|weight|height|goal|target|status|owner|assignee|host|venue|location|"
               r"hometown|neighbou?rhood|city|country|employer|company|job|position|pet|dog|cat")

# What people work as: "I'm a staff engineer" is a role ("I'm a big fan" is not).
_OCCUPATIONS = (r"engineer|developer|programmer|designer|manager|analyst|consultant|teacher|nurse|doctor|lawyer|"
                r"student|scientist|researcher|writer|architect|accountant|lead|director|officer|specialist|"
                r"intern|assistant|coordinator|administrator|technician|founder|freelancer|chef|editor|"
                r"marketer|recruiter|librarian|pharmacist|therapist|pilot|mechanic|electrician|plumber|"
                r"carpenter|photographer|journalist|professor|lecturer|tutor|coach|trainer|cashier|clerk|"
                r"receptionist|secretary|supervisor|executive|ceo|cto|cfo|president|associate|paralegal|barista|"
                r"waiter|waitress|bartender|baker|farmer|firefighter|strategist|owner|representative|advisor|"
                r"adviser|operator|producer|planner|agent|investor|economist|statistician|surgeon|dentist|"
                r"veterinarian|physiotherapist|psychologist|counselor|counsellor|social worker")

# (slot, pattern, tense): "present" facts say what holds; "change" facts say what holds from now on;
# "past" facts say what held once (not a current value, never an update).
_PATTERNS: list[tuple[str, re.Pattern[str], str]] = [
    ("residence", re.compile(_AT + r"(?:live|lives|living|reside|resides|residing|am based|are based|"
                             r"is based|'m based|'re based|'s based)\s+(?:in|at|near)\s+(?P<v>[^.;!?\n]+)",
                             re.IGNORECASE), "present"),
    ("residence", re.compile(_AT + r"(?:have |has |had )?(?:moved|relocated|relocating|moving)\s+"
                             r"(?:back\s+)?(?:in|to|into)\s+(?P<v>[^.;!?\n]+)", re.IGNORECASE), "change"),
    ("residence", re.compile(_AT + r"(?:lived|resided)\s+(?:in|at|near)\s+(?P<v>[^.;!?\n]+)",
                             re.IGNORECASE), "past"),
    ("residence", re.compile(r"(?P<subj>\b(?:my|our|his|her|their|\w+'s))\s+(?:home|house|flat|apartment|place)\s+"
                             r"is\s+" + _ADV + r"(?:in|at)\s+(?P<v>[^.;!?\n]+)", re.IGNORECASE), "present"),
    ("employer", re.compile(_AT + r"(?:work|works|working|am employed|are employed|is employed|"
                            r"'m employed)\s+(?:at|for)\s+(?P<v>[^.;!?\n]+)", re.IGNORECASE), "present"),
    ("employer", re.compile(_AT + r"(?:joined|started at|started working (?:at|for)|got a job (?:at|with)|"
                            r"took a job (?:at|with)|have joined|has joined|was hired by|got hired (?:at|by)|"
                            r"switched to|moved to)\s+(?P<v>[^.;!?\n]+)", re.IGNORECASE), "change"),
    ("employer", re.compile(_AT + r"(?:worked|was employed)\s+(?:at|for)\s+(?P<v>[^.;!?\n]+)",
                            re.IGNORECASE), "past"),
    ("employer", re.compile(_AT + r"(?:quit|left|have left|has left|resigned from|was fired from|"
                            r"got fired from|got laid off from|was laid off from)\s+(?:my job at\s+|(?:my|his|her|"
                            r"their) job at\s+)?(?P<v>[^.;!?\n]+)", re.IGNORECASE), "deny"),
    ("role", re.compile(_AT + r"(?:work|works|working|am working|is working|'m working)\s+as\s+"
                        r"(?:an?\s+)?(?P<v>[^.;!?\n]+)", re.IGNORECASE), "present"),
    ("role", re.compile(_AT + r"(?:got promoted to|was promoted to|been promoted to|promoted to)\s+"
                        r"(?:an?\s+|the\s+)?(?P<v>[^.;!?\n]+)", re.IGNORECASE), "change"),
    ("role", re.compile(_AT + r"(?:became|have become|has become)\s+(?:an?|the)\s+(?P<v>[^.;!?\n]+)",
                        re.IGNORECASE), "change"),
    ("role", re.compile(r"(?P<subj>\b(?:my|our|his|her|their|\w+'s))\s+(?:job title|title|role|position)\s+is\s+"
                        + _ADV + r"(?:an?\s+)?(?P<v>[^.;!?\n]+)", re.IGNORECASE), "present"),
    ("role", re.compile(_AT + r"(?:am|are|is)\s+(?:not\s+)?" + _ADV + r"(?:an?\s+)(?P<v>(?:[\w-]+\s+){0,2}?(?:"
                        + _OCCUPATIONS + r"))\b", re.IGNORECASE), "present"),
    ("relationship", re.compile(_AT + r"(?:am|is|are|'m|'re|'s|got|have been|has been)\s+(?:not\s+)?" + _ADV +
                                r"(?P<v>married|engaged|single|divorced|separated|widowed|dating someone|"
                                r"in a relationship)\b", re.IGNORECASE), "present"),
    ("relationship", re.compile(_AT + r"(?P<v>broke up|split up|got divorced|got married|got engaged)\b",
                                re.IGNORECASE), "change"),
    ("age", re.compile(_AT + r"(?:am|is|are|'m|'s|turned|just turned)\s+(?P<v>\d{1,3})"
                       r"(?:\s+years?\s+old)?(?=\s*(?:[.,;!?]|$|and\b|now\b|today\b|yesterday\b|this\b|last\b|on\b|in\b))", re.IGNORECASE),
     "present"),
]
_FAVOURITE = re.compile(
    r"(?P<subj>\b(?:my|our|his|her|their|[A-Z][\w]+'s))\s+(?:all-time\s+|absolute\s+|new\s+)?(?:favou?rite|fave)\s+"
    r"(?P<attr>[a-z][\w -]{0,24}?)\s+(?P<verb>is|are|has become|became|was|used to be)\s+" + _ADV +
    r"(?P<v>[^.;!?\n]+)", re.IGNORECASE)
_STATUS = re.compile(
    r"(?:(?<![\w'])(?:is|are|was|has been|have been|got|just got|went|came)|'s been|'s)\s+"
    r"(?:now\s+|finally\s+|still\s+|currently\s+|officially\s+|fully\s+)*(?P<v>" + _STATES + r")\b", re.IGNORECASE)
# "Visa approved!", "We cancelled the Postgres migration": a state without "is", of the thing named before or after
_STATUS_BARE = re.compile(
    r"^\W*(?:the\s+|my\s+|our\s+)?(?P<thing>(?:[\w#-]+\s+){0,3}[\w#-]+)\s+(?:finally\s+|just\s+)?"
    r"(?P<v>approved|fixed|resolved|merged|shipped|closed|cancell?ed|rejected|accepted|unblocked|shelved|"
    r"scrapped|descoped|submitted|done|sorted|postponed|delayed)\s*(?:[!.,;]|$)", re.IGNORECASE)
_STATUS_DONE_TO = re.compile(
    r"\b(?:we|i|they)\s+(?:just\s+|finally\s+|officially\s+)?(?P<v>cancell?ed|shelved|scrapped|merged|shipped|"
    r"closed|fixed|resolved|postponed|abandoned|dropped|descoped)\s+(?:the\s+|our\s+|my\s+|that\s+)"
    r"(?P<thing>(?:[\w#-]+\s+){0,3}?[\w#-]+)(?=\s*(?:[,.;!]|$|\s+(?:and|but|so|because|since|after)\b))",
    re.IGNORECASE)
_SCHEDULE = re.compile(
    r"(?<![\w'-])(?P<ev>(?:" + _EVENTS + r")(?:\s+(?:with|for|of|at)\s+[\w'-]+(?:\s+[A-Z][\w'-]*)?)?)\s+"
    r"(?:(?:is|was|has been|got|will be|'s)\s+)?"
    r"(?:now\s+|been\s+)?(?P<verb>moved|rescheduled|postponed|pushed(?: back)?|changed|set|planned|scheduled|"
    r"booked|fixed)?\s*(?:to|for|on|at)\s+(?P<v>" + _DATE + r"(?:\s+at\s+\d{1,2}(?::\d\d)?\s*(?:am|pm)?)?)",
    re.IGNORECASE)
_COPULA = re.compile(
    r"(?P<subj>\b(?:my|our|his|her|their|the|[A-Z][\w]+'s))\s+(?:new\s+|current\s+)?(?P<attr>" + _FUNCTIONAL +
    r")\s+(?:is|are)\s+(?:now\s+|currently\s+|still\s+)?(?:called\s+|named\s+)?(?:an?\s+)?(?P<v>[^.;!?\n]+)",
    re.IGNORECASE)


# States that say the same: "done" after "finished" is no update.
_STATE_GROUPS = {
    **dict.fromkeys(("done", "finished", "completed", "complete", "closed", "resolved", "fixed", "solved",
                     "shipped", "merged", "deployed", "live", "through", "sorted", "approved", "accepted"), "done"),
    **dict.fromkeys(("blocked", "stalled", "paused", "on hold", "delayed", "broken"), "blocked"),
    **dict.fromkeys(("open", "reopened", "in progress", "pending", "on track", "unresolved", "unblocked",
                     "submitted", "in review", "in qa", "under review", "waiting for review"), "open"),
    **dict.fromkeys(("cancelled", "canceled", "abandoned", "rejected", "shelved", "descoped", "scrapped", "dropped",
                     "denied", "declined"), "cancelled"),
    "postponed": "postponed",
}


# Words without which a pattern cannot match: most sentences hold none and skip the patterns (a set
# intersection per sentence, where a search per pattern cost ten times more).
_TRIGGERS: dict[str, frozenset[str]] = {name: frozenset(words.split()) for name, words in {
    "residence": "live lives living lived reside resides residing resided based move moved moves moving relocate "
                 "relocated relocating home house flat apartment place",
    "employer": "work works working worked employed join joined joining start started starting job hired switch "
                "switched move moved quit left resigned resign fired laid",
    "role": "work works working promoted became become title role position " + " ".join(
        w for w in _OCCUPATIONS.split("|") if " " not in w),
    "relationship": "married engaged single divorced separated widowed dating relationship broke split",
    "favourite": "favourite favorite fave",
    "status": "resolved fixed blocked done finished completed complete closed open reopened cancelled canceled "
              "progress hold pending postponed approved rejected merged shipped deployed live broken paused "
              "stalled delayed track abandoned solved unresolved unblocked shelved descoped submitted review qa "
              "through scrapped dropped sorted accepted denied declined",
    "schedule": "meeting appointment deadline flight wedding party trip launch release interview exam dinner call "
                "demo review standup stand presentation surgery concert match game class lesson session ceremony "
                "reunion vacation holiday move visit sync retro kickoff kick due cutover",
    "copula": "boss manager doctor dentist therapist landlord address email mail phone number username team lead "
              "coach teacher mentor partner husband wife boyfriend girlfriend fiance fiancee fiancé fiancée car "
              "laptop bank gym school university college major office editor ide stack database language os "
              "provider plan name nickname title role rank salary rent budget price rate score weight height goal "
              "target status owner assignee host venue location hometown neighbourhood neighborhood city country "
              "employer company job position pet dog cat",
}.items()}
_TOKEN = re.compile(r"[^\W\d_]+|\d+")


def _triggered(sentence: str) -> set[str]:
    """The slots whose patterns may match ``sentence``."""
    tokens = set(_TOKEN.findall(sentence.lower()))
    found = {name for name, words in _TRIGGERS.items() if not words.isdisjoint(tokens)}
    if any(t.isdigit() for t in tokens):
        found.add("age")
    return found


@dataclass(frozen=True)
class Fact:
    """One attribute of one subject with one value, read from a sentence."""

    subject: str  # a speaker or name, lower case; "self" without a speaker; "?" when unclear
    slot: str  # "residence", "employer", ..., "favourite:food", "status:<thing>", "attr:<name>"
    value: str
    tense: str  # "present", "change", "past", "deny"
    hedged: bool
    correction: bool
    change: bool
    sentence: str

    @property
    def words(self) -> frozenset[str]:
        return _value_words(self.value)


@dataclass(frozen=True)
class Statement:
    """What the judge needs of a memory: its text, who speaks, when it holds, and whether it is long."""

    node_id: str
    text: str
    speaker: str | None
    valid_at: datetime | None
    created_at: datetime | None

    @property
    def long(self) -> bool:
        return len(self.text.split()) > LONG_STATEMENT_WORDS


@dataclass(frozen=True)
class UpdateJudgement:
    """A judged pair: ``newer`` replaces ``older`` (``update``), may (``possible``), or not (``none``)."""

    older: str
    newer: str
    verdict: Verdict
    reason: Literal["reality_changed", "discovered_false"] = "reality_changed"
    confidence: float = 0.0
    why: str = ""


# -- reading facts --------------------------------------------------------------------

_CONTRACTIONS = [
    (re.compile(r"\b(can)'t\b", re.IGNORECASE), r"\1 not"),
    (re.compile(r"\b(won)'t\b", re.IGNORECASE), "will not"),
    (re.compile(r"n't\b", re.IGNORECASE), " not"),
    (re.compile(r"'m\b", re.IGNORECASE), " am"),
    (re.compile(r"'re\b", re.IGNORECASE), " are"),
    (re.compile(r"'ve\b", re.IGNORECASE), " have"),
    (re.compile(r"\b(he|she|it|that|there|what|who|this)'s\b", re.IGNORECASE), r"\1 is"),
]


def _expand(sentence: str) -> str:
    """Contractions spelt out, so that one pattern reads "I'm", "I am" and "im" alike."""
    sentence = sentence.replace("\u2019", "'")
    if "'" in sentence:  # most sentences have none: no substitution to try
        for pattern, repl in _CONTRACTIONS:
            sentence = pattern.sub(repl, sentence)
    return _IM.sub("I am", sentence) if "m" in sentence else sentence


_IM = re.compile(r"\b[Ii]m\b")


_SPEAKER_PREFIX = re.compile(r"^\s*([^\W\d_][\w .'-]{0,40}?):\s+")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_ROLES = frozenset("user assistant system human ai bot model".split())
# Capitalised words before a colon that head a message, not name who says it ("Update: ...", "Note: ...").
_NOT_LABEL_WORDS = frozenset("""
note notes nb ps update updates edit info information summary tldr answer question example output input result
results step steps todo tip tips hint important reminder warning error caution fyi re subject title description
reason source context goal status problem solution fix issue response code comment here moved done ok okay
please key main bottom line action items conclusion overview background details option options pros cons date time
""".split()) | _FIRST_PERSON | _PRONOUNS | _NOT_NAMES
_NOT_NAME_WORD = re.compile(r"\d|'(?:s|re|ve|ll|d|m|t)$|\w\w(?:tion|sion|ness)$|\w{4}ment$", re.IGNORECASE)


def _label(prefix: str) -> bool:
    """Whether the words before a message's first colon name who speaks: a role ("user", "assistant") or one
    to three capitalised words that are not a heading or the start of a sentence.  Chat messages are full of
    colons ("We moved: I live in Berlin now", "Information Update: ...", "Here's my code:"); a heading read as
    a speaker would make the message someone else's, and never an update of what its speaker said before."""
    words = prefix.split()
    if len(words) == 1 and words[0].lower() in _ROLES:
        return True
    return 1 <= len(words) <= 3 and all(w[0].isupper() and w.lower() not in _NOT_LABEL_WORDS
                                        and not _NOT_NAME_WORD.search(w) for w in words)


def speaker_of(text: str, extra: Mapping[str, Any] | None = None) -> tuple[str | None, str]:
    """Who says ``text`` (``extra["speaker"]``, else a ``"Name: "`` prefix, see ``_label``) and the text
    without the prefix (with ``extra["speaker"]``, only a prefix that names that speaker is taken off: any
    other is part of what is said)."""
    speaker = (extra or {}).get("speaker")
    match = _SPEAKER_PREFIX.match(text)
    if match:
        prefix = match.group(1).strip()
        if (prefix.lower() == str(speaker).strip().lower()) if speaker else _label(prefix):
            speaker = speaker or prefix
            text = text[match.end():]
    return (str(speaker).strip().lower() or None) if speaker else None, text


def statement_of(memory: Any) -> Statement:
    """A memory (``MemoryNode`` or alike) as the judge reads it: its description, else its name."""
    text = (getattr(memory, "description", "") or "").strip() or (getattr(memory, "name", "") or "")
    speaker, text = speaker_of(text, getattr(memory, "extra", None))
    return Statement(memory.node_id, text, speaker, getattr(memory, "valid_at", None),
                     getattr(memory, "created_at", None))


_AUX = {"do", "does", "did", "not", "no", "never", "longer", "still", "also", "have", "has", "had", "am", "is",
        "are", "was", "were", "can", "will", "would", "really", "both", "all", "now", "currently", "just",
        "recently", "finally", "actually", "officially", "already", "then"}
AND = "&"


def _subject(raw: str, speaker: str | None) -> str:
    """Who a pattern's subject words name: the speaker for I/we, a name, ``?``, or ``&`` for a verb joined
    by "and" to the one before (same subject)."""
    raw_words = raw.strip().split()
    while raw_words and raw_words[-1].lower() in _AUX:
        raw_words.pop()
    raw = " ".join(raw_words)
    words = raw.lower().split()
    if not words:
        return AMBIGUOUS
    if words[-1] in ("and", "but", "then"):
        return AND
    last = words[-1]
    me = speaker or SELF
    if last in _FIRST_PERSON or _FAMILY_SELF.match(" ".join(words[-3:])) or _FAMILY_SELF.match(" ".join(words[-2:])):
        return me
    if len(words) >= 2 and words[-2] in ("my", "our"):
        return f"{me}'s {last}"  # my sister: another person than me
    if words[0] in ("my", "our") and len(words) == 1:
        return me
    if last in ("my", "our"):
        return me
    if last.endswith("'s") and last[:-2] not in _PRONOUNS:
        name = last[:-2]
        return me if name in _FIRST_PERSON else name
    if last in ("his", "her", "their"):
        return AMBIGUOUS
    if last in _PRONOUNS or last in _NOT_NAMES:
        return AMBIGUOUS
    original = raw.strip().split()[-1]
    if original[:1].isupper():
        return last.strip("'")
    return AMBIGUOUS


def _before(sentence: str, start: int) -> str:
    """The last words before ``start`` in its clause: where a verb's subject is."""
    clause = re.split(r"[,;:(]|\bbut\b|\bso\b|\bbecause\b", sentence[max(0, start - 80):start])[-1]
    return " ".join(re.findall(r"[\w']+", clause)[-4:])


def _thing(raw: str, speaker: str | None) -> str:
    """The subject of a status or schedule: the words naming the thing, "my"/"our" read as the speaker's."""
    words = [w for w in re.findall(r"[\w#'-]+", raw.lower()) if w not in ("the", "a", "an", "this", "that")]
    me = speaker or SELF
    words = [f"{me}'s" if w in ("my", "our") else w for w in words]
    while words and words[-1] in _AUX | {"be", "been", "being", "got", "get", "gets"}:
        words.pop()
    return " ".join(words[-4:])


def _specific(raw: str) -> bool:
    """A thing named precisely enough that two statements about it are about the same one: a capital
    (not the first word), a number or a ticket sign."""
    words = raw.split()
    return any(ch.isdigit() or ch == "#" for ch in raw) or any(w[:1].isupper() for w in words[1:])


def extract_facts(text: str, speaker: str | None = None) -> list[Fact]:
    """The single-valued facts ``text`` states (see the module doc); one per pattern and sentence."""
    return list(_facts(text, speaker))


@lru_cache(maxsize=8192)
def _facts(text: str, speaker: str | None) -> tuple[Fact, ...]:
    """``extract_facts``, cached: a memory is compared with many others."""
    out: list[Fact] = []
    for sentence in _SENTENCE.split(text, maxsplit=MAX_SENTENCES)[:MAX_SENTENCES]:
        if len(sentence) > MAX_SENTENCE_CHARS:
            continue  # no statement of one fact is that long (a log line, a pasted blob): not read
        present = _triggered(sentence)
        if not present:
            continue
        sentence = _expand(sentence.strip())
        last_subject = [AMBIGUOUS]
        cues: list[bool] = []  # hedged, past, reported, correction, change, negated: read at the first fact

        def cue(i: int, sentence: str = sentence) -> bool:
            if not cues:
                cues.extend(bool(p.search(sentence)) for p in (_HEDGE, _PAST, _REPORTED, _CORRECTION, _CHANGE,
                                                                _NEGATION))
            return cues[i]

        def add(subject: str, slot: str, m: re.Match[str], tense: str) -> None:
            if subject == AND:
                subject = last_subject[0]
            last_subject[0] = subject
            value = _value(m.group("v"))
            if slot == "status":
                value = _STATE_GROUPS.get(value, value)
            if not value or len(value) > 60:
                return
            if cue(2) and subject not in (speaker or SELF,):
                subject = AMBIGUOUS
            if cue(1) and tense != "deny":
                tense = "past"
            if cue(5) and tense in ("present", "change") and _negated(sentence, m.start("v")):
                tense = "deny"  # what the denial is about, not the new value beside it ("X now, no longer Y")
            out.append(Fact(subject, slot, value, tense, cue(0), cue(3), cue(4) or tense == "change", sentence))

        for slot, pattern, tense in _PATTERNS:
            if slot not in present:
                continue
            for m in pattern.finditer(sentence):
                raw_subject = m.groupdict().get("subj") or _before(sentence, m.start())
                if slot in ("residence", "employer") and tense != "deny" and (
                        not _valuelike(m.group("v")) or _DATE_RE.match(m.group("v"))):
                    continue  # "I work at home", "we moved into a bigger place", "moved to Friday"
                if slot == "employer" and tense == "change" and "moved to" in m.group(0).lower():
                    continue  # "moved to" is a residence unless a company is named another way
                add(_subject(raw_subject, speaker), slot, m, tense)
        for m in _FAVOURITE.finditer(sentence) if "favourite" in present else ():
            tense = "past" if m.group("verb").lower() in ("was", "used to be") else "present"
            subj = _subject(m.group("subj"), speaker)
            add(subj, "favourite:" + m.group("attr").strip().lower(), m, tense)
        for m in _STATUS.finditer(sentence) if "status" in present else ():
            raw = _before(sentence, m.start())
            thing = _thing(raw, speaker)
            if not thing or thing.split()[-1] in _FIRST_PERSON | _PRONOUNS | _NOT_NAMES:
                continue
            add(thing, "status", m, "change" if cue(4) else "present")
        if "status" in present and not any(f.slot == "status" and f.sentence == sentence for f in out):
            for m in (_STATUS_BARE.match(sentence), _STATUS_DONE_TO.search(sentence)):
                thing = _thing(m.group("thing"), speaker) if m else ""
                if thing and thing.split()[-1] not in _FIRST_PERSON | _PRONOUNS | _NOT_NAMES | _STATE_WORDS:
                    add(thing, "status", m, "change")
        for m in _SCHEDULE.finditer(sentence) if "schedule" in present else ():
            raw = " ".join((_before(sentence, m.start()).split() + [""])[-2:]).strip() + " " + m.group("ev")
            moved = (m.group("verb") or "").lower() in ("moved", "rescheduled", "postponed", "pushed", "pushed back",
                                                        "changed")
            if not (_specific(raw) or moved or cue(4)):
                continue  # "the party is on Friday", months after another party
            add(_thing(raw, speaker), "schedule", m, "change" if moved else "present")
        for m in _COPULA.finditer(sentence) if "copula" in present else ():
            if not _valuelike(m.group("v")):
                continue
            subj = _subject(m.group("subj"), speaker) if m.group("subj").lower() != "the" else "the"
            add(subj, "attr:" + m.group("attr").lower(), m, "present")
    return tuple(out)


# -- judging --------------------------------------------------------------------------


def order_pair(a: Statement, b: Statement) -> tuple[Statement, Statement] | None:
    """(earlier, later) by when each holds (``valid_at``, then ``created_at``), not by arrival; None when
    both hold from the same instant."""
    def key(s: Statement) -> tuple[Any, Any]:
        return (s.valid_at, s.created_at)

    try:
        if key(a) == key(b):
            return None
        return (a, b) if key(a) < key(b) else (b, a)
    except TypeError:  # a time missing on one side
        return None


_THING_STOP = frozenset("the a an for of to on in at with from and".split())


def _same_thing(a: str, b: str) -> bool:
    """Two names of one thing whose state is told ("the website project for the bakery", "website project";
    "ticket JIRA-4821", "4821"): a word in common, and the same number when both have one."""
    if AMBIGUOUS in (a, b):
        return False
    if a == b:
        return True
    ta = {w for w in _TOKEN.findall(a) if w not in _THING_STOP and not w.endswith("'s")}
    tb = {w for w in _TOKEN.findall(b) if w not in _THING_STOP and not w.endswith("'s")}
    da, db = {w for w in ta if w.isdigit()}, {w for w in tb if w.isdigit()}
    if da and db:
        return bool(da & db)
    shared = [w for w in ta & tb if len(w) >= 4]
    return any(not _differ(_word_before(a, w), _word_before(b, w)) for w in shared)  # not the logout ticket


def _word_before(phrase: str, word: str) -> str | None:
    words = phrase.split()
    i = words.index(word) if word in words else 0
    return words[i - 1] if i > 0 and words[i - 1] not in _NOT_MODIFIERS | _THING_STOP else None


def _same_subject(a: str, b: str) -> bool:
    """Both name the same subject, and it is clear who."""
    return AMBIGUOUS not in (a, b) and a == b


def judge_update(older: Statement, newer: Statement, older_facts: Sequence[Fact] | None = None,
                 newer_facts: Sequence[Fact] | None = None) -> UpdateJudgement:
    """Whether ``newer`` (later in time) replaces ``older``: the strongest of its facts' verdicts.

    ``update`` (confidence >= ``CONFIRM_AT``): same subject and attribute, another value, or the old value
    denied; ``possible``: the same with a long older memory, or at the same instant; ``none`` otherwise.
    """
    fo = list(older_facts) if older_facts is not None else extract_facts(older.text, older.speaker)
    fn = list(newer_facts) if newer_facts is not None else extract_facts(newer.text, newer.speaker)
    best = _judge_facts(older, newer, fo, fn)
    if best.verdict == "none":
        for rule in (judge_frames, judge_named):
            judged = rule(older, newer)
            if judged.verdict != "none":
                return judged
    return best


def _judge_facts(older: Statement, newer: Statement, fo: Sequence[Fact], fn: Sequence[Fact]) -> UpdateJudgement:
    best = UpdateJudgement(older.node_id, newer.node_id, "none", why="no fact of the later memory changes one "
                                                                      "of the earlier")
    if not fo or not fn:
        return best
    simultaneous = order_pair(older, newer) is None
    for n in fn:
        if n.hedged or n.tense == "past":
            continue
        for o in fo:
            if o.hedged or o.tense in ("past", "deny") or o.slot != n.slot:
                continue
            if not (_same_thing(o.subject, n.subject) if o.slot == "status" else _same_subject(o.subject, n.subject)):
                continue  # two people, or one the judge cannot name ("she lives in Rome"): never an update
            if n.tense == "deny":
                if not o.words & n.words:
                    continue
                confidence, what = 0.85, f"{n.subject} no longer {n.slot} {o.value!r}"
            else:
                if not o.words or not n.words or o.words <= n.words or n.words <= o.words:
                    continue  # the same value again, told more or less precisely ("Berlin", "Berlin, Germany")
                confidence = 0.75 + (0.1 if n.change or n.correction else 0.0)
                what = f"{n.subject}'s {n.slot}: {o.value!r} -> {n.value!r}"
            reasons = []
            if older.long:
                confidence = min(confidence, 0.5)
                reasons.append("the earlier memory says more")
            if simultaneous and not (n.change or n.correction):
                confidence = min(confidence, 0.5)
                reasons.append("same time")
            if confidence <= best.confidence:
                continue
            reason = "discovered_false" if n.correction and not _CHANGE_VERB.search(n.sentence) else "reality_changed"
            why = what + (f" ({', '.join(reasons)})" if reasons else "")
            best = UpdateJudgement(older.node_id, newer.node_id, "update" if confidence >= CONFIRM_AT else "possible",
                                   reason, round(confidence, 3), why)
    return best


# -- the frame rule: one thing, a new value, and a word that says so --------------------------------------
#
# Patterns read a fact only in the words they know.  The frame rule reads the rest: a sentence of the later
# memory names the same *thing* as the earlier one (a role such as "my dentist", an object such as "my
# phone", an event such as "the vet appointment", a ticket number, "my favourite podcast"), gives it a value
# the earlier one did not have (a name, a date, a state) and says that something changed or was wrong
# ("took over", "got a new", "moved", "turns out", "mixed up"); or it names the earlier value and denies it
# ("don't have X any more", "is off").  Without such a word two values of one thing may both hold (two
# appointments), so nothing is decided.

_ANCHORS = frozenset("""
dentist doctor gp therapist landlord landlady accountant coach teacher mentor boss manager supervisor lawyer
physio physiotherapist trainer tutor advisor adviser hairdresser barber vet mechanic nanny babysitter roommate
flatmate housemate partner husband wife boyfriend girlfriend fiance fiancee spouse
car phone laptop bike tablet smartwatch console camera headphones computer
home address flat apartment house hometown neighbourhood neighborhood
employer job company title role position salary rent budget price team department office workplace
school university college major degree city town country address email username bank insurance provider
subscription gym club
deadline appointment meeting flight wedding interview exam review session class lesson service planning
checkup check-up surgery standup sync retro demo launch release reservation booking deadline due
party concert test dinner ceremony gig festival recital hearing audition reunion celebration birthday
""".split())
_EVENT_ANCHORS = frozenset("""
deadline appointment meeting flight wedding interview exam review session class lesson service planning
checkup check-up surgery standup sync retro demo launch release reservation booking due
party concert test dinner ceremony gig festival recital hearing audition reunion celebration birthday
""".split())
# Words that name one thing in different ways: two sentences whose things fall in no common group are about
# different things.
_ANCHOR_GROUPS = {a: group for group, words in {
    "job": "employer job company workplace office team department",
    "role": "title role position",
    "home": "home address flat apartment house city town neighbourhood neighborhood",
    "partner": "partner husband wife boyfriend girlfriend fiance fiancee spouse",
    "doctor": "doctor gp",
    "landlord": "landlord landlady",
    "physio": "physio physiotherapist",
    "advisor": "advisor adviser",
    "roommate": "roommate flatmate housemate",
    "checkup": "checkup check-up",
}.items() for a in words.split()}
_NOT_MODIFIERS = frozenset("""
the a an my our your his her their its this that these those next new first last same upcoming big usual
weekly monthly annual yearly daily planned scheduled whole entire one another other own
""".split()) | frozenset(w.lower() for w in _DATE.split("|") if w.isalpha())


def _groups(anchors: frozenset[str]) -> set[str]:
    return {_ANCHOR_GROUPS.get(a, a) for a in anchors}


def _differ(a: str | None, b: str | None) -> bool:
    return a is not None and b is not None and a != b


_PERSON_WORDS = frozenset("""
sister brother mom mum mother dad father son daughter friend friends colleague colleagues cousin aunt uncle
grandma grandpa grandmother grandfather neighbour neighbor kid kids child children parents niece nephew
""".split())
_ID = re.compile(r"#\s?\d+")
_FAVOURITE_NOUN = re.compile(r"\b(?:favou?rite|fave)\s+([a-z][a-z-]+(?:\s+game)?)", re.IGNORECASE)
_NAME = re.compile(r"(?<![\w'])([A-Z][\w'&.-]*(?:\s+(?:[A-Z][\w'&.-]*|\d[\w.-]*|"
                   r"(?:of|de|la|van|von|da)(?=\s+[A-Z])))*)")  # a particle only inside a name ("Long day")
_CHANGE = re.compile(
    r"\b(?:now|nowadays|moved|moving|relocated|switched|swapped|changed|became|become|started|starting|new|"
    r"took over|taken over|taking over|went from|replaced|replacing|died|sold|got rid of|gave up|stopped|"
    r"instead|gone off|no longer|any ?more|no more|since|these days|from now on|going forward|rescheduled|"
    r"postponed|pushed|brought forward|is off|are off|cancell?ed|called off|upgraded|traded|handed over|"
    r"left|quit|ended|over now|finally|just|recently|joined|promoted|got married|got engaged|broke up|"
    r"divorced|turned|transferred|retired|graduated|ended up|went back|decided|changed my mind|"
    r"got a new|bought|hired|fired|laid off|settled)\b", re.IGNORECASE)
_CORRECTION = re.compile(
    r"\b(?:turns out|turned out|actually|in fact|mistake|mistaken|my bad|mixed up|mix up|mixed them up|"
    r"misspoke|misremembered|misread|typo|wrong|correction|correct that|scratch that|someone else|by mistake|"
    r"i meant|meant to say|should have said|confused|never (?:was|were|lived|worked)|not .{1,40}, |"
    r"not .{1,40} but|rather|sorry|stand corrected|got (?:that|it) wrong|not true|to correct|"
    r"let me correct|misheard)\b", re.IGNORECASE)
_FRAME_DENY = re.compile(
    r"\b(?:no longer|not .{0,40}any ?more|any ?more|no more|is off|are off|not happening|cancell?ed|called off|"
    r"died|sold|got rid of|gave up|stopped|gone off|in a drawer|is gone|are gone|isn't|is not|was never|"
    r"never was|left|quit|ended|over)\b", re.IGNORECASE)
_COMMON_START = frozenset("""
i my we our the a an so and but or sorry turns turned actually right got correction yes no oh well hey
just now then also still finally since this that these those it its there here what when where how
after before today yesterday tomorrow last next home for from in on at with to as mine
""".split())


class _Clause:
    """A sentence as the frame rule reads it; what only some pairs need is read when first asked."""

    __slots__ = ("anchors", "values", "sentence", "initial", "_tokens", "__dict__")

    def __init__(self, anchors: frozenset[str], values: frozenset[str], sentence: str,
                 initial: frozenset[str], tokens: set[str]) -> None:
        self.anchors, self.values, self.sentence, self.initial = anchors, values, sentence, initial
        self._tokens = tokens

    @cached_property
    def own(self) -> bool:
        """Not hedged, past, reported, nor about a relative or a friend."""
        s = self.sentence
        return not (_HEDGE.search(s) or _PAST.search(s) or _REPORTED.search(s)
                    or not self._tokens.isdisjoint(_PERSON_WORDS) or _OTHERS.search(s)
                    or (_OTHER_SUBJECT.search(s) and not (_NAMES_MY.match(s) or _WITH_ME.match(s))))

    @cached_property
    def named(self) -> str | None:
        """"Emil is based in Zurich": the name the sentence is about (not with "my": "Julia is my coach")."""
        m = _NAMED_SUBJECT.match(self.sentence)
        name = m.group(1).lower() if m and not _MINE.search(self.sentence) else None
        return None if name in _COMMON_START else name

    @cached_property
    def content(self) -> frozenset[str]:
        """The sentence's own words, roughly stemmed: not its values, short words or words of change or time."""
        named = {_stem(w) for v in self.values | self.initial for w in _TOKEN.findall(v)}
        return frozenset(_stem(w) for w in self._tokens
                         if len(w) >= 4 and w not in _CUE_WORDS and w not in _TIME_WORDS) - named

    @cached_property
    def denied(self) -> frozenset[str]:
        """The values the sentence denies ("google" in "I work at Microsoft now, no longer at Google"): not
        new values, and the only ones it ends; empty for most sentences."""
        return _denied_words(self.sentence, (v for v in self.values if not v.startswith("state:")))

    @cached_property
    def first_person(self) -> bool:
        return bool(_MINE_OR_ME.search(self.sentence))

    @cached_property
    def change(self) -> bool:
        return bool(_CHANGE.search(self.sentence))

    @cached_property
    def correction(self) -> bool:
        return bool(_CORRECTION.search(self.sentence))

    def modifier(self, anchor: str) -> str | None:
        """The word that says which ``anchor`` this is ("dentist" in "the dentist appointment"), if any; not
        a name ("my Honda car" names the value, not another car)."""
        m = re.search(r"\b([A-Za-z][\w'-]*)\s+" + re.escape(anchor) + r"\b", self.sentence, re.IGNORECASE)
        if m is None or m.group(1).lower() in _NOT_MODIFIERS or (m.group(1)[:1].isupper() and m.start() > 0):
            return None
        return _stem(m.group(1).lower())

    def values_with(self, known: frozenset[str]) -> frozenset[str]:
        return self.values | (self.initial & known)

    def owned(self, known: frozenset[str]) -> bool:
        """The clause states what holds now for the speaker (a name the other side has as a value may
        start it: "Hopper isn't my favourite painter any more")."""
        return self.own and not (self.named and self.named not in known)


_SUFFIX = re.compile(r"(?:ing|ed|es|s)$")


def _stem(word: str) -> str:
    """A word without its commonest English endings ("moved", "moving", "moves" -> "mov"): enough to pair
    two statements by their own words."""
    return _SUFFIX.sub("", word) if len(word) > 4 else word


@lru_cache(maxsize=16384)
def _values(sentence: str, speaker: str | None) -> tuple[frozenset[str], frozenset[str]]:
    """Names, dates and states a sentence gives, lower case (the speaker's own name and the person spoken to
    do not count), and apart a single capitalised word that only starts the sentence ("Losing my job ..."
    says nothing; "Hopper isn't my favourite painter" does, when Hopper was)."""
    out: set[str] = set()
    initial: set[str] = set()
    for m in _NAME.finditer(sentence):
        words = m.group(1).split()
        at_start = not sentence[:m.start()].strip(" \"'([-*")
        while words and words[0].lower() in _COMMON_START:
            words.pop(0)
            at_start = False if not words else at_start
        if not words:
            continue
        if at_start and len(words) == 1:
            initial.add(words[0].strip(".'").lower())
            continue
        if _VOCATIVE.match(sentence[m.end():]) and (not sentence[:m.start()].strip() or _GREETING.search(
                sentence[:m.start()])):
            continue  # the person spoken to ("Thanks, Jon!")
        while words and words[-1] in ("I", "I'm", "I've", "I'd", "I'll"):
            words.pop()  # "on Sunday I went": the name ends before the speaker
        name = " ".join(words).strip(".'").lower()
        if name and name != (speaker or "") and not name.startswith("i'"):
            out.add(name)
    if _DATE_HINT.search(sentence):
        dates = [m.group(0).lower() for m in _DATE_RE.finditer(sentence)]
        out.update(dates)
        # "the 5th" is the day of "March 5th": a later "not the 5th, the 12th" names it
        out.update(f"day {int(d)}" for date in dates for d in _DAY_OF.findall(date))
        out.update(f"day {int(d)}" for d in _ORDINAL_DAY.findall(sentence))
    for state in _STATE_VALUE.findall(sentence):
        out.add("state:" + _STATE_GROUPS.get(state.lower(), state.lower()))
    return frozenset(out), frozenset(initial)




# Verbs that name the thing they are about: "we moved to Lyon" is about a home, "I drive a Kona" a car.
_IMPLIED = [
    (re.compile(r"\b(?:live|lives|living|moved|moving|relocated|relocating|settled|based)\s+(?:in|to|into|down in)\b",
                re.IGNORECASE), "home"),
    (re.compile(r"(?<!n't )(?<!not )\b(?:work|works|working|started|start|starting)\s+(?:at|for|with)\s+"
                r"(?!(?:it|them|him|her|me|us|you|this|that|everyone|anyone|either|both|all)\b)|"
                r"\b(?:employed|hired|joined|new job|quit|resigned)\b|\b(?:been|am|are)\s+at\s+(?=[A-Z])",
                re.IGNORECASE), "job"),
    (re.compile(r"\bdriv(?:e|es|ing)\s+(?:a|an|the|my|our)\b", re.IGNORECASE), "car"),
]
_VOCATIVE = re.compile(r"\s*(?:[,!?.]|$)")
_GREETING = re.compile(r"(?:^|[,.!?]\s*)(?:hey|hi|hello|thanks|thank you|sorry|congrats|congratulations|wow|yeah|"
                       r"yes|oh|so|great|cool|nice|good|dear|ok|okay)?[\s,]*$", re.IGNORECASE)


def _sentences(text: str) -> list[str]:
    """Sentences, a question joined to its answer ("My favourite film? Alien, easily.")."""
    parts = [p for p in _SENTENCE.split(text, maxsplit=MAX_SENTENCES)[:MAX_SENTENCES] if p.strip()]
    out: list[str] = []
    for part in parts:
        if out and out[-1].rstrip().endswith("?") and len(out[-1].split()) <= 6:
            out[-1] = out[-1].rstrip()[:-1] + ": " + part
        else:
            out.append(part)
    return out


def _clauses(text: str, speaker: str | None, anchored: bool = True) -> tuple[_Clause, ...]:
    """The sentences of ``text`` that name a thing the frame rule compares (see above); with ``anchored``
    False, also those that only say something changed (a later memory may name the earlier value instead
    of the thing).  Cached: a memory is compared with many others."""
    clauses = _all_clauses(text, speaker)
    return tuple(c for c in clauses if c.anchors) if anchored else clauses


@lru_cache(maxsize=8192)
def _all_clauses(text: str, speaker: str | None) -> tuple[_Clause, ...]:
    out = []
    for sentence in _sentences(text):
        if len(sentence) > MAX_SENTENCE_CHARS:
            continue
        tokens = set(_TOKEN.findall(sentence.lower()))
        anchors = set(tokens & _ANCHORS)
        if not tokens.isdisjoint(_IMPLYING):
            anchors.update(a for pattern, a in _IMPLIED if pattern.search(sentence))
        if "#" in sentence:
            anchors.update("id" + m.group(0).replace(" ", "") for m in _ID.finditer(sentence))
        if not tokens.isdisjoint(_FAVOURITE_WORDS):
            anchors.update("favourite " + m.group(1).lower() for m in _FAVOURITE_NOUN.finditer(sentence))
        if not anchors and tokens.isdisjoint(_CUE_WORDS):
            continue  # names nothing the rule compares, and says nothing changed
        if not (tokens.isdisjoint(_STATE_WORDS) and not any(ch.isdigit() for ch in sentence)
                and not any(ch.isupper() for ch in sentence[1:])):
            sentence = _expand(sentence)
            values, initial = _values(sentence, speaker)
            out.append(_clause(frozenset(anchors), values, initial, sentence, tokens))
        elif anchors:
            out.append(_clause(frozenset(anchors), frozenset(), frozenset(), sentence, tokens))  # kept for its thing
    merged = _whole_frame(text, speaker, out)
    return tuple(out) + ((merged,) if merged is not None else ())


FRAME_WORDS = 30
"""A memory this short is also read as one frame: "I got an interview at Vestas! It's on May 8th." names the
thing in one sentence and its value in the next."""


def _whole_frame(text: str, speaker: str | None, clauses: list[_Clause]) -> _Clause | None:
    """The frame of a short memory of several sentences: the things of its sentences with the values of all
    of them, when no sentence has both."""
    if len(text.split()) > FRAME_WORDS:
        return None
    sentences = [s for s in _sentences(text) if len(s) <= MAX_SENTENCE_CHARS]
    if len(sentences) < 2:
        return None
    anchors = frozenset().union(*(c.anchors for c in clauses))
    if not anchors:
        return None
    values: set[str] = set()
    initial: set[str] = set()
    for sentence in sentences:
        v, i = _values(_expand(sentence), speaker)
        values |= v
        initial |= i
    if not values:
        return None
    whole = _expand(" ".join(sentences))
    return _clause(anchors, frozenset(values), frozenset(initial), whole, set(_TOKEN.findall(whole.lower())))


def _clause(anchors: frozenset[str], values: frozenset[str], initial: frozenset[str], sentence: str,
            tokens: set[str]) -> _Clause:
    return _Clause(anchors, values, sentence, initial, tokens)


_MINE = re.compile(r"\b(?:my|our)\b", re.IGNORECASE)
_MINE_OR_ME = re.compile(r"\b(?:i|my|me|we|our|us|mine)\b", re.IGNORECASE)


_STATE_VALUE = re.compile(r"\b(?:is|are|was|were|be|been|being|got|now|still|from|to|as|marked)\s+(?:\w+\s+)?("
                          + _STATES + r")\b", re.IGNORECASE)
# A sentence about someone named: "Emil is based in Zurich now" (unless the name is the value in question).
_NAMED_SUBJECT = re.compile(r"^\W*([A-Z][a-z]+)(?:\s+[A-Z][a-z]+)?\s+(?:is|was|has|had|lives|works|moved|got|"
                            r"just|now|will|started|joined|left|and)\b")
_OTHERS = re.compile(r"\b(?!(?i:my|our|your|it|that|there|here|what|who|where|how|this|let)'s\b)[A-Z][a-z]+'s\b|"
                     r"\b(?:his|her|their)\b")

_TIME_WORDS = frozenset("""
last next week weeks weekend month months year years today yesterday tomorrow morning evening night days
ago soon later lately time times monday tuesday wednesday thursday friday saturday sunday
""".split())
_IMPLYING = frozenset("live lives living moved moving relocated relocating settled based work works working started "
                      "start starting employed hired joined new quit resigned been am are drive drives driving".split())
_FAVOURITE_WORDS = frozenset({"favourite", "favorite", "fave"})
_STATE_WORDS = frozenset(w for words in _STATES.split("|") for w in words.split())
_CUE_WORDS = frozenset("""
now nowadays moved moving relocated switched swapped changed became become started starting new took taken taking
went replaced replacing died sold rid gave stopped instead gone longer anymore any more since days forward
rescheduled postponed pushed brought off cancelled canceled called upgraded traded handed left quit ended over
transferred retired graduated decided mind bought hired fired laid settled stand true misheard
turns turned actually mistake mistaken bad mixed mix misspoke misremembered misread typo wrong correction correct
scratch someone meant should confused not rather sorry never drawer happening isn't
""".split())


@lru_cache(maxsize=8192)
def _earlier_frames(text: str, speaker: str | None) -> tuple[tuple[_Clause, ...], frozenset[str], frozenset[str]]:
    """What the frame rule reads of a memory as the earlier side of pairs: its clauses with values, their
    values and their things (cached: one memory is the earlier side of many pairs)."""
    clauses = tuple(c for c in _clauses(text, speaker) if c.values)
    return (clauses, frozenset().union(*(c.values for c in clauses)),
            frozenset().union(*(c.anchors for c in clauses)))


def judge_frames(older: Statement, newer: Statement) -> UpdateJudgement:
    """The frame rule (see above) on ``older`` -> ``newer``."""
    none = UpdateJudgement(older.node_id, newer.node_id, "none", why="no thing of the earlier memory changes")
    if (older.speaker or None) != (newer.speaker or None):
        return none
    old_clauses, known, things = _earlier_frames(older.text, older.speaker)
    new_clauses = _clauses(newer.text, newer.speaker, False)
    if not old_clauses or not new_clauses:
        return none
    if not any(c.anchors & things or c.values_with(known) & known for c in new_clauses):
        return none  # nothing in common: the usual case, decided without reading a cue
    old_clauses = [c for c in old_clauses if c.owned(frozenset())]
    for clause in new_clauses:
        if not clause.owned(known):
            continue
        sentence, values = clause.sentence, clause.values_with(known)
        change, correction, denied = clause.change, clause.correction, clause.denied
        for old in old_clauses:
            if clause.anchors and old.anchors and _groups(clause.anchors).isdisjoint(_groups(old.anchors)):
                continue  # two different things, even with a name in common (my accountant, my landlord)
            shared = clause.anchors & old.anchors
            if shared and all(_differ(clause.modifier(a), old.modifier(a)) for a in shared):
                continue  # the vet appointment is not the dentist appointment, the work laptop not my own
            kept = old.values & values
            if CONTENT_WORDS and not shared and clause.first_person and old.first_person:
                shared = frozenset("~" + w for w in clause.content & old.content)
            if not shared and not (kept and clause.first_person):
                continue  # neither the same thing nor the same value (of mine)
            ids = {a for a in clause.anchors | old.anchors if a.startswith("id#")}
            if ids and not ids <= shared:
                continue  # another ticket
            shared = shared or frozenset({"value"})
            new_values = values - old.values - denied  # "no longer at Google" gives no new value
            if new_values and (change or correction) and _replaces(old.values, new_values):
                what = f"{'/'.join(sorted(shared))}: {sorted(old.values - values) or sorted(kept)} -> " \
                       f"{sorted(new_values)}"
            elif not new_values and kept and _FRAME_DENY.search(sentence) and (not denied or kept & denied):
                what = f"{'/'.join(sorted(shared))}: {sorted(kept)} denied"
            elif (new_values and not kept and shared != {"value"} and old.anchors == clause.anchors
                  and not shared <= _EVENT_ANCHORS  # two trips, two parties: both may be
                  and _kinds(old.values) & _kinds(new_values) and _PRESENT.search(sentence)
                  and not _PRESENT_PAST.search(sentence)):
                # the same thing, another value, no word of change: maybe an update, maybe two of them
                return UpdateJudgement(older.node_id, newer.node_id, "possible", "reality_changed", 0.5,
                                       f"{'/'.join(sorted(shared))}: {sorted(old.values)} -> {sorted(new_values)} "
                                       "(no word of change)")
            else:
                continue
            confidence = 0.75
            reasons = []
            if older.long:
                confidence, reasons = 0.5, ["the earlier memory says more"]
            if order_pair(older, newer) is None and not (change or correction):
                confidence, reasons = 0.5, reasons + ["same time"]
            reason = "discovered_false" if correction and not _CHANGE_VERB.search(sentence) else "reality_changed"
            return UpdateJudgement(older.node_id, newer.node_id, "update" if confidence >= CONFIRM_AT else "possible",
                                   reason, confidence, what + (f" ({', '.join(reasons)})" if reasons else ""))
    return none


_PRESENT = re.compile(r"\b(?:is|are|am|have|has)\b", re.IGNORECASE)
_PRESENT_PAST = re.compile(r"\b(?:was|were|had|first|previous|former|last)\b", re.IGNORECASE)


def _replaces(old: frozenset[str], new: frozenset[str]) -> bool:
    """New values can replace the old ones: of the same kind, or a state (a date is no new car)."""
    kinds = _kinds(new)
    return not old or bool(_kinds(old) & kinds) or "state" in kinds


def _kinds(values: Iterable[str]) -> set[str]:
    """What sort of values these are: dates, states or names (a date is no answer to "who")."""
    return {"state" if v.startswith("state:") else "date" if _DATE_RE.fullmatch(v) or v.startswith("day ")
            else "name" for v in values}


# Words that name what a fact is about, for a question that asks about it in other words ("Which car does Wim
# have now?" of "I drive a Kia Niro"): the keyword index adds them to the memory's own words.
_SLOT_WORDS = {"residence": "home live", "employer": "job work company employer", "role": "job title role",
               "relationship": "relationship", "age": "age old", "status": "status", "schedule": "date"}


def about_words(text: str, speaker: str | None = None) -> str:
    """What ``text`` states something about, as words (``""`` for most memories): the attribute of each fact
    (``home`` for "we moved to Lyon"), and each thing the frame rule reads ("car" for "I drive a Kona")."""
    if len(text) > MAX_SENTENCE_CHARS * 4:
        return ""
    words: list[str] = []
    for fact in _facts(text, speaker):
        kind, _, attr = fact.slot.partition(":")
        if kind == "attr":  # "my employer is X": the words of a job, "my flat is in X" those of a home
            kind, attr = {"job": "employer", "home": "residence"}.get(_ANCHOR_GROUPS.get(attr, ""), "attr"), attr
        words.append((_SLOT_WORDS.get(kind, "" if kind == "attr" else kind) + (f" {attr}" if attr else "")).strip())
    for clause in _clauses(text, speaker, False):
        words.extend(a.removeprefix("favourite ") for a in clause.anchors if not a.startswith("id#"))
    return " ".join(dict.fromkeys(" ".join(words).split()))


def clauses_of(statement: Statement) -> tuple[_Clause, ...]:
    """The sentences of a statement the frame rule reads (cached)."""
    return _clauses(statement.text, statement.speaker, False)


def states_something(text: str, speaker: str | None = None) -> bool:
    """Whether the judge could find an update in or of ``text``: a fact its patterns read, a thing with a
    value, or a value with a word of change, correction or denial.  Most memories state none of these and
    are not compared at all (no candidates are looked up for them)."""
    if extract_facts(text, speaker):
        return True
    for clause in _clauses(text, speaker, False):
        if clause.values and (clause.anchors or clause.change or clause.correction
                              or _FRAME_DENY.search(clause.sentence)):
            return True
    return bool(ended_names(text, speaker)) or (_says_ended(text) and any(
        _ended_things(sentence) for sentence, _, _ in _named_sentences(text, speaker)))


def ended_names(text: str, speaker: str | None = None) -> frozenset[str]:
    """The words of the names in the sentences of ``text`` that say something named ended, was replaced or
    was wrong (the named rule's later side; empty for most memories)."""
    if not _says_ended(text):
        return frozenset()
    sentences = _named_sentences(text, speaker)
    short = _said_briefly(text, sentences)
    return frozenset().union(*(names for sentence, names, _ in sentences
                               if names and (short or _ENDED.search(sentence)) and not _STILL.search(sentence)))


# What a sentence says ended, in its own words: the object of "quit coffee", "stopped my guitar lessons",
# "cancelled Smart Fit", or the subject of "keto is over", "the December trip is off", "my Vespa was stolen".
_ENDED_OBJECT = re.compile(
    r"\b(?:quit|quitting|stopped|stopping|gave up|given up|dropped|cancell?ed|sold)\s+(?:doing\s+|going\s+to\s+)?"
    r"(?:(?:my|our|the|a|an|that|those|all)\s+)?([a-z][\w-]*(?:\s+[a-z][\w-]*){0,2})", re.IGNORECASE)
_ENDED_SUBJECT = re.compile(
    r"\b([a-z][\w-]*)\s+(?:is|are|was|were|'s|got|has been|have been)\s+(?:officially\s+|finally\s+|now\s+)?"
    r"(?:over|dead|off|gone|done|finished|cancell?ed|stolen|sold|history)\b", re.IGNORECASE)
_NOT_OBJECT_START = frozenset("""
and or but i we you he she they it to in on at for with because so when after before by as then since until
could would should can will might must
""".split())
_NOT_THINGS = frozenset("""
that this it them thing things everything something anything time times pretending trying going doing being
""".split())


def _ended_things(sentence: str) -> frozenset[str]:
    """The stems of what ``sentence`` says ended (see above); empty for most sentences."""
    words: list[str] = []
    for m in _ENDED_OBJECT.finditer(sentence):
        for w in m.group(1).lower().split():
            if w in _NOT_OBJECT_START:
                break  # the object ends where the clause goes on ("lost my keys and could ...")
            words.append(w)
    words += [m.group(1).lower() for m in _ENDED_SUBJECT.finditer(sentence)]
    return frozenset(_stem(w) for w in words if len(w) >= _NAMED_WORDS_MIN and w not in _NOT_THINGS
                     and w not in _COMMON_START)


@lru_cache(maxsize=8192)
def _says_ended(text: str) -> bool:
    """Whether ``text`` has a word that ends, replaces or corrects (most memories have none; cached: a memory
    is the later side of many pairs)."""
    return _ENDED.search(text) is not None


def _said_briefly(text: str, sentences: Sequence[tuple[str, frozenset[str], frozenset[str]]]) -> bool:
    """A short message whose own sentences say that something ended: the word may be in one sentence and the
    name in the next ("Oh, I misremembered. It's the S20, not the S21.")."""
    return len(text.split()) <= BRIEF_WORDS and any(_ENDED.search(s) for s, _, _ in sentences)


_CHANGE_VERB = re.compile(
    r"\b(?:moved|moving|relocated|switched|changed|became|started|quit|left|joined|got promoted|promoted|"
    r"rescheduled|postponed|pushed|got married|got engaged|broke up|divorced|turned|no longer|any ?more)\b",
    re.IGNORECASE)


# -- the named rule: a word that ends, replaces or corrects, and a name the earlier memory gave ----------------
#
# The patterns and the frame rule know their words; people use others.  "I don't have the Golf anymore" of
# "I drive a VW Golf", "Tofu passed away" of "two cats, Miso and Tofu", "I said Sorbonne but it's actually
# Sciences Po": the later sentence says something ended, was replaced or was wrong, and names what the earlier
# one named (a name, a number, a date).  Words in common are not enough (on LoCoMo, where facts rarely change,
# they marked 2.4 % of turns; names, 0.1 %), and the verdict is only ever "possible": nothing expires, the
# later memory ranks first and the earlier one is marked.

_ENDED = re.compile(
    r"\b(?:no longer|not .{0,30}any ?more|any ?more|no more|(?:don't|do not|doesn't|didn't) (?:have|own|use|live|"
    r"work|drive|see|do|eat|drink|smoke|play)\b|gave up|given up|giving up|stopped|quit|quitting|sold|got rid of|"
    r"dropped|shelved|cancell?ed|called off|called it quits|split up|broke up|passed away|died|is over|'s over|"
    r"are over|ended|finished with|done with|left (?:my|our|the)|switched|swapped|replaced|replacing|instead|"
    r"moved (?:to|over|out)|transferred to|traded|changed (?:to|my)|turns out|turned out|i meant|meant to say|"
    r"correction|mixed up|mix (?:it|them|the two) up|i was wrong|got (?:it|that) wrong|misspoke|misremembered|"
    r"not true|lied|i said .{1,40} but|not .{1,30}, (?:it's|it is|but)|off the|back to normal|laid off|fired|"
    r"graduated|retired|(?:is|are|'s) gone|upgraded|downgraded|stepped down|resigned|last day at|moved on from|"
    r"postponed|rescheduled|stolen|is dead|officially dead|is off)\b|, not [\w' .-]{1,30}(?:[.!;]|$)", re.IGNORECASE)
_OTHER_SUBJECT = re.compile(
    r"^\W*(?:(?:my|our)\s+(?:\w+\s+)?(?:" + "|".join(sorted(_PERSON_WORDS | {
        "wife", "husband", "partner", "boyfriend", "girlfriend", "boss", "manager", "landlord", "roommate",
        "flatmate"})) + r")|he|she|they|his|her|their|you|your)\b", re.IGNORECASE)
_STILL = re.compile(r"\bstill\b", re.IGNORECASE)
_NAMED_WORDS_MIN = 4
BRIEF_WORDS = 40


def _own_sentence(sentence: str) -> bool:
    """Says something of the speaker: not hedged, past or reported, and not about someone else ("my wife
    started at Roche", "he moved"; but "my partner is Mads" names the speaker's partner, and "I work at
    Deloitte in their Mumbai office" is the speaker's job)."""
    if _HEDGE.search(sentence) or _PAST.search(sentence) or _REPORTED.search(sentence) \
            or _OTHERS_THING.match(sentence):
        return False
    return not _OTHER_SUBJECT.search(sentence) or bool(_NAMES_MY.match(sentence) or _WITH_ME.match(sentence))


# "Dr Moreau's clinic moved": someone else's thing ("It's", "That's" are no one's)
_OTHERS_THING = re.compile(r"^\W*(?:(?i:dr|mr|mrs|ms|prof)\.?\s+)?(?!(?i:it|that|there|here|what|who|where|how|"
                           r"this|let|she|he)'s\b)[A-Z][a-z]+'s\b")
# "My partner and I moved": the speaker is in it
_WITH_ME = re.compile(r"^\W*(?:my|our)\s+\w+\s+and\s+(?:i|me)\b", re.IGNORECASE)


# "My partner is Mads", "my coach's name is Eliud": the speaker's relation to someone named
_NAMES_MY = re.compile(r"^\W*(?:my|our)\s+(?:\w+\s+)?\w+(?:'s\s+name)?\s+(?:is|'s)\s+(?:(?:now|currently|actually|"
                       r"still|officially|really)\s+)*(?:called\s+|named\s+)?(?-i:[A-Z])", re.IGNORECASE)


@lru_cache(maxsize=8192)
def _named_sentences(text: str, speaker: str | None) -> tuple[tuple[str, frozenset[str], frozenset[str]], ...]:
    """The speaker's own sentences of ``text``: (sentence, words of its names and numbers, its stemmed words)."""
    out = []
    for sentence in _sentences(text):
        if len(sentence) > MAX_SENTENCE_CHARS or not _own_sentence(sentence):
            continue
        values, _ = _values(_expand(sentence), speaker)  # as the frame rule reads it (cached there)
        names = frozenset(w for v in values if not v.startswith("state:") and not _DATE_RE.fullmatch(v)
                          for w in _TOKEN.findall(v) if w not in _COMMON_START and len(w) > 1)
        words = frozenset(_stem(w) for w in _TOKEN.findall(sentence.lower()) if len(w) >= _NAMED_WORDS_MIN)
        out.append((sentence, names, words))
    return tuple(out)


@lru_cache(maxsize=8192)
def _named_earlier(text: str, speaker: str | None) -> tuple[tuple[str, frozenset[str], frozenset[str]], ...]:
    """The speaker's own first-person sentences of a memory as the earlier side of the named rule (cached)."""
    return tuple(o for o in _named_sentences(text, speaker) if _MINE_OR_ME.search(o[0]))


def judge_named(older: Statement, newer: Statement) -> UpdateJudgement:
    """The named rule (see above) on ``older`` -> ``newer``: "possible" or "none"."""
    none = UpdateJudgement(older.node_id, newer.node_id, "none", why="no name of the earlier memory ends")
    if (older.speaker or None) != (newer.speaker or None) or not _says_ended(newer.text):
        return none
    olds = _named_earlier(older.text, older.speaker)
    if not olds:
        return none
    sentences = _named_sentences(newer.text, newer.speaker)
    short = _said_briefly(newer.text, sentences)
    for sentence, names, words in sentences:
        if not (short or _ENDED.search(sentence)):
            continue
        things = _groups(frozenset(_TOKEN.findall(sentence.lower())) & _ANCHORS)
        subject = _NAMED_SUBJECT.match(sentence)
        denied = _denied_words(sentence, names)
        for old_sentence, old_names, old_words in olds:
            common = (names & (old_names | old_words)) | (old_names & words) | (_ended_things(sentence) & old_words)
            if denied:  # "I work at Microsoft now, no longer at Google": Google ended, not Microsoft
                common = {w for w in common if w in denied or w not in names}
            if not common or _STILL.search(sentence):
                continue  # nothing named in common, or it goes on ("still at Revolut")
            if subject and subject.group(1).lower() not in old_names | _COMMON_START \
                    and _stem(subject.group(1).lower()) not in old_words:
                continue  # someone else's news ("Tom left Roche"; but "Mads and I split up" of "my partner Mads")
            old_things = _groups(frozenset(_TOKEN.findall(old_sentence.lower())) & _ANCHORS)
            if things and old_things and things.isdisjoint(old_things):
                continue  # one name, two roles: "Claire is my coach", "Claire isn't my accountant any more"
            reason = "discovered_false" if _CORRECTION.search(sentence) and not _CHANGE_VERB.search(sentence) \
                else "reality_changed"
            return UpdateJudgement(older.node_id, newer.node_id, "possible", reason, 0.5,
                                   f"{sorted(common)} ended, replaced or corrected")
    return none
