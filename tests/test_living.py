"""The living memory on the real embedded servers: citizen state versions, energy feedback written back,
use recorded as access counts and co-activation, the query engine that records its answers' memories."""

from __future__ import annotations

import asyncio
import threading
from datetime import datetime, timedelta, timezone

import pytest
from llama_index.core.llms import MockLLM
from pydantic import ValidationError

from llama_consciousness import ConsciousnessQueryEngine
from llama_consciousness.retrievers.state_based import StateBasedRetriever
from llama_consciousness.schema import ConsciousnessRelationship, MemoryNode, RetrievalIntention
from llama_consciousness.scoring.energy import apply_energy_feedback, feedback_potential
from llama_consciousness.storage.level_store import NODE_LABEL

UTC = timezone.utc
T0 = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)


def _memories(citizen: str) -> list[MemoryNode]:
    common = dict(level="N1", citizen_id=citizen, confidence=0.9, created_at=T0)
    return [
        MemoryNode(node_id="launch", name="Launch plan", description="Ada drafted the launch plan for the "
                   "graph memory with Luca, and it excited the whole team", energy=0.9,
                   emotion_vector={"excitement": 0.9, "pride": 0.6}, resolution_state="resolved", **common),
        MemoryNode(node_id="benchmarks", name="Launch benchmarks", description="The launch benchmarks showed the "
                   "graph memory answering in twelve milliseconds", energy=0.85,
                   emotion_vector={"pride": 0.8}, resolution_state="resolved", **common),
        MemoryNode(node_id="review", name="Launch review", description="Luca reviewed the launch plan and "
                   "approved the graph memory rollout", energy=0.8, emotion_vector={"relief": 0.7},
                   resolution_state="resolved", **common),
    ]


def _links(citizen: str) -> list[ConsciousnessRelationship]:
    common = dict(level="N1", citizen_id=citizen, energy=0.9, confidence=0.9, goal="ship the launch",
                  mindstate="energised", formation_trigger="planning", energy_transfer_coefficient=0.8,
                  resolution_state="resolved", emotion_vector={"excitement": 0.8}, created_at=T0)
    return [ConsciousnessRelationship(source_id="launch", target_id="benchmarks", relation_type="ENABLES", **common),
            ConsciousnessRelationship(source_id="review", target_id="launch", relation_type="RELATES_TO", **common)]


@pytest.fixture
def lived(memory, citizen):
    memory.upsert(_memories(citizen), _links(citizen))
    return citizen


def _stream(memory, citizen: str):
    return memory.retrieve_stream(RetrievalIntention(query_text="the launch plan of the graph memory",
                                                     citizen_id=citizen, query_levels=["N1"]))


def _co_activation(memory, citizen: str) -> dict[tuple[str, str], int]:
    rows = memory.level("N1", citizen).graph.query(
        f"MATCH (a:{NODE_LABEL})-[r]->(b:{NODE_LABEL}) RETURN a.node_id, b.node_id, r.co_activation").result_set
    return {(a, b): c for a, b, c in rows}


# -- citizen state ---------------------------------------------------------------------------------------


def test_state_versions_are_kept_and_queryable_as_of_a_time(memory, citizen) -> None:
    assert memory.citizen_state(citizen) is None and memory.citizen_state_history(citizen) == []
    first = memory.update_citizen_state(citizen, energy=0.7, emotion_vector={"curiosity": 0.6}, goal="ship it",
                                        mindstate="focused", valid_at=T0)
    second = memory.update_citizen_state(citizen, energy=0.3, valid_at=T0 + timedelta(days=1), reason="tired")
    # what was not given carries over from the version in force
    assert (second.energy, second.emotion_vector, second.goal, second.mindstate) == (0.3, {"curiosity": 0.6},
                                                                                    "ship it", "focused")
    assert memory.citizen_state(citizen).version_id == second.version_id
    then = memory.citizen_state(citizen, as_of=T0 + timedelta(hours=3))
    assert then.version_id == first.version_id and then.energy == 0.7
    assert then.invalid_at == T0 + timedelta(days=1)  # the next version took over then
    assert memory.citizen_state(citizen, as_of=T0 - timedelta(seconds=1)) is None
    cleared = memory.update_citizen_state(citizen, goal=None, valid_at=T0 + timedelta(days=2))
    assert cleared.goal is None and cleared.energy == 0.3
    assert [s.energy for s in memory.citizen_state_history(citizen)] == [0.7, 0.3, 0.3]


