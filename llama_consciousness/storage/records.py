"""How schema models become graph properties, and back.

FalkorDB properties are primitives or arrays of primitives, so structured
fields are flattened: an emotion vector becomes parallel arrays of names,
canonical names and intensities (which Cypher arithmetic and filters can
use), free-form dicts become JSON text.  Times travel as ISO strings and are
stored as ``localdatetime`` in UTC at one-second resolution.

Each memory and link also carries a read copy of its properties as one
JSON text (``FIELDS_COPY``), which replies return in place of twenty to
thirty-odd cells, and which reads back as the model it was written from.

Each record also gets a ``content_hash`` so that writing the same record
twice changes nothing: re-running an ingestion is free, and (because
FalkorDB leaves an orphan vector behind every update of an indexed node)
it does not degrade the vector index either.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import orjson
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, islice
from datetime import datetime
from typing import Any

from pydantic_core import PydanticUndefined

from llama_consciousness.schema import ConsciousnessRelationship, MemoryNode
from llama_consciousness.schema._time import to_utc
from llama_consciousness.schema.relationship import default_edge_id
from llama_consciousness.schema.trusted import trusted_model
from llama_consciousness.scoring.emotions import canonical_emotion
from llama_consciousness.scoring.identity import base_identity
from llama_consciousness.storage.params import Vector
from llama_consciousness.temporal import cypher_time

TIME_FIELDS = ("valid_at", "invalid_at", "created_at", "expired_at")

NODE_SCALARS = (
    "node_id", "level", "citizen_id", "node_type", "name", "description",
    "invalidation_reason", "correction_pattern_id", "discovery_energy",
    "energy", "confidence", "felt_quality", "body_sensation", "goal", "mindstate",
    "formation_trigger", "emotion_description", "spatial_context",
    "resolution_state", "supersedes", "supersede_reason", "authority_score", "metadata_completeness",
    "quarantined", "is_entity",
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

# Properties read back for a node: everything but the embedding, which is
# large and only the index needs.
# Written by the store itself, never from a record: ``superseded_by`` when a
# newer version expires a memory, ``base_id`` to find versions of one belief.
NODE_STORE_PROPS = ("superseded_by", "base_id")

# ``emotion_canonical`` is written for queries to filter on and never read
# back: the model keeps the names as given, and the canonical list is derived
# from them (a list in every node and link of every reply, for nothing).
EMOTION_READ_PROPS = ("emotion_names", "emotion_values")
NODE_READ_PROPS = NODE_SCALARS + NODE_LISTS + TIME_FIELDS + EMOTION_READ_PROPS + ("superseded_by",) + (
    "sensory_details_json", "extra_json",
)
EDGE_READ_PROPS = EDGE_SCALARS + TIME_FIELDS + EMOTION_READ_PROPS + ("sensory_details_json",)


# The read copy.  Every memory and link also carries its properties as one
# JSON text, ``fields_v1``, which the upsert writes from the same row as the
# properties themselves: a list of the values of ``NODE_COPIED`` (or
# ``EDGE_COPIED``) in that order, its trailing nulls left out.  A reply then
# holds one string per record instead of twenty to thirty-odd typed cells,
# each of which costs the server a reply item and this process a parsed list
# and a decoding step (measured at 50K memories, alternating: a level's two
# channels 5.37 -> 4.93 ms p50 with the copy on memories, then 5.20 -> 4.83
# with it on links as well and both read without a second validation).  It
# also keeps every digit of a float, which a reply's cells round to 15
# significant digits.  The properties stay the truth for every query filter
# (a link's descriptive texts, on which none filters, are in its copy only:
# ``EDGE_COPY_ONLY``); the copy is only read, and it reads back as the model
# it was written from, without a second validation (``_copied``).  What the store itself changes after the
# upsert (the four times, which it may keep from an older write, and what a
# supersession sets) is read from the properties, as cells: ``NODE_CELLS``
# and ``EDGE_CELLS``, the id first.  A record without the copy (written by
# an earlier version, or by hand) is read from its properties, one cell
# each, and validated; so would be one whose copy has another layout, which
# would carry another version in its name.  Writing a copied property by
# hand, outside the store's upsert, leaves the copy stale.
FIELDS_COPY = "fields_v1"
NODE_CELLS = ("node_id",) + TIME_FIELDS + ("superseded_by", "invalidation_reason")
NODE_COPIED = tuple(p for p in NODE_READ_PROPS if p not in NODE_CELLS)
EDGE_CELLS = ("edge_id",) + TIME_FIELDS
EDGE_COPIED = tuple(p for p in EDGE_READ_PROPS if p not in EDGE_CELLS)


def projection(var: str, props: tuple[str, ...]) -> str:
    """A Cypher list of fixed properties (never user input), in the order of ``props``.

    A list rather than a map: a reply then carries no property names, which
    was a third of its bytes and of its decoding.
    """
    return "[" + ", ".join(f"{var}.{p}" for p in props) + "]"


def _record_projection(var: str, cells: tuple[str, ...], copied: tuple[str, ...]) -> str:
    return (f"[{', '.join(f'{var}.{p}' for p in cells)}, {var}.{FIELDS_COPY}, "
            f"CASE WHEN {var}.{FIELDS_COPY} IS NULL THEN {projection(var, copied)} END]")


def node_projection(var: str) -> str:
    """Cypher for a stored memory as ``node_from_props`` reads it back: ``var`` is a query variable."""
    return _record_projection(var, NODE_CELLS, NODE_COPIED)


def edge_projection(var: str) -> str:
    """Cypher for a stored link as ``edge_from_props`` reads it back."""
    return _record_projection(var, EDGE_CELLS, EDGE_COPIED)


def _read(props: Sequence[Any] | Mapping[str, Any], cells: tuple[str, ...],
          copied: tuple[str, ...]) -> tuple[bool, dict[str, Any]]:
    """A stored record (a ``_record_projection``, or its property map) as model fields, and whether
    they came from its read copy.

    A projection's copied values come from the copy, or else from the
    cells that stand in for it; then its own cells, which win.
    """
    if isinstance(props, Mapping):
        return False, _clean(props.items())
    at = len(cells)
    text = props[at]
    pairs = zip(copied, orjson.loads(text) if text is not None else props[at + 1])
    return text is not None, _clean(chain(pairs, zip(cells, props)))  # zip stops at the cells


def read_copy(props: Mapping[str, Any], copied: tuple[str, ...] = NODE_COPIED) -> str:
    """The read copy of a row's properties (see ``FIELDS_COPY``): a memory's, or with ``EDGE_COPIED`` a link's."""
    return _copy_text([props[p] for p in copied])


