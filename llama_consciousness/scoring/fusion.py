"""Rank fusion of channel results, keyed by memory id.

LlamaIndex's ``QueryFusionRetriever`` ignores its weights, fixes k = 60 and
merges by a hash of text and metadata; a memory found by the vector and the
graph channel must instead merge by *id* and keep both sources.  Weighted
reciprocal rank fusion (Cormack et al.): each list contributes
``weight / (k + rank)`` to every item it holds.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

T = TypeVar("T", bound=Hashable)

# Spec 002's hybrid search: 70% vector, 30% keyword.
WEIGHTS_70_30 = {"vector": 0.7, "keyword": 0.3, "graph": 0.3}


def weighted_rrf(
    ranked_lists: Mapping[str, Sequence[T]], weights: Mapping[str, float] | None = None, k: int = 60
) -> list[tuple[T, float]]:
    """Fuse named ranked lists of ids; returns ``(id, score)`` best first.

    A list missing from ``weights`` has weight 1.  Ties keep first-seen order
    (list order, then rank), so the result is deterministic.
    """
    if k < 0:
        raise ValueError(f"rrf k must be >= 0, got {k}")
    scores: dict[T, float] = {}
    order: dict[T, int] = {}
    for name, items in ranked_lists.items():
        weight = 1.0 if weights is None else float(weights.get(name, 1.0))
        seen: set[T] = set()
        for rank, item in enumerate(items, start=1):
            if item in seen:
                continue  # a list counts an item once, at its best rank
            seen.add(item)
            scores[item] = scores.get(item, 0.0) + weight / (k + rank)
            order.setdefault(item, len(order))
    return sorted(scores.items(), key=lambda kv: (-kv[1], order[kv[0]]))


def weighted_score_fusion(
    scored_lists: Mapping[str, Sequence[tuple[T, float]]], weights: Mapping[str, float] | None = None
) -> list[tuple[T, float]]:
    """Fuse named lists of ``(id, score)`` by their scores; returns ``(id, score)`` best first.

    Each list's scores are scaled to [0, 1] (min-max; a list whose scores
    are all equal gives 1.0 to each), weighted, and summed per id.  Unlike
    rank fusion this keeps the gaps: a keyword hit matching four rare words
    of the question stays far ahead of one matching a common word, and a
    weak channel cannot lift its tenth hit over a strong channel's second.
    A list missing from ``weights`` has weight 1; every id of every list is
    returned (weight 0 contributes nothing but keeps the id).  Ties keep
    first-seen order.
    """
    scores: dict[T, float] = {}
    order: dict[T, int] = {}
    for name, items in scored_lists.items():
        weight = 1.0 if weights is None else float(weights.get(name, 1.0))
        if weight < 0:
            raise ValueError(f"weight of {name!r} must be >= 0, got {weight}")
        if not items:
            continue
        values = [float(score) for _, score in items]
        low, high = min(values), max(values)
        seen: set[T] = set()
        for (item, _), value in zip(items, values):
            if item in seen:
                continue
            seen.add(item)
            scaled = (value - low) / (high - low) if high > low else 1.0
            scores[item] = scores.get(item, 0.0) + weight * scaled
            order.setdefault(item, len(order))
    return sorted(scores.items(), key=lambda kv: (-kv[1], order[kv[0]]))


def path_relevance(path_energy: float, max_depth: int) -> float:
    """A graph hit's relevance: its path's summed link energy over the most it could be, in [0, 1].

    Monotonic in the spec's ranking key (summed path energy), so graph
    results keep their order when read by score.
    """
    return max(0.0, min(1.0, path_energy / max(max_depth, 1)))
