"""One memory level in one FalkorDB graph.

Memories are ``(:Memory)`` nodes keyed by ``node_id``, relationships ``[:LINK]`` edges keyed by
``edge_id``; their spec types are properties (``node_type``, ``relation_type``) because labels cannot
be query parameters and no user text is ever formatted into a query.  The embedding sits on the node
under an HNSW index (cosine).  Each operation is a generator that yields its queries and receives their
results (a "sans-I/O" plan): the store runs it query by query, ``storage.interleaved`` several at once.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from redis.exceptions import ResponseError

from llama_consciousness.errors import EmbeddingDimensionError, StorageError, VectorBackendError
from llama_consciousness.schema import ConsciousnessNode, ConsciousnessRelationship, MemoryNode
from llama_consciousness.schema.memory import retrieved_node
from llama_consciousness.storage import knn_gate, records, replies
from llama_consciousness.storage.records import PreparedEdge
from llama_consciousness.storage.params import Ids, Rows
from llama_consciousness.storage.params import header as params_header
from llama_consciousness.storage.filters import MemoryFilter
from llama_consciousness.temporal import TemporalWindow, cypher_time, from_cypher_time

logger = logging.getLogger(__name__)

NODE_LABEL = "Memory"
EDGE_TYPE = "LINK"
VECTOR_PROPERTY = "embedding"
CHANGES_LABEL = "Changes"
"""The graph's change log: one node (``epoch``, ``seq``); each write stamps the memories it wrote with the
next ``seq`` numbers (``change_seq``), so that an index outside the graph (``keyword_index``) can catch up on
what anyone wrote.  ``epoch`` tells a graph from a later one of the same name."""

# Range indexes the spec asks for, plus the ones our own queries filter on.
NODE_RANGE_INDEXES = (
    "node_id", "name", "valid_at", "invalid_at", "created_at", "expired_at",
    "node_type", "resolution_state", "goal", "energy", "base_id",
    # state-based retrieval filters by emotion names and concepts (arrays)
    "emotion_canonical", "concepts",
    # the keyword index catches up by ranges of the change log
    "change_seq",
)
EDGE_RANGE_INDEXES = ("edge_id", "relation_type", "valid_at", "invalid_at", "created_at", "expired_at")

# What the living memory keeps beside the memories (``storage.usage``, ``storage.citizen_states``): never on
# a memory itself, since any property set on a node with a vector re-inserts its vector (an orphan each time).
ACCESS_LABEL, USE_LABEL, CITIZEN_STATE_LABEL = "Access", "Use", "CitizenState"
COUNTED_TYPE = "COUNTED"  # (:Use)-[:COUNTED]->(:Access): which uses counted a memory
LIVING_INDEXES = ((ACCESS_LABEL, ("node_id",)), (USE_LABEL, ("use_id", "at")),
                  (CITIZEN_STATE_LABEL, ("valid_at", "stream_id")))
LIVING_PROPERTIES = ("access_count", "last_accessed_at", "use_id", "at", "node_ids", "co_activation", "co_done",
                     "version_id", "energy", "emotion_names", "emotion_values", "goal", "mindstate", "valid_at",
                     "created_at", "expired_at", "source", "reason", "stream_id")

MAX_FETCH = 10_000

# A memory that near-duplicate checks compare with: not expired, and not an
# entity node (a name, which no memory repeats).
_CURRENT_MEMORY = "n.expired_at IS NULL AND coalesce(n.is_entity, false) = false"


@dataclass(frozen=True)
class VectorIndexConfig:
    """HNSW parameters of a level's vector index, fixed when it is created: FalkorDB's default ``efRuntime``
    of 10 gives poor recall (0.18 at 10 on 50k vectors); these come from benchmarks/vector_index_params.py."""

    m: int = 16
    ef_construction: int = 200
    ef_runtime: int = 100

    def __post_init__(self) -> None:
        for name in ("m", "ef_construction", "ef_runtime"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 4096:
                raise ValueError(f"VectorIndexConfig.{name} must be an int in [1, 4096], got {value!r}")


@dataclass(frozen=True)
class Query:
    """A Cypher query for the plan's graph; values only ever in ``params``."""

    cypher: str
    params: dict[str, Any] = field(default_factory=dict)
    read_only: bool = False


@dataclass(frozen=True)
class UniqueConstraint:
    """``GRAPH.CONSTRAINT CREATE`` (a server command, not Cypher)."""

    label: str
    prop: str


@dataclass(frozen=True)
class Await:
    """Work started beside the plan (a Postgres search): the plan gets its result; other plans run meanwhile."""

    future: Future


Step = Query | UniqueConstraint | Await

GRAPH_REGISTRY = "llama_consciousness:graphs"
"""The set of level graphs the package has written (``register_graph``), so that one gone is noticed."""


GRAPH_LAYOUT = "llama_consciousness:layout"
"""Graph name -> the layout its records follow: "2" since times are integer seconds, ``LAYOUT`` since every
memory has a ``change_seq``."""
TIMES_AS_SECONDS = "2"
LAYOUT = "3"


def register_graph(db: Any, name: str) -> None:
    """Remember that ``name`` was written: from then on, its absence is an error, not an empty level."""
    db.connection.sadd(GRAPH_REGISTRY, name)
    db.connection.hset(GRAPH_LAYOUT, name, LAYOUT)


def _seconds(dt: str) -> str:
    """Cypher: seconds since 1970 of a ``localdatetime`` (days-from-civil; FalkorDB cannot subtract them)."""
    y = f"({dt}.year - CASE WHEN {dt}.month <= 2 THEN 1 ELSE 0 END)"
    return (f"(({y} / 400) * 146097 + ({y} % 400) * 365 + ({y} % 400) / 4 - ({y} % 400) / 100 "
            f"+ (153 * (({dt}.month + 9) % 12) + 2) / 5 + {dt}.day - 1 - 719468) * 86400 "
            f"+ {dt}.hour * 3600 + {dt}.minute * 60 + {dt}.second")


def migrate_layout(db: Any, names: Iterable[str]) -> None:
    """Bring graphs written by older versions to ``LAYOUT``, once per graph (marked in ``GRAPH_LAYOUT``).

    Before "2", times were ``localdatetime``, whose comparisons wrap around 2^31 seconds: rewritten as
    seconds.  Before "3", memories had no ``change_seq``: they are logged, so the keyword index finds them.
    """
    done = db.connection.hgetall(GRAPH_LAYOUT)
    for name in names:
        layout = done.get(name) or "1"
        if layout >= LAYOUT:
            continue
        graph = db.select_graph(name)
        if layout < TIMES_AS_SECONDS:
            for match, var in (("MATCH (x)", "x"), ("MATCH ()-[x]->()", "x")):
                dated = " OR ".join(f"typeOf({var}.{f}) = 'Datetime'" for f in records.TIME_FIELDS)
                sets = ", ".join(f"{var}.{f} = CASE WHEN typeOf({var}.{f}) = 'Datetime' "
                                 f"THEN {_seconds(f'{var}.{f}')} ELSE {var}.{f} END" for f in records.TIME_FIELDS)
                replies.run(graph, f"{match} WHERE {dated} SET {sets}", False)
        replies.run(graph, _LOG_UNLOGGED, False)
        db.connection.hset(GRAPH_LAYOUT, name, LAYOUT)


