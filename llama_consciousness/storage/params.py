"""Query parameters for FalkorDB, serialised fast.

FalkorDB takes parameters in a ``CYPHER name=value ...`` header sent with
the query; values there are data literals that the server parses as
parameters, never as query text.  The official client builds that header
one Python call per value, which for a batch of 256-float embeddings is
most of the cost of a write.  This module produces the same header, with
the same quoting rules, but hands lists to a C JSON encoder (bulk rows to
orjson, the fastest of them).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import orjson

_encode_numbers = json.JSONEncoder(allow_nan=False, separators=(",", ":")).encode


def _quote(text: str) -> str:
    """Exactly the client's quoting (backslash, then double quote).

    A NUL character ends the query text on the server side (it is a C
    string), so it is refused here with a clear error instead.
    """
    if "\x00" in text:
        raise ValueError("text containing a NUL character cannot be stored or searched")
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _is_number(value: Any) -> bool:
    return type(value) in (float, int)


class Vector(list):
    """A list of finite floats known to be a vector: sent without per-item checks."""


class Rows(list):
    """Bulk-write rows: lists of strings, numbers, booleans, nulls and lists (no maps).

    Sent through orjson, whose output for such values is a Cypher list
    literal that FalkorDB reads the same way (the escapes it writes,
    ``\\n \\t \\" \\\\``..., are FalkorDB's too), at a fraction of the
    cost of ``literal``'s per-value calls.  The one escape FalkorDB does not
    read, ``\\u``, marks rows that take the slow path.

    A NaN or an infinity takes the slow path too, which refuses it with a
    clear error.
    """


def _encode_json(value: list) -> str:
    # orjson, not the standard library's C encoder: for the rows of an
    # ingestion of 10,000 memories (their vectors, 60,000 relationship rows)
    # it takes a fifth of the time.  Unsupported values (a surrogate, an
    # integer beyond 64 bits) raise its JSONEncodeError, a TypeError.
    return orjson.dumps(value).decode()


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


def _as_json(value: list, plain: Callable[[list], list]) -> str:
    """``value`` through orjson, or ``literal(plain(value))`` where JSON would not do.

    ``plain`` turns ``value`` into plain lists, which only the slow path needs.
    """
    try:
        text = _encode_json(value)
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
        return literal(plain(value))
    return text


def _plain_rows(rows: list) -> list:
    return [list(row) for row in rows]


class Ids(list):
    """A flat list of strings (ids), sent through the C JSON encoder as ``Rows`` are.

    Why: an upsert looks up the stored hashes of every id of its batch, tens
    of thousands per ingestion, each quoted by a Python call otherwise.
    """




_KEYS: dict[str, str] = {}


def _map_key(key: Any) -> str:
    """```name`:`` for a map key, checked once per distinct key."""
    name = str(key)
    if not name or "`" in name:
        raise ValueError(f"invalid map key {name!r} in a query parameter")
    text = f"`{name}`:"
    if type(key) is str and len(_KEYS) < 4096:
        _KEYS[key] = text
    return text


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
    if kind is Rows:
        return _as_json(value, _plain_rows)
    if kind is Ids:
        return _as_json(value, list)
    if kind in (list, tuple):
        # C fast path for vectors (long lists of numbers)
        if len(value) > 8 and type(value[0]) is float and all(map(_is_number, value)):
            return _encode_numbers(list(value))
        return "[" + ",".join([_quote(item) if type(item) is str else literal(item) for item in value]) + "]"
    if kind is dict:
        # Rows are dicts of a few dozen scalars, thousands per batch: the
        # common cases are inlined and the key texts are cached.
        parts = []
        append = parts.append
        for key, item in value.items():
            name = _KEYS.get(key) if type(key) is str else None
            if name is None:
                name = _map_key(key)
            sort = type(item)
            if sort is str:
                append(name + _quote(item))
            elif item is None:
                append(name + "null")
            else:
                append(name + literal(item))
        return "{" + ",".join(parts) + "}"
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
