"""Temporal dissonance: the moments a belief was corrected (the spec's learning moments).

In an ``evolution`` or ``full_history`` retrieval, each transition from an expired
version of a belief to the next is a :class:`TemporalDissonance` (``current`` and
``point_in_time`` see one version per belief, so never any).  Decisions the spec
leaves open: versions are grouped by base identity (``scoring.identity``) *within
one level graph only* (the same id in N1 and N2 names two memories), ordered by
``created_at`` then ``node_id``.  The reason is the expired version's
``invalidation_reason``, else the newer one's ``supersede_reason``, else inferred
as the writer does (a later ``valid_at``: ``reality_changed``; otherwise
``discovered_false``; the spec's ``"unknown"`` is not a valid type of its own
model).  Discovery energy is the newer version's, 0.5 when absent (an explicit
0.0 is kept, unlike the spec's ``x or 0.5``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from llama_consciousness.schema import MemoryNode, TemporalDissonance
from llama_consciousness.scoring.identity import group_by_identity

__all__ = ["DISSONANCE_MODES", "DEFAULT_DISCOVERY_ENERGY", "DissonancePair", "detect_temporal_dissonances",
           "dissonance_pairs", "group_nodes_by_identity", "infer_dissonance_type"]

DISSONANCE_MODES = ("evolution", "full_history")
DEFAULT_DISCOVERY_ENERGY = 0.5

# (level, citizen_id for N1 else None): one level graph.
GraphScope = tuple[Optional[str], Optional[str]]


@dataclass(frozen=True)
class DissonancePair:
    """One correction: the expired version, the version after it, and the dissonance."""

    original: Any
    correction: Any
    dissonance: TemporalDissonance


def _scope(node: MemoryNode) -> GraphScope:
    level = getattr(node, "level", None)
    return (level, node.citizen_id if level == "N1" else None)


def group_nodes_by_identity(
    nodes: Iterable[MemoryNode], only_versioned: bool = True
) -> dict[tuple[Optional[str], Optional[str], str], list[Any]]:
    """Versions of one belief together, keyed ``(level, citizen_id or None, base identity)``, in order of first
    appearance; with ``only_versioned`` (the spec's behaviour) only groups of two or more."""
    by_scope: dict[GraphScope, list[Any]] = {}
    for node in nodes:
        by_scope.setdefault(_scope(node), []).append(node)
    out: dict[tuple[Optional[str], Optional[str], str], list[Any]] = {}
    for scope, members in by_scope.items():
        for base, versions in group_by_identity(members, only_versioned=only_versioned).items():
            out[(scope[0], scope[1], base)] = versions
    return out


def infer_dissonance_type(original: MemoryNode, correction: MemoryNode) -> str:
    """Why ``original`` was replaced by ``correction`` (see the module doc)."""
    if original.invalidation_reason:
        return original.invalidation_reason
    if correction.supersede_reason:
        return correction.supersede_reason
    if correction.valid_at is not None and original.valid_at is not None and correction.valid_at > original.valid_at:
        return "reality_changed"
    return "discovered_false"


def _dissonance(base_id: str, original: MemoryNode, correction: MemoryNode, confirmed: bool = True
                ) -> TemporalDissonance:
    energy = correction.discovery_energy
    source = getattr(original, "supersession_source", None)
    if correction.correction_pattern_id:
        trigger = f"Corrected by {correction.correction_pattern_id}"
    elif source in ("offline_judge", "llm_judge"):
        confidence = getattr(original, "supersession_confidence", None)
        trigger = (f"{'Updated' if confirmed else 'Possibly updated'} by {correction.node_id}, judged from the "
                   f"texts ({source}" + (f", confidence {confidence:.2f})" if confidence is not None else ")"))
    else:
        trigger = "Unknown correction trigger"
    held_until = original.expired_at if confirmed and original.expired_at else correction.created_at
    return TemporalDissonance(
        node_id=base_id,
        node_name=original.name,
        original_belief=original.description,
        corrected_belief=correction.description,
        dissonance_type=infer_dissonance_type(original, correction),
        correction_trigger=trigger,
        discovery_energy=DEFAULT_DISCOVERY_ENERGY if energy is None else energy,
        discovery_emotions=correction.emotion_vector,
        belief_held_from=original.created_at,
        belief_held_until=max(held_until, original.created_at),
        corrected_at=correction.created_at,
        supersession_source=source or "explicit",
        confirmed=confirmed,
    )


def dissonance_pairs(nodes: Sequence[MemoryNode], temporal_mode: str) -> list[DissonancePair]:
    """Every correction among ``nodes``, with the two versions involved (the very objects passed in, so
    callers can find the node each came from); empty unless ``temporal_mode`` is a history mode."""
    if temporal_mode not in DISSONANCE_MODES:
        return []
    pairs: list[DissonancePair] = []
    for (_level, _citizen, base_id), versions in group_nodes_by_identity(nodes).items():
        ordered = sorted(versions, key=lambda n: (n.created_at, n.node_id))
        for original, correction in zip(ordered, ordered[1:]):
            if original.expired_at is None:
                continue  # still believed when the next version was written: not a correction
            pairs.append(DissonancePair(original, correction, _dissonance(base_id, original, correction)))
    # Updates judged from the texts link memories of different identities: by the ids the store set.
    paired = {(id(p.original), id(p.correction)) for p in pairs}
    by_id = {(_scope(n), n.node_id): n for n in nodes}
    for original in nodes:
        for field, confirmed in (("superseded_by", True), ("possibly_superseded_by", False)):
            later_id = getattr(original, field, None)
            correction = by_id.get((_scope(original), later_id)) if later_id else None
            if correction is None or (id(original), id(correction)) in paired:
                continue
            if confirmed and original.expired_at is None:
                continue
            if not confirmed and original.expired_at is not None:
                continue  # superseded since: the confirmed pair speaks for it
            paired.add((id(original), id(correction)))
            pairs.append(DissonancePair(original, correction,
                                        _dissonance(original.node_id, original, correction, confirmed)))
    return pairs


def detect_temporal_dissonances(nodes: Sequence[MemoryNode], temporal_mode: str) -> list[TemporalDissonance]:
    """The spec's ``detect_temporal_dissonances``: learning moments among retrieved versions."""
    return [p.dissonance for p in dissonance_pairs(nodes, temporal_mode)]
