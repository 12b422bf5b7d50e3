"""Assembling the consciousness stream from the channels' results (postprocessors extend it later)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime

from llama_consciousness.schema import (
    ConsciousnessLevelResults,
    ConsciousnessNode,
    ConsciousnessRelationship,
    ConsciousnessStream,
    ConsciousnessSummary,
)
from llama_consciousness.schema._time import utcnow
from llama_consciousness.schema.stream import LEVEL_KEYS
from llama_consciousness.scoring.emotions import canonical_vector
from llama_consciousness.scoring.energy import calculate_energy_feedback_potential
from llama_consciousness.temporal import TemporalWindow, is_visible


def _unique(nodes: Iterable[ConsciousnessNode]) -> dict[str, ConsciousnessNode]:
    """Each memory once (its first node), in order."""
    out: dict[str, ConsciousnessNode] = {}
    for node in nodes:
        out.setdefault(node.node_id, node)
    return out


def emotional_themes(nodes: Iterable[ConsciousnessNode], top: int = 5) -> list[str]:
    """The emotions carrying most intensity across ``nodes`` (canonical names)."""
    weight: Counter[str] = Counter()
    for node in nodes:
        for name, value in canonical_vector(node.emotion_vector).items():
            weight[name] += value
    return [name for name, _ in sorted(weight.items(), key=lambda kv: (-kv[1], kv[0]))[:top]]


def generate_consciousness_summary(
    levels: dict[str, ConsciousnessLevelResults], retrieved_at: datetime | None = None
) -> ConsciousnessSummary:
    """The spec's summary; ``active_vs_historical_ratio`` is the share of memories current right now (1.0 for a
    current-mode retrieval, lower when evolution or history brings superseded versions)."""
    at = retrieved_at or utcnow()
    per_level = {key: _unique([*r.vector_results, *r.graph_results, *r.keyword_results]) for key, r in levels.items()}
    nodes = list(_unique(n for found in per_level.values() for n in found.values()).values())
    counts = {key: len(per_level.get(key, ())) for key in LEVEL_KEYS.values()}
    now = TemporalWindow(now=at)
    total = len(nodes)
    return ConsciousnessSummary(
        dominant_energy=sum(n.energy for n in nodes) / total if total else 0.0,
        emotional_themes=emotional_themes(nodes),
        confidence_average=sum(n.confidence for n in nodes) / total if total else 0.0,
        earliest_memory=min((n.created_at for n in nodes), default=at),
        latest_memory=max((n.created_at for n in nodes), default=at),
        n1_result_count=counts["n1_personal"],
        n2_result_count=counts["n2_collective"],
        n3_result_count=counts["n3_ecosystem"],
        total_results=total,
        active_vs_historical_ratio=sum(1 for n in nodes if is_visible(now, n)) / total if total else 1.0,
    )


def assemble_stream(
    intention_id: str,
    levels: dict[str, ConsciousnessLevelResults],
    *,
    retrieved_at: datetime,
    latency_ms: int,
    query_count: int,
) -> ConsciousnessStream:
    """The stream of one retrieval (postprocessors fill tiers, graph, dissonances)."""
    return ConsciousnessStream(
        intention_id=intention_id,
        retrieved_at=retrieved_at,
        levels=levels,
        energy_feedback_potential=calculate_energy_feedback_potential(
            [r for results in levels.values() for r in results.relationships]),
        consciousness_summary=generate_consciousness_summary(levels, retrieved_at),
        retrieval_latency_ms=latency_ms,
        query_count=query_count,
    )


def dedupe_relationships(relationships: Sequence[ConsciousnessRelationship]) -> list[ConsciousnessRelationship]:
    seen: dict[str, ConsciousnessRelationship] = {}
    for rel in relationships:
        seen.setdefault(rel.edge_id, rel)
    return list(seen.values())
