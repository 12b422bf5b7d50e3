"""How schema models become graph properties, and back.

FalkorDB properties are primitives or arrays of them: an emotion vector
becomes parallel arrays of names, canonical names and intensities, free-form
dicts become JSON text, times are integer seconds since 1970 in UTC (``temporal.cypher_time``).
Each record gets a ``content_hash`` so that writing it again changes nothing
(and leaves no orphan vector in the index, as every update of an indexed
node does).
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any


from llama_consciousness.schema import ConsciousnessRelationship, MemoryNode
from llama_consciousness.schema.relationship import default_edge_id
from llama_consciousness.scoring.emotions import canonical_emotion
from llama_consciousness.scoring.identity import base_identity
from llama_consciousness.storage.params import Vector
from llama_consciousness.temporal import cypher_time, from_cypher_time, iso_time

TIME_FIELDS = ("valid_at", "invalid_at", "created_at", "expired_at")

NODE_SCALARS = (
    "node_id", "level", "citizen_id", "node_type", "name", "description",
    "invalidation_reason", "correction_pattern_id", "discovery_energy",
    "energy", "confidence", "felt_quality", "body_sensation", "goal", "mindstate",
    "formation_trigger", "emotion_description", "spatial_context",
    "resolution_state", "supersedes", "supersede_reason", "authority_score", "metadata_completeness",
    "quarantined", "is_entity", "injection_suspected",
)
NODE_LISTS = ("concepts", "surfaces_when")

EDGE_SCALARS = (
    "edge_id", "source_id", "target_id", "relation_type", "level", "citizen_id",
    "goal", "mindstate", "energy", "confidence", "formation_trigger",
    "energy_transfer_coefficient", "resolution_state", "felt_quality",
    "emotion_description", "body_sensation", "spatial_context", "metadata_completeness",
)

EMOTION_PROPS = ("emotion_names", "emotion_canonical", "emotion_values")
JSON_PROPS = {"sensory_details": "sensory_details_json", "extra": "extra_json"}

# Read back: everything but the embedding (only the index needs it) and
# ``emotion_canonical`` (for queries to filter on; derived from the names).
EMOTION_READ_PROPS = ("emotion_names", "emotion_values")
#: Set by the store, never by a write of the memory itself (supersession, its undoing).
STORE_SET_PROPS = ("superseded_by", "supersession_source", "supersession_confidence", "possibly_superseded_by",
                   "unsuperseded_from", "unsupersede_reason", "forgotten_at", "forgotten_reason", "forgotten_by",
                   "retractions")
"""``retractions`` is stored as a list of JSON texts (one per forget or restore); ``forgotten_at`` in seconds."""
NODE_READ_PROPS = NODE_SCALARS + NODE_LISTS + TIME_FIELDS + EMOTION_READ_PROPS + STORE_SET_PROPS + (
    "sensory_details_json", "extra_json",
)
EDGE_READ_PROPS = EDGE_SCALARS + TIME_FIELDS + EMOTION_READ_PROPS + ("sensory_details_json",)


# Links written by the versions of 2026-11-24..26 kept their descriptive
# texts only in a JSON copy of their properties, ``fields_v1`` (a list in the
# order below): a link read back without those texts takes them from there.
# A record the upsert writes again loses its copy.
LEGACY_COPY = "fields_v1"
LEGACY_EDGE_LAYOUT = (
    "source_id", "target_id", "relation_type", "level", "citizen_id", "goal", "mindstate", "energy", "confidence",
    "formation_trigger", "energy_transfer_coefficient", "resolution_state", "felt_quality",
    "emotion_description", "body_sensation", "spatial_context", "metadata_completeness",
    "emotion_names", "emotion_values", "sensory_details_json",
)
LEGACY_EDGE_TEXTS = ("goal", "mindstate", "formation_trigger", "felt_quality", "emotion_description",
                     "body_sensation", "spatial_context", "sensory_details_json")


def projection(var: str, props: tuple[str, ...]) -> str:
    """A Cypher list (not a map: no property names in every reply) of fixed properties, in order."""
    return "[" + ", ".join(f"{var}.{p}" for p in props) + "]"


def node_projection(var: str) -> str:
    """Cypher for a stored memory as ``node_from_props`` reads it back: ``var`` is a query variable."""
    return projection(var, NODE_READ_PROPS)


def edge_projection(var: str) -> str:
    """Cypher for a stored link as ``edge_from_props`` reads it back (its legacy copy last)."""
    return projection(var, EDGE_READ_PROPS + (LEGACY_COPY,))


def _times(model: Any) -> tuple[dict[str, int | None], dict[str, str | None]]:
    """The four times as stored (seconds) and as hashed (ISO text: the hashes predate the seconds)."""
    values = [getattr(model, f) for f in TIME_FIELDS]
    return ({f: None if v is None else cypher_time(v) for f, v in zip(TIME_FIELDS, values)},
            {f: None if v is None else iso_time(v) for f, v in zip(TIME_FIELDS, values)})


def _emotions(vector: Mapping[str, float] | None) -> dict[str, list]:
    names = list(vector or {})
    return {
        "emotion_names": names,
        "emotion_canonical": [canonical_emotion(n) for n in names],
        "emotion_values": [float(vector[n]) for n in names] if vector else [],
    }


def _json(value: Any) -> str | None:
    if value is None or value == {}:
        return None
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _digest(payload: dict[str, Any], vector: list[float] | None = None) -> str:
    """The content hash of a row.

    ``repr`` of the row's dict is canonical here (the rows are built in the
    fixed order of ``NODE_PROPS`` / ``EDGE_PROPS``, of plain values whose
    repr round-trips) and costs half of a sorted JSON dump.
    """
    if vector is None:
        return _hash_text(repr(payload))
    digest = hashlib.sha256(repr(payload).encode("utf-8", "surrogatepass"))
    digest.update(np.asarray(vector, dtype=np.float32).tobytes())  # the vector's bytes, not its 256 decimal texts
    return digest.hexdigest()


def _hash_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


VECTOR_DECIMALS = 7


def wire_vector(vector: Any) -> list[float]:
    """A vector as sent to the server: rounded to 7 decimals.

    FalkorDB stores float32 (about 7 significant digits) anyway; rounding
    first halves the text of every write and query and the server's parsing
    of it, and changes no stored value beyond float32 precision.
    """
    return Vector(np.round(np.asarray(vector, dtype=np.float64), VECTOR_DECIMALS).tolist())


def defaulted_times(model: Any) -> list[str]:
    """Times the caller did not give (filled by defaults at construction).

    When such a record already exists, the stored time is kept: re-ingesting
    yesterday's memory today must not move its ``created_at`` to today.
    """
    given = model.model_fields_set
    defaulted = [] if "created_at" in given else ["created_at"]
    # The schema fills a missing valid_at from created_at by assignment, which
    # marks valid_at as set; a valid_at equal to a defaulted created_at is that copy.
    if "created_at" not in given and ("valid_at" not in given or model.valid_at == model.created_at):
        defaulted.append("valid_at")
    return defaulted


def node_row(node: MemoryNode, base_id: str | None = None, volatile: tuple[str, ...] = ()) -> dict[str, Any]:
    """The parameter row that the upsert query writes for ``node``.

    ``base_id`` is the version identity (default: derived from the node,
    ``scoring.identity``).  ``volatile`` fields (computed from the clock at
    ingestion) are written but not hashed: a re-ingested memory stays unchanged.
    """
    props: dict[str, Any] = {f: getattr(node, f) for f in NODE_SCALARS}
    props["base_id"] = base_id or base_identity(node)
    props.update({f: list(getattr(node, f)) for f in NODE_LISTS})
    props.update(_emotions(node.emotion_vector))
    for field, prop in JSON_PROPS.items():
        props[prop] = _json(getattr(node, field))
    times, iso = _times(node)
    defaulted = defaulted_times(node)
    embedding = None if node.embedding is None else wire_vector(node.embedding)
    hashed = {**{k: v for k, v in props.items() if k not in volatile},
              **{k: v for k, v in iso.items() if k not in defaulted}, "has_embedding": embedding is not None}
    if not node.injection_suspected:
        # a field added after memories were stored: unflagged, they keep their hash (no rewrite, no orphan vector)
        del hashed["injection_suspected"]
    return {
        "node_id": node.node_id,
        "props": props,
        "times": times,
        "keep_times": defaulted,
        "embedding": embedding,
        "hash": _digest(hashed, embedding),
    }


# The order of ``node_row``'s and ``edge_row``'s properties, which is also
# their order on the wire (see ``node_wire``).
NODE_PROPS = NODE_SCALARS + ("base_id",) + NODE_LISTS + EMOTION_PROPS + tuple(JSON_PROPS.values())
EDGE_PROPS = EDGE_SCALARS + EMOTION_PROPS + ("sensory_details_json",)

# The ids lead both the wire rows and the properties: on the wire they are
# sent once (a fifth of an edge row's text was its ids sent twice).
_NODE_IDS = ("node_id",)
_EDGE_IDS = ("edge_id", "source_id", "target_id")
assert NODE_PROPS[: len(_NODE_IDS)] == _NODE_IDS and EDGE_PROPS[: len(_EDGE_IDS)] == _EDGE_IDS

NODE_WIRE = _NODE_IDS + ("hash", "embedding", "keep_times") + TIME_FIELDS + NODE_PROPS[len(_NODE_IDS):]
EDGE_WIRE = _EDGE_IDS + ("hash", "derived", "keep_times") + TIME_FIELDS + EDGE_PROPS[len(_EDGE_IDS):]
"""What each position of a wire row holds (``row[i]`` in the upsert queries)."""


def node_wire(row: dict[str, Any]) -> list[Any]:
    """A node row as the positional list the upsert query reads.

    Positional lists of scalars go through the C JSON encoder
    (``params.Rows``); maps would need a Python call per value.
    """
    return [row["node_id"], row["hash"], row["embedding"], row["keep_times"],
            *row["times"].values(), *islice(row["props"].values(), len(_NODE_IDS), None)]


_EDGE_WIRED = EDGE_PROPS[len(_EDGE_IDS):]


def edge_wire(row: dict[str, Any], derived: bool) -> list[Any]:
    """An edge row as the positional list the upsert query reads (see ``node_wire``)."""
    return [row["edge_id"], row["source_id"], row["target_id"], row["hash"], derived, row["keep_times"],
            *row["times"].values(), *map(row["props"].__getitem__, _EDGE_WIRED)]


@dataclass(frozen=True, slots=True)
class PreparedEdge:
    """A validated relationship already turned into its upsert row (``edge_row``), built by ``prepare_edge``.

    Why: an ingestion's worker process builds these while it has nothing else
    to do, so that the writing process, the slower stage, skips both the model
    and the row.  The store takes it wherever it takes a ``ConsciousnessRelationship``.
    """

    edge_id: str
    source_id: str
    target_id: str
    relation_type: str
    level: str | None
    citizen_id: str | None
    row: dict[str, Any]

    def __reduce__(self) -> tuple[Any, ...]:
        # Unpickled by a constructor call: the default for a frozen dataclass
        # with slots lists its fields and sets each one (a fifth of the
        # unpickling of a worker's reply of 4,000 relationships).
        return (PreparedEdge, (self.edge_id, self.source_id, self.target_id, self.relation_type, self.level,
                               self.citizen_id, self.row))


def prepare_edge(edge: ConsciousnessRelationship) -> PreparedEdge:
    """``edge`` with its upsert row, ready for the store."""
    return PreparedEdge(str(edge.edge_id), edge.source_id, edge.target_id, edge.relation_type, edge.level,
                        edge.citizen_id, edge_row(edge))


def edge_row(edge: ConsciousnessRelationship | PreparedEdge) -> dict[str, Any]:
    """The parameter row that the upsert query writes for ``edge``."""
    if type(edge) is PreparedEdge:
        return edge.row
    props: dict[str, Any] = {f: getattr(edge, f) for f in EDGE_SCALARS}
    props.update(_emotions(edge.emotion_vector))
    props["sensory_details_json"] = _json(edge.sensory_details)
    times, iso = _times(edge)
    defaulted = defaulted_times(edge)
    hashed = {**props, **{k: v for k, v in iso.items() if k not in defaulted}}
    return {"edge_id": edge.edge_id, "source_id": edge.source_id, "target_id": edge.target_id, "props": props,
            "times": times, "keep_times": defaulted, "hash": _digest(hashed)}


def retargeted_edges(edge: ConsciousnessRelationship, targets: Sequence[tuple[str, str]]) -> list[PreparedEdge]:
    """``edge`` aimed at each ``(target_id, formation_trigger)``, with its default edge id, ready for the store."""
    return [prepare_edge(edge.model_copy(update={
        "target_id": target_id, "formation_trigger": trigger,
        "edge_id": default_edge_id(edge.source_id, edge.relation_type, target_id)})) for target_id, trigger in targets]


def _clean(pairs: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    """Stored properties (as ``(name, value)`` pairs) back into model fields."""
    data = {k: v for k, v in pairs if v is not None}
    names = data.pop("emotion_names", None) or []
    values = data.pop("emotion_values", None) or []
    data.pop("emotion_canonical", None)
    if names:
        data["emotion_vector"] = dict(zip(names, (float(v) for v in values)))
    for field, prop in JSON_PROPS.items():
        text = data.pop(prop, None)
        if text:
            data[field] = json.loads(text)
    for f in TIME_FIELDS:
        if f in data:
            data[f] = from_cypher_time(data[f])
    if "forgotten_at" in data:
        data["forgotten_at"] = from_cypher_time(data["forgotten_at"])
    if "retractions" in data:
        data["retractions"] = [json.loads(event) for event in data["retractions"]]
    return data


def node_from_props(props: Sequence[Any] | Mapping[str, Any], cls: type[MemoryNode] = MemoryNode,
                    **extra: Any) -> MemoryNode:
    """A stored memory (a ``node_projection``, or its property map) as a model (``cls`` may be ``ConsciousnessNode``)."""
    pairs = props.items() if isinstance(props, Mapping) else zip(NODE_READ_PROPS, props)
    data = _clean(pairs)
    for f in NODE_LISTS:
        data.setdefault(f, [])
    data.setdefault("extra", {})
    data.update(extra)
    return cls.model_validate(data)


def edge_from_props(props: Sequence[Any] | Mapping[str, Any]) -> ConsciousnessRelationship:
    """A stored link (an ``edge_projection``, or its property map) as a model."""
    if isinstance(props, Mapping):
        props = [props.get(p) for p in EDGE_READ_PROPS + (LEGACY_COPY,)]
    data = dict(zip(EDGE_READ_PROPS, props))
    legacy = props[len(EDGE_READ_PROPS)]
    if legacy is not None:  # texts an earlier version kept in its copy only
        copy = dict(zip(LEGACY_EDGE_LAYOUT, json.loads(legacy)))
        for name in LEGACY_EDGE_TEXTS:
            if data.get(name) is None:
                data[name] = copy.get(name)
    return ConsciousnessRelationship.model_validate(_clean(data.items()))
