"""Node postprocessors: ranking, tiers, traversal paths, dissonances, quality, constellation, usage.

Each is a LlamaIndex ``BaseNodePostprocessor`` usable in any query engine;
``pipeline.default_postprocessors`` chains them into the spec's complete
stream (``ConsciousnessMemory.retrieve_stream``).
"""

from llama_consciousness.postprocessors.base import StepResult, StreamPostprocessor, consciousness_node_of, memory_of
from llama_consciousness.postprocessors.constellation import ConstellationPostprocessor, synthesize
from llama_consciousness.postprocessors.dissonance import TemporalDissonancePostprocessor
from llama_consciousness.postprocessors.pipeline import complete_stream, default_postprocessors
from llama_consciousness.postprocessors.quality import MetadataQualityPostprocessor
from llama_consciousness.postprocessors.ranker import ConsciousnessRanker
from llama_consciousness.postprocessors.tiers import ActivationTierPostprocessor
from llama_consciousness.postprocessors.traversal_paths import (
    TraversalPathPostprocessor,
    to_html,
    to_mermaid,
    to_networkx_dict,
)
from llama_consciousness.postprocessors.usage import UsageReinforcement

__all__ = [
    "ActivationTierPostprocessor",
    "ConsciousnessRanker",
    "ConstellationPostprocessor",
    "MetadataQualityPostprocessor",
    "StepResult",
    "StreamPostprocessor",
    "TemporalDissonancePostprocessor",
    "TraversalPathPostprocessor",
    "UsageReinforcement",
    "complete_stream",
    "consciousness_node_of",
    "default_postprocessors",
    "memory_of",
    "synthesize",
    "to_html",
    "to_mermaid",
    "to_networkx_dict",
]
