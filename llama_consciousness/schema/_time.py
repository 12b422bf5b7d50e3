"""Timezone handling shared by every schema model.

Mixing naive and aware datetimes raises ``TypeError`` or silently shifts instants by the local offset, so
every datetime that enters the schema is normalised to aware UTC once, at the boundary.
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
    """Normalise to aware UTC (naive values are UTC: a server's local zone is an accident of deployment)."""
    if value.tzinfo is timezone.utc:  # the common case (parsed "Z" times, utcnow): nothing to do
        return value
    if value.tzinfo is None or value.tzinfo.utcoffset(value) is None:
        return value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


UTCDateTime = Annotated[datetime, AfterValidator(to_utc)]
"""A datetime (or ISO-8601 string) normalised to aware UTC on validation."""