def test_a_correction_expires_the_old_version_and_keeps_it(memory, citizen) -> None:
    wrong = memory.update_citizen_state(citizen, energy=0.9, valid_at=T0)
    before_fix = datetime.now(UTC)
    fixed = memory.update_citizen_state(citizen, energy=0.4, valid_at=T0, reason="it was 0.4")
    history = memory.citizen_state_history(citizen)
    assert [s.version_id for s in history] == [wrong.version_id, fixed.version_id]
    assert history[0].expired_at is not None and history[1].expired_at is None
    assert memory.citizen_state(citizen).energy == 0.4
    # as it was believed before the correction
    assert memory.citizen_state(citizen, known_at=before_fix).energy == 0.9
    assert [s.version_id for s in memory.citizen_state_history(citizen, known_at=before_fix)] == [wrong.version_id]


def test_as_believed_before_a_correction_the_next_version_still_ends_the_one_before(memory, citizen) -> None:
    memory.update_citizen_state(citizen, energy=0.3, valid_at=T0)
    memory.update_citizen_state(citizen, energy=0.9, valid_at=T0 + timedelta(days=1))
    before_fix = datetime.now(UTC)
    memory.update_citizen_state(citizen, energy=0.8, valid_at=T0 + timedelta(days=1), reason="fixed")
    then = memory.citizen_state_history(citizen, known_at=before_fix)
    assert [s.energy for s in then] == [0.3, 0.9] and then[0].invalid_at == T0 + timedelta(days=1)
    assert then[1].expired_at is not None  # corrected later, but believed at before_fix


def test_the_recorder_keeps_each_use_to_itself(memory, lived) -> None:
    from concurrent.futures import CancelledError

    from llama_index.core.schema import NodeWithScore, TextNode

    stream = _stream(memory, lived)
    bad = [NodeWithScore(node=TextNode(id_="x", text="", metadata={"level": "N1", "node_id": "launch",
                                                                      "retrieval_id": "r-bad"}))]
    with pytest.raises(Exception, match="citizen"):
        memory.record_use(bad)  # an N1 memory without its citizen: refused to the caller, not the batch
    futures = [memory.record_use(stream, use_id=f"c{i}") for i in range(6)]
    cancelled = sum(f.cancel() for f in futures[::2])  # some callers stop waiting
    assert memory.flush_uses(30)
    done = [f for f in futures if not f.cancelled()]
    assert len(done) == 6 - cancelled and all(f.result(timeout=5).counted for f in done)
    for f in futures:
        if f.cancelled():
            with pytest.raises(CancelledError):
                f.result()


def test_bad_state_updates_are_refused(memory, citizen) -> None:
    with pytest.raises(ValueError, match="give its energy"):
        memory.update_citizen_state(citizen, goal="no energy yet")
    with pytest.raises(ValueError, match="at least one"):
        memory.update_citizen_state(citizen)
    with pytest.raises(ValidationError):
        memory.update_citizen_state(citizen, energy=1.5)
    with pytest.raises(ValidationError):
        memory.update_citizen_state(citizen, energy=0.5, emotion_vector={"joy": "very"})
    with pytest.raises(Exception, match="citizen"):
        memory.update_citizen_state("bad id!", energy=0.5)
    assert memory.citizen_state_history(citizen) == []  # nothing half-written


def test_state_retriever_uses_the_stored_state(memory, lived) -> None:
    retriever = StateBasedRetriever(memory, citizen_id=lived, query_mode="find_similar_state",
                                    include_only_unresolved=False, temporal_scope="all_time")
    with pytest.raises(ValueError, match="no stored state"):
        retriever.retrieve("")
    memory.update_citizen_state(lived, energy=0.85, emotion_vector={"pride": 0.8}, goal="ship the launch")
    state = retriever.state_for(None)
    assert (state.current_energy, state.current_emotions, state.current_goal) == (0.85, {"pride": 0.8},
                                                                                  "ship the launch")
    found = {n.node.metadata["node_id"] for n in retriever.retrieve("")}
    assert "benchmarks" in found  # the memory that feels like the stored state
    with pytest.raises(ValueError):
        StateBasedRetriever(memory, citizen_id=lived, query_mode="find_everything")


