"""Thought paths and the traversal-graph postprocessor.

The exports are checked on a hand graph; the postprocessor end to end on
the real embedded FalkorDB (N1 of a fresh citizen; N3 -- whose vectors live
in pgvector in the test memory -- with unique ids).  The traversal formula
and the path search are tested in ``tests/scoring/test_traversal.py``.
"""

from __future__ import annotations

import copy
import json
import re
import uuid

import networkx as nx
import pytest
from llama_index.core.schema import NodeWithScore, TextNode

from llama_consciousness.postprocessors.pipeline import complete_stream
from llama_consciousness.postprocessors.traversal_paths import (
    TraversalPathPostprocessor,
    connector_ids,
    mermaid_text,
    to_html,
    to_mermaid,
    to_networkx_dict,
)
from llama_consciousness.schema import ConsciousnessRelationship, MemoryNode, RetrievalIntention, StateBasedRetrieval
from llama_consciousness.schema.graph import TraversalGraph
from llama_consciousness.scoring.traversal import generate_traversal_paths, graph_density, semantic_coherence
from llama_consciousness.storage import records
from llama_consciousness.storage.channels import links_of_ids
from llama_consciousness.storage.level_store import Query
from llama_consciousness.storage.neighbourhood import Connector, embeddings
from llama_consciousness.temporal import cypher_predicate

from graph_builders import _small_graph, gnode
from concurrency import at_once


# -- exports on a hand graph ---------------------------------------------------------------------


def _hand_graph_with_paths() -> TraversalGraph:
    graph = _small_graph()
    paths = generate_traversal_paths(graph, ["A"])
    nodes = list(graph.nodes)
    nodes[0] = gnode("A", "Problem", 1.0, content='He said "fix [it]" | now <b>#1</b>; ok')
    return graph.model_copy(update={"nodes": nodes, "suggested_paths": paths, "path_count": len(paths),
                                    "hub_nodes": ["A"]})


def test_mermaid_escapes_labels():
    text = to_mermaid(_hand_graph_with_paths())
    assert text.startswith("graph LR\n")
    first = text.splitlines()[1]
    assert first.startswith('    n0["') and first.endswith('"]')
    inner = first[len('    n0["'):-2]
    assert '"' not in inner and "[" not in inner and "]" not in inner and "|" not in inner
    assert "#quot;fix #91;it#93;#quot;" in inner
    assert '-->|"RELATES_TO 0.90"|' in text
    assert "class n0 hub" in text
    assert mermaid_text("a\nb") == "a b"


def test_html_is_self_contained():
    page = to_html(_hand_graph_with_paths(), title="<Thoughts>")
    assert "<svg" in page and "</svg>" in page
    assert "<script" not in page.lower()
    assert not re.search(r"(src|href)\s*=", page)
    assert set(re.findall(r"https?://[^\s\"']+", page)) <= {"http://www.w3.org/2000/svg"}
    assert "&lt;Thoughts&gt;" in page and "<Thoughts>" not in page
    assert page.count("<circle") == 5
    assert "Problem → Evidence → Conclusion" in page
    assert "<svg" in to_html(TraversalGraph(nodes=[], edges=[], node_count=0, edge_count=0, path_count=0,
                                            graph_density=0.0))


def test_networkx_round_trip_hand_graph():
    graph = _hand_graph_with_paths()
    data = json.loads(json.dumps(to_networkx_dict(graph)))
    g = nx.node_link_graph(data, edges="edges")
    assert isinstance(g, nx.MultiDiGraph)
    assert set(g.nodes) == {"A", "B", "C", "D", "E"}
    assert g.number_of_edges() == 4
    assert g.edges["A", "B", "ab"]["traversal_weight"] == 0.9
    assert g.edges["A", "B", "ab"]["traversal_band"] == "very_high"
    assert g.nodes["A"]["hub"] is True and g.nodes["B"]["node_type"] == "Evidence"
    assert g.graph["path_count"] == len(graph.suggested_paths)
    assert nx.node_link_data(g, edges="edges")["nodes"]


# -- end to end on FalkorDB -------------------------------------------------------------------------

GOAL = "fix the deployment pipeline"


def mem(citizen, node_id, name, description, node_type, energy=0.7, level="N1", **kw) -> MemoryNode:
    return MemoryNode(node_id=node_id, level=level, citizen_id=citizen if level == "N1" else None,
                      node_type=node_type, name=name, description=description, energy=energy, confidence=0.8,
                      **kw)


