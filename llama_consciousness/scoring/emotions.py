"""Emotion names, normalised so that "excited" and "excitement" meet.

Memories are written by many hands (people, LLMs, importers) who name the
same feeling differently.  Every comparison of emotions (required_emotions
filters, emotional resonance, state similarity) goes through
:func:`canonical_emotion`, and the canonical names are stored beside the
original ones so that filters can run inside the database.

The table is small and explicit on purpose: a documented synonym table is
predictable, an inflection guesser is not.  Unknown names are lower-cased
and stripped of separators, so "Deep_Focus" and "deep focus" still meet.
"""

from __future__ import annotations

import re
from functools import lru_cache

# canonical name -> words that mean it (adjectives, verbs, near-synonyms)
EMOTION_SYNONYMS: dict[str, tuple[str, ...]] = {
    "excitement": ("excited", "exciting", "enthusiasm", "enthusiastic", "eager", "eagerness", "thrill", "thrilled"),
    "caution": ("cautious", "careful", "carefulness", "wary", "wariness", "prudence", "prudent"),
    "frustration": ("frustrated", "frustrating", "annoyance", "annoyed", "irritation", "irritated"),
    "uncertainty": ("uncertain", "unsure", "doubt", "doubtful", "ambivalence"),
    "curiosity": ("curious", "interest", "interested", "intrigue", "intrigued", "wonder"),
    "confidence": ("confident", "assurance", "assured", "certainty", "certain"),
    "determination": ("determined", "resolve", "resolute", "persistence", "persistent", "grit"),
    "drive": ("driven", "motivation", "motivated", "urgency", "urgent"),
    "satisfaction": ("satisfied", "contentment", "content", "fulfilment", "fulfillment", "fulfilled"),
    "relief": ("relieved",),
    "joy": ("joyful", "happiness", "happy", "delight", "delighted"),
    "pride": ("proud",),
    "surprise": ("surprised", "astonishment", "astonished", "shock", "shocked"),
    "confusion": ("confused", "puzzlement", "puzzled", "bewilderment", "bewildered"),
    "realization": ("realisation", "insight", "epiphany"),
    "shame": ("ashamed", "embarrassment", "embarrassed", "guilt", "guilty"),
    "fear": ("afraid", "scared", "fright", "frightened", "dread"),
    "anxiety": ("anxious", "worry", "worried", "nervousness", "nervous", "unease", "uneasy", "concern", "concerned"),
    "sadness": ("sad", "sorrow", "grief", "disappointment", "disappointed"),
    "anger": ("angry", "rage", "fury", "furious"),
    "calm": ("calmness", "serenity", "serene", "peace", "peaceful", "tranquility"),
    "trust": ("trusting", "faith"),
    "gratitude": ("grateful", "thankful", "thankfulness", "appreciation"),
    "hope": ("hopeful", "optimism", "optimistic"),
    "adaptation": ("adapting", "adaptive", "adjustment"),
    "focus": ("focused", "focussed", "concentration", "concentrated"),
    "fatigue": ("tired", "tiredness", "exhaustion", "exhausted", "weariness", "weary"),
}

_LOOKUP: dict[str, str] = {}
for _canonical, _words in EMOTION_SYNONYMS.items():
    _LOOKUP[_canonical] = _canonical
    for _word in _words:
        _LOOKUP[_word] = _canonical

_SEPARATORS = re.compile(r"[\s\-]+")


@lru_cache(maxsize=4096)
def canonical_emotion(name: str) -> str:
    """The canonical form of an emotion name (see :data:`EMOTION_SYNONYMS`).

    Cached: a store or a stream names the same few feelings thousands of times.
    """
    key = _SEPARATORS.sub("_", name.strip().lower())
    return _LOOKUP.get(key, _LOOKUP.get(key.replace("_", " "), key))


def canonical_vector(emotions: dict[str, float] | None) -> dict[str, float]:
    """An emotion vector keyed by canonical names.

    Two source names that collapse into one keep the stronger intensity:
    "excited 0.8, excitement 0.6" is one feeling felt at 0.8, not 1.4.
    """
    out: dict[str, float] = {}
    for name, value in (emotions or {}).items():
        key = canonical_emotion(name)
        out[key] = max(out.get(key, 0.0), float(value))
    return out
