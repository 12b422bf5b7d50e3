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


@pytest.mark.parametrize("path", ["sync", "async"])
async def test_a_stream_reads_its_connector_candidates_before_it_builds_its_nodes(demo, monkeypatch, path) -> None:
    """The retriever starts the traversal graph's first read before assembly; the stream is the same."""
    from llama_consciousness.retrievers.six_way import SixWayHybridRetriever
    from llama_consciousness.storage import replies

    def run():
        retriever = demo.stream_retriever("ada")
        intention = _intention("evolution")
        if path == "sync":
            return retriever.retrieve_stream(intention)
        return retriever.aretrieve_stream(intention)

    async def stream_of():
        out = run()
        return await out if path == "async" else out

    order: list[str] = []
    command, finish = replies.command, SixWayHybridRetriever._finish

    def count(graph, text, read_only, timeout_ms):
        if "min_links" in text:
            order.append("candidates")
        return command(graph, text, read_only, timeout_ms)

    def spy_finish(self, *args, **kwargs):
        order.append("finish")
        return finish(self, *args, **kwargs)

    monkeypatch.setattr(replies, "command", count)
    monkeypatch.setattr(SixWayHybridRetriever, "_finish", spy_finish)
    early = await stream_of()
    assert order.index("finish") == 2  # N1's and N2's candidates went out before the nodes were built
    reads = order.count("candidates")
    monkeypatch.setattr(SixWayHybridRetriever, "_prefetch_found", lambda self, intention, fused: None)
    order.clear()
    late = await stream_of()
    assert order[0] == "finish" and order.count("candidates") == reads  # the early read replaced one, no extra read
    graph = lambda s: ({n.node_id for n in s.traversal_graph.nodes}, {e.edge_id for e in s.traversal_graph.edges})  # noqa: E731
    assert graph(early) == graph(late)
    assert [n.node_id for n in early.activation_tiers["focus"]] == [n.node_id for n in late.activation_tiers["focus"]]


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


async def test_retrievals_postpone_young_collections_while_they_run(demo) -> None:
    """Bare, complete, sync and async streams all run with the raised threshold, restored after."""
    import gc

    from llama_consciousness.gcquiet import YOUNG_COLLECTION_THRESHOLD
    from llama_consciousness.postprocessors.base import StreamPostprocessor

    seen: list[int] = []

    class Spy(StreamPostprocessor):
        def _postprocess_nodes(self, nodes, query_bundle=None):
            seen.append(gc.get_threshold()[0])
            return nodes

    before = gc.get_threshold()
    raised = max(before[0], YOUNG_COLLECTION_THRESHOLD)
    embed = demo.embed_model
    original_sync, original_async = embed.get_query_embedding, embed.aget_query_embedding

    def spy_sync(text):
        seen.append(gc.get_threshold()[0])
        return original_sync(text)

    async def spy_async(text):
        seen.append(gc.get_threshold()[0])
        return await original_async(text)

    object.__setattr__(embed, "get_query_embedding", spy_sync)
    object.__setattr__(embed, "aget_query_embedding", spy_async)
    try:
        demo.retrieve_stream(_intention("current"), postprocessors=[Spy()])
        await demo.aretrieve_stream(_intention("current"), postprocessors=[Spy()])
        demo.retriever("ada").retrieve(QUERY)
    finally:
        object.__delattr__(embed, "get_query_embedding")
        object.__delattr__(embed, "aget_query_embedding")
    assert len(seen) >= 5 and set(seen) == {raised}
    assert gc.get_threshold() == before


def _validated_afresh(node) -> "MemoryNode":
    """What memory_of makes of the node's metadata when nothing is remembered."""
    from llama_consciousness import retrieved_memory

    retrieved_memory._PARSED.pop(id(node.node), None)
    return retrieved_memory.memory_of(node, copy=False)


