"""What every consciousness postprocessor shares: one method, ``process``.

Each is an ordinary LlamaIndex ``BaseNodePostprocessor`` reading the memory from
``node.metadata``; what belongs on the spec's stream is returned by
:meth:`StreamPostprocessor.process` with the nodes.  Nothing of one call is kept
on the postprocessor: a result read back from ``self`` could be another caller's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, NamedTuple, Optional

from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle

from llama_consciousness.levels import LEVELS
from llama_consciousness.schema import ConsciousnessNode, MemoryNode
from llama_consciousness.schema._time import parse_time
from llama_consciousness.schema.memory import retrieved_node

__all__ = ["StepResult", "StreamPostprocessor", "consciousness_node_of", "hide_from_text", "memory_of",
           "query_text"]

_MEMORY_FIELDS = tuple(name for name in MemoryNode.model_fields if name != "embedding")


MemoryKey = tuple[Optional[str], Optional[str], str]
"""Where a retrieved memory is stored: (level, citizen for N1, node_id)."""


def memory_key(node: NodeWithScore) -> MemoryKey:
    """The level (None when the metadata names none), the citizen (N1 only) and the node id of a
    retrieved memory, from its metadata."""
    meta = node.node.metadata
    level = meta.get("level") if meta.get("level") in LEVELS else None
    citizen = meta.get("citizen_id") if level == "N1" else None
    return (level, citizen, str(meta.get("node_id") or node.node.node_id))


def memory_of(node: NodeWithScore) -> MemoryNode:
    """The memory a retrieved node carries, validated afresh from its metadata (code between two steps may edit it)."""
    text_node = node.node
    meta = text_node.metadata
    data = {name: meta[name] for name in _MEMORY_FIELDS if meta.get(name) is not None}
    data.setdefault("node_id", meta.get("node_id", text_node.node_id))
    data.setdefault("description", text_node.get_content(metadata_mode="none"))  # type: ignore[arg-type]
    return MemoryNode.model_validate(data)


def consciousness_node_of(node: NodeWithScore) -> ConsciousnessNode:
    """The spec's retrieved node: the memory plus source and relevance."""
    meta = node.node.metadata
    since = meta.get("possibly_outdated_since")
    return retrieved_node(memory_of(node), str(meta.get("retrieval_source", "unknown")),
                          float(node.score if node.score is not None else meta.get("relevance_score", 0.0)),
                          outdated_by=meta.get("possibly_outdated_by") or None,
                          outdated_since=parse_time(since))


def hide_from_text(node: NodeWithScore, keys: Sequence[str]) -> None:
    """Keep bookkeeping ``keys`` (scores, counts) out of the node's embedding and LLM texts."""
    for excluded in (node.node.excluded_embed_metadata_keys, node.node.excluded_llm_metadata_keys):
        excluded.extend(k for k in dict.fromkeys(keys) if k not in excluded)


def query_text(query_bundle: QueryBundle | None) -> str:
    return query_bundle.query_str if query_bundle is not None else ""


class StepResult(NamedTuple):
    """What one postprocessor made of one call: the nodes it leaves, and the stream fields it fills."""

    nodes: list[NodeWithScore]
    stream_fields: dict[str, Any] = {}


class StreamPostprocessor(BaseNodePostprocessor):
    """A node postprocessor whose result can also complete a consciousness stream.

    ``intention`` of :meth:`process` is the call's request when the caller has one (``complete_stream``
    does; a query engine does not, and then a step reads the nodes' metadata and the query).
    """

    def process(self, nodes: list[NodeWithScore], query_bundle: Optional[QueryBundle] = None,
                intention: Any = None) -> StepResult:
        raise NotImplementedError(f"{type(self).__name__} must implement process()")

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: Optional[QueryBundle] = None
    ) -> list[NodeWithScore]:
        return self.process(nodes, query_bundle).nodes

    async def _apostprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: Optional[QueryBundle] = None
    ) -> list[NodeWithScore]:
        # the same code in a worker thread: steps that read the store do not block the event loop
        return await asyncio.to_thread(self._postprocess_nodes, nodes, query_bundle)
