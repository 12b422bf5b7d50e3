"""``CallPlan``: what one ingestion call knows of all its memories before it writes any.

Why: a call is written chunk after chunk and batch after batch, and each
decision the writer makes from what is stored would otherwise depend on
which memories the chunks before it happened to hold.  A mention of
"Chiara" in the first chunk would get an entity node of its own while the
Person memory named Chiara waits in the third; a new version written before
its old one would leave the old one current.  A rerun, or a run resumed
after a kill, sees everything stored and decides otherwise, so the result
would depend on ``chunk_size``, ``batch_size`` and on whether the call ran
once.  The plan holds, per level graph, what such decisions need of the
whole call, read from the records (no validation, no parsing beyond what is
used), before the first write:

* the ids of the call's memories;
* the names of its entity-typed memories (mentions match these too, and
  prefer them to entity nodes on equal scores);
* the version fields of memories that share a base identity with another
  memory of the call (a version not written yet keeps its neighbours'
  supersession waiting until it is).

While the call runs, each graph's plan records which memories the writer
has written (``processed``) and the mentions waiting for a memory not
written yet (``held``).  A memory of the plan that the call never writes
(dropped as invalid, as an injection, as a near-duplicate) is settled at
the end of the call (``ConsciousnessGraphWriter.finish``), the same way on
every run.  Each graph's plan is used by one lane at a time (``lanes``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timezone
from types import MappingProxyType
from typing import Any, NamedTuple

from pydantic import TypeAdapter, ValidationError

from llama_consciousness.entities import ENTITY_TYPES
from llama_consciousness.errors import LevelError
from llama_consciousness.levels import graph_name, home_key
from llama_consciousness.schema._time import UTCDateTime
from llama_consciousness.scoring.identity import base_identity

_TIME = TypeAdapter(UTCDateTime)
LATEST = datetime.max.replace(tzinfo=timezone.utc)
"""Where a planned version without a readable ``created_at`` sorts: it will be created "now", after the others."""


_NO_EXTRA: Mapping[str, Any] = MappingProxyType({})  # what ``base_identity`` reads of an ``extra`` without base_id


class PlannedVersion(NamedTuple):
    """What ordering and ``base_identity`` read of a memory the writer has not seen yet."""

    node_id: str
    supersedes: str | None
    extra: Mapping[str, Any]
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
        groups: dict[str, list[str]] = {}
        versions = self.versions
        for node_id, version in versions.items():
            groups.setdefault(base_identity(version, versions), []).append(node_id)
        self.by_base = {base: ids for base, ids in groups.items() if len(ids) > 1}
        kept: dict[str, PlannedVersion] = {}
        for ids in self.by_base.values():
            for node_id in ids:
                version = versions[node_id]
                if not isinstance(version.created_at, datetime):
                    version = version._replace(created_at=_parse_time(version.created_at))
                kept[node_id] = version
        self.versions = kept

    def unwritten(self) -> list[str]:
        """Memories of the call that matter to another one (a version, a mention's target) and were never
        written: what ``finish`` settles."""
        waiting = {node_id for ids in self.by_base.values() for node_id in ids if node_id not in self.processed}
        return sorted(waiting | set(self.held))


def _parse_time(value: Any) -> datetime | None:
    if value is None:
        return None
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
        place = (metadata.get("level"), metadata.get("citizen_id"))
        try:
            plan = self._homes[place]
        except (KeyError, TypeError):
            plan = self._graph(place)
        if plan is None or type(node_id) is not str:
            return
        node_id = node_id.strip()
        plan.ids.add(node_id)
        name = metadata.get("name")
        if type(name) is str and metadata.get("node_type") in ENTITY_TYPES and name.strip():
            plan.entities[node_id] = name.strip()
        supersedes, extra = metadata.get("supersedes"), metadata.get("extra")
        plan.versions[node_id] = PlannedVersion(
            node_id, supersedes.strip() if type(supersedes) is str else None,
            extra if type(extra) is dict and "base_id" in extra else _NO_EXTRA, metadata.get("created_at"))

    def add_model(self, model: Any) -> None:
        """A validated memory (``MemoryNode``): what the first pass of an all-or-nothing call reads."""
        place = (model.level, model.citizen_id)
        plan = self._homes[place] if place in self._homes else self._graph(place)
        if plan is None:
            return
        node_id = model.node_id
        plan.ids.add(node_id)
        if model.node_type in ENTITY_TYPES:
            plan.entities[node_id] = model.name
        plan.versions[node_id] = PlannedVersion(
            node_id, model.supersedes, model.extra if "base_id" in model.extra else _NO_EXTRA,
            model.created_at if "created_at" in model.model_fields_set else None)

    def _graph(self, place: tuple[Any, Any]) -> GraphPlan | None:
        level, citizen = place
        plan = None
        if type(level) is str and (citizen is None or type(citizen) is str):
            key = home_key(level, citizen.strip() if citizen else citizen)
            try:
                name = graph_name(*key)
            except (LevelError, ValueError):
                name = None
            if name is not None:
                plan = self.graphs.get(name) or self.graphs.setdefault(name, GraphPlan(key))
        try:
            self._homes[place] = plan
        except TypeError:  # an unhashable value: not cached
            pass
        return plan

    def add_all(self, records: Iterable[Any]) -> None:
        """Records (TextNodes or the pipeline's parsed records) with ``metadata`` and ``node_id``."""
        for record in records:
            metadata = record.metadata
            if metadata.get("kind") != "relationship":
                self.add(metadata, metadata.get("node_id", record.node_id))

    def add_objects(self, parsed: Iterable[tuple[int, Mapping[str, Any]]]) -> None:
        """Parsed lines of a memory file, ``(line, object)``, as ``pipeline._raw_record`` reads them."""
        for line, obj in parsed:
            if obj.get("kind", "memory") != "relationship":
                self.add(obj, str(obj.get("node_id", "") or f"line-{line}"))

    def finalize(self) -> CallPlan:
        self._homes.clear()
        for plan in self.graphs.values():
            plan.finalize()
        return self

    def graph(self, name: str) -> GraphPlan | None:
        return self.graphs.get(name)