@dataclass
class UpsertResult:
    """What a batch upsert changed."""

    nodes_created: int = 0
    nodes_updated: int = 0
    nodes_unchanged: int = 0
    edges_created: int = 0
    edges_updated: int = 0
    edges_unchanged: int = 0
    superseded: int = 0
    possibly_superseded: int = 0
    created_ids: list[str] = field(default_factory=list)
    updated_ids: list[str] = field(default_factory=list)

    def __iadd__(self, other: UpsertResult) -> UpsertResult:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))
        return self


@dataclass(frozen=True)
class VectorHit:
    """A memory found by the vector index, with cosine similarity (1 - distance)."""

    node: MemoryNode
    similarity: float


@dataclass(frozen=True)
class Supersession:
    """An older version expired by a newer one (nothing is deleted): ``expired_at`` is the new one's
    ``created_at``; for ``reality_changed`` the old one also stops being valid at ``invalid_at``."""

    old_id: str
    new_id: str
    expired_at: datetime
    reason: str
    invalid_at: datetime | None = None
    source: str = "explicit"
    confidence: float | None = None
    # False: a judge is unsure; the old memory is only marked ``possibly_superseded_by`` and nothing expires.
    confirmed: bool = True

    def row(self) -> dict[str, Any]:
        return {
            "old_id": self.old_id,
            "new_id": self.new_id,
            "expired_at": cypher_time(self.expired_at),
            "reason": self.reason,
            "invalid_at": cypher_time(self.invalid_at) if self.invalid_at and self.reason == "reality_changed" else None,
            "source": self.source,
            "confidence": self.confidence,
        }


Plan = Generator[Step, Any, Any]


# Schema made by several writers at once: the server refuses all but one with "Attribute 'x' is
# already indexed" (x: the first attribute covered) or "Constraint already exists".  A refused CREATE
# INDEX changes nothing, so the schema is read again: the refused attribute must now be there (else
# the error is raised), and whatever is still missing is created.

_CREATED_ELSEWHERE = re.compile(r"Attribute '(?P<attribute>[^']*)' is already indexed|Constraint already exists")

# Bounds a livelock with a writer that keeps dropping what we create.
SCHEMA_ROUNDS = 16


@dataclass(frozen=True)
class SchemaItem:
    """A piece of schema a graph lacks: its kind ("NODE RANGE Memory", ...), the attributes it covers, the step creating it."""

    kind: str
    attributes: tuple[str, ...]
    step: Query | UniqueConstraint


def create_missing(missing: Callable[[], Plan]) -> Plan:
    """Create what the plan ``missing()`` finds missing, safe against other writers (see above); the items
    created.  Needs a runner that throws a step's error into the plan (``LevelGraphStore.run``)."""
    created: list[SchemaItem] = []
    refused: tuple[SchemaItem, re.Match[str], BaseException] | None = None
    for _ in range(SCHEMA_ROUNDS):
        items = yield from missing()
        if refused is not None:
            item, answer, exc = refused
            attribute = answer.group("attribute")
            if any(i.kind == item.kind and (attribute is None or attribute in i.attributes) for i in items):
                raise exc  # "already there", yet it is not: not a race, a real error
        refused = None
        for item in items:
            try:
                yield item.step
            except (StorageError, ResponseError) as exc:
                cause = exc if isinstance(exc, ResponseError) else exc.__cause__
                answer = isinstance(cause, ResponseError) and _CREATED_ELSEWHERE.fullmatch(str(cause).strip())
                if not answer:
                    raise
                logger.debug("%s on %s: created meanwhile by another writer (%s)", item.kind, item.attributes, exc)
                refused = (item, answer, exc)
                break
            created.append(item)
        if refused is None:
            return created
    assert refused is not None
    raise refused[2]


_NODE_PROJECTION = records.node_projection("n")
_EDGE_PROJECTION = records.edge_projection("r")


def _at(wire: tuple[str, ...], name: str) -> str:
    """The Cypher for field ``name`` of a positional wire row (``records.NODE_WIRE``)."""
    return f"row[{wire.index(name)}]"


def _time_sets(var: str, wire: tuple[str, ...], exists: str, superseded: str | None = None) -> str:
    """SET items for the four times: stored times the caller left to defaults are kept (``keep_times``); with
    ``superseded``, a newer version's expiry is kept, so re-ingesting an old version never revives it."""
    items = []
    for name in records.TIME_FIELDS:
        given = _at(wire, name)
        fresh = given
        if name in ("created_at", "valid_at"):
            fresh = f"CASE WHEN {exists} AND '{name}' IN {_at(wire, 'keep_times')} THEN {var}.{name} ELSE {fresh} END"
        elif superseded:
            fresh = f"CASE WHEN {superseded} AND {given} IS NULL THEN old_{name} ELSE {fresh} END"
        items.append(f"{var}.{name} = {fresh}")
    return ", ".join(items)


def _prop_sets(var: str, wire: tuple[str, ...], props: tuple[str, ...]) -> str:
    """``var.p = row[i]`` for each property (a null removes a stored value, as ``+=`` would)."""
    return ", ".join(f"{var}.{p} = {_at(wire, p)}" for p in props)


_N = records.NODE_WIRE
_E = records.EDGE_WIRE

def _prop_map(wire: tuple[str, ...], props: Iterable[str], **more: str) -> str:
    """A property map of a CREATE: ``{p: row[i], ...}`` (a null leaves the property out)."""
    return "{" + ", ".join([*(f"{p}: {_at(wire, p)}" for p in props), *(f"{k}: {v}" for k, v in more.items())]) + "}"


