"""What every consciousness postprocessor shares.

Each postprocessor is an ordinary LlamaIndex ``BaseNodePostprocessor``: it
works on a list of ``NodeWithScore`` in any query engine, reading the
memory from ``node.metadata`` (the retriever puts every field of the
memory there, plus ``level``, ``retrieval_source(s)`` and
``relevance_score``).  Postprocessors that produce a stream-level result
(activation tiers, traversal graph, dissonances, validation report,
constellation) also implement :meth:`StreamPostprocessor.extend_stream`,
which puts that result on a :class:`ConsciousnessStream`; the complete
stream of the spec is the six-way retrieval's stream passed through all of
them (see ``llama_consciousness.consciousness_stream``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle

from llama_consciousness.retrieved_memory import memory_of
from llama_consciousness.schema import ConsciousnessNode, ConsciousnessStream

__all__ = ["StreamPostprocessor", "consciousness_node_of", "hide_from_text", "memory_of", "query_text"]


def consciousness_node_of(node: NodeWithScore) -> ConsciousnessNode:
    """The spec's retrieved node: the memory plus source and relevance."""
    from llama_consciousness.storage.level_store import retrieved_node

    meta = node.node.metadata
    return retrieved_node(memory_of(node, copy=False), str(meta.get("retrieval_source", "unknown")),
                          float(node.score if node.score is not None else meta.get("relevance_score", 0.0)))


def hide_from_text(node: NodeWithScore, keys: Sequence[str]) -> None:
    """Keep bookkeeping ``keys`` a postprocessor wrote out of the node's embedding and LLM texts.

    Scores and counts mean nothing in a prompt or an embedding text; the
    metadata keeps them for code downstream.
    """
    unique = list(dict.fromkeys(keys))
    wanted = set(unique)
    for excluded in (node.node.excluded_embed_metadata_keys, node.node.excluded_llm_metadata_keys):
        if wanted.isdisjoint(excluded):  # one pass over the list (a retrieved node's has forty keys)
            excluded.extend(unique)
            continue
        missing = [k for k in unique if k not in excluded]
        if missing:
            excluded.extend(missing)


def query_text(query_bundle: QueryBundle | None) -> str:
    return query_bundle.query_str if query_bundle is not None else ""


class StreamPostprocessor(BaseNodePostprocessor):
    """A node postprocessor that can also extend a consciousness stream.

    ``extend_stream`` receives the stream, the nodes as this postprocessor
    left them, and the intention (a ``RetrievalIntention`` or
    ``StateBasedRetrieval``; may be None), and returns the stream with its
    field filled.  The default does nothing.
    """

    def extend_stream(
        self, stream: ConsciousnessStream, nodes: list[NodeWithScore], intention: Any = None
    ) -> ConsciousnessStream:
        return stream

    def keeps_nodes(self, nodes: list[NodeWithScore]) -> bool:
        """Whether ``postprocess_nodes`` will return the same memories as ``nodes`` (any order).

        ``complete_stream`` starts a later step's reads early only past
        steps that keep the nodes; the default (False) is the safe answer.
        """
        return False

    def keeps_order(self, nodes: list[NodeWithScore]) -> bool:
        """Whether the nodes ``postprocess_nodes`` keeps stay in their order (a ranker reorders)."""
        return False
