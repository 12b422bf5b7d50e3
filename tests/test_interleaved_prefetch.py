"""Plans run interleaved on one thread, the stream's early reads, and retrieved nodes built without revalidation."""

from __future__ import annotations

import uuid

import pytest

from llama_consciousness.errors import StorageError
from llama_consciousness.ingestion import demo_memory_file
from llama_consciousness.postprocessors import default_postprocessors
from llama_consciousness.postprocessors.pipeline import complete_stream
from llama_consciousness.postprocessors.tiers import ActivationTierPostprocessor
from llama_consciousness.postprocessors.traversal_paths import TraversalPathPostprocessor
from llama_consciousness.schema import ConsciousnessNode, MemoryNode, RetrievalIntention
from llama_consciousness.storage import replies
from llama_consciousness.storage.interleaved import Interleaved, PrefetchSlot, run_interleaved
from llama_consciousness.storage.level_store import Query, retrieved_node


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


def test_progress_sends_the_next_query_once_a_reply_is_in_and_never_waits(memory, fresh_graph) -> None:
    import time

    a = fresh_graph()
    sent: list[str] = []

    def plan():
        first = yield Query("RETURN $v", {"v": "first"}, read_only=True)
        sent.append(first[0][0])
        second = yield Query("RETURN $v", {"v": "second"}, read_only=True)
        sent.append(second[0][0])
        return sent[-1]

    running = Interleaved(memory.db, [(a.plans.graph, plan())])
    deadline = time.monotonic() + 5
    while not sent and time.monotonic() < deadline:
        running.progress()  # reads the first reply once it is in and sends the second query
        time.sleep(0.001)
    assert sent == ["first"]
    while len(sent) < 2 and time.monotonic() < deadline:
        running.progress()
        time.sleep(0.001)
    assert sent == ["first", "second"]  # both replies read without results()
    assert running.results() == ["second"]
    running.progress()  # after results(): nothing to do, no error
    assert Interleaved.empty().progress() is None


def test_interleaved_halves_and_discard(memory, fresh_graph) -> None:
    a = fresh_graph()
    running = Interleaved(memory.db, [(a.plans.graph, _two_step("p"))])
    assert running.results() == ["p!"]
    with pytest.raises(RuntimeError):
        running.results()
    dropped = Interleaved(memory.db, [(a.plans.graph, _two_step("q"))])
    dropped.discard()  # the unread reply's connection is dropped, not reused
    assert run_interleaved(memory.db, [(a.plans.graph, _two_step("r"))]) == ["r!"]
    assert Interleaved.empty().results() == []


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


def test_keeps_nodes_answers_what_the_step_will_do() -> None:
    tiers = ActivationTierPostprocessor()
    limit = tiers.focus + tiers.peripheral + tiers.background
    assert tiers.keeps_nodes([object()] * limit) and not tiers.keeps_nodes([object()] * (limit + 1))
    assert not ActivationTierPostprocessor(drop_background=True).keeps_nodes([])


def test_stream_reads_the_neighbourhood_early_and_once(memory, monkeypatch) -> None:
    memory.ingest(demo_memory_file())
    intention = RetrievalIntention(query_text="FalkorDB capabilities and the team", citizen_id="ada",
                                   query_levels=["N1", "N2"])
    retriever = memory.retriever("ada")
    stream, nodes = retriever._retrieve_both(intention)
    steps = default_postprocessors(memory)
    traversal = next(s for s in steps if isinstance(s, TraversalPathPostprocessor))
    expected = traversal.model_copy().build_graph(nodes)  # a fresh copy reads on its own

    calls: list[str] = []
    prefetch = TraversalPathPostprocessor.prefetch

    def spy(self, nodes, intention=None):
        calls.append("prefetch")
        return prefetch(self, nodes, intention)

    sent: list[str] = []
    linked: list[str] = []
    command = replies.command

    def count(graph, text, read_only, timeout_ms):
        if "min_links" in text:
            sent.append(text)
        if "r.relation_type = $type" in text:
            linked.append(text)
        return command(graph, text, read_only, timeout_ms)

    monkeypatch.setattr(TraversalPathPostprocessor, "prefetch", spy)
    monkeypatch.setattr(replies, "command", count)
    full, full_nodes = complete_stream(stream, [n.model_copy(deep=True) for n in nodes], intention, steps)
    assert calls == ["prefetch"]
    constellation = steps[-1]
    assert len(linked) == 1 and constellation._reads.empty  # 2 relations x 2 directions in one query, asked once
    reference = constellation.model_copy()
    reference._reads = PrefetchSlot()  # a copy shares its original's slot
    again = reference.build(list(full_nodes))
    assert again.primary == constellation.last_constellation.primary
    assert [m.node_id for m in again.supporting] == [m.node_id for m in constellation.last_constellation.supporting]
    levels = {n.node.metadata["level"] for n in nodes}
    assert len(sent) == len(levels)  # connectors read once per level: the prefetch was collected
    assert traversal._reads.empty
    got = full.traversal_graph
    assert {n.node_id for n in got.nodes} == {n.node_id for n in expected.nodes}
    assert {e.edge_id for e in got.edges} == {e.edge_id for e in expected.edges}