# Each written memory takes a number of the change log (``change_seq``, in the same SET as the rest of it), in
# one transaction with the write; writes to a graph run one at a time, so the numbers follow the order in which
# writes became visible.  Numbers of rows left unchanged are skipped (the log only needs them to grow).
#
# A new memory is CREATEd with all its properties at once; only a stored one that changed is SET.  (A MERGE
# followed by a SET indexes each new memory twice: the first entry becomes garbage of the graph's range
# index, and every index with 100 such entries makes the server fork to collect them.  With thousands of
# graphs that meant thousands of forks of a server of gigabytes: writes slowed from 50 to 200 ms per citizen
# between 100 and 2,000 citizens of 100 memories; ``benchmarks/many_citizens.py``.)
_UPSERT_NODES = f"""
CALL {{
MERGE (log:{CHANGES_LABEL} {{key: 0}}) ON CREATE SET log.epoch = randomUUID(), log.seq = 0
WITH log, log.seq AS base SET log.seq = base + size($nodes)
RETURN base
}}
CALL {{
WITH base
UNWIND range(0, size($nodes) - 1) AS i
WITH base, i, $nodes[i] AS row
OPTIONAL MATCH (old:{NODE_LABEL} {{node_id: {_at(_N, "node_id")}}})
WITH base, i, row WHERE old IS NULL
CREATE (n:{NODE_LABEL} {_prop_map(_N, records.NODE_PROPS + records.TIME_FIELDS,
                                  **{VECTOR_PROPERTY: f"vecf32({_at(_N, 'embedding')})",
                                     "content_hash": _at(_N, "hash"), "change_seq": "base + i + 1"})})
RETURN collect({_at(_N, "node_id")}) AS created_ids
}}
CALL {{
WITH base
UNWIND range(0, size($nodes) - 1) AS i
WITH base, i, $nodes[i] AS row
MATCH (n:{NODE_LABEL} {{node_id: {_at(_N, "node_id")}}})
WITH base, i, n, row, n.content_hash AS old_hash WHERE old_hash IS NULL OR old_hash <> {_at(_N, "hash")}
WITH base, i, n, row, old_hash, n.superseded_by IS NOT NULL OR n.forgotten_at IS NOT NULL AS sup,
     n.expired_at AS old_expired_at, n.invalid_at AS old_invalid_at, n.invalidation_reason AS old_reason
REMOVE n.{VECTOR_PROPERTY}
SET {_prop_sets("n", _N, tuple(p for p in records.NODE_PROPS if p not in ("node_id", "invalidation_reason")))},
    {_time_sets("n", _N, "old_hash IS NOT NULL", "sup")},
    n.invalidation_reason = CASE WHEN sup AND {_at(_N, "invalidation_reason")} IS NULL
                                 THEN old_reason ELSE {_at(_N, "invalidation_reason")} END,
    n.{VECTOR_PROPERTY} = vecf32({_at(_N, "embedding")}), n.content_hash = {_at(_N, "hash")},
    n.{records.LEGACY_COPY} = NULL, n.change_seq = base + i + 1
RETURN collect({_at(_N, "node_id")}) AS updated_ids
}}
"""

_LOG_UNLOGGED = f"""
MATCH (c:{NODE_LABEL}) WHERE c.change_seq IS NULL WITH collect(c) AS cs
MERGE (log:{CHANGES_LABEL} {{key: 0}}) ON CREATE SET log.epoch = randomUUID(), log.seq = 0
WITH log, cs, log.seq AS base SET log.seq = base + size(cs)
WITH cs, base UNWIND range(0, size(cs) - 1) AS i
WITH cs[i] AS c, base + i + 1 AS seq SET c.change_seq = seq
"""

# ``possibly_superseded_by`` is cleared in a SET of its own: clearing a property in the SET that adds others
# lost those in FalkorDB 4 (seen with ``memory.unsupersede``).
_SUPERSEDE = f"""
CALL {{
UNWIND $expire AS row
MATCH (o:{NODE_LABEL} {{node_id: row.old_id}})
WITH o, row, o.expired_at IS NULL AS live
WHERE (live OR o.superseded_by IS NULL) AND coalesce(o.unsuperseded_from <> row.new_id, true)
SET o.superseded_by = coalesce(o.superseded_by, row.new_id),
    o.expired_at = CASE WHEN live THEN row.expired_at ELSE o.expired_at END,
    o.invalid_at = CASE WHEN live AND row.invalid_at IS NOT NULL AND o.invalid_at IS NULL
                        THEN row.invalid_at ELSE o.invalid_at END,
    o.invalidation_reason = CASE WHEN live THEN row.reason ELSE o.invalidation_reason END,
    o.supersession_source = CASE WHEN live THEN row.source ELSE o.supersession_source END,
    o.supersession_confidence = CASE WHEN live THEN row.confidence ELSE o.supersession_confidence END
WITH o, live SET o.possibly_superseded_by = CASE WHEN live THEN NULL ELSE o.possibly_superseded_by END
RETURN sum(CASE WHEN live THEN 1 ELSE 0 END) AS superseded
}}
"""

# A pair a judge is unsure of: the older memory, while current, is marked; nothing expires.  A supersession
# taken back (``unsuperseded_from``) is not marked again by the same newer memory.
_POSSIBLY = f"""
CALL {{
UNWIND $possible AS row
MATCH (o:{NODE_LABEL} {{node_id: row.old_id}})
WITH o, row WHERE o.expired_at IS NULL AND coalesce(o.unsuperseded_from <> row.new_id, true)
SET o.possibly_superseded_by = row.new_id, o.supersession_source = row.source,
    o.supersession_confidence = row.confidence
RETURN count(o) AS possibly_superseded
}}
"""

_UPSERT_EDGES = f"""
CALL {{
UNWIND $edges AS row
MATCH (s:{NODE_LABEL} {{node_id: {_at(_E, "source_id")}}}), (t:{NODE_LABEL} {{node_id: {_at(_E, "target_id")}}})
OPTIONAL MATCH (s)-[old:{EDGE_TYPE} {{edge_id: {_at(_E, "edge_id")}}}]->(t)
WITH s, t, row WHERE old IS NULL
CREATE (s)-[r:{EDGE_TYPE} {_prop_map(_E, records.EDGE_PROPS + records.TIME_FIELDS, content_hash=_at(_E, "hash"))}]->(t)
RETURN count(r) AS edges_created
}}
CALL {{
UNWIND $edges AS row
MATCH (:{NODE_LABEL} {{node_id: {_at(_E, "source_id")}}})-[r:{EDGE_TYPE} {{edge_id: {_at(_E, "edge_id")}}}]->
      (:{NODE_LABEL} {{node_id: {_at(_E, "target_id")}}})
WITH r, row, r.content_hash AS old_hash
WHERE old_hash IS NULL OR (old_hash <> {_at(_E, "hash")} AND NOT {_at(_E, "derived")})
SET {_prop_sets("r", _E, tuple(p for p in records.EDGE_PROPS if p != "edge_id"))},
    {_time_sets("r", _E, "old_hash IS NOT NULL")}, r.content_hash = {_at(_E, "hash")},
    r.{records.LEGACY_COPY} = NULL
RETURN count(r) AS edges_updated
}}
"""

