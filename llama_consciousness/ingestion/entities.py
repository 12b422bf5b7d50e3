"""``EntityExtractor``: the ingestion transform that writes the entities each memory mentions.

The extractors themselves are in :mod:`llama_consciousness.entities`, which retrieval uses on questions too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Literal, Optional

from llama_index.core.schema import BaseNode, MetadataMode
from pydantic import Field, PrivateAttr, model_validator

from llama_consciousness.entities import ENTITIES_KEY, Entity, LLMEntityExtractor, OfflineEntityExtractor
from llama_consciousness.ingestion.cognitive import MemoryTransform

#: Entities kept per memory, the most confident.  Each one costs a name lookup, perhaps an entity node
#: and a MENTIONS link; a long BEAM message has about twenty, a chat turn rarely more than three.  Chosen on
#: the tune halves, with the keyword index's ballast (before it, the entity hubs were what normalised long
#: messages' lengths, and every entity left out cost recall): BEAM R@10 0.475 / 0.469 / 0.475 / 0.474 / 0.465
#: for 10 / 5 / 3 / 2 / none, LoCoMo 0.682 / 0.682 / 0.684 / 0.683 / 0.689; 3 is the fewest that keeps BEAM's.
#: Test halves: BEAM 0.533 with 10, 0.535 with 3; LoCoMo 0.653 both; BEAM's ingestion 360 -> 505 messages/s.
MAX_ENTITIES_PER_MEMORY = 3

#: The same with an LLM extracting (``extractor="llm"``): its entities are fewer and chosen, and the cap of 3 was
#: measured on the offline extractor's only, so an LLM's keep the cap they had before it (10).
LLM_MAX_ENTITIES_PER_MEMORY = 10

__all__ = ["ENTITIES_KEY", "Entity", "EntityExtractor", "LLMEntityExtractor", "OfflineEntityExtractor"]


def _memory_text(node: BaseNode) -> str:
    name = node.metadata.get("name")
    body = node.get_content(metadata_mode=MetadataMode.NONE)
    if isinstance(name, str) and name.strip() and name.strip() != body.strip():
        return f"{name.strip()}\n{body}" if body else name.strip()
    return body


class EntityExtractor(MemoryTransform):
    """Writes ``metadata["lc_entities"]`` (``{"name", "entity_type", "key", "confidence"}`` each) on memories.

    Entities come from the memory's name and description, plus its ``concepts``
    when ``use_concepts``.  ``extractor="llm"`` needs ``llm``; ``known_entities``
    go into its prompt.  The key is excluded from embed/LLM metadata, so entities
    never leak into embeddings or prompts.  The extractors are built at
    construction: make a new transform, rather than assigning fields, to change them.
    """

    extractor: Literal["offline", "llm"] = "offline"
    llm: Any = Field(default=None, exclude=True)
    known_people: list[str] = Field(default_factory=list)
    vocabulary: list[str] = Field(default_factory=list)
    known_entities: list[str] = Field(default_factory=list)
    max_entities_per_memory: Optional[int] = Field(default=None, ge=0, description=(
        "entities each memory keeps, the most confident; None: MAX_ENTITIES_PER_MEMORY offline, "
        "LLM_MAX_ENTITIES_PER_MEMORY with an LLM"))
    use_concepts: bool = True
    num_workers: int = Field(default=4, ge=1, description="Concurrent LLM calls in acall.")

    _extractor: Any = PrivateAttr()

    @model_validator(mode="after")
    def _build_extractors(self) -> "EntityExtractor":
        if self.extractor == "llm" and self.llm is None:
            raise ValueError("extractor='llm' needs an llm (a llama_index.core.llms.LLM)")
        limit = self.max_entities_per_memory
        if limit is None:
            limit = LLM_MAX_ENTITIES_PER_MEMORY if self.extractor == "llm" else MAX_ENTITIES_PER_MEMORY
        self._extractor = OfflineEntityExtractor(self.known_people, self.vocabulary, max_entities=limit)
        if self.extractor == "llm":
            self._extractor = LLMEntityExtractor(self.llm, self.known_entities, fallback=self._extractor,
                                                 max_entities=limit)
        return self

    def _concepts(self, node: BaseNode) -> list[str]:
        concepts = node.metadata.get("concepts") if self.use_concepts else None
        return [c for c in concepts if isinstance(c, str)] if isinstance(concepts, list) else []

    @staticmethod
    def _write(node: BaseNode, entities: list[Entity]) -> None:
        node.metadata[ENTITIES_KEY] = [entity.to_metadata() for entity in entities]
        for excluded in (node.excluded_embed_metadata_keys, node.excluded_llm_metadata_keys):
            if ENTITIES_KEY not in excluded:
                excluded.append(ENTITIES_KEY)

    def extract_node(self, node: BaseNode) -> list[Entity]:
        return self._extractor.extract(_memory_text(node), self._concepts(node))

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        for node in self.memories(nodes):
            self._write(node, self.extract_node(node))
        return nodes

    async def acall(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        if not isinstance(self._extractor, LLMEntityExtractor):
            return self.__call__(nodes, **kwargs)
        semaphore = asyncio.Semaphore(self.num_workers)

        async def one(node: BaseNode) -> None:
            async with semaphore:
                entities = await self._extractor.aextract(_memory_text(node), self._concepts(node))
            self._write(node, entities)

        await asyncio.gather(*(one(node) for node in self.memories(nodes)))
        return nodes