def _copy_text(values: list[Any]) -> str:
    while values and values[-1] is None:
        values.pop()
    return orjson.dumps(values).decode()


def _time(value: datetime | None) -> str | None:
    return None if value is None else cypher_time(value)


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


VECTOR_SCALE = 10**VECTOR_DECIMALS
SCALED_VECTOR = "vecf32([x IN {} | x / 1.0e7])"
"""Cypher that turns a scaled vector (``scaled_vector``) back into a stored vector."""


def scaled_vector(vector: Any) -> list[int]:
    """A vector for bulk writes: the same 7 decimals, sent as integers.

    Integers format four times faster than floats and take a third less
    text; the server divides by 10^7 (``SCALED_VECTOR``), which yields
    exactly the double that the 7-decimal text would parse to (both are the
    correctly rounded value of the same fraction).  Worth it where thousands
    of vectors go in one query: memory upserts and duplicate checks.
    """
    return Vector(_scaled(vector).tolist())


def _scaled(vector: Any) -> np.ndarray:
    return np.rint(np.asarray(vector, dtype=np.float64) * VECTOR_SCALE).astype(np.int64)


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

    ``base_id`` is the version identity (see ``scoring.identity``); by
    default it is derived from the node alone.  ``volatile`` fields were
    computed at ingestion from the clock (a fresh authority score): they
    are written, but left out of the content hash, so an unchanged memory
    re-ingested later is still unchanged.
    """
    props: dict[str, Any] = {f: getattr(node, f) for f in NODE_SCALARS}
    props["base_id"] = base_id or base_identity(node)
    props.update({f: list(getattr(node, f)) for f in NODE_LISTS})
    props.update(_emotions(node.emotion_vector))
    for field, prop in JSON_PROPS.items():
        props[prop] = _json(getattr(node, field))
    times = {f: _time(getattr(node, f)) for f in TIME_FIELDS}
    defaulted = defaulted_times(node)
    scaled = None if node.embedding is None else _scaled(node.embedding)
    embedding = None if scaled is None else Vector(scaled.tolist())
    hashed = {**{k: v for k, v in props.items() if k not in volatile},
              **{k: v for k, v in times.items() if k not in defaulted}, "has_embedding": embedding is not None}
    return {
        "node_id": node.node_id,
        "props": props,
        "times": times,
        "keep_times": defaulted,
        FIELDS_COPY: read_copy(props),
        "embedding": embedding,
        # hashed as the floats it stands for, so hashes do not depend on the wire format
        "hash": _digest(hashed, None if scaled is None else scaled / VECTOR_SCALE),
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

NODE_WIRE = _NODE_IDS + ("hash", "embedding", "keep_times", FIELDS_COPY) + TIME_FIELDS + NODE_PROPS[len(_NODE_IDS):]
# A link's descriptive texts live in its read copy only: no query filters on
# them, and an ingestion writes six times as many links as memories, so
# storing them twice cost more than the copy saves (the copy on links added
# 5% to an ingestion; with these out of the properties, nothing).  Its ids,
# type, graph, numbers, emotions and state stay properties, for queries.
EDGE_COPY_ONLY = (
    "goal", "mindstate", "formation_trigger", "felt_quality", "emotion_description", "body_sensation",
    "spatial_context", "sensory_details_json",
)
EDGE_STORED = tuple(p for p in EDGE_PROPS if p not in EDGE_COPY_ONLY)
assert set(EDGE_COPY_ONLY) <= set(EDGE_COPIED) and EDGE_STORED[: len(_EDGE_IDS)] == _EDGE_IDS
EDGE_WIRE = _EDGE_IDS + ("hash", "derived", "keep_times", FIELDS_COPY) + TIME_FIELDS + EDGE_STORED[len(_EDGE_IDS):]
"""What each position of a wire row holds (``row[i]`` in the upsert queries)."""


def node_wire(row: dict[str, Any]) -> list[Any]:
    """A node row as the positional list the upsert query reads.

    Positional lists of scalars go through the C JSON encoder
    (``params.Rows``); maps would need a Python call per value.
    """
    return [row["node_id"], row["hash"], row["embedding"], row["keep_times"], row[FIELDS_COPY],
            *row["times"].values(), *islice(row["props"].values(), len(_NODE_IDS), None)]


_EDGE_WIRED = EDGE_STORED[len(_EDGE_IDS):]


def edge_wire(row: dict[str, Any], derived: bool) -> list[Any]:
    """An edge row as the positional list the upsert query reads (see ``node_wire``)."""
    return [row["edge_id"], row["source_id"], row["target_id"], row["hash"], derived, row["keep_times"],
            row[FIELDS_COPY], *row["times"].values(), *map(row["props"].__getitem__, _EDGE_WIRED)]


@dataclass(frozen=True, slots=True)
class PreparedEdge:
    """A validated relationship already turned into its upsert row (``edge_row``).

    Why: an ingestion's worker process builds these for the explicit
    relationships of a file, while it has nothing else to do, so that the
    writing process, the slower stage while relationships are written,
    skips both the model and the row.  It carries what the writer and the
    store read of a relationship besides its row: its ids, type and graph.
    Build it with ``prepare_edge``; the store takes it wherever it takes a
    ``ConsciousnessRelationship``.
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
    row, hashed = _edge_row_and_hashed(edge)
    row["hash"] = _digest(hashed)
    return row