_PARTS = (
    ("nodes", _UPSERT_NODES, ("created_ids", "updated_ids")),
    ("expire", _SUPERSEDE, ("superseded",)),
    ("possible", _POSSIBLY, ("possibly_superseded",)),
    ("edges", _UPSERT_EDGES, ("edges_created", "edges_updated")),
)


# Every property name the writes set, known to the graph before its first write.  Seen twice in about a
# dozen runs of the suite: eight writers' first upserts into one fresh graph, and one memory read back with
# its properties shifted by one place (level null, citizen_id "N2", felt_quality holding the confidence).
# FalkorDB keeps a property by a number it gives its name when first set, and a query plan cached while the
# names were being created is the suspect; registering every name at schema creation, once, before any
# upsert, leaves nothing to create while writers race.
_WRITTEN_PROPERTIES = frozenset(
    name for text in (_UPSERT_NODES, _LOG_UNLOGGED, _SUPERSEDE, _POSSIBLY, _UPSERT_EDGES)
    for name in re.findall(r"\b(?:n|o|r|c|log)\.([a-z_][a-z0-9_]*)\b", text)) - {VECTOR_PROPERTY} | {
    "node_id", "edge_id", "key", *LIVING_PROPERTIES}  # and those the MERGE patterns name, and the living memory's
_REGISTER_PROPERTIES = (
    f"CREATE (a:{NODE_LABEL} {{node_id: '__lc_property_keys_a'}})-[r:{EDGE_TYPE}]->"
    f"(b:{NODE_LABEL} {{node_id: '__lc_property_keys_b'}}), "
    + ", ".join(f"(l{i}:{label})" for i, (label, _) in enumerate(LIVING_INDEXES))
    + f", (l0)-[c:{COUNTED_TYPE}]->(l1) SET "
    + ", ".join(f"a.{name} = 0, r.{name} = 0" for name in sorted(_WRITTEN_PROPERTIES - {"node_id"}))
    + " DELETE c, r, a, b, " + ", ".join(f"l{i}" for i in range(len(LIVING_INDEXES))))
_WRITTEN_LABELS = frozenset({NODE_LABEL, *(label for label, _ in LIVING_INDEXES)})


def _upsert_query(present: set[str]) -> tuple[str, list[str]]:
    """Memories, expiries and relationships of a batch in ONE query, so one transaction (all or nothing).

    Each part is a ``CALL {}`` ending in an aggregation, which always yields one row, so a part that
    changes nothing cannot stop the next; memories come first so the rest can refer to them.
    """
    text, columns = [], []
    for key, part, names in _PARTS:
        if key in present:
            text.append(part)
            columns += names
    return "\n".join(text) + "RETURN " + ", ".join(columns), columns


def _dedupe(items: Iterable[Any], key: str) -> list[Any]:
    """Last write wins for repeated ids inside one batch (as a rerun would)."""
    seen: dict[str, Any] = {}
    for item in items:
        seen.pop(getattr(item, key), None)
        seen[getattr(item, key)] = item
    return list(seen.values())


def indexed(read_only: bool = True) -> Plan:
    """The graph's indexes: ``{(entity, "Label.prop"): index types}``, and the options of the memories'
    vector index (None without one)."""
    rows = yield Query("CALL db.indexes() YIELD label, properties, types, options, entitytype "
                       "RETURN label, properties, types, options, entitytype", read_only=read_only)
    have: dict[tuple[str, str], set[str]] = {}
    vector_options: dict[str, Any] | None = None
    for label, props, types, options, entity in rows:
        for prop in props:
            have.setdefault((entity, f"{label}.{prop}"), set()).update(types.get(prop) or [])
        if entity == "NODE" and label == NODE_LABEL and VECTOR_PROPERTY in props:
            vector_options = dict(options.get(VECTOR_PROPERTY) or {})
    return have, vector_options


def range_index(have: dict[tuple[str, str], set[str]], entity: str, props: Sequence[str],
                label: str | None = None) -> list[SchemaItem]:
    """The range index on those of ``props`` (constants, never user input) that ``have`` lacks, if any;
    ``entity`` is "NODE" (memories, or nodes of ``label``) or "RELATIONSHIP" (links)."""
    node = entity == "NODE"
    label = label or (NODE_LABEL if node else EDGE_TYPE)
    v, pattern = ("n", f"(n:{label})") if node else ("r", f"()-[r:{label}]-()")
    absent = tuple(p for p in props if "RANGE" not in have.get((entity, f"{label}.{p}"), set()))
    text = f"CREATE INDEX FOR {pattern} ON (" + ", ".join(f"{v}.{p}" for p in absent) + ")"
    return [SchemaItem(f"{entity} RANGE {label}", absent, Query(text))] if absent else []


def _stored_hashes(pattern: str, ids: list[str]) -> Plan:
    """``{id: content_hash}`` of the stored records ``pattern`` (binding ``x``, keyed by ``id``) finds."""
    rows = yield Query(f"UNWIND $ids AS id MATCH {pattern} RETURN id, x.content_hash", {"ids": Ids(ids)}, read_only=True)
    return dict(rows)


