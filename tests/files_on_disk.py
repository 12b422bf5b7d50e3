"""Byte searches of a data directory, for the erasure tests: what an erasure removed must be in no file."""

from __future__ import annotations

from pathlib import Path


def files_holding(root: Path, *needles: str) -> dict[str, list[str]]:
    """Which files under ``root`` hold each needle (as UTF-8 bytes, and lower-cased)."""
    wanted = {n: [n.encode(), n.lower().encode()] for n in needles}
    found: dict[str, list[str]] = {n: [] for n in needles}
    for path in root.rglob("*"):
        try:
            data = path.read_bytes() if path.is_file() and not path.is_symlink() else b""
        except OSError:  # a socket, or a file removed meanwhile
            continue
        for needle, forms in wanted.items():
            if any(form in data for form in forms):
                found[needle].append(str(path.relative_to(root)))
    return found
