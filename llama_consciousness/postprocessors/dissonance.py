"""``TemporalDissonancePostprocessor``: mark corrected beliefs among the retrieved memories.

Detection itself is :func:`llama_consciousness.scoring.dissonance.detect_temporal_dissonances`;
this postprocessor runs it on the retrieved nodes and

* writes ``metadata["temporal_dissonance"] = {"type": ..., "role": ...,
  "belief_id": ...}`` on the nodes involved (``role`` is ``"original"`` for
  the version that was corrected, ``"correction"`` for the one that
  corrected it; a middle version of a chain v1 -> v2 -> v3 is marked by its
  later transition, as the ``"original"`` that v3 corrected);
* returns the dissonances as the stream's ``temporal_dissonances`` (:meth:`process`).

The node list itself is returned unchanged (same nodes, same order).

The temporal mode matters: only ``evolution`` and ``full_history`` report
dissonances.  A node postprocessor in a query engine does not see the
intention, so ``temporal_mode`` is a field; left ``None`` it means the mode
the intention's when there is one, else the one the six-way retriever
recorded on the nodes (``metadata["temporal_mode"]``, ``"current"`` when
absent).
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
    """The temporal mode the retriever recorded on the nodes (``metadata["temporal_mode"]``).

    Inside a query engine a postprocessor never sees the intention; the
    six-way retriever writes its mode on every node so the dissonance
    detector still knows whether versions were asked for.
    """
    modes = {n.node.metadata.get("temporal_mode") for n in nodes} - {None}
    return modes.pop() if len(modes) == 1 else "current"


def intention_temporal_mode(intention: Any) -> str:
    """The temporal mode an intention asks for (``"current"`` when it names none).

    A ``StateBasedRetrieval`` has no temporal mode: it looks at what is
    believed now, so it counts as ``current``.
    """
    mode = getattr(intention, "temporal_mode", None)
    return mode if mode else "current"


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
        """Mark the versions that form dissonances; the stream gets ``temporal_dissonances``.

        The mode is this postprocessor's ``temporal_mode``, else the
        intention's, else the one the retriever recorded on the nodes.
        """
        mode = self.temporal_mode or (intention_temporal_mode(intention) if intention is not None
                                      else nodes_temporal_mode(nodes))
        return StepResult(nodes, {"temporal_dissonances": self.detect(nodes, mode)})
