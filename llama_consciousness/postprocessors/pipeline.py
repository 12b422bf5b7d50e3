"""The complete consciousness stream: a retrieval's stream, then every postprocessor.

Each postprocessor fills one part of the spec's final structure, in an order
where each can use what the previous ones wrote: quality (completeness) ->
usage (spec 004's use and co-activation, lifting used memories) -> ranker (uses completeness and the lifted
scores) -> tiers (uses the ranking) -> dissonances ->
traversal graph (uses the tiers) -> constellation (uses the top memory).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle

from llama_consciousness.postprocessors.base import StreamPostprocessor
from llama_consciousness.schema import ConsciousnessStream

if TYPE_CHECKING:
    from llama_consciousness.storage.reader import MemoryReader


def default_postprocessors(memory: MemoryReader) -> list[StreamPostprocessor]:
    """The spec's postprocessors, in the order described above."""
    from llama_consciousness.postprocessors.constellation import ConstellationPostprocessor
    from llama_consciousness.postprocessors.dissonance import TemporalDissonancePostprocessor
    from llama_consciousness.postprocessors.quality import MetadataQualityPostprocessor
    from llama_consciousness.postprocessors.ranker import ConsciousnessRanker
    from llama_consciousness.postprocessors.tiers import ActivationTierPostprocessor
    from llama_consciousness.postprocessors.traversal_paths import TraversalPathPostprocessor
    from llama_consciousness.postprocessors.usage import UsageReinforcement

    return [
        MetadataQualityPostprocessor(),
        UsageReinforcement(memory=memory),
        ConsciousnessRanker(),
        ActivationTierPostprocessor(),
        TemporalDissonancePostprocessor(),
        TraversalPathPostprocessor(memory=memory),
        ConstellationPostprocessor(memory=memory),
    ]


def text_postprocessors(memory: MemoryReader) -> list[StreamPostprocessor]:
    """The steps of :func:`default_postprocessors` whose results a rendered text shows (quality, usage,
    ranking, tiers, dissonances): the traversal graph and the constellation add structure to the stream and
    marks to the nodes that ``render_stream`` never prints, and cost a read of every memory's neighbourhood."""
    return [step for step in default_postprocessors(memory) if step.class_name() not in _STRUCTURE_ONLY]


_STRUCTURE_ONLY = frozenset({"TraversalPathPostprocessor", "ConstellationPostprocessor"})


def complete_stream(
    stream: ConsciousnessStream,
    nodes: list[NodeWithScore],
    intention: Any,
    postprocessors: Sequence[BaseNodePostprocessor],
) -> tuple[ConsciousnessStream, list[NodeWithScore]]:
    """Run the postprocessors over a retrieval's nodes; each one's result goes on the stream.

    A LlamaIndex postprocessor that is not a ``StreamPostprocessor`` only changes the nodes.
    """
    started = time.perf_counter()
    bundle = QueryBundle(getattr(intention, "query_text", "") or "")
    fields: dict[str, Any] = {}
    for step in postprocessors:
        if isinstance(step, StreamPostprocessor):
            nodes, update = step.process(nodes, bundle, intention)
            fields.update(update)
        else:
            nodes = step.postprocess_nodes(nodes, query_bundle=bundle)
    extra_ms = int((time.perf_counter() - started) * 1000)
    fields["retrieval_latency_ms"] = (stream.retrieval_latency_ms or 0) + extra_ms
    return stream.model_copy(update=fields), nodes
