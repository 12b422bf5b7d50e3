"""Spreading activation's decisions (``scoring.activation``): pure."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from llama_consciousness.scoring.activation import SpreadSettings, next_frontier, seed_activations, spread_hop


def link(edge_id: str, p: float = 1.0):
    return SimpleNamespace(edge_id=edge_id, p=p)


def prob(l) -> float:
    return l.p


def run(seeds, graph, settings=SpreadSettings()):
    """Spread over ``graph`` ({id: [(neighbour, link), ...]}) until the frontier or budget runs out."""
    state = seed_activations(seeds)
    spent, hops = 0.0, 0
    while True:
        frontier, spent = next_frontier(state, spent, settings)
        if not frontier or hops >= settings.max_hops:
            return state, hops
        spread_hop(state, frontier, {i: (len(graph.get(i, [])), graph.get(i, [])[:settings.fanout])
                                     for i in frontier}, prob, settings)
        hops += 1


def test_seeds_are_scaled_to_the_best() -> None:
    state = seed_activations([("a", 8.0), ("b", 2.0), ("a", 4.0)])
    assert state["a"].activation == 1.0 and state["b"].activation == pytest.approx(0.25)
    assert seed_activations([]) == {}


def test_activation_decays_per_hop_and_stops_below_the_threshold_without_a_fixed_depth() -> None:
    chain = {f"n{i}": [(f"n{i + 1}", link(f"e{i}"))] for i in range(20)}
    state, hops = run([("n0", 1.0)], chain, SpreadSettings(decay=0.5, threshold=0.05, budget=100))
    assert state["n1"].activation == pytest.approx(0.5) and state["n4"].activation == pytest.approx(1 / 16)
    assert "n6" not in state or state["n6"].activation < 0.05  # 1/32 < threshold: n5 never fired
    assert [l.edge_id for l in state["n4"].path] == ["e0", "e1", "e2", "e3"] and state["n4"].seed == "n0"
    # a stronger decay goes further: the depth follows the activation, not a setting
    far, _ = run([("n0", 1.0)], chain, SpreadSettings(decay=0.9, threshold=0.05, budget=100, max_hops=64))
    assert max(int(i[1:]) for i, a in far.items() if a.activation >= 0.05) > 10


def test_the_budget_stops_spreading() -> None:
    star = {"s": [(f"m{i}", link(f"e{i}")) for i in range(5)]}
    star.update({f"m{i}": [(f"x{i}", link(f"f{i}"))] for i in range(5)})
    rich, _ = run([("s", 1.0)], star, SpreadSettings(decay=0.5, budget=100, fanout=10))
    poor, _ = run([("s", 1.0)], star, SpreadSettings(decay=0.5, budget=1.4, fanout=10))
    assert sum(1 for i in rich if i.startswith("x")) == 5
    assert sum(1 for i in poor if i.startswith("x")) == 1  # s (1.0) and one m (0.5) spent it


def test_shares_add_up_hubs_share_out_and_links_are_walked_once() -> None:
    graph = {"a": [("c", link("ac"))], "b": [("c", link("bc"))]}
    state, _ = run([("a", 1.0), ("b", 1.0)], graph)
    assert state["c"].activation == pytest.approx(1.0)  # 0.5 from each hit
    hub = {"h": [(f"m{i}", link(f"e{i}")) for i in range(40)]}
    shared, _ = run([("h", 1.0)], hub, SpreadSettings(fanout=10, threshold=0.01))
    assert shared["m0"].activation == pytest.approx(0.5 * 10 / 40)  # fanout / degree
    assert sum(1 for i in shared if i.startswith("m")) == 10
    loop = {"a": [("b", link("ab"))], "b": [("a", link("ab"))]}
    state, _ = run([("a", 1.0)], loop, SpreadSettings(threshold=0.01, budget=100))
    assert state["a"].activation == 1.0  # the way back is the same link: not walked


def test_traversal_probability_weighs_each_link() -> None:
    graph = {"a": [("strong", link("s", 0.9)), ("weak", link("w", 0.1))]}
    state, _ = run([("a", 1.0)], graph, SpreadSettings(threshold=0.01))
    assert state["strong"].activation == pytest.approx(0.45) and state["weak"].activation == pytest.approx(0.05)


def test_bad_settings_are_refused() -> None:
    for bad in ({"decay": 0}, {"decay": 1.5}, {"threshold": 0}, {"budget": -1}, {"fanout": 0}):
        with pytest.raises(ValueError):
            SpreadSettings(**bad)


def test_no_echo_back_to_a_memory_on_the_trail() -> None:
    there_and_back = {"a": [("b", link("ab"))], "b": [("a", link("ba")), ("c", link("bc"))]}
    state, _ = run([("a", 1.0)], there_and_back, SpreadSettings(threshold=0.01, budget=100))
    assert state["a"].received == 0.0 and state["a"].activation == 1.0  # B's link back is not walked
    assert state["c"].received > 0 and state["c"].trail == ("a", "b", "c")
