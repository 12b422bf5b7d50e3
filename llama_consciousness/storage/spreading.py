"""The spreading-activation walk of one level graph, one server query per hop (``scoring.activation`` decides).

Each hop asks the server, for every memory of the frontier at once, for its number of links and its
``fanout`` strongest links (by link energy) with the neighbours at their ends, both in the retrieval's
window and not quarantined (a path never runs through an expired belief).  The traversal probability,
the decay and the budget are applied here, between hops.  The memories that end up activated are read
in one last query, through the retrieval's filter (entities, energy, emotions, quarantine).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from llama_consciousness.schema import ConsciousnessRelationship
from llama_consciousness.scoring.activation import (
    Activated, SpreadSettings, next_frontier, seed_activations, spread_hop,
)
from llama_consciousness.storage import records
from llama_consciousness.storage.channels import GraphHit
from llama_consciousness.storage.filters import MemoryFilter
from llama_consciousness.storage.level_store import EDGE_TYPE, NODE_LABEL, Plan, Query
from llama_consciousness.storage.params import Ids
from llama_consciousness.temporal import cypher_predicate

_EDGE = records.edge_projection("o[1]")
_NODE = records.node_projection("c")


def _hop_cypher(memory_filter: MemoryFilter) -> tuple[str, dict[str, Any]]:
    passable = MemoryFilter(memory_filter.window, include_entities=True).cypher("b", "fb_", entities=True)
    link = cypher_predicate(memory_filter.window, "r", "fr_")
    # the link is named through the path (``head(relationships(p))``), never as a pattern variable: see
    # ``channels.walk_cypher`` on undirected patterns and edge indexes
    cypher = (
        f"UNWIND $frontier AS f MATCH (a:{NODE_LABEL} {{node_id: f}}) "
        f"MATCH p = (a)-[:{EDGE_TYPE}]-(b:{NODE_LABEL}) "
        f"WITH a, b, head(relationships(p)) AS r WHERE {link.text} AND {passable.text} "
        "WITH a, b, r ORDER BY coalesce(r.energy, 0.0) DESC, b.node_id "
        "WITH a, collect([b.node_id, r]) AS outs "
        f"RETURN a.node_id, size(outs), [o IN outs[..$fanout] | [o[0], {_EDGE}]]"
    )
    return cypher, {**passable.params, **link.params}


def spread(
    plans: Any,
    seeds: Sequence[tuple[str, float]],
    k: int,
    memory_filter: MemoryFilter,
    probability: Callable[[ConsciousnessRelationship], float],
    settings: SpreadSettings | None = None,
) -> Plan:
    """The memories that activation from ``seeds`` (``(node_id, score)``) reached over links, by what they
    received (at least the threshold), strongest first, at most ``k``: a seed only when other seeds point to
    it.  ``GraphHit``s whose ``activation`` is what they received and whose ``path`` is the chain of links
    of the strongest share (``start_id`` the seed it came from)."""
    settings = settings or SpreadSettings()
    state: dict[str, Activated] = seed_activations(seeds)
    if k <= 0 or not state:
        return []
    cypher, params = _hop_cypher(memory_filter)
    spent = 0.0
    for _ in range(settings.max_hops):
        frontier, spent = next_frontier(state, spent, settings)
        if not frontier:
            break
        rows = yield Query(cypher, {**params, "frontier": Ids(frontier), "fanout": settings.fanout},
                           read_only=True)
        links = {source: (int(degree), [(nid, records.edge_from_props(e)) for nid, e in outs])
                 for source, degree, outs in rows}
        spread_hop(state, frontier, links, probability, settings)
    reached = sorted((a for a in state.values() if a.received >= settings.threshold),
                     key=lambda a: (-a.received, a.node_id))
    if not reached:
        return []
    reach = memory_filter.cypher("c", "fc_")
    rows = yield Query(f"UNWIND $ids AS id MATCH (c:{NODE_LABEL} {{node_id: id}}) WHERE {reach.text} "
                       f"RETURN {_NODE}", {**reach.params, "ids": Ids([a.node_id for a in reached])},
                       read_only=True)
    nodes = {n.node_id: n for n in (records.node_from_props(r[0]) for r in rows)}
    hits = []
    for a in reached:
        node = nodes.get(a.node_id)
        if node is None:  # not an answer (an entity, too little energy, ...): it still spread
            continue
        hits.append(GraphHit(node, a.seed, sum(float(r.energy or 0.0) for r in a.path),
                             sum(float(r.confidence or 0.0) for r in a.path), len(a.path), list(a.path),
                             activation=a.received))
        if len(hits) >= k:
            break
    return hits
