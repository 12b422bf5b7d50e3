"""The graph channel's walk (``channels.traverse``) against a walk done in Python.

The query is written hop by hop and groups only the best paths by memory
(see ``channels.walk_cypher``); its answer must still be the one the spec
defines over *every* path: all trails (no link walked twice) of 1..depth
links from the start memories, through memories and links visible in the
window, ranked by summed link energy, then summed confidence, then fewer
links, best path per memory, memories in node_id order on ties.  The graph
is random but seeded, with cycles, parallel links, hubs, expired links and
memories, quarantined and entity memories, and energies that tie exactly.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

import pytest

from llama_consciousness.schema import ConsciousnessRelationship, MemoryNode
from llama_consciousness.storage import channels as ch
from llama_consciousness.storage.filters import MemoryFilter
from llama_consciousness.temporal import TemporalWindow, is_visible

T0 = datetime(2024, 3, 1, 12, 0, 0, tzinfo=timezone.utc)
PAST = T0 - timedelta(days=30)


def build(rng: random.Random, n_nodes: int = 36, n_links: int = 110) -> tuple[list[MemoryNode], list[ConsciousnessRelationship]]:
    nodes = []
    for i in range(n_nodes):
        kind = rng.random()
        nodes.append(MemoryNode(
            node_id=f"m{i:02d}", level="N2", name=f"memory {i}", created_at=PAST, valid_at=PAST,
            energy=rng.choice([0.25, 0.5, 0.75]), confidence=0.5,
            # a few of each kind that a walk must not reach or pass through
            invalid_at=T0 - timedelta(days=1) if kind < 0.08 else None,
            quarantined=0.08 <= kind < 0.14,
            is_entity=0.14 <= kind < 0.22,
        ))
    hubs = [f"m{i:02d}" for i in range(4)]  # many links each: memories reached by several paths
    links = []
    for j in range(n_links):
        source = rng.choice(hubs) if j % 3 == 0 else f"m{rng.randrange(n_nodes):02d}"
        target = f"m{rng.randrange(n_nodes):02d}"
        if source == target:
            continue
        links.append(ConsciousnessRelationship(
            # explicit ids: two links may join the same pair (parallel links)
            edge_id=f"e{j:03d}", source_id=source, target_id=target, relation_type="RELATES_TO",
            goal="connect", mindstate="focused", created_at=PAST, valid_at=PAST,
            # multiples of 1/8 add up exactly, so sums tie exactly
            energy=rng.randrange(1, 9) / 8, confidence=rng.randrange(1, 5) / 4,
            invalid_at=T0 - timedelta(days=2) if rng.random() < 0.07 else None,
        ))
    return nodes, links


def walk_in_python(nodes, links, start_ids, k, memory_filter, depth, include_start):
    """Every trail, scored; the best per memory; the k best memories (the spec's rule, spelt out)."""
    by_id = {n.node_id: n for n in nodes}
    starts = MemoryFilter(memory_filter.window, include_entities=True)
    hop = MemoryFilter(memory_filter.window, include_entities=True)
    visible = [e for e in links if is_visible(memory_filter.window, e)]
    best: dict[str, tuple] = {}

    def extend(start, here, walked):
        for e in visible:
            if e.edge_id in {w.edge_id for w in walked} or here not in (e.source_id, e.target_id):
                continue
            there = e.target_id if e.source_id == here else e.source_id
            path = walked + [e]
            node = by_id[there]
            ends = memory_filter.accepts(node) and (include_start or there not in start_ids)
            if ends and memory_filter.include_quarantined:
                ends = hop.accepts(node)
            if ends:
                energy = sum(w.energy for w in path)
                confidence = sum(w.confidence for w in path)
                key = (-energy, -confidence, len(path), start)
                if there not in best or key < best[there][0]:
                    best[there] = (key, path)
            if len(path) < depth and hop.accepts(node):
                extend(start, there, path)

    for start in start_ids:
        if start in by_id and starts.accepts(by_id[start]):
            extend(start, start, [])
    ranked = sorted(best.items(), key=lambda item: (item[1][0][:3], item[0]))
    return [(node_id, key[3], -key[0], -key[1], key[2], path) for node_id, (key, path) in ranked[:k]]


@pytest.fixture
def walked_graph(fresh_graph):
    store = fresh_graph("N2")
    nodes, links = build(random.Random(2024))
    store.upsert(nodes, links)
    return store, nodes, links


def check(store, nodes, links, start_ids, k, memory_filter, depth, include_start):
    got = store.run(ch.traverse(store.plans, start_ids, k, memory_filter, depth=depth, include_start=include_start))
    want = walk_in_python(nodes, links, start_ids, k, memory_filter, depth, include_start)
    assert [(h.node.node_id, h.start_id, h.path_energy, h.path_confidence, h.depth) for h in got] == \
        [w[:5] for w in want]
    for hit in got:
        # the path given is a trail from its start to the memory with the scores given
        ids = [e.edge_id for e in hit.path]
        assert len(set(ids)) == len(ids) == hit.depth
        here = hit.start_id
        for e in hit.path:
            assert here in (e.source_id, e.target_id)
            here = e.target_id if e.source_id == here else e.source_id
        assert here == hit.node.node_id
        assert sum(e.energy for e in hit.path) == hit.path_energy
        assert sum(e.confidence for e in hit.path) == hit.path_confidence
    return got


NOW = TemporalWindow(now=T0)


@pytest.mark.parametrize("depth", [1, 2, 3, 4])
@pytest.mark.parametrize("include_start", [True, False])
def test_walk_matches_every_trail_scored_in_python(walked_graph, depth, include_start):
    store, nodes, links = walked_graph
    for starts in (["m00"], ["m01", "m02", "m17"], ["m03", "m25"]):
        got = check(store, nodes, links, starts, 12, MemoryFilter(NOW), depth, include_start)
        assert got or depth == 1


def test_walk_honours_the_filters_and_the_window(walked_graph):
    store, nodes, links = walked_graph
    for memory_filter in (MemoryFilter(NOW, min_energy=0.5), MemoryFilter(NOW, include_quarantined=True),
                          MemoryFilter(NOW, include_entities=True),
                          MemoryFilter(TemporalWindow("point_in_time", as_of_time=T0 - timedelta(days=3)))):
        check(store, nodes, links, ["m00", "m01"], 15, memory_filter, 2, True)


def test_a_cut_that_holds_too_few_memories_walks_again(walked_graph, monkeypatch):
    """With room for 3 paths only, the best paths reach fewer memories than asked: the answer is still exact."""
    store, nodes, links = walked_graph
    monkeypatch.setattr(ch, "PATHS_PER_RESULT", 0)
    monkeypatch.setattr(ch, "MIN_PATHS", 3)
    sent = []
    run = store._execute

    def counting(query):
        sent.append(query.cypher)
        return run(query)

    monkeypatch.setattr(store, "_execute", counting)
    got = check(store, nodes, links, ["m00", "m01"], 10, MemoryFilter(NOW), 3, True)
    assert len(got) == 10
    assert len(sent) == 2 and ch._CUT in sent[0] and ch._CUT not in sent[1]
    sent.clear()
    # a cut that holds them all asks once
    monkeypatch.setattr(ch, "MIN_PATHS", 64)
    check(store, nodes, links, ["m00", "m01"], 10, MemoryFilter(NOW), 2, True)
    assert len(sent) == 1
