"""The complete stream of the spec: retrieval plus every postprocessor, sync and async, and the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
from llama_index.core import Settings
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine

from llama_consciousness.cli import main
from llama_consciousness.ingestion import demo_memory_file
from llama_consciousness.postprocessors import default_postprocessors
from llama_consciousness.render import render_stream
from llama_consciousness.schema import RetrievalIntention
from llama_consciousness.scoring.energy import calculate_energy_feedback_potential

QUERY = "My understanding of FalkorDB capabilities and who is on the team"


@pytest.fixture(scope="module")
def demo(memory):
    memory.ingest(demo_memory_file())  # fixed ids: idempotent across the session
    return memory


def _intention(mode: str) -> RetrievalIntention:
    return RetrievalIntention(query_text=QUERY, citizen_id="ada", temporal_mode=mode, query_levels=["N1", "N2"])


def test_every_field_of_the_final_structure_is_filled(demo) -> None:
    stream = demo.retrieve_stream(_intention("evolution"))
    tiers = stream.activation_tiers
    assert set(tiers) == {"focus", "peripheral", "background"} and 0 < len(tiers["focus"]) <= 5
    assert len(tiers["peripheral"]) <= 20 and len(tiers["background"]) <= 50
    graph = stream.traversal_graph
    assert graph is not None and graph.node_count >= len(tiers["focus"]) and graph.edge_count > 0
    assert graph.suggested_paths and all(0 <= p.traversal_probability <= 1 for p in graph.suggested_paths)
    kinds = {(d.node_name, d.dissonance_type) for d in stream.temporal_dissonances}
    assert ("FalkorDB capabilities", "discovered_false") in kinds and ("Team composition", "reality_changed") in kinds
    report = stream.metadata_validation
    assert report is not None and report.total_memories > 0 and report.quality_grade in ("excellent", "good", "acceptable", "poor")
    relationships = [r for lvl in stream.levels.values() for r in lvl.relationships]
    assert stream.energy_feedback_potential == pytest.approx(calculate_energy_feedback_potential(relationships))
    summary = stream.consciousness_summary
    assert summary.emotional_themes and 0 < summary.active_vs_historical_ratio < 1  # expired versions came back
    assert stream.retrieval_latency_ms is not None and stream.retrieval_latency_ms >= 0
    # the focus is ordered by the consciousness-adjusted score
    scores = [n.relevance_score for n in tiers["focus"] + tiers["peripheral"]]
    assert scores == sorted(scores, reverse=True)


def test_current_mode_has_no_dissonance_and_bare_stream_has_no_tiers(demo) -> None:
    assert demo.retrieve_stream(_intention("current")).temporal_dissonances == []
    bare = demo.retrieve_stream(_intention("current"), postprocessors=None)
    assert bare.activation_tiers == {} and bare.traversal_graph is None and bare.metadata_validation is None


async def test_async_stream_matches_sync(demo) -> None:
    sync = demo.retrieve_stream(_intention("evolution"))
    other = await demo.aretrieve_stream(_intention("evolution"))
    ids = lambda s: [(n.level, n.node_id) for t in ("focus", "peripheral") for n in s.activation_tiers[t]]  # noqa: E731
    assert ids(other) == ids(sync)
    assert len(other.temporal_dissonances) == len(sync.temporal_dissonances)


def test_all_postprocessors_compose_in_a_query_engine(demo) -> None:
    Settings.llm = MockLLM()
    retriever = demo.retriever("ada", intention_defaults={"temporal_mode": "evolution"})
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM(), response_mode="no_text",
                                           node_postprocessors=default_postprocessors(demo))
    response = engine.query("FalkorDB capabilities")
    tiers = [n.node.metadata.get("activation_tier") for n in response.source_nodes]
    assert tiers and tiers[0] == "focus" and all(t in ("focus", "peripheral", "background") for t in tiers)
    assert any("temporal_dissonance" in n.node.metadata for n in response.source_nodes)
    assert all("consciousness_adjusted_score" in n.node.metadata for n in response.source_nodes)


def test_rendered_context_keeps_the_budget(demo) -> None:
    stream = demo.retrieve_stream(_intention("evolution"))
    rendered = render_stream(stream, 300)
    assert 0 < rendered.tokens <= 300 and rendered.left_out


def test_cli_stream_and_graph_pictures(demo, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from llama_consciousness.ingestion import demo_memory_file as demo_file

    data = tmp_path.parent / "cli_stream"  # short enough; its own server
    assert main(["ingest", str(demo_file()), "--data-dir", str(data), "--no-progress", "--worker", "on"]) == 0
    html = tmp_path / "graph.html"
    assert main(["query", QUERY, "--data-dir", str(data), "--citizen", "ada", "--mode", "evolution",
                 "--stream", "--graph", str(html), "-k", "5"]) == 0
    out = capsys.readouterr().out
    assert "FOCUS" in out and "LEARNING MOMENTS" in out and "THOUGHT PATHS" in out and "metadata quality" in out
    page = html.read_text()
    assert "<svg" in page and "http" not in page.split("<svg", 1)[1].split("</svg>", 1)[0].replace(
        'xmlns="http://www.w3.org/2000/svg"', "")
    md = tmp_path / "graph.md"
    assert main(["query", "FalkorDB", "--data-dir", str(data), "--citizen", "ada", "--graph", str(md)]) == 0
    assert md.read_text().startswith("```mermaid\ngraph LR")
    assert main(["query", "FalkorDB", "--data-dir", str(data), "--graph", str(tmp_path / "graph.png")]) == 2


async def test_retrievals_leave_the_garbage_collector_alone(demo) -> None:
    """The collector's thresholds are the application's: no retrieval changes them, sync or async."""
    import gc

    from llama_consciousness.postprocessors.base import StepResult, StreamPostprocessor

    seen: list[tuple[int, int, int]] = []

    class Spy(StreamPostprocessor):
        def process(self, nodes, query_bundle=None, intention=None):
            seen.append(gc.get_threshold())
            return StepResult(nodes)

    before = gc.get_threshold()
    demo.retrieve_stream(_intention("current"), postprocessors=[Spy()])
    await demo.aretrieve_stream(_intention("current"), postprocessors=[Spy()])
    assert seen == [before, before] and gc.get_threshold() == before


def test_memory_of_a_retrieved_node_is_the_stored_memory_and_follows_edits(demo) -> None:
    """Validating a node's metadata gives back the memory the retriever found; an edit is read, a bad one refused."""
    from llama_consciousness.postprocessors.base import memory_of
    from llama_consciousness.retrievers import StateBasedRetriever, StateRetrievalConfig
    from llama_consciousness.schema import StateBasedRetrieval

    nodes = demo.retriever("ada").retrieve_intention(_intention("evolution"))
    state = StateBasedRetrieval(citizen_id="ada", query_mode="find_similar_state", current_energy=0.6,
                                current_emotions={"frustration": 0.7})
    nodes += StateBasedRetriever(demo, config=StateRetrievalConfig(query_levels=("N1", "N2"))).retrieve_state(state)
    assert len(nodes) > 5 and any(n.node.metadata.get("expired_at") for n in nodes)
    for node in nodes:
        meta = node.node.metadata
        stored = demo.get_node(meta["node_id"], meta["level"], meta.get("citizen_id"))
        assert memory_of(node).model_dump(exclude={"embedding"}) == stored.model_dump(exclude={"embedding"})
    node = nodes[0]
    node.node.metadata["energy"] = 0.123
    assert memory_of(node).energy == 0.123
    node.node.metadata["energy"] = 7.0  # invalid now: validation says so
    with pytest.raises(ValueError):
        memory_of(node)
