"""A level graph as a LlamaIndex ``PropertyGraphStore``, so that stock property-graph retrievers read memories.

``memory.property_graph_store("N1", "ada")`` gives a read-only view of one level graph in LlamaIndex's
property-graph protocol: ``PropertyGraphIndex.from_existing(property_graph_store=view, ...)`` and its
``VectorContextRetriever`` (our vector index, then the links around the hits) and ``TextToCypherRetriever``
(an LLM writes Cypher against the schema this view describes; it runs as a read-only query with a timeout)
work over the memories unchanged.

Why our own view rather than ``llama-index-graph-stores-falkordb``: that store keeps its own layout
(``__Entity__`` and ``Chunk`` labels, ``id`` and ``embedding`` keys), so pointing it at our graphs would find
nothing, and making our memories carry its labels would double every write for a second schema.  A memory
is a ``ChunkNode`` here (its text is the memory's, its id the ``node_id``, its label the ``node_type``), a link
a ``Relation`` labelled with its ``relation_type``.  Writes go through ``memory.ingest``: the view refuses
them with that advice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from llama_index.core.graph_stores.types import ChunkNode, LabelledNode, PropertyGraphStore, Relation, Triplet
from llama_index.core.vector_stores.types import VectorStoreQuery

from llama_consciousness.storage.level_store import EDGE_TYPE, NODE_LABEL, Query
from llama_consciousness.storage.params import header as params_header

READ_ONLY = ("read-only view of a memory level: write through memory.ingest / memory.upsert, which validate, "
             "version and index what they store")

GET_LIMIT = 1000
"""Memories a ``get(properties=...)`` returns at most (a view, not an export: read a level with memory.level)."""

# Memory properties a ``get(properties=...)`` may match on (each by equality, as parameters).
MATCHABLE = ("node_type", "name", "resolution_state", "citizen_id", "level", "goal", "mindstate")

_SCHEMA = f"""Node label: {NODE_LABEL} (one per memory). Properties: node_id (string, unique), name (string),
description (string: the memory's text), node_type (string: Memory, Belief, Task, Decision, Person, ...),
level (N1, N2 or N3), citizen_id (string), energy (float 0-1), confidence (float 0-1), resolution_state
(resolved, in_progress, blocked, abandoned, ...), goal (string), mindstate (string), valid_at, invalid_at,
created_at, expired_at (seconds since 1970; expired_at IS NULL for what is believed now), superseded_by
(string node_id), is_entity (boolean: a name mentioned by memories).
Relationship type: {EDGE_TYPE}, from a memory to a memory. Properties: relation_type (string: FOLLOWS,
MENTIONS, SUPERSEDES, ENABLES, BLOCKS, RELATES_TO, ...), energy (float), confidence (float), goal (string),
valid_at, expired_at.
Example: MATCH (m:{NODE_LABEL})-[r:{EDGE_TYPE}]->(t:{NODE_LABEL}) WHERE r.relation_type = 'ENABLES'
AND m.expired_at IS NULL RETURN m.name, t.name"""


class MemoryPropertyGraphStore(PropertyGraphStore):
    """One level graph (for N1, one citizen's) of a ``ConsciousnessMemory`` as a read-only
    ``PropertyGraphStore`` (see the module doc).  ``temporal_mode`` decides what vector queries see
    ("current" by default: what is believed now)."""

    supports_structured_queries: bool = True
    supports_vector_queries: bool = True

    def __init__(self, memory: Any, level: str, citizen_id: str | None = None, *,
                 temporal_mode: str = "current") -> None:
        from llama_consciousness.schema.common import check_temporal_mode

        check_temporal_mode(temporal_mode)
        self.memory = memory
        self.level = level
        self.citizen_id = citizen_id
        self.temporal_mode = temporal_mode
        self._store = memory.level(level, citizen_id)  # validates the level and the citizen

    @property
    def client(self) -> Any:
        return self._store

    # -- reads ------------------------------------------------------------------

    def get(self, properties: dict | None = None, ids: list[str] | None = None) -> list[LabelledNode]:
        """Memories by id and/or by equal properties (of ``MATCHABLE``); by properties alone, at most
        ``GET_LIMIT`` of them."""
        if ids is not None and not ids:
            return []
        clauses, params = [], {}
        for i, (key, value) in enumerate((properties or {}).items()):
            if key not in MATCHABLE:
                raise ValueError(f"cannot match memories on {key!r}; one of: {', '.join(MATCHABLE)}")
            clauses.append(f"n.{key} = $p{i}")
            params[f"p{i}"] = value
        if ids is not None:
            found = _kept(self._store.get_nodes(list(ids)))
            return [self._chunk(n) for n in found if all(getattr(n, k) == v for k, v in (properties or {}).items())]
        if not clauses:
            raise ValueError("get() needs ids or properties: a whole level is read with memory.level(...)")
        rows = self._store.run(_ids_where(" AND ".join(clauses), params))
        return [self._chunk(n) for n in _kept(self._store.get_nodes(rows))]

    def get_triplets(self, entity_names: list[str] | None = None, relation_names: list[str] | None = None,
                     properties: dict | None = None, ids: list[str] | None = None) -> list[Triplet]:
        """Links from or to the memories named by ``ids`` (or ``entity_names``, read as ids), of the
        ``relation_names`` types when given."""
        wanted = list(ids or []) + list(entity_names or [])
        if not wanted:
            if properties:
                wanted = [n.id for n in self.get(properties=properties)]
            if not wanted:
                return []
        return self._triplets(wanted, relation_names, limit=None)

    def get_rel_map(self, graph_nodes: list[LabelledNode], depth: int = 2, limit: int = 30,
                    ignore_rels: list[str] | None = None) -> list[Triplet]:
        """The links around ``graph_nodes``, out to ``depth`` hops, at most ``limit`` of them."""
        frontier = [n.id for n in graph_nodes]
        seen_nodes = set(frontier)
        out: list[Triplet] = []
        seen_links: set[tuple[str, str, str]] = set()
        for _ in range(max(depth, 1)):
            if not frontier or len(out) >= limit:
                break
            found = self._triplets(frontier, None, limit=limit - len(out), ignore=set(ignore_rels or ()))
            frontier = []
            for source, rel, target in found:
                key = (rel.source_id, rel.label, rel.target_id)
                if key in seen_links:
                    continue
                seen_links.add(key)
                out.append((source, rel, target))
                for node in (source, target):
                    if node.id not in seen_nodes:
                        seen_nodes.add(node.id)
                        frontier.append(node.id)
        return out[:limit]

    def vector_query(self, query: VectorStoreQuery, **kwargs: Any) -> tuple[list[LabelledNode], list[float]]:
        """The memories nearest to the query embedding (or its text), through the level's vector index."""
        if query.filters is not None and query.filters.filters:
            raise ValueError("metadata filters are not supported here: use RetrievalIntention's filters with "
                             "memory.retriever(...)")
        vector = query.query_embedding if query.query_embedding is not None else query.query_str
        if vector is None:
            raise ValueError("a vector query needs query_embedding or query_str")
        hits = self.memory.vector_search(vector, self.level, self.citizen_id, k=int(query.similarity_top_k or 10),
                                         temporal_mode=self.temporal_mode)
        hits = _kept(hits)
        return [self._chunk(h) for h in hits], [float(h.relevance_score or 0.0) for h in hits]

    def structured_query(self, query: str, param_map: dict[str, Any] | None = None) -> Any:
        """Run Cypher on the level graph as a read-only query (with the store's timeout); rows as dicts when
        the columns are named, else as lists.  A write is refused by the server."""
        from llama_consciousness.storage import replies

        graph = self._store.graph
        text = params_header(param_map) + query  # the server's own way to pass parameters
        raw = graph.execute_command(*replies.command(graph, text, True, self._store.timeout_ms))
        rows = [[_plain(v) for v in row] for row in replies.result_rows(graph, raw)]
        header = [h[1] if isinstance(h, (list, tuple)) else h for h in (raw[0] if len(raw) >= 3 else [])]
        return [dict(zip(header, row)) for row in rows] if header else rows

    def get_schema(self, refresh: bool = False) -> str:
        return _SCHEMA

    # -- async: the same reads, off the event loop --------------------------------

    async def aget(self, properties: dict | None = None, ids: list[str] | None = None) -> list[LabelledNode]:
        return await asyncio.to_thread(self.get, properties, ids)

    async def aget_triplets(self, entity_names: list[str] | None = None, relation_names: list[str] | None = None,
                            properties: dict | None = None, ids: list[str] | None = None) -> list[Triplet]:
        return await asyncio.to_thread(self.get_triplets, entity_names, relation_names, properties, ids)

    async def aget_rel_map(self, graph_nodes: list[LabelledNode], depth: int = 2, limit: int = 30,
                           ignore_rels: list[str] | None = None) -> list[Triplet]:
        return await asyncio.to_thread(self.get_rel_map, graph_nodes, depth, limit, ignore_rels)

    async def avector_query(self, query: VectorStoreQuery, **kwargs: Any) -> tuple[list[LabelledNode], list[float]]:
        return await asyncio.to_thread(self.vector_query, query, **kwargs)

    async def astructured_query(self, query: str, param_map: dict[str, Any] | None = None) -> Any:
        return await asyncio.to_thread(self.structured_query, query, param_map)

    # -- writes: refused ----------------------------------------------------------

    def upsert_nodes(self, nodes: Sequence[LabelledNode]) -> None:
        raise NotImplementedError(READ_ONLY)

    def upsert_relations(self, relations: list[Relation]) -> None:
        raise NotImplementedError(READ_ONLY)

    def delete(self, entity_names: list[str] | None = None, relation_names: list[str] | None = None,
               properties: dict | None = None, ids: list[str] | None = None) -> None:
        raise NotImplementedError(READ_ONLY)

    # -- helpers ------------------------------------------------------------------

    def _chunk(self, memory: Any) -> ChunkNode:
        text = (memory.description or "").strip() or memory.name
        properties = {"name": memory.name, "node_type": memory.node_type, "energy": memory.energy,
                      "confidence": memory.confidence, "resolution_state": memory.resolution_state,
                      "valid_at": memory.valid_at.isoformat() if memory.valid_at else None,
                      "current": memory.expired_at is None}
        return ChunkNode(text=text, id_=memory.node_id, label=memory.node_type,
                         properties={k: v for k, v in properties.items() if v is not None})

    def _triplets(self, ids: list[str], relation_names: list[str] | None, limit: int | None,
                  ignore: set[str] = frozenset()) -> list[Triplet]:  # type: ignore[assignment]
        rels = [r for r in self._store.get_relationships(ids)
                if (relation_names is None or r.relation_type in relation_names) and r.relation_type not in ignore]
        rels.sort(key=lambda r: (-r.energy, r.source_id, r.relation_type, r.target_id))
        if limit is not None:
            rels = rels[:limit]
        ends = {i for r in rels for i in (r.source_id, r.target_id)}
        nodes = {n.node_id: self._chunk(n) for n in _kept(self._store.get_nodes(sorted(ends)))}
        out: list[Triplet] = []
        for r in rels:
            if r.source_id in nodes and r.target_id in nodes:
                relation = Relation(label=r.relation_type, source_id=r.source_id, target_id=r.target_id,
                                    properties={"energy": r.energy, "confidence": r.confidence, "goal": r.goal})
                out.append((nodes[r.source_id], relation, nodes[r.target_id]))
        return out


def _kept(memories: Sequence[Any]) -> list[Any]:
    """The memories this view shows: not those forgotten (``memory.forget``), whatever the temporal mode, nor
    their links; a superseded one stays, marked ``current: False``."""
    return [m for m in memories if m.forgotten_at is None]


def _plain(value: Any) -> Any:
    """A returned node or link as its properties (without the vector), so that an LLM reads text, not
    ``<falkordb.node.Node object>``; lists and maps element by element."""
    props = getattr(value, "properties", None)
    if isinstance(props, dict):
        return {k: _plain(v) for k, v in props.items() if k not in ("embedding", "content_hash")}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _ids_where(where: str, params: dict[str, Any]) -> Any:
    rows = yield Query(f"MATCH (n:{NODE_LABEL}) WHERE {where} RETURN n.node_id LIMIT {GET_LIMIT}", params,
                       read_only=True)
    return [r[0] for r in rows]