def test_prefetch_slot_gives_reads_only_to_the_same_key(memory, fresh_graph) -> None:
    a = fresh_graph()
    slot = PrefetchSlot()
    assert slot.empty and slot.claim("k") is None
    slot.hold("k", Interleaved(memory.db, [(a.plans.graph, _two_step("s"))]), extra=["N2"])
    slot.progress()  # never waits
    running, extra = slot.claim("k")
    assert slot.empty and extra == ["N2"] and running.results() == ["s!"]

    slot.hold("k", Interleaved(memory.db, [(a.plans.graph, _two_step("t"))]))
    assert slot.claim("other") is None and slot.empty  # another key: the reads are dropped
    first = Interleaved(memory.db, [(a.plans.graph, _two_step("u"))])
    slot.hold("k", first)
    slot.hold("k2", Interleaved(memory.db, [(a.plans.graph, _two_step("v"))]))  # a new hold drops the old reads
    with pytest.raises(RuntimeError):
        first.results()
    slot.discard()
    assert slot.empty
    assert run_interleaved(memory.db, [(a.plans.graph, _two_step("w"))]) == ["w!"]  # connections still good


# -- work beside a query in flight (Query.meanwhile) ---------------------------------


def _ro_calls(memory) -> int:
    """How many GRAPH.RO_QUERY commands the server has received."""
    return memory.db.connection.info("commandstats").get("cmdstat_graph.RO_QUERY", {}).get("calls", 0)


def _sent_within(memory, before: int, seconds: float = 5.0) -> bool:
    import time

    deadline = time.monotonic() + seconds
    while _ro_calls(memory) <= before:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.002)
    return True


def _beside(memory, seen: list[str]):
    """A plan whose second query carries work that notes whether the server had that query already."""
    first = yield Query("RETURN $v", {"v": "a"}, read_only=True)
    before = _ro_calls(memory)
    second = yield Query("RETURN $v + $w", {"v": first[0][0], "w": "b"}, read_only=True,
                         meanwhile=lambda: seen.append("sent" if _sent_within(memory, before) else "not sent"))
    return second[0][0]


async def test_meanwhile_runs_once_while_its_query_is_on_the_server(memory, fresh_graph) -> None:
    from llama_consciousness.storage.level_store import AsyncLevelGraphStore

    a = fresh_graph()
    seen: list[str] = []
    assert run_interleaved(memory.db, [(a.plans.graph, _beside(memory, seen))]) == ["ab"]
    assert seen == ["sent"]  # called once, after the query went out and before its reply was read
    seen.clear()
    assert await AsyncLevelGraphStore(memory.async_db, a.plans)._run(_beside(memory, seen)) == "ab"
    assert seen == ["sent"]
    seen.clear()
    calls = []

    def sync_plan():
        rows = yield Query("RETURN 1", read_only=True, meanwhile=lambda: calls.append(_ro_calls(memory)))
        return rows[0][0], _ro_calls(memory)

    answer, after = a._run(sync_plan())  # the plain sync store sends and reads in one call: the work comes first
    assert answer == 1 and calls == [after - 1]


async def test_meanwhile_failing_stops_its_plan_alone_and_leaves_connections_reusable(memory, fresh_graph) -> None:
    from llama_consciousness.storage.level_store import AsyncLevelGraphStore

    a = fresh_graph()

    def broken():
        raise ValueError("models could not be built")

    def plan():
        rows = yield Query("RETURN 1", read_only=True, meanwhile=broken)
        return rows

    failed, fine = run_interleaved(memory.db, [(a.plans.graph, plan()), (a.plans.graph, _two_step("z"))])
    assert isinstance(failed, ValueError) and "models could not be built" in str(failed)
    assert fine == "z!"
    assert run_interleaved(memory.db, [(a.plans.graph, _two_step("y"))]) == ["y!"]  # its reply was read, not left

    astore = AsyncLevelGraphStore(memory.async_db, a.plans)
    with pytest.raises(ValueError, match="models could not be built"):
        await astore._run(plan())
    assert await astore._run(_two_step("x")) == "x!"
    with pytest.raises(ValueError, match="models could not be built"):
        a._run(plan())
    assert a._run(_two_step("w")) == "w!"
