"""Traversal probability, path search and path quality (pure functions), checked on hand-computed values."""

from __future__ import annotations

import random
import time

import pytest

from llama_consciousness.schema import ConsciousnessRelationship
from llama_consciousness.schema.graph import TraversalGraph
from llama_consciousness.scoring.traversal import (
    PathCandidate,
    build_adjacency,
    calculate_traversal_probability,
    central_themes,
    cosine_similarity,
    dfs_with_probability,
    emotional_consistency,
    generate_traversal_paths,
    goal_match,
    graph_density,
    hub_nodes,
    path_narrative,
    semantic_coherence,
    traversal_band,
)

from graph_builders import _small_graph, edge, gnode


def test_formula_on_hand_computed_values():
    e = edge(energy=0.8, confidence=0.9, transfer=0.7, goal="ship v2", emotions={"determination": 0.6})
    # 0.8*0.3 + 1.0*0.2 + 1.0*0.3 + 0.9*0.1 + 0.7*0.1
    assert calculate_traversal_probability(e, "ship v2", {"determination": 0.9}, 0.5) == pytest.approx(0.90)
    # partial goal (substring), no emotional state: 0.24 + 0.14 + 0 + 0.09 + 0.07
    assert calculate_traversal_probability(e, "ship v2 today", None, 0.5) == pytest.approx(0.54)
    # no goal at all: 0.24 + 0.06 + 0 + 0.09 + 0.07
    assert calculate_traversal_probability(e, None, {}, 0.5) == pytest.approx(0.46)
    # current_energy is in the spec's signature, not in its formula
    assert calculate_traversal_probability(e, None, {}, 0.0) == calculate_traversal_probability(e, None, {}, 1.0)


def test_goal_match_levels():
    assert goal_match("fix the bug", "fix the bug") == 1.0
    assert goal_match("fix", "fix the bug") == 0.7
    assert goal_match("fix the bug today", "fix the bug") == 0.7
    assert goal_match("write docs", "fix the bug") == 0.3
    assert goal_match("write docs", None) == 0.3
    assert goal_match("write docs", "") == 0.3


def test_emotions_compare_by_canonical_name():
    assert cosine_similarity({"excited": 0.8}, {"excitement": 0.4}) == pytest.approx(1.0)
    assert cosine_similarity({"excited": 0.8}, {"excitement": 0.4}, canonical=False) == 0.0
    assert cosine_similarity({"a": 1.0}, {"a": 0.6, "b": 0.8}) == pytest.approx(0.6)
    assert cosine_similarity({}, {"a": 1.0}) == 0.0
    assert cosine_similarity({"a": 0.0}, {"a": 1.0}) == 0.0
    e = edge(energy=0.0, confidence=0.0, transfer=0.0, goal="x", emotions={"Frustrated": 0.7})
    # 0.3 (goal mismatch) * 0.2 + cosine 1.0 * 0.3
    assert calculate_traversal_probability(e, "y", {"frustration": 0.2}, 0.5) == pytest.approx(0.36)


# The spec's "Traversal Weight Semantics" table, one example per band.
BAND_CASES = [
    # high energy + exact goal + strong emotional resonance: .27 + .2 + .3 + .09 + .08
    ("very_high", dict(energy=0.9, confidence=0.9, transfer=0.8, goal="ship", emotions={"a": 1.0}),
     "ship", {"a": 0.5}, 0.94),
    # medium energy + partial goal + medium emotional match (cos .8): .18 + .14 + .24 + .09 + .06
    ("high", dict(energy=0.6, confidence=0.9, transfer=0.6, goal="ship", emotions={"a": 0.8, "b": 0.6}),
     "ship it", {"a": 1.0}, 0.71),
    # medium energy + no goal match + high emotional resonance (cos .9 via .9/.436): .12+.06+.27+.05+.03
    ("medium", dict(energy=0.4, confidence=0.5, transfer=0.3, goal="ship", emotions={"a": 0.9, "b": 0.19 ** 0.5}),
     "rest", {"a": 1.0}, 0.53),
    # low energy + goal mismatch + low emotional resonance (cos .3): .06 + .06 + .09 + .06 + .03
    ("low", dict(energy=0.2, confidence=0.6, transfer=0.3, goal="ship", emotions={"a": 0.3, "b": 0.91 ** 0.5}),
     "rest", {"a": 1.0}, 0.30),
    # resolved context with no current relevance: .015 + .06 + 0 + .05 + .01
    ("very_low", dict(energy=0.05, confidence=0.5, transfer=0.1, goal="ship", emotions={"calm": 1.0}),
     "rest", {"anger": 1.0}, 0.135),
]


