"""Fusion of channel results, keyed by memory id.

LlamaIndex's ``QueryFusionRetriever`` ignores its weights, fixes k = 60 and
merges by a hash of text and metadata; a memory found by the vector and the
graph channel must instead merge by *id* and keep both sources.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

T = TypeVar("T", bound=Hashable)


def _summed(contributions: Iterable[Iterable[tuple[T, float]]]) -> list[tuple[T, float]]:
    """Each list's contributions summed per id (a list counts an id once, its first time), best first;
    ties keep first-seen order, so the result is deterministic."""
    scores: dict[T, float] = {}
    order: dict[T, int] = {}
    for items in contributions:
        seen: set[T] = set()
        for item, value in items:
            if item not in seen:
                seen.add(item)
                scores[item] = scores.get(item, 0.0) + value
                order.setdefault(item, len(order))
    return sorted(scores.items(), key=lambda kv: (-kv[1], order[kv[0]]))


def weighted_rrf(
    ranked_lists: Mapping[str, Sequence[T]], weights: Mapping[str, float] | None = None, k: int = 60
) -> list[tuple[T, float]]:
    """Weighted reciprocal rank fusion (Cormack et al.) of named ranked lists of ids: each list adds
    ``weight / (k + rank)`` to every id it holds (a list missing from ``weights`` has weight 1)."""
    if k < 0:
        raise ValueError(f"rrf k must be >= 0, got {k}")
    return _summed(
        [(item, (1.0 if weights is None else float(weights.get(name, 1.0))) / (k + rank))
         for rank, item in enumerate(items, start=1)]
        for name, items in ranked_lists.items()
    )


def weighted_score_fusion(
    scored_lists: Mapping[str, Sequence[tuple[T, float]]], weights: Mapping[str, float] | None = None
) -> list[tuple[T, float]]:
    """Fuse named lists of ``(id, score)`` by their scores; returns ``(id, score)`` best first.

    Each list's scores are scaled to [0, 1] (min-max; all equal: 1.0 each), weighted and summed per id.
    Unlike rank fusion this keeps the gaps: a keyword hit matching four rare words stays far ahead of
    one matching a common word.  A list missing from ``weights`` has weight 1; weight 0 keeps the ids.
    """
    contributions = []
    for name, items in scored_lists.items():
        weight = 1.0 if weights is None else float(weights.get(name, 1.0))
        if weight < 0:
            raise ValueError(f"weight of {name!r} must be >= 0, got {weight}")
        values = [float(score) for _, score in items]
        low, high = min(values, default=0.0), max(values, default=0.0)
        contributions.append([(item, weight * ((value - low) / (high - low) if high > low else 1.0))
                              for (item, _), value in zip(items, values)])
    return _summed(contributions)


def path_relevance(path_energy: float, max_depth: int) -> float:
    """A graph hit's relevance: its path's summed link energy over the most it could be, in [0, 1]
    (monotonic in the spec's ranking key, so graph results keep their order when read by score)."""
    return max(0.0, min(1.0, path_energy / max(max_depth, 1)))


def later_first(ranked: list[tuple[str, float]], successor: Callable[[str], str | None]) -> list[tuple[str, float]]:
    """``ranked`` with each memory that a later one may replace (``successor(key)``: the later one's key, a
    POSSIBLY_SUPERSEDES pair) moved just below that later one when both are in the list, at its score, so
    that scores still never increase down the list.  A possibly outdated memory must not outrank the
    statement that may have replaced it; without that statement in the list it stays where it is."""
    position = {key: i for i, (key, _) in enumerate(ranked)}
    moved: dict[str, list[str]] = {}
    for key, _ in ranked:
        later = successor(key)
        if later is not None and later in position and position[later] > position[key]:
            moved.setdefault(later, []).append(key)
    if not moved:
        return ranked
    gone = {key for keys in moved.values() for key in keys}
    out: list[tuple[str, float]] = []

    def place(key: str, score: float) -> None:
        out.append((key, score))
        for earlier in moved.get(key, ()):
            place(earlier, score)

    for key, score in ranked:
        if key not in gone:
            place(key, score)
    return out
