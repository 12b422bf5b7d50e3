"""One retriever and one postprocessor chain shared by many callers: each gets what it would get alone.

A chatbot serves its users from one retriever; a result kept on the
retriever (or on a postprocessor) between two steps of a call could reach
another user.  Here 64 threads, 64 asyncio tasks (on successive event
loops, one loop per thread, and one loop shared by threads) ask different
citizens different questions through the same objects, and every answer
must equal the one the same question got when asked alone.  Connections are
bounded: callers wait for one, never fail for want of one.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

from llama_consciousness import ConsciousnessMemory, MemoryNode, RetrievalIntention
from llama_consciousness.schema import ConsciousnessRelationship

from concurrency import at_once

TOPICS = {
    "garden": ["Tomatoes need staking in June", "Basil grows beside the tomatoes", "Compost the autumn leaves",
               "Water the seedlings at dawn"],
    "music": ["Practising the cello suite in G", "The quartet rehearses on Thursday", "Tuning the A string",
              "A concert of Brahms sonatas"],
    "travel": ["Train from Lyon to Berlin", "Booked a hostel near the station", "Passport renewal is due",
               "The ferry to the islands leaves at nine"],
    "cooking": ["Sourdough starter fed with rye", "Risotto needs constant stirring", "Sharpen the chef knife",
                "A lemon tart for Sunday"],
}
QUESTIONS = ["what grows next to the tomatoes", "when is the rehearsal", "how do I get to Berlin",
             "what does the starter eat"]


def _write(memory: ConsciousnessMemory, run: str) -> list[str]:
    citizens = []
    for topic, texts in TOPICS.items():
        citizen = f"shared_{topic}_{run}"
        citizens.append(citizen)
        nodes = [MemoryNode(node_id=f"{topic}_{i}", level="N1", citizen_id=citizen, name=text.split()[0],
                            description=text, energy=0.3 + 0.1 * i, confidence=0.8,
                            emotion_vector={"curiosity": 0.2 * (i + 1)}) for i, text in enumerate(texts)]
        links = [ConsciousnessRelationship(source_id=f"{topic}_{i}", target_id=f"{topic}_{i + 1}",
                                           relation_type="RELATES_TO", goal="remember", mindstate="calm",
                                           energy=0.6, confidence=0.7, level="N1", citizen_id=citizen)
                 for i in range(len(texts) - 1)]
        memory.upsert(nodes, links)
    return citizens


def _answer(stream: Any, nodes: list[Any]) -> tuple[Any, ...]:
    """What a caller sees, without what legitimately differs between calls (times, latency)."""
    data = stream.model_dump(mode="json", exclude={"retrieved_at", "retrieval_latency_ms"})
    return (data, [(n.node.node_id, n.score, dict(n.node.metadata)) for n in nodes])


def test_one_retriever_and_chain_shared_by_threads_and_tasks(memory: ConsciousnessMemory) -> None:
    citizens = _write(memory, uuid.uuid4().hex[:6])
    retriever = memory.stream_retriever()  # one retriever, one chain of the default postprocessors
    intentions = [RetrievalIntention(query_text=q, citizen_id=c, query_levels=["N1"])
                  for c in citizens for q in QUESTIONS]
    alone = [_answer(*retriever.retrieve_stream_and_nodes(i)) for i in intentions]
    plain_alone = [[n.node.node_id for n in retriever.retrieve_intention(i)] for i in intentions]
    # every citizen's answers are their own: a mixed-up answer would show
    assert all({meta["citizen_id"] for _, _, meta in a[1]} == {i.citizen_id} for a, i in zip(alone, intentions))
    assert len({str(a) for a in alone}) == len(intentions)
    assert all(a[1] for a in alone)

    def caller(k: int) -> list[tuple[int, tuple[Any, ...], list[str]]]:
        out = []
        for round_ in range(3):
            i = (k + round_ * 5) % len(intentions)
            answer = _answer(*retriever.retrieve_stream_and_nodes(intentions[i]))
            out.append((i, answer, [n.node.node_id for n in retriever.retrieve_intention(intentions[i])]))
        return out

    for got in at_once(caller, 64, rounds=1):
        for calls in got:
            for i, answer, plain in calls:
                assert answer == alone[i], i
                assert plain == plain_alone[i], i

    async def one(k: int) -> tuple[int, tuple[Any, ...]]:
        i = (k * 7) % len(intentions)
        return i, _answer(*await retriever.aretrieve_stream_and_nodes(intentions[i]))

    async def tasks() -> list[tuple[int, tuple[Any, ...]]]:
        return list(await asyncio.gather(*(one(k) for k in range(64))))

    for _ in range(2):  # a new event loop each time: nothing is bound to the first one
        for i, answer in asyncio.run(tasks()):
            assert answer == alone[i], i
    for i, answer in at_once(lambda k: asyncio.run(one(k)), 16, rounds=1)[0]:  # one event loop per thread
        assert answer == alone[i], i
    shared = asyncio.new_event_loop()  # one loop, running in its own thread, fed by many threads
    runner = threading.Thread(target=shared.run_forever, daemon=True)
    runner.start()
    try:
        got = at_once(lambda k: asyncio.run_coroutine_threadsafe(one(k), shared).result(60), 16, rounds=1)[0]
    finally:
        shared.call_soon_threadsafe(shared.stop)
        runner.join(10)
        shared.close()
    for i, answer in got:
        assert answer == alone[i], i


def test_a_small_connection_bound_makes_callers_wait_not_fail(memory: ConsciousnessMemory) -> None:
    """32 threads on a memory of at most 4 FalkorDB connections (a retrieval wants about ten): every answer
    is the one asked alone, and no more than 4 connections are ever opened."""
    citizens = _write(memory, uuid.uuid4().hex[:6])
    with ConsciousnessMemory(falkordb_url=memory._falkordb_server.url, max_connections=4) as small:
        retriever = small.retriever()
        intentions = [RetrievalIntention(query_text=q, citizen_id=c) for c in citizens for q in QUESTIONS]
        alone = [[n.node.node_id for n in retriever.retrieve_intention(i)] for i in intentions]
        got = at_once(lambda k: [n.node.node_id for n in retriever.retrieve_intention(intentions[k % 16])], 32)
        assert all(ids == alone[k % 16] for answers in got for k, ids in enumerate(answers))
        assert len(small.db.connection.connection_pool._connections) <= 4
