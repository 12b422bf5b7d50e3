"""Pydantic models built from values already known to be valid, without validating them again.

Why: on hot paths (a retrieval builds a hundred retrieved nodes; an
ingestion rebuilds every record that comes back from its worker) the
values came straight from another validated model or from this package's
own parsing, and validating them a second time cost more than the work
around it.  The caller vouches for the values; the result is an ordinary
instance of the model in every other respect.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)

_set = object.__setattr__


def trusted_model(cls: type[M], fields: dict[str, Any], fields_set: Iterable[str] | None = None) -> M:
    """An instance of ``cls`` holding ``fields`` as they are (every field of ``cls`` must be there).

    ``fields_set`` is what pydantic reports as explicitly set (by default,
    every key of ``fields``).  Models with private attributes or extra
    fields are not supported: both are left empty.
    """
    out = cls.__new__(cls)
    _set(out, "__dict__", fields)
    _set(out, "__pydantic_fields_set__", set(fields if fields_set is None else fields_set))
    _set(out, "__pydantic_extra__", None)
    _set(out, "__pydantic_private__", None)
    return out