@pytest.mark.parametrize("band,fields,goal,state,expected", BAND_CASES, ids=[c[0] for c in BAND_CASES])
def test_spec_band_examples(band, fields, goal, state, expected):
    weight = calculate_traversal_probability(edge(**fields), goal, state, 0.5)
    assert weight == pytest.approx(expected, abs=1e-9)
    assert traversal_band(weight) == band


@pytest.mark.parametrize("weight,band", [
    (1.0, "very_high"), (0.8, "very_high"), (0.7999, "high"), (0.6, "high"), (0.5999, "medium"), (0.4, "medium"),
    (0.3999, "low"), (0.2, "low"), (0.1999, "very_low"), (0.0, "very_low"),
])
def test_band_boundaries(weight, band):
    assert traversal_band(weight) == band


def test_formula_is_clamped_to_unit_interval():
    top = edge(energy=1.0, confidence=1.0, transfer=1.0, goal="g", emotions={"a": 1.0})
    assert calculate_traversal_probability(top, "g", {"a": 1.0}, 1.0) == pytest.approx(1.0)
    low = edge(energy=0.0, confidence=0.0, transfer=0.0, goal="g", emotions=None)
    assert calculate_traversal_probability(low, "other", {"a": 1.0}, 0.0) == pytest.approx(0.06)


def test_formula_accepts_relationships():
    rel = ConsciousnessRelationship(source_id="a", target_id="b", relation_type="JUSTIFIES", goal="g",
                                    mindstate="m", energy=0.5, confidence=0.5, emotion_vector={"joy": 0.5},
                                    energy_transfer_coefficient=0.5)
    # .15 + .2 + .3 + .05 + .05
    assert calculate_traversal_probability(rel, "g", {"happy": 1.0}, 0.5) == pytest.approx(0.75)


HAND = {"A": [("B", 0.9, "ab"), ("D", 0.95, "ad")], "B": [("C", 0.9, "bc")], "D": [("E", 0.2, "de")]}


def test_dfs_finds_most_probable_paths():
    paths = dfs_with_probability(HAND, "A")
    assert [(p.nodes, round(p.probability, 6)) for p in paths] == [
        (("A", "D"), 0.95), (("A", "B"), 0.9), (("A", "B", "C"), 0.81), (("A", "D", "E"), 0.19),
    ]
    two_edges = [p for p in paths if len(p.edges) == 2]
    assert two_edges[0].nodes == ("A", "B", "C") and two_edges[0].edges == ("ab", "bc")
    assert two_edges[0].probability == pytest.approx(0.81)


def test_dfs_explores_stronger_links_first_and_is_deterministic():
    # equal probabilities: longer first, then ids
    adjacency = {"S": [("Y", 1.0), ("X", 1.0)], "X": [("Z", 1.0)]}
    paths = dfs_with_probability(adjacency, "S")
    assert [p.nodes for p in paths] == [("S", "X", "Z"), ("S", "X"), ("S", "Y")]
    assert paths[0].edges == ("S->X", "X->Z")  # default edge ids
    assert paths == dfs_with_probability(adjacency, "S")


def test_dfs_cycles_do_not_loop():
    cycle = {"A": [("B", 1.0, "ab")], "B": [("C", 1.0, "bc")], "C": [("A", 1.0, "ca")]}
    paths = dfs_with_probability(cycle, "A", max_depth=10, max_paths=100)
    assert [p.nodes for p in paths] == [("A", "B", "C"), ("A", "B")]
    for p in paths:
        assert len(set(p.nodes)) == len(p.nodes)


def test_dfs_respects_max_depth_max_paths_and_min_probability():
    chain = {str(i): [(str(i + 1), 0.9, f"e{i}")] for i in range(10)}
    assert max(len(p.edges) for p in dfs_with_probability(chain, "0", max_depth=3, max_paths=100)) == 3
    assert len(dfs_with_probability(chain, "0", max_depth=3, max_paths=2)) == 2
    assert dfs_with_probability(chain, "0", max_depth=0) == []
    kept = dfs_with_probability(chain, "0", max_depth=10, max_paths=100, min_probability=0.7)
    assert kept and all(p.probability >= 0.7 for p in kept)
    assert len(kept) == 3  # .9, .81, .729
    assert dfs_with_probability({}, "lonely") == []


