"""Looking into a memory: what the ``inspect`` command and the ``ui`` page show, as plain JSON-ready data.

* ``overview``: the shared levels and every citizen, with their counts and current state;
* ``memory_history``: one memory with all its versions (older ones it replaced and newer ones that replaced
  it), why each was superseded, its links either way, the dissonances among its versions, its use;
* ``state_history``: a citizen's state versions.

Read-only, and values only ever as query parameters.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from llama_consciousness.levels import check_level
from llama_consciousness.schema import MemoryNode
from llama_consciousness.scoring.dissonance import detect_temporal_dissonances
from llama_consciousness.storage import records, usage
from llama_consciousness.storage.citizen_states import from_micros
from llama_consciousness.storage.level_store import EDGE_TYPE, NODE_LABEL, Query

if TYPE_CHECKING:
    from llama_consciousness.memory import ConsciousnessMemory

__all__ = ["find_memories", "memory_history", "overview", "state_history"]

MAX_VERSIONS = 200
"""A chain longer than this is cut (newest kept): a page, not a dump."""
MAX_LINKS = 200


def _json(model: Any) -> dict[str, Any]:
    return model.model_dump(mode="json", exclude={"embedding"})


def overview(memory: ConsciousnessMemory) -> dict[str, Any]:
    """The shared levels (N2, N3) and the citizens: memories, relationships and, for a citizen, its state."""
    levels = []
    for level in ("N2", "N3"):
        memories, relationships = memory.counts(level)
        levels.append({"level": level, "graph": memory.plans(level).graph, "memories": memories,
                       "relationships": relationships})
    citizens = []
    for citizen in memory.citizens():
        memories, relationships = memory.counts("N1", citizen)
        state = memory.citizen_state(citizen)
        citizens.append({"citizen": citizen, "memories": memories, "relationships": relationships,
                         "state": _json(state) if state else None})
    return {"levels": levels, "citizens": citizens}


def _base_of(node_id: str) -> Any:
    rows = yield Query(f"MATCH (n:{NODE_LABEL} {{node_id: $id}}) RETURN n.base_id", {"id": node_id}, read_only=True)
    return rows[0][0] if rows else None


def _links(node_id: str, limit: int) -> Any:
    rows = yield Query(
        f"MATCH (n:{NODE_LABEL} {{node_id: $id}})-[r:{EDGE_TYPE}]-(m:{NODE_LABEL}) "
        f"RETURN {records.edge_projection('r')}, m.node_id, m.name, startNode(r) = n, coalesce(r.co_activation, 0) "
        "ORDER BY r.created_at, m.node_id LIMIT $limit", {"id": node_id, "limit": int(limit)}, read_only=True)
    return [(records.edge_from_props(r[0]), r[1], r[2], bool(r[3]), int(r[4])) for r in rows]


def _chain(memory: ConsciousnessMemory, level: str, citizen_id: str | None, node: MemoryNode) -> list[MemoryNode]:
    """Every version linked to ``node``: same base identity, and the supersedes / superseded_by chain."""
    store = memory.level(level, citizen_id)
    found: dict[str, MemoryNode] = {node.node_id: node}
    base = store.run(_base_of(node.node_id))
    if base is not None:
        for version, _ in store.run(store.plans.versions([base])):
            found.setdefault(version.node_id, version)
    frontier = list(found.values())
    while frontier and len(found) < MAX_VERSIONS:
        wanted = {i for n in frontier for i in (n.supersedes, n.superseded_by, n.possibly_superseded_by)
                  if i and i not in found}
        frontier = memory.get_nodes(sorted(wanted), level, citizen_id) if wanted else []
        for n in frontier:
            found.setdefault(n.node_id, n)
    return sorted(found.values(), key=lambda n: (n.created_at, n.node_id))[-MAX_VERSIONS:]


def _why(version: MemoryNode, newer: dict[str, MemoryNode]) -> dict[str, Any] | None:
    """Why ``version`` stopped being current (or may have), from what the store recorded."""
    by = version.superseded_by or version.possibly_superseded_by
    if by is None and version.expired_at is None:
        return None
    replacement = newer.get(by) if by else None
    return {
        "superseded_by": version.superseded_by, "possibly_superseded_by": version.possibly_superseded_by,
        "expired_at": version.expired_at.isoformat() if version.expired_at else None,
        "invalidation_reason": version.invalidation_reason,
        "reason": replacement.supersede_reason if replacement else None,
        "source": version.supersession_source, "confidence": version.supersession_confidence,
    }


def memory_history(memory: ConsciousnessMemory, node_id: str, level: str, citizen_id: str | None = None,
                   *, max_links: int = MAX_LINKS) -> dict[str, Any]:
    """One memory with its versions, why each was superseded, its links, dissonances and use."""
    check_level(level)
    if not isinstance(node_id, str) or not node_id:
        raise ValueError("node_id must be a non-empty string")
    node = memory.get_node(node_id, level, citizen_id)
    if node is None:
        where = f"{level}" + (f" of citizen {citizen_id!r}" if citizen_id else "")
        raise LookupError(f"no memory {node_id!r} in {where}")
    versions = _chain(memory, level, citizen_id, node)
    by_id = {v.node_id: v for v in versions}
    store = memory.level(level, citizen_id)
    links = store.run(_links(node_id, max_links))
    stats = store.run(usage.access_stats([v.node_id for v in versions]))
    uses = store.run(usage.uses_of(node_id))
    return {
        "level": level, "citizen_id": citizen_id, "node_id": node_id,
        "memory": _json(node),
        "versions": [{**_json(v), "current": v.expired_at is None, "why_superseded": _why(v, by_id),
                      "access_count": stats.get(v.node_id, (0, None))[0],
                      "last_accessed_at": _iso(stats.get(v.node_id, (0, None))[1])} for v in versions],
        "links": [{"direction": "outgoing" if out else "incoming", "other_id": other, "other_name": name,
                   "co_activation": co, **_json(rel)} for rel, other, name, out, co in links],
        "dissonances": [d.model_dump(mode="json") for d in detect_temporal_dissonances(versions, "full_history")],
        "uses": [{"use_id": u, "at": _iso(at)} for u, at in uses],
    }


def _iso(micros: int | None) -> str | None:
    at = from_micros(micros)
    return at.isoformat() if at else None


def erasures(memory: ConsciousnessMemory, citizen_id: str | None = None) -> list[dict[str, Any]]:
    """The receipts of the erasures made in this data directory, oldest first (citizens appear as digests:
    ``citizen_id`` finds those of one citizen).  Empty for a memory on servers given by URL."""
    from llama_consciousness.erasing import kept_receipts

    return kept_receipts(memory, citizen_id)


def state_history(memory: ConsciousnessMemory, citizen_id: str) -> list[dict[str, Any]]:
    """A citizen's state versions in valid-time order, corrected ones included."""
    return [_json(s) for s in memory.citizen_state_history(citizen_id)]


def find_memories(memory: ConsciousnessMemory, text: str, level: str, citizen_id: str | None = None,
                  limit: int = 20) -> list[dict[str, Any]]:
    """Memories whose name or description contains ``text`` (case-insensitive), newest first: for picking one."""
    check_level(level)
    rows = memory.level(level, citizen_id).run(_find(text, limit))
    return [{"node_id": r[0], "name": r[1], "description": r[2], "current": r[3]} for r in rows]


def _find(text: str, limit: int) -> Any:
    rows = yield Query(f"MATCH (n:{NODE_LABEL}) WHERE toLower(n.name) CONTAINS $t OR toLower(n.description) "
                       "CONTAINS $t RETURN n.node_id, n.name, n.description, n.expired_at IS NULL "
                       "ORDER BY n.created_at DESC LIMIT $limit", {"t": text.lower(), "limit": int(limit)},
                       read_only=True)
    return [tuple(r) for r in rows]


def as_rows(items: Sequence[dict[str, Any]], keys: Sequence[str]) -> list[tuple[Any, ...]]:
    """Dicts as table rows of ``keys`` (missing: "-")."""
    return [tuple("-" if item.get(k) is None else item.get(k) for k in keys) for item in items]
