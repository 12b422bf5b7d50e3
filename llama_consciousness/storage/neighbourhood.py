"""The neighbourhood of retrieved memories in one level graph, as query plans (see ``level_store``).

For the traversal graph of a retrieval: the memories one hop from several
retrieved ones ("connectors"), the links among all of them, and the
embeddings path coherence is measured with.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from llama_consciousness.schema import ConsciousnessRelationship, MemoryNode
from llama_consciousness.storage import records
from llama_consciousness.storage.channels import link_with_cosine, links_among, links_among_cypher, links_of_ids
from llama_consciousness.storage.filters import MemoryFilter
from llama_consciousness.storage.level_store import NODE_LABEL, VECTOR_PROPERTY, LevelPlans, Plan, Query
from llama_consciousness.temporal import cypher_predicate

__all__ = [
    "Connector", "Neighbourhood", "choose_connectors", "connector_candidates", "embeddings",
    "neighbourhood", "pair_similarities",
]

_NODE = records.node_projection("c")
MAX_CONNECTORS = 1000


@dataclass(frozen=True)
class Connector:
    """A memory linked to ``linked`` of the given memories (at least ``min_links``)."""

    node: MemoryNode
    linked: int
    link_energy: float


@dataclass(frozen=True)
class Neighbourhood:
    """Connectors of a set of memories, the links among all of them, and how alike each link's ends are.

    ``similarities`` maps ``(source_id, target_id)`` of each link to the
    cosine of the two memories' stored embeddings (None when either has
    none): a path along these links needs nothing else for its coherence.
    """

    connectors: list[Connector] = field(default_factory=list)
    relationships: list[ConsciousnessRelationship] = field(default_factory=list)
    similarities: dict[tuple[str, str], float | None] = field(default_factory=dict)


def connector_candidates(
    plans: LevelPlans,
    node_ids: Sequence[str],
    memory_filter: MemoryFilter,
    *,
    min_links: int = 2,
) -> Plan:
    """``{candidate_id: [(linked_id, link_energy), ...]}``: what :func:`choose_connectors` chooses from.

    Every memory (members of ``node_ids`` included) with at least
    ``min_links`` links to ``node_ids`` (one hop, either direction, link and
    memory visible in the window, the memory passing the filter), with each
    such link.  The connectors of any subset of ``node_ids`` are among these:
    a stream reads them before the ranking decides which memories stay.
    """
    if len(node_ids) < min_links:
        return {}
    pred = memory_filter.cypher("c", "fc_")
    link = cypher_predicate(memory_filter.window, "r", "fr_")
    rows = yield Query(
        links_of_ids(link.text) + "WITH c, s, head(relationships(p)) AS r "
        "WITH c, collect(s.node_id) AS linked, collect(coalesce(r.energy, 0.0)) AS energies "
        # the memory's own tests on the few memories linked often enough, not on every link walked
        f"WHERE size(linked) >= $min_links AND {pred.text} "
        "RETURN c.node_id, linked, energies",
        {**pred.params, **link.params, "ids": list(node_ids), "min_links": int(min_links)},
        read_only=True,
    )
    return {c: [(s, float(e)) for s, e in zip(linked, energies)] for c, linked, energies in rows}


def choose_connectors(
    candidates: Mapping[str, Sequence[tuple[str, float]]],
    node_ids: Sequence[str],
    limit: int = 10,
    *,
    min_links: int = 2,
) -> list[tuple[str, int, float]]:
    """``(connector_id, linked, link_energy)`` of the connectors of ``node_ids``, best first.

    Connectors are outside ``node_ids`` and linked to at least ``min_links``
    of them; ranked by how many, then the summed energy of those links, then
    id; at most ``limit``.  ``candidates`` come from
    :func:`connector_candidates` over ``node_ids`` or a superset, same window.
    """
    if len(node_ids) < min_links or limit <= 0:
        return []
    members = set(node_ids)
    chosen = []
    for candidate, links in candidates.items():
        if candidate in members:
            continue
        ends: set[str] = set()
        energy = 0.0  # summed in the server's order (the reply's), so ties break as a server sum would
        for s, e in links:
            if s in members:
                ends.add(s)
                energy += e
        if len(ends) >= min_links:
            chosen.append((candidate, len(ends), energy))
    chosen.sort(key=lambda c: (-c[1], -c[2], c[0]))
    return chosen[: min(int(limit), MAX_CONNECTORS)]


def neighbourhood(
    plans: LevelPlans,
    node_ids: Sequence[str],
    memory_filter: MemoryFilter,
    max_connectors: int = 10,
    *,
    min_links: int = 2,
    candidates: Mapping[str, Sequence[tuple[str, float]]] | None = None,
) -> Plan:
    """Connectors of ``node_ids`` (when ``max_connectors`` > 0), the links among all of them,
    and the cosine across each link.

    Two queries: the connector candidates (unless given, read earlier over a
    superset of ``node_ids``), then the links with the server's cosine of
    their ends' embeddings, and the connectors themselves.  (One query with
    the connectors in a subquery measured slower: 3.6 against 2.4 ms.)
    """
    chosen: list[tuple[str, int, float]] = []
    if max_connectors > 0:
        if candidates is None:
            candidates = yield from connector_candidates(plans, node_ids, memory_filter, min_links=min_links)
        chosen = choose_connectors(candidates, node_ids, max_connectors, min_links=min_links)
    ids = list(dict.fromkeys([*node_ids, *(c for c, _, _ in chosen)]))
    links, nodes = yield from _links_and_nodes(plans, ids, [c for c, _, _ in chosen], memory_filter)
    found = [Connector(nodes[c], linked, energy) for c, linked, energy in chosen if c in nodes]
    return Neighbourhood(found, [rel for rel, _ in links],
                         {(rel.source_id, rel.target_id): cosine for rel, cosine in links})


def _links_and_nodes(plans: LevelPlans, ids: list[str], node_ids: list[str], memory_filter: MemoryFilter) -> Plan:
    """``links_among(ids)`` and the memories ``node_ids`` (by id), in one query when there are both."""
    if not node_ids:
        return (yield from links_among(plans, ids, memory_filter)), {}
    link = cypher_predicate(memory_filter.window, "r", "fr_")
    rows = yield Query(
        links_among_cypher(plans, link.text) + ", null AS node "
        f"UNION ALL UNWIND $nodes AS id MATCH (c:{NODE_LABEL} {{node_id: id}}) "
        f"RETURN null AS link, null AS cosine, {_NODE} AS node",
        {**link.params, "ids": ids, "nodes": node_ids},
        read_only=True,
    )
    links = [link_with_cosine(props, cos) for props, cos, node in rows if node is None]
    nodes = {n.node_id: n for n in (records.node_from_props(node) for _, _, node in rows if node is not None)}
    return links, nodes


def embeddings(plans: LevelPlans, node_ids: Sequence[str]) -> Plan:
    """``{node_id: embedding}`` of the given memories that have one in this graph (none: vectors elsewhere)."""
    if not plans.store_vectors or not node_ids:
        return {}
    rows = yield Query(
        f"UNWIND $ids AS id MATCH (n:{NODE_LABEL} {{node_id: id}}) "
        f"WHERE n.{VECTOR_PROPERTY} IS NOT NULL RETURN id, n.{VECTOR_PROPERTY}",
        {"ids": list(dict.fromkeys(node_ids))},
        read_only=True,
    )
    return {node_id: [float(x) for x in vector] for node_id, vector in rows if vector is not None}


def pair_similarities(plans: LevelPlans, pairs: Sequence[tuple[str, str]]) -> Plan:
    """``{(a, b): cosine}`` of the stored embeddings of memory pairs, computed on the server (a few bytes a
    pair, not two vectors).  A pair whose memory or embedding is missing is absent (or None)."""
    wanted = list(dict.fromkeys((str(a), str(b)) for a, b in pairs))
    if not plans.store_vectors or not wanted:
        return {}
    rows = yield Query(
        f"UNWIND $pairs AS pair MATCH (a:{NODE_LABEL} {{node_id: pair[0]}}) MATCH (b:{NODE_LABEL} {{node_id: pair[1]}}) "
        f"WHERE a.{VECTOR_PROPERTY} IS NOT NULL AND b.{VECTOR_PROPERTY} IS NOT NULL "
        f"RETURN pair[0], pair[1], 1.0 - vec.cosineDistance(a.{VECTOR_PROPERTY}, b.{VECTOR_PROPERTY})",
        {"pairs": [list(pair) for pair in wanted]},
        read_only=True,
    )
    return {(a, b): (None if cos is None else float(cos)) for a, b, cos in rows}

