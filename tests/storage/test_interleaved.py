"""Plans run interleaved on one thread, the stream's reads of the graphs, and retrieved nodes built without
revalidation."""

from __future__ import annotations

import threading
import uuid


from llama_consciousness.errors import StorageError
from llama_consciousness.ingestion import demo_memory_file
from llama_consciousness.postprocessors import default_postprocessors
from llama_consciousness.postprocessors.constellation import ConstellationPostprocessor
from llama_consciousness.postprocessors.pipeline import complete_stream
from llama_consciousness.postprocessors.traversal_paths import TraversalPathPostprocessor
from llama_consciousness.schema import ConsciousnessNode, MemoryNode, RetrievalIntention
from llama_consciousness.schema.memory import retrieved_node
from llama_consciousness.storage import replies
from llama_consciousness.storage.interleaved import run_interleaved
from llama_consciousness.storage.level_store import Query


def _memory(node_id: str) -> MemoryNode:
    return MemoryNode(node_id=node_id, level="N2", node_type="Memory", name=node_id, description=f"about {node_id}",
                      energy=0.5, confidence=0.7, emotion_vector={"curiosity": 0.6})


def _two_step(value: str):
    first = yield Query("RETURN $v", {"v": value}, read_only=True)
    second = yield Query("RETURN $v + '!'", {"v": first[0][0]}, read_only=True)
    return second[0][0]


def _bad():
    yield Query("RETURN nosuchfunction(1)", read_only=True)
    return "never"


def test_plans_run_side_by_side_with_their_results_in_order(memory, fresh_graph) -> None:
    a, b = fresh_graph(), fresh_graph()
    a.upsert([_memory("m1")])
    jobs = [(a.plans.graph, _two_step("x")), (b.plans.graph, _bad()), (a.plans.graph, a.plans.get_nodes(["m1"])),
            (f"never_{uuid.uuid4().hex[:8]}", b.plans.get_nodes(["m1"]))]
    first, failed, nodes, missing = run_interleaved(memory.db, jobs, timeout_ms=5000)
    assert first == "x!"  # the second query saw the first's rows
    assert isinstance(failed, StorageError) and "nosuchfunction" in str(failed).lower()
    assert [n.node_id for n in nodes] == ["m1"]
    assert missing == []  # a graph never written reads as empty, as in LevelGraphStore
    # every connection went back to the pool in a reusable state
    assert run_interleaved(memory.db, [(a.plans.graph, _two_step("y"))]) == ["y!"]


def _slow():
    rows = yield Query("UNWIND range(1, 30000000) AS x WITH x WHERE x % 7 = 0 RETURN count(x)", read_only=True)
    return rows[0][0]


def test_a_connection_the_server_closes_mid_query_fails_its_plan_alone(memory, fresh_graph) -> None:
    """The server drops a connection with a query in flight (it died, or was told to): that plan fails, the run
    returns (a closed socket used to escape from the wait for replies and fail every plan of the retrieval)."""
    a = fresh_graph()
    a.upsert([_memory("m1")])
    killer = threading.Timer(0.3, lambda: memory.db.connection.execute_command("CLIENT", "KILL", "TYPE", "normal"))
    killer.start()
    try:
        results = run_interleaved(memory.db, [(a.plans.graph, _slow()), (a.plans.graph, _slow())], timeout_ms=20000)
    finally:
        killer.join()
    assert all(isinstance(r, StorageError) for r in results), results
    assert run_interleaved(memory.db, [(a.plans.graph, _two_step("z"))]) == ["z!"]  # and the pool still works


def test_retrieved_node_equals_a_validated_one() -> None:
    node = _memory("m2").model_copy(update={"embedding": [0.1, 0.2]})
    fast = retrieved_node(node, "N2_vector", 0.25)
    slow = ConsciousnessNode.model_validate({**node.model_dump(exclude={"embedding"}),
                                             "retrieval_source": "N2_vector", "relevance_score": 0.25})
    assert type(fast) is ConsciousnessNode and fast == slow
    assert fast.embedding is None and fast.model_dump() == slow.model_dump()

    class Richer(MemoryNode):
        note: str = "x"

    rich = Richer(**_memory("m3").model_dump())
    assert retrieved_node(rich, "N2_graph", 0.5).relevance_score == 0.5  # subclasses are validated instead


def test_stream_reads_the_neighbourhood_and_the_links_once(memory, monkeypatch) -> None:
    """In a complete stream the traversal graph reads each level graph's neighbourhood once and the
    constellation its links once, and both are what the steps build alone on the same nodes."""
    memory.ingest(demo_memory_file())
    intention = RetrievalIntention(query_text="FalkorDB capabilities and the team", citizen_id="ada",
                                   query_levels=["N1", "N2"])
    stream, nodes = memory.retriever("ada").retrieve_stream_and_nodes(intention)  # no stream steps: bare
    steps = default_postprocessors(memory)
    traversal = next(s for s in steps if isinstance(s, TraversalPathPostprocessor))
    constellation = next(s for s in steps if isinstance(s, ConstellationPostprocessor))

    sent: list[str] = []
    linked: list[str] = []
    command = replies.command

    def count(graph, text, read_only, timeout_ms):
        if "min_links" in text:
            sent.append(text)
        if "r.relation_type = $type" in text:
            linked.append(text)
        return command(graph, text, read_only, timeout_ms)

    monkeypatch.setattr(replies, "command", count)
    full, full_nodes = complete_stream(stream, [n.model_copy(deep=True) for n in nodes], intention, steps)
    levels = {n.node.metadata["level"] for n in full_nodes}
    assert len(sent) == len(levels)  # connector candidates: once per level graph
    assert len(linked) == 1  # 2 relations x 2 directions in one query, asked once
    monkeypatch.undo()

    alone = traversal.process([n.model_copy(deep=True) for n in full_nodes], None, intention)
    got, expected = full.traversal_graph, alone.stream_fields["traversal_graph"]
    assert {n.node_id for n in got.nodes} == {n.node_id for n in expected.nodes}
    assert {e.edge_id for e in got.edges} == {e.edge_id for e in expected.edges}
    again = constellation.build([n.model_copy(deep=True) for n in full_nodes])
    assert full.constellation is not None
    assert again.primary == full.constellation.primary
    assert [m.node_id for m in again.supporting] == [m.node_id for m in full.constellation.supporting]
