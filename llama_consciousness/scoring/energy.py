"""Energy feedback (the spec's Component 5c): the spec's formulas as specified, and the potential the package applies.

Retrieved relationships can re-activate a citizen's energy: blocked work
pulls hardest (x1.5), work in progress fully (x1.0), resolved work little
(x0.3); emotional intensity amplifies the transfer up to 2x.  The sum is
normalised by 150 (50 relationships x energy 1 x blocked 1.5 x emotion 2).
"""

from __future__ import annotations

import math
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
    return max(0.0, min(1.0, citizen_current_energy + energy_feedback_delta(stream_feedback_potential,
                                                                            feedback_weight)))


def energy_feedback_delta(stream_feedback_potential: float, feedback_weight: float = 0.3) -> float:
    """What ``apply_energy_feedback`` adds to the energy before clamping (for a store that adds it in its
    own write, so that concurrent feedback all counts)."""
    return (stream_feedback_potential - 0.5) * feedback_weight


# ---------------------------------------------------------------------------
# Feedback that does not depend on how much was retrieved
# ---------------------------------------------------------------------------

NEUTRAL_DRIVE = 0.5 * 0.5 * 1.0
"""A neutral item's energy x coefficient x emotion: energy 0.5, the spec's default coefficient 0.5, no emotion."""
DEFAULT_COEFFICIENT = 0.5
"""A memory carries no transfer coefficient; the spec's default for new relationships stands in."""


def item_feedback(item: Any) -> float:
    """One retrieved item's signed push on energy: positive when it energises, negative when it is flat.

    The spec's transfer factors, arranged so that their intent holds for any
    item: energy x coefficient x emotional amplification against a neutral
    item's gives the direction (above neutral energises).  The amplification
    is 1 + the emotions' summed intensity, at most 2: the spec caps it at 2
    but counts a weak emotion (0.3) below none at all (1), which would turn
    an energising memory that has a feeling into a draining one.  The
    resolution state scales how much of it reaches the citizen (blocked 1.5,
    in progress 1.0, resolved 0.3: closure moves little, frustration most).
    A memory has no coefficient: ``DEFAULT_COEFFICIENT``.
    """
    energy = float(getattr(item, "energy", 0.0) or 0.0)
    coefficient = getattr(item, "energy_transfer_coefficient", None)
    coefficient = DEFAULT_COEFFICIENT if coefficient is None else float(coefficient)
    emotions = getattr(item, "emotion_vector", None)
    emotion = 1.0 + min(max(sum(emotions.values()), 0.0), EMOTION_CAP - 1.0) if emotions else 1.0
    state = RESOLUTION_MULTIPLIER.get(getattr(item, "resolution_state", None), 1.0)
    return state * (energy * coefficient * emotion / NEUTRAL_DRIVE - 1.0)


def feedback_potential(items: Iterable[Any]) -> float:
    """How much what was retrieved re-energises, in [0, 1]; 0.5 moves nothing.

    Why not the spec's ``calculate_energy_feedback_potential``: it sums the
    transfers and divides by 150 (50 relationships at their maximum), so a
    usual stream of ten relationships sits near 0.03 whatever they hold, and
    ``apply_energy_feedback`` then always lowers energy (0.70 -> 0.56 for the
    spec's S6 example).  Here each item's ``item_feedback`` is averaged (not
    summed: the number retrieved says nothing about how they feel), weighted
    by its confidence (an unsure memory moves the citizen less), and mapped
    to [0, 1] around 0.5 by ``tanh``: energising memories raise energy,
    resolved ones a little, blocked ones most; flat ones lower it.  With no
    items (or none with confidence), 0.5.
    """
    total = weight = 0.0
    for item in items:
        confidence = getattr(item, "confidence", None)
        w = 1.0 if confidence is None else max(0.0, min(1.0, float(confidence)))
        total += w * item_feedback(item)
        weight += w
    if weight == 0.0:
        return 0.5
    return 0.5 + 0.5 * math.tanh(total / weight)
