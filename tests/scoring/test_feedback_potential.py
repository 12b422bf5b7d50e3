"""The size-independent energy feedback potential (``scoring.energy.feedback_potential``): pure."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from llama_consciousness.scoring.energy import apply_energy_feedback, feedback_potential, item_feedback


def item(energy=0.5, coefficient=0.5, state="in_progress", emotions=None, confidence=None):
    return SimpleNamespace(energy=energy, energy_transfer_coefficient=coefficient, resolution_state=state,
                           emotion_vector=emotions, confidence=confidence)


def test_a_neutral_retrieval_moves_nothing() -> None:
    assert item_feedback(item()) == 0.0
    assert feedback_potential([item()] * 7) == 0.5
    assert feedback_potential([]) == 0.5
    assert apply_energy_feedback(0.42, feedback_potential([item()])) == pytest.approx(0.42)


def test_energising_resolved_high_confidence_memories_raise_energy() -> None:
    resolved = item(energy=0.9, coefficient=0.8, state="resolved", emotions={"pride": 0.8}, confidence=0.95)
    assert feedback_potential([resolved]) > 0.5
    assert apply_energy_feedback(0.5, feedback_potential([resolved])) > 0.5


def test_flat_memories_lower_it_and_blocked_ones_move_it_most() -> None:
    assert feedback_potential([item(energy=0.1, coefficient=0.3)]) < 0.5
    kwargs = dict(energy=0.9, coefficient=0.8, emotions={"frustration": 0.9})
    blocked, progress, resolved = (feedback_potential([item(state=s, **kwargs)])
                                   for s in ("blocked", "in_progress", "resolved"))
    assert blocked > progress > resolved > 0.5


def test_the_number_retrieved_does_not_matter_confidence_weighs() -> None:
    strong = item(energy=0.9, emotions={"joy": 0.9})
    assert feedback_potential([strong]) == pytest.approx(feedback_potential([strong] * 40))
    flat = item(energy=0.1)
    sure, unsure = item(energy=0.9, emotions={"joy": 0.9}, confidence=1.0), item(energy=0.1, confidence=0.1)
    assert feedback_potential([sure, unsure]) > feedback_potential([strong, flat])  # the unsure flat one counts less
    assert feedback_potential([item(energy=0.1, confidence=0.0)]) == 0.5  # no confidence: no weight at all


def test_memories_count_with_the_default_coefficient_and_values_stay_in_range() -> None:
    memory = SimpleNamespace(energy=1.0, resolution_state="blocked", emotion_vector={"a": 5.0}, confidence=1.0)
    assert item_feedback(memory) == pytest.approx(1.5 * (1.0 * 0.5 * 2.0 / 0.25 - 1.0))  # emotion capped at 2
    assert 0.5 < feedback_potential([memory]) <= 1.0
    assert 0.0 <= feedback_potential([item(energy=0.0, coefficient=0.0, state="blocked")]) < 0.5


def test_a_feeling_never_turns_an_energising_memory_into_a_draining_one() -> None:
    plain = item(energy=0.9, coefficient=0.5)
    felt = item(energy=0.9, coefficient=0.5, emotions={"joy": 0.3})
    assert feedback_potential([plain]) > 0.5 and feedback_potential([felt]) >= feedback_potential([plain])
