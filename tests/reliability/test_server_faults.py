"""A stalled server costs a retrieval its timeout, once; a dead embedded server is started again.

Reproduced before: the sync path waited as long as the server stalled (20 s
for a 20 s stall; the async path stopped at 5 s), and after the embedded
FalkorDB died the same ``ConsciousnessMemory`` failed every later call until
it was reopened.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

import pytest

from llama_consciousness import ConsciousnessMemory, MemoryNode, RetrievalIntention
from llama_consciousness.retrievers import RetrievalConfig, SixWayHybridRetriever, StateBasedRetriever, \
    StateRetrievalConfig
from llama_consciousness.schema import StateBasedRetrieval
from llama_consciousness.storage import EmbeddedFalkorDB

CITIZEN = "ada"


def _notes() -> list[MemoryNode]:
    return [MemoryNode(node_id=f"m{i}", level=level, citizen_id=CITIZEN if level == "N1" else None,
                       name=f"Tide {i}", description=f"Reading {i} of the tide gauge at the harbour", energy=0.6,
                       confidence=0.7, resolution_state="in_progress", emotion_vector={"curiosity": 0.5})
            for i in range(3) for level in ("N1", "N2", "N3")]


def _found(stream) -> set[str]:
    return {(key, n.node_id) for key, lv in stream.levels.items() for n in lv.vector_results + lv.graph_results}


@pytest.fixture
def own_dir(data_root: Path) -> Path:
    return data_root / f"f{uuid.uuid4().hex[:6]}"


def test_a_stalled_server_costs_the_timeout_once_and_the_next_call_answers(own_dir: Path) -> None:
    server = EmbeddedFalkorDB(own_dir).start()
    try:
        with ConsciousnessMemory(falkordb_url=server.url) as memory:
            memory.upsert(_notes())
            timeout = 1.0
            six = SixWayHybridRetriever(memory, CITIZEN, config=RetrievalConfig(channel_timeout_s=timeout))
            state = StateBasedRetriever(memory, config=StateRetrievalConfig(level_timeout_s=timeout))
            feeling = StateBasedRetrieval(citizen_id=CITIZEN, current_energy=0.6, current_emotions={"curiosity": 0.5},
                                          query_mode="find_what_i_was_doing")
            question = RetrievalIntention(query_text="tide gauge", citizen_id=CITIZEN)
            assert len(_found(six.retrieve_stream(question))) == 9  # warm: entity indexes built
            os.kill(server.pid, signal.SIGSTOP)
            try:
                for call in (lambda: six.retrieve_stream(question), lambda: state.retrieve_stream(feeling)):
                    started = time.monotonic()
                    stream = call()
                    elapsed = time.monotonic() - started
                    assert elapsed <= timeout * 1.1 + 0.05, elapsed
                    assert all(lv.error and "timed out" in lv.error for lv in stream.levels.values()), stream.levels
            finally:
                os.kill(server.pid, signal.SIGCONT)
            assert len(_found(six.retrieve_stream(question))) == 9
            assert state.retrieve_state(feeling)
    finally:
        server.stop(force=True)


def _kill_server(memory: ConsciousnessMemory) -> int:
    pid = memory._falkordb_server.pid
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    return pid


def test_the_first_write_or_read_after_the_embedded_server_died_starts_it_again(own_dir: Path) -> None:
    """Reproduced before: after the server died, every call of the same memory failed until it was reopened."""
    with ConsciousnessMemory(data_dir=own_dir) as memory:
        first, second, third = (_notes()[3 * i:3 * i + 3] for i in range(3))
        memory.upsert(first)
        memory.db.connection.execute_command("SAVE")
        _kill_server(memory)
        assert memory.upsert(second).nodes_created == 3  # a write first
        memory.db.connection.execute_command("SAVE")
        _kill_server(memory)
        assert memory.get_node("m0", "N1", CITIZEN) is not None  # a read first
        _kill_server(memory)
        report = memory.ingest(third)  # an ingestion first
        assert report.inserted == 3 and not report.rejected, report
        assert [memory.get_node(n.node_id, n.level, n.citizen_id) is not None for n in _notes()] == [True] * 9


def test_a_dead_embedded_server_is_started_again_with_its_data(own_dir: Path) -> None:
    with ConsciousnessMemory(data_dir=own_dir) as memory:
        memory.upsert(_notes())
        memory.db.connection.execute_command("SAVE")  # what the server had persisted comes back
        retriever = SixWayHybridRetriever(memory, CITIZEN)
        question = RetrievalIntention(query_text="tide gauge", citizen_id=CITIZEN)
        assert len(_found(retriever.retrieve_stream(question))) == 9
        pid = _kill_server(memory)
        stream = retriever.retrieve_stream(question)  # the next call, on the same objects
        assert all(lv.error is None for lv in stream.levels.values()), stream.levels
        assert len(_found(stream)) == 9
        assert memory._falkordb_server.pid != pid
        assert memory.get_node("m1", "N2") is not None


def test_a_level_graph_deleted_or_replaced_is_an_error_entry_not_an_empty_level(memory, citizen) -> None:
    """Reproduced before: a level graph that was deleted or replaced by another key returned empty with
    no error entry.  A level never written stays an empty level without error."""
    from llama_consciousness.storage.level_store import GRAPH_REGISTRY

    memory.upsert([n.model_copy(update={"citizen_id": citizen}) for n in _notes() if n.level == "N1"])
    question = RetrievalIntention(query_text="tide gauge", citizen_id=citizen, query_levels=["N1"])
    feeling = StateBasedRetrieval(citizen_id=citizen, current_energy=0.6, current_emotions={"curiosity": 0.5},
                                  query_mode="find_what_i_was_doing", )
    six = SixWayHybridRetriever(memory, citizen)
    state = StateBasedRetriever(memory, config=StateRetrievalConfig(query_levels=["N1"]))
    assert six.retrieve_stream(question).levels["n1_personal"].error is None
    graph = memory.plans("N1", citizen).graph
    memory.db.connection.delete(graph)  # deleted behind the memory's back
    for stream in (six.retrieve_stream(question), state.retrieve_stream(feeling)):
        assert "is gone" in (stream.levels["n1_personal"].error or ""), stream.levels
    memory.db.connection.set(graph, "not a graph")  # replaced by another key
    assert "is gone" in (six.retrieve_stream(question).levels["n1_personal"].error or "")
    memory.db.connection.delete(graph)
    memory.db.connection.srem(GRAPH_REGISTRY, graph)
    other = SixWayHybridRetriever(memory, "never_written_" + citizen)
    never = other.retrieve_stream(RetrievalIntention(query_text="tide", citizen_id="never_written_" + citizen,
                                                     query_levels=["N1"]))
    assert never.levels["n1_personal"].error is None and not never.levels["n1_personal"].vector_results


def test_a_stalled_embedded_server_is_waited_for_never_replaced(own_dir: Path) -> None:
    """Reproduced before: a stalled (not dead) embedded server failed the revival's ping, so a second
    server was started on the same data directory, and each stalled call took 5 s instead of its timeout."""
    import psutil

    with ConsciousnessMemory(data_dir=own_dir) as memory:
        memory.upsert(_notes())
        six = SixWayHybridRetriever(memory, CITIZEN, config=RetrievalConfig(channel_timeout_s=1.0))
        question = RetrievalIntention(query_text="tide gauge", citizen_id=CITIZEN)
        assert len(_found(six.retrieve_stream(question))) == 9
        pid = memory._falkordb_server.pid
        os.kill(pid, signal.SIGSTOP)
        try:
            started = time.monotonic()
            stream = six.retrieve_stream(question)
            assert time.monotonic() - started <= 1.15
            assert all(lv.error for lv in stream.levels.values())
        finally:
            os.kill(pid, signal.SIGCONT)
        servers = [p for p in psutil.process_iter(["cmdline"])
                   if any(str(own_dir) in part for part in (p.info["cmdline"] or []))]
        assert [p.pid for p in servers] == [pid]
        assert len(_found(six.retrieve_stream(question))) == 9
