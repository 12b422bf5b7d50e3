"""The memory file format (JSON Lines) and its reader.

One JSON object per line.  A line with ``"kind": "relationship"`` is a
relationship (the fields of :class:`ConsciousnessRelationship`); any other
line (``"kind": "memory"`` or no kind) is a memory (the fields of
:class:`MemoryNode`).  Blank lines and lines starting with ``#`` or ``//``
are skipped, so files can carry comments.  Times are ISO-8601; a time
without offset is UTC.

Errors name the file and line, and the field that is wrong, because a
memory file is usually written by hand or by another program and the
person fixing it needs to find the line.  A line that is not UTF-8, not
JSON, or JSON nested deeper than :data:`MAX_JSON_DEPTH` is a bad line like
any other (refused, or skipped and reported): it never stops the reader
with a decoding or recursion error.  A byte order mark before the first
line is allowed.
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
from llama_consciousness.schema import ConsciousnessRelationship, MemoryNode


KINDS = {"memory": MemoryNode, "relationship": ConsciousnessRelationship}

MAX_JSON_DEPTH = 64
"""Arrays and objects nested deeper than this in one line make it a bad line.

Why: a record nests two or three levels (``emotion_vector``, ``extra``);
Python's parser and every later step (pickling to the ingestion worker,
storage) recurse, and a line nested thousands deep used to end the run with
a ``RecursionError``.  64 leaves room for any ``extra`` a program writes.
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
    model = KINDS.get(kind) if _known_kind(kind) else None
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

    Comments and blank lines are skipped.  A line that is not UTF-8, not a
    JSON object, nested deeper than :data:`MAX_JSON_DEPTH` (or names an
    unknown kind) raises :class:`MemoryFileError`, or, given ``on_error``,
    is handed to it and skipped.
    """
    name = str(path)
    with open(path, encoding="utf-8", errors="surrogateescape") as handle:
        for number, raw in enumerate(handle, start=1):
            text = raw.strip()
            if number == 1 and text.startswith("\ufeff"):  # a byte order mark
                text = text[1:].lstrip()
            if not text or text.startswith("#") or text.startswith("//"):
                continue
            error = None
            undecoded = None if text.isascii() else _UNDECODED.search(text)
            if undecoded is not None:
                byte = ord(undecoded.group()) - 0xDC00
                error = MemoryFileError(name, number, f"not UTF-8: byte 0x{byte:02x} at column {undecoded.start() + 1} "
                                                      "cannot be decoded (the file must be UTF-8 text)")
            else:
                error, obj = _decode(name, number, text)
            if error is None:
                if not isinstance(obj, dict):
                    error = MemoryFileError(name, number, f"expected a JSON object, got {type(obj).__name__}")
                elif not _known_kind(obj.get("kind", "memory")):
                    error = MemoryFileError(
                        name, number, f"unknown kind {obj.get('kind')!r}; expected 'memory' or 'relationship'"
                    )
            if error is None:
                yield number, obj
            elif on_error is None:
                raise error
            else:
                on_error(error)


def _known_kind(kind: object) -> bool:
    return type(kind) is str and kind in KINDS


def _decode(name: str, number: int, text: str) -> tuple[MemoryFileError | None, object]:
    """One line's JSON value, or the error that makes it a bad line."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        return MemoryFileError(name, number, f"malformed JSON: {exc.msg} (column {exc.colno})"), None
    except RecursionError:
        return MemoryFileError(name, number, _too_deep_message()), None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        return MemoryFileError(name, number, f"malformed JSON: {exc}"), None
    # Only a line with more brackets than the limit can be nested deeper: most are never walked.
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH and _deeper_than(obj, MAX_JSON_DEPTH):
        return MemoryFileError(name, number, _too_deep_message()), None
    return None, obj


def _too_deep_message() -> str:
    return f"JSON nested too deeply: more than {MAX_JSON_DEPTH} levels of arrays and objects"


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