def rel(source, target, relation_type, energy, emotions=None, goal=GOAL, **kw) -> ConsciousnessRelationship:
    return ConsciousnessRelationship(source_id=source, target_id=target, relation_type=relation_type, goal=goal,
                                     mindstate="focused debugging", energy=energy, confidence=0.8,
                                     emotion_vector=emotions or {"determination": 0.7},
                                     energy_transfer_coefficient=0.6, **kw)


@pytest.fixture
def pipeline_story(memory, citizen):
    """A problem, its evidence and conclusion, a low-energy connector, and an unrelated memory."""
    records = [
        mem(citizen, "problem", "flaky deployment pipeline", "deploys fail at random on the build servers",
            "Problem", emotion_vector={"frustration": 0.8}, goal=GOAL, concepts=["deployment"]),
        mem(citizen, "evidence", "build logs show image drift", "every failing build pulled a newer base image",
            "Evidence", emotion_vector={"frustration": 0.6, "curiosity": 0.5}, goal=GOAL,
            concepts=["deployment", "base image"]),
        mem(citizen, "conclusion", "pin the base image digest", "pinning the image digest stops the drift",
            "Conclusion", emotion_vector={"relief": 0.8}, goal=GOAL, concepts=["base image"]),
        mem(citizen, "cache", "shared build cache volume", "the cache volume that every build job mounts",
            "Infrastructure", energy=0.1, emotion_vector={"calm": 0.5}),
        mem(citizen, "garden", "tomato seedlings on the balcony", "watering the tomatoes every morning",
            "Memory", emotion_vector={"joy": 0.7}),
        rel("problem", "evidence", "INVESTIGATED_BY", 0.9, {"frustration": 0.8, "determination": 0.7}),
        rel("evidence", "conclusion", "JUSTIFIES", 0.8, {"determination": 0.7, "relief": 0.6}),
        rel("problem", "conclusion", "RESOLVED_BY", 0.3, {"relief": 0.9}, goal="close the incident"),
        rel("cache", "problem", "RELATES_TO", 0.2, {"calm": 0.5}, goal="understand the build infrastructure"),
        rel("cache", "conclusion", "RELATES_TO", 0.2, {"calm": 0.5}, goal="understand the build infrastructure"),
    ]
    report = memory.ingest(records)
    assert not report.rejected, report.rejected
    retriever = memory.retriever(citizen, intention_defaults={"query_levels": ["N1"], "min_energy": 0.4})
    nodes = retriever.retrieve("why does the deployment pipeline fail")
    return retriever, nodes


