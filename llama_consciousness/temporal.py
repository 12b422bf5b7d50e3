"""The four temporal modes as parameterised predicates, for Cypher and SQL (and in Python).

Every memory and relationship carries two half-open intervals, open-ended when
the end is null: valid time ``[valid_at, invalid_at)`` (when the fact held) and
transaction time ``[created_at, expired_at)`` (when we believed it).

* ``current``: valid now and believed now (a future ``valid_at`` is not current).
* ``point_in_time``: valid at ``as_of_time`` and believed at ``as_of_time``: what we
  believed then about then (a version recorded later is excluded, which is the
  point of keeping two time axes).
* ``evolution``: every version whose *belief* interval overlaps the range (no
  range: every version); the view in which belief changes appear.
* ``full_history``: everything whose *validity* interval overlaps the range.

Values never enter the query text, only prefixed parameter names.  FalkorDB levels
store times as integer seconds since 1970 (UTC, one-second resolution): its
``localdatetime`` comparisons wrap around 2^31 seconds, so a memory of 1950 or
2100 compared with today would be on the wrong side.  Any time the schema
accepts (years 1 to 9999) compares correctly as an integer.  Postgres gets aware
datetimes bound by the driver.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import Any, get_args

from llama_consciousness.schema._time import to_utc, utcnow
from llama_consciousness.schema.common import TemporalMode, check_temporal_mode, check_temporal_request

TEMPORAL_MODES: tuple[str, ...] = get_args(TemporalMode)

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


@dataclass(frozen=True)
class TemporalWindow:
    """A validated temporal request, built once per retrieval so that ``current`` is one instant for all its channels."""

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


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


@lru_cache(maxsize=4096)
def cypher_time(value: datetime) -> int:
    """A time as FalkorDB levels store it: whole seconds since 1970 (UTC), negative before.

    Cached: a batch repeats the same few times (every link derived from a memory carries the memory's).
    """
    return (to_utc(value) - _EPOCH) // _SECOND


def from_cypher_time(value: int | datetime) -> datetime:
    """A stored time back as an aware datetime (graphs written before 0.2 hold ``localdatetime`` values)."""
    return to_utc(value) if isinstance(value, datetime) else _EPOCH + timedelta(seconds=value)


@lru_cache(maxsize=4096)
def iso_time(value: datetime) -> str:
    """ISO-8601 text of a time in UTC to the second: what content hashes are computed on."""
    return to_utc(value).replace(microsecond=0, tzinfo=None).isoformat()


_SECOND = timedelta(seconds=1)


def _check_identifier(name: str, what: str) -> str:
    if not _IDENTIFIER.match(name):
        raise ValueError(f"{what} must be a plain identifier, got {name!r}")
    return name


def _predicate(window: TemporalWindow, column: str, key: str, placeholder: str,
               convert: Callable[[datetime], Any], true: str) -> Predicate:
    """The window over the fields ``<column><field>``, with parameters ``<key><name>`` bound by ``placeholder``."""
    params: dict[str, Any] = {}

    def bind(name: str, value: datetime) -> str:
        params[key + name] = convert(value)
        return placeholder.format(key + name)

    if window.instant is not None:
        at = bind("at", window.instant)
        valid, invalid, created, expired = (column + f for f in ("valid_at", "invalid_at", "created_at", "expired_at"))
        text = (f"({valid} <= {at} AND ({invalid} IS NULL OR {invalid} > {at})"
                f" AND {created} <= {at} AND ({expired} IS NULL OR {expired} > {at}))")
        return Predicate(text, params)
    begin, end = ("created_at", "expired_at") if window.mode == "evolution" else ("valid_at", "invalid_at")
    clauses: list[str] = []
    if window.time_range_end is not None:
        clauses.append(f"{column}{begin} <= {bind('end', window.time_range_end)}")
    if window.time_range_start is not None:
        clauses.append(f"({column}{end} IS NULL OR {column}{end} > {bind('start', window.time_range_start)})")
    return Predicate("(" + " AND ".join(clauses) + ")", params) if clauses else Predicate(true, {})


def cypher_predicate(window: TemporalWindow, var: str = "n", prefix: str = "t_") -> Predicate:
    """The window as a Cypher boolean expression over ``var``'s properties.

    ``prefix`` keeps parameter names apart when several predicates share a query.
    """
    return _predicate(window, f"{_check_identifier(var, 'variable')}.",
                      _check_identifier(prefix, "parameter prefix"), "${}", cypher_time, "true")


def sql_predicate(window: TemporalWindow, alias: str = "") -> Predicate:
    """The window as a SQL boolean expression over ``timestamptz`` columns, with ``%(name)s`` parameters."""
    column = f"{_check_identifier(alias, 'table alias')}." if alias else ""
    return _predicate(window, column, "t_", "%({})s", lambda value: value.replace(microsecond=0), "TRUE")


def is_visible(window: TemporalWindow, record: Any) -> bool:
    """The same rule in Python, on an object or a dict with the four fields (it must agree with the predicates)."""

    def ts(name: str) -> datetime | None:
        value = getattr(record, name, None) if not isinstance(record, dict) else record.get(name)
        return None if value is None else to_utc(value).replace(microsecond=0)

    valid_at, invalid_at = ts("valid_at"), ts("invalid_at")
    created_at, expired_at = ts("created_at"), ts("expired_at")
    if window.instant is not None:
        at = window.instant.replace(microsecond=0)
        return (valid_at is not None and valid_at <= at and (invalid_at is None or invalid_at > at)
                and created_at is not None and created_at <= at and (expired_at is None or expired_at > at))
    begin, end = (created_at, expired_at) if window.mode == "evolution" else (valid_at, invalid_at)
    range_end, range_start = window.time_range_end, window.time_range_start
    if range_end is not None and (begin is None or begin > range_end.replace(microsecond=0)):
        return False
    return range_start is None or end is None or end > range_start.replace(microsecond=0)
