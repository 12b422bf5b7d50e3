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
from typing import Any

from llama_consciousness.storage.level_store import (
    ACCESS_LABEL, COUNTED_TYPE, EDGE_TYPE, NODE_LABEL, USE_LABEL, Query,
)
from llama_consciousness.storage.params import Ids

Plan = Generator[Any, Any, Any]

_RECORD = f"""
UNWIND $uses AS u
MERGE (x:{USE_LABEL} {{use_id: u.id}})
ON CREATE SET x.at = u.at, x.node_ids = []
WITH x, u, [i IN u.ids WHERE NOT i IN x.node_ids] AS fresh
UNWIND fresh AS id
OPTIONAL MATCH (n:{NODE_LABEL} {{node_id: id}})
WITH x, u, id, n IS NULL AS gone, n IS NOT NULL AND n.expired_at IS NULL AS live
FOREACH (_ IN CASE WHEN live THEN [1] ELSE [] END |
  MERGE (a:{ACCESS_LABEL} {{node_id: id}})
  SET a.access_count = coalesce(a.access_count, 0) + 1, a.last_accessed_at = u.at
  MERGE (x)-[:{COUNTED_TYPE}]->(a)
  SET x.node_ids = x.node_ids + [id])
RETURN u.id, id, CASE WHEN gone THEN 'deleted' WHEN live THEN 'counted' ELSE 'superseded' END
"""

# Once per use, from what it counted (so a retry after a failure between the two queries still does it).
# The link is named through the path: see ``channels.walk_cypher`` on undirected patterns and edge indexes.
_CO_ACTIVATE = f"""
UNWIND $uses AS uid
MATCH (x:{USE_LABEL} {{use_id: uid}}) WHERE x.co_done IS NULL
SET x.co_done = true
WITH x, x.node_ids AS ids
UNWIND range(0, size(ids) - 2) AS i
UNWIND range(i + 1, size(ids) - 1) AS j
MATCH p = (:{NODE_LABEL} {{node_id: ids[i]}})-[:{EDGE_TYPE}]-(:{NODE_LABEL} {{node_id: ids[j]}})
WITH x, head(relationships(p)) AS r WHERE r.expired_at IS NULL
SET r.co_activation = coalesce(r.co_activation, 0) + 1
RETURN x.use_id, count(r)
"""


def record_uses(uses: Sequence[tuple[str, int, Sequence[str]]]) -> Plan:
    """Count each ``(use_id, at_micros, node_ids)`` (use ids distinct) in this graph; then, once per use, add
    one to the co-activation of every current link between two memories it counted.

    Returns ``({use_id: {node_id: "counted" | "superseded" | "deleted"}}, {use_id: links co-activated})``;
    a memory the use had already counted is absent from its map.  Only counted memories are remembered by
    the use: one superseded at the time is reported again (and still not counted) if recorded again.
    """
    rows = yield Query(_RECORD, {"uses": [{"id": u, "at": int(at), "ids": list(dict.fromkeys(ids))}
                                          for u, at, ids in uses]})
    outcome: dict[str, dict[str, str]] = {u: {} for u, _, _ in uses}
    for use_id, node_id, what in rows:
        outcome[use_id][node_id] = what
    result = yield Query(_CO_ACTIVATE, {"uses": [u for u, _, _ in uses]})
    linked = {r[0]: int(r[1]) for r in result}
    return outcome, linked


def memory_states(node_ids: Sequence[str]) -> Plan:
    """``{node_id: "current" | "superseded" | "deleted"}`` now (what feedback and use may count)."""
    rows = yield Query(f"UNWIND $ids AS id OPTIONAL MATCH (n:{NODE_LABEL} {{node_id: id}}) "
                       "RETURN id, CASE WHEN n IS NULL THEN 'deleted' WHEN n.expired_at IS NULL THEN 'current' "
                       "ELSE 'superseded' END", {"ids": Ids(node_ids)}, read_only=True)
    return {r[0]: r[1] for r in rows}


def access_stats(node_ids: Sequence[str]) -> Plan:
    """``{node_id: (access_count, last_accessed_at micros)}`` of the memories used at least once."""
    rows = yield Query(f"UNWIND $ids AS id MATCH (a:{ACCESS_LABEL} {{node_id: id}}) "
                       "RETURN id, a.access_count, a.last_accessed_at", {"ids": Ids(node_ids)}, read_only=True)
    return {r[0]: (int(r[1] or 0), r[2]) for r in rows}


def co_activation(node_ids: Sequence[str]) -> Plan:
    """``{node_id: summed co-activation of its links to the others of node_ids}`` (zero left out)."""
    rows = yield Query(
        f"UNWIND $ids AS id MATCH p = (a:{NODE_LABEL} {{node_id: id}})-[:{EDGE_TYPE}]-(b:{NODE_LABEL}) "
        "WITH id, b, head(relationships(p)) AS r "
        "WHERE b.node_id IN $ids AND r.co_activation > 0 AND r.expired_at IS NULL "
        "RETURN id, sum(r.co_activation)",
        {"ids": Ids(node_ids)}, read_only=True)
    return {r[0]: int(r[1]) for r in rows}


def uses_of(node_id: str, limit: int = 50) -> Plan:
    """The latest uses that counted ``node_id``: ``[(use_id, at micros)]``, newest first (read through the
    memory's ``Access`` node, not by scanning every use)."""
    rows = yield Query(f"MATCH (a:{ACCESS_LABEL} {{node_id: $id}})<-[:{COUNTED_TYPE}]-(x:{USE_LABEL}) "
                       "RETURN x.use_id, x.at ORDER BY x.at DESC LIMIT $limit", {"id": node_id, "limit": int(limit)},
                       read_only=True)
    return [(r[0], r[1]) for r in rows]


PRUNE_PAGE = 10_000
"""Uses deleted per query when pruning (a long-idle graph catches up in several)."""


def prune_uses(before_micros: int) -> Plan:
    """Delete the uses recorded before ``before_micros`` (with their COUNTED links); the number deleted.

    Only the bookkeeping goes: access counts and co-activation stay.  A retrieval recorded again after its
    use was pruned counts again, so the retention is also how long ``record_use`` stays idempotent.
    """
    total = 0
    while True:
        rows = yield Query(f"MATCH (x:{USE_LABEL}) WHERE x.at < $before WITH x LIMIT $page DETACH DELETE x "
                           "RETURN count(x)", {"before": int(before_micros), "page": PRUNE_PAGE})
        deleted = int(rows[0][0]) if rows else 0
        total += deleted
        if deleted < PRUNE_PAGE:
            return total