def test_postprocessor_end_to_end(memory, citizen, pipeline_story):
    retriever, nodes = pipeline_story
    retrieved = [n.node.metadata["node_id"] for n in nodes]
    assert {"problem", "evidence", "conclusion"} <= set(retrieved)
    assert "cache" not in retrieved  # below min_energy: only a connector can bring it in

    pp = TraversalPathPostprocessor(memory=memory, current_goal=GOAL, current_emotions={"determined": 0.9})
    before = [n.node.node_id for n in nodes]
    assert [n.node.node_id for n in pp.postprocess_nodes(nodes)] == before  # order untouched
    result = pp.process(nodes)
    out = result.nodes
    assert out is nodes and [n.node.node_id for n in out] == before
    assert set(result.stream_fields) == {"traversal_graph"}
    graph = result.stream_fields["traversal_graph"]
    assert graph is not None

    ids = {n.node_id for n in graph.nodes}
    assert {"N1:problem", "N1:evidence", "N1:conclusion", "N1:cache"} <= ids
    assert "N1:cache" in connector_ids(graph, nodes)
    assert not {"N1:problem", "N1:evidence", "N1:conclusion"} & set(connector_ids(graph, nodes))
    cache = next(n for n in graph.nodes if n.node_id == "N1:cache")
    assert cache.activation_score == 0.0 and cache.activation_tier == "background"
    assert max(n.activation_score for n in graph.nodes) == 1.0
    assert all(0.0 <= n.activation_score <= 1.0 for n in graph.nodes)

    edges = {e.edge_id: e for e in graph.edges}
    expected = {"N1:problem|INVESTIGATED_BY|evidence", "N1:evidence|JUSTIFIES|conclusion",
                "N1:problem|RESOLVED_BY|conclusion", "N1:cache|RELATES_TO|problem", "N1:cache|RELATES_TO|conclusion"}
    assert expected <= set(edges)
    for e in graph.edges:
        assert 0.0 <= e.traversal_weight <= 1.0
        assert e.source_id in ids and e.target_id in ids
    investigated = edges["N1:problem|INVESTIGATED_BY|evidence"]
    assert investigated.source_id == "N1:problem" and investigated.target_id == "N1:evidence"
    # .27 + .2 + cosine({frustration .8, determination .7}, {determination 1})*.3 + .08 + .06
    cos = 0.7 / (0.8 ** 2 + 0.7 ** 2) ** 0.5
    assert investigated.traversal_weight == pytest.approx(0.27 + 0.2 + 0.3 * cos + 0.08 + 0.06)

    paths = graph.suggested_paths
    assert paths and graph.path_count == len(paths)
    probs = [p.traversal_probability for p in paths]
    assert probs == sorted(probs, reverse=True)
    chain = next(p for p in paths if p.path_nodes == ["N1:problem", "N1:evidence", "N1:conclusion"])
    assert chain.path_edges == ["N1:problem|INVESTIGATED_BY|evidence", "N1:evidence|JUSTIFIES|conclusion"]
    assert chain.path_narrative == "Problem → Evidence → Conclusion"
    assert chain.traversal_probability == pytest.approx(
        investigated.traversal_weight * edges["N1:evidence|JUSTIFIES|conclusion"].traversal_weight)
    assert 0.0 <= chain.semantic_coherence <= 1.0 and chain.semantic_coherence != 0.5  # real embeddings
    for p in paths:
        assert all(n in ids for n in p.path_nodes)
        assert p.path_nodes[0] != "N1:cache"  # paths start from retrieved memories

    assert {"N1:problem", "N1:conclusion"} <= set(graph.hub_nodes)
    hubs = {n.node.metadata["node_id"] for n in out if n.node.metadata.get("hub")}
    assert {"problem", "conclusion"} <= hubs and "garden" not in hubs
    assert GOAL in graph.central_themes
    assert graph.node_count == len(graph.nodes) and graph.edge_count == len(graph.edges)
    assert graph.graph_density == pytest.approx(graph_density(graph.node_count, graph.edge_count))

    # exports of the real graph
    g = nx.node_link_graph(json.loads(json.dumps(to_networkx_dict(graph))), edges="edges")
    assert set(g.nodes) == ids and g.number_of_edges() == graph.edge_count
    assert g.has_edge("N1:evidence", "N1:conclusion", key="N1:evidence|JUSTIFIES|conclusion")
    text = to_mermaid(graph)
    assert text.count("-->") == graph.edge_count
    assert "JUSTIFIES" in text and "INVESTIGATED_BY" in text and "RESOLVED_BY" in text
    assert "flaky deployment pipeline" in text


def test_postprocessor_html_file(memory, citizen, pipeline_story, tmp_path):
    _, nodes = pipeline_story
    pp = TraversalPathPostprocessor(memory=memory)
    target = tmp_path / "graph.html"
    to_html(pp.build_graph(nodes), target)
    page = target.read_text(encoding="utf-8")
    assert "<svg" in page and "pin the base image digest" in page and "<script" not in page


def test_without_connectors_and_stale_hub_marks(memory, citizen, pipeline_story):
    _, nodes = pipeline_story
    pp = TraversalPathPostprocessor(memory=memory, include_connectors=False)
    graph = pp.build_graph(nodes)
    assert "N1:cache" not in {n.node_id for n in graph.nodes} and connector_ids(graph, nodes) == []
    assert not any(e.source_id == "N1:cache" for e in graph.edges)
    assert "N1:problem|RESOLVED_BY|conclusion" in {e.edge_id for e in graph.edges}
    # only the retrieved node with the best score starts paths when start_nodes=1
    one = TraversalPathPostprocessor(memory=memory, start_nodes=1, include_connectors=False)
    one_graph = one.build_graph(nodes)
    top = max(one_graph.nodes, key=lambda n: n.activation_score).node_id
    assert {p.path_nodes[0] for p in one_graph.suggested_paths} <= {top}
    # a second run on other nodes clears hub marks it no longer supports
    garden = [n for n in nodes if n.node.metadata["node_id"] == "garden"]
    garden[0].node.metadata["hub"] = True
    assert pp.postprocess_nodes(garden) == garden
    assert "hub" not in garden[0].node.metadata
    alone = pp.process(garden).stream_fields["traversal_graph"]
    assert alone.edges == [] and alone.graph_density == 0.0


