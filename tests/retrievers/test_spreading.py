"""Spreading activation as the six-way retriever's graph walk (``graph_walk="spreading"``), on the real server."""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone

import pytest

from llama_consciousness.retrievers.config import SPREADING_ACTIVATION, RetrievalConfig
from llama_consciousness.schema import ConsciousnessRelationship, MemoryNode, RetrievalIntention

UTC = timezone.utc
T0 = datetime(2026, 2, 1, tzinfo=UTC)
QUESTION = "what did Mira decide about the lighthouse restoration budget"


def node(citizen: str, node_id: str, name: str, description: str, **kw) -> MemoryNode:
    kw.setdefault("energy", 0.7)
    kw.setdefault("confidence", 0.8)
    return MemoryNode(node_id=node_id, level="N1", citizen_id=citizen, name=name, description=description,
                      created_at=T0, **kw)


def link(citizen: str, source: str, target: str, energy: float = 0.9, **kw) -> ConsciousnessRelationship:
    return ConsciousnessRelationship(source_id=source, target_id=target, relation_type=kw.pop("type", "LEADS_TO"),
                                     level="N1", citizen_id=citizen, energy=energy, confidence=0.9, goal="restore", mindstate="steady",
                                     formation_trigger="planning", energy_transfer_coefficient=0.8,
                                     created_at=T0, **kw)


@pytest.fixture
def chain(memory, citizen):
    """hit -> step -> far: only the first answers the question in words; an expired bridge to a dead end."""
    memory.upsert([
        node(citizen, "hit", "Lighthouse budget", "Mira decided the lighthouse restoration budget would be "
             "eighty thousand"),
        node(citizen, "step", "Quarry call", "A call to the granite quarry about delivery dates"),
        node(citizen, "far", "Harbour crane", "The harbour crane needs a permit for the heavy stones"),
        node(citizen, "gone", "Old bridge", "An old plan that was dropped", expired_at=T0.replace(month=3)),
        node(citizen, "beyond", "Ferry times", "Ferry timetable notes"),
        *[node(citizen, f"noise{i}", f"Garden note {i}", f"Tomatoes and basil, row {i}") for i in range(6)],
    ], [link(citizen, "hit", "step"), link(citizen, "step", "far"), link(citizen, "hit", "gone"),
        link(citizen, "gone", "beyond")], detect_updates=False)
    return citizen


def _graph(stream) -> dict[str, object]:
    return {n.node_id: n for n in stream.levels["n1_personal"].graph_results}


def test_activation_reaches_past_the_hits_with_its_path(memory, chain) -> None:
    retriever = memory.retriever(chain, config=SPREADING_ACTIVATION,
                                 intention_defaults={"query_levels": ["N1"]})
    stream = retriever.retrieve_stream(QUESTION)
    graph = _graph(stream)
    assert {"step", "far"} <= set(graph)  # two links from the only memory the words found
    assert graph["step"].relevance_score > graph["far"].relevance_score  # decay per hop
    assert "gone" not in graph and "beyond" not in graph  # never through an expired memory (current mode)
    paths = {(r.source_id, r.target_id) for r in stream.levels["n1_personal"].relationships}
    assert {("hit", "step"), ("step", "far")} <= paths
    nodes = {n.node.metadata["node_id"]: n for n in retriever.retrieve(QUESTION)}
    assert "N1_graph" in nodes["far"].node.metadata["retrieval_sources"]
    # the depth-1 walk from named memories (the default) does not get there
    default = memory.retriever(chain, intention_defaults={"query_levels": ["N1"]}).retrieve_stream(QUESTION)
    assert "far" not in _graph(default)


def test_spreading_sync_and_async_agree_and_the_budget_limits_it(memory, chain) -> None:
    retriever = memory.retriever(chain, config=SPREADING_ACTIVATION, intention_defaults={"query_levels": ["N1"]})
    sync = _graph(retriever.retrieve_stream(QUESTION))
    asynchronous = _graph(asyncio.run(retriever.aretrieve_stream(QUESTION)))
    assert set(sync) == set(asynchronous)
    small = RetrievalConfig(graph_walk="spreading", spread_budget=0.01, spread_decay=0.2)
    tight = _graph(memory.retriever(chain, config=small, intention_defaults={"query_levels": ["N1"]})
                   .retrieve_stream(QUESTION))
    assert "far" not in tight


def test_the_past_is_walked_in_full_history(memory, chain) -> None:
    retriever = memory.retriever(chain, config=SPREADING_ACTIVATION)
    stream = retriever.retrieve_stream(RetrievalIntention(query_text=QUESTION, citizen_id=chain, query_levels=["N1"],
                                                          temporal_mode="full_history"))
    assert "beyond" in _graph(stream)


def test_bad_spreading_settings_are_refused() -> None:
    for bad in ({"graph_walk": "bfs"}, {"spread_decay": 0}, {"spread_threshold": 1.0}, {"spread_fanout": 0}):
        with pytest.raises(ValueError):
            RetrievalConfig(**bad)


def test_graph_only_spreading_starts_from_the_nearest_memories(memory, chain) -> None:
    only = RetrievalConfig(channels=("graph",), graph_walk="spreading")
    stream = memory.retriever(chain, config=only, intention_defaults={"query_levels": ["N1"]}).retrieve_stream(QUESTION)
    level = stream.levels["n1_personal"]
    assert level.error is None and level.vector_results == [] and "step" in _graph(stream)
