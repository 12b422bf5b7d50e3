"""Consciousness-aware ranking (spec Component 5), as pure functions.

The spec's decision #6 is "let the LLM decide"; this is the algorithmic fallback
for when a result set must shrink before it reaches the LLM (120 six-way results
-> the 75 that fit in the activation tiers), formula for formula.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TypeVar

from llama_consciousness.scoring.emotions import canonical_vector

__all__ = ["DEFAULT_BACKGROUND", "DEFAULT_FOCUS", "DEFAULT_PERIPHERAL", "activation_tiers",
           "calculate_emotional_similarity", "consciousness_adjusted_score", "cosine_similarity", "priority_score"]

T = TypeVar("T")

# The spec's tier boundaries: ranked[:5], ranked[5:25], ranked[25:75].
DEFAULT_FOCUS = 5
DEFAULT_PERIPHERAL = 20
DEFAULT_BACKGROUND = 50


def cosine_similarity(vec_a: Mapping[str, float] | None, vec_b: Mapping[str, float] | None) -> float:
    """The spec's Component 5b cosine of two sparse vectors keyed by name (as given), clamped to [0, 1].

    Keys are aligned over the union (a missing key is 0); an empty or zero vector gives 0.0.
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
    """Emotional resonance of a result with a query: cosine over canonical names ("excited" meets "excitement",
    because memories are written by many hands that name a feeling differently)."""
    return cosine_similarity(canonical_vector(dict(query_emotions or {})),
                             canonical_vector(dict(result_emotions or {})))


def priority_score(energy: float, reality_pressure: float = 0.5) -> float:
    """Luca's priority, ``energy*0.4 + reality_pressure*0.6``: external urgency outweighs internal energy."""
    return energy * 0.4 + reality_pressure * 0.6


def consciousness_adjusted_score(
    base_score: float,
    energy: float,
    confidence: float,
    emotional_resonance: float,
    metadata_completeness: float,
    reality_pressure: float = 0.5,
) -> float:
    """The spec's ``base + priority*0.4 + confidence*0.2 + resonance*0.5 - (1 - completeness)*0.1``.

    The base (the retriever's relevance) is not rescaled: with fused scores of a few hundredths the
    consciousness terms dominate the order, which is the spec's intent for this pre-LLM ranking.
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
    """A ranked list split into the spec's activation tiers (5 / 25 / 75 by default); the rest is in none."""
    for name, size in (("focus", focus), ("peripheral", peripheral), ("background", background)):
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"{name} must be an integer >= 0, got {size!r}")
    items = list(ranked)
    second = focus + peripheral
    return {"focus": items[:focus], "peripheral": items[focus:second], "background": items[second:second + background]}
