"""Read-time knowledge updates: among the memories one question retrieved, the later of two that give the same
thing different values comes first, and the earlier is marked possibly outdated.

Why at read time: judging every stored pair at write time marked a third of all messages of long real
conversations (BEAM) as possibly outdated and found almost none of the originals that really were updated
(``benchmarks/beam_quality.py``).  The question says what "the same thing" is: two memories speak of it
when their sentences closest to the question name most of the question's words, and they give it other
values when those sentences hold different numbers or dates ("login API response time ... 180ms" and,
later, "... has decreased to 120ms").  mem0 moved the same way (add-only storage, a temporal preference at
retrieval).

Questions about the past ("what did I use before", "when did I first") are never reordered: the earlier
memory may be the answer.  Everything here is pure and linear in the text it reads (each memory's first
``MAX_CHARS`` characters, code blocks left out).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from llama_consciousness.scoring.cognitive import STOP_WORDS

MAX_CHARS = 8_000
"""Characters of a memory read for its statements (facts sit in the prose; a long paste adds none)."""
COVERAGE = 0.4
"""Share of the question's words a memory's closest sentence must name for it to speak of that thing (with
MIN_TERMS, chosen on BEAM's tune half with ``benchmarks/beam_recency_tune.py``)."""
MIN_TERMS = 3
"""And at least this many of them (a one-word match is not "the same thing")."""

_WORD = re.compile(r"[a-z0-9][a-z0-9_\-']*")
_CODE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_MONTH = (r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|"
          r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)")
_VALUE = re.compile(
    rf"\b{_MONTH}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?\b"  # March 5, 2024
    r"|\b\d{4}-\d{2}-\d{2}\b"  # 2024-03-05
    r"|\b\d{1,2}(?::\d{2})+\s*(?:am|pm)?\b"  # 5:30 pm
    r"|(?<![\w.])\d[\d,]*(?:\.\d+)?(?:%|[a-z]{1,3}\b)?",  # 180ms, 15,000, 2.5, 40% (a unit only attached)
    re.IGNORECASE)
_PAST_QUESTION = re.compile(
    r"\b(?:before|previous(?:ly)?|originally|original|initial(?:ly)?|first|earlier|used to|at first|"
    r"at the (?:start|beginning)|formerly|prior|history|over time|in (?:what|which) order|order of|in order|"
    r"timeline|when did|between|how long|how much time|chang(?:e|ed|es|ing)|evolv(?:e|ed|es|ing)|use to|"
    r"summar(?:y|ies|ize|ise|ized|ised|izing|ising)|overview|recap)\b",
    re.IGNORECASE)


_NOW_WORDS = frozenset("latest recent recently current currently now today newest updated update based".split())
"""Words a question uses to ask for the present value, which the statements giving it rarely say."""


def _terms(text: str) -> frozenset[str]:
    """The words of a question or sentence that say what it is about (numbers are values, not words)."""
    return frozenset({_stem(w) for w in _WORD.findall(text.lower())
            if len(w) >= 3 and w not in STOP_WORDS and w not in _NOW_WORDS and not w.isdigit()})


def _stem(word: str) -> str:
    """A light plural / verb-form folding, so "requests" meets "request" (no dictionary, no model)."""
    for suffix in ("ies", "es", "s", "ing", "ed"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def excerpt(text: str, question: str, limit: int) -> str:
    """``text`` cut to about ``limit`` characters for an LLM's context: its beginning, then (when it lies
    further on) the passage around the sentence that names most of the question's words, with "[…]" where
    text was left out.  A long message (a pasted log, a code review) would otherwise fill the budget alone and
    leave out the memories after it; what it says of the question is kept.  Linear in ``text``."""
    return excerpter(question)(text, limit)


def excerpter(question: str) -> Callable[[str, int], str]:
    """``excerpt`` for one question and many texts: the question's words are read once (a chat turn's long
    question and its five excerpts: 0.22 ms an excerpt against 0.30 reading them for each)."""
    terms = _terms(question)

    def cut(text: str, limit: int) -> str:
        if limit < 1:
            raise ValueError(f"an excerpt needs a limit of at least 1 character, got {limit}")
        if len(text) <= limit:
            return text
        head = limit // 2
        _, _, best_at = _closest_sentence(terms, text[:MAX_CHARS * 4], start_at=head)
        if best_at < 0:
            return text[:limit].rstrip() + " […]"
        rest = limit - head
        start = max(head, best_at - rest // 4)
        return excerpt_head(text, limit) + " […] " + text[start:start + rest].strip() + " […]"

    return cut


def excerpt_head(text: str, limit: int) -> str:
    """What every excerpt of ``text`` (longer than ``limit``) begins with, whatever the question."""
    return text[: limit // 2].rstrip()


def asks_about_the_past(question: str) -> bool:
    """Whether a question asks what held before, first, between two times, in what order, how things changed
    or for a summary: then the earlier memory may be the answer, or part of it, and nothing is reordered or
    marked.  (A summary asks for the whole story: on BEAM's tune half, gathering its memories latest first
    cost its recall@10 a tenth.)"""
    return bool(_PAST_QUESTION.search(question))


@dataclass(frozen=True)
class Statement:
    """What a memory says of the question's subject: the question's words its closest sentence names, and
    the values (numbers, dates) that sentence gives."""

    terms: frozenset[str]
    values: frozenset[str]


def _value(raw: str) -> str:
    return re.sub(r"[\s,]+", "", raw.lower())


def statement_about(question_terms: set[str] | frozenset[str], text: str, max_chars: int = MAX_CHARS, at_least: int = 0) -> Statement:
    """The sentence of ``text`` that names most of ``question_terms`` (prose only: code blocks are left out),
    with its values; empty when the whole text names fewer than ``at_least`` of them (most memories a question
    finds: then no sentence is read).  A term is named by a word that starts with it ("request" by
    "requests"): substring tests on the text's words, no tokenizing, since this runs on every answer."""
    prose = _CODE.sub(" ", text[:max_chars])
    whole = prose.lower()
    if at_least and sum(1 for t in question_terms if t in whole) < at_least:  # a superset: cheap
        return Statement(frozenset(), frozenset())
    best_terms, best_sentence, _ = _closest_sentence(question_terms, prose)
    values = {_value(m.group(0)) for m in _VALUE.finditer(best_sentence)} if best_sentence else set()
    return Statement(frozenset(best_terms), frozenset(v for v in values if v))


def _closest_sentence(terms: set[str] | frozenset[str], text: str, start_at: int = 0) -> tuple[set[str], str, int]:
    """The sentence of ``text`` (starting at or after ``start_at``) whose words name most of ``terms``: those
    terms, the sentence and where it starts (``set(), "", -1`` when none names any).  A term is named by a
    word that starts with it ("request" by "requests"); a cheap substring test first skips the sentences that
    cannot beat the best so far."""
    best_terms: set[str] = set()
    best_sentence, best_at = "", -1
    # Only the terms the text holds somewhere can be in one of its sentences (a long question brings a hundred
    # terms, a message a few dozen sentences: testing each term on each sentence was most of the time).
    lowered = text.lower()
    terms = [t for t in terms if t in lowered]
    if not terms:
        return best_terms, best_sentence, best_at
    at = 0
    for gap in (*_SENTENCE_END.finditer(text), None):  # the sentences between the gaps, with where each starts
        end, after = (gap.start(), gap.end()) if gap is not None else (len(text), len(text))
        sentence, start, at = text[at:end], at, after
        if start < start_at or len(sentence) < 8:
            continue
        lower = sentence.lower()
        anywhere = [t for t in terms if t in lower]  # a superset of what its words name
        if len(anywhere) <= len(best_terms):
            continue
        words = _words(sentence)
        named = {t for t in anywhere if " " + t in words}
        if len(named) > len(best_terms):
            best_terms, best_sentence, best_at = named, sentence, start
    return best_terms, best_sentence, best_at


_NOT_WORD = re.compile(r"[^a-z0-9_\-']+")


def _words(text: str) -> str:
    """``text`` lower-cased as its words with a space before each, for word-start tests (" request")."""
    return " " + _NOT_WORD.sub(" ", text.lower())


@dataclass(frozen=True)
class Candidate:
    """A retrieved memory as this module reads it."""

    key: str
    text: str
    valid_at: datetime | None


def later_versions(question: str, found: Sequence[Candidate], coverage: float = COVERAGE,
                   min_terms: int = MIN_TERMS) -> dict[str, str]:
    """``{earlier key: latest key}`` for the memories of ``found`` that a later one of ``found`` may replace:
    both speak of what the question asks (their closest sentences name at least ``coverage`` of its words,
    and ``min_terms``) and give it other values.  Memories linked so, directly or through others, are one
    group; each but its latest points to the latest.  Nothing for a question about the past
    (``asks_about_the_past``) or of fewer words than ``min_terms``."""
    if asks_about_the_past(question):
        return {}
    terms = _terms(question)
    need = max(min_terms, math.ceil(coverage * len(terms)))
    if len(terms) < min_terms:
        return {}
    speaking: list[tuple[Candidate, Statement]] = []
    for c in found:
        if c.valid_at is None:
            continue
        st = statement_about(terms, c.text, at_least=need)
        if len(st.terms) >= need and st.values:
            speaking.append((c, st))
    group = list(range(len(speaking)))  # union-find over the memories that speak of it

    def root(i: int) -> int:
        while group[i] != i:
            group[i] = group[group[i]]
            i = group[i]
        return i

    for i, (first, a) in enumerate(speaking):
        for j in range(i + 1, len(speaking)):
            second, b = speaking[j]
            if first.valid_at != second.valid_at and a.values != b.values and len(a.terms & b.terms) >= need:
                group[root(i)] = root(j)
    members: dict[int, list[Candidate]] = {}
    for i, (c, _) in enumerate(speaking):
        members.setdefault(root(i), []).append(c)
    out: dict[str, str] = {}
    for cs in members.values():
        if len(cs) > 1:
            latest = max(cs, key=lambda c: c.valid_at)  # type: ignore[arg-type, return-value]
            # a memory of the same time as the latest is not "earlier": it keeps its place, unmarked
            out.update((c.key, latest.key) for c in cs if c.valid_at < latest.valid_at)
    return out


def latest_first(ranked: list[tuple[Any, float]], successor: dict[Any, Any],
                 when: dict[Any, datetime]) -> list[tuple[Any, float]]:
    """``ranked`` with each group of ``successor`` (memories and the latest one that may replace them) brought
    together at the place of its best-ranked member, latest first by ``when``, at that member's score; the
    memories between move down.  So a later version always comes before an earlier one, and one found deep in
    the list joins the versions the question found first (on BEAM's tune half this also raised recall@10)."""
    def last(key: Any) -> Any:  # the end of a chain a -> b -> c (later_versions gives none, a caller may)
        seen = {key}
        while key in successor and successor[key] not in seen:
            key = successor[key]
            seen.add(key)
        return key

    groups: dict[Any, set[Any]] = {}
    for earlier in successor:
        latest = last(earlier)
        groups.setdefault(latest, {latest}).add(earlier)
    group_of = {key: latest for latest, keys in groups.items() for key in keys}
    present = {key for key, _ in ranked}
    out: list[tuple[Any, float]] = []
    placed: set[Any] = set()
    for key, score in ranked:
        group = group_of.get(key)
        if group is None:
            out.append((key, score))
        elif group not in placed:
            placed.add(group)
            out += [(k, score) for k in sorted(groups[group] & present, key=lambda k: when[k], reverse=True)]
    return out
