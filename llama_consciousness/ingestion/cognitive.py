"""Spec-004 cognitive fields as LlamaIndex ``TransformComponent``s.

Put them in an ``IngestionPipeline`` before the writer (and after the guards
of :mod:`llama_consciousness.ingestion.guards`, so that concepts are never
extracted from a secret)::

    IngestionPipeline(transformations=[
        PIIScrubber(), InjectionGuard(),
        ConceptExtractor(), SurfacesWhenInferrer(), AuthorityScorer(),
        embed_model, writer,
    ])

Each transform works on memory ``TextNode``s as built by
:func:`llama_consciousness.nodes.memory_to_text_node` (text =
description, metadata = the MemoryNode fields by name) and leaves
relationship nodes (``metadata["kind"] == "relationship"``) alone.  They only
*fill* fields: a value the user gave is kept unless ``overwrite=True``, so a
curated concept list is never replaced by a guessed one.

The scoring itself lives in :mod:`llama_consciousness.scoring.cognitive`
(pure functions); these classes only read and write node metadata.
"""

from __future__ import annotations

import math
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
    compute_authority_score,
    extract_concepts,
    infer_surfaces_when,
)

__all__ = [
    "AuthorityScorer",
    "ConceptExtractor",
    "SurfacesWhenInferrer",
    "concept_source_text",
]

_SECONDS_PER_DAY = 86_400.0


def _memory_nodes(nodes: Sequence[BaseNode]) -> list[BaseNode]:
    return [node for node in nodes if not is_relationship(node)]


def _description(node: BaseNode) -> str:
    return node.get_content(metadata_mode="none") or ""


# A taxonomy tag in front of a name ("intent.rule: ...", "world_fact: ..."):
# a type label, not content.  Only dotted/underscored identifiers count, so
# that "Docker: networking notes" keeps its subject.
_NAME_TAG = re.compile(r"^[a-z][a-z0-9]*[._][a-z0-9_.]*:\s+", re.IGNORECASE)


def concept_source_text(node: BaseNode) -> str:
    """The text concepts are extracted from: the memory's name, then its description.

    The name states the subject, so it goes first.  But names are often the
    description's opening cut short ("intent.rule: When debugging path
    errors..."); repeating it would double-count exactly the words that the
    position weight already favours, so a name (without its taxonomy tag and
    trailing ellipsis) that the description already contains is skipped.
    """
    name = str(node.metadata.get("name") or "").strip()
    description = _description(node).strip()
    stem = _NAME_TAG.sub("", name).rstrip(".\u2026 ").strip()
    if not stem or stem.lower() in description.lower():
        return description
    if not description:
        return stem
    return f"{stem}. {description}"


def _is_empty(value: Any) -> bool:
    return value is None or (isinstance(value, (list, tuple, str)) and len(value) == 0)


