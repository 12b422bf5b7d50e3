"""``ActivationTierPostprocessor``: focus / peripheral / background, as attention works.

Luca's guidance in the spec: a few memories are in conscious awareness, more are
accessible but not central, a larger set is unconscious context, and the rest is
below attention.  The list is read *in order* (put it after a ranker): the spec's
5 / 25 / 75 boundaries by default.  Each node gets ``metadata["activation_tier"]``;
nodes past the last tier are dropped, and with ``drop_background`` the background
ones too.  Scores are not touched.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

from llama_index.core.bridge.pydantic import Field
from llama_index.core.schema import NodeWithScore, QueryBundle

from llama_consciousness.postprocessors.base import StepResult, StreamPostprocessor, consciousness_node_of
from llama_consciousness.schema import ConsciousnessNode
from llama_consciousness.schema.stream import ACTIVATION_TIERS
from llama_consciousness.scoring.ranking import (
    DEFAULT_BACKGROUND,
    DEFAULT_FOCUS,
    DEFAULT_PERIPHERAL,
    activation_tiers,
)

__all__ = ["TIER_KEY", "ActivationTierPostprocessor"]

logger = logging.getLogger(__name__)

TIER_KEY = "activation_tier"


class ActivationTierPostprocessor(StreamPostprocessor):
    """Labels a ranked node list with activation tiers and cuts what is below attention."""

    focus: int = Field(default=DEFAULT_FOCUS, ge=0, description="Nodes in conscious awareness (spec: 3-5).")
    peripheral: int = Field(default=DEFAULT_PERIPHERAL, ge=0, description="Accessible, not central (spec: 15-20).")
    background: int = Field(default=DEFAULT_BACKGROUND, ge=0, description="Unconscious context (spec: 30-50).")
    drop_background: bool = Field(
        default=False, description="Also drop the background tier (keep only focus and peripheral)."
    )

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex serialises the class under."""
        return "ActivationTierPostprocessor"

    def tiers(self, nodes: list[Any]) -> dict[str, list[Any]]:
        """``nodes`` (ranked) split into the tiers; nodes past the last tier are in none."""
        return activation_tiers(nodes, self.focus, self.peripheral, self.background)

    def label(self, nodes: list[NodeWithScore]) -> list[NodeWithScore]:
        """Write each node's tier into its metadata; the nodes that stay (in order)."""
        kept: list[NodeWithScore] = []
        for tier, members in self.tiers(nodes).items():
            for node in members:
                node.node.metadata[TIER_KEY] = tier
                # Meaningless in an embedding text; the LLM may use it ("focus" first).
                if TIER_KEY not in node.node.excluded_embed_metadata_keys:
                    node.node.excluded_embed_metadata_keys.append(TIER_KEY)
            if tier != "background" or not self.drop_background:
                kept.extend(members)
        return kept

    def process(self, nodes: list[NodeWithScore], query_bundle: Optional[QueryBundle] = None,
                intention: Any = None) -> StepResult:
        """Label and cut the nodes; the stream's ``activation_tiers`` hold the nodes kept, by tier
        (a node whose metadata is not a valid memory is left out of them with a warning)."""
        kept = self.label(nodes)
        tiers: dict[str, list[ConsciousnessNode]] = {tier: [] for tier in ACTIVATION_TIERS}
        for node in kept:
            try:
                tiers[node.node.metadata[TIER_KEY]].append(consciousness_node_of(node))
            except Exception as exc:  # not a memory (e.g. a plain document node)
                logger.warning("node %s left out of the activation tiers: %s", node.node.node_id, exc)
        return StepResult(kept, {"activation_tiers": tiers})
