"""The memory file format (JSON Lines) and its reader.

One JSON object per line.  A line with ``"kind": "relationship"`` is a
relationship (the fields of :class:`ConsciousnessRelationship`); any other
line (``"kind": "memory"`` or no kind) is a memory (the fields of
:class:`MemoryNode`).  Blank lines and lines starting with ``#`` or ``//``
are skipped, so files can carry comments.  Times are ISO-8601; a time
without offset is UTC.

Errors name the file and line, and the field that is wrong, because a
memory file is usually written by hand or by another program and the
person fixing it needs to find the line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from llama_consciousness.errors import ConsciousnessError
from llama_consciousness.schema import ConsciousnessRelationship, MemoryNode


KINDS = {"memory": MemoryNode, "relationship": ConsciousnessRelationship}


class MemoryFileError(ConsciousnessError, ValueError):
    """A line of a memory file is not valid JSON or not a valid record."""

    def __init__(self, path: str, line: int, message: str) -> None:
        super().__init__(f"{path}:{line}: {message}")
        self.path = path
        self.line = line
        self.reason = message


@dataclass(frozen=True)
class MemoryRecord:
    """One parsed line: a memory or a relationship, and where it came from."""

    line: int
    item: MemoryNode | ConsciousnessRelationship


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        where = ".".join(str(p) for p in err["loc"]) or "record"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


def parse_record(obj: object, path: str = "<memory>", line: int = 0) -> MemoryNode | ConsciousnessRelationship:
    """One decoded JSON object as a memory or a relationship."""
    if not isinstance(obj, dict):
        raise MemoryFileError(path, line, f"expected a JSON object, got {type(obj).__name__}")
    data = dict(obj)
    kind = data.pop("kind", "memory")
    model = KINDS.get(kind)
    if model is None:
        raise MemoryFileError(path, line, f"unknown kind {kind!r}; expected 'memory' or 'relationship'")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise MemoryFileError(path, line, f"invalid {kind}: {_describe(exc)}") from None


def iter_json_objects(
    path: str | os.PathLike[str], on_error: Callable[[MemoryFileError], None] | None = None
) -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` of each record line, lazily.

    Comments and blank lines are skipped.  A line that is not a JSON object
    (or names an unknown kind) raises :class:`MemoryFileError`, or, given
    ``on_error``, is handed to it and skipped.
    """
    name = str(path)
    with open(path, encoding="utf-8") as handle:
        for number, raw in enumerate(handle, start=1):
            text = raw.strip()
            if not text or text.startswith("#") or text.startswith("//"):
                continue
            error = None
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as exc:
                error = MemoryFileError(name, number, f"malformed JSON: {exc.msg} (column {exc.colno})")
            else:
                if not isinstance(obj, dict):
                    error = MemoryFileError(name, number, f"expected a JSON object, got {type(obj).__name__}")
                elif obj.get("kind", "memory") not in KINDS:
                    error = MemoryFileError(
                        name, number, f"unknown kind {obj.get('kind')!r}; expected 'memory' or 'relationship'"
                    )
            if error is None:
                yield number, obj
            elif on_error is None:
                raise error
            else:
                on_error(error)


def iter_memory_file(path: str | os.PathLike[str]) -> Iterator[MemoryRecord]:
    """Parse a memory file lazily, line by line (large files stay out of memory)."""
    for number, obj in iter_json_objects(path):
        yield MemoryRecord(number, parse_record(obj, str(path), number))


def read_memory_file(
    path: str | os.PathLike[str],
) -> tuple[list[MemoryNode], list[ConsciousnessRelationship]]:
    """All memories and relationships of a file; the first bad line raises."""
    nodes: list[MemoryNode] = []
    relationships: list[ConsciousnessRelationship] = []
    for record in iter_memory_file(path):
        (nodes if isinstance(record.item, MemoryNode) else relationships).append(record.item)
    return nodes, relationships


def demo_memory_file() -> Path:
    """The bundled demo memory set (the spec's Ada / Luca / Felix scenario)."""
    return Path(__file__).resolve().parent.parent / "data" / "demo_memories.jsonl"
