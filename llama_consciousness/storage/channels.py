"""The retrieval channels of one level graph, as query plans (see ``level_store``); Cypher lives here.

* **vector**: ``LevelPlans.vector_search``;
* **graph**: traversal from start memories to depth 1..4, paths ranked by
  summed link energy, then confidence, then depth (decision #3);
* **keyword**: BM25 over name and description (``keyword_index``), for
  exact names and rare words that embeddings blur.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from llama_consciousness.schema import ConsciousnessRelationship, MemoryNode
from llama_consciousness.storage import records
from llama_consciousness.storage.filters import MemoryFilter
from llama_consciousness.storage.keyword_index import KeywordIndex, query_terms
from llama_consciousness.storage.level_store import (
    CHANGES_LABEL, EDGE_TYPE, NODE_LABEL, VECTOR_PROPERTY, LevelPlans, Plan, Query,
)
from llama_consciousness.temporal import cypher_predicate

MAX_DEPTH = 4
_NODE = records.node_projection("c")


@dataclass(frozen=True)
class GraphHit:
    """A memory reached by traversal, with the best path that reached it."""

    node: MemoryNode
    start_id: str
    path_energy: float
    path_confidence: float
    depth: int
    path: list[ConsciousnessRelationship] = field(default_factory=list)
    activation: float | None = None  # set by spreading activation (``storage.spreading``): its relevance


@dataclass(frozen=True)
class KeywordHit:
    node: MemoryNode
    rank: int
    score: float
    via: str | None = None  # the superseded memory whose words found this one (see ``keyword_search``)


# How many of the best paths the traversal groups by memory before its cut
# to k memories (``traverse``): enough that k distinct memories are almost
# always among them; when they are not, the walk is asked again uncut.
PATHS_PER_RESULT = 4
MIN_PATHS = 64


def traverse(
    plans: LevelPlans,
    start_ids: Sequence[str],
    k: int,
    memory_filter: MemoryFilter,
    *,
    depth: int = 2,
    include_start: bool = False,
) -> Plan:
    """Memories within ``depth`` links of the start memories, each once with its best path, best first.

    One query from all start memories at once (decision #3); a second one only
    when the best paths it grouped reached fewer than k memories (see
    :func:`walk_cypher`).  The links walked must be visible in the window too.
    """
    if not isinstance(depth, int) or isinstance(depth, bool) or not 1 <= depth <= MAX_DEPTH:
        raise ValueError(f"traversal depth must be an int in [1, {MAX_DEPTH}], got {depth!r}")
    if k <= 0 or not start_ids:
        return []
    cypher, params = walk_cypher(memory_filter, depth, include_start)
    paths = max(PATHS_PER_RESULT * int(k), MIN_PATHS)
    params = {**params, "ids": list(start_ids), "k": int(k), "paths": paths}
    rows = yield Query(cypher, params, read_only=True)
    if len(rows) < k and sum(row[-1] for row in rows) >= paths:
        # Fewer than k memories, so every one came back with its count of
        # paths; together they filled the cut, which may have left memories
        # out: walk again, uncut.
        rows = yield Query(cypher.replace(_CUT, ""), params, read_only=True)
    edges: dict[str, ConsciousnessRelationship] = {}  # a link on several best paths is read once
    hits = []
    for props, start_id, energy, confidence, hops, path, _ in rows:
        walked = []
        for values in path:
            found = edges.get(values[0])
            if found is None:
                found = edges[values[0]] = records.edge_from_props(values)
            walked.append(found)
        hits.append(GraphHit(records.node_from_props(props), start_id, float(energy), float(confidence), int(hops),
                             walked))
    return hits


_CUT = "LIMIT $paths "


def walk_cypher(memory_filter: MemoryFilter, depth: int, include_start: bool) -> tuple[str, dict[str, Any]]:
    """The traversal query of :func:`traverse` and its filter parameters (not ``ids``, ``k``, ``paths``).

    Written out hop by hop rather than as ``(s)-[:LINK*1..d]-(c)`` (median
    server time 2.8 -> 2.0 ms at 50K memories): each link's and in-between
    memory's tests run once per hop, energies are sums rather than ``reduce``
    over per-path lists, and only the best ``$paths`` rows are grouped by
    memory (the last column, each memory's count of them, tells
    :func:`traverse` when the cut may have left one out).  No link is walked
    twice (the trail rule).  Each hop's link is named by ``WITH ...
    head(relationships(p))``, never as a pattern variable: a test of an
    undirected ``(a)-[r]-(b)`` on an indexed property of ``r`` is planned as
    an edge index scan that ignores ``a`` (see :func:`links_of_ids`).
    """
    # What a start, or a memory a path runs through, must pass: in the window
    # and not quarantined.  Start points may be entity hubs; emotions/energy
    # filters apply to answers only.
    passable = MemoryFilter(memory_filter.window, include_entities=True)
    start = passable.cypher("s", "fs_", entities=True)
    reach = memory_filter.cypher("c", "fc_")

    def link_of(var: str) -> str:  # the link test on a hop's link (``var`` is r1, r2, ...: never user text)
        return cypher_predicate(memory_filter.window, var, "fr_").text

    # A path runs only through memories that exist in the window and are not
    # quarantined: an expired belief must not connect two current ones.  The
    # start passed the same test already and the end passes ``reach``, which
    # implies it unless quarantined memories are asked for.
    params = {**start.params, **reach.params, **cypher_predicate(memory_filter.window, "r", "fr_").params}
    end = reach.text
    if memory_filter.include_quarantined:
        hop_c = passable.cypher("c", "fx_", entities=True)
        end += f" AND {hop_c.text}"
        params.update(hop_c.params)
    if not include_start:
        end += " AND NOT c.node_id IN $ids"
    branches = []
    for length in range(1, depth + 1):  # depth is a validated int from a fixed range, never user text
        steps = []
        carried = ["s"]
        for i in range(1, length + 1):
            here = "s" if i == 1 else f"x{i - 1}"
            there = "c" if i == length else f"x{i}"
            if there == "c":
                test = end
            else:
                hop = passable.cypher(there, "fx_", entities=True)
                params.update(hop.params)
                test = hop.text
            walked = ", ".join(f"id(r{j})" for j in range(1, i))
            unique = f" AND NOT id(r{i}) IN [{walked}]" if walked else ""
            steps.append(f"MATCH p = ({here})-[:{EDGE_TYPE}]-({there}) "
                         f"WITH {', '.join(carried)}, {there}, head(relationships(p)) AS r{i} "
                         f"WHERE {link_of(f'r{i}')} AND {test}{unique} ")
            carried.append(f"r{i}")
        rels = [f"r{j}" for j in range(1, length + 1)]
        energy = " + ".join(f"coalesce({r}.energy, 0.0)" for r in rels)
        confidence = " + ".join(f"coalesce({r}.confidence, 0.0)" for r in rels)
        branches.append("WITH s " + "".join(steps)
                        + f"RETURN c, s.node_id AS sid, {energy} AS e, {confidence} AS f, {length} AS d, "
                        f"[{', '.join(rels)}] AS rs")
    edge = records.edge_projection("e")
    # Ties: the best path of a memory is the one with more energy, then more
    # confidence, then fewer links, then the smaller start id; memories with
    # equal best paths come in node_id order.
    cypher = (
        f"MATCH (s:{NODE_LABEL}) WHERE s.node_id IN $ids AND {start.text} "
        "CALL { " + " UNION ALL ".join(branches) + " } "
        "WITH c, sid, e, f, d, rs ORDER BY e DESC, f DESC, d ASC, c.node_id ASC, sid ASC " + _CUT
        # the rows arrive best first, and collect keeps their order
        + "WITH c, collect([e, f, d, sid, rs])[0] AS b, count(*) AS n "
        "ORDER BY b[0] DESC, b[1] DESC, b[2] ASC, c.node_id ASC LIMIT $k "
        f"RETURN {_NODE}, b[3], b[0], b[1], b[2], [e IN b[4] | {edge}], n"
    )
    return cypher, params


SUCCESSION_HOPS = 3
"""How many versions later the keyword channel looks for the current one of an outdated hit."""

CHANGE_PAGE = 5_000
"""Change-log positions read per query when the keyword index catches up (a rebuild reads in pages)."""


def catch_up(index: KeywordIndex) -> Plan:
    """Bring ``index`` up to the graph's change log: the memories written since it last looked, by anyone."""
    rows = yield Query(f"MATCH (m:{CHANGES_LABEL}) RETURN m.epoch, m.seq", read_only=True)
    epoch, head = (rows[0][0], int(rows[0][1] or 0)) if rows else (None, 0)
    after = index.behind(epoch, head)
    while after is not None and after < head:
        upto = min(after + CHANGE_PAGE, head)
        rows = yield Query(
            f"MATCH (c:{NODE_LABEL}) WHERE c.change_seq > $after AND c.change_seq <= $upto "
            "RETURN c.node_id, id(c), c.name, c.description, c.change_seq, c.node_type",
            {"after": after, "upto": upto}, read_only=True)
        index.apply(epoch, rows, upto)
        after = upto


def named_memories(index: KeywordIndex, names: Sequence[str], threshold: float, per_name: int, cap: int) -> Plan:
    """The memories a question names (``names``, from its entities), at most ``per_name`` each and ``cap`` in
    all: their names match by ``KeywordIndex.match_name``, whose index is first brought up to the change log,
    so a memory written a moment ago is named too."""
    if not names:
        return []
    yield from catch_up(index)
    out: dict[str, None] = {}
    for name in names:
        if len(out) >= cap:  # the first ``cap`` are kept: a later name could add none of them
            break
        for match in index.match_name(name, threshold, per_name):
            out[match.entity_id] = None
    return list(out)[:cap]


def keyword_search(plans: LevelPlans, index: KeywordIndex, text: str, k: int, memory_filter: MemoryFilter) -> Plan:
    """The k memories that best match the words of ``text`` by BM25 (name and description) and pass the filter.

    The index ranks (see ``keyword_index``); the graph filters, exactly as for
    the vector channel: candidates are asked for four at a time per slot, and
    again for four times as many while filters leave fewer than k.  The graph
    seeks candidates by their internal id, checked against their node_id; when
    too few pass and some id no longer names its memory, the index is rebuilt.
    """
    terms = query_terms(text)
    if not terms or k <= 0:
        return []
    yield from catch_up(index)
    pred = memory_filter.cypher("c", "fk_")
    later = [memory_filter.cypher(f"s{h}", "fs_") for h in range(1, SUCCESSION_HOPS + 1)]  # one set of params
    seek = ("UNWIND range(0, size($nids) - 1) AS i WITH i, $nids[i] AS n, $ids[i] AS id "
            "MATCH (c) WHERE id(c) = n WITH c, i, id ")
    # A memory the filter leaves out because a later one superseded it stands for its successor: "which phone
    # do you have now?" finds "my phone is a Pixel 7" by its words, and answers with "I don't use the Pixel
    # any more, I got a Moto" (which says "phone" nowhere), at the earlier memory's rank.
    # (up to SUCCESSION_HOPS versions later: Pixel -> Moto -> iPhone answers with the iPhone)
    hops = "".join(f"WITH c, i, {', '.join(f's{j}' for j in range(1, h))} OPTIONAL MATCH (s{h}:{NODE_LABEL}) "
                   f"WHERE s{h - 1} IS NOT NULL AND s{h}.node_id = s{h - 1}.superseded_by "
                   for h in range(2, SUCCESSION_HOPS + 1))
    heads = " ".join(f"WHEN s{h} IS NOT NULL AND {p.text} THEN [s{h}, c.node_id]" for h, p in enumerate(later, 1))
    cypher = (seek + f"WHERE c.node_id = id OPTIONAL MATCH (s1:{NODE_LABEL} {{node_id: c.superseded_by}}) " + hops
              + f"WITH i, CASE WHEN {pred.text} THEN [c, null] {heads} "
              "END AS hit WHERE hit IS NOT NULL WITH hit[0] AS c, i, hit[1] AS via ORDER BY i "
              f"WITH c, collect([i, via])[0] AS b ORDER BY b[0] LIMIT $k RETURN {_NODE}, b[0], b[1]")

    def candidates(fetch: int) -> tuple[list[tuple[str, int, float]], dict[str, Any]]:
        ranked = index.search(terms, fetch)
        return ranked, {**pred.params, **later[0].params, "ids": [r[0] for r in ranked],
                        "nids": [r[1] for r in ranked], "k": int(k)}

    fetch = max(4 * k, k + 16)
    while True:
        ranked, params = candidates(fetch)
        rows = yield Query(cypher, params, read_only=True)
        if len(rows) >= k or len(ranked) < fetch:
            break
        fetch *= 4
    if len(rows) < min(k, len(ranked)):  # short, and not only because of the filter?
        same = yield Query(seek + "RETURN sum(CASE WHEN c.node_id = id THEN 1 ELSE 0 END)", params,
                           read_only=True)
        if (same[0][0] or 0) < len(ranked):
            # ids that name another memory, or none: the graph was rebuilt under the index (a restore)
            index.rebuild()
            yield from catch_up(index)
            ranked, params = candidates(fetch)
            rows = yield Query(cypher, params, read_only=True)
    return [KeywordHit(records.node_from_props(props), rank, ranked[i][2], via)
            for rank, (props, i, via) in enumerate(rows, start=1)]


def links_of_ids(link: str, *, where: str = "", end: str = "c", directed: bool = False) -> str:
    """Cypher MATCH from the memories in ``$ids`` one link ``p`` to ``end``, the link passing ``link`` (over ``r``).

    ``where`` adds conditions before it.  Two FalkorDB planner traps avoided:
    the memories are found by node_id first, with a WITH before the link
    MATCH (else the planner scans the temporal range indexes, ten times the
    cost); the link is tested through the path variable, since a predicate on
    an undirected ``(s)-[r]-(c)`` comparing an indexed property of ``r``
    becomes an edge index scan returning only the outgoing direction.
    """
    arrow = "->" if directed else "-"
    condition = f"{where} AND " if where else ""
    return (f"MATCH (s:{NODE_LABEL}) WHERE s.node_id IN $ids WITH s "
            f"MATCH p = (s)-[:{EDGE_TYPE}]{arrow}({end}:{NODE_LABEL}) "
            f"WHERE {condition}all(r IN relationships(p) WHERE {link}) ")


def link_counts(plans: LevelPlans, node_ids: Sequence[str]) -> Plan:
    """``{node_id: links}``: how many links each of these memories has (in either direction, any time)."""
    if not node_ids:
        return {}
    rows = yield Query(f"MATCH (s:{NODE_LABEL}) WHERE s.node_id IN $ids RETURN s.node_id, indegree(s) + outdegree(s)",
                       {"ids": list(node_ids)}, read_only=True)
    return {node_id: int(links) for node_id, links in rows}


def neighbours(plans: LevelPlans, node_ids: Sequence[str], memory_filter: MemoryFilter, per_memory: int = 2) -> Plan:
    """``{node_id: [neighbour memories]}``: the memories one link away from each given one.

    Strongest links first (energy, then confidence), at most ``per_memory``
    each; neighbours pass the filter and are not among ``node_ids``; links
    are visible in the window.  (The turns before and after a retrieved one.)
    """
    if not node_ids or per_memory <= 0:
        return {}
    pred = memory_filter.cypher("c", "fn_")
    link = cypher_predicate(memory_filter.window, "r", "fl_")
    rows = yield Query(
        links_of_ids(link.text, where=f"NOT c.node_id IN $ids AND {pred.text}")
        + "WITH s, c, head(relationships(p)) AS r "
        "ORDER BY coalesce(r.energy, 0.0) DESC, coalesce(r.confidence, 0.0) DESC, c.node_id ASC "
        "WITH s, collect(DISTINCT c)[0..$per] AS near "
        f"UNWIND near AS c RETURN s.node_id, {_NODE}",
        {**pred.params, **link.params, "ids": list(node_ids), "per": int(per_memory)},
        read_only=True,
    )
    out: dict[str, list[MemoryNode]] = {}
    for source, props in rows:
        out.setdefault(source, []).append(records.node_from_props(props))
    return out


def links_among(
    plans: LevelPlans, node_ids: Sequence[str], memory_filter: MemoryFilter
) -> Plan:
    """``(link, cosine)`` for the links between the given memories that are visible in the window.

    The cosine of the link's two stored embeddings is computed by the server
    (None when either has none, or when the level keeps its vectors
    elsewhere): a path along these links needs nothing else for its coherence.
    """
    if len(node_ids) < 2:
        return []
    link = cypher_predicate(memory_filter.window, "r", "fr_")
    rows = yield Query(links_among_cypher(plans, link.text), {**link.params, "ids": list(node_ids)}, read_only=True)
    return [link_with_cosine(props, cos) for props, cos in rows]


def link_with_cosine(props: Any, cosine: Any) -> tuple[ConsciousnessRelationship, float | None]:
    """A row of :func:`links_among_cypher` as ``(link, cosine)``."""
    return records.edge_from_props(props), None if cosine is None else float(cosine)


def links_among_cypher(plans: LevelPlans, link: str) -> str:
    """The query of :func:`links_among` (columns ``link``, ``cosine``), ``link`` a predicate over ``r``."""
    cosine = (f"CASE WHEN s.{VECTOR_PROPERTY} IS NULL OR t.{VECTOR_PROPERTY} IS NULL THEN NULL "
              f"ELSE 1.0 - vec.cosineDistance(s.{VECTOR_PROPERTY}, t.{VECTOR_PROPERTY}) END"
              if plans.store_vectors else "NULL")
    return (links_of_ids(link, where="t.node_id IN $ids", end="t", directed=True)
            + "WITH s, t, head(relationships(p)) AS r "
            f"RETURN {records.edge_projection('r')} AS link, {cosine} AS cosine")


def describe(hit: Any) -> dict[str, Any]:
    """Channel-specific facts of a hit, for ``node.metadata``."""
    if isinstance(hit, GraphHit):
        return {"path_energy": hit.path_energy, "path_confidence": hit.path_confidence,
                "depth": hit.depth, "start_id": hit.start_id}
    if isinstance(hit, KeywordHit):
        return {"keyword_rank": hit.rank, **({"found_via_superseded": hit.via} if hit.via else {})}
    return {}