def _brute_force(adjacency, start, max_depth):
    """Every path, numbered in depth-first preorder (strongest link, then target, then edge id)."""
    out = []

    def walk(node, nodes, edges, p):
        if edges:
            out.append(PathCandidate(tuple(nodes), tuple(edges), p, len(out)))
        if len(edges) >= max_depth:
            return
        for target, weight, edge_id in sorted(adjacency.get(node, ()), key=lambda e: (-e[1], e[0], e[2])):
            if target not in nodes:
                walk(target, nodes + [target], edges + [edge_id], p * weight)

    walk(start, [start], [], 1.0)
    return sorted(out, key=PathCandidate.sort_key)


@pytest.mark.parametrize("seed", range(8))
def test_pruned_search_equals_exhaustive_search(seed):
    rng = random.Random(seed)
    names = [f"n{i}" for i in range(7)]
    adjacency = {n: [(m, round(rng.random(), 2), f"{n}{m}") for m in names if m != n and rng.random() < 0.5]
                 for n in names}
    for k in (1, 3, 10, 1000):
        expected = _brute_force(adjacency, "n0", 4)[:k]
        got = dfs_with_probability(adjacency, "n0", max_depth=4, max_paths=k)
        assert [(p.nodes, p.edges) for p in got] == [(p.nodes, p.edges) for p in expected]


@pytest.mark.parametrize("seed", range(4))
def test_pruned_search_equals_exhaustive_search_with_ties(seed):
    rng = random.Random(100 + seed)
    names = [f"n{i}" for i in range(6)]
    adjacency = {n: [(m, rng.choice((0.5, 1.0)), f"{n}{m}") for m in names if m != n and rng.random() < 0.6]
                 for n in names}
    for k in (1, 4, 15):
        expected = _brute_force(adjacency, "n0", 4)[:k]
        got = dfs_with_probability(adjacency, "n0", max_depth=4, max_paths=k)
        assert [(p.nodes, p.probability) for p in got] == [(p.nodes, p.probability) for p in expected]


def test_search_stays_fast_when_nothing_can_be_pruned_by_probability():
    names = [f"n{i:02d}" for i in range(30)]
    complete = {a: [(b, 1.0) for b in names if b != a] for a in names}
    started = time.perf_counter()
    paths = dfs_with_probability(complete, "n00", max_depth=5, max_paths=10)
    assert time.perf_counter() - started < 2.0
    assert len(paths) == 10 and all(len(p.edges) == 5 and p.probability == 1.0 for p in paths)
    assert paths[0].nodes == ("n00", "n01", "n02", "n03", "n04", "n05")


def test_build_adjacency_directed_and_undirected():
    edges = [edge("a", "b", weight=0.7, edge_id="e1")]
    assert build_adjacency(edges) == {"a": [("b", 0.7, "e1")]}
    assert build_adjacency(edges, directed=False) == {"a": [("b", 0.7, "e1")], "b": [("a", 0.7, "e1")]}


def test_generate_traversal_paths_over_several_starts():
    graph = _small_graph()
    paths = generate_traversal_paths(graph, ["A", "B", "A"], max_paths=10, max_path_length=5)
    probs = [p.traversal_probability for p in paths]
    assert probs == sorted(probs, reverse=True)
    assert [p.path_id for p in paths] == [f"path_{i}" for i in range(1, len(paths) + 1)]
    keys = [tuple(p.path_nodes) for p in paths]
    assert len(keys) == len(set(keys))  # "A" given twice: no duplicate paths
    assert ("B", "C") in keys and ("A", "B", "C") in keys
    abc = paths[keys.index(("A", "B", "C"))]
    assert abc.path_edges == ["ab", "bc"]
    assert abc.traversal_probability == pytest.approx(0.81)
    assert abc.total_activation == pytest.approx(1.75)
    assert abc.path_narrative == "Problem → Evidence → Conclusion"
    assert abc.emotional_consistency == pytest.approx((1.0 + 0.5) / 2)  # identical, then unknown
    assert abc.semantic_coherence == 0.5  # no embeddings given
    assert len(generate_traversal_paths(graph, ["A"], max_paths=2)) == 2


