"""Spreading activation (the spec's "Hybrid Spreading Activation"), as pure functions.

Activation starts at the memories a question found (vector and keyword hits,
with their scores scaled to [0, 1]) and flows along links: what a memory
passes to a neighbour is its own activation x the link's traversal
probability (spec 5b) x a decay per hop, shared out when the memory has more
links than are followed (the fan effect of ACT-R: a hub that every memory
links to says little about any of them).  A memory keeps the most it
received, and the path that brought it.

There is no fixed depth.  Each memory expanded spends its activation from a
budget; spreading stops when the budget is spent, or when nothing left to
expand carries at least the threshold.  A strong start goes far, a weak one
stays near.  The graph is read one hop at a time (``storage.spreading``);
this module only decides.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Activated", "SpreadSettings", "next_frontier", "scaled_to_best", "seed_activations", "spread_hop"]


@dataclass(frozen=True)
class SpreadSettings:
    """How far activation goes: ``decay`` per hop, the ``threshold`` a memory must reach to count (and to
    spread further), the ``budget`` of activation that expansions may spend, ``fanout`` links followed per
    memory (strongest first), and ``max_hops`` as a safety net only."""

    decay: float = 0.5
    threshold: float = 0.05
    budget: float = 4.0
    fanout: int = 10
    max_hops: int = 8

    def __post_init__(self) -> None:
        if not 0.0 < self.decay <= 1.0:
            raise ValueError(f"decay must be in (0, 1], got {self.decay!r}")
        if not 0.0 < self.threshold < 1.0:
            raise ValueError(f"threshold must be in (0, 1), got {self.threshold!r}")
        if not self.budget > 0.0:
            raise ValueError(f"budget must be positive, got {self.budget!r}")
        if not 1 <= self.fanout <= 1000 or not 1 <= self.max_hops <= 64:
            raise ValueError("fanout must be in [1, 1000] and max_hops in [1, 64]")


@dataclass
class Activated:
    """A memory's activation (what it started with plus all it received), the seed of its strongest incoming
    share and that share's path (links, in order; empty for a seed nothing added to), whether it fired, and
    what it ``received`` over links alone: the graph channel ranks by that (a hit's own score is its
    channel's; what the graph adds is how strongly the other hits point to a memory)."""

    node_id: str
    activation: float
    seed: str
    path: list[Any] = field(default_factory=list)
    best_share: float = 0.0
    fired: bool = False
    received: float = 0.0  # what links brought (the activation less its own seed score)
    trail: tuple[str, ...] = ()  # the memories the strongest share passed through, the seed first


def scaled_to_best(scored: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """One channel's ``(id, score)`` over its best score (its top hit starts at full activation): channels
    score on different scales (cosine, BM25).  Nothing positive: nothing."""
    top = max((s for _, s in scored), default=0.0)
    return [(i, max(0.0, s) / top) for i, s in scored] if top > 0 else []


def seed_activations(scored: Iterable[tuple[str, float]]) -> dict[str, Activated]:
    """The starting memories, each at its best score over the best of all (so the strongest starts at 1)."""
    best: dict[str, float] = {}
    for node_id, score in scored:
        if score > best.get(node_id, float("-inf")):
            best[node_id] = float(score)
    if not best:
        return {}
    top = max(best.values())
    low = min(0.0, min(best.values()))
    span = (top - low) or 1.0
    return {i: Activated(i, max(0.0, min(1.0, (s - low) / span)), i, trail=(i,)) for i, s in best.items()}


def next_frontier(state: Mapping[str, Activated], spent: float, settings: SpreadSettings) -> tuple[list[str], float]:
    """The memories that fire next: not yet fired, at least the threshold, strongest first, as many as the
    remaining budget pays for (each costs its activation; the first one is always paid); the new total."""
    ready = sorted((a for a in state.values() if not a.fired and a.activation >= settings.threshold),
                   key=lambda a: (-a.activation, a.node_id))
    paid = []
    for a in ready:
        if spent >= settings.budget or (paid and spent + a.activation > settings.budget):
            break
        paid.append(a.node_id)
        spent += a.activation
    return paid, spent


def spread_hop(
    state: dict[str, Activated],
    frontier: list[str],
    links: Mapping[str, tuple[int, list[tuple[str, Any]]]],
    probability: Callable[[Any], float],
    settings: SpreadSettings,
) -> None:
    """The frontier fires, once each: every memory passes its activation x decay x the link's traversal
    probability x its fan share (``fanout`` / its number of links, at most 1) to each neighbour over the
    followed links (``links[id]``: its number of links in all, and ``(neighbour id, link)`` of the strongest
    ``fanout``).  Shares add up; a neighbour's path is that of its strongest share; a share never goes
    back to a memory on its own trail.  Updates ``state``."""
    for source in frontier:
        here = state[source]
        here.fired = True
        degree, followed = links.get(source, (0, []))
        fan = min(1.0, settings.fanout / degree) if degree else 1.0
        for neighbour, link in followed:
            share = here.activation * settings.decay * probability(link) * fan
            if share < settings.threshold / 10:  # crumbs: not worth a path
                continue
            trail = here.trail or (source,)
            if neighbour in trail:
                continue  # no echo: a share never returns to a memory it came through (its seed included)
            there = state.get(neighbour)
            if there is None:
                there = state[neighbour] = Activated(neighbour, 0.0, here.seed)
            there.activation += share
            there.received += share
            if share > there.best_share:
                there.best_share, there.seed, there.path = share, here.seed, [*here.path, link]
                there.trail = (*trail, neighbour)
