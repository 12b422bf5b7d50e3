"""Scores of state-based retrieval (decision #8), as pure functions.

A ``StateBasedRetrieval`` asks "what fits how I am right now?" instead of
"what do I know about X?".  Each of its four modes ranks memories by a score
built from the pieces below.  The Cypher of ``storage.state_queries``
computes the same numbers inside FalkorDB (so that ``ORDER BY ... LIMIT`` is
exact); these functions are the reference it is tested against, and where
the emotional similarity reported with each memory comes from.

Scores, all in [0, 1]:

``goal_match_score``
    How well a memory's ``goal`` matches the current goal:

    * exact: 1.0 when the two goals are the same string, else no match;
    * partial: 1.0 when equal after normalisation (:func:`normalise_goal`:
      lower case, ``_``, ``-`` and ASCII whitespace read as spaces, outer
      spaces trimmed); 0.8 when one contains the other; else ``0.6 *
      shared / terms``, where ``terms`` are the content words of the
      current goal (3+ letters, not stop words) and a term is shared when
      it occurs in the memory's normalised goal (so "design" meets
      "designing") or is one of the memory's ``concepts``.  A match needs
      at least :data:`MIN_PARTIAL_SCORE` (0.3, i.e. half the goal's terms;
      a goal's first 32 content words count).
    * semantic: exact matches (1.0), plus the cosine between the embedded
      goal text and the memory's embedding (its name and description) when
      at least the retriever's threshold; computed by the vector index.

    A current goal with nothing left once normalised ("___", "-", " - ")
    matches nothing under every strategy (0.0); the retriever takes it as no
    goal at all (:func:`effective_goal`).

``emotional_similarity``
    Cosine between emotion vectors over canonical names ("excited" meets
    "excitement"), see :func:`~llama_consciousness.scoring.ranking.calculate_emotional_similarity`.

``energy_proximity``
    ``1 - |current energy - memory energy|``.

``recency_weight``
    The spec's ``1 / (1 + days / 30)``: 1.0 today, 0.5 after 30 days.

Mode scores:

* find_related_unresolved: ``energy * goal_match`` (the spec orders by
  energy; with an exact goal every match has goal_match 1.0, so this *is*
  the spec's order).  Without a goal: ``energy * (0.5 + 0.5 * emotional
  similarity)``: all unfinished business, the emotionally resonant first.
* find_similar_state: ``emotional similarity * energy proximity``.
* find_what_i_was_doing: ``energy * recency_weight``.
* find_resolution_patterns: pattern similarity ``goal_match * emotional
  similarity`` (each factor only when the state has a goal / emotions).
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

RECENT_DAYS = 30
RECENCY_HORIZON_DAYS = 30.0
PARTIAL_CONTAINS_SCORE = 0.8
PARTIAL_TERMS_WEIGHT = 0.6
MIN_PARTIAL_SCORE = 0.3
MIN_TERM_LENGTH = 3
MAX_GOAL_TERMS = 32
NO_GOAL_BASE = 0.5

_WORD = re.compile(r"[a-z0-9]+")
_SECONDS_PER_DAY = 86400.0


# Read as a space by normalise_goal: the separators, and ASCII whitespace (the
# characters FalkorDB's string index and C's isspace() take for whitespace).
# storage.state_queries replaces each of them in Cypher: keep the two in step.
GOAL_SPACES = ("_", "-", "\t", "\n", "\r", "\v", "\f")
_GOAL_SPACE_TABLE = str.maketrans({c: " " for c in GOAL_SPACES})
# What makes Python's str.lower differ from FalkorDB's toLower (a simple,
# one code point to one code point mapping): the one multi-character
# lowercase of Unicode (U+0130, "İ" -> "i̇") and the final sigma ("Σ" at the
# end of a word -> "ς").  Mapped first, they leave str.lower equal to toLower.
_LOWER_LIKE_FALKORDB = str.maketrans({"\u0130": "i", "\u03a3": "\u03c3"})


def goal_lower(text: str) -> str:
    """``text`` lower-cased as FalkorDB's ``toLower`` does it (the goal key of both sides).

    FalkorDB maps each code point to its simple lower case: "İ" gives "i"
    (Python: "i̇", two code points) and a final "Σ" gives "σ" (Python: "ς").
    Those two mapped first, ``str.lower`` gives what ``toLower`` gives on
    every code point (checked code point by code point against the server,
    ``tests/retrievers/test_state_pushdown.py``).  Known limit: the two
    sides read case from their own Unicode tables (this Python's
    ``unicodedata.unidata_version`` vs the server's build), so a letter
    encoded in a later Unicode version than one of them knows may be
    lower-cased by one side only.
    """
    return text.translate(_LOWER_LIKE_FALKORDB).lower()


def normalise_goal(goal: str | None) -> str:
    """The goal as partial matching compares it; the Cypher of ``storage.state_queries`` computes the same.

    Lower case as FalkorDB's ``toLower`` (:func:`goal_lower`: "İ" -> "i",
    no final "ς", unlike ``str.lower``; the difference left is a letter newer
    than one side's Unicode tables), each of
    :data:`GOAL_SPACES` (``_``, ``-``, tab, newline, CR, VT, FF) read as a
    space, inner or outer, then outer *spaces* trimmed.  Nothing else: runs
    of spaces stay runs, other whitespace (no-break space, ...) stays as it
    is, as in the Cypher (whose ``trim`` strips spaces only).  A memory's
    goal carries no outer whitespace (``MemoryNode`` strips it), and the
    retriever strips the state's goal, so outer whitespace beyond the ASCII
    kind never reaches here from them.  An empty result (``"___"``,
    ``"-"``) means the goal says nothing to match on.
    """
    if goal is None:
        return ""
    return goal_lower(goal).translate(_GOAL_SPACE_TABLE).strip(" ")


def effective_goal(goal: str | None) -> str | None:
    """The current goal as retrieval uses it: stripped, or None when nothing is left once normalised.

    A goal like "___" or " - " normalises to the empty string, which every
    goal contains: it would match everything (or, in Cypher, every memory
    without a goal), so it counts as no goal at all.
    """
    if goal is None:
        return None
    goal = goal.strip()
    return goal if normalise_goal(goal) else None


def goal_terms(goal: str | None) -> list[str]:
    """The content words of a goal: 3+ characters, not stop words, in order, once each.

    At most :data:`MAX_GOAL_TERMS` (a goal is a phrase, not a document; the
    query asks one index lookup per term).
    """
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
    """How well ``memory_goal`` matches ``current_goal`` (0.0 = no match); see the module doc.

    For ``semantic`` pass the cosine the vector index measured as
    ``semantic_similarity`` (the memory's embedding is not at hand here).
    """
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


def epoch_seconds(value: datetime) -> int:
    """Seconds since 1970 of a stored time (what the Cypher computes from its components)."""
    return int(to_utc(value).replace(microsecond=0).timestamp())
