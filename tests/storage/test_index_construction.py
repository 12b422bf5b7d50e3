"""A vector index the server is still building (as FalkorDB leaves every index for a while after loading its
data at a restart) makes a store query wait for it instead of failing: a chat turn written in that window was
refused, and the message lost unless the application retried (half of the first writes after a reopen)."""

from __future__ import annotations

from llama_consciousness.storage import level_store, run_interleaved
from llama_consciousness.storage.filters import MemoryFilter
from llama_consciousness.storage.level_store import NODE_LABEL, VECTOR_PROPERTY
from llama_consciousness.temporal import TemporalWindow

SIZE = 20_000  # enough that building the index takes a while after it is declared


def _index_being_built(store) -> list[str]:
    """Memories stored, then their vector index declared: the server builds it in the background."""
    from llama_consciousness.schema import MemoryNode

    store.upsert([MemoryNode(node_id="template", level="N2", name="Template", description="a stored memory",
                             energy=0.5, confidence=0.7, embedding=[1.0, 0.0, 0.0, 1.0])])
    graph = store.graph
    graph.query(f"DROP VECTOR INDEX FOR (n:{NODE_LABEL}) ON (n.{VECTOR_PROPERTY})")
    graph.query(f"MATCH (t:{NODE_LABEL} {{node_id: 'template'}}) UNWIND range(1, $n) AS i "
                f"CREATE (c:{NODE_LABEL}) SET c = properties(t), c.node_id = 'm' + toString(i), "
                f"c.base_id = 'm' + toString(i), c.{VECTOR_PROPERTY} = vecf32([i % 7, i % 11, i % 13, 1.0])",
                {"n": SIZE})
    graph.query(f"CREATE VECTOR INDEX FOR (n:{NODE_LABEL}) ON (n.{VECTOR_PROPERTY}) "
                "OPTIONS {dimension: 4, similarityFunction: 'cosine'}")
    return [str(r[7]) for r in graph.ro_query("CALL db.indexes()").result_set if r[0] == NODE_LABEL]


def test_a_query_waits_for_a_vector_index_under_construction(fresh_graph) -> None:
    store = fresh_graph("N2", dimension=4)
    building = _index_being_built(store)
    found = store.run(store.plans.nearest([("q", [1.0, 2.0, 3.0, 1.0])], k=3))
    assert len(found["q"]) == 3
    assert any("CONSTRUCTION" in status.upper() for status in building), building  # the case was exercised


def test_a_retrieval_asks_again_within_its_deadline(memory, fresh_graph) -> None:
    """The channels' runner asks a vector search again while the index is being built, until its deadline:
    the first questions after a restart came back without their vector channel."""
    store = fresh_graph("N2", dimension=4)
    building = _index_being_built(store)
    plan = store.plans.vector_search([1.0, 2.0, 3.0, 1.0], 5, MemoryFilter(TemporalWindow("full_history")))
    (hits,) = run_interleaved(memory.db, [(store.plans.graph, plan)], 20_000)
    assert not isinstance(hits, BaseException), hits
    assert len(hits) == 5
    assert any("CONSTRUCTION" in status.upper() for status in building), building


def test_only_the_answer_about_an_unready_index_is_waited_for() -> None:
    assert level_store._index_not_ready(RuntimeError("Invalid arguments for procedure 'db.idx.vector.queryNodes'"))
    assert not level_store._index_not_ready(RuntimeError("Invalid input 'X': expected MATCH"))
