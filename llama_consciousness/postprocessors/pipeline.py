"""The complete consciousness stream: six-way retrieval, then every postprocessor.

The retriever's own stream holds what the channels found (levels,
relationships, summary, energy feedback).  The spec's final structure also
wants activation tiers, the traversal graph, temporal dissonances and the
metadata validation report; each comes from one postprocessor.  They run in
an order where each can use what the previous ones wrote:

    quality (completeness) -> ranker (uses completeness) -> tiers (uses the
    ranking) -> dissonances -> traversal graph (uses the tiers) ->
    constellation (uses the top memory)

Each postprocessor first processes the nodes (as in any query engine), then
extends the stream with its result.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from llama_index.core.schema import NodeWithScore, QueryBundle

from llama_consciousness.postprocessors.base import StreamPostprocessor
from llama_consciousness.schema import ConsciousnessStream


def default_postprocessors(memory: Any) -> list[StreamPostprocessor]:
    """The spec's postprocessors, in the order described above."""
    from llama_consciousness.postprocessors.constellation import ConstellationPostprocessor
    from llama_consciousness.postprocessors.dissonance import TemporalDissonancePostprocessor
    from llama_consciousness.postprocessors.quality import MetadataQualityPostprocessor
    from llama_consciousness.postprocessors.ranker import ConsciousnessRanker
    from llama_consciousness.postprocessors.tiers import ActivationTierPostprocessor
    from llama_consciousness.postprocessors.traversal_paths import TraversalPathPostprocessor

    return [
        MetadataQualityPostprocessor(),
        ConsciousnessRanker(),
        ActivationTierPostprocessor(),
        TemporalDissonancePostprocessor(),
        TraversalPathPostprocessor(memory=memory),
        ConstellationPostprocessor(memory=memory),
    ]


def complete_stream(
    stream: ConsciousnessStream,
    nodes: list[NodeWithScore],
    intention: Any,
    postprocessors: Sequence[StreamPostprocessor],
) -> tuple[ConsciousnessStream, list[NodeWithScore]]:
    """Run the postprocessors over a retrieval's nodes and stream (sync)."""
    started = time.perf_counter()
    bundle = QueryBundle(getattr(intention, "query_text", "") or "")
    for step in postprocessors:
        nodes = step.postprocess_nodes(nodes, query_bundle=bundle)
        stream = step.extend_stream(stream, nodes, intention)
    return _with_latency(stream, started), nodes


async def acomplete_stream(
    stream: ConsciousnessStream,
    nodes: list[NodeWithScore],
    intention: Any,
    postprocessors: Sequence[StreamPostprocessor],
) -> tuple[ConsciousnessStream, list[NodeWithScore]]:
    """The same, with each postprocessor's async path."""
    started = time.perf_counter()
    bundle = QueryBundle(getattr(intention, "query_text", "") or "")
    for step in postprocessors:
        nodes = await step.apostprocess_nodes(nodes, query_bundle=bundle)
        stream = step.extend_stream(stream, nodes, intention)
    return _with_latency(stream, started), nodes


def _with_latency(stream: ConsciousnessStream, started: float) -> ConsciousnessStream:
    """The stream's latency covers retrieval and postprocessing."""
    extra = int((time.perf_counter() - started) * 1000)
    return stream.model_copy(update={"retrieval_latency_ms": (stream.retrieval_latency_ms or 0) + extra})
