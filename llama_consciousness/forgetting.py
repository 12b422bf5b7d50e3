"""Forget and restore: a memory people can take things out of, and put back within a window.

``ConsciousnessMemory.forget`` / ``restore`` call these.  A forget is a bitemporal retraction (see
``storage.retraction``): nothing is deleted, the memory simply stops being believed from now, with the
reason, who asked and when kept on it; ``full_history`` and the inspector still show it.  A restore within
the window (30 days by default) makes it believed again exactly as it was, and is recorded beside the
forget.  Erasing, which removes the text everywhere it was copied, is ``memory.erase``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator

from llama_consciousness.schema import ForgetReason, ForgetReport, RestoreReport, Retraction
from llama_consciousness.storage.reader import MemoryKeeper
from llama_consciousness.schema._time import UTCDateTime, utcnow
from llama_consciousness.storage import retraction
from llama_consciousness.storage.level_store import NODE_LABEL, Query
from llama_consciousness.temporal import cypher_time


RESTORE_WINDOW = timedelta(days=30)
"""How long after a forget a restore is still accepted, unless the memory or the call says otherwise."""

MAX_SELECTED = 100_000
"""Memories one filter may select: a filter that matches more is refused rather than run."""


class MemorySelector(BaseModel):
    """Which memories of one level graph a forget (or a retention policy) is about, when not named by id.
    Every condition given must hold; at least one must be given."""

    model_config = ConfigDict(extra="forbid")

    node_types: Optional[list[str]] = Field(default=None, description="only memories of these node types")
    created_before: Optional[UTCDateTime] = Field(default=None, description="recorded before this time")
    created_after: Optional[UTCDateTime] = Field(default=None, description="recorded at or after this time")
    contains: Optional[str] = Field(default=None, min_length=1, max_length=1000,
                                    description="text in the name or description (case-insensitive)")
    description: Optional[str] = Field(default=None, min_length=1,
                                       description="exactly this description (a chat message as stored)")
    forgotten_before: Optional[UTCDateTime] = Field(default=None, description=(
        "forgotten memories, forgotten before this time (the others select current memories only)"))
    include_forgotten: bool = Field(default=False, description="forgotten memories as well (an erase)")
    include_entities: bool = Field(default=False, description="entity memories (names) as well")

    @field_validator("node_types")
    @classmethod
    def _some_types(cls, value: Optional[list[str]]) -> Optional[list[str]]:
        if value is not None and not value:
            raise ValueError("node_types, when given, must name at least one type")
        return value

    def is_empty(self) -> bool:
        """True when no criterion is set (a selector that would select every memory of the level)."""
        return all(getattr(self, name) is None for name in
                   ("node_types", "created_before", "created_after", "contains", "description", "forgotten_before"))

    def plan(self, limit: int = MAX_SELECTED) -> Any:
        """The ids of the memories it selects: current ones (those already forgotten are not selected again),
        or with ``forgotten_before`` forgotten ones."""
        if self.is_empty():
            raise ValueError("a selector needs at least one condition (node_types, created_before, "
                             "created_after, contains, description or forgotten_before): a whole graph is not a filter")
        params: dict[str, Any] = {"limit": int(limit) + 1}
        if self.forgotten_before is None:
            where = [] if self.include_forgotten else ["n.forgotten_at IS NULL"]
        else:
            where = ["n.forgotten_at < $forgotten_before"]
            params["forgotten_before"] = cypher_time(self.forgotten_before)
        if not self.include_entities:
            where.append("coalesce(n.is_entity, false) = false")
        if self.node_types is not None:
            where.append("n.node_type IN $types")
            params["types"] = list(self.node_types)
        if self.created_before is not None:
            where.append("n.created_at < $before")
            params["before"] = cypher_time(self.created_before)
        if self.created_after is not None:
            where.append("n.created_at >= $after")
            params["after"] = cypher_time(self.created_after)
        if self.contains is not None:
            where.append("(toLower(n.name) CONTAINS $contains OR toLower(coalesce(n.description, '')) "
                         "CONTAINS $contains)")
            params["contains"] = self.contains.lower()
        if self.description is not None:
            where.append("n.description = $description")
            params["description"] = self.description
        rows = yield Query(f"MATCH (n:{NODE_LABEL}) WHERE {' AND '.join(where) or 'true'} RETURN n.node_id LIMIT $limit",
                           params, read_only=True)
        if len(rows) > limit:
            raise ValueError(f"the selector matches more than {limit} memories: narrow it")
        return sorted(row[0] for row in rows)


def node_id_list(node_ids: Any) -> list[str]:
    """``node_ids`` (one id, or several) as a list without repeats; ``ValueError`` unless each is a non-empty
    string."""
    if isinstance(node_ids, str):
        node_ids = [node_ids]
    ids = list(dict.fromkeys(node_ids))
    if not all(isinstance(i, str) and i.strip() for i in ids):
        raise ValueError("node ids must be non-empty strings")
    return ids


def forget(memory: MemoryKeeper, node_ids: str | Sequence[str] | None, level: str,
           citizen_id: str | None = None, *, reason: ForgetReason | str, by: str | None = None,
           note: str | None = None, where: MemorySelector | None = None,
           at: datetime | None = None) -> ForgetReport:
    """See ``ConsciousnessMemory.forget``."""
    reason = ForgetReason(reason)  # a ValueError naming the value for an unknown reason
    if (node_ids is None) == (where is None):
        raise ValueError("forget takes either node_ids or a selector (where=...), not both, not neither")
    if by is not None and (not isinstance(by, str) or not by.strip()):
        raise ValueError("by, when given, must say who asked (a non-empty string)")
    at = utcnow() if at is None else at
    event = Retraction(event="forgotten", at=at, reason=reason, by=by, note=note).model_dump_json(exclude_none=True)
    store = memory.level(level, citizen_id)  # not ``writable``: a forget must not create a graph
    there = store.exists()
    selector = MemorySelector.model_validate(where) if where is not None else None
    if selector is None:
        ids = node_id_list(node_ids)
    else:
        ids = store.run(selector.plan()) if there else []
    before = store.run(retraction.states(ids)) if ids and there else {}
    fresh = [i for i in ids if i in before and before[i] is None]
    done = store.run(retraction.forget(fresh, at, reason.value, by, event)) if fresh else []
    report = ForgetReport(graph=store.plans.graph, at=at, reason=reason, forgotten=done,
                          already_forgotten=[i for i in ids if i in before and i not in done],
                          missing=[i for i in ids if i not in before])
    _settle(memory, store, level, done)
    return report


def restore(memory: MemoryKeeper, node_ids: str | Sequence[str], level: str, citizen_id: str | None = None,
            *, by: str | None = None, note: str | None = None, window: timedelta | None = None,
            at: datetime | None = None) -> RestoreReport:
    """See ``ConsciousnessMemory.restore``."""
    window = memory.restore_window if window is None else window
    if not isinstance(window, timedelta) or window <= timedelta(0):
        raise ValueError(f"the restore window must be a positive timedelta, got {window!r}")
    at = utcnow() if at is None else at
    ids = node_id_list(node_ids)
    event = Retraction(event="restored", at=at, by=by, note=note).model_dump_json(exclude_none=True)
    store = memory.level(level, citizen_id)  # not ``writable``: a restore must not create a graph
    before = store.run(retraction.states(ids)) if ids and store.exists() else {}
    since = at - window
    forgotten = [i for i in ids if before.get(i) is not None]
    done = store.run(retraction.restore(forgotten, since, event)) if forgotten else []
    report = RestoreReport(
        graph=store.plans.graph, at=at, restored=done,
        not_forgotten=[i for i in ids if i in before and before[i] is None],
        too_late=[i for i in ids if before.get(i) is not None and i not in done],
        missing=[i for i in ids if i not in before])
    _settle(memory, store, level, done)
    return report


def _settle(memory: MemoryKeeper, store: Any, level: str, changed: list[str]) -> None:
    """What depends on a memory's belief interval follows it: caches of this process, and pgvector's
    mirror of validity (FalkorDB's own index reads the node)."""
    if not changed:
        return
    memory.bump_graph(store.plans.graph)
    vectors = memory.vectors(level)
    if vectors.mirrors_validity:
        vectors.mirror_validity(store.plans, store.get_nodes(changed))