def test_generate_traversal_paths_recomputes_weights_from_state():
    nodes = [gnode("A"), gnode("B"), gnode("C")]
    edges = [edge("A", "B", goal="rest", energy=0.1, weight=0.99, edge_id="ab"),
             edge("A", "C", goal="ship", energy=0.9, emotions={"drive": 1.0}, weight=0.01, edge_id="ac")]
    graph = TraversalGraph(nodes=nodes, edges=edges, node_count=3, edge_count=2, path_count=0, graph_density=1 / 3)
    stored = generate_traversal_paths(graph, ["A"])
    assert stored[0].path_nodes == ["A", "B"]  # the stored weights
    state = generate_traversal_paths(graph, ["A"], "ship", {"motivated": 0.9}, 0.5)
    assert state[0].path_nodes == ["A", "C"]
    assert state[0].traversal_probability == pytest.approx(calculate_traversal_probability(edges[1], "ship",
                                                                                           {"drive": 1.0}))
    # undirected: B can reach C through A
    back = generate_traversal_paths(graph, ["B"], directed=False)
    assert ["B", "A", "C"] in [p.path_nodes for p in back]


def test_semantic_coherence():
    assert semantic_coherence([[1.0, 0.0], [1.0, 0.0]]) == pytest.approx(1.0)
    assert semantic_coherence([[1.0, 0.0], [0.0, 1.0]]) == pytest.approx(0.0)
    assert semantic_coherence([[1.0, 0.0], [-1.0, 0.0]]) == 0.0  # clamped
    assert semantic_coherence([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]) == pytest.approx(0.5)
    assert semantic_coherence([None, [1.0, 0.0]]) == 0.5
    assert semantic_coherence([[0.0, 0.0], [1.0, 0.0]]) == 0.5
    assert semantic_coherence([[1.0, 0.0], None, [1.0, 0.0]]) == 0.5
    assert semantic_coherence([[1.0]]) == 1.0


def test_emotional_consistency():
    assert emotional_consistency([{"joy": 0.5}, {"happy": 0.9}]) == pytest.approx(1.0)
    assert emotional_consistency([{"joy": 0.5}, {"fear": 0.9}]) == 0.0
    assert emotional_consistency([{"joy": 0.5}, None]) == 0.5
    assert emotional_consistency([None, {}]) == 0.5
    assert emotional_consistency([{"a": 1.0}, {"a": 1.0}, {"b": 1.0}]) == pytest.approx(0.5)
    assert emotional_consistency([{"a": 1.0}]) == 1.0


def test_path_narrative():
    assert path_narrative(["Problem", "Evidence", "Conclusion"]) == "Problem → Evidence → Conclusion"
    assert path_narrative(["Memory", "Memory", "Decision", "Memory"]) == "Memory → Decision → Memory"
    assert path_narrative([]) == ""


def test_hub_nodes():
    edges = [("a", "b"), ("a", "c"), ("a", "d"), ("b", "c"), ("e", "f")]
    assert hub_nodes(edges) == ["a", "b", "c"]
    assert hub_nodes(edges, top=1) == ["a"]
    assert hub_nodes([edge("x", "y"), edge("y", "z")]) == ["y"]
    assert hub_nodes([("p", "q")]) == []


def test_central_themes():
    nodes = {
        "a": {"goal": "ship v2", "concepts": ["FalkorDB", "latency"], "emotion_vector": {"excited": 0.9}},
        "b": {"goal": "Ship  v2", "concepts": ["falkordb"], "emotion_vector": {"excitement": 0.7, "fear": 0.1}},
        "c": {"goal": "rest", "concepts": ["latency"], "emotion_vector": {"calm": 0.8}},
        "z": {"goal": "never counted", "concepts": ["nope"]},
    }
    themes = central_themes(nodes, ["a"], [["a", "b"], ["b", "c"]], top=5)
    assert themes[:3] == ["excitement", "FalkorDB", "latency"]
    assert themes[3] == "ship v2"
    assert "fear" not in themes and "nope" not in themes
    assert len(central_themes(nodes, ["a"], [["a", "b", "c"]], top=2)) == 2


def test_graph_density():
    assert graph_density(0, 0) == 0.0
    assert graph_density(1, 5) == 0.0
    assert graph_density(2, 1) == 0.5
    assert graph_density(4, 6) == 0.5
    assert graph_density(2, 5) == 1.0  # parallel links clamp


def test_coherence_of_similarities_edge_cases():
    from llama_consciousness.scoring.traversal import coherence_of_similarities

    assert coherence_of_similarities([]) == 1.0
    assert coherence_of_similarities([None, float("nan")]) == 0.5  # no usable pair: neutral
    assert coherence_of_similarities([1.0, -0.4]) == pytest.approx(0.5)  # clamped to [0, 1] first
    assert coherence_of_similarities([0.8, None]) == pytest.approx(0.65)
