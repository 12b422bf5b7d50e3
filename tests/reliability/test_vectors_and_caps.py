"""Non-finite or out-of-range vectors and oversized collections are refused at the edge, with a clear error.

Reproduced before: a NaN query vector returned ranked memories on FalkorDB
levels; an embedding component of 1e12 overflowed the store's integer
encoding and reversed the stored vector; a ``StateBasedRetrieval`` with
100,000 emotions burned 30 s of CPU.
"""

from __future__ import annotations

import math
import time

import pytest
from llama_index.core.embeddings import BaseEmbedding
from pydantic import ValidationError

from llama_consciousness import ConsciousnessMemory, MemoryNode, RetrievalIntention
from llama_consciousness.retrievers import SixWayHybridRetriever
from llama_consciousness.schema import StateBasedRetrieval
from llama_consciousness.schema.common import MAX_EMBEDDING_COMPONENT, MAX_EMOTIONS, MAX_LIST_ITEMS, check_vector


def _memory(node_id: str, citizen: str, **fields) -> MemoryNode:
    fields.setdefault("energy", 0.5)
    fields.setdefault("confidence", 0.5)
    return MemoryNode(node_id=node_id, level="N1", citizen_id=citizen, name=node_id, description="a note", **fields)


def test_check_vector_names_the_component() -> None:
    assert check_vector([0.5, -1, 2]) == [0.5, -1.0, 2.0]
    for bad, index in (([0.1, math.nan], 1), ([math.inf], 0), ([0.0, 0.0, 1e12], 2), ([-2e6], 0)):
        with pytest.raises(ValueError, match=rf"embedding\[{index}\]"):
            check_vector(bad)
    assert check_vector([MAX_EMBEDDING_COMPONENT, -MAX_EMBEDDING_COMPONENT]) == [1e6, -1e6]


def test_a_stored_embedding_out_of_range_is_refused_and_nothing_is_written(memory, citizen) -> None:
    dim = memory.dimension
    with pytest.raises(ValidationError, match="within"):
        _memory("huge", citizen, embedding=[1e12] + [0.0] * (dim - 1))
    with pytest.raises(ValidationError, match="finite"):
        _memory("nan", citizen, embedding=[math.nan] * dim)
    # a vector just inside the bound is stored and read back as written (no overflow, no reversal)
    big = [MAX_EMBEDDING_COMPONENT] + [0.0] * (dim - 1)
    memory.upsert([_memory("big", citizen, embedding=big)])
    hits = memory.vector_search(big, "N1", citizen, k=1)
    assert [h.node_id for h in hits] == ["big"] and hits[0].relevance_score == pytest.approx(1.0, abs=1e-6)


def test_a_nan_query_vector_is_refused(memory, citizen) -> None:
    memory.upsert([_memory("m", citizen)])
    with pytest.raises(ValueError, match="query vector"):
        memory.vector_search([math.nan] * memory.dimension, "N1", citizen)


class _BrokenEmbedding(BaseEmbedding):
    """An embedding model that answers NaN (a broken server or model): the edge must refuse it."""

    def _get_query_embedding(self, query: str) -> list[float]:
        return [math.nan] * 8

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return [math.nan] * 8


def test_a_model_that_answers_nan_is_refused_on_write_and_on_retrieval(falkordb_server, citizen) -> None:
    with ConsciousnessMemory(falkordb_url=falkordb_server.url, embed_model=_BrokenEmbedding()) as broken:
        with pytest.raises(ValueError, match="finite"):
            broken.upsert([_memory("m", citizen)])
        assert broken.counts("N1", citizen) == (0, 0)  # nothing was written
        with pytest.raises(ValueError, match="query embedding"):
            SixWayHybridRetriever(broken, citizen).retrieve("anything")


def test_collections_have_caps() -> None:
    too_many = {f"feeling_{i}": 0.5 for i in range(MAX_EMOTIONS + 1)}
    started = time.perf_counter()
    with pytest.raises(ValidationError, match=f"at most {MAX_EMOTIONS}"):
        StateBasedRetrieval(citizen_id="c", current_energy=0.5,
                            current_emotions={f"feeling_{i}": 0.5 for i in range(100_000)})
    assert time.perf_counter() - started < 2  # refused before any work on 100,000 names
    with pytest.raises(ValidationError, match=f"at most {MAX_EMOTIONS}"):
        _memory("m", "c", emotion_vector=too_many)
    with pytest.raises(ValidationError, match="at most 64"):
        _memory("m", "c", emotion_vector={"x" * 65: 0.5})
    with pytest.raises(ValidationError, match=f"at most {MAX_EMOTIONS}"):
        RetrievalIntention(query_text="q", citizen_id="c", required_emotions=list(too_many))
    for field in ("concepts", "surfaces_when"):
        with pytest.raises(ValidationError, match=f"{field} has {MAX_LIST_ITEMS + 1} items"):
            _memory("m", "c", **{field: [f"c{i}" for i in range(MAX_LIST_ITEMS + 1)]})
    with pytest.raises(ValidationError, match="sensory_details"):
        _memory("m", "c", sensory_details={f"k{i}": "v" for i in range(MAX_LIST_ITEMS + 1)})
    # at the caps, accepted
    _memory("m", "c", emotion_vector={f"feeling_{i}": 0.5 for i in range(MAX_EMOTIONS)},
            concepts=[f"c{i}" for i in range(MAX_LIST_ITEMS)])
