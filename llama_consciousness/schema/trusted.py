"""Pydantic models built from values already known to be valid, without validating them again.

On hot paths (a retrieval builds a hundred nodes; an ingestion rebuilds every record back from its worker)
validating a second time cost more than the work around it.  The caller vouches for the values.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)

_set = object.__setattr__


def trusted_model(cls: type[M], fields: dict[str, Any], fields_set: Iterable[str] | None = None) -> M:
    """An instance of ``cls`` holding ``fields`` (every field of ``cls``) as they are; ``fields_set`` is what
    pydantic reports as explicitly set (default: every key).  Private attributes and extras are left empty."""
    out = cls.__new__(cls)
    _set(out, "__dict__", fields)
    _set(out, "__pydantic_fields_set__", set(fields if fields_set is None else fields_set))
    _set(out, "__pydantic_extra__", None)
    _set(out, "__pydantic_private__", None)
    return out
