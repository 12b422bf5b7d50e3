"""Memories as LlamaIndex ``TextNode``s, so ingestion runs in an ``IngestionPipeline``.

The mapping is plain, so that a user can build the nodes by hand: ``id_`` is the
``node_id``, ``text`` the ``description``, ``metadata`` every other field under its
own name (datetimes as ISO-8601 text), ``embedding`` the embedding.  Transforms
add keys under the ``lc_`` prefix (instructions for the writer, not memory
fields).  Relationships travel as ``TextNode``s with ``metadata["kind"] == "relationship"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llama_index.core.schema import BaseNode, MetadataMode, TextNode

from llama_consciousness.schema import ConsciousnessRelationship, MemoryNode
from llama_consciousness.schema.trusted import trusted_model
from llama_consciousness.storage.records import defaulted_times

KIND_KEY = "kind"
RELATIONSHIP = "relationship"
PRIVATE_PREFIX = "lc_"

# Metadata that must not reach the LLM or the embedding model verbatim: ids,
# times and numbers are noise in a prompt and in an embedding.
_HIDDEN_FROM_TEXT = [
    "node_id", "level", "citizen_id", "valid_at", "invalid_at", "created_at", "expired_at",
    "invalidation_reason", "correction_pattern_id", "discovery_energy", "supersedes",
    "authority_score", "metadata_completeness", "extra", "sensory_details", KIND_KEY,
    "forgotten_at", "forgotten_reason", "forgotten_by", "retractions",
]


def _drop_defaulted_times(model: Any, data: dict[str, Any]) -> None:
    """Leave out times the caller never gave: re-ingesting a memory must not move its creation to today."""
    for name in defaulted_times(model):
        data.pop(name, None)


def memory_to_text_node(memory: MemoryNode) -> TextNode:
    """A memory as a ``TextNode`` (see the module docstring for the mapping)."""
    data = memory.model_dump(mode="json", exclude={"embedding", "description"})
    _drop_defaulted_times(memory, data)
    return TextNode(
        id_=memory.node_id,
        text=memory.description,
        metadata=data,
        embedding=list(memory.embedding) if memory.embedding is not None else None,
        excluded_embed_metadata_keys=[k for k in data if k != "name"],
        excluded_llm_metadata_keys=list(_HIDDEN_FROM_TEXT),
    )


def relationship_to_text_node(relationship: ConsciousnessRelationship) -> TextNode:
    """A relationship as a ``TextNode`` (kind ``relationship``; no text, no embedding)."""
    data = relationship.model_dump(mode="json")
    _drop_defaulted_times(relationship, data)
    data[KIND_KEY] = RELATIONSHIP
    return TextNode(id_=f"rel:{relationship.edge_id}", text="", metadata=data)


_TEMPLATE = TextNode(id_="template", text="")
_TEMPLATE_FIELDS = dict(_TEMPLATE.__dict__)


def record_text_node(
    node_id: str,
    text: str,
    metadata: dict[str, Any],
    embedding: list[float] | None = None,
    *,
    excluded_embed_metadata_keys: list[str] | None = None,
    excluded_llm_metadata_keys: list[str] | None = None,
) -> TextNode:
    """A ``TextNode`` for data this package made itself (of the fields' types), without pydantic's checks.

    Validating copies the metadata and checks every float of the embedding, which for a parsed memory
    file or a chunk back from the ingestion worker cost more than the step it fed.
    """
    fields = {**_TEMPLATE_FIELDS, "id_": node_id, "text": text, "metadata": metadata, "embedding": embedding,
              "relationships": {}, "excluded_embed_metadata_keys": list(excluded_embed_metadata_keys or ()),
              "excluded_llm_metadata_keys": list(excluded_llm_metadata_keys or ())}
    return trusted_model(TextNode, fields, _TEMPLATE.__pydantic_fields_set__)


def is_relationship(node: BaseNode) -> bool:
    return node.metadata.get(KIND_KEY) == RELATIONSHIP


def record_fields(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """A node's metadata without the package's private keys and the record kind: the model's fields."""
    return {k: v for k, v in metadata.items() if not k.startswith(PRIVATE_PREFIX) and k != KIND_KEY}


def text_node_to_memory(node: BaseNode, fields: dict[str, Any] | None = None, *,
                        embedding: bool = True) -> MemoryNode:
    """The memory a ``TextNode`` describes (pydantic's ValidationError if invalid); ``fields``: the node's
    ``record_fields`` when the caller has them already (they are used up); ``embedding=False`` leaves the
    vector out (checking hundreds of numbers is most of building the model, and a reader of words needs none)."""
    data = record_fields(node.metadata) if fields is None else fields
    data.setdefault("node_id", node.node_id)
    data["description"] = node.get_content(metadata_mode="none")
    if embedding and node.embedding is not None:
        data["embedding"] = list(node.embedding)
    return MemoryNode.model_validate(data)


def text_node_to_relationship(node: BaseNode) -> ConsciousnessRelationship:
    """The relationship a ``TextNode`` of kind ``relationship`` describes."""
    return ConsciousnessRelationship.model_validate(record_fields(node.metadata))


def memory_text(node: MemoryNode) -> str:
    """The text a memory is embedded from: its name, then its description."""
    return f"{node.name}\n{node.description}".strip()


def embedding_text(node: BaseNode) -> str:
    """``memory_text`` of the memory a validated node describes, mostly without building the model (a fifth
    of the worker's time per memory).  A name whose ends are plain ASCII is stripped neither by pydantic nor by
    ``str.strip``; any other goes through the model, so every text is the one the model would give."""
    name = node.metadata.get("name")
    if type(name) is str and name and _plain(name[0]) and _plain(name[-1]):
        return f"{name}\n{node.get_content(metadata_mode=MetadataMode.NONE)}".strip()
    return memory_text(text_node_to_memory(node))


def _plain(char: str) -> bool:
    return char.isascii() and not char.isspace()
