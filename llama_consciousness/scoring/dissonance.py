"""Temporal dissonance: the moments a belief was corrected (the spec's learning moments).

When an ``evolution`` or ``full_history`` retrieval brings back several
versions of one belief, each transition from an expired version to the next
one is a :class:`TemporalDissonance`: what was believed, what replaced it,
why (``reality_changed``: the world moved; ``discovered_false``: we were
wrong) and how that discovery felt.  ``current`` and ``point_in_time``
retrievals see one version per belief, so they never report any.

Decisions the spec leaves open:

* **Grouping.** Versions are grouped by base identity with the project's
  rule (``scoring.identity``: explicit ``base_id``, then ``supersedes``
  chains, then the id without its version suffix), *within one level graph
  only*: the same id in N1 and N2 names two different memories, and each
  citizen's N1 is its own graph.
* **Order.** Versions are sorted by ``created_at`` (then ``node_id``, so ties
  are deterministic).
* **Reason.** The expired version's ``invalidation_reason`` (set by the
  store when it was superseded).  When it is missing (data written by other
  tools) it is inferred like the writer does: the newer version's
  ``supersede_reason`` if given, else ``reality_changed`` when the newer
  version became valid later than the old one (the world moved) and
  ``discovered_false`` otherwise (the old one was never true).  The spec's
  ``"unknown"`` is not a valid type of its own model, hence the inference.
* **Discovery energy.** The newer version's ``discovery_energy``, 0.5 when
  absent.  An explicit 0.0 is kept (the spec's ``x or 0.5`` would turn it
  into 0.5).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from llama_consciousness.schema import MemoryNode, TemporalDissonance
from llama_consciousness.scoring.identity import group_by_identity

__all__ = [
    "DISSONANCE_MODES",
    "DEFAULT_DISCOVERY_ENERGY",
    "DissonancePair",
    "detect_temporal_dissonances",
    "dissonance_pairs",
    "group_nodes_by_identity",
    "infer_dissonance_type",
]

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
    """Versions of one belief together, per level graph.

    Keys are ``(level, citizen_id or None, base identity)``; each level
    graph (N1 of one citizen, N2, N3) is grouped on its own, because an id
    names a memory only inside its graph.  With ``only_versioned`` (the
    spec's behaviour) only groups of two or more versions are returned.
    Groups keep the order in which their first member appears.
    """
    by_scope: dict[GraphScope, list[Any]] = {}
    for node in nodes:
        by_scope.setdefault(_scope(node), []).append(node)
    out: dict[tuple[Optional[str], Optional[str], str], list[Any]] = {}
    for scope, members in by_scope.items():
        for base, versions in group_by_identity(members, only_versioned=only_versioned).items():
            out[(scope[0], scope[1], base)] = versions
    return out


def infer_dissonance_type(original: MemoryNode, correction: MemoryNode) -> str:
    """Why ``original`` was replaced by ``correction`` (see the module notes)."""
    if original.invalidation_reason:
        return original.invalidation_reason
    if correction.supersede_reason:
        return correction.supersede_reason
    if correction.valid_at is not None and original.valid_at is not None and correction.valid_at > original.valid_at:
        return "reality_changed"
    return "discovered_false"


def _dissonance(base_id: str, original: MemoryNode, correction: MemoryNode) -> TemporalDissonance:
    energy = correction.discovery_energy
    return TemporalDissonance(
        node_id=base_id,
        node_name=original.name,
        original_belief=original.description,
        corrected_belief=correction.description,
        dissonance_type=infer_dissonance_type(original, correction),
        correction_trigger=(
            f"Corrected by {correction.correction_pattern_id}"
            if correction.correction_pattern_id
            else "Unknown correction trigger"
        ),
        discovery_energy=DEFAULT_DISCOVERY_ENERGY if energy is None else energy,
        discovery_emotions=correction.emotion_vector,
        belief_held_from=original.created_at,
        belief_held_until=original.expired_at,
        corrected_at=correction.created_at,
    )


def dissonance_pairs(nodes: Sequence[MemoryNode], temporal_mode: str) -> list[DissonancePair]:
    """Every correction among ``nodes``, with the two versions involved.

    The versions are the very objects passed in, so callers can find the
    retrieved node each one came from.  Empty unless ``temporal_mode`` is
    ``evolution`` or ``full_history``.
    """
    if temporal_mode not in DISSONANCE_MODES:
        return []
    pairs: list[DissonancePair] = []
    for (_level, _citizen, base_id), versions in group_nodes_by_identity(nodes).items():
        ordered = sorted(versions, key=lambda n: (n.created_at, n.node_id))
        for original, correction in zip(ordered, ordered[1:]):
            if original.expired_at is None:
                continue  # still believed when the next version was written: not a correction
            pairs.append(DissonancePair(original, correction, _dissonance(base_id, original, correction)))
    return pairs


def detect_temporal_dissonances(nodes: Sequence[MemoryNode], temporal_mode: str) -> list[TemporalDissonance]:
    """The spec's ``detect_temporal_dissonances``: learning moments among retrieved versions.

    ``nodes`` are ``MemoryNode`` or ``ConsciousnessNode`` records (a mix is
    fine).  Returns ``[]`` unless ``temporal_mode`` is ``evolution`` or
    ``full_history``; otherwise one dissonance per consecutive pair of
    versions of a belief whose earlier version has expired.
    """
    return [p.dissonance for p in dissonance_pairs(nodes, temporal_mode)]
