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
from collections.abc import Sequence
from typing import Any

from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle

from llama_consciousness.schema import ConsciousnessNode, ConsciousnessStream, MemoryNode

_MEMORY_FIELDS = set(MemoryNode.model_fields) - {"embedding"}
_FIELD_ORDER = tuple(sorted(_MEMORY_FIELDS))


# Postprocessors of one stream read the same nodes' memories several times;
# validation is most of that cost.  Remembered per node object, and reused
# only while the node's memory fields (and text and id) are unchanged.  An
# entry leaves with its node (a weak reference's callback): entries kept
# after their retrieval made every full garbage collection walk thousands
# of dead memories (a 100-query run's full passes took 20-50 ms each).
_PARSED: dict[int, tuple[Any, tuple[Any, ...], MemoryNode]] = {}
_PARSED_MAX = 4096


def _forget(ref: Any, key: int) -> None:
    """A remembered node died: drop its entry, unless the id was reused by a newer node."""
    entry = _PARSED.get(key)
    if entry is not None and entry[0] is ref:
        del _PARSED[key]


def memory_of(node: NodeWithScore, *, copy: bool = True) -> MemoryNode:
    """The memory a retrieved node carries (from its metadata).

    ``copy=False`` returns the remembered model itself, for callers that only
    read it (a copy per call was a tenth of a complete stream's time).
    """
    text_node = node.node
    meta = text_node.metadata
    # the fields as one tuple, read at C speed: comparing it is the whole cost of a repeat visit
    seen = (tuple(map(meta.get, _FIELD_ORDER)), text_node.node_id, getattr(text_node, "text", None))
    key = id(text_node)
    known = _PARSED.get(key)
    if known is not None and known[0]() is text_node and known[1] == seen:
        return known[2].model_copy() if copy else known[2]
    data = {k: v for k, v in zip(_FIELD_ORDER, seen[0]) if v is not None}
    data.setdefault("node_id", meta.get("node_id", text_node.node_id))
    data.setdefault("description", text_node.get_content(metadata_mode="none"))
    memory = MemoryNode.model_validate(data)
    if len(_PARSED) >= _PARSED_MAX:
        _PARSED.clear()
    try:
        _PARSED[key] = (weakref.ref(text_node, lambda ref, key=key: _forget(ref, key)), seen, memory)
    except TypeError:  # a node class without weak references is simply not remembered
        pass
    return memory.model_copy() if copy else memory


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
    for excluded in (node.node.excluded_embed_metadata_keys, node.node.excluded_llm_metadata_keys):
        missing = [k for k in keys if k not in excluded]
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
