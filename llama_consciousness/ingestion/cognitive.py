"""Spec-004 cognitive fields (concepts, surfaces_when, authority) as LlamaIndex ``TransformComponent``s.

Run them after the guards of :mod:`llama_consciousness.ingestion.guards`, so that
concepts are never extracted from a secret.  They only *fill* fields: a value the
user gave is kept unless ``overwrite=True``, so a curated concept list is never
replaced by a guessed one.  The scoring itself lives in
:mod:`llama_consciousness.scoring.cognitive`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any, Optional

from llama_index.core.schema import BaseNode, TransformComponent
from pydantic import Field

from llama_consciousness.nodes import is_relationship
from llama_consciousness.schema._time import to_utc, utcnow
from llama_consciousness.scoring.cognitive import (
    DEFAULT_TECHNICAL_TERMS,
    authority_from_metadata,
    extract_concepts,
    infer_surfaces_when,
)

__all__ = [
    "AuthorityScorer",
    "ConceptExtractor",
    "SurfacesWhenInferrer",
    "concept_source_text",
]


class MemoryTransform(TransformComponent):
    """A transform of memory nodes: relationship nodes pass through untouched."""

    @classmethod
    def class_name(cls) -> str:
        return cls.__name__

    @staticmethod
    def memories(nodes: Sequence[BaseNode]) -> list[BaseNode]:
        return [node for node in nodes if not is_relationship(node)]


# A taxonomy tag in front of a name ("intent.rule: ...", "world_fact: ..."): a type
# label, not content.  Only dotted/underscored identifiers count, so that "Docker:
# networking notes" keeps its subject.
_NAME_TAG = re.compile(r"^[a-z][a-z0-9]*[._][a-z0-9_.]*:\s+", re.IGNORECASE)


def concept_source_text(node: BaseNode) -> str:
    """The memory's name, then its description: concepts are extracted from this.

    A name (without its taxonomy tag and ellipsis) that the description already
    contains is skipped: it would double-count the words the position weight
    already favours.
    """
    name = str(node.metadata.get("name") or "").strip()
    description = (node.get_content(metadata_mode="none") or "").strip()
    stem = _NAME_TAG.sub("", name).rstrip(".\u2026 ").strip()
    if not stem or stem.lower() in description.lower():
        return description
    return f"{stem}. {description}" if description else stem


def _is_empty(value: Any) -> bool:
    return value is None or (isinstance(value, (list, tuple, str)) and len(value) == 0)


class ConceptExtractor(MemoryTransform):
    """Fills empty ``metadata["concepts"]`` with the top-``k`` key terms of name + description."""

    k: int = Field(default=5, ge=1, description="How many concepts to keep.")
    # A sorted tuple, not a set: the pipeline cache hashes str(config), and a
    # set's order changes between processes.
    boost_terms: tuple[str, ...] = Field(
        default=tuple(sorted(DEFAULT_TECHNICAL_TERMS)),
        description="Technical terms that outrank ordinary words.",
    )
    overwrite: bool = Field(default=False, description="Replace concepts that are already set.")

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        for node in self.memories(nodes):
            if self.overwrite or _is_empty(node.metadata.get("concepts")):
                node.metadata["concepts"] = extract_concepts(
                    concept_source_text(node), k=self.k, boost_terms=self.boost_terms
                )
        return nodes


class SurfacesWhenInferrer(MemoryTransform):
    """Fills empty ``metadata["surfaces_when"]`` with the query patterns the memory answers.

    Uses the node's ``concepts`` (run it after :class:`ConceptExtractor`); without
    them, extracts some on the fly without storing them.
    """

    max_patterns: int = Field(default=8, ge=1, description="Most patterns to keep.")
    k: int = Field(default=5, ge=1, description="Concepts to extract when the node has none.")
    boost_terms: tuple[str, ...] = Field(default=tuple(sorted(DEFAULT_TECHNICAL_TERMS)))
    overwrite: bool = Field(default=False, description="Replace patterns that are already set.")

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        for node in self.memories(nodes):
            if not self.overwrite and not _is_empty(node.metadata.get("surfaces_when")):
                continue
            text = concept_source_text(node)
            concepts = node.metadata.get("concepts")
            if _is_empty(concepts) or not isinstance(concepts, (list, tuple)):
                concepts = extract_concepts(text, k=self.k, boost_terms=self.boost_terms)
            node.metadata["surfaces_when"] = infer_surfaces_when(
                text, [str(c) for c in concepts], max_patterns=self.max_patterns
            )
        return nodes


COMPUTED_KEY = "lc_computed"


class AuthorityScorer(MemoryTransform):
    """Fills ``metadata["authority_score"]`` (spec 004: importance x usage x freshness).

    Reads ``extra["importance"]`` (missing: neutral 5), ``extra["access_count"]``
    (missing: 0), ``extra["last_accessed_at"]`` (missing: as recent as the
    creation) and ``created_at`` (missing: ``now``).  ``now`` pins the clock
    (naive = UTC); ``None`` reads it once per call.  A given score is kept unless
    ``overwrite``.  ``IngestionPipeline``'s cache keeps the score of the first
    run: pass ``now`` or disable the cache when re-scoring.
    """

    now: Optional[datetime] = Field(default=None, description="The instant to score against.")
    overwrite: bool = Field(default=False, description="Replace a score that is already set.")

    def score(self, metadata: dict[str, Any], now: datetime) -> float:
        """The authority of the memory whose metadata is given, as of ``now``."""
        return authority_from_metadata(metadata, now)

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        now = to_utc(self.now) if self.now is not None else utcnow()
        for node in self.memories(nodes):
            if not self.overwrite and node.metadata.get("authority_score") is not None:
                continue
            node.metadata["authority_score"] = round(self.score(node.metadata, now), 6)
            # Freshness makes a computed score drift with the clock; the writer
            # leaves it out of the record's identity so a rerun stays a no-op.
            node.metadata[COMPUTED_KEY] = sorted({*node.metadata.get(COMPUTED_KEY, []), "authority_score"})
        return nodes
