"""Postgres faults: a stalled server costs a call its timeout, a dead embedded one is started
again, and a client killed with ``kill -9`` does not keep the embedded server running forever.

Reproduced before: no read on Postgres had a timeout (a stalled server held a call as long as
it stalled); a ``kill -9``-ed client left the embedded Postgres running forever (pgserver's list
of clients kept its pid).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import psutil
import pytest

from llama_consciousness import ConsciousnessMemory, MemoryNode
from llama_consciousness.errors import StorageError
from llama_consciousness.temporal import TemporalWindow

PGVECTOR_N3 = {"N3": "pgvector"}


def _notes() -> list[MemoryNode]:
    return [MemoryNode(node_id=f"m{i}", level="N3", name=f"Tide {i}", energy=0.6, confidence=0.7,
                       description=f"Reading {i} of the tide gauge at the harbour") for i in range(3)]


def _postgres_processes(memory: ConsciousnessMemory) -> list[psutil.Process]:
    postmaster = psutil.Process(memory._postgres_server._server.get_pid())
    return [postmaster, *postmaster.children(recursive=True)]


def _wait_gone(pid: int, seconds: float = 15) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return True
        time.sleep(0.05)
    return False


def test_a_stalled_postgres_costs_the_timeout_and_the_next_call_answers(memory) -> None:
    store = memory.pgvector
    graph = f"pgstall_{uuid.uuid4().hex[:8]}"
    vector = [1.0] + [0.0] * (store.dimension - 1)
    store.upsert(graph, [_notes()[0].model_copy(update={"embedding": vector})])
    processes = _postgres_processes(memory)
    for proc in processes:
        proc.suspend()
    try:
        started = time.monotonic()
        with pytest.raises(StorageError, match="did not answer"):
            store.search(graph, vector, 3, TemporalWindow(), deadline=time.monotonic() + 1.0)
        assert time.monotonic() - started <= 1.15
    finally:
        for proc in processes:
            proc.resume()
    assert [node_id for node_id, _ in store.search(graph, vector, 3, TemporalWindow())] == ["m0"]


def test_a_stalled_postgres_costs_a_retrieval_its_timeout_and_the_other_levels_still_answer(memory) -> None:
    from llama_consciousness import RetrievalIntention
    from llama_consciousness.retrievers import RetrievalConfig, SixWayHybridRetriever, StateBasedRetriever, \
        StateRetrievalConfig
    from llama_consciousness.schema import StateBasedRetrieval

    citizen = f"c{uuid.uuid4().hex[:8]}"
    memory.upsert([n.model_copy(update={"node_id": f"{citizen}_{n.node_id}_{level}", "level": level,
                                        "citizen_id": citizen if level == "N1" else None,
                                        "goal": "read the tide gauge", "resolution_state": "in_progress"})
                   for n in _notes() for level in ("N1", "N2", "N3")])
    timeout = 1.0
    retriever = SixWayHybridRetriever(memory, citizen, config=RetrievalConfig(channel_timeout_s=timeout))
    question = RetrievalIntention(query_text="tide gauge reading", citizen_id=citizen)
    assert retriever.retrieve_stream(question).levels["n3_ecosystem"].error is None  # warm
    state = StateBasedRetriever(memory, config=StateRetrievalConfig(goal_match="semantic", level_timeout_s=timeout))
    feeling = StateBasedRetrieval(citizen_id=citizen, current_energy=0.6, current_goal="read the tide gauge",
                                  current_emotions={"curiosity": 0.5},
                                  query_mode="find_related_unresolved")
    assert state.retrieve_stream(feeling).levels["n3_ecosystem"].error is None
    processes = _postgres_processes(memory)
    for proc in processes:
        proc.suspend()
    try:
        streams = []
        for call in (lambda: retriever.retrieve_stream(question), lambda: state.retrieve_stream(feeling)):
            started = time.monotonic()
            streams.append(call())
            assert time.monotonic() - started <= timeout * 1.1 + 0.05
    finally:
        for proc in processes:
            proc.resume()
    stream, state_stream = streams
    assert stream.levels["n3_ecosystem"].error and state_stream.levels["n3_ecosystem"].error, streams
    for key in ("n1_personal", "n2_collective"):  # the levels Postgres does not serve answer as usual
        assert stream.levels[key].error is None and stream.levels[key].vector_results, stream.levels[key]
        assert state_stream.levels[key].error is None and state_stream.levels[key].vector_results
    assert retriever.retrieve_stream(question).levels["n3_ecosystem"].vector_results  # the next call answers


def test_a_dead_embedded_postgres_is_started_again_with_its_data(data_root: Path) -> None:
    with ConsciousnessMemory(data_dir=data_root / f"p{uuid.uuid4().hex[:6]}", vector_backends=PGVECTOR_N3) as memory:
        memory.upsert(_notes())
        assert [n.node_id for n in memory.vector_search("tide gauge reading 1", "N3", k=1)] == ["m1"]
        postmaster = _postgres_processes(memory)[0]
        postmaster.kill()
        assert _wait_gone(postmaster.pid)
        found = memory.vector_search("tide gauge reading 1", "N3", k=1)  # the same object, the next call
        assert [n.node_id for n in found] == ["m1"]
        assert memory._postgres_server._server.get_pid() != postmaster.pid


CLIENT = textwrap.dedent("""
    import sys, time
    from llama_consciousness import ConsciousnessMemory, MemoryNode
    memory = ConsciousnessMemory(data_dir=sys.argv[1], vector_backends={"N3": "pgvector"})
    memory.upsert([MemoryNode(node_id="m", level="N3", name="Tide", description="the tide gauge",
                              energy=0.5, confidence=0.5)])
    print(memory._postgres_server._server.get_pid(), memory._falkordb_server.pid, flush=True)
    time.sleep(600)
""")


def test_servers_of_a_client_killed_with_kill_9_are_stopped_by_the_next_open_and_close(data_root: Path) -> None:
    data_dir = data_root / f"k{uuid.uuid4().hex[:6]}"
    client = subprocess.Popen([sys.executable, "-c", CLIENT, str(data_dir)], stdout=subprocess.PIPE, text=True)
    try:
        postgres_pid, falkordb_pid = map(int, client.stdout.readline().split())
    finally:
        client.kill()
        client.wait()
    assert psutil.pid_exists(postgres_pid) and psutil.pid_exists(falkordb_pid)  # orphans until someone opens
    with ConsciousnessMemory(data_dir=data_dir, vector_backends=PGVECTOR_N3) as memory:
        assert memory.get_node("m", "N3") is not None
    assert _wait_gone(postgres_pid) and _wait_gone(falkordb_pid)