class LevelPlans:
    """The operations on one level graph, independent of how queries run."""

    def __init__(
        self,
        graph: str,
        level: str,
        citizen_id: str | None = None,
        *,
        dimension: int | None = None,
        index: VectorIndexConfig | None = None,
        store_vectors: bool = True,
    ) -> None:
        self.graph = graph
        self.level = level
        self.citizen_id = citizen_id
        self.dimension = dimension
        self.index = index or VectorIndexConfig()
        self.store_vectors = store_vectors
        self._vector_home_known = False  # check_vector_home has passed

    # -- schema ---------------------------------------------------------------

    def ensure_schema(self) -> Plan:
        """Create missing indexes and the node_id uniqueness constraint (see :func:`create_missing`).

        An existing vector index of another dimension is an error, not silently mixed dimensions.
        """
        yield from create_missing(self._missing_schema)

    def check_vector_home(self) -> Plan:
        """Refuse to write memories into a graph whose vectors are kept elsewhere than ``store_vectors`` says:
        they would go where its vector channel never looks.  A graph's memories all carry their vector
        (FalkorDB) or none do (Postgres), entity hubs aside (they have none: ``ConsciousnessMemory.embed_nodes``),
        so one other memory tells; a graph without one takes the backend it is written with.  Once per plans
        object (a store keeps its plans); other writes (uses, states, forgetting) touch no vector and are not
        checked."""
        if self._vector_home_known or self.dimension is None:
            return
        rows = yield Query(f"MATCH (n:{NODE_LABEL}) WHERE NOT coalesce(n.is_entity, false) WITH n LIMIT 1 "
                           f"RETURN n.{VECTOR_PROPERTY} IS NOT NULL",
                           read_only=True)
        if rows and bool(rows[0][0]) != self.store_vectors:
            where, backend = ("FalkorDB", "falkordb") if rows[0][0] else ("Postgres", "pgvector")
            raise VectorBackendError(
                f"graph {self.graph!r} keeps its vectors in {where}, where they were written: open it with "
                f"vector_backends={{{self.level!r}: {backend!r}}} (a level's vectors stay in the backend of its "
                "first write)")
        self._vector_home_known = True

    def _missing_schema(self) -> Plan:
        """What the graph still lacks, as :class:`SchemaItem` (read afresh each time)."""
        # Not read-only: GRAPH.RO_QUERY refuses a graph that does not exist yet, GRAPH.QUERY creates it.
        have, vector_options = yield from indexed(read_only=False)
        keys = yield Query("CALL db.propertyKeys() YIELD propertyKey RETURN propertyKey", read_only=True)
        known = {k[0] for k in keys}
        labels = yield Query("CALL db.labels() YIELD label RETURN label", read_only=True)
        missing = []
        if not known.issuperset(_WRITTEN_PROPERTIES) or not {r[0] for r in labels}.issuperset(_WRITTEN_LABELS):
            missing.append(SchemaItem("PROPERTY KEYS", (), Query(_REGISTER_PROPERTIES)))
        missing += range_index(have, "NODE", NODE_RANGE_INDEXES)
        missing += range_index(have, "RELATIONSHIP", EDGE_RANGE_INDEXES)
        for label, props in LIVING_INDEXES:
            if label != CITIZEN_STATE_LABEL or self.level == "N1":
                missing += range_index(have, "NODE", props, label)
        if self.store_vectors and self.dimension is not None:
            if vector_options is None:
                missing.append(SchemaItem("NODE VECTOR", (VECTOR_PROPERTY,), Query(
                    f"CREATE VECTOR INDEX FOR (n:{NODE_LABEL}) ON (n.{VECTOR_PROPERTY}) OPTIONS "
                    "{dimension: $dim, similarityFunction: 'cosine', M: $m, efConstruction: $efc, efRuntime: $efr}",
                    {"dim": self.dimension, "m": self.index.m, "efc": self.index.ef_construction,
                     "efr": self.index.ef_runtime},
                )))
            elif int(vector_options.get("dimension", -1)) != self.dimension:
                raise EmbeddingDimensionError(
                    f"graph {self.graph!r} has a vector index of dimension {vector_options.get('dimension')}, "
                    f"but the embedding model gives {self.dimension}; use the model the memories were "
                    "written with, or another data directory"
                )
        constraints = yield Query("CALL db.constraints() YIELD label, properties RETURN label, properties",
                                  read_only=True)
        if not any(label == NODE_LABEL and list(props) == ["node_id"] for label, props in constraints):
            missing.append(SchemaItem("NODE UNIQUE", ("node_id",), UniqueConstraint(NODE_LABEL, "node_id")))
        return missing

    def wait_operational(self, timeout: float = 30.0) -> Plan:
        """Indexes are built in the background; queries must wait for them."""
        deadline = time.monotonic() + timeout
        while True:
            rows = yield Query(INDEX_STATUS, read_only=True)
            cons = yield Query("CALL db.constraints() YIELD status RETURN status", read_only=True)
            pending = [s for (s,) in list(rows) + list(cons) if s != "OPERATIONAL"]
            if not pending:
                return None
            if time.monotonic() > deadline:
                raise StorageError(f"indexes of graph {self.graph!r} not operational after {timeout} s: {pending}")
            time.sleep(0.02)

    # -- writes ---------------------------------------------------------------

    def _check_node(self, node: MemoryNode) -> None:
        if node.level != self.level or (self.level == "N1" and node.citizen_id != self.citizen_id):
            where = f"{node.level}" + (f" of citizen {node.citizen_id!r}" if node.citizen_id else "")
            raise StorageError(f"memory {node.node_id!r} belongs to {where}, not to graph {self.graph!r}")
        if node.embedding is not None:
            self._check_dimension(node.embedding, f"the embedding of memory {node.node_id!r}")

    def _check_dimension(self, vector: Sequence[float], what: str) -> None:
        if self.dimension is not None and len(vector) != self.dimension:
            raise EmbeddingDimensionError(f"{what} has dimension {len(vector)}, "
                                          f"but level graph {self.graph!r} indexes dimension {self.dimension}")

    def _place_edge(self, edge: ConsciousnessRelationship | PreparedEdge) -> ConsciousnessRelationship | PreparedEdge:
        """Stamp the edge with this level, or refuse one meant for another graph."""
        if edge.level is None:
            if type(edge) is PreparedEdge:  # its row was made without a level: it cannot be stamped
                raise StorageError(f"prepared relationship {edge.edge_id!r} has no level; prepare it once placed")
            update = {"level": self.level}
            if self.level == "N1" and edge.citizen_id is None:
                update["citizen_id"] = self.citizen_id
            return edge.model_copy(update=update)
        if edge.level != self.level or (self.level == "N1" and edge.citizen_id != self.citizen_id):
            raise StorageError(
                f"relationship {edge.edge_id!r} belongs to level {edge.level}"
                + (f" of citizen {edge.citizen_id!r}" if edge.citizen_id else "")
                + f", not to graph {self.graph!r}"
            )
        return edge

    def upsert(
        self,
        nodes: Sequence[MemoryNode] = (),
        relationships: Sequence[ConsciousnessRelationship | PreparedEdge] = (),
        supersessions: Sequence[Supersession] = (),
        base_ids: Mapping[str, str] | None = None,
        derived: frozenset[str] | set[str] = frozenset(),
        volatile: Mapping[str, tuple[str, ...]] | None = None,
        present: frozenset[str] | set[str] = frozenset(),
        check_stored: bool = True,
    ) -> Plan:
        """Write memories, expire the versions they supersede, write relationships: one transaction.

        Unchanged records are not touched; a record referring to a memory neither stored nor in the
        batch is an error before anything is written.  ``derived`` relationships (SUPERSEDES, MENTIONS)
        never overwrite an explicit one; ``present`` ids are known stored; ``check_stored=False`` skips
        reading stored hashes (a bulk load into a new level).
        """
        nodes = _dedupe(nodes, "node_id")
        edges = [self._place_edge(e) for e in _dedupe(relationships, "edge_id")]
        for node in nodes:
            self._check_node(node)
        if not nodes and not edges and not supersessions:
            return UpsertResult()
        if nodes:
            yield from self.check_vector_home()
        base_ids = base_ids or {}
        volatile = volatile or {}
        node_rows = [records.node_row(n, base_ids.get(n.node_id), volatile.get(n.node_id, ())) for n in nodes]
        if not self.store_vectors:
            for row in node_rows:
                row["embedding"] = None
        edge_rows = [records.edge_row(e) for e in edges]
        batch_ids = {n.node_id for n in nodes}
        wanted = sorted(
            ({i for e in edges for i in (e.source_id, e.target_id)} | {s.old_id for s in supersessions})
            - batch_ids - set(present)
        )
        if wanted:
            rows = yield Query(
                f"UNWIND $ids AS id OPTIONAL MATCH (n:{NODE_LABEL} {{node_id: id}}) "
                "WITH id, n WHERE n IS NULL RETURN id",
                {"ids": Ids(wanted)},
                read_only=True,
            )
            if missing := {r[0] for r in rows}:
                dangling = [f"{e.source_id} -[{e.relation_type}]-> {e.target_id}" for e in edges
                            if e.source_id in missing or e.target_id in missing]
                dangling += [f"{s.new_id} supersedes {s.old_id}" for s in supersessions if s.old_id in missing]
                more = f" and {len(dangling) - 10} more" if len(dangling) > 10 else ""
                raise StorageError(f"records refer to memories that are not in graph {self.graph!r}: "
                                   f"missing {sorted(missing)}; in: {dangling[:10]}{more}")
        # Rows whose content is already stored are not sent at all: a rerun
        # costs a list of hashes instead of every embedding again.
        total_nodes, total_edges = len(node_rows), len(edge_rows)
        if node_rows and check_stored:
            known = yield from _stored_hashes(f"(x:{NODE_LABEL} {{node_id: id}})", [r["node_id"] for r in node_rows])
            node_rows = [r for r in node_rows if known.get(r["node_id"]) != r["hash"]]
        if edge_rows and check_stored:
            known = yield from _stored_hashes(f"()-[x:{EDGE_TYPE} {{edge_id: id}}]->()",
                                              [r["edge_id"] for r in edge_rows])
            edge_rows = [r for r in edge_rows if known.get(r["edge_id"]) != r["hash"]
                         and not (r["edge_id"] in derived and r["edge_id"] in known)]
        params = {
            "nodes": Rows(records.node_wire(r) for r in node_rows),
            "edges": Rows(records.edge_wire(r, r["edge_id"] in derived) for r in edge_rows),
            "expire": [s.row() for s in supersessions if s.confirmed],
            "possible": [s.row() for s in supersessions if not s.confirmed],
        }
        present = {key for key, value in params.items() if value}
        result = UpsertResult()
        if present:
            cypher, columns = _upsert_query(present)
            rows = yield Query(cypher, params)
            for key, value in zip(columns, rows[0] if rows else ()):
                setattr(result, key, list(value or []) if key.endswith("_ids") else int(value or 0))
        result.nodes_created, result.nodes_updated = len(result.created_ids), len(result.updated_ids)
        result.nodes_unchanged = total_nodes - result.nodes_created - result.nodes_updated
        result.edges_unchanged = total_edges - result.edges_created - result.edges_updated
        return result

    # -- reads ----------------------------------------------------------------

    def get_nodes(self, node_ids: Sequence[str]) -> Plan:
        rows = yield Query(f"UNWIND $ids AS id MATCH (n:{NODE_LABEL} {{node_id: id}}) RETURN {_NODE_PROJECTION}",
                           {"ids": Ids(node_ids)}, read_only=True)
        found = {n.node_id: n for n in (records.node_from_props(r[0]) for r in rows)}
        return [found[i] for i in node_ids if i in found]

    def statements(self, node_ids: Sequence[str]) -> Plan:
        """What the update judge reads of stored memories, without the rest of them: per memory found,
        ``(node_id, name, description, extra, valid_at, created_at, current)``; ``current`` is False for an
        expired, quarantined or flagged memory and for an entity (none of them is ever judged)."""
        rows = yield Query(
            f"UNWIND $ids AS id MATCH (n:{NODE_LABEL} {{node_id: id}}) RETURN n.node_id, n.name, n.description, "
            "n.extra_json, n.valid_at, n.created_at, n.expired_at IS NULL AND NOT coalesce(n.quarantined, false) "
            "AND NOT coalesce(n.is_entity, false) AND NOT coalesce(n.injection_suspected, false)",
            {"ids": Ids(node_ids)}, read_only=True)
        return [(r[0], r[1], r[2], json.loads(r[3]) if r[3] else {},
                 None if r[4] is None else from_cypher_time(r[4]), None if r[5] is None else from_cypher_time(r[5]),
                 bool(r[6])) for r in rows]

    def get_node(self, node_id: str) -> Plan:
        found = yield from self.get_nodes([node_id])
        return found[0] if found else None

    def ensure_ready(self) -> Plan:
        """Schema created and every index operational."""
        yield from self.ensure_schema()
        yield from self.wait_operational()

    def get_relationships(self, node_ids: Sequence[str] | None = None) -> Plan:
        """Relationships touching ``node_ids`` (all of them when None)."""
        if node_ids is None:
            rows = yield Query(f"MATCH ()-[r:{EDGE_TYPE}]->() RETURN {_EDGE_PROJECTION}", read_only=True)
        else:
            rows = yield Query(f"MATCH (s:{NODE_LABEL})-[r:{EDGE_TYPE}]->(t:{NODE_LABEL}) "
                               f"WHERE s.node_id IN $ids OR t.node_id IN $ids RETURN {_EDGE_PROJECTION}",
                               {"ids": Ids(node_ids)}, read_only=True)
        return [records.edge_from_props(r[0]) for r in rows]

    def named_nodes(self, node_types: Sequence[str]) -> Plan:
        """``(node_id, name)`` of the memories of the given types (entity matching)."""
        rows = yield Query(f"MATCH (n:{NODE_LABEL}) WHERE n.node_type IN $types RETURN n.node_id, n.name",
                           {"types": list(node_types)}, read_only=True)
        return [(r[0], r[1]) for r in rows]

    def versions(self, base_ids: Sequence[str]) -> Plan:
        """The stored versions of these base identities, oldest first."""
        rows = yield Query(f"UNWIND $bases AS b MATCH (n:{NODE_LABEL} {{base_id: b}}) "
                           f"RETURN {_NODE_PROJECTION}, n.base_id ORDER BY n.created_at, n.node_id",
                           {"bases": list(base_ids)}, read_only=True)
        return [(records.node_from_props(r[0]), r[1]) for r in rows]

    def nearest(self, queries: Sequence[tuple[str, Sequence[float]]], k: int = 3) -> Plan:
        """``{id: [(node_id, base_id, similarity)]}``: for each ``(id, vector)`` its k nearest current
        memories (not entities), in ONE query (near-duplicates at ingestion: no round trip per memory)."""
        if not self.store_vectors or not queries:
            return {}
        for qid, vector in queries:
            self._check_dimension(vector, f"the vector of {qid!r}")
        rows = yield Query(
            f"UNWIND $qs AS q CALL db.idx.vector.queryNodes('{NODE_LABEL}', '{VECTOR_PROPERTY}', $k, "
            "vecf32(q[1])) "
            f"YIELD node AS n, score WHERE {_CURRENT_MEMORY} "
            "RETURN q[0], n.node_id, n.base_id, score",
            {"qs": Rows([qid, records.wire_vector(vector)] for qid, vector in queries), "k": int(k)},
            read_only=True,
        )
        found: dict[str, list[tuple[str, str, float]]] = {}
        for qid, node_id, base_id, score in rows:
            found.setdefault(qid, []).append((node_id, base_id, 1.0 - float(score)))
        return found

    def has_current_memories(self) -> Plan:
        """Whether any current (unexpired) memory that is not an entity is stored."""
        rows = yield Query(f"MATCH (n:{NODE_LABEL}) WHERE {_CURRENT_MEMORY} RETURN n.node_id LIMIT 1",
                           read_only=True)
        return bool(rows)

    def unsupersede(self, node_id: str, reason: str, at: datetime) -> Plan:
        """Take back the supersession (or possible one) of memory ``node_id``: it is current again, its
        SUPERSEDES / POSSIBLY_SUPERSEDES link expires at ``at`` (kept, so the history says the supersession
        was once believed), and it records the newer memory and ``reason``; the same newer memory does not
        supersede it again.  Returns the newer memory's id, or None when ``node_id`` is not superseded."""
        rows = yield Query(f"MATCH (o:{NODE_LABEL} {{node_id: $id}}) "
                           "RETURN coalesce(o.superseded_by, o.possibly_superseded_by)", {"id": node_id},
                           read_only=True)
        newer = rows[0][0] if rows else None
        if newer is None:
            return None
        # The newer id is a parameter, and set after the clearing SET: set with it, FalkorDB 4 lost it.
        # The WHERE keeps the read true if another writer came between.
        rows = yield Query(
            f"MATCH (o:{NODE_LABEL} {{node_id: $id}}) "
            "WHERE coalesce(o.superseded_by, o.possibly_superseded_by) = $newer "
            f"OPTIONAL MATCH (n:{NODE_LABEL} {{node_id: $newer}}) "
            f"OPTIONAL MATCH p = (n)-[:{EDGE_TYPE}]->(o) "
            "WITH o, n, [r IN coalesce(relationships(p), []) WHERE r.relation_type IN "
            "['SUPERSEDES', 'POSSIBLY_SUPERSEDES'] AND r.expired_at IS NULL] AS links "
            "FOREACH (r IN links | SET r.expired_at = $at) "
            "SET o.invalid_at = CASE WHEN o.invalidation_reason = 'reality_changed' AND n IS NOT NULL "
            "AND o.invalid_at = n.valid_at THEN NULL ELSE o.invalid_at END, "
            "o.expired_at = NULL, o.superseded_by = NULL, o.possibly_superseded_by = NULL, "
            "o.invalidation_reason = NULL, o.supersession_source = NULL, o.supersession_confidence = NULL "
            "WITH o SET o.unsuperseded_from = $newer, o.unsupersede_reason = $reason "
            "RETURN o.unsuperseded_from",
            {"id": node_id, "newer": newer, "reason": reason, "at": cypher_time(at)},
        )
        return rows[0][0] if rows else None

    def existing_ids(self, node_ids: Sequence[str]) -> Plan:
        """Which of ``node_ids`` are stored in this graph."""
        rows = yield Query(f"UNWIND $ids AS id MATCH (n:{NODE_LABEL} {{node_id: id}}) RETURN id",
                           {"ids": Ids(node_ids)}, read_only=True)
        return {r[0] for r in rows}

    def counts(self) -> Plan:
        nodes = yield Query(f"MATCH (n:{NODE_LABEL}) RETURN count(n)", read_only=True)
        edges = yield Query(f"MATCH ()-[r:{EDGE_TYPE}]->() RETURN count(r)", read_only=True)
        return (int(nodes[0][0]) if nodes else 0), (int(edges[0][0]) if edges else 0)

    def vector_search(
        self,
        embedding: Sequence[float],
        k: int,
        window: TemporalWindow | MemoryFilter,
        *,
        min_energy: float | None = None,
        min_confidence: float | None = None,
        oversample: int = 4,
    ) -> Plan:
        """The k nearest memories that pass the filter (a window or a ``MemoryFilter``), filters in the query.

        Filters after the KNN step (and orphan vectors left by updates) can leave fewer than k rows, so
        the index is asked for ``oversample * k`` and, while short, again for four times as many.
        """
        self._check_dimension(embedding, "the query embedding")
        if k <= 0:
            return []
        if isinstance(window, MemoryFilter):
            memory_filter = window
        else:
            memory_filter = MemoryFilter(window, min_energy=min_energy, min_confidence=min_confidence)
        predicate = memory_filter.cypher("n")
        params: dict[str, Any] = {**predicate.params, "q": records.wire_vector(embedding), "k": int(k)}
        cypher = (
            f"CALL db.idx.vector.queryNodes('{NODE_LABEL}', '{VECTOR_PROPERTY}', $fetch, vecf32($q)) "
            # whether the index repeated a memory in this page (see _knn_page)
            "YIELD node AS n, score WITH count(n) AS page_rows, count(DISTINCT n) AS page_nodes, "
            "collect([n, score]) AS page UNWIND page AS hit WITH hit[0] AS n, hit[1] AS score, page_rows, page_nodes "
            f"WHERE {predicate.text} "
            # projected after the cut: FalkorDB projects a RETURN before its
            # ORDER BY, which read every fetched memory's forty properties
            "WITH n, score, page_rows, page_nodes ORDER BY score ASC LIMIT $k "
            f"RETURN {_NODE_PROJECTION}, score, page_rows = page_nodes"
        )
        fetch = min(max(k * oversample, k + 16), MAX_FETCH)
        rows = yield from _knn_page(self.graph, cypher, {**params, "fetch": fetch})
        if len(rows) < k and fetch < MAX_FETCH:
            # Short: filters or orphans took slots.  A bound on what the index
            # can return is the label count, which FalkorDB answers from its
            # label matrix; asked only now, since most searches never need it.
            total_rows = yield Query(f"MATCH (n:{NODE_LABEL}) RETURN count(n)", read_only=True)
            total = int(total_rows[0][0]) if total_rows else 0
            plateau = len(rows) if fetch >= total else None
            while total and len(rows) < k and fetch < MAX_FETCH:
                fetch = min(fetch * 4, MAX_FETCH)
                rows = yield from _knn_page(self.graph, cypher, {**params, "fetch": fetch})
                # Orphans take index slots, so the index may hold more entries than
                # live nodes: past ``total``, stop only when a bigger fetch adds nothing.
                if len(rows) == plateau:
                    break
                if fetch >= total:
                    plateau = len(rows)
        hits: dict[str, VectorHit] = {}  # each memory once: a page may repeat one (see _knn_page)
        for values, score, _ in rows:
            if values[0] not in hits:  # NODE_READ_PROPS[0] is node_id
                hits[values[0]] = VectorHit(records.node_from_props(values), 1.0 - float(score))
        return list(hits.values())[:k]

    def reindex_vectors(self) -> Plan:
        """Drop and rebuild the vector index, clearing orphan vectors."""
        have, _ = yield from indexed()
        if "VECTOR" in have.get(("NODE", f"{NODE_LABEL}.{VECTOR_PROPERTY}"), set()):
            yield Query(f"DROP VECTOR INDEX FOR (n:{NODE_LABEL}) ON (n.{VECTOR_PROPERTY})")
            # the label's index is rebuilt in the background and still lists the
            # vector field meanwhile; ensure_schema must not mistake it for live
            yield from self.wait_operational()
        yield from self.ensure_schema()
        yield from self.wait_operational()


