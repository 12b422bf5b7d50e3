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

import weakref
from typing import Any

from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle

from llama_consciousness.schema import ConsciousnessNode, ConsciousnessStream, MemoryNode

_MEMORY_FIELDS = set(MemoryNode.model_fields) - {"embedding"}


# Postprocessors of one stream read the same nodes' memories several times;
# validation is most of that cost.  Remembered per node object, and reused
# only while the node's memory fields are unchanged.
_PARSED: dict[int, tuple[Any, dict[str, Any], MemoryNode]] = {}
_PARSED_MAX = 4096


def memory_of(node: NodeWithScore) -> MemoryNode:
    """The memory a retrieved node carries (from its metadata)."""
    meta = node.node.metadata
    data = {k: meta[k] for k in _MEMORY_FIELDS if k in meta and meta[k] is not None}
    data.setdefault("node_id", meta.get("node_id", node.node.node_id))
    data.setdefault("description", node.node.get_content(metadata_mode="none"))
    known = _PARSED.get(id(node.node))
    if known is not None and known[0]() is node.node and known[1] == data:
        return known[2].model_copy()
    memory = MemoryNode.model_validate(data)
    if len(_PARSED) >= _PARSED_MAX:
        _PARSED.clear()
    try:
        _PARSED[id(node.node)] = (weakref.ref(node.node), data, memory)
    except TypeError:  # a node class without weak references is simply not remembered
        pass
    return memory.model_copy()


def consciousness_node_of(node: NodeWithScore) -> ConsciousnessNode:
    """The spec's retrieved node: the memory plus source and relevance."""
    meta = node.node.metadata
    data = memory_of(node).model_dump(exclude={"embedding"})
    return ConsciousnessNode(
        **data,
        retrieval_source=str(meta.get("retrieval_source", "unknown")),
        relevance_score=float(node.score if node.score is not None else meta.get("relevance_score", 0.0)),
    )


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