def test_process_uses_the_intentions_state(memory, citizen, pipeline_story):
    retriever, nodes = pipeline_story
    intention = RetrievalIntention(query_text="why does the deployment pipeline fail", citizen_id=citizen,
                                   query_levels=["N1"], min_energy=0.4, required_emotions=["relief"])
    stream = retriever.retrieve_stream(intention)
    pp = TraversalPathPostprocessor(memory=memory)
    extended, kept = complete_stream(stream, nodes, intention, [pp])
    assert kept == nodes
    graph = extended.traversal_graph
    assert graph is not None
    alone = pp.process(nodes, None, intention).stream_fields["traversal_graph"]
    assert {e.edge_id: e.traversal_weight for e in alone.edges} == {e.edge_id: e.traversal_weight for e in graph.edges}
    resolved = next(e for e in graph.edges if e.edge_id == "N1:problem|RESOLVED_BY|conclusion")
    # relief at 1.0 against the link's {relief: .9}; no goal: .09 + .06 + .3 + .08 + .06
    assert resolved.traversal_weight == pytest.approx(0.59)

    state = StateBasedRetrieval(current_energy=0.9, current_emotions={"frustrated": 1.0}, current_goal=GOAL,
                                citizen_id=citizen)
    by_state = complete_stream(stream, nodes, state, [pp])[0].traversal_graph
    investigated = next(e for e in by_state.edges if e.edge_id == "N1:problem|INVESTIGATED_BY|evidence")
    cos = 0.8 / (0.8 ** 2 + 0.7 ** 2) ** 0.5
    assert investigated.traversal_weight == pytest.approx(0.27 + 0.2 + 0.3 * cos + 0.08 + 0.06)
    assert pp.state_of(state) == (GOAL, {"frustrated": 1.0}, 0.9)
    assert pp.state_of(None) == (None, None, 0.5)


def test_every_call_reads_the_graphs_afresh(memory, citizen, pipeline_story, monkeypatch):
    """One neighbourhood read per level graph and call; nothing is remembered between calls."""
    import llama_consciousness.postprocessors.traversal_paths as module

    retriever, nodes = pipeline_story
    calls = []
    real = module.neighbourhood

    def spy(*args, **kwargs):
        calls.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(module, "neighbourhood", spy)
    intention = RetrievalIntention(query_text="why does the deployment pipeline fail", citizen_id=citizen,
                                   query_levels=["N1"], min_energy=0.4, required_emotions=["relief"])
    pp = TraversalPathPostprocessor(memory=memory)
    plain = pp.process(nodes).stream_fields["traversal_graph"]
    assert len(calls) == 1  # one level graph: one read
    stream, _ = complete_stream(retriever.retrieve_stream(intention), nodes, intention, [pp])
    assert len(calls) == 2
    weights = {e.edge_id: e.traversal_weight for e in stream.traversal_graph.edges}
    assert weights != {e.edge_id: e.traversal_weight for e in plain.edges}  # weighed for the intention's state
    memory.upsert([mem(citizen, "late", "a late note on the pipeline", "written after the first run", "Memory")],
                  [rel("late", "problem", "RELATES_TO", 0.5), rel("late", "evidence", "RELATES_TO", 0.5)])
    assert "N1:late" in connector_ids(pp.build_graph(nodes), nodes)  # a write shows in the next build
    assert len(calls) == 3