KNN_ATTEMPTS = 4


def _knn_page(graph: str, cypher: str, params: dict[str, Any]) -> Plan:
    """A page of the vector index, read again while it repeats a memory (its last column: no repeat).

    Concurrent searches of one graph corrupt each other's pages (FalkorDB #2848); ``knn_gate`` keeps this
    process's searches apart, not another process's.  After ``KNN_ATTEMPTS`` the last page is used.
    """
    rows: list[Any] = []
    for _ in range(KNN_ATTEMPTS):
        rows = yield Query(cypher, params, read_only=True)
        if not rows or rows[0][-1]:
            return rows
    logger.warning("vector search on %r: the index repeated memories in %d pages in a row (FalkorDB #2848); "
                   "using the last page without its repeats", graph, KNN_ATTEMPTS)
    return rows


assert records.NODE_READ_PROPS[0] == "node_id"

def as_consciousness_node(hit: VectorHit, source: str) -> ConsciousnessNode:
    """A vector hit as the spec's retrieved node."""
    return retrieved_node(hit.node, source, hit.similarity)


INDEX_STATUS = "CALL db.indexes() YIELD status RETURN status"
"""Each index of a graph: "OPERATIONAL", or how far the server is in building it."""

INDEX_WAIT_S = 60.0
"""How long a query from the store waits for a graph's indexes that the server is still building after a
restart (about 3 s per 10K memories), rather than failing: a chat turn stored in that window was lost."""


