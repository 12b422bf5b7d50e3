"""Energy feedback (the spec's Component 5c), exactly as specified.

Retrieved relationships can re-activate a citizen's energy: blocked work
pulls hardest (x1.5), work in progress fully (x1.0), resolved work little
(x0.3); emotional intensity amplifies the transfer up to 2x.  The sum is
normalised by 150 (50 relationships x energy 1 x blocked 1.5 x emotion 2).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

RESOLUTION_MULTIPLIER = {"resolved": 0.3, "in_progress": 1.0, "blocked": 1.5}
EMOTION_CAP = 2.0
NORMALISER = 150.0


def relationship_transfer(relationship: Any) -> float:
    """One relationship's transfer potential (energy x coefficient x state x emotion)."""
    base = relationship.energy * relationship.energy_transfer_coefficient
    state = RESOLUTION_MULTIPLIER.get(relationship.resolution_state, 1.0)
    if relationship.emotion_vector:
        emotion = min(sum(relationship.emotion_vector.values()), EMOTION_CAP)
    else:
        emotion = 1.0
    return base * state * emotion


def calculate_energy_feedback_potential(relationships: Iterable[Any]) -> float:
    """How much the retrieved relationships might re-activate energy, in [0, 1].

    Takes the relationships of a stream (``stream.levels[*].relationships``)
    rather than the stream, so it works before the stream exists.
    """
    total = sum(relationship_transfer(r) for r in relationships)
    return min(total / NORMALISER, 1.0)


def apply_energy_feedback(
    citizen_current_energy: float, stream_feedback_potential: float, feedback_weight: float = 0.3
) -> float:
    """The citizen's energy after feedback: up when potential > 0.5, down below, clamped."""
    energy_delta = (stream_feedback_potential - 0.5) * feedback_weight
    return max(0.0, min(1.0, citizen_current_energy + energy_delta))
