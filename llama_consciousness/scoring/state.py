"""Scores of state-based retrieval (decision #8), as pure functions, all in [0, 1].

The Cypher of ``storage.state_queries`` computes the same numbers inside FalkorDB
(so that ``ORDER BY ... LIMIT`` is exact); these are the reference it is tested
against.  Goal matching (:func:`goal_match_score`): ``exact`` is the same string;
``partial`` is 1.0 when equal once normalised (:func:`normalise_goal`), 0.8 when
one contains the other, else 0.6 x the share of the goal's content words found in
the memory's goal or ``concepts`` (a match needs :data:`MIN_PARTIAL_SCORE`, half
the words); ``semantic`` is an exact match or the vector index's cosine.  A goal
with nothing left once normalised ("___") is no goal at all (:func:`effective_goal`).

Mode scores: find_related_unresolved ``energy * goal_match`` (without a goal
``energy * (0.5 + 0.5 * emotional similarity)``); find_similar_state
``emotional similarity * energy proximity``; find_what_i_was_doing ``energy *
recency_weight``; find_resolution_patterns ``goal_match * emotional similarity``
(each factor only when the state has it).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Literal

from llama_consciousness.schema._time import to_utc
from llama_consciousness.scoring.cognitive import STOP_WORDS
from llama_consciousness.scoring.emotions import canonical_vector
from llama_consciousness.scoring.ranking import calculate_emotional_similarity

GoalMatch = Literal["exact", "partial", "semantic"]
GOAL_MATCHES: tuple[str, ...] = ("exact", "partial", "semantic")

RECENCY_HORIZON_DAYS = 30.0
PARTIAL_CONTAINS_SCORE = 0.8
PARTIAL_TERMS_WEIGHT = 0.6
MIN_PARTIAL_SCORE = 0.3
MIN_TERM_LENGTH = 3
MAX_GOAL_TERMS = 32
NO_GOAL_BASE = 0.5

_WORD = re.compile(r"[a-z0-9]+")
_SECONDS_PER_DAY = 86400.0


# Read as a space by normalise_goal: the separators and ASCII whitespace (what FalkorDB's
# string index takes for whitespace); storage.state_queries replaces each in Cypher: keep them in step.
GOAL_SPACES = ("_", "-", "\t", "\n", "\r", "\v", "\f")
_GOAL_SPACE_TABLE = str.maketrans({c: " " for c in GOAL_SPACES})
# Where str.lower differs from FalkorDB's one-to-one toLower: "İ" (Python: two code points)
# and a final "Σ" (Python: "ς").  Mapped first, they leave str.lower equal to toLower.
_LOWER_LIKE_FALKORDB = str.maketrans({"\u0130": "i", "\u03a3": "\u03c3"})


def goal_lower(text: str) -> str:
    """``text`` lower-cased as FalkorDB's ``toLower`` does it (the goal key of both sides).

    Checked code point by code point against the server (``tests/retrievers/test_state_pushdown.py``).
    Known limit: each side reads its own Unicode tables, so a letter newer than one of them knows
    may be lower-cased by one side only.
    """
    return text.translate(_LOWER_LIKE_FALKORDB).lower()


def normalise_goal(goal: str | None) -> str:
    """The goal as partial matching compares it (the Cypher of ``storage.state_queries`` computes the same).

    :func:`goal_lower`, each of :data:`GOAL_SPACES` read as a space, then outer *spaces* trimmed; nothing
    else (runs of spaces and other whitespace stay, as in the Cypher, whose ``trim`` strips spaces only).
    """
    if goal is None:
        return ""
    return goal_lower(goal).translate(_GOAL_SPACE_TABLE).strip(" ")


def effective_goal(goal: str | None) -> str | None:
    """The current goal stripped, or None when nothing is left once normalised (every goal contains "")."""
    if goal is None:
        return None
    goal = goal.strip()
    return goal if normalise_goal(goal) else None


def goal_terms(goal: str | None) -> list[str]:
    """The content words of a goal: 3+ characters, not stop words, in order, once each, at most
    :data:`MAX_GOAL_TERMS` (the query asks one index lookup per term)."""
    out: list[str] = []
    for word in _WORD.findall(normalise_goal(goal)):
        if len(word) >= MIN_TERM_LENGTH and word not in STOP_WORDS and word not in out:
            out.append(word)
            if len(out) >= MAX_GOAL_TERMS:
                break
    return out


def goal_match_score(
    current_goal: str | None,
    memory_goal: str | None,
    concepts: Iterable[str] = (),
    strategy: GoalMatch = "partial",
    *,
    semantic_similarity: float | None = None,
) -> float:
    """How well ``memory_goal`` matches ``current_goal`` (0.0 = no match; ``semantic``: pass the index's cosine)."""
    if strategy not in GOAL_MATCHES:
        raise ValueError(f"goal match must be one of {GOAL_MATCHES}, got {strategy!r}")
    wanted = normalise_goal(current_goal)
    if not wanted:  # no goal, or one with nothing to match on ("___"): matches nothing
        return 0.0
    exact = memory_goal is not None and memory_goal == current_goal
    if strategy == "exact":
        return 1.0 if exact else 0.0
    if strategy == "semantic":
        return 1.0 if exact else max(0.0, float(semantic_similarity or 0.0))
    mine = normalise_goal(memory_goal)
    if exact or mine == wanted:
        return 1.0
    if len(mine) >= MIN_TERM_LENGTH and (wanted in mine or mine in wanted):
        return PARTIAL_CONTAINS_SCORE
    terms = goal_terms(current_goal)
    if not terms:
        return 0.0
    have = set(concepts)
    shared = sum(1 for t in terms if t in mine or t in have)
    return PARTIAL_TERMS_WEIGHT * shared / len(terms)


def goal_matches(score: float, strategy: GoalMatch, semantic_threshold: float = 0.0) -> bool:
    """Whether a goal score counts as a match under ``strategy``."""
    if strategy == "exact":
        return score >= 1.0
    if strategy == "partial":
        return score >= MIN_PARTIAL_SCORE - 1e-9
    return score >= semantic_threshold


def emotion_query(emotions: Mapping[str, float] | None) -> tuple[dict[str, float], float]:
    """The state's emotions by canonical name, and their norm (Cypher parameters)."""
    vector = canonical_vector(dict(emotions or {}))
    return vector, math.sqrt(sum(v * v for v in vector.values()))


def emotional_similarity(current: Mapping[str, float] | None, memory: Mapping[str, float] | None) -> float:
    """Cosine over canonical emotion names, in [0, 1] (intensities are never negative)."""
    return calculate_emotional_similarity(current, memory)


def energy_proximity(current_energy: float, memory_energy: float) -> float:
    return max(0.0, 1.0 - abs(float(current_energy) - float(memory_energy)))


def similar_state_score(emotion_similarity: float, current_energy: float, memory_energy: float) -> float:
    return emotion_similarity * energy_proximity(current_energy, memory_energy)


def days_ago(created_at: datetime, now: datetime) -> float:
    """Days from ``created_at`` to ``now`` (never negative), at the store's one-second resolution."""
    then = to_utc(created_at).replace(microsecond=0)
    at = to_utc(now).replace(microsecond=0)
    return max(0.0, (at - then).total_seconds() / _SECONDS_PER_DAY)


def recency_weight(days: float, horizon_days: float = RECENCY_HORIZON_DAYS) -> float:
    """The spec's ``1 / (1 + days / 30)``."""
    return 1.0 / (1.0 + max(0.0, days) / horizon_days)


def doing_score(energy: float, days: float) -> float:
    """find_what_i_was_doing: energy x recency."""
    return energy * recency_weight(days)


def unresolved_score(energy: float, goal_score: float | None, emotion_similarity: float = 0.0) -> float:
    """find_related_unresolved: energy x goal match (no goal: x (0.5 + 0.5 x emotional similarity))."""
    if goal_score is None:
        return energy * (NO_GOAL_BASE + (1.0 - NO_GOAL_BASE) * emotion_similarity)
    return energy * goal_score


def pattern_similarity(goal_score: float | None, emotion_similarity: float | None) -> float:
    """find_resolution_patterns: how much a past resolved state looks like the current one."""
    score = 1.0
    if goal_score is not None:
        score *= goal_score
    if emotion_similarity is not None:
        score *= emotion_similarity
    return score


