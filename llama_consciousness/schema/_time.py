"""Timezone handling shared by every schema model.

Mixing naive and aware datetimes raises ``TypeError`` or silently shifts instants by the local offset, so
every datetime that enters the schema is normalised to aware UTC once, at the boundary.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Annotated, Any

from pydantic import AfterValidator

__all__ = ["UTCDateTime", "parse_time", "to_utc", "utcnow"]


def utcnow() -> datetime:
    """Aware "now" in UTC (``datetime.utcnow()`` is naive and deprecated)."""
    return datetime.now(timezone.utc)


def to_utc(value: datetime) -> datetime:
    """Normalise to aware UTC (naive values are UTC: a server's local zone is an accident of deployment)."""
    if value.tzinfo is timezone.utc:  # the common case (parsed "Z" times, utcnow): nothing to do
        return value
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        return value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


def parse_time(value: Any) -> datetime | None:
    """An aware UTC datetime from a datetime or ISO-8601 text (``2025-09-10``, ``...T12:00:00Z``); None when
    it is neither, for the caller to refuse in its own words."""
    if isinstance(value, datetime):
        return to_utc(value)
    if isinstance(value, str) and value:
        try:
            return to_utc(datetime.fromisoformat(value.strip()))
        except ValueError:
            return None
    return None


UTCDateTime = Annotated[datetime, AfterValidator(to_utc)]
"""A datetime (or ISO-8601 string) normalised to aware UTC on validation."""
