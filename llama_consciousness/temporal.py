"""The four temporal modes as parameterised predicates, for Cypher and SQL.

Every memory and relationship carries two intervals, both half-open
``[from, to)`` and open-ended when ``to`` is null:

* valid time ``[valid_at, invalid_at)``: when the fact held in reality;
* transaction time ``[created_at, expired_at)``: when we believed it.

The modes (the spec's, with its time range made precise):

``current``
    valid now and believed now.  Facts whose ``valid_at`` lies in the future
    are not current.
``point_in_time``
    valid at ``as_of_time`` and already recorded and not yet expired at
    ``as_of_time``: what we believed then about then.  A version valid in
    reality at that moment but only recorded later is excluded, which is the
    point of keeping two time axes.
``evolution``
    every version whose *belief* interval overlaps the range
    ``[time_range_start, time_range_end]``; with no range, every version.
    This is the view in which belief changes (temporal dissonances) appear.
``full_history``
    everything ever recorded whose *validity* interval overlaps the range;
    with no range, everything.

Values never enter the query text: the predicate refers to parameters whose
names carry a prefix, so two predicates can live in one query.  FalkorDB
stores times as ``localdatetime`` in UTC at one-second resolution, so times
are sent as ISO-8601 strings without offset and wrapped in
``localdatetime($p)``; Postgres gets timezone-aware datetimes bound by the
driver.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Any, get_args

from llama_consciousness.schema._time import to_utc, utcnow
from llama_consciousness.schema.common import TemporalMode, check_temporal_mode, check_temporal_request

TEMPORAL_MODES: tuple[str, ...] = get_args(TemporalMode)

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


@dataclass(frozen=True)
class TemporalWindow:
    """A validated temporal request: the mode and the times it needs.

    Built once per retrieval so that ``current`` means one instant for all
    the channels of that retrieval.
    """

    mode: str = "current"
    as_of_time: datetime | None = None
    time_range_start: datetime | None = None
    time_range_end: datetime | None = None
    now: datetime = field(default_factory=utcnow)

    def __post_init__(self) -> None:
        check_temporal_mode(self.mode)
        for name in ("as_of_time", "time_range_start", "time_range_end", "now"):
            value = getattr(self, name)
            if value is not None:
                object.__setattr__(self, name, to_utc(value))
        check_temporal_request(self.mode, self.as_of_time, self.time_range_start, self.time_range_end)

    @classmethod
    def from_intention(cls, intention: Any, now: datetime | None = None) -> TemporalWindow:
        """The window of a ``RetrievalIntention`` (or anything with its fields)."""
        return cls(
            mode=intention.temporal_mode,
            as_of_time=getattr(intention, "as_of_time", None),
            time_range_start=getattr(intention, "time_range_start", None),
            time_range_end=getattr(intention, "time_range_end", None),
            now=now or utcnow(),
        )

    @property
    def instant(self) -> datetime | None:
        """The single moment the window looks at, if it looks at one."""
        if self.mode == "current":
            return self.now
        if self.mode == "point_in_time":
            return self.as_of_time
        return None


@dataclass(frozen=True)
class Predicate:
    """A query fragment and the parameters it refers to."""

    text: str
    params: dict[str, Any]


@lru_cache(maxsize=4096)
def cypher_time(value: datetime) -> str:
    """ISO-8601 text for ``localdatetime($p)``: UTC, whole seconds, no offset.

    FalkorDB keeps one-second resolution; truncating here makes what we send
    compare exactly like what we stored.  Cached: a batch repeats the same
    few times (every link derived from a memory carries the memory's).
    """
    return to_utc(value).replace(microsecond=0, tzinfo=None).isoformat()


def _check_identifier(name: str, what: str) -> str:
    if not _IDENTIFIER.match(name):
        raise ValueError(f"{what} must be a plain identifier, got {name!r}")
    return name


def cypher_predicate(window: TemporalWindow, var: str = "n", prefix: str = "t_") -> Predicate:
    """The window as a Cypher boolean expression over ``var``'s properties.

    ``var`` is a node or relationship variable of the caller's query;
    ``prefix`` keeps parameter names apart when several predicates share a
    query (e.g. one for start nodes and one for connected nodes).
    """
    v = _check_identifier(var, "variable")
    p = _check_identifier(prefix, "parameter prefix")
    instant = window.instant
    if instant is not None:
        params = {f"{p}at": cypher_time(instant)}
        at = f"localdatetime(${p}at)"
        text = (
            f"({v}.valid_at <= {at}"
            f" AND ({v}.invalid_at IS NULL OR {v}.invalid_at > {at})"
            f" AND {v}.created_at <= {at}"
            f" AND ({v}.expired_at IS NULL OR {v}.expired_at > {at}))"
        )
        return Predicate(text, params)
    if window.mode == "evolution":
        start_field, end_field = "created_at", "expired_at"
    else:  # full_history
        start_field, end_field = "valid_at", "invalid_at"
    clauses: list[str] = []
    params: dict[str, Any] = {}
    if window.time_range_end is not None:
        params[f"{p}end"] = cypher_time(window.time_range_end)
        clauses.append(f"{v}.{start_field} <= localdatetime(${p}end)")
    if window.time_range_start is not None:
        params[f"{p}start"] = cypher_time(window.time_range_start)
        clauses.append(f"({v}.{end_field} IS NULL OR {v}.{end_field} > localdatetime(${p}start))")
    if not clauses:
        return Predicate("true", {})
    return Predicate("(" + " AND ".join(clauses) + ")", params)


def sql_predicate(window: TemporalWindow, alias: str = "") -> Predicate:
    """The window as a SQL boolean expression with ``%(name)s`` parameters.

    Columns are ``timestamptz`` (see the pgvector store); ``alias`` is an
    optional table alias.  Parameters are bound by the driver, never pasted.
    """
    q = f"{_check_identifier(alias, 'table alias')}." if alias else ""
    instant = window.instant
    if instant is not None:
        text = (
            f"({q}valid_at <= %(t_at)s"
            f" AND ({q}invalid_at IS NULL OR {q}invalid_at > %(t_at)s)"
            f" AND {q}created_at <= %(t_at)s"
            f" AND ({q}expired_at IS NULL OR {q}expired_at > %(t_at)s))"
        )
        return Predicate(text, {"t_at": instant.replace(microsecond=0)})
    if window.mode == "evolution":
        start_field, end_field = "created_at", "expired_at"
    else:
        start_field, end_field = "valid_at", "invalid_at"
    clauses: list[str] = []
    params: dict[str, Any] = {}
    if window.time_range_end is not None:
        params["t_end"] = window.time_range_end.replace(microsecond=0)
        clauses.append(f"{q}{start_field} <= %(t_end)s")
    if window.time_range_start is not None:
        params["t_start"] = window.time_range_start.replace(microsecond=0)
        clauses.append(f"({q}{end_field} IS NULL OR {q}{end_field} > %(t_start)s)")
    if not clauses:
        return Predicate("TRUE", {})
    return Predicate("(" + " AND ".join(clauses) + ")", params)


def is_visible(window: TemporalWindow, record: Any) -> bool:
    """The same rule evaluated in Python on an object with the four fields.

    Used to check query results and by callers that filter records they
    already hold; it must agree with the Cypher and SQL predicates.
    """

    def ts(name: str) -> datetime | None:
        value = getattr(record, name, None) if not isinstance(record, dict) else record.get(name)
        return None if value is None else to_utc(value).replace(microsecond=0)

    valid_at, invalid_at = ts("valid_at"), ts("invalid_at")
    created_at, expired_at = ts("created_at"), ts("expired_at")
    instant = window.instant
    if instant is not None:
        at = instant.replace(microsecond=0)
        return (
            valid_at is not None
            and valid_at <= at
            and (invalid_at is None or invalid_at > at)
            and created_at is not None
            and created_at <= at
            and (expired_at is None or expired_at > at)
        )
    if window.mode == "evolution":
        begin, finish = created_at, expired_at
    else:
        begin, finish = valid_at, invalid_at
    if window.time_range_end is not None:
        if begin is None or begin > window.time_range_end.replace(microsecond=0):
            return False
    if window.time_range_start is not None:
        if finish is not None and finish <= window.time_range_start.replace(microsecond=0):
            return False
    return True
