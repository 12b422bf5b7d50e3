"""The memory file format (JSON Lines) and its reader.

One JSON object per line: a relationship (``"kind": "relationship"``) or a
memory; ``#`` and ``//`` comments, blank lines and a byte order mark are
skipped.  Errors name the file, line and field.  A line that is not UTF-8,
not JSON, or too deep is a bad line like any other, never a crash.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from llama_consciousness.errors import ConsciousnessError
from llama_consciousness.ingestion.validator import pydantic_reasons
from llama_consciousness.schema import ConsciousnessRelationship, MemoryNode


KINDS = {"memory": MemoryNode, "relationship": ConsciousnessRelationship}

MAX_JSON_DEPTH = 64
"""Arrays and objects nested deeper than this in one line make it a bad line.

Why: the parser and later steps (pickling, storage) recurse, so a line
nested thousands deep ended the run with a ``RecursionError``; a record
nests two or three levels, and 64 leaves room for any ``extra``.
"""

# Bytes that are not UTF-8 are read as these (``surrogateescape``): the
# line they are on is refused, and the rest of the file is still read.
_UNDECODED = re.compile("[\udc80-\udcff]")


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


class MemoryPathError(ConsciousnessError, OSError):
    """``ingest`` was given a path that is not a readable memory file (missing, or a directory)."""

    def __init__(self, path: str, message: str, code: int = 0) -> None:
        super().__init__(message)
        self.path = path
        self.errno = code

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.path, str(self), self.errno))


class MemoryFileNotFoundError(MemoryPathError, FileNotFoundError):
    """The memory file does not exist."""


class MemoryFileIsADirectoryError(MemoryPathError, IsADirectoryError):
    """The path names a directory, not a memory file."""


def check_memory_file(path: str | os.PathLike[str]) -> Path:
    """``path`` as a ``Path`` if it names an existing file (not a directory); a clear error otherwise."""
    where = Path(path)
    try:
        mode = where.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        raise MemoryFileNotFoundError(
            str(where), f"memory file {str(where)!r} does not exist (ingest takes the path of a JSON Lines "
                        "file, or a list of MemoryNode / ConsciousnessRelationship records)", errno.ENOENT
        ) from None
    if stat.S_ISDIR(mode):
        raise MemoryFileIsADirectoryError(
            str(where), f"memory file {str(where)!r} is a directory: give the path of one JSON Lines file "
                        "(ingest each file of the directory in turn)", errno.EISDIR
        )
    return where


def iter_json_objects(
    path: str | os.PathLike[str], on_error: Callable[[MemoryFileError], None] | None = None
) -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` of each record line, lazily; a bad line raises :class:`MemoryFileError`,
    or, given ``on_error``, is handed to it and skipped."""
    name = str(path)
    with open(path, encoding="utf-8", errors="surrogateescape") as handle:
        for number, raw in enumerate(handle, start=1):
            text = raw.strip()
            if number == 1 and text.startswith("\ufeff"):  # a byte order mark
                text = text[1:].lstrip()
            if not text or text.startswith(("#", "//")):
                continue
            try:
                obj = _parse_line(name, number, text)
            except MemoryFileError as error:
                if on_error is None:
                    raise
                on_error(error)
                continue
            yield number, obj


def _parse_line(name: str, number: int, text: str) -> dict:
    """One line's object, or the error if it is not UTF-8, not JSON, too deep, or not an object of a known kind."""
    if not text.isascii() and (undecoded := _UNDECODED.search(text)) is not None:
        byte, column = ord(undecoded.group()) - 0xDC00, undecoded.start() + 1
        raise MemoryFileError(name, number, f"not UTF-8: byte 0x{byte:02x} at column {column} cannot be decoded "
                                            "(the file must be UTF-8 text)")
    try:
        obj = json.loads(text)
        # Only a line with more brackets than the limit can be nested deeper: most are never walked.
        deep = text.count("[") + text.count("{") > MAX_JSON_DEPTH and _deeper_than(obj, MAX_JSON_DEPTH)
    except json.JSONDecodeError as exc:
        raise MemoryFileError(name, number, f"malformed JSON: {exc.msg} (column {exc.colno})") from None
    except RecursionError:
        deep = True
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        raise MemoryFileError(name, number, f"malformed JSON: {exc}") from None
    if deep:
        raise MemoryFileError(name, number, f"JSON nested too deeply: more than {MAX_JSON_DEPTH} levels of arrays "
                                            "and objects")
    if not isinstance(obj, dict):
        raise MemoryFileError(name, number, f"expected a JSON object, got {type(obj).__name__}")
    if not (type(kind := obj.get("kind", "memory")) is str and kind in KINDS):
        raise MemoryFileError(name, number, f"unknown kind {obj.get('kind')!r}; expected 'memory' or 'relationship'")
    return obj


def _deeper_than(value: object, limit: int) -> bool:
    """Whether arrays and objects nest more than ``limit`` levels in ``value`` (without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def iter_memory_file(path: str | os.PathLike[str]) -> Iterator[MemoryRecord]:
    """Parse a memory file lazily, line by line (large files stay out of memory); the first bad line raises."""
    for number, obj in iter_json_objects(path):
        data = dict(obj)
        kind = data.pop("kind", "memory")
        try:
            item = KINDS[kind].model_validate(data)
        except ValidationError as exc:
            raise MemoryFileError(str(path), number, f"invalid {kind}: {'; '.join(pydantic_reasons(exc))}") from None
        yield MemoryRecord(number, item)


def read_memory_file(
    path: str | os.PathLike[str],
) -> tuple[list[MemoryNode], list[ConsciousnessRelationship]]:
    """All memories and relationships of a file; the first bad line raises."""
    nodes: list[MemoryNode] = []
    relationships: list[ConsciousnessRelationship] = []
    for record in iter_memory_file(path):
        (nodes if isinstance(record.item, MemoryNode) else relationships).append(record.item)
    return nodes, relationships


DEMO_QUERY = "What do we know about FalkorDB vector search and the V2 architecture?"
"""The question the demo (CLI and web page) asks of the bundled scenario."""


def demo_memory_file() -> Path:
    """The bundled demo memory set (the spec's Ada / Luca / Felix scenario)."""
    return Path(__file__).resolve().parent.parent / "data" / "demo_memories.jsonl"