def connectors(plans, node_ids, memory_filter, limit=10, *, min_links=2):
    """The server's own ranking of connectors: what ``neighbourhood.choose_connectors`` must agree with."""
    if len(node_ids) < min_links or limit <= 0:
        return []
    pred = memory_filter.cypher("c", "fc_")
    link = cypher_predicate(memory_filter.window, "r", "fr_")
    rows = yield Query(
        links_of_ids(link.text) + "WITH c, s, head(relationships(p)) AS r "
        "WITH c, count(DISTINCT s) AS linked, sum(coalesce(r.energy, 0.0)) AS energy "
        f"WHERE linked >= $min_links AND NOT c.node_id IN $ids AND {pred.text} "
        "WITH c, linked, energy ORDER BY linked DESC, energy DESC, c.node_id ASC LIMIT $limit "
        f"RETURN {records.node_projection('c')}, linked, energy",
        {**pred.params, **link.params, "ids": list(node_ids), "min_links": min_links, "limit": limit},
        read_only=True,
    )
    return [Connector(records.node_from_props(props), int(linked), float(energy)) for props, linked, energy in rows]


def test_neighbourhood_plans(memory, citizen, pipeline_story):
    from llama_consciousness.storage.filters import MemoryFilter

    store = memory.level("N1", citizen)
    found = store.run(connectors(store.plans, ["problem", "evidence", "conclusion"], MemoryFilter()))
    assert [c.node.node_id for c in found if not c.node.is_entity][:1] == ["cache"]
    cache = next(c for c in found if c.node.node_id == "cache")
    assert cache.linked == 2 and cache.link_energy == pytest.approx(0.4)
    assert store.run(connectors(store.plans, ["problem"], MemoryFilter())) == []
    vectors = store.run(embeddings(store.plans, ["problem", "evidence", "missing"]))
    assert set(vectors) == {"problem", "evidence"}
    assert len(vectors["problem"]) == memory.dimension


def test_pgvector_level_coherence_is_neutral(memory):
    """N3 keeps its vectors in Postgres in the test memory: coherence falls back to 0.5."""
    assert memory.vector_backends["N3"] == "pgvector"
    tag = uuid.uuid4().hex[:8]
    a, b = f"tp_{tag}_a", f"tp_{tag}_b"
    memory.ingest([
        mem(None, a, f"ecosystem standard {tag}", "a shared protocol for agents", "Pattern", level="N3"),
        mem(None, b, f"ecosystem adoption {tag}", "teams adopting the shared protocol", "Memory", level="N3"),
        rel(a, b, "ENABLES", 0.9),
    ])
    stored = memory.get_nodes([a, b], "N3")
    nodes = []
    for score, node in zip((0.9, 0.5), stored):
        meta = node.model_dump(mode="json", exclude={"embedding"})
        meta.update({"level": "N3", "retrieval_source": "N3_vector", "retrieval_sources": ["N3_vector"],
                     "relevance_score": score})
        nodes.append(NodeWithScore(node=TextNode(id_=f"N3:{node.node_id}", text=node.description, metadata=meta),
                                   score=score))
    pp = TraversalPathPostprocessor(memory=memory)
    graph = pp.process(nodes).stream_fields["traversal_graph"]
    path = next(p for p in graph.suggested_paths if p.path_nodes == [f"N3:{a}", f"N3:{b}"])
    assert path.semantic_coherence == 0.5
    assert all(p.semantic_coherence == 0.5 for p in graph.suggested_paths)
    activation = {n.node_id: n.activation_score for n in graph.nodes}
    assert activation[f"N3:{a}"] == 1.0 and activation[f"N3:{b}"] == pytest.approx(0.5 / 0.9)


def test_nodes_without_memory_metadata_are_left_out(memory):
    pp = TraversalPathPostprocessor(memory=memory)
    plain = [NodeWithScore(node=TextNode(text="just text"), score=1.0)]
    assert pp.postprocess_nodes(plain) == plain
    graph = pp.build_graph(plain)
    assert graph.node_count == 0 and graph.suggested_paths == []


def test_postprocessor_fields_are_validated(memory):
    with pytest.raises(Exception):
        TraversalPathPostprocessor(memory=memory, max_path_length=0)
    with pytest.raises(Exception):
        TraversalPathPostprocessor(memory=memory, temporal_mode="point_in_time")
    assert TraversalPathPostprocessor(memory=memory, temporal_mode="full_history").temporal_mode == "full_history"
    assert "memory" not in TraversalPathPostprocessor(memory=memory).model_dump()


