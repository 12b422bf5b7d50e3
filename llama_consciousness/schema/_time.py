"""Timezone handling shared by every schema model.

The graph and vector stores compare timestamps across processes and
machines; mixing naive and aware datetimes either raises ``TypeError`` at
comparison time or silently shifts instants by the local offset.  Every
datetime that enters the schema is therefore normalised to aware UTC once,
at the boundary.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Annotated

from pydantic import AfterValidator

__all__ = ["UTCDateTime", "to_utc", "utcnow"]


def utcnow() -> datetime:
    """Aware "now" in UTC (``datetime.utcnow()`` is naive and deprecated)."""
    return datetime.now(timezone.utc)


def to_utc(value: datetime) -> datetime:
    """Normalise to aware UTC.

    Naive values are read as UTC rather than local time because the stores
    persist UTC and a server's local zone is an accident of deployment.
    """
    if value.tzinfo is timezone.utc:  # the common case (parsed "Z" times, utcnow): nothing to do
        return value
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        return value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


UTCDateTime = Annotated[datetime, AfterValidator(to_utc)]
"""A datetime (or ISO-8601 string) normalised to aware UTC on validation."""
