"""What retrieval use leaves in a level graph: access counts, and co-activation on links (spec 004).

A memory's ``access_count`` and ``last_accessed_at`` live on an ``Access``
node keyed by its ``node_id``, not on the memory: FalkorDB re-inserts a
node's vector into the HNSW index whenever any of its properties is set, and
every re-insertion leaves an orphan entry that crowds out live ones (20K
``SET``s on indexed memories cost as much as writing them, and a k=200 KNN
then returned 96 distinct memories).  Links carry no vector, so their
``co_activation`` count is set on the link itself.

Each use (one retrieval, ``use_id``) has a ``Use`` node listing the memories
it counted: recording it again counts none of them twice.  Memories that were
superseded or deleted since the retrieval are not counted, and are reported.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from itertools import combinations
from typing import Any

from llama_consciousness.storage.level_store import ACCESS_LABEL, EDGE_TYPE, NODE_LABEL, USE_LABEL, Query
from llama_consciousness.storage.params import Ids

Plan = Generator[Any, Any, Any]

_RECORD = f"""
UNWIND $uses AS u
MERGE (x:{USE_LABEL} {{use_id: u.id}})
ON CREATE SET x.at = u.at, x.node_ids = []
WITH x, u, [i IN u.ids WHERE NOT i IN x.node_ids] AS fresh
SET x.node_ids = x.node_ids + fresh
WITH u, fresh
UNWIND fresh AS id
OPTIONAL MATCH (n:{NODE_LABEL} {{node_id: id}})
WITH u, id, n IS NULL AS gone, n IS NOT NULL AND n.expired_at IS NULL AS live
FOREACH (_ IN CASE WHEN live THEN [1] ELSE [] END |
  MERGE (a:{ACCESS_LABEL} {{node_id: id}})
  SET a.access_count = coalesce(a.access_count, 0) + 1, a.last_accessed_at = u.at)
RETURN u.id, id, CASE WHEN gone THEN 'deleted' WHEN live THEN 'counted' ELSE 'superseded' END
"""

_CO_ACTIVATE = f"""
UNWIND $pairs AS p
MATCH (a:{NODE_LABEL} {{node_id: p[0]}})-[r:{EDGE_TYPE}]-(b:{NODE_LABEL} {{node_id: p[1]}})
SET r.co_activation = coalesce(r.co_activation, 0) + 1
RETURN p[2], count(r)
"""


def record_uses(uses: Sequence[tuple[str, int, Sequence[str]]]) -> Plan:
    """Count each ``(use_id, at_micros, node_ids)`` (use ids distinct) in this graph; then add one to the
    co-activation of every link between two memories a use counted.

    Returns ``({use_id: {node_id: "counted" | "superseded" | "deleted"}}, {use_id: links co-activated})``;
    a memory the use had already counted is absent from its map.
    """
    rows = yield Query(_RECORD, {"uses": [{"id": u, "at": int(at), "ids": list(dict.fromkeys(ids))}
                                          for u, at, ids in uses]})
    outcome: dict[str, dict[str, str]] = {u: {} for u, _, _ in uses}
    for use_id, node_id, what in rows:
        outcome[use_id][node_id] = what
    pairs = [[a, b, use_id] for use_id, states in outcome.items()
             for a, b in combinations(sorted(i for i, w in states.items() if w == "counted"), 2)]
    linked: dict[str, int] = {}
    if pairs:
        result = yield Query(_CO_ACTIVATE, {"pairs": pairs})
        linked = {r[0]: int(r[1]) for r in result}
    return outcome, linked


def access_stats(node_ids: Sequence[str]) -> Plan:
    """``{node_id: (access_count, last_accessed_at micros)}`` of the memories used at least once."""
    rows = yield Query(f"UNWIND $ids AS id MATCH (a:{ACCESS_LABEL} {{node_id: id}}) "
                       "RETURN id, a.access_count, a.last_accessed_at", {"ids": Ids(node_ids)}, read_only=True)
    return {r[0]: (int(r[1] or 0), r[2]) for r in rows}


def co_activation(node_ids: Sequence[str]) -> Plan:
    """``{node_id: summed co-activation of its links to the others of node_ids}`` (zero left out)."""
    rows = yield Query(
        f"UNWIND $ids AS id MATCH (a:{NODE_LABEL} {{node_id: id}})-[r:{EDGE_TYPE}]-(b:{NODE_LABEL}) "
        "WHERE b.node_id IN $ids AND r.co_activation > 0 RETURN id, sum(r.co_activation)",
        {"ids": Ids(node_ids)}, read_only=True)
    return {r[0]: int(r[1]) for r in rows}


def uses_of(node_id: str, limit: int = 50) -> Plan:
    """The latest uses that counted ``node_id``: ``[(use_id, at micros)]``, newest first."""
    rows = yield Query(f"MATCH (x:{USE_LABEL}) WHERE $id IN x.node_ids RETURN x.use_id, x.at "
                       "ORDER BY x.at DESC LIMIT $limit", {"id": node_id, "limit": int(limit)}, read_only=True)
    return [(r[0], r[1]) for r in rows]