def test_pair_similarities_equal_the_cosine_of_the_stored_vectors(memory, citizen, pipeline_story):
    from llama_consciousness.storage.neighbourhood import pair_similarities
    from llama_consciousness.scoring.traversal import _vector_cosine, coherence_of_similarities

    store = memory.level("N1", citizen)
    vectors = store.run(embeddings(store.plans, ["problem", "evidence", "conclusion"]))
    found = store.run(pair_similarities(store.plans, [("problem", "evidence"), ("evidence", "conclusion"),
                                                       ("problem", "missing")]))
    assert set(found) == {("problem", "evidence"), ("evidence", "conclusion")}  # a missing memory: absent
    for (a, b), cos in found.items():
        assert cos == pytest.approx(_vector_cosine(vectors[a], vectors[b]), abs=1e-5)
    # the path's coherence is the vectors' coherence
    path = [vectors["problem"], vectors["evidence"], vectors["conclusion"]]
    assert coherence_of_similarities(list(found.values())) == pytest.approx(semantic_coherence(path), abs=1e-5)


def test_path_coherence_comes_from_the_stored_vectors(memory, citizen, pipeline_story):
    _, nodes = pipeline_story
    pp = TraversalPathPostprocessor(memory=memory)
    paths = pp.build_graph(nodes).suggested_paths
    assert paths
    store = memory.level("N1", citizen)
    ids = {g.split(":", 1)[1] for p in paths for g in p.path_nodes}
    vectors = store.run(embeddings(store.plans, sorted(ids)))
    for p in paths:
        expected = semantic_coherence([vectors.get(g.split(":", 1)[1]) for g in p.path_nodes])
        assert p.semantic_coherence == pytest.approx(expected, abs=1e-5)
    assert any(p.semantic_coherence != 0.5 for p in paths)


def test_neighbourhood_equals_connectors_then_links_with_their_cosines(memory, citizen, pipeline_story):
    from llama_consciousness.scoring.traversal import _vector_cosine
    from llama_consciousness.storage.channels import links_among
    from llama_consciousness.storage.filters import MemoryFilter
    from llama_consciousness.storage.neighbourhood import neighbourhood

    store = memory.level("N1", citizen)
    ids = ["problem", "evidence", "conclusion"]
    for memory_filter, limit in ((MemoryFilter(), 10), (MemoryFilter(include_entities=True), 10),
                                 (MemoryFilter(), 0), (MemoryFilter(), 1)):
        merged = store.run(neighbourhood(store.plans, ids, memory_filter, limit))
        found = store.run(connectors(store.plans, ids, memory_filter, limit)) if limit else []
        among = ids + [c.node.node_id for c in found]
        links = [r for r, _ in store.run(links_among(store.plans, among, memory_filter))]
        assert merged.connectors == found
        assert sorted(r.edge_id for r in merged.relationships) == sorted(r.edge_id for r in links)
        assert {r.edge_id: r for r in merged.relationships} == {r.edge_id: r for r in links}
        vectors = store.run(embeddings(store.plans, sorted({i for r in links for i in (r.source_id, r.target_id)})))
        assert set(merged.similarities) == {(r.source_id, r.target_id) for r in links}
        for (a, b), cos in merged.similarities.items():
            if a in vectors and b in vectors:
                assert cos == pytest.approx(_vector_cosine(vectors[a], vectors[b]), abs=1e-5)
            else:
                assert cos is None  # a memory without an embedding (an entity)
    assert store.run(neighbourhood(store.plans, ["problem"], MemoryFilter(), 10)).relationships == []


def test_connectors_chosen_from_a_supersets_candidates_are_the_servers(memory, citizen, pipeline_story):
    """Candidates read for more memories give, for any subset, exactly what ``connectors`` reads for it."""
    from itertools import combinations

    from llama_consciousness.storage.filters import MemoryFilter
    from llama_consciousness.storage.neighbourhood import choose_connectors, connector_candidates, neighbourhood

    store = memory.level("N1", citizen)
    everything = ["problem", "evidence", "conclusion", "cache", "garden"]
    for memory_filter in (MemoryFilter(), MemoryFilter(include_entities=True)):
        candidates = store.run(connector_candidates(store.plans, everything, memory_filter))
        assert "cache" in candidates and "garden" not in candidates  # members qualify too; one link is not enough
        checked = 0
        for size in (2, 3, 4):
            for subset in combinations(everything, size):
                for limit in (1, 10):
                    want = store.run(connectors(store.plans, list(subset), memory_filter, limit))
                    got = choose_connectors(candidates, list(subset), limit)
                    assert [(c.node.node_id, c.linked) for c in want] == [(c, n) for c, n, _ in got]
                    assert [c.link_energy for c in want] == pytest.approx([e for _, _, e in got])
                    early = store.run(neighbourhood(store.plans, list(subset), memory_filter, limit,
                                                     candidates=candidates))
                    late = store.run(neighbourhood(store.plans, list(subset), memory_filter, limit))
                    assert early == late
                    checked += bool(want)
        assert checked  # some subsets have connectors ("cache" links problem and conclusion)
    assert choose_connectors({"x": [("a", 1.0), ("a", 2.0)]}, ["a", "b"]) == []  # two links, one memory