def _edge_row_and_hashed(edge: ConsciousnessRelationship) -> tuple[dict[str, Any], dict[str, Any]]:
    """``edge_row`` without its hash, and the dict the hash is taken of."""
    props: dict[str, Any] = {f: getattr(edge, f) for f in EDGE_SCALARS}
    props.update(_emotions(edge.emotion_vector))
    props["sensory_details_json"] = _json(edge.sensory_details)
    times = {f: _time(getattr(edge, f)) for f in TIME_FIELDS}
    defaulted = defaulted_times(edge)
    hashed = {**props, **{k: v for k, v in times.items() if k not in defaulted}}
    row = {
        "edge_id": edge.edge_id,
        "source_id": edge.source_id,
        "target_id": edge.target_id,
        "props": props,
        "times": times,
        "keep_times": defaulted,
        FIELDS_COPY: read_copy(props, EDGE_COPIED),
    }
    return row, hashed


_RETARGETED = ("edge_id", "target_id", "formation_trigger")
_COPY_TARGET, _COPY_TRIGGER = EDGE_COPIED.index("target_id"), EDGE_COPIED.index("formation_trigger")


def retargeted_edges(edge: ConsciousnessRelationship, targets: Sequence[tuple[str, str]]) -> list[PreparedEdge]:
    """``edge`` aimed at each ``(target_id, formation_trigger)``, with its default edge id, ready for the store.

    Why: a memory's MENTIONS links differ only in target, trigger and id
    (the rest is the memory's own metadata), and an ingestion makes three
    of them per memory.  Each row is the one ``edge_row`` makes for that
    link, hash included, but built from the first: the hash's text is
    ``repr`` of the hashed dict, so only the three changed items are
    formatted again (``repr`` of a dict joins ``key: value`` reprs with
    ", " inside braces).
    """
    first, hashed = _edge_row_and_hashed(edge)
    keys = list(hashed)
    pieces = [f"{k!r}: {v!r}" for k, v in hashed.items()]
    at = [keys.index(name) for name in _RETARGETED]
    copied = [first["props"][p] for p in EDGE_COPIED]  # the read copy's values, two of them set per target
    source, kind = edge.source_id, edge.relation_type
    out = []
    for target_id, trigger in targets:
        edge_id = default_edge_id(source, kind, target_id)
        props = dict(first["props"])
        props["edge_id"], props["target_id"], props["formation_trigger"] = edge_id, target_id, trigger
        text = list(pieces)
        for position, name, value in zip(at, _RETARGETED, (edge_id, target_id, trigger)):
            text[position] = f"{name!r}: {value!r}"
        copy = list(copied)
        copy[_COPY_TARGET], copy[_COPY_TRIGGER] = target_id, trigger
        row = {
            "edge_id": edge_id,
            "source_id": source,
            "target_id": target_id,
            "props": props,
            "times": first["times"],
            "keep_times": first["keep_times"],
            FIELDS_COPY: _copy_text(copy),
            "hash": _hash_text("{" + ", ".join(text) + "}"),
        }
        out.append(PreparedEdge(edge_id, source, target_id, kind, edge.level, edge.citizen_id, row))
    return out


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
            data[f] = to_utc(data[f])
    return data