def _index_not_ready(exc: Exception) -> bool:
    """FalkorDB's answer to a vector search on an index still under construction (after loading its data)."""
    return "Invalid arguments for procedure 'db.idx.vector.queryNodes'" in str(exc)


def _missing_graph(exc: Exception) -> bool:
    """FalkorDB's answer to a read on a graph that was never written."""
    return "empty key" in str(exc)


class LevelGraphStore:
    """A level graph driven by the synchronous FalkorDB client; its operations run the ``LevelPlans`` plans."""

    def __init__(self, db: Any, plans: LevelPlans, timeout_ms: int | None = None) -> None:
        self.db = db
        self.plans = plans
        self.graph = db.select_graph(plans.graph)
        # Server-side limit on read queries: a slow level must not hold a
        # retrieval hostage (writes are never cut off halfway).
        self.timeout_ms = timeout_ms

    def run(self, plan: Plan) -> Any:
        """Run a query plan to its result; a step's error is thrown into the plan at its ``yield``."""
        try:
            query = next(plan)
            while True:
                try:
                    result = self._execute(query)
                except Exception as exc:  # the plan may handle it (``create_missing``); else it comes back out
                    query = plan.throw(exc)
                else:
                    query = plan.send(result)
        except StopIteration as stop:
            return stop.value

    def _execute(self, query: Step) -> Any:
        if isinstance(query, Await):
            return query.future.result()
        if isinstance(query, UniqueConstraint):
            try:
                return self.graph.create_node_unique_constraint(query.label, query.prop)
            except Exception as exc:
                raise StorageError(f"constraint on graph {self.plans.graph!r} failed: {exc}") from exc
        text = params_header(query.params) + query.cypher
        timeout = self.timeout_ms if query.read_only else None
        waited = False
        while True:
            try:
                if knn_gate.searches_vectors(query.cypher):
                    with knn_gate.gate(self.db, self.plans.graph):
                        return replies.run(self.graph, text, query.read_only, timeout)
                return replies.run(self.graph, text, query.read_only, timeout)
            except Exception as exc:  # the client raises redis.ResponseError and friends
                if query.read_only and _missing_graph(exc):
                    return []
                if not waited and _index_not_ready(exc):
                    waited = True
                    try:  # the indexes the server is still building (after loading its data): wait, then again
                        self.run(self.plans.wait_operational(INDEX_WAIT_S))
                        continue
                    except StorageError:
                        pass  # still not ready: the query's own error stands
                raise StorageError(f"query on graph {self.plans.graph!r} failed: {exc}") from exc

    def exists(self) -> bool:
        return self.plans.graph in self.db.list_graphs()

    def delete(self) -> None:
        """Delete the whole graph (an explicit administrative act, never implicit)."""
        if self.exists():
            self.graph.delete()
        self.db.connection.srem(GRAPH_REGISTRY, self.plans.graph)  # gone on purpose: no longer an error


def _runs(name: str, plan: str | None = None) -> Callable[..., Any]:
    """A store method that runs the plan ``LevelPlans.<plan or name>`` with the same arguments."""
    def method(self: LevelGraphStore, *args: Any, **kwargs: Any) -> Any:
        return self.run(getattr(self.plans, plan or name)(*args, **kwargs))

    method.__name__ = method.__qualname__ = name
    method.__doc__ = getattr(LevelPlans, plan or name).__doc__
    return method


LevelGraphStore.ensure_schema = _runs("ensure_schema", "ensure_ready")  # type: ignore[attr-defined]
for _name in ("upsert", "get_node", "get_nodes", "statements", "get_relationships", "counts", "named_nodes", "versions",
              "existing_ids", "nearest", "has_current_memories", "vector_search", "reindex_vectors", "unsupersede",
              "check_vector_home"):
    setattr(LevelGraphStore, _name, _runs(_name))
