"""``CallPlan``: what one ingestion call knows of all its memories before it writes any.

Versions and mentions are decided against the whole call, not only the chunks written so far, so the
result does not depend on ``chunk_size``, ``batch_size`` or on whether the call ran once or was resumed
after a kill.  Per level graph, read from the records before the first write: the call's memory ids, the
names of its entity-typed memories (mentions prefer them on equal scores), and the version fields of the
memories that share a base identity with another.  While the call runs, which memories were written
(``processed``) and the mentions waiting for a memory not written yet (``held``); what the call never
writes (dropped) is settled at its end (``ConsciousnessGraphWriter.finish``).  Each graph's plan is used
by one lane at a time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, NamedTuple

from pydantic import TypeAdapter, ValidationError

from llama_consciousness.entities import ENTITY_TYPES
from llama_consciousness.errors import LevelError
from llama_consciousness.levels import graph_name, home_key
from llama_consciousness.schema._time import UTCDateTime
from llama_consciousness.scoring.identity import group_by_identity

_TIME = TypeAdapter(UTCDateTime)
LATEST = datetime.max.replace(tzinfo=timezone.utc)  # a version without a readable created_at: made "now"


class PlannedVersion(NamedTuple):
    """What ordering and ``base_identity`` read of a memory the writer has not seen yet."""

    node_id: str
    supersedes: str | None
    extra: Mapping[str, Any] | None  # read for its base_id
    created_at: Any  # as given; parsed by ``GraphPlan.finalize`` for the versions kept


def version_order(created_at: datetime | None, node_id: str) -> tuple[datetime, str]:
    """The order of versions: creation time in whole seconds (what the graph stores), then id."""
    when = LATEST if created_at is None else created_at.replace(microsecond=0)
    return when, node_id


@dataclass
class HeldMention:
    """A MENTIONS link waiting for its target, a memory of the call not written yet."""

    source: Any  # the mentioning MemoryNode
    name: str
    key: str
    entity: dict[str, Any]
    trigger: str


@dataclass
class GraphPlan:
    """The plan of one level graph (see the module docstring)."""

    home: tuple[str, str | None]
    ids: set[str] = field(default_factory=set)
    entities: dict[str, str] = field(default_factory=dict)  # memory id -> name, entity-typed memories
    versions: dict[str, PlannedVersion] = field(default_factory=dict)  # only versions sharing a base, after finalize
    by_base: dict[str, list[str]] = field(default_factory=dict)  # base identity -> those versions' ids
    processed: set[str] = field(default_factory=set)
    held: dict[str, list[HeldMention]] = field(default_factory=dict)  # target id -> mentions waiting for it
    # the run's entity matching: an index of the graph's names (built on first use) and each name's target
    entity_index: Any = None
    matched: dict[str, str] = field(default_factory=dict)

    def pending(self, node_id: str) -> bool:
        """A memory of the call the writer has not written yet (nor will, if it was dropped)."""
        return node_id in self.ids and node_id not in self.processed

    def finalize(self) -> None:
        """Keep the version fields of memories that share a base identity with another memory of the call."""
        groups = group_by_identity(self.versions.values())
        self.by_base = {base: [v.node_id for v in group] for base, group in groups.items()}
        self.versions = {v.node_id: v._replace(created_at=_parse_time(v.created_at))
                         for group in groups.values() for v in group}

    def unwritten(self) -> set[str]:
        """Memories of the call that matter to another one (a version, a mention's target) and were never
        written: what ``finish`` settles."""
        waiting = {node_id for ids in self.by_base.values() for node_id in ids if node_id not in self.processed}
        return waiting | set(self.held)


def _parse_time(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value
    try:
        return _TIME.validate_python(value)
    except (ValidationError, TypeError, ValueError):
        return None


class CallPlan:
    """The plans of the level graphs one ingestion call writes, keyed by graph name."""

    def __init__(self) -> None:
        self.graphs: dict[str, GraphPlan] = {}
        self._homes: dict[Any, GraphPlan | None] = {}

    def add(self, metadata: Mapping[str, Any], node_id: Any) -> None:
        """A memory record as given (its metadata, its node id); one that names no valid graph is left out."""
        if type(node_id) is not str:
            return
        name, supersedes = metadata.get("name"), metadata.get("supersedes")
        entity = type(name) is str and metadata.get("node_type") in ENTITY_TYPES
        self._put((metadata.get("level"), metadata.get("citizen_id")), node_id.strip(),
                  name.strip() if entity else None, supersedes.strip() if type(supersedes) is str else None,
                  metadata.get("extra"), metadata.get("created_at"))

    def add_model(self, model: Any) -> None:
        """A validated memory (``MemoryNode``): what the first pass of an all-or-nothing call reads."""
        self._put((model.level, model.citizen_id), model.node_id,
                  model.name if model.node_type in ENTITY_TYPES else None, model.supersedes, model.extra,
                  model.created_at if "created_at" in model.model_fields_set else None)

    def _put(self, place: tuple[Any, Any], node_id: str, name: str | None, supersedes: str | None, extra: Any,
             created_at: Any) -> None:
        try:
            plan = self._homes[place]
        except KeyError:
            plan = self._homes[place] = self._graph(*place)
        except TypeError:  # an unhashable value: not cached
            plan = self._graph(*place)
        if plan is None:
            return
        plan.ids.add(node_id)
        if name:
            plan.entities[node_id] = name
        extra = extra if type(extra) is dict and "base_id" in extra else None
        plan.versions[node_id] = PlannedVersion(node_id, supersedes, extra, created_at)

    def _graph(self, level: Any, citizen: Any) -> GraphPlan | None:
        if type(level) is not str or not (citizen is None or type(citizen) is str):
            return None
        key = home_key(level, citizen.strip() if citizen else citizen)
        try:
            return self.graphs.setdefault(graph_name(*key), GraphPlan(key))
        except (LevelError, ValueError):
            return None

    def add_all(self, records: Iterable[Any]) -> None:
        """Records (TextNodes or the pipeline's parsed records) with ``metadata`` and ``node_id``."""
        for record in records:
            metadata = record.metadata
            if metadata.get("kind") != "relationship":
                self.add(metadata, metadata.get("node_id", record.node_id))

    def add_objects(self, parsed: Iterable[tuple[int, Mapping[str, Any]]]) -> int:
        """Parsed lines of a memory file, ``(line, object)``, as ``pipeline._raw_record`` reads them; returns
        their number."""
        count = 0
        for count, (line, obj) in enumerate(parsed, 1):
            if obj.get("kind", "memory") != "relationship":
                self.add(obj, str(obj.get("node_id", "") or f"line-{line}"))
        return count

    def finalize(self) -> None:
        self._homes.clear()
        for plan in self.graphs.values():
            plan.finalize()