def node_from_props(props: Sequence[Any] | Mapping[str, Any], cls: type[MemoryNode] = MemoryNode,
                    **extra: Any) -> MemoryNode:
    """A stored memory (a ``node_projection``, or its property map) as a model (``cls`` may be ``ConsciousnessNode``).

    A projection whose read copy is there becomes a ``MemoryNode`` without
    a second validation (``_copied``); anything else (a property map,
    a memory read cell by cell, another class) is validated.
    """
    copied, data = _read(props, NODE_CELLS, NODE_COPIED)
    for f in NODE_LISTS:
        data.setdefault(f, [])
    # given, like the lists: a retrieved node's metadata carries it, and the
    # model a retriever registers for the node must count the same fields as set
    data.setdefault("extra", {})
    if copied and cls is MemoryNode and not extra:
        node = _copied(_NODE_FIELDS, data)
        node._check_node()
        return node
    data.update(extra)
    return cls.model_validate(data)


class _Fields:
    """What ``_copied`` needs of a model's fields, read once.

    Pydantic's own ``get_default`` copies a default on every call, which for
    the fifteen-odd fields a copy leaves out cost more than the validation
    it replaced; so the plain defaults (all immutable, checked here) are
    laid out once, in the fields' order, and a record's values go over them.
    """

    def __init__(self, cls: type[Any]) -> None:
        self.cls = cls
        self.defaults: dict[str, Any] = {}
        self.factories: dict[str, Any] = {}
        self.required: set[str] = set()
        for name, info in cls.model_fields.items():
            if info.default_factory is not None:
                self.factories[name] = info.default_factory
                self.defaults[name] = None  # holds the field's place in the order
            elif info.default is PydanticUndefined:
                self.required.add(name)
                self.defaults[name] = None
            else:
                assert isinstance(info.default, (type(None), str, int, float, bool, tuple)), (
                    f"{cls.__name__}.{name}: a mutable default would be shared")
                self.defaults[name] = info.default


_NODE_FIELDS = _Fields(MemoryNode)
_EDGE_FIELDS = _Fields(ConsciousnessRelationship)


def _copied(fields: _Fields, data: dict[str, Any]) -> Any:
    """A record read from its copy, as the model the upsert wrote it from, without validating it again.

    Why: the copy is this package's own serialisation of a validated model,
    written by the upsert in the same statement as the properties, so its
    values passed every check once already (measured on a walk's forty
    memories and forty links: 12.9 -> 8.0 us to read a memory, 10.4 -> 6.8
    a link; the validation alone was 5.3 us a memory).  The record's
    cells (its times, and a memory's ``superseded_by`` and
    ``invalidation_reason``) are the store's, which a supersession or a
    re-write may have changed since: the caller runs the model's own checks
    of them (its interval rules, a personal memory's citizen).  A field the
    copy leaves out gets its default, as validation would give it, and only
    the fields read count as set, as after validation.
    """
    values = dict(fields.defaults)
    values.update(data)
    if len(values) != len(fields.defaults):
        raise ValueError(f"the read copy of a {fields.cls.__name__} has unknown fields: "
                         f"{sorted(set(data) - set(fields.defaults))}")
    if not fields.required <= data.keys():
        raise ValueError(f"the read copy of a {fields.cls.__name__} lacks {sorted(fields.required - data.keys())}")
    for name, factory in fields.factories.items():
        if name not in data:
            values[name] = factory()
    return trusted_model(fields.cls, values, data.keys())


def edge_from_props(props: Sequence[Any] | Mapping[str, Any]) -> ConsciousnessRelationship:
    """A stored link (an ``edge_projection``, or its property map) as a model.

    As for memories (``node_from_props``), a projection whose read copy is
    there is not validated again; a link read cell by cell is.
    """
    copied, data = _read(props, EDGE_CELLS, EDGE_COPIED)
    if copied:
        edge = _copied(_EDGE_FIELDS, data)
        edge._check_relationship()
        return edge
    return ConsciousnessRelationship.model_validate(data)
