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
extends the stream with its result.  A postprocessor that reads the level
graphs may offer ``prefetch(nodes, intention)``: it is called as soon as the
nodes it will see are known (after the last earlier step that may drop
nodes, see ``keeps_nodes``), so that the server answers while the steps in
between run; between steps, ``advance_prefetch()`` lets a read of several
queries send the next one as soon as the previous reply is in.  A step may
also offer ``prefetch_superset(nodes, intention)``: called with the nodes as
they are before the first step that may drop some, for reads that stay
valid for any subset of them (the traversal graph's connector candidates);
the step checks them against the nodes it finally sees.  The same reads
can start earlier still, from the memories the retriever found, before it
builds the nodes (``prefetch_found``, called by ``retrieve_stream``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from llama_index.core.schema import NodeWithScore, QueryBundle

from llama_consciousness.gcquiet import quiet_retrieval
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


@quiet_retrieval
def complete_stream(
    stream: ConsciousnessStream,
    nodes: list[NodeWithScore],
    intention: Any,
    postprocessors: Sequence[StreamPostprocessor],
) -> tuple[ConsciousnessStream, list[NodeWithScore]]:
    """Run the postprocessors over a retrieval's nodes and stream (sync)."""
    started = time.perf_counter()
    bundle = QueryBundle(getattr(intention, "query_text", "") or "")
    started_reads: set[Any] = set()
    _prefetch(postprocessors, -1, nodes, intention, started_reads)
    try:
        for i, step in enumerate(postprocessors):
            nodes = step.postprocess_nodes(nodes, query_bundle=bundle)
            _prefetch(postprocessors, i, nodes, intention, started_reads)
            stream = step.extend_stream(stream, nodes, intention)
            _advance(postprocessors)
    finally:
        _discard(postprocessors)
    return _with_latency(stream, started), nodes


@quiet_retrieval
async def acomplete_stream(
    stream: ConsciousnessStream,
    nodes: list[NodeWithScore],
    intention: Any,
    postprocessors: Sequence[StreamPostprocessor],
) -> tuple[ConsciousnessStream, list[NodeWithScore]]:
    """The same, with each postprocessor's async path."""
    started = time.perf_counter()
    bundle = QueryBundle(getattr(intention, "query_text", "") or "")
    started_reads: set[Any] = set()
    _prefetch(postprocessors, -1, nodes, intention, started_reads)
    try:
        for i, step in enumerate(postprocessors):
            nodes = await step.apostprocess_nodes(nodes, query_bundle=bundle)
            _prefetch(postprocessors, i, nodes, intention, started_reads)
            stream = step.extend_stream(stream, nodes, intention)
            _advance(postprocessors)
    finally:
        _discard(postprocessors)
    return _with_latency(stream, started), nodes


def _prefetch(postprocessors: Sequence[StreamPostprocessor], done: int, nodes: list[NodeWithScore], intention: Any,
              started: set[Any]) -> None:
    """Start the reads of later steps that will see exactly ``nodes`` (steps up to ``done`` have run).

    A step whose reads depend on the order of the nodes (``prefetch_needs_order``,
    e.g. the constellation of the top memory) waits until no earlier step
    will reorder them.
    """
    in_order = True
    for j in range(done + 1, len(postprocessors)):
        step = postprocessors[j]
        prefetch = getattr(step, "prefetch", None)
        if prefetch is not None and j not in started and (in_order or not getattr(step, "prefetch_needs_order", False)):
            started.add(j)
            prefetch(nodes, intention)
        keeps = getattr(step, "keeps_nodes", None)
        if keeps is None or not keeps(nodes):
            # past a step that may drop nodes, later steps' nodes are not known yet;
            # steps that can start from a superset of them do
            _prefetch_superset(postprocessors, j + 1, nodes, intention, started)
            return
        keeps_order = getattr(step, "keeps_order", None)
        in_order = in_order and keeps_order is not None and keeps_order(nodes)


def prefetch_found(postprocessors: Sequence[StreamPostprocessor], found: Sequence[tuple[str, Any, str]],
                   intention: Any) -> None:
    """Steps that can read ahead from the memories a retrieval found, ``(level, citizen, node_id)``.

    A retriever calls this before it turns what it found into nodes and a
    stream (``prefetch_found``, e.g. the traversal graph's connector
    candidates, a read that stays valid for any subset of the memories), so
    that the server answers while the client assembles.
    """
    for step in postprocessors:
        early = getattr(step, "prefetch_found", None)
        if early is not None:
            early(found, intention)


def _prefetch_superset(postprocessors: Sequence[StreamPostprocessor], first: int, nodes: list[NodeWithScore],
                       intention: Any, started: set[Any]) -> None:
    """Steps from ``first`` on that can read ahead for a superset of their nodes (``prefetch_superset``).

    Steps that only drop nodes leave a subset; a step that added nodes would
    make the read useless, never wrong (the reader checks).
    """
    for j in range(first, len(postprocessors)):
        early = getattr(postprocessors[j], "prefetch_superset", None)
        if early is not None and ("superset", j) not in started:
            started.add(("superset", j))
            early(nodes, intention)


def _advance(postprocessors: Sequence[StreamPostprocessor]) -> None:
    """Between steps: prefetched reads whose replies are in send their next queries.

    A read of several queries in a row (the traversal graph's connectors,
    then the links among them) would otherwise send its second query only
    when its step runs, and wait for it there.
    """
    for step in postprocessors:
        advance = getattr(step, "advance_prefetch", None)
        if advance is not None:
            advance()


def _discard(postprocessors: Sequence[StreamPostprocessor]) -> None:
    """Reads a step started but did not collect (it failed, or asked for other nodes)."""
    for step in postprocessors:
        discard = getattr(step, "discard_prefetch", None)
        if discard is not None:
            discard()


def _with_latency(stream: ConsciousnessStream, started: float) -> ConsciousnessStream:
    """The stream's latency covers retrieval and postprocessing."""
    extra = int((time.perf_counter() - started) * 1000)
    return stream.model_copy(update={"retrieval_latency_ms": (stream.retrieval_latency_ms or 0) + extra})