# -- energy feedback -------------------------------------------------------------------------------------


def test_feedback_raises_stored_energy_once_per_stream(memory, lived) -> None:
    memory.update_citizen_state(lived, energy=0.5)
    stream = _stream(memory, lived)
    report = memory.apply_feedback(stream)
    assert report.applied and report.citizen_id == lived and report.counted >= 2 and not report.skipped
    # energising, resolved, high-confidence memories: up, as apply_energy_feedback with the potential says
    assert report.potential > 0.5
    assert report.energy_after == pytest.approx(apply_energy_feedback(0.5, report.potential))
    assert report.energy_after > 0.5
    stored = memory.citizen_state(lived)
    assert stored.energy == pytest.approx(report.energy_after) and stored.source == "feedback"
    assert stored.stream_id == stream.intention_id
    again = memory.apply_feedback(stream)
    assert not again.applied and "already applied" in again.message
    assert memory.citizen_state(lived).energy == pytest.approx(report.energy_after)
    assert len(memory.citizen_state_history(lived)) == 2


def test_feedback_from_many_threads_counts_each_stream(memory, lived) -> None:
    memory.update_citizen_state(lived, energy=0.2)
    streams = [_stream(memory, lived) for _ in range(6)]
    reports = []
    threads = [threading.Thread(target=lambda s=s: reports.append(memory.apply_feedback(s))) for s in streams]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    delta = apply_energy_feedback(0.2, reports[0].potential) - 0.2
    assert memory.citizen_state(lived).energy == pytest.approx(min(1.0, 0.2 + 6 * delta))


def test_feedback_on_superseded_memories_does_nothing_and_says_so(memory, lived) -> None:
    memory.update_citizen_state(lived, energy=0.5)
    stream = _stream(memory, lived)
    focus = [n.node_id for n in stream.activation_tiers["focus"]]
    replacements = [MemoryNode(node_id=f"{i}_v2", level="N1", citizen_id=lived, name="Replaced",
                               description="a later view", energy=0.5, confidence=0.5, supersedes=i) for i in focus]
    memory.upsert(replacements, detect_updates=False)
    report = memory.apply_feedback(stream)
    assert not report.applied and "superseded" in report.message
    assert {(s.node_id, s.reason) for s in report.skipped} == {(i, "superseded") for i in focus}
    assert memory.citizen_state(lived).energy == 0.5


def test_feedback_needs_to_know_the_citizen(memory, lived) -> None:
    stream = memory.retrieve_stream(RetrievalIntention(query_text="launch plan", citizen_id=lived,
                                                       query_levels=["N2"]))
    with pytest.raises(ValueError, match="citizen_id"):
        memory.apply_feedback(stream)
    with pytest.raises(TypeError):
        memory.apply_feedback([])


def test_the_spec_s6_case_lowers_energy_the_package_potential_does_not() -> None:
    # ten energising relationships of a usual stream: the spec's sum over 150 sits near 0.05
    rel = ConsciousnessRelationship(source_id="a", target_id="b", relation_type="ENABLES", level="N2", energy=0.7,
                                    confidence=0.9, goal="g", mindstate="m", formation_trigger="t",
                                    energy_transfer_coefficient=0.7, resolution_state="in_progress",
                                    emotion_vector={"excitement": 0.8})
    from llama_consciousness.scoring.energy import calculate_energy_feedback_potential
    spec = calculate_energy_feedback_potential([rel] * 10)
    assert spec < 0.1 and apply_energy_feedback(0.70, spec) < 0.58  # the spec's own example falls
    assert apply_energy_feedback(0.70, feedback_potential([rel] * 10)) > 0.70


# -- use: access counts and co-activation -----------------------------------------------------------------