def test_a_graph_build_needs_no_separate_similarity_read(memory, citizen, pipeline_story, monkeypatch):
    """Connectors, links and the cosines of path steps come back in one neighbourhood read per level graph."""
    import llama_consciousness.postprocessors.traversal_paths as module
    from llama_consciousness.storage import level_store

    _, nodes = pipeline_story
    sent: list[str] = []
    real = level_store.LevelGraphStore._execute

    def spy(self, query):
        sent.append(getattr(query, "cypher", ""))
        return real(self, query)

    similarity_reads = []
    monkeypatch.setattr(level_store.LevelGraphStore, "_execute", spy)
    monkeypatch.setattr(module, "pair_similarities", lambda *a: similarity_reads.append(a) or {})
    graph = TraversalPathPostprocessor(memory=memory).build_graph(nodes)
    assert graph.suggested_paths and any(p.semantic_coherence != 0.5 for p in graph.suggested_paths)
    assert similarity_reads == []  # every step of a path is a link: its cosine came with the links
    assert len(sent) == 2  # one level graph: the connector candidates, then the links with their cosines


def test_graph_nodes_and_edges_are_what_validation_would_build(memory, citizen, pipeline_story):
    """Nodes and edges are built from valid models without validating again: each must be exactly
    the model validation makes of its fields, with containers of its own."""
    _, nodes = pipeline_story
    pp = TraversalPathPostprocessor(memory=memory, current_goal=GOAL, current_emotions={"determined": 0.9})
    graph = pp.build_graph(nodes)
    assert graph.nodes and graph.edges
    for item in [*graph.nodes, *graph.edges]:
        again = type(item).model_validate(item.model_dump())
        assert again == item and again.model_fields_set == item.model_fields_set
    emotional = [n for n in graph.nodes if n.emotion_vector]
    assert emotional
    member = next(n for n in nodes if f"N1:{n.node.metadata['node_id']}" == emotional[0].node_id)
    from llama_consciousness.postprocessors.base import memory_of

    emotional[0].emotion_vector["added"] = 0.5  # the graph's vector is not the memory's
    assert "added" not in memory_of(member).emotion_vector
    assert "added" not in member.node.metadata["emotion_vector"]


def test_one_postprocessor_serves_eight_threads_at_once(memory, citizen, pipeline_story):
    """Eight threads calling one postprocessor at once, each with its own nodes and state, each get
    exactly the graph (and hub marks) the same call gets alone."""
    from itertools import combinations

    _, nodes = pipeline_story
    assert len(nodes) >= 4
    lists = [list(c) for size in range(len(nodes), 1, -1) for c in combinations(nodes, size)][:8]
    assert len(lists) == 8
    states = [
        None,
        RetrievalIntention(query_text="pipeline", citizen_id=citizen, query_levels=["N1"], required_emotions=["relief"]),
        StateBasedRetrieval(current_energy=0.9, current_emotions={"frustrated": 1.0}, current_goal=GOAL,
                            citizen_id=citizen),
        RetrievalIntention(query_text="pipeline", citizen_id=citizen, query_levels=["N1"], temporal_mode="evolution"),
    ]
    pp = TraversalPathPostprocessor(memory=memory, current_goal=GOAL)

    def call(i):
        own = copy.deepcopy(lists[i])
        result = pp.process(own, None, states[i % len(states)])
        assert result.nodes is own
        return result.stream_fields["traversal_graph"], [n.node.metadata.get("hub") for n in own]

    alone = [call(i) for i in range(8)]
    assert len({json.dumps(g.model_dump(mode="json"), sort_keys=True) for g, _ in alone}) == 8  # all different
    for got in at_once(call, 8):
        assert got == alone
