"""Consciousness-aware ranking (spec Component 5), as pure functions.

The spec's decision #6 is "let the LLM decide", with an algorithmic ranking
as the fallback when a result set has to shrink before it reaches the LLM
(120 six-way results -> the 75 that fit in the activation tiers).  This
module is that fallback, formula for formula:

* :func:`priority_score` - Luca's priority, ``energy*0.4 + pressure*0.6``:
  external pressure matters more than internal energy.
* :func:`consciousness_adjusted_score` - the base relevance plus priority,
  confidence and emotional resonance, minus the metadata completeness
  penalty of Component 6 (incomplete memories are poorer representations).
* :func:`calculate_emotional_similarity` - the spec's cosine of two emotion
  vectors after normalising emotion names ("excited" -> "excitement"),
  because memories are written by many hands that name a feeling
  differently.
* :func:`activation_tiers` - focus / peripheral / background: attention is
  tiered, not a flat list.

Nothing here does I/O; the postprocessors in
``llama_consciousness.postprocessors`` feed these functions from node
metadata.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TypeVar

from llama_consciousness.scoring.emotions import canonical_vector

__all__ = [
    "DEFAULT_BACKGROUND",
    "DEFAULT_FOCUS",
    "DEFAULT_PERIPHERAL",
    "activation_tiers",
    "calculate_emotional_similarity",
    "consciousness_adjusted_score",
    "cosine_similarity",
    "priority_score",
]

T = TypeVar("T")

# The spec's tier boundaries: ranked[:5], ranked[5:25], ranked[25:75].
DEFAULT_FOCUS = 5
DEFAULT_PERIPHERAL = 20
DEFAULT_BACKGROUND = 50


def cosine_similarity(vec_a: Mapping[str, float] | None, vec_b: Mapping[str, float] | None) -> float:
    """Cosine similarity of two sparse vectors keyed by name, clamped to [0, 1].

    Exactly the spec's Component 5b function: keys are aligned over the
    union of both vectors (a missing key is 0), an empty or zero vector gives
    0.0, and a negative cosine (impossible with non-negative intensities, but
    possible with bad data) is clamped to 0.0.  Names are compared as given;
    :func:`calculate_emotional_similarity` normalises them first.
    """
    if not vec_a or not vec_b:
        return 0.0
    all_keys = sorted(set(vec_a) | set(vec_b))  # sorted: the same float sum on every run
    a = [float(vec_a.get(key, 0.0)) for key in all_keys]
    b = [float(vec_b.get(key, 0.0)) for key in all_keys]
    dot_product = sum(x * y for x, y in zip(a, b))
    magnitude_a = math.sqrt(sum(x * x for x in a))
    magnitude_b = math.sqrt(sum(y * y for y in b))
    if magnitude_a == 0.0 or magnitude_b == 0.0:
        return 0.0
    similarity = dot_product / (magnitude_a * magnitude_b)
    if math.isnan(similarity):
        return 0.0
    return max(0.0, min(1.0, similarity))


def calculate_emotional_similarity(
    query_emotions: Mapping[str, float] | None, result_emotions: Mapping[str, float] | None
) -> float:
    """Emotional resonance of a result with a query: cosine over canonical names.

    Both vectors go through :func:`~llama_consciousness.scoring.emotions.canonical_vector`
    first, so "excited" meets "excitement" (two names of one feeling keep the
    stronger intensity).  The spec's example,
    ``{"excited": 0.8, "cautious": 0.3}`` against
    ``{"excitement": 0.7, "caution": 0.4, "fear": 0.2}``, is "high
    resonance": the cosine is 0.68 / (sqrt(0.73) * sqrt(0.69)) = 0.958 (the
    spec's docstring rounds it to 0.92; the formula is what is implemented).
    """
    return cosine_similarity(canonical_vector(dict(query_emotions or {})),
                             canonical_vector(dict(result_emotions or {})))


def priority_score(energy: float, reality_pressure: float = 0.5) -> float:
    """Luca's priority: ``energy*0.4 + reality_pressure*0.6``.

    External urgency (deadlines, a user waiting) outweighs how charged a
    memory is on its own.
    """
    return energy * 0.4 + reality_pressure * 0.6


def consciousness_adjusted_score(
    base_score: float,
    energy: float,
    confidence: float,
    emotional_resonance: float,
    metadata_completeness: float,
    reality_pressure: float = 0.5,
) -> float:
    """The spec's consciousness-adjusted score of one result.

    ``base + priority*0.4 + confidence*0.2 + resonance*0.5 - (1 - completeness)*0.1``
    where ``priority = energy*0.4 + reality_pressure*0.6``.  Emotional
    resonance weighs most ("enormously important"), confidence "strongly
    influences", and a memory missing half its metadata loses 0.05.

    The base score is the retriever's relevance and is not rescaled: with
    fused (RRF) scores of a few hundredths the consciousness terms dominate
    the order, which is the spec's intent for this pre-LLM ranking.
    """
    priority = priority_score(energy, reality_pressure)
    return (
        base_score
        + priority * 0.4
        + confidence * 0.2
        + emotional_resonance * 0.5
        - (1.0 - metadata_completeness) * 0.1
    )


def activation_tiers(
    ranked: Sequence[T],
    focus: int = DEFAULT_FOCUS,
    peripheral: int = DEFAULT_PERIPHERAL,
    background: int = DEFAULT_BACKGROUND,
) -> dict[str, list[T]]:
    """Split a ranked list into the spec's activation tiers.

    ``focus`` = ``ranked[:focus]`` (conscious awareness), ``peripheral`` =
    the next ``peripheral`` (accessible, not central), ``background`` = the
    next ``background`` (unconscious context).  Anything after that is below
    attention and is in no tier.  The defaults give the spec's boundaries
    5 / 25 / 75.
    """
    for name, size in (("focus", focus), ("peripheral", peripheral), ("background", background)):
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"{name} must be an integer >= 0, got {size!r}")
    items = list(ranked)
    first = focus
    second = focus + peripheral
    third = second + background
    return {
        "focus": items[:first],
        "peripheral": items[first:second],
        "background": items[second:third],
    }
