"""Consciousness-aware ranking formulas (spec Component 5) and activation tiers, checked against hand computation."""

from __future__ import annotations

import math

import pytest

from llama_consciousness.scoring.ranking import (
    activation_tiers,
    calculate_emotional_similarity,
    consciousness_adjusted_score,
    cosine_similarity,
    priority_score,
)

# Spec example: {"excited": 0.8, "cautious": 0.3} . {"excitement": 0.7, "caution": 0.4, "fear": 0.2}
SPEC_COSINE = (0.8 * 0.7 + 0.3 * 0.4) / (math.sqrt(0.8**2 + 0.3**2) * math.sqrt(0.7**2 + 0.4**2 + 0.2**2))


def test_cosine_similarity_is_the_specs():
    assert cosine_similarity({"a": 1.0}, {"a": 0.3}) == pytest.approx(1.0)
    assert cosine_similarity({"a": 1.0}, {"b": 1.0}) == 0.0
    assert cosine_similarity({}, {"a": 1.0}) == 0.0
    assert cosine_similarity(None, None) == 0.0
    assert cosine_similarity({"a": 0.0}, {"a": 1.0}) == 0.0  # zero magnitude
    assert cosine_similarity({"a": -1.0}, {"a": 1.0}) == 0.0  # negative clamped
    got = cosine_similarity({"frustration": 0.7, "determination": 0.6}, {"frustration": 0.8, "excitement": 0.5})
    assert got == pytest.approx(0.56 / (math.sqrt(0.85) * math.sqrt(0.89)))


def test_spec_emotion_example_resonates_through_canonical_names():
    query = {"excited": 0.8, "cautious": 0.3}
    result = {"excitement": 0.7, "caution": 0.4, "fear": 0.2}
    got = calculate_emotional_similarity(query, result)
    # The spec's docstring says "0.92 (high resonance)"; the cosine it specifies gives 0.958.
    assert got == pytest.approx(SPEC_COSINE)
    assert got == pytest.approx(0.9581, abs=1e-4)
    assert got > 0.9
    assert cosine_similarity(query, result) == 0.0  # raw names never meet
    assert calculate_emotional_similarity(query, {}) == 0.0
    # two names of one feeling keep the stronger intensity, they do not add up
    assert calculate_emotional_similarity({"excited": 0.8, "excitement": 0.2}, {"excitement": 1.0}) == 1.0


def test_priority_and_adjusted_score_by_hand():
    assert priority_score(0.8, 0.5) == pytest.approx(0.32 + 0.30)
    assert priority_score(1.0, 0.0) == pytest.approx(0.4)
    assert priority_score(0.0, 1.0) == pytest.approx(0.6)
    # base 0.5, energy 0.8, confidence 0.9, resonance 0.6, completeness 0.75, pressure 0.5:
    # 0.5 + 0.62*0.4 + 0.9*0.2 + 0.6*0.5 - 0.25*0.1 = 0.5 + 0.248 + 0.18 + 0.3 - 0.025
    assert consciousness_adjusted_score(0.5, 0.8, 0.9, 0.6, 0.75) == pytest.approx(1.203)
    # external pressure raises every memory equally (0.6 * 0.4 * dp)
    assert consciousness_adjusted_score(0.5, 0.8, 0.9, 0.6, 0.75, reality_pressure=1.0) == pytest.approx(1.203 + 0.12)
    assert consciousness_adjusted_score(0.0, 0.0, 0.0, 0.0, 0.0, reality_pressure=0.0) == pytest.approx(-0.1)


@pytest.mark.parametrize(
    ("count", "sizes"),
    [(0, (0, 0, 0)), (4, (4, 0, 0)), (5, (5, 0, 0)), (25, (5, 20, 0)), (75, (5, 20, 50)), (200, (5, 20, 50))],
)
def test_activation_tiers_sizes(count, sizes):
    ranked = list(range(count))
    tiers = activation_tiers(ranked)
    assert list(tiers) == ["focus", "peripheral", "background"]
    assert tuple(len(tiers[t]) for t in tiers) == sizes
    assert tiers["focus"] == ranked[:5]
    assert tiers["peripheral"] == ranked[5:25]
    assert tiers["background"] == ranked[25:75]


def test_activation_tiers_custom_sizes_and_validation():
    assert activation_tiers(range(10), 2, 3, 4) == {"focus": [0, 1], "peripheral": [2, 3, 4],
                                                    "background": [5, 6, 7, 8]}
    assert activation_tiers(range(3), 0, 0, 0) == {"focus": [], "peripheral": [], "background": []}
    for bad in ({"focus": -1}, {"peripheral": -2}, {"background": 1.5}, {"focus": True}):
        with pytest.raises(ValueError):
            activation_tiers(range(3), **bad)
