"""The retrieval channels of one level graph, as query plans (Cypher lives here).

* **vector**: the HNSW index, filters inside the query, over-fetch past
  post-KNN filters and orphan vectors (``LevelPlans.vector_search``);
* **graph**: traversal from start memories to depth 1..4, every path
  ranked by summed link energy, then summed link confidence, then depth
  (the spec's decision #3), filters on start and reached memories and on
  the links walked;
* **keyword**: FalkorDB's full-text index over name and description, for
  exact names and ids that embeddings blur.  Its scores are coarse (not
  BM25), so callers use its *ranks*.

Plans are generators of queries (see ``level_store``), so the sync and the
asyncio store run the very same code.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from llama_consciousness.schema import ConsciousnessRelationship, MemoryNode
from llama_consciousness.storage import records
from llama_consciousness.storage.filters import MemoryFilter
from llama_consciousness.storage.level_store import EDGE_TYPE, NODE_LABEL, VECTOR_PROPERTY, LevelPlans, Plan, Query
from llama_consciousness.temporal import cypher_predicate

MAX_DEPTH = 4
_NODE = records.projection("c", records.NODE_READ_PROPS)
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)


@dataclass(frozen=True)
class GraphHit:
    """A memory reached by traversal, with the best path that reached it."""

    node: MemoryNode
    start_id: str
    path_energy: float
    path_confidence: float
    depth: int
    path: list[ConsciousnessRelationship] = field(default_factory=list)


@dataclass(frozen=True)
class KeywordHit:
    node: MemoryNode
    rank: int
    score: float


def ensure_fulltext(plans: LevelPlans) -> Plan:
    """Create the full-text index over name and description if missing."""
    rows = yield Query("CALL db.indexes() YIELD label, types RETURN label, types")
    for label, types in rows:
        if label == NODE_LABEL and "FULLTEXT" in types.get("description", []):
            return None
    yield Query(f"CALL db.idx.fulltext.createNodeIndex('{NODE_LABEL}', 'name', 'description')")
    yield from plans.wait_operational()
    return None


def traverse(
    plans: LevelPlans,
    start_ids: Sequence[str],
    k: int,
    memory_filter: MemoryFilter,
    *,
    depth: int = 2,
    include_start: bool = False,
) -> Plan:
    """Memories within ``depth`` links of the start memories, best paths first.

    One query starts from all entities at once (decision #3).  A memory
    reached by several paths is kept once, with its best path.  The links
    walked must be visible in the temporal window too: a relationship that
    was superseded is not a path in ``current`` mode.
    """
    if not isinstance(depth, int) or isinstance(depth, bool) or not 1 <= depth <= MAX_DEPTH:
        raise ValueError(f"traversal depth must be an int in [1, {MAX_DEPTH}], got {depth!r}")
    if k <= 0 or not start_ids:
        return []
    # Start points may be entity hubs; emotions/energy filters apply to answers only.
    start = MemoryFilter(memory_filter.window, include_entities=True).cypher("s", "fs_", entities=True)
    reach = memory_filter.cypher("c", "fc_")
    link = cypher_predicate(memory_filter.window, "r", "fr_")
    link_clause = "" if link.text == "true" else f" AND all(r IN relationships(p) WHERE {link.text})"
    # A path runs only through memories that exist in the window and are not
    # quarantined: an expired belief must not connect two current ones.  The
    # start passed the same test already and the end passed ``reach`` (which
    # implies it unless quarantined memories are asked for), so only the
    # memories in between are tested: a third of the work for depth 2.
    hop = MemoryFilter(memory_filter.window, include_entities=True).cypher("x", "fx_", entities=True)
    between = "nodes(p)[1..]" if memory_filter.include_quarantined else "nodes(p)[1..-1]"
    link_clause += f" AND all(x IN {between} WHERE {hop.text})"
    not_start = "" if include_start else " AND NOT c.node_id IN $ids"
    # Every path is scored on the server, but only the best path of each
    # reached memory comes back, with its links' properties: one reply of k
    # rows, not one per path and no second query for the links.  The end
    # has no label test: links join only memories, and testing the label of
    # every path's end was 5-10% of the walk's server time.
    edge = records.projection("e", records.EDGE_READ_PROPS)
    cypher = (
        f"MATCH (s:{NODE_LABEL}) WHERE s.node_id IN $ids AND {start.text} "
        # the depth is a validated int from a fixed range, never user text
        f"MATCH p = (s)-[:{EDGE_TYPE}*1..{depth}]-(c) "
        f"WHERE {reach.text}{not_start}{link_clause} "
        "WITH c, {s: s.node_id, "
        "e: reduce(e = 0.0, r IN relationships(p) | e + coalesce(r.energy, 0.0)), "
        "f: reduce(x = 0.0, r IN relationships(p) | x + coalesce(r.confidence, 0.0)), "
        "d: length(p), r: relationships(p)} AS path "
        "WITH c, collect(path) AS paths "
        "WITH c, reduce(b = head(paths), x IN paths | CASE WHEN x.e > b.e OR (x.e = b.e AND "
        "(x.f > b.f OR (x.f = b.f AND (x.d < b.d OR (x.d = b.d AND x.s < b.s))))) THEN x ELSE b END) AS best "
        "ORDER BY best.e DESC, best.f DESC, best.d ASC, c.node_id ASC "
        "LIMIT $k "
        f"RETURN {_NODE}, best.s, best.e, best.f, best.d, [e IN best.r | {edge}]"
    )
    params = {**start.params, **reach.params, **link.params, **hop.params, "ids": list(start_ids), "k": int(k)}
    rows = yield Query(cypher, params, read_only=True)
    edges: dict[str, ConsciousnessRelationship] = {}  # a link on several best paths is read once
    hits = []
    for props, start_id, energy, confidence, hops, path in rows:
        walked = []
        for values in path:
            found = edges.get(values[0])
            if found is None:
                found = edges[values[0]] = records.edge_from_props(values)
            walked.append(found)
        hits.append(GraphHit(records.node_from_props(props), start_id, float(energy), float(confidence), int(hops),
                             walked))
    return hits


def start_nodes(plans: LevelPlans, node_ids: Sequence[str], memory_filter: MemoryFilter) -> Plan:
    """The start memories themselves, when they pass the filter."""
    if not node_ids:
        return []
    pred = memory_filter.cypher("c", "fc_")
    rows = yield Query(
        f"UNWIND $ids AS id MATCH (c:{NODE_LABEL} {{node_id: id}}) WHERE {pred.text} RETURN {_NODE}",
        {**pred.params, "ids": list(node_ids)},
        read_only=True,
    )
    return [records.node_from_props(r[0]) for r in rows]


# Words a question is made of that carry no topic: RediSearch's own stop
# words (a query of one of them alone is an error), question and auxiliary
# verbs, pronouns.  Measured on LoCoMo: dropping them is worth a point of
# recall@10 over the short list above.
QUERY_STOP = frozenset("""
a about after all also am an and any are as at be been before being but by can could did do does doing done
during for from had has have having he her hers him his how i if in into is it its just like many may me might
more most much my no not now of on once only or other our out over own said say says she should so some such
than that the their them then there these they this those through to too under until up us very was we were
what when where which while who whom why will with would you your
""".split())


def keyword_terms(text: str, max_terms: int = 24, stop: frozenset[str] = QUERY_STOP) -> list[str]:
    """The words of ``text`` that the keyword channel looks up, one by one.

    Lower case, apostrophes dropped, no stop words (``stop``) or single
    characters, each once, at most ``max_terms``.  Every term is a bare run
    of word characters, so none can carry RediSearch syntax.
    """
    out: list[str] = []
    for word in _WORD.findall(text.lower()):
        word = word.replace("'", "").replace("’", "")
        if len(word) > 1 and word not in stop and word not in out:
            out.append(word)
            if len(out) >= max_terms:
                break
    return out


def keyword_search(plans: LevelPlans, text: str, k: int, memory_filter: MemoryFilter) -> Plan:
    """Memories matching the words of ``text`` (name and description), best first.

    Scored like BM25 with a binary term frequency and no length
    normalisation: a memory scores the sum, over the query words it
    contains, of ``log(1 + (N - df + 0.5) / (df + 0.5))``.  Each word is
    looked up on its own (RediSearch still stems it) and its document
    frequency is the length of its posting list, all in one query.  The
    full-text index's own score of an OR query is not additive over words
    (a memory matching four rare words of the question scored below one
    matching a single common one), which made the channel close to random:
    0.08 recall@10 on LoCoMo against 0.62 for this one (benchmarks/RESULTS.md).
    """
    terms = keyword_terms(text)
    if not terms or k <= 0:
        return []
    pred = memory_filter.cypher("c", "fk_")
    rows = yield Query(
        f"MATCH (m:{NODE_LABEL}) WITH count(m) AS total "
        "UNWIND $terms AS t "
        f"CALL db.idx.fulltext.queryNodes('{NODE_LABEL}', t) YIELD node "
        "WITH total, t, collect(node) AS hits "
        "WITH hits, log(1.0 + (toFloat(total) - size(hits) + 0.5) / (size(hits) + 0.5)) AS idf "
        "UNWIND hits AS c "
        f"WITH c, sum(idf) AS score WHERE {pred.text} "
        # the forty properties are read for the k kept, not for every memory
        # that matched a word (FalkorDB projects a RETURN before its ORDER
        # BY): 63 -> 26 ms of server time per query at 50K memories
        "WITH c, score ORDER BY score DESC, c.node_id ASC LIMIT $k "
        f"RETURN {_NODE}, score",
        {**pred.params, "terms": terms, "k": int(k)},
        read_only=True,
    )
    return [KeywordHit(records.node_from_props(props), rank, float(score))
            for rank, (props, score) in enumerate(rows, start=1)]


def links_of_ids(link: str, *, where: str = "", end: str = "c", directed: bool = False) -> str:
    """Cypher MATCH from the memories in ``$ids`` one link to ``end``, the link ``p`` visible by ``link``.

    ``link`` is a predicate over ``r``; ``where`` adds conditions before it.
    Two FalkorDB planner traps are avoided here, once for every caller:

    * the memories are found by node_id first, with a WITH before the link
      MATCH: otherwise the planner answers either step through the temporal
      range indexes (a scan of every memory, or of links per memory, ten
      times the cost);
    * the link is tested through the path variable
      (``all(r IN relationships(p) ...)``): a predicate on an undirected
      ``(s)-[r]-(c)`` comparing an indexed property of ``r`` becomes an edge
      index scan that returns only the outgoing direction.
    """
    arrow = "->" if directed else "-"
    condition = f"{where} AND " if where else ""
    return (f"MATCH (s:{NODE_LABEL}) WHERE s.node_id IN $ids WITH s "
            f"MATCH p = (s)-[:{EDGE_TYPE}]{arrow}({end}:{NODE_LABEL}) "
            f"WHERE {condition}all(r IN relationships(p) WHERE {link}) ")


def neighbours(plans: LevelPlans, node_ids: Sequence[str], memory_filter: MemoryFilter, per_memory: int = 2) -> Plan:
    """``{node_id: [neighbour memories]}``: the memories one link away from each given one.

    The strongest links first (energy, then confidence), at most
    ``per_memory`` each; neighbours pass the filter (entity hubs do not) and
    are not among ``node_ids``; links must be visible in the window.  This is
    what puts the turn before and after a retrieved one in a conversation
    next to it.
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


def entity_names(plans: LevelPlans, node_types: Sequence[str]) -> Plan:
    """``(node_id, name)`` of the memories a query's names can start from."""
    return (yield from plans.named_nodes(node_types))


def relationships_among(plans: LevelPlans, node_ids: Sequence[str], memory_filter: MemoryFilter) -> Plan:
    """The links between the given memories that are visible in the window."""
    found = yield from links_among(plans, node_ids, memory_filter)
    return [rel for rel, _ in found]


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
            f"RETURN {records.projection('r', records.EDGE_READ_PROPS)} AS link, {cosine} AS cosine")


def run_sync(store: Any, plan: Plan) -> Any:
    """Run a channel plan on a ``LevelGraphStore``."""
    return store._run(plan)


async def run_async(store: Any, plan: Plan) -> Any:
    """Run a channel plan on an ``AsyncLevelGraphStore``."""
    return await store._run(plan)


def describe(hit: Any) -> dict[str, Any]:
    """Channel-specific facts of a hit, for ``node.metadata``."""
    if isinstance(hit, GraphHit):
        return {"path_energy": hit.path_energy, "path_confidence": hit.path_confidence,
                "depth": hit.depth, "start_id": hit.start_id}
    if isinstance(hit, KeywordHit):
        return {"keyword_rank": hit.rank}
    return {}
