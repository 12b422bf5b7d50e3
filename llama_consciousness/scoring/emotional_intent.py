"""The emotional intent of a query, read offline with a small lexicon.

The spec reads a query's emotions "via LLM"; ranking must also work with no LLM
and no network, and the same query must always rank the same way, so the default
reader is a deterministic lexicon (the LLM reader is in ``ConsciousnessRanker``
and falls back to this one).  Rules:

* **Terms**: the synonym table's words except :data:`AMBIGUOUS_WORDS` (more often
  not about feelings: "content", "focus on"), plus :data:`EXTRA_WORDS` and
  :data:`PHRASES`; phrases first, longest first, their words used up (the "not"
  of "not sure" negates nothing).
* **Intensity**: :data:`BASE_INTENSITY`, or the closest intensifier / dampener
  among the 3 tokens before the term.
* **Negation** among those 3 tokens *drops* the mention: "not excited" names no
  opposite feeling, and an invented one would add resonance the query never asked for.
* **Clauses**: punctuation and "but", "though"... end the look-back window.
* **Output**: canonical names, each at its strongest mention, keys sorted.
"""

from __future__ import annotations

import re

from llama_consciousness.scoring.emotions import EMOTION_SYNONYMS, canonical_emotion

__all__ = ["AMBIGUOUS_WORDS", "BASE_INTENSITY", "DAMPENERS", "EXTRA_WORDS", "INTENSIFIERS", "NEGATIONS", "PHRASES",
           "extract_emotional_intent"]

BASE_INTENSITY = 0.6
WINDOW = 3  # tokens looked back for negations and modifiers

# Synonym-table words that usually are not about a feeling in a query.
AMBIGUOUS_WORDS: frozenset[str] = frozenset({
    "content", "drive", "driven", "focus", "resolve", "interest", "certain", "insight",
    "adaptation", "adapting", "adaptive", "adjustment", "concentration", "concentrated",
    "persistent", "grit",
})

# Inflections and work words the synonym table does not have: word -> canonical.
EXTRA_WORDS: dict[str, str] = {
    "excite": "excitement", "excites": "excitement", "excitedly": "excitement", "thrilling": "excitement",
    "breakthrough": "excitement", "breakthroughs": "excitement", "inspired": "excitement",
    "energized": "excitement", "energised": "excitement", "pumped": "excitement", "stoked": "excitement",
    "cautiously": "caution", "carefully": "caution", "hesitant": "caution", "hesitation": "caution",
    "hesitated": "caution", "wary": "caution", "skeptical": "caution", "sceptical": "caution",
    "stuck": "frustration", "blocked": "frustration", "blocker": "frustration", "blockers": "frustration",
    "annoying": "frustration", "irritating": "frustration", "frustrations": "frustration",
    "stumped": "frustration",
    "unsure": "uncertainty", "doubts": "uncertainty", "doubted": "uncertainty", "torn": "uncertainty",
    "undecided": "uncertainty",
    "fascinated": "curiosity", "fascinating": "curiosity", "wondering": "curiosity", "wondered": "curiosity",
    "intriguing": "curiosity",
    "committed": "determination", "persevered": "determination", "persevering": "determination",
    "motivating": "drive",
    "satisfying": "satisfaction", "accomplished": "satisfaction", "accomplishment": "satisfaction",
    "relieving": "relief",
    "glad": "joy", "elated": "joy", "overjoyed": "joy", "cheerful": "joy",
    "surprising": "surprise", "unexpected": "surprise", "astonishing": "surprise",
    "confusing": "confusion", "baffled": "confusion", "baffling": "confusion", "perplexed": "confusion",
    "realized": "realization", "realised": "realization", "eureka": "realization",
    "embarrassing": "shame",
    "fears": "fear", "feared": "fear", "fearful": "fear", "scary": "fear", "terrified": "fear",
    "panicked": "fear",
    "worries": "anxiety", "worrying": "anxiety", "worried": "anxiety", "stressed": "anxiety",
    "stressful": "anxiety", "overwhelmed": "anxiety", "tense": "anxiety",
    "concerns": "anxiety",
    "disappointing": "sadness", "upset": "sadness", "unhappy": "sadness",
    "heartbroken": "sadness",
    "mad": "anger", "outraged": "anger",
    "calming": "calm", "relaxed": "calm",
    "trusted": "trust", "trusts": "trust",
    "thankful": "gratitude",
    "hopes": "hope", "hoped": "hope", "hoping": "hope",
    "tiring": "fatigue", "exhausting": "fatigue", "drained": "fatigue", "sleepy": "fatigue",
}

# Multi-word expressions: token tuples -> canonical.  Matched before single words.
PHRASES: dict[tuple[str, ...], str] = {
    ("worried", "about"): "anxiety",
    ("on", "edge"): "anxiety",
    ("freaked", "out"): "anxiety",
    ("stressed", "out"): "anxiety",
    ("felt", "excited"): "excitement",
    ("can't", "wait"): "excitement",
    ("cannot", "wait"): "excitement",
    ("cant", "wait"): "excitement",
    ("looking", "forward"): "excitement",
    ("on", "guard"): "caution",
    ("think", "twice"): "caution",
    ("hit", "a", "wall"): "frustration",
    ("hit", "a", "snag"): "frustration",
    ("going", "in", "circles"): "frustration",
    ("fed", "up"): "frustration",
    ("not", "sure"): "uncertainty",
    ("no", "idea"): "uncertainty",
    ("second", "thoughts"): "uncertainty",
    ("second", "guessing"): "uncertainty",
    ("on", "the", "fence"): "uncertainty",
    ("at", "a", "loss"): "confusion",
    ("makes", "no", "sense"): "confusion",
    ("aha", "moment"): "realization",
    ("light", "bulb"): "realization",
    ("it", "clicked"): "realization",
    ("burned", "out"): "fatigue",
    ("burnt", "out"): "fatigue",
    ("worn", "out"): "fatigue",
    ("at", "ease"): "calm",
    ("peace", "of", "mind"): "calm",
    ("proud", "of"): "pride",
}

