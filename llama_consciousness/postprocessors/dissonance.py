"""``TemporalDissonancePostprocessor``: mark corrected beliefs among the retrieved memories.

Runs :func:`llama_consciousness.scoring.dissonance.dissonance_pairs` on the nodes,
writes ``metadata["temporal_dissonance"] = {"type", "role", "belief_id"}`` on the
versions involved (``role`` ``"original"`` for the corrected one, ``"correction"``
for the one after it; a middle version of v1 -> v2 -> v3 is marked by its later
transition) and returns the dissonances as the stream's ``temporal_dissonances``.
Only ``evolution`` and ``full_history`` report any.  A postprocessor in a query
engine does not see the intention: the mode is the ``temporal_mode`` field, else
the intention's, else the one the retriever recorded on the nodes.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

from llama_index.core.bridge.pydantic import Field, field_validator
from llama_index.core.schema import NodeWithScore, QueryBundle
from pydantic import ValidationError

from llama_consciousness.postprocessors.base import StepResult, StreamPostprocessor, memory_of
from llama_consciousness.schema import MemoryNode, TemporalDissonance
from llama_consciousness.schema.common import check_temporal_mode
from llama_consciousness.scoring.dissonance import DISSONANCE_MODES, dissonance_pairs

logger = logging.getLogger(__name__)

METADATA_KEY = "temporal_dissonance"


def nodes_temporal_mode(nodes: list[NodeWithScore]) -> str:
    """The temporal mode the retriever recorded on the nodes (``"current"`` when none or several)."""
    modes = {n.node.metadata.get("temporal_mode") for n in nodes} - {None}
    return modes.pop() if len(modes) == 1 else "current"


def intention_temporal_mode(intention: Any) -> str:
    """The temporal mode an intention asks for (``"current"`` when it names none, as a state)."""
    return getattr(intention, "temporal_mode", None) or "current"


class TemporalDissonancePostprocessor(StreamPostprocessor):
    """Detects belief corrections among retrieved versions (evolution / full_history modes)."""

    temporal_mode: Optional[str] = Field(
        default=None,
        description="Temporal mode of the retrieval; None: the intention's, else the one recorded on the nodes.",
    )

    @field_validator("temporal_mode")
    @classmethod
    def _check_mode(cls, value: Optional[str]) -> Optional[str]:
        return None if value is None else check_temporal_mode(value)

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex serialises the class under."""
        return "TemporalDissonancePostprocessor"

    def detect(self, nodes: list[NodeWithScore], temporal_mode: str) -> list[TemporalDissonance]:
        """Find dissonances among ``nodes`` and mark the nodes involved (in place)."""
        check_temporal_mode(temporal_mode)
        for node in nodes:
            node.node.metadata.pop(METADATA_KEY, None)  # a mark from an earlier run is stale
        if temporal_mode not in DISSONANCE_MODES:  # only histories hold corrections: nothing to read
            return []
        memories: list[MemoryNode] = []
        owner: dict[int, NodeWithScore] = {}
        for node in nodes:
            try:
                # read only: the versions are compared, and the dissonances copy what they keep
                memory = memory_of(node)
            except ValidationError:
                logger.debug("node %s carries no memory; ignored for dissonance", node.node.node_id)
                continue
            memories.append(memory)
            owner[id(memory)] = node
        pairs = dissonance_pairs(memories, temporal_mode)
        for pair in pairs:
            for version, role in ((pair.original, "original"), (pair.correction, "correction")):
                owner[id(version)].node.metadata[METADATA_KEY] = {
                    "type": pair.dissonance.dissonance_type,
                    "role": role,
                    "belief_id": pair.dissonance.node_id,
                }
        return [p.dissonance for p in pairs]

    def process(self, nodes: list[NodeWithScore], query_bundle: Optional[QueryBundle] = None,
                intention: Any = None) -> StepResult:
        """Mark the versions that form dissonances; the stream gets ``temporal_dissonances``."""
        mode = self.temporal_mode or (intention_temporal_mode(intention) if intention is not None
                                      else nodes_temporal_mode(nodes))
        return StepResult(nodes, {"temporal_dissonances": self.detect(nodes, mode)})