def test_retrievers_remember_the_memory_their_metadata_validates_to(demo) -> None:
    """The model a retriever registers is the one validation of the metadata gives, field for field."""
    from llama_consciousness import retrieved_memory
    from llama_consciousness.postprocessors import MetadataQualityPostprocessor
    from llama_consciousness.retrievers import StateBasedRetriever, StateRetrievalConfig
    from llama_consciousness.schema import StateBasedRetrieval

    nodes = demo.retriever("ada").retrieve_intention(_intention("evolution"))
    state = StateBasedRetrieval(citizen_id="ada", query_mode="find_similar_state", current_energy=0.6,
                                current_emotions={"frustration": 0.7})
    nodes += StateBasedRetriever(demo, config=StateRetrievalConfig(query_levels=("N1", "N2"))).retrieve_state(state)
    assert len(nodes) > 5 and any(n.node.metadata.get("expired_at") for n in nodes)
    registered = [(n, retrieved_memory.remembered(n)) for n in nodes]
    assert all(memory is not None for _, memory in registered)
    for node, memory in registered:
        fresh = _validated_afresh(node)
        assert fresh is not memory
        assert fresh == memory and fresh.model_fields_set == memory.model_fields_set

    # the quality grader writes a memory field and registers the model that goes with it
    nodes = demo.retriever("ada").retrieve_intention(_intention("current"))
    MetadataQualityPostprocessor().postprocess_nodes(nodes)
    for node in nodes:
        memory = retrieved_memory.remembered(node)
        assert memory is not None
        assert memory.metadata_completeness == node.node.metadata["metadata_completeness"]
        assert _validated_afresh(node) == memory


def test_an_edited_memory_field_is_read_again(demo) -> None:
    """Code that edits a node's metadata between two steps gets the edited memory, never the remembered one."""
    from llama_consciousness import retrieved_memory

    node = demo.retriever("ada").retrieve_intention(_intention("current"))[0]
    before = retrieved_memory.memory_of(node, copy=False)
    node.node.metadata["energy"] = 0.123
    assert retrieved_memory.remembered(node) is None
    after = retrieved_memory.memory_of(node, copy=False)
    assert after.energy == 0.123 and before.energy != 0.123
    node.node.metadata["energy"] = 7.0  # invalid now: validation says so instead of a stale model
    with pytest.raises(ValueError):
        retrieved_memory.memory_of(node)


def test_a_copied_memory_shares_nothing_with_the_stream(demo) -> None:
    """Editing what memory_of returns (its default copy) leaves the stream and later reads alone."""
    from llama_consciousness import retrieved_memory

    retriever = demo.retriever("ada")
    stream, nodes = retriever._retrieve_both(_intention("current"))
    node = next(n for n in nodes if n.node.metadata.get("emotion_vector"))
    mine = retrieved_memory.memory_of(node)
    name = next(iter(mine.emotion_vector))
    mine.emotion_vector[name] = 0.0123
    mine.concepts.append("edited")
    again = retrieved_memory.memory_of(node, copy=False)
    assert again.emotion_vector[name] != 0.0123 and "edited" not in again.concepts
    level_nodes = [c for lvl in stream.levels.values() for c in lvl.vector_results + lvl.graph_results]
    assert all(c.emotion_vector.get(name) != 0.0123 for c in level_nodes if c.emotion_vector)


def test_remember_refuses_models_validation_would_not_give_back() -> None:
    """A subclass, or a memory without a description (memory_of takes the text), is validated instead."""
    from llama_index.core.schema import NodeWithScore, TextNode

    from llama_consciousness import retrieved_memory
    from llama_consciousness.schema import ConsciousnessNode, MemoryNode

    base = MemoryNode(node_id="m", level="N2", name="m", description="the text", energy=0.5, confidence=0.5)
    for memory in (base.model_copy(update={"description": None}),
                   ConsciousnessNode(**base.model_dump(), retrieval_source="N2_vector", relevance_score=0.5)):
        meta = base.model_dump(mode="json", exclude={"embedding"})
        node = NodeWithScore(node=TextNode(id_="m", text="the text", metadata=meta), score=1.0)
        retrieved_memory.remember(node, memory)
        assert retrieved_memory.remembered(node) is None
        assert type(retrieved_memory.memory_of(node, copy=False)) is MemoryNode
    node = NodeWithScore(node=TextNode(id_="m", text="the text", metadata=base.model_dump(mode="json")), score=1.0)
    retrieved_memory.remember(node, base)
    assert retrieved_memory.remembered(node) is not None