INTENSIFIERS: dict[str, float] = {
    "quite": 0.7, "pretty": 0.7, "rather": 0.7, "very": 0.8, "really": 0.8, "so": 0.8, "truly": 0.8,
    "genuinely": 0.8, "super": 0.9, "deeply": 0.9, "highly": 0.9, "totally": 0.9, "seriously": 0.9,
    "extremely": 1.0, "incredibly": 1.0, "immensely": 1.0, "utterly": 1.0, "absolutely": 1.0,
    "intensely": 1.0, "completely": 1.0, "overwhelmingly": 1.0,
}

DAMPENERS: dict[tuple[str, ...], float] = {
    ("slightly",): 0.3, ("somewhat",): 0.3, ("mildly",): 0.3, ("faintly",): 0.3, ("kinda",): 0.3,
    ("a", "bit"): 0.3, ("a", "little"): 0.3, ("kind", "of"): 0.3, ("sort", "of"): 0.3, ("a", "tad"): 0.3,
}

NEGATIONS: frozenset[str] = frozenset({
    "not", "no", "never", "without", "nor", "neither", "hardly", "barely", "scarcely",
    "isn't", "wasn't", "aren't", "weren't", "don't", "didn't", "doesn't", "can't", "cannot",
    "couldn't", "won't", "wouldn't", "shouldn't", "haven't", "hasn't", "hadn't", "ain't",
    "isnt", "wasnt", "arent", "werent", "dont", "didnt", "doesnt", "cant", "couldnt", "wont", "wouldnt",
})

# Words that end a look-back window (a new clause starts after them).
CLAUSE_BREAKS: frozenset[str] = frozenset({"but", "though", "although", "yet", "however", "whereas"})

_TOKEN = re.compile(r"[a-z]+(?:'[a-z]+)?|[.,;:!?()\[\]]")
_PUNCT = frozenset(".,;:!?()[]")


def _build_words() -> dict[str, str]:
    words: dict[str, str] = {}
    for canonical, synonyms in EMOTION_SYNONYMS.items():
        for word in (canonical, *synonyms):
            if " " not in word and "_" not in word and word not in AMBIGUOUS_WORDS:
                words[word] = canonical_emotion(word)
    words.update(EXTRA_WORDS)
    return words


WORDS: dict[str, str] = _build_words()
_PHRASES_BY_LENGTH = sorted(PHRASES.items(), key=lambda item: -len(item[0]))


def _tokenize(text: str) -> list[str]:
    text = text.lower().replace("\u2019", "'").replace("\u2018", "'")
    return _TOKEN.findall(text)


def _is_break(token: str) -> bool:
    return token in _PUNCT or token in CLAUSE_BREAKS


def extract_emotional_intent(text: str | None) -> dict[str, float]:
    """Canonical emotion -> intensity in [0, 1] read from ``text`` (see the module rules).

    >>> extract_emotional_intent("really stuck, not worried about it")
    {'frustration': 0.8}
    """
    tokens = _tokenize(text or "")
    n = len(tokens)
    # 1. find terms: (start, end, canonical), phrases first, longest first
    used = [False] * n
    terms: list[tuple[int, int, str]] = []
    at: dict[str, list[int]] = {}  # token -> its positions: a phrase is tried only where its first word is
    for i, token in enumerate(tokens):
        at.setdefault(token, []).append(i)
    for phrase, canonical in _PHRASES_BY_LENGTH:
        size = len(phrase)
        for start in at.get(phrase[0], ()):
            if tuple(tokens[start:start + size]) == phrase and not any(used[start:start + size]):
                terms.append((start, start + size, canonical))
                for i in range(start, start + size):
                    used[i] = True
    for i, token in enumerate(tokens):
        if not used[i] and token in WORDS:
            terms.append((i, i + 1, WORDS[token]))
            used[i] = True
    terms.sort()
    term_tokens = {i for start, end, _ in terms for i in range(start, end)}

    # 2. each term's intensity from its look-back window (stopping at a clause break)
    out: dict[str, float] = {}
    for start, _end, canonical in terms:
        window: list[int] = []
        j = start - 1
        while j >= 0 and len(window) < WINDOW and not _is_break(tokens[j]):
            window.insert(0, j)
            j -= 1
        # words of other terms are neither negations nor modifiers ("can't wait", "not sure")
        free = [tokens[i] if i not in term_tokens else "" for i in window]
        if any(token in NEGATIONS for token in free):
            continue  # negated: dropped (see module docstring)
        intensity = BASE_INTENSITY
        # the closest modifier wins: scan from the term backwards
        for k in range(len(free) - 1, -1, -1):
            if k >= 1 and tuple(free[k - 1:k + 1]) in DAMPENERS:
                intensity = DAMPENERS[tuple(free[k - 1:k + 1])]
                break
            if (free[k],) in DAMPENERS:
                intensity = DAMPENERS[(free[k],)]
                break
            if free[k] in INTENSIFIERS:
                intensity = INTENSIFIERS[free[k]]
                break
        intensity = max(0.0, min(1.0, intensity))
        out[canonical] = max(out.get(canonical, 0.0), intensity)
    return dict(sorted(out.items()))