def test_record_use_counts_focus_memories_once_per_retrieval(memory, lived) -> None:
    stream = _stream(memory, lived)
    focus = {n.node_id for n in stream.activation_tiers["focus"]}
    assert {"launch", "benchmarks"} <= focus
    report = memory.record_use(stream).result(timeout=30)
    assert {i for _, i in report.counted} == focus and not report.skipped and not report.errors
    stats = memory.access_stats("N1", sorted(focus), lived)
    assert {i: c for i, (c, _) in stats.items()} == {i: 1 for i in focus}
    assert all(at is not None for _, at in stats.values())
    # launch -> benchmarks and review -> launch: links between two used memories
    links = _co_activation(memory, lived)
    assert links[("launch", "benchmarks")] == 1 and report.co_activated_links >= 1
    again = memory.record_use(stream).result(timeout=30)
    assert again.counted == [] and {s.reason for s in again.skipped} == {"already_recorded"}
    assert memory.access_stats("N1", ["launch"], lived)["launch"][0] == 1
    assert _co_activation(memory, lived)[("launch", "benchmarks")] == 1
    memory.record_use(_stream(memory, lived)).result(timeout=30)  # another retrieval counts again
    assert memory.access_stats("N1", ["launch"], lived)["launch"][0] == 2
    assert _co_activation(memory, lived)[("launch", "benchmarks")] == 2


def test_record_use_never_touches_the_memories_or_their_vectors(memory, lived) -> None:
    store = memory.level("N1", lived)
    before = {n.node_id: n for n in store.get_nodes(["launch", "benchmarks", "review"])}
    for _ in range(5):
        memory.record_use(_stream(memory, lived)).result(timeout=30)
    after = {n.node_id: n for n in store.get_nodes(["launch", "benchmarks", "review"])}
    assert after == before
    # no orphan vectors: a KNN over the whole index returns each live memory once
    rows = store.graph.query(f"CALL db.idx.vector.queryNodes('{NODE_LABEL}', 'embedding', 50, vecf32($q)) "
                             "YIELD node RETURN node.node_id", {"q": [0.1] * memory.dimension}).result_set
    ids = [r[0] for r in rows]
    assert len(ids) == len(set(ids)) == memory.counts("N1", lived)[0]


