"""Temporal dissonance, metadata quality and the memory constellation.

The postprocessors run on hand-made records and on the real embedded
FalkorDB, alone and inside a stock LlamaIndex ``RetrieverQueryEngine``;
dissonance detection itself is tested in ``tests/scoring/test_dissonance.py``.
The demo is ingested into the shared session memory (its ids are fixed and
ingestion is idempotent); assertions about the shared graphs only look at
the demo's own ids.  Constellation tests write into the N1 graph of a fresh
citizen.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from llama_index.core.schema import NodeWithScore, TextNode

from llama_consciousness.ingestion import demo_memory_file
from llama_consciousness.postprocessors.constellation import ROLE_KEY, ConstellationPostprocessor, synthesize
from llama_consciousness.postprocessors.dissonance import TemporalDissonancePostprocessor, intention_temporal_mode
from llama_consciousness.postprocessors.pipeline import complete_stream
from llama_consciousness.postprocessors.quality import MetadataQualityPostprocessor, build_validation_report
from llama_consciousness.schema import (
    ConsciousnessRelationship,
    MemoryNode,
    RetrievalIntention,
    StateBasedRetrieval,
    ValidationResult,
)
from llama_consciousness.schema.constellation import ConstellationMember, MemoryConstellation
from llama_consciousness.temporal import TemporalWindow

from memory_builders import T0, T1, UTC, mem, versions
from concurrency import at_once

FALKOR_BASE = "ada_belief_falkordb_capabilities"
TEAM_BASE = "n2_team_composition"


# -- helpers ---------------------------------------------------------------------


def nws(memory: MemoryNode, score: float = 0.5, **extra) -> NodeWithScore:
    """A retrieved node as the six-way retriever makes it (metadata = the memory + level + sources)."""
    metadata = memory.model_dump(mode="json", exclude={"embedding"})
    metadata.update({"retrieval_source": f"{memory.level}_vector", "relevance_score": score, **extra})
    return NodeWithScore(node=TextNode(id_=f"{memory.level}:{memory.node_id}", text=memory.description or memory.name,
                                       metadata=metadata), score=score)


def raw(id_: str, _score: float = 0.5, **metadata) -> NodeWithScore:
    """A node with exactly the given metadata (for metadata-quality tests)."""
    return NodeWithScore(node=TextNode(id_=id_, text="text", metadata=metadata), score=_score)


def link(source: str, target: str, relation_type: str, citizen: str, energy: float = 0.6,
         confidence: float = 0.7, **kw) -> ConsciousnessRelationship:
    return ConsciousnessRelationship(
        source_id=source, target_id=target, relation_type=relation_type, goal="understand the storage choice",
        mindstate="weighing evidence", energy=energy, confidence=confidence, emotion_vector={"curiosity": 0.5},
        level="N1", citizen_id=citizen, **kw)


def meta_ids(nodes) -> list[str]:
    return [n.node.metadata["node_id"] for n in nodes]


@pytest.fixture(scope="module")
def demo(memory):
    """The demo scenario, ingested into the session memory (idempotent, fixed ids)."""
    memory.ingest(demo_memory_file())
    return memory


# -- 1. dissonance postprocessor ---------------------------------------------------


def test_postprocessor_marks_the_versions_and_keeps_the_nodes() -> None:
    v1, v2 = versions(reason="reality_changed")
    other = mem("unrelated", description="something else")
    nodes = [nws(v2, 0.9), nws(other, 0.8), nws(v1, 0.7)]
    pp = TemporalDissonancePostprocessor(temporal_mode="evolution")
    out, fields = pp.process(nodes)
    assert out == nodes and meta_ids(out) == ["belief_v2", "unrelated", "belief_v1"]
    assert out[0].node.metadata["temporal_dissonance"] == {"type": "reality_changed", "role": "correction",
                                                           "belief_id": "belief"}
    assert out[2].node.metadata["temporal_dissonance"]["role"] == "original"
    assert "temporal_dissonance" not in out[1].node.metadata
    assert [d.node_id for d in fields["temporal_dissonances"]] == ["belief"]
    # default mode (None -> current): nothing, and stale marks are removed
    assert TemporalDissonancePostprocessor().postprocess_nodes(nodes) == nodes
    assert all("temporal_dissonance" not in n.node.metadata for n in nodes)


def test_postprocessor_ignores_nodes_that_carry_no_memory_and_rejects_bad_modes() -> None:
    v1, v2 = versions(reason="discovered_false")
    pp = TemporalDissonancePostprocessor(temporal_mode="full_history")
    out, fields = pp.process([raw("plain", text="not a memory"), nws(v1), nws(v2)])
    assert len(out) == 3 and len(fields["temporal_dissonances"]) == 1
    with pytest.raises(ValueError, match="temporal_mode"):
        TemporalDissonancePostprocessor(temporal_mode="yesterday")


def test_intention_mode_inference() -> None:
    assert intention_temporal_mode(RetrievalIntention(query_text="x", citizen_id="ada",
                                                      temporal_mode="evolution")) == "evolution"
    assert intention_temporal_mode(StateBasedRetrieval(current_energy=0.5, current_emotions={"calm": 0.5},
                                                       citizen_id="ada")) == "current"
    assert intention_temporal_mode(None) == "current"


def test_demo_dissonances_through_real_evolution_retrieval(demo) -> None:
    retriever = demo.retriever("ada")
    evolution = RetrievalIntention(query_text="FalkorDB capabilities team composition", citizen_id="ada",
                                   temporal_mode="evolution", query_levels=["N1", "N2"],
                                   max_results_per_level=200)
    stream = retriever.retrieve_stream(evolution)
    nodes = retriever.retrieve_intention(evolution)
    pp = TemporalDissonancePostprocessor()  # mode taken from the intention
    nodes, fields = pp.process(nodes, None, evolution)
    stream = stream.model_copy(update=fields)
    demo_ones = [d for d in stream.temporal_dissonances if d.node_id in (FALKOR_BASE, TEAM_BASE)]
    assert sorted((d.node_id, d.dissonance_type) for d in demo_ones) == [
        (FALKOR_BASE, "discovered_false"), (TEAM_BASE, "reality_changed")]
    falkor = next(d for d in demo_ones if d.node_id == FALKOR_BASE)
    assert falkor.correction_trigger == "Corrected by pattern_read_primary_docs"
    assert falkor.discovery_energy == pytest.approx(0.85)
    assert falkor.belief_held_until == datetime(2025, 9, 15, 14, 30, tzinfo=UTC)
    marks = {n.node.node_id: n.node.metadata.get("temporal_dissonance") for n in nodes}
    assert marks["N1:ada_belief_falkordb_capabilities_v1"]["role"] == "original"
    assert marks["N1:ada_belief_falkordb_capabilities_v2"] == {
        "type": "discovered_false", "role": "correction", "belief_id": FALKOR_BASE}
    assert marks["N2:n2_team_composition_v2"]["type"] == "reality_changed"

    current = RetrievalIntention(query_text="FalkorDB capabilities team composition", citizen_id="ada",
                                 query_levels=["N1", "N2"], max_results_per_level=200)
    now_nodes = retriever.retrieve_intention(current)
    assert "ada_belief_falkordb_capabilities_v1" not in meta_ids(now_nodes)
    assert pp.process(now_nodes, None, current).stream_fields["temporal_dissonances"] == []


# -- 2. metadata quality -------------------------------------------------------------


def vr(completeness: float, valid: bool = True) -> ValidationResult:
    return ValidationResult(valid=valid, errors=[] if valid else ["REQUIRED field missing: energy"],
                            metadata_completeness=completeness)


@pytest.mark.parametrize(
    ("results", "grade"),
    [
        ([vr(0.95)] * 10, "excellent"),
        ([vr(0.9)], "good"),  # 0.9 is not > 0.9 (one result: ten would average to 0.9000000000000001)
        ([vr(0.95)] * 19 + [vr(0.95, False)], "good"),  # one error: excellent needs none; 5% < 10%
        ([vr(0.95)] * 9 + [vr(0.95, False)], "acceptable"),  # 10% errors is not < 10%
        ([vr(0.76)] * 10, "good"),
        ([vr(0.75)] * 10, "acceptable"),  # 0.75 is not > 0.75
        ([vr(0.61)] * 4 + [vr(0.61, False)], "acceptable"),  # 20% < 25%
        ([vr(0.61)] * 3 + [vr(0.61, False)], "poor"),  # 25% is not < 25%
        ([vr(0.6)], "poor"),  # 0.6 is not > 0.6
        ([vr(1.0, False)] * 10, "poor"),
    ],
)
def test_report_grades_at_the_spec_thresholds(results: list[ValidationResult], grade: str) -> None:
    report = build_validation_report(results, [f"m{i}" for i in range(len(results))])
    assert report.quality_grade == grade
    assert report.total_memories == len(results)
    assert report.memories_with_errors == sum(not r.valid for r in results)
    assert report.fully_valid_memories + report.memories_with_errors == report.total_memories
    assert report.incomplete_memory_ids == [f"m{i}" for i, r in enumerate(results) if not r.valid]
    assert report.average_completeness == pytest.approx(sum(r.metadata_completeness for r in results) / len(results))


FULL = {"node_id": "full", "name": "Full", "energy": 0.5, "confidence": 0.5, "resolution_state": "resolved",
        "emotion_vector": {"calm": 0.5}, "goal": "g", "mindstate": "m", "formation_trigger": "t",
        "felt_quality": "q", "emotion_description": "d", "body_sensation": "b", "spatial_context": "s",
        "sensory_details": {"sound": "rain"}}


def test_quality_postprocessor_annotates_reports_and_can_drop() -> None:
    bare = {"node_id": "bare", "name": "Bare", "energy": 0.5, "confidence": 0.5, "resolution_state": "blocked"}
    nodes = [raw("N2:full", **FULL), raw("N2:bare", **bare), raw("N2:broken", name="Broken", energy=0.4),
             raw("N2:wrong", **{**FULL, "node_id": "wrong", "energy": 3.0})]
    pp = MetadataQualityPostprocessor()
    out, fields = pp.process(nodes)
    assert out == nodes
    meta = [n.node.metadata for n in out]
    assert meta[0]["metadata_completeness"] == 1.0 and meta[0]["metadata_valid"] is True
    assert meta[0]["metadata_warnings"] == 0
    assert meta[1]["metadata_valid"] is True and meta[1]["metadata_warnings"] == 6
    assert meta[1]["metadata_completeness"] == pytest.approx(5 / 14)
    assert meta[2]["metadata_valid"] is False and meta[2]["metadata_errors"] == 2  # confidence, resolution_state
    assert meta[3]["metadata_valid"] is False  # energy out of range
    assert "metadata_valid" in out[0].node.excluded_llm_metadata_keys
    report = fields["metadata_validation"]
    assert (report.total_memories, report.fully_valid_memories, report.memories_with_warnings,
            report.memories_with_errors) == (4, 2, 2, 2)
    assert report.incomplete_memory_ids == ["N2:broken", "N2:wrong"]
    assert report.quality_grade == "poor"

    dropping = MetadataQualityPostprocessor(drop_invalid=True)
    kept, fields = dropping.process([raw("N2:full", **FULL), raw("N2:broken", name="Broken", energy=0.4)])
    assert [n.node.node_id for n in kept] == ["N2:full"]
    assert fields["metadata_validation"].total_memories == 2  # the dropped memory is still reported
    assert [n.node.node_id for n in dropping.postprocess_nodes(
        [raw("N2:full", **FULL), raw("N2:broken", name="Broken", energy=0.4)])] == ["N2:full"]


def test_quality_of_nothing_is_excellent() -> None:
    pp = MetadataQualityPostprocessor()
    assert pp.postprocess_nodes([]) == []
    report = pp.process([]).stream_fields["metadata_validation"]
    assert (report.total_memories, report.average_completeness, report.quality_grade) == (0, 1.0, "excellent")


def test_quality_in_the_complete_stream_of_a_real_retrieval(demo) -> None:
    retriever = demo.retriever("ada")
    intention = RetrievalIntention(query_text="FalkorDB vector search", citizen_id="ada", query_levels=["N1"])
    stream = retriever.retrieve_stream(intention)
    nodes = retriever.retrieve_intention(intention)
    assert nodes
    pp = MetadataQualityPostprocessor(drop_invalid=True)
    stream, kept = complete_stream(stream, nodes, intention, [pp])
    assert stream.metadata_validation == pp.process(nodes).stream_fields["metadata_validation"]
    assert stream.metadata_validation.total_memories == len(nodes)
    assert stream.metadata_validation.memories_with_errors == 0  # ingestion validated every memory
    assert all(n.node.metadata["metadata_valid"] for n in kept)


# -- 3. constellation --------------------------------------------------------------


def test_synthesis_text_leaves_out_empty_parts() -> None:
    def m(name: str, role: str) -> ConstellationMember:
        return ConstellationMember(node_id=name.lower(), level="N1", name=name, score=None, role=role)

    full = MemoryConstellation(primary=m("X", "direct_answer"), supporting=[m("Y", "context"), m("Z", "context")],
                               contradicting=[m("W", "exception")])
    assert synthesize(full) == "Primary: X | Supported by: Y, Z | Note: Conflicting info in W"
    assert synthesize(full.model_copy(update={"supporting": []})) == "Primary: X | Note: Conflicting info in W"
    assert synthesize(full.model_copy(update={"contradicting": []})) == "Primary: X | Supported by: Y, Z"
    assert synthesize(MemoryConstellation()) == ""


def write_constellation(memory, citizen: str) -> None:
    """A primary belief, two supporters (one each direction), one contradiction, noise, an expired supporter."""
    old = datetime.now(UTC) - timedelta(days=30)
    nodes = [
        mem("primary", level="N1", citizen=citizen, name="Graph and vectors together",
            description="FalkorDB keeps graph traversal and vector search in one database"),
        mem("s_bench", level="N1", citizen=citizen, name="Benchmark result",
            description="Measured vector queries under two milliseconds next to the graph"),
        mem("s_docs", level="N1", citizen=citizen, name="Documentation",
            description="The manual documents CREATE VECTOR INDEX on graph nodes"),
        mem("c_blog", level="N1", citizen=citizen, name="Old blog post",
            description="A blog post claims vectors need a separate database"),
        mem("noise", level="N1", citizen=citizen, name="Lunch order",
            description="Sandwiches with pickles for the whole team on Friday"),
        mem("s_expired", level="N1", citizen=citizen, name="Expired support",
            description="An outdated note that once backed the primary belief",
            created_at=old, valid_at=old, expired_at=old + timedelta(days=1)),
    ]
    links = [
        link("primary", "s_bench", "SUPPORTS", citizen, energy=0.9),
        link("s_docs", "primary", "SUPPORTS", citizen, energy=0.6),
        link("c_blog", "primary", "CONTRADICTS", citizen, energy=0.7),
        link("noise", "primary", "RELATES_TO", citizen, energy=0.95),
        link("s_expired", "primary", "SUPPORTS", citizen, energy=0.99, created_at=old, valid_at=old),
    ]
    memory.ingest(nodes + links, entities=False, duplicates="off")


def retrieved_with_primary_first(memory, citizen: str) -> list[NodeWithScore]:
    """Everything of the citizen's N1, the primary moved to the front (the constellation's top node)."""
    retriever = memory.retriever(citizen, intention_defaults={"query_levels": ["N1"]})
    nodes = retriever.retrieve("FalkorDB graph traversal and vector search in one database")
    assert "primary" in meta_ids(nodes)
    return sorted(nodes, key=lambda n: n.node.metadata["node_id"] != "primary")


def test_constellation_on_real_falkordb(memory, citizen) -> None:
    write_constellation(memory, citizen)
    nodes = retrieved_with_primary_first(memory, citizen)
    pp = ConstellationPostprocessor(memory=memory)
    assert pp.postprocess_nodes(nodes) == nodes
    result = pp.process(nodes)
    out = result.nodes
    assert out is nodes and set(result.stream_fields) == {"constellation"}
    c = result.stream_fields["constellation"]
    assert c == pp.build(nodes)
    assert c.primary.node_id == "primary" and c.primary.role == "direct_answer" and c.primary.level == "N1"
    assert c.primary.score == nodes[0].score
    assert [m.node_id for m in c.supporting] == ["s_bench", "s_docs"]  # strongest link first; expired left out
    assert [m.node_id for m in c.contradicting] == ["c_blog"]
    assert {m.role for m in c.supporting} == {"context"} and c.contradicting[0].role == "exception"
    assert c.supporting[0].link_energy == pytest.approx(0.9)
    assert c.synthesis == ("Primary: Graph and vectors together | Supported by: Benchmark result, Documentation"
                           " | Note: Conflicting info in Old blog post")
    roles = {n.node.metadata["node_id"]: n.node.metadata.get(ROLE_KEY) for n in out}
    assert roles["primary"] == "direct_answer"
    for node_id, role in roles.items():
        if node_id in ("s_bench", "s_docs"):
            assert role == "context"
        elif node_id == "c_blog":
            assert role == "exception"
        elif node_id not in ("primary",):
            assert role is None
    retrieved = {n.node.metadata["node_id"]: n.score for n in out}
    for member in c.supporting + c.contradicting:
        assert member.retrieved == (member.node_id in retrieved)
        assert member.score == retrieved.get(member.node_id)

    # the expired supporter counts when the window is evolution
    history = ConstellationPostprocessor(memory=memory, temporal_window=TemporalWindow("evolution"))
    assert [m.node_id for m in history.build(nodes).supporting] == ["s_expired", "s_bench", "s_docs"]


def test_constellation_fetches_linked_memories_that_were_not_retrieved(memory, citizen) -> None:
    write_constellation(memory, citizen)
    nodes = [n for n in retrieved_with_primary_first(memory, citizen)
             if n.node.metadata["node_id"] in ("primary", "s_docs", "noise")]
    pp = ConstellationPostprocessor(memory=memory, max_supporting=1)
    c = pp.build(nodes)
    assert [(m.node_id, m.retrieved, m.score) for m in c.supporting] == [("s_bench", False, None)]
    assert [(m.node_id, m.retrieved) for m in c.contradicting] == [("c_blog", False)]
    assert c.contradicting[0].name == "Old blog post"
    assert ROLE_KEY not in nodes[1].node.metadata  # s_docs fell to the max_supporting cut

    local = ConstellationPostprocessor(memory=memory, fetch_linked=False)
    near = local.process(nodes).stream_fields["constellation"]
    assert [m.node_id for m in near.supporting] == ["s_docs"]
    assert near.contradicting == []
    assert near.synthesis == "Primary: Graph and vectors together | Supported by: Documentation"
    assert {n.node.metadata["node_id"]: n.node.metadata.get(ROLE_KEY) for n in nodes} == {
        "primary": "direct_answer", "s_docs": "context", "noise": None}


async def test_constellation_conflict_wins_and_async_matches_sync(memory, citizen) -> None:
    write_constellation(memory, citizen)
    # the docs now also contradict the primary: they are listed as a conflict only
    memory.ingest([link("primary", "s_docs", "CONTRADICTS", citizen, energy=0.3)], entities=False, duplicates="off")
    nodes = retrieved_with_primary_first(memory, citizen)
    pp = ConstellationPostprocessor(memory=memory)
    sync = pp.build(nodes)
    assert [m.node_id for m in sync.supporting] == ["s_bench"]
    assert [m.node_id for m in sync.contradicting] == ["c_blog", "s_docs"]
    roles = {n.node.metadata["node_id"]: n.node.metadata.get(ROLE_KEY) for n in nodes}
    assert roles["s_docs"] == "exception" and roles["s_bench"] == "context"
    # the async entry point runs the same code (in a worker thread): the same roles on the nodes it returns
    for n in nodes:
        n.node.metadata.pop(ROLE_KEY, None)
    out = await pp.apostprocess_nodes(nodes)
    assert out == nodes
    assert {n.node.metadata["node_id"]: n.node.metadata.get(ROLE_KEY) for n in out} == roles


def test_constellation_edge_cases(memory, citizen) -> None:
    pp = ConstellationPostprocessor(memory=memory)
    assert pp.postprocess_nodes([]) == []
    assert pp.process([]) == ([], {"constellation": MemoryConstellation()})
    # a node that is not a memory of a level: a primary without links
    loose = pp.build([raw("loose", name="Loose note")])
    assert loose.primary.name == "Loose note"
    assert loose.synthesis == "Primary: Loose note"
    # a memory whose graph does not exist yet: no links, no error
    lonely = mem("lonely", level="N1", citizen=citizen, name="Lonely")
    assert pp.process([nws(lonely)]).stream_fields["constellation"].synthesis == "Primary: Lonely"


def test_constellation_goes_on_the_stream_in_the_intentions_window(memory, citizen) -> None:
    from llama_consciousness.postprocessors.pipeline import complete_stream

    write_constellation(memory, citizen)
    nodes = retrieved_with_primary_first(memory, citizen)
    intention = RetrievalIntention(query_text="graph and vectors", citizen_id=citizen, query_levels=["N1"])
    stream = memory.retriever(citizen).retrieve_stream(intention)
    assert stream.constellation is None
    pp = ConstellationPostprocessor(memory=memory)
    full, kept = complete_stream(stream, nodes, intention, [pp])
    assert kept == nodes
    assert full.constellation.primary.node_id == "primary"
    assert len(full.constellation.supporting) == 2
    assert full.constellation == pp.process(nodes, None, intention).stream_fields["constellation"]
    # an evolution intention widens the links to its window (the expired supporter counts)
    evolution = RetrievalIntention(query_text="graph and vectors", citizen_id=citizen, query_levels=["N1"],
                                   temporal_mode="evolution")
    wide, _ = complete_stream(stream, nodes, evolution, [pp])
    assert [m.node_id for m in wide.constellation.supporting] == ["s_expired", "s_bench", "s_docs"]
    # a temporal_window set on the postprocessor wins over the intention's
    now = ConstellationPostprocessor(memory=memory, temporal_window=TemporalWindow("current"))
    assert len(now.process(nodes, None, evolution).stream_fields["constellation"].supporting) == 2


def test_one_constellation_postprocessor_serves_eight_threads_at_once(memory, citizen) -> None:
    """Eight threads calling one postprocessor at once, each with its own nodes (another primary, another
    window), each get exactly the constellation (and roles) the same call gets alone."""
    import copy

    write_constellation(memory, citizen)
    nodes = retrieved_with_primary_first(memory, citizen)
    by_id = {n.node.metadata["node_id"]: n for n in nodes}
    firsts = ["primary", "s_bench", "s_docs", "c_blog", "noise", "primary", "s_docs", "primary"]
    lists = []
    for i, first in enumerate(firsts):
        rest = [n for n in nodes if n is not by_id[first]]
        lists.append([by_id[first], *(rest if i < 5 else rest[: 2 + i - 5])])
    evolution = RetrievalIntention(query_text="graph and vectors", citizen_id=citizen, query_levels=["N1"],
                                   temporal_mode="evolution")
    intentions = [None, None, None, None, None, None, None, evolution]
    pp = ConstellationPostprocessor(memory=memory, max_supporting=3)

    def call(i):
        own = copy.deepcopy(lists[i])
        result = pp.process(own, None, intentions[i])
        assert result.nodes is own
        return result.stream_fields["constellation"], [n.node.metadata.get(ROLE_KEY) for n in own]

    alone = [call(i) for i in range(8)]
    assert len({c.model_dump_json() for c, _ in alone}) >= 6  # mostly different answers
    assert alone[7][0].supporting[0].node_id == "s_expired" and alone[0][0].supporting[0].node_id == "s_bench"
    for got in at_once(call, 8):
        assert got == alone


# -- 4. all three in a stock LlamaIndex query engine ---------------------------------------


def test_three_postprocessors_in_a_retriever_query_engine(memory, citizen) -> None:
    from llama_index.core import Settings
    from llama_index.core.llms import MockLLM
    from llama_index.core.query_engine import RetrieverQueryEngine

    write_constellation(memory, citizen)
    memory.ingest([
        mem("storage_v1", level="N1", citizen=citizen, name="Storage belief",
            description="FalkorDB cannot search vectors at all", created_at=T0, valid_at=T0),
    ], entities=False, duplicates="off")
    memory.ingest([
        mem("storage_v2", level="N1", citizen=citizen, name="Storage belief",
            description="FalkorDB searches vectors with HNSW indexes", created_at=T1, valid_at=T0,
            supersedes="storage_v1", correction_pattern_id="pattern_test_it", discovery_energy=0.8),
    ], entities=False, duplicates="off")
    retriever = memory.retriever(citizen, intention_defaults={"query_levels": ["N1"], "temporal_mode": "evolution"})
    dissonance = TemporalDissonancePostprocessor(temporal_mode="evolution")
    quality = MetadataQualityPostprocessor()
    constellation = ConstellationPostprocessor(memory=memory)
    previous = Settings._llm
    Settings.llm = MockLLM()
    try:
        engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM(),
                                                node_postprocessors=[dissonance, quality, constellation])
        response = engine.query("FalkorDB graph traversal and vector search in one database")
    finally:
        Settings._llm = previous
    assert isinstance(response.response, str)
    sources = {n.node.metadata["node_id"]: n.node.metadata for n in response.source_nodes}
    assert {"storage_v1", "storage_v2", "primary"} <= set(sources)
    assert sources["storage_v1"]["temporal_dissonance"] == {"type": "discovered_false", "role": "original",
                                                            "belief_id": "storage"}
    assert sources["storage_v2"]["temporal_dissonance"]["role"] == "correction"
    (d,) = dissonance.process(list(response.source_nodes)).stream_fields["temporal_dissonances"]
    assert d.correction_trigger == "Corrected by pattern_test_it" and d.discovery_energy == pytest.approx(0.8)
    assert all(m["metadata_valid"] is True for m in sources.values())
    report = quality.process(list(response.source_nodes)).stream_fields["metadata_validation"]
    assert report.total_memories == len(response.source_nodes)
    top = response.source_nodes[0].node.metadata["node_id"]
    assert sources[top][ROLE_KEY] == "direct_answer"
    built = constellation.build(list(response.source_nodes))  # what the engine's run built for these nodes
    assert built.primary.node_id == top
    assert built.synthesis.startswith(f"Primary: {sources[top]['name']}")


def test_linked_memories_per_type_strongest_first_each_memory_once(memory, citizen) -> None:
    """One query answers every type and direction: order, limits and de-duplication per type."""
    from llama_consciousness.storage.filters import MemoryFilter
    from llama_consciousness.storage.links import linked_memories

    write_constellation(memory, citizen)
    memory.ingest([
        mem("s_weak", level="N1", citizen=citizen, name="Weak support", description="A hunch that agrees"),
        link("primary", "s_weak", "SUPPORTS", citizen, energy=0.2),
        link("s_bench", "primary", "SUPPORTS", citizen, energy=0.3),  # s_bench both ways: once, at 0.9
        link("primary", "c_blog", "CONTRADICTS", citizen, energy=0.1),  # c_blog both ways: once, at 0.7
    ], entities=False, duplicates="off")
    store = memory.level("N1", citizen)

    def ids(found):
        return {t: [(m.node.node_id, m.direction, m.relationship.energy) for m in items] for t, items in found.items()}

    found = store.run(linked_memories(store.plans, "primary", ["supports", "CONTRADICTS", "UNKNOWN"]))
    assert ids(found) == {
        "SUPPORTS": [("s_bench", "outgoing", 0.9), ("s_docs", "incoming", 0.6), ("s_weak", "outgoing", 0.2)],
        "CONTRADICTS": [("c_blog", "incoming", 0.7)],
        "UNKNOWN": [],
    }
    assert ids(store.run(linked_memories(store.plans, "primary", ["SUPPORTS"], limit=2))) == {
        "SUPPORTS": [("s_bench", "outgoing", 0.9), ("s_docs", "incoming", 0.6)]}
    assert ids(store.run(linked_memories(store.plans, "primary", ["SUPPORTS", "CONTRADICTS"],
                                          among=["s_weak", "c_blog"]))) == {
        "SUPPORTS": [("s_weak", "outgoing", 0.2)], "CONTRADICTS": [("c_blog", "incoming", 0.7)]}
    evolution = MemoryFilter(TemporalWindow("evolution"))
    assert [m.node.node_id for m in store.run(linked_memories(store.plans, "primary", ["SUPPORTS"],
                                                               evolution))["SUPPORTS"]][0] == "s_expired"
    assert store.run(linked_memories(store.plans, "missing", ["SUPPORTS"])) == {"SUPPORTS": []}
