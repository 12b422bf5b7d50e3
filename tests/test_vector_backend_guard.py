"""A level's vectors stay in the backend of its first write (issue 40, item 6: a large level recovers from a
crash in seconds with its vectors in Postgres, and the slow-start warning says so).  Opening such a level
with the other backend used to write memories without vectors into a graph whose vector channel then
answered nothing, silently: now the first write says where the vectors are."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from llama_consciousness import ConsciousnessMemory, MemoryNode, RetrievalIntention, VectorBackendError


def _memory(node_id: str, level: str, citizen: str | None = None) -> MemoryNode:
    return MemoryNode(node_id=node_id, level=level, citizen_id=citizen, name=f"Harbour note {node_id}",
                      description="The harbour tides were logged at dawn", energy=0.5, confidence=0.8)


def test_a_level_opened_with_another_vector_backend_refuses_to_write(data_root: Path, postgres_url: str,
                                                                      citizen: str) -> None:
    directory = data_root / f"vb{uuid.uuid4().hex[:6]}"
    with ConsciousnessMemory(data_dir=directory, postgres_url=postgres_url,
                             vector_backends={"N1": "pgvector"}) as memory:
        memory.upsert([_memory("n1_first", "N1", citizen), _memory("n2_first", "N2")])

    # N1 was written with its vectors in Postgres, N2 with its vectors in FalkorDB
    with ConsciousnessMemory(data_dir=directory, postgres_url=postgres_url, vector_backends={}) as memory:
        with pytest.raises(VectorBackendError, match=r"Postgres.*vector_backends=\{'N1': 'pgvector'\}"):
            memory.upsert([_memory("n1_second", "N1", citizen)])
        memory.upsert([_memory("n2_second", "N2")])  # the level that did not change writes as before
    with ConsciousnessMemory(data_dir=directory, postgres_url=postgres_url,
                             vector_backends={"N1": "pgvector", "N2": "pgvector"}) as memory:
        with pytest.raises(VectorBackendError, match=r"FalkorDB.*vector_backends=\{'N2': 'falkordb'\}"):
            memory.upsert([_memory("n2_third", "N2")])
        memory.upsert([_memory("n1_second", "N1", citizen)])
        assert memory.level("N1", citizen).existing_ids(["n1_first", "n1_second", "n1_third"]) == {
            "n1_first", "n1_second"}
    # nothing was written by the refused calls, and both levels still find their memories by meaning
    with ConsciousnessMemory(data_dir=directory, postgres_url=postgres_url,
                             vector_backends={"N1": "pgvector"}) as memory:
        assert memory.level("N2").existing_ids(["n2_first", "n2_second", "n2_third"]) == {"n2_first", "n2_second"}
        stream = memory.retrieve_stream(RetrievalIntention(query_text="harbour tides at dawn", citizen_id=citizen,
                                                           query_levels=["N1", "N2"]))
        found = {n.node_id for nodes in stream.activation_tiers.values() for n in nodes}
        assert {"n1_first", "n1_second", "n2_first", "n2_second"} <= found


def test_an_empty_level_takes_the_backend_it_is_opened_with(data_root: Path, postgres_url: str,
                                                            citizen: str) -> None:
    directory = data_root / f"vb{uuid.uuid4().hex[:6]}"
    with ConsciousnessMemory(data_dir=directory, postgres_url=postgres_url, vector_backends={}) as memory:
        memory.writable("N1", citizen)  # the graph and its FalkorDB vector index, no memory yet
    with ConsciousnessMemory(data_dir=directory, postgres_url=postgres_url,
                             vector_backends={"N1": "pgvector"}) as memory:
        memory.upsert([_memory("first", "N1", citizen)])
        hits = memory.vector_search("harbour tides at dawn", level="N1", citizen_id=citizen, k=3)
        assert [h.node_id for h in hits][:1] == ["first"]
