"""Spec 004 cognitive fields: the concept, surfaces_when and authority transforms.

The transforms are exercised inside a real ``IngestionPipeline`` on nodes
built by ``memory_to_text_node`` and read back with ``text_node_to_memory``;
the pure functions they apply (and the spec's worked examples) are tested in
``tests/scoring/test_cognitive_scoring.py``.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from llama_index.core.ingestion import IngestionPipeline

from llama_consciousness.ingestion.cognitive import (
    AuthorityScorer,
    ConceptExtractor,
    SurfacesWhenInferrer,
    concept_source_text,
)
from llama_consciousness.nodes import (
    memory_to_text_node,
    relationship_to_text_node,
    text_node_to_memory,
    text_node_to_relationship,
)
from llama_consciousness.schema import ConsciousnessRelationship, MemoryNode
from llama_consciousness.scoring.cognitive import compute_authority_score

UTC = timezone.utc
NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=UTC)

ELEFANTE = "Always use absolute paths in Elefante to avoid errors"
DEBUGGING = "When debugging path errors, use absolute paths"


def memory(**kwargs) -> MemoryNode:
    base = dict(node_id="m1", level="N3", name="Always use absolute paths...", description=ELEFANTE, energy=0.6, confidence=0.8)
    base.update(kwargs)
    return MemoryNode(**base)


def relationship_node():
    rel = ConsciousnessRelationship(
        source_id="m1", target_id="m2", relation_type="SUPPORTS", goal="ship v1",
        mindstate="focused", energy=0.7, confidence=0.9,
    )
    return relationship_to_text_node(rel)


# --------------------------------------------------------------- transforms


def _pipeline():
    return IngestionPipeline(
        transformations=[ConceptExtractor(), SurfacesWhenInferrer(), AuthorityScorer(now=NOW)]
    )


def _nodes():
    created = NOW - timedelta(days=30)
    m1 = memory(
        node_id="m1", name="intent.rule: When debugging path errors...", description=DEBUGGING,
        created_at=created,
        extra={"importance": 8, "access_count": 10, "last_accessed_at": (NOW - timedelta(days=2)).isoformat()},
    )
    m2 = memory(node_id="m2", name="Always use absolute paths in Elefante", description=ELEFANTE)  # no created_at: "now"
    m3 = memory(
        node_id="m3", name="curated", description=ELEFANTE,
        concepts=["curated"], surfaces_when=["curated query"], authority_score=0.42,
    )
    return [memory_to_text_node(m) for m in (m1, m2, m3)] + [relationship_node()]


def _check(result):
    assert len(result) == 4
    by_id = {node.node_id: node for node in result}
    m1 = text_node_to_memory(by_id["m1"])
    assert m1.concepts == ["debugging", "path", "errors", "absolute", "paths"]
    assert m1.surfaces_when[:3] == ["debugging error", "path error", "debugging best practice"]
    assert m1.authority_score == pytest.approx(compute_authority_score(8, 10, 30, 2), abs=1e-6)

    m2 = text_node_to_memory(by_id["m2"])
    assert m2.concepts == ["elefante", "always", "absolute", "paths", "avoid"]
    assert m2.surfaces_when[:3] == ["elefante error", "elefante problem", "elefante best practice"]
    assert m2.authority_score == pytest.approx(compute_authority_score(None, 0, 0, None), abs=1e-6)

    m3 = text_node_to_memory(by_id["m3"])  # user-given values are kept
    assert (m3.concepts, m3.surfaces_when, m3.authority_score) == (["curated"], ["curated query"], 0.42)

    rel = by_id["rel:m1|SUPPORTS|m2"]
    assert "concepts" not in rel.metadata and "authority_score" not in rel.metadata
    assert text_node_to_relationship(rel).relation_type == "SUPPORTS"


def test_transforms_in_pipeline_sync():
    _check(_pipeline().run(nodes=_nodes()))


async def test_transforms_in_pipeline_async():
    _check(await _pipeline().arun(nodes=_nodes()))


def test_overwrite_replaces_given_values():
    node = memory_to_text_node(memory(concepts=["x"], surfaces_when=["y"], authority_score=0.1, created_at=NOW))
    pipeline = IngestionPipeline(transformations=[
        ConceptExtractor(overwrite=True, k=3),
        SurfacesWhenInferrer(overwrite=True, max_patterns=2),
        AuthorityScorer(now=NOW, overwrite=True),
    ])
    (result,) = pipeline.run(nodes=[node])
    back = text_node_to_memory(result)
    assert back.concepts == ["elefante", "always", "absolute"]
    assert back.surfaces_when == ["elefante error", "elefante problem"]
    assert back.authority_score == pytest.approx(compute_authority_score(None, 0, 0, 0), abs=1e-6)


def test_surfaces_when_without_concepts_extracts_them_itself():
    node = memory_to_text_node(memory())
    (result,) = SurfacesWhenInferrer()([node])
    assert result.metadata["surfaces_when"][:3] == ["elefante error", "elefante problem", "elefante best practice"]
    assert result.metadata["concepts"] == []  # only its own field is written


def test_concept_source_text_uses_name_unless_repeated():
    node = memory_to_text_node(memory(name="Docker networking", description="bridge mode breaks DNS"))
    assert concept_source_text(node) == "Docker networking. bridge mode breaks DNS"
    node = memory_to_text_node(memory(name="Always use absolute paths...", description=ELEFANTE))
    assert concept_source_text(node) == ELEFANTE
    node = memory_to_text_node(memory(name="intent.rule: When debugging path errors...", description=DEBUGGING))
    assert concept_source_text(node) == DEBUGGING
    node = memory_to_text_node(memory(name="Docker: networking", description="bridge mode"))
    assert concept_source_text(node) == "Docker: networking. bridge mode"
    node = memory_to_text_node(memory(name="Docker networking", description=""))
    assert ConceptExtractor()([node])[0].metadata["concepts"] == ["docker", "networking"]
    node = memory_to_text_node(memory(name="Docker networking", description="bridge mode breaks DNS"))
    assert ConceptExtractor(k=3)([node])[0].metadata["concepts"] == ["docker", "networking", "bridge"]


def test_authority_scorer_reads_extra_and_tolerates_bad_values():
    created = NOW - timedelta(days=100)
    node = memory_to_text_node(memory(
        created_at=created,
        extra={"importance": "9", "access_count": 3, "last_accessed_at": "not a date"},
    ))
    (result,) = AuthorityScorer(now=NOW.replace(tzinfo=None))([node])  # naive now = UTC
    expected = compute_authority_score(9, 3, 100, None)
    assert result.metadata["authority_score"] == pytest.approx(expected, abs=1e-6)
    assert text_node_to_memory(result).authority_score == pytest.approx(expected, abs=1e-6)


def test_authority_scorer_without_now_uses_clock():
    node = memory_to_text_node(memory(extra={"importance": 10, "access_count": 50}))
    (result,) = AuthorityScorer()([node])
    assert result.metadata["authority_score"] == pytest.approx(1.0, abs=1e-3)
