"""``ConstellationPostprocessor``: the memory constellation of spec 004.

The first node (run this after any reranking) is the ``primary``; memories linked to it by SUPPORTS are
``supporting``, by CONTRADICTS ``contradicting`` (a memory linked both ways counts as contradicting only:
the conflict is what the reader must see).  Links must be visible in the window (an expired belief is not
offered as support).
"""

from __future__ import annotations

import logging
from typing import Any, Optional

from llama_index.core.bridge.pydantic import Field
from llama_index.core.schema import NodeWithScore, QueryBundle
from pydantic import SkipValidation

from llama_consciousness.errors import LevelError, StorageError
from llama_consciousness.postprocessors.base import StepResult, StreamPostprocessor, memory_key
from llama_consciousness.schema.constellation import ConstellationMember, MemoryConstellation
from llama_consciousness.storage.filters import MemoryFilter
from llama_consciousness.storage.level_store import Plan
from llama_consciousness.storage.links import LinkedMemory, linked_memories
from llama_consciousness.storage.reader import MemoryReader
from llama_consciousness.temporal import TemporalWindow

__all__ = ["ROLE_KEY", "ConstellationPostprocessor", "synthesize"]

logger = logging.getLogger(__name__)

ROLE_KEY = "constellation_role"


def synthesize(constellation: MemoryConstellation) -> str:
    """``"Primary: X | Supported by: Y, Z | Note: Conflicting info in W"``, empty parts left out."""
    if constellation.primary is None:
        return ""
    parts = [f"Primary: {constellation.primary.name}"]
    if constellation.supporting:
        parts.append("Supported by: " + ", ".join(m.name for m in constellation.supporting))
    if constellation.contradicting:
        parts.append("Note: Conflicting info in " + ", ".join(m.name for m in constellation.contradicting))
    return " | ".join(parts)


def _member(node: NodeWithScore, role: str, link: Optional[LinkedMemory] = None) -> ConstellationMember:
    level, _citizen, node_id = memory_key(node)
    return ConstellationMember(node_id=node_id, level=level, name=str(node.node.metadata.get("name") or node_id),
                               score=node.score, role=role, retrieved=True,
                               link_energy=link.relationship.energy if link else None,
                               link_confidence=link.relationship.confidence if link else None)


class ConstellationPostprocessor(StreamPostprocessor):
    """Builds primary / supporting / contradicting / synthesis around the top memory."""

    memory: SkipValidation[MemoryReader] = Field(exclude=True, description="The memory the nodes were retrieved from.")
    max_supporting: int = Field(default=5, ge=0)
    max_contradicting: int = Field(default=5, ge=0)
    fetch_linked: bool = Field(default=True, description="Also linked memories that were not retrieved.")
    supports_relation: str = "SUPPORTS"
    contradicts_relation: str = "CONTRADICTS"
    temporal_window: Optional[Any] = Field(
        default=None, exclude=True,
        description="A TemporalWindow linked memories must be visible in; None: the intention's window "
        "in process(), else current at each call.",
    )

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex serialises the class under."""
        return "ConstellationPostprocessor"

    def _plan(self, nodes: list[NodeWithScore], window: Optional[TemporalWindow]) -> Optional[Plan]:
        """The graph lookup for the primary's links (None when there is nothing to look up)."""
        level, citizen, node_id = memory_key(nodes[0])
        if level is None or (level == "N1" and not citizen):
            return None
        among = None
        if not self.fetch_linked:
            among = [k[2] for k in map(memory_key, nodes[1:]) if k[:2] == (level, citizen)]
            if not among:
                return None
        limit = max(self.max_supporting, self.max_contradicting)
        if limit == 0:
            return None
        memory_filter = MemoryFilter(window or self.temporal_window or TemporalWindow())
        # Enough to still fill the lists after a memory linked both ways moves to contradicting.
        return linked_memories(
            self.memory.plans(level, citizen), node_id, [self.supports_relation, self.contradicts_relation],
            memory_filter, among=among, limit=limit + self.max_contradicting,
        )

    def _assemble(self, nodes: list[NodeWithScore], linked: dict[str, list[LinkedMemory]]) -> MemoryConstellation:
        level, citizen, _ = memory_key(nodes[0])
        retrieved = {}
        for node in nodes:
            retrieved.setdefault(memory_key(node), node)

        def members(links: list[LinkedMemory], role: str, exclude: set[str]) -> list[ConstellationMember]:
            out = []
            for link in links:
                if link.node.node_id in exclude:
                    continue
                hit = retrieved.get((level, citizen, link.node.node_id))
                if hit is not None:
                    out.append(_member(hit, role, link))
                elif self.fetch_linked:
                    out.append(ConstellationMember(
                        node_id=link.node.node_id, level=link.node.level, name=link.node.name, score=None, role=role,
                        retrieved=False, link_energy=link.relationship.energy,
                        link_confidence=link.relationship.confidence))
            return out

        primary = _member(nodes[0], "direct_answer")
        against = linked.get(self.contradicts_relation.upper(), [])
        conflicted = {link.node.node_id for link in against}
        contradicting = members(against, "exception", {primary.node_id})[: self.max_contradicting]
        supporting = members(linked.get(self.supports_relation.upper(), []), "context",
                             {primary.node_id} | conflicted)[: self.max_supporting]
        constellation = MemoryConstellation(primary=primary, supporting=supporting, contradicting=contradicting)
        constellation.synthesis = synthesize(constellation)

        roles = {(level, citizen, m.node_id): m.role for m in (primary, *supporting, *contradicting)}
        for node in nodes:
            role = roles.get(memory_key(node)) if node is retrieved.get(memory_key(node)) else None
            if role is None:
                node.node.metadata.pop(ROLE_KEY, None)
            else:
                node.node.metadata[ROLE_KEY] = role
        return constellation

    def build(self, nodes: list[NodeWithScore], window: Optional[TemporalWindow] = None) -> MemoryConstellation:
        """The constellation of ``nodes`` (roles written on them); ``window`` before the ``temporal_window`` field."""
        if not nodes:
            return MemoryConstellation()
        linked: dict[str, list[LinkedMemory]] = {}
        plan = self._plan(nodes, window)
        if plan is not None:
            level, citizen, _ = memory_key(nodes[0])
            try:
                linked = self.memory.level(level, citizen).run(plan)
            except (StorageError, LevelError) as exc:
                logger.warning("constellation: links of %s could not be read: %s", nodes[0].node.node_id, exc)
        return self._assemble(nodes, linked)

    def process(self, nodes: list[NodeWithScore], query_bundle: Optional[QueryBundle] = None,
                intention: Any = None) -> StepResult:
        """The nodes unchanged (roles written) and ``{"constellation": constellation}``."""
        window = None
        if self.temporal_window is None and getattr(intention, "temporal_mode", None):
            window = TemporalWindow.from_intention(intention)
        return StepResult(nodes, {"constellation": self.build(nodes, window)})
