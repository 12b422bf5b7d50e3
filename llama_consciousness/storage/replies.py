"""Query replies read fast: the compact result set, decoded in one pass.

The official client decodes every value through a chain of calls, which for
a retrieval's rows of forty properties cost more than the server's own time
at 50K memories.  Our queries return only scalars, lists and maps: those are
decoded here, anything else (nodes, paths...) by the client's parser.  A
reply is ``[header, rows, stats]`` (or ``[stats]``), each cell a ``[type,
value]`` pair, strings already decoded (``decode_responses=True``).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from redis.exceptions import ResponseError

# FalkorDB's value types in compact replies (ResultSetScalarTypes).
NULL, STRING, INTEGER, BOOLEAN, DOUBLE, ARRAY, EDGE, NODE, PATH, MAP, POINT, VECTORF32, DATETIME = range(1, 14)


class _Unsupported(Exception):
    """A value this module does not decode (the client's parser will)."""


def _decode(cell: list[Any]) -> Any:
    kind, value = cell
    if kind == STRING:
        return value if type(value) is str else value.decode()
    if kind == DOUBLE:
        return float(value)
    if kind == NULL:
        return None
    if kind == INTEGER:
        return int(value)
    if kind == ARRAY:
        return _values(value)
    if kind == MAP:
        # keys are plain strings, values are [type, value] cells
        return {value[i]: _decode(value[i + 1]) for i in range(0, len(value), 2)}
    if kind == BOOLEAN:
        return value == "true" or value == b"true"
    if kind == DATETIME:
        return datetime.fromtimestamp(value, tz=timezone.utc)
    if kind == VECTORF32:
        return [float(v) for v in value]
    raise _Unsupported(kind)


def _values(cells: list[Any]) -> list[Any]:
    """``[_decode(c) for c in cells]`` with the common scalars inline (a call per property was a fifth)."""
    out: list[Any] = []
    append = out.append
    for kind, value in cells:
        if kind == STRING:
            append(value if type(value) is str else value.decode())
        elif kind == NULL:
            append(None)
        elif kind == DOUBLE:
            append(float(value))
        elif kind == INTEGER:
            append(int(value))
        elif kind == ARRAY:
            append(_values(value))
        elif kind == DATETIME:  # every record's times
            append(_from_timestamp(value, _UTC))
        else:
            append(_decode((kind, value)))
    return out


_from_timestamp = datetime.fromtimestamp
_UTC = timezone.utc


def result_rows(graph: Any, response: Any) -> list[list[Any]]:
    """The rows of a compact reply, as the client's ``result_set`` would give them."""
    for part in (response[0], response[-1]):  # a run-time error comes last
        if isinstance(part, ResponseError):
            raise part
    if len(response) < 3:
        return []
    try:
        return [_values(row) for row in response[1]]
    except _Unsupported:
        from falkordb.query_result import QueryResult

        return QueryResult(graph, response).result_set


def command(graph: Any, text: str, read_only: bool, timeout_ms: int | None) -> list[Any]:
    """The GRAPH.QUERY / GRAPH.RO_QUERY command the client would send for ``text``."""
    args: list[Any] = ["GRAPH.RO_QUERY" if read_only else "GRAPH.QUERY", graph.name, text, "--compact"]
    if timeout_ms is not None:
        args += ["timeout", int(timeout_ms)]
    return args


def run(graph: Any, text: str, read_only: bool, timeout_ms: int | None = None) -> list[list[Any]]:
    """Run ``text`` on a ``falkordb.Graph`` and return its rows."""
    return result_rows(graph, graph.execute_command(*command(graph, text, read_only, timeout_ms)))
