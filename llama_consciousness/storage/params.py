"""Query parameters for FalkorDB, serialised fast.

FalkorDB takes parameters in a ``CYPHER name=value ...`` header sent with
the query: data literals the server parses as parameters, never as query
text.  The official client builds it one Python call per value, most of the
cost of a write of 256-float embeddings; this module writes the same
header, with the same quoting, but hands vectors and bulk rows to C encoders.
"""

from __future__ import annotations

import json
import math
from typing import Any

import orjson

_encode_numbers = json.JSONEncoder(allow_nan=False, separators=(",", ":")).encode


def _quote(text: str) -> str:
    """The client's quoting (backslash, then double quote); a NUL, which ends the query text, is refused."""
    if "\x00" in text:
        raise ValueError("text containing a NUL character cannot be stored or searched")
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


class Vector(list):
    """A list of finite floats known to be a vector: sent without per-item checks."""


class Rows(list):
    """Bulk-write rows: lists of strings, numbers, booleans, nulls and lists (no maps), sent through orjson.

    Its output for such values is a Cypher list literal FalkorDB reads the
    same way (the escapes it writes, ``\\n \\" \\\\``..., are FalkorDB's too),
    at a fraction of the cost of per-value calls.  The one escape FalkorDB
    does not read, ``\\u``, and NaNs or infinities, take the slow path.
    """


class Ids(list):
    """A flat list of strings (ids), sent as ``Rows`` are (an upsert looks up every id of its batch)."""


def _finite(items: list) -> bool:
    """Whether no number in ``items`` (or in its nested lists) is a NaN or an infinity."""
    isfinite = math.isfinite
    for item in items:
        kind = type(item)
        if kind is float:
            if not isfinite(item):
                return False
        elif (kind is list or kind is tuple) and not _finite(item):
            return False
    return True


def _nones(items: list) -> int:
    """The Nones among ``items`` and the items of its lists (two levels: rows and their fields)."""
    return items.count(None) + sum([item.count(None) for item in items if type(item) is list or type(item) is tuple])


def _as_json(value: list) -> str:
    """``value`` through orjson (a fifth of the standard encoder's time), or per value where JSON would not do."""
    try:
        text = orjson.dumps(value).decode()
    except (TypeError, ValueError):  # a value JSON cannot hold: the slow path says which, or sends it
        text = None
    # orjson writes a NaN or an infinity as null, where the standard encoder
    # (allow_nan=False) refused it.  Each null of the text is a None, such a
    # number, or a word inside a string: when the text has no more nulls
    # than the first two levels have Nones, it has no such number (counting
    # is a C loop; the scan in Python, for the rare other texts, is not).
    if text is not None and "null" in text and text.count("null") != _nones(value) and not _finite(value):
        text = None
    if text is None or "\\u" in text:
        # Control characters and NULs come out as \u escapes (and so may a
        # harmless backslash before a "u"): per-value quoting sends the
        # former raw and refuses NULs with a clear error.
        return literal(list(value))
    return text


def _map_key(key: Any) -> str:
    name = str(key)
    if not name or "`" in name:
        raise ValueError(f"invalid map key {name!r} in a query parameter")
    return f"`{name}`:"


def literal(value: Any) -> str:
    """One parameter value as the header literal FalkorDB parses."""
    kind = type(value)
    if kind is str:
        return _quote(value)
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if kind is int:
        return str(value)
    if kind is float:
        if not math.isfinite(value):
            raise ValueError(f"non-finite number {value!r} cannot be a query parameter")
        return repr(value)
    if kind is Vector:
        return _encode_numbers(value)
    if kind is Rows or kind is Ids:
        return _as_json(value)
    if kind in (list, tuple):
        return "[" + ",".join(map(literal, value)) + "]"
    if kind is dict:
        return "{" + ",".join(_map_key(key) + literal(item) for key, item in value.items()) + "}"
    raise TypeError(f"cannot send {kind.__name__} as a query parameter")


def header(params: dict[str, Any] | None) -> str:
    """The ``CYPHER a=1 b="x" `` header for ``params`` (empty without params)."""
    if not params:
        return ""
    out = ["CYPHER"]
    for name, value in params.items():
        if not str(name).isidentifier():
            raise ValueError(f"invalid parameter name {name!r}")
        out.append(f"{name}={literal(value)}")
    return " ".join(out) + " "