class ConceptExtractor(TransformComponent):
    """Fills ``metadata["concepts"]`` with the top-``k`` key terms of name + description.

    Empty (missing, ``None`` or ``[]``) concepts are filled; given ones are
    kept unless ``overwrite`` is set.
    """

    k: int = Field(default=5, ge=1, description="How many concepts to keep.")
    # A sorted tuple, not a set: the pipeline cache hashes str(config), and a
    # set's order changes between processes.
    boost_terms: tuple[str, ...] = Field(
        default=tuple(sorted(DEFAULT_TECHNICAL_TERMS)),
        description="Technical terms that outrank ordinary words.",
    )
    overwrite: bool = Field(default=False, description="Replace concepts that are already set.")

    @classmethod
    def class_name(cls) -> str:
        return "ConceptExtractor"

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        for node in _memory_nodes(nodes):
            if not self.overwrite and not _is_empty(node.metadata.get("concepts")):
                continue
            node.metadata["concepts"] = extract_concepts(
                concept_source_text(node), k=self.k, boost_terms=self.boost_terms
            )
        return nodes

    async def acall(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        # Pure CPU work measured in microseconds: no reason to use a thread.
        return self.__call__(nodes, **kwargs)


class SurfacesWhenInferrer(TransformComponent):
    """Fills ``metadata["surfaces_when"]`` with the query patterns the memory answers.

    Uses the node's ``concepts`` when present (so run it after
    :class:`ConceptExtractor`); otherwise extracts them on the fly without
    storing them, so that this transform only writes the field it owns.
    """

    max_patterns: int = Field(default=8, ge=1, description="Most patterns to keep.")
    k: int = Field(default=5, ge=1, description="Concepts to extract when the node has none.")
    boost_terms: tuple[str, ...] = Field(default=tuple(sorted(DEFAULT_TECHNICAL_TERMS)))
    overwrite: bool = Field(default=False, description="Replace patterns that are already set.")

    @classmethod
    def class_name(cls) -> str:
        return "SurfacesWhenInferrer"

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        for node in _memory_nodes(nodes):
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

    async def acall(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        return self.__call__(nodes, **kwargs)


def _parse_time(value: Any) -> Optional[datetime]:
    """An aware UTC datetime from an ISO string / datetime, or None if absent or unreadable.

    Unreadable times are treated as absent rather than fatal: authority is a
    ranking hint, and a bad timestamp is the schema validator's business.
    """
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return to_utc(value)
    if isinstance(value, str):
        try:
            return to_utc(datetime.fromisoformat(value.strip()))
        except ValueError:
            return None
    return None


def _number(value: Any) -> Optional[float]:
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


COMPUTED_KEY = "lc_computed"


class AuthorityScorer(TransformComponent):
    """Fills ``metadata["authority_score"]`` (spec 004: importance x usage x freshness).

    Inputs, all optional, from the node's metadata:

    * ``extra["importance"]`` (0-10; missing -> neutral 5),
    * ``extra["access_count"]`` (missing -> 0),
    * ``extra["last_accessed_at"]`` (ISO; missing -> never accessed, i.e. as
      recent as the creation),
    * ``created_at`` (ISO; missing -> ``now``: a memory being ingested
      without a creation time is being created now).

    ``now`` pins the clock (tests, backfills; naive = UTC); ``None`` reads the clock once
    per call, so every node of a batch is scored against the same instant.
    A user-given ``authority_score`` is kept unless ``overwrite`` is set.

    Note: ``IngestionPipeline`` caches transform outputs by node content and
    transform configuration; with ``now=None`` a cached score is the one
    computed at the first run.  Pass ``now`` or disable the cache when
    re-scoring.
    """

    now: Optional[datetime] = Field(default=None, description="The instant to score against.")
    overwrite: bool = Field(default=False, description="Replace a score that is already set.")

    @classmethod
    def class_name(cls) -> str:
        return "AuthorityScorer"

    def score(self, metadata: dict[str, Any], now: datetime) -> float:
        """The authority of the memory whose metadata is given, as of ``now``."""
        extra = metadata.get("extra")
        if not isinstance(extra, dict):
            extra = {}
        importance = _number(extra.get("importance"))
        access = _number(extra.get("access_count"))
        access_count = int(access) if access is not None else 0
        created = _parse_time(metadata.get("created_at")) or now
        accessed = _parse_time(extra.get("last_accessed_at"))
        days_created = (now - created).total_seconds() / _SECONDS_PER_DAY
        days_accessed = (
            (now - accessed).total_seconds() / _SECONDS_PER_DAY if accessed is not None else None
        )
        return compute_authority_score(importance, access_count, days_created, days_accessed)

    def __call__(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        now = to_utc(self.now) if self.now is not None else utcnow()
        for node in _memory_nodes(nodes):
            if not self.overwrite and node.metadata.get("authority_score") is not None:
                continue
            node.metadata["authority_score"] = round(self.score(node.metadata, now), 6)
            # Freshness makes a computed score drift with the clock; the writer
            # leaves it out of the record's identity so a rerun stays a no-op.
            node.metadata[COMPUTED_KEY] = sorted({*node.metadata.get(COMPUTED_KEY, []), "authority_score"})
        return nodes

    async def acall(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        return self.__call__(nodes, **kwargs)