def test_record_use_from_nodes_threads_and_event_loops(memory, lived) -> None:
    retriever = memory.retriever(lived)
    nodes = retriever.retrieve("the launch plan of the graph memory")
    assert all(n.node.metadata["retrieval_id"] for n in nodes)
    assert "retrieval_id" not in nodes[0].node.get_content(metadata_mode="llm")
    report = memory.record_use(nodes).result(timeout=30)
    counted = {i for _, i in report.counted}
    assert set(report.counted) == {(n.node.metadata["level"], n.node.metadata["node_id"]) for n in nodes}
    futures = []
    threads = [threading.Thread(target=lambda: futures.append(memory.record_use(_stream(memory, lived))))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for f in futures:
        f.result(timeout=30)

    async def on_a_loop():
        return await memory.arecord_use(await memory.aretrieve_stream(RetrievalIntention(
            query_text="the launch plan of the graph memory", citizen_id=lived, query_levels=["N1"])))

    assert asyncio.run(on_a_loop()).counted
    assert asyncio.new_event_loop().run_until_complete(on_a_loop()).counted
    assert "launch" in counted
    assert memory.access_stats("N1", ["launch"], lived)["launch"][0] == 1 + 8 + 2
    anonymous = [n.model_copy(deep=True) for n in nodes]
    for n in anonymous:
        del n.node.metadata["retrieval_id"]
    with pytest.raises(ValueError, match="use_id"):
        memory.record_use(anonymous)
    assert memory.record_use(anonymous, use_id="by-hand").result(timeout=30).counted


def test_record_use_skips_superseded_and_deleted_memories(memory, lived) -> None:
    stream = _stream(memory, lived)
    memory.upsert([MemoryNode(node_id="launch_v2", level="N1", citizen_id=lived, name="Launch plan",
                              description="the launch moved", energy=0.5, confidence=0.5, supersedes="launch")],
                  detect_updates=False)
    memory.level("N1", lived).graph.query(f"MATCH (n:{NODE_LABEL} {{node_id: 'review'}}) DETACH DELETE n")
    report = memory.record_use(stream).result(timeout=30)
    reasons = {s.node_id: s.reason for s in report.skipped}
    assert reasons.get("launch") == "superseded" and "launch" not in dict(report.counted).values()
    if "review" in {n.node_id for n in stream.activation_tiers["focus"]}:
        assert reasons["review"] == "deleted"
    assert "superseded" in report.message
    assert "launch" not in memory.access_stats("N1", ["launch"], lived)


def test_query_engine_records_the_answers_memories(memory, lived) -> None:
    engine = ConsciousnessQueryEngine.from_args(
        memory.retriever(lived, intention_defaults={"query_levels": ["N1"]}), llm=MockLLM(max_tokens=8))
    response = engine.query("the launch plan of the graph memory")
    assert response.source_nodes
    assert memory.flush_uses(30)
    used = {n.node.metadata["node_id"] for n in response.source_nodes if n.node.metadata["level"] == "N1"}
    stats = memory.access_stats("N1", sorted(used), lived)
    assert used and {i: c for i, (c, _) in stats.items()} == {i: 1 for i in used}

    async def aquery():
        return await engine.aquery("the launch plan of the graph memory")

    asyncio.run(aquery())
    assert memory.flush_uses(30)
    assert all(c == 2 for c, _ in memory.access_stats("N1", sorted(used), lived).values())


# -- use feeds authority and ranking ----------------------------------------------------------------------


def test_usage_lifts_used_memories_and_recomputes_authority(memory, lived) -> None:
    from llama_consciousness.postprocessors import UsageReinforcement
    from llama_consciousness.postprocessors.usage import usage_credit

    retriever = memory.retriever(lived, intention_defaults={"query_levels": ["N1"]})
    step = UsageReinforcement(memory=memory)
    fresh = retriever.retrieve("the launch plan of the graph memory")
    before = [(n.node.node_id, n.score) for n in fresh]
    untouched = step.postprocess_nodes([n.model_copy(deep=True) for n in fresh])
    assert [(n.node.node_id, n.score) for n in untouched] == before  # nothing used yet: nothing moves
    assert all(n.node.metadata["access_count"] == 0 for n in untouched)
    last = before[-1][0].split(":")[-1]
    for _ in range(3):  # three uses of this retrieval (each with its own id)
        memory.record_use(fresh, use_id=f"u{_}")
    memory.flush_uses(30)
    stream_ids = [n.node.node_id for n in fresh]
    lifted = step.postprocess_nodes(retriever.retrieve("the launch plan of the graph memory"))
    meta = {n.node.metadata["node_id"]: n.node.metadata for n in lifted}
    assert meta[last]["access_count"] == 3 and meta[last]["last_accessed_at"]
    assert meta["launch"]["co_activation"] >= 3  # linked to benchmarks and review, which came with it
    assert all(n.score >= s for n, (_, s) in zip(sorted(lifted, key=lambda n: stream_ids.index(n.node.node_id)),
                                                  before))
    assert usage_credit(0, None) == 0.0 and 0 < usage_credit(3, 0.0) <= 0.45
    assert 0.0 <= meta[last]["authority_score"] <= 1.0
    # the complete stream runs it before the ranker
    from llama_consciousness.postprocessors import default_postprocessors
    assert [type(p).__name__ for p in default_postprocessors(memory)][:3] == [
        "MetadataQualityPostprocessor", "UsageReinforcement", "ConsciousnessRanker"]


def test_old_uses_are_pruned_and_their_counts_stay(memory, lived) -> None:
    import time as clock
    from datetime import timedelta as td

    from llama_consciousness.inspection import memory_history
    from llama_consciousness.living import UseRecorder

    def uses() -> set[str]:
        return {u["use_id"] for u in memory_history(memory, "launch", "N1", lived)["uses"]}

    members = [("N1", lived, "launch"), ("N1", lived, "benchmarks")]
    long_ago = datetime.now(UTC) - td(days=40)
    held = UseRecorder(memory)
    held._pruned[f"citizen_{lived}"] = clock.monotonic()  # pruned a moment ago: not again within the hour
    assert held.submit("old-1", members, at=long_ago).result(timeout=30).counted
    held.close()
    assert "old-1" in uses()
    assert memory.prune_uses() >= 1 and "old-1" not in uses()
    assert memory.access_stats("N1", ["launch"], lived)["launch"][0] == 1  # counts stay
    auto = UseRecorder(memory)  # first write to the graph: it prunes what is past the retention itself
    assert auto.submit("old-2", members, at=long_ago).result(timeout=30).counted
    auto.close()
    assert "old-2" not in uses() and memory.access_stats("N1", ["launch"], lived)["launch"][0] == 2
    stream = _stream(memory, lived)
    memory.record_use(stream, use_id="fresh").result(timeout=30)
    assert memory.record_use(stream, use_id="fresh").result(timeout=30).counted == []  # kept: once
    assert "fresh" in uses()
    with pytest.raises(ValueError):
        memory.prune_uses(older_than=-1)
