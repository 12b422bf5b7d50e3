"""Forgetting and restoring memories in one level graph, as plans (``LevelGraphStore.run``).

A forget expires the memory at the moment it is forgotten (``expired_at``), the bitemporal way of saying "no
longer believed from now": every query of the package already leaves expired memories out of ``current``
and later ``point_in_time`` windows, walks and spreading never pass through them, and a retrieval's use does
not count them (one recorded to begin later than now is expired at its beginning: never believed).  What
the memory's expiry was before is kept (``expired_before_forget``, -1 for none), so a
restore gives back exactly the memory that was there: current again, or still superseded if it was.  Links,
vector and keyword documents are left alone; that is what makes a restore exact.

Properties are cleared in a ``SET`` of their own, after the one that adds values: FalkorDB 4 lost the values
of a ``SET`` that also cleared another property (seen with ``unsupersede``).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from datetime import datetime
from typing import Any

from llama_consciousness.storage.level_store import NODE_LABEL, Query
from llama_consciousness.storage.params import Ids
from llama_consciousness.temporal import cypher_time

Plan = Generator[Any, Any, Any]

_STATE = f"""
UNWIND $ids AS id
OPTIONAL MATCH (n:{NODE_LABEL} {{node_id: id}})
RETURN id, n IS NOT NULL, n.forgotten_at
"""

_FORGET = f"""
UNWIND $ids AS id
MATCH (n:{NODE_LABEL} {{node_id: id}})
WHERE n.forgotten_at IS NULL
SET n.expired_before_forget = coalesce(n.expired_at, -1),
    n.expired_at = CASE WHEN n.created_at > $at THEN n.created_at
                        WHEN n.expired_at IS NULL OR n.expired_at > $at THEN $at ELSE n.expired_at END,
    n.forgotten_at = $at, n.forgotten_reason = $reason, n.forgotten_by = $by,
    n.retractions = coalesce(n.retractions, []) + [$event]
RETURN id
"""

# ``by`` may be absent: then it is not written at all (a null in the SET above would clear, see the module).
_FORGET_UNSIGNED = _FORGET.replace(", n.forgotten_by = $by", "")

_RESTORE = f"""
UNWIND $ids AS id
MATCH (n:{NODE_LABEL} {{node_id: id}})
WHERE n.forgotten_at IS NOT NULL AND n.forgotten_at >= $since
WITH n, id, coalesce(n.expired_before_forget, -1) AS prior
SET n.retractions = coalesce(n.retractions, []) + [$event]
WITH n, id, prior
SET n.expired_at = CASE WHEN prior <> -1 THEN prior
                        WHEN n.superseded_by IS NOT NULL THEN n.expired_at
                        ELSE NULL END,
    n.forgotten_at = NULL, n.forgotten_reason = NULL, n.forgotten_by = NULL, n.expired_before_forget = NULL
RETURN id
"""


def states(node_ids: Sequence[str]) -> Plan:
    """``{node_id: forgotten_at (seconds) or None}`` for the memories of ``node_ids`` stored here."""
    rows = yield Query(_STATE, {"ids": Ids(node_ids)}, read_only=True)
    return {row[0]: row[2] for row in rows if row[1]}


def forget(node_ids: Sequence[str], at: datetime, reason: str, by: str | None, event: str) -> Plan:
    """Expire the memories of ``node_ids`` not forgotten yet at ``at``, with ``reason``, ``by`` and the
    retraction ``event`` (a JSON text) appended to their record; returns the ids forgotten now."""
    params = {"ids": Ids(node_ids), "at": cypher_time(at), "reason": reason, "event": event}
    if by is not None:
        params["by"] = by
    rows = yield Query(_FORGET if by is not None else _FORGET_UNSIGNED, params)
    return [row[0] for row in rows]


def restore(node_ids: Sequence[str], since: datetime, event: str) -> Plan:
    """Make the memories of ``node_ids`` forgotten at or after ``since`` believed again as they were before;
    ``event`` (a JSON text) is appended to their record.  Returns the ids restored."""
    rows = yield Query(_RESTORE, {"ids": Ids(node_ids), "since": cypher_time(since), "event": event})
    return [row[0] for row in rows]
