"""The three memory levels and the FalkorDB graph that holds each.

N1 is personal (one graph per citizen, ``citizen_<id>``), N2 collective
(``collective_n2``), N3 ecosystem (``ecosystem_n3``).  Graph names are the
one place where a user-supplied value (the citizen id) becomes part of a
name, so they are derived here and only here, from a validated id.
"""

from __future__ import annotations

from typing import get_args

from llama_consciousness.errors import LevelError
from llama_consciousness.schema.common import LevelName, validate_citizen_id
from llama_consciousness.schema.stream import LEVEL_KEYS

LEVELS: tuple[str, ...] = get_args(LevelName)
SHARED_GRAPHS = {"N2": "collective_n2", "N3": "ecosystem_n3"}


def check_level(level: str) -> str:
    """Return ``level`` if it names a level, else raise a clear error."""
    if level not in LEVELS:
        raise LevelError(f"unknown level {level!r}; expected one of {', '.join(LEVELS)}")
    return level


def graph_name(level: str, citizen_id: str | None = None) -> str:
    """The FalkorDB graph of a level (N1 needs the citizen)."""
    check_level(level)
    if level == "N1":
        if citizen_id is None:
            raise LevelError("level N1 is personal: a citizen_id is required")
        try:
            return f"citizen_{validate_citizen_id(citizen_id)}"
        except ValueError as exc:
            raise LevelError(str(exc)) from exc
    return SHARED_GRAPHS[level]


def graph_level(name: str) -> tuple[str, str | None] | None:
    """``(level, citizen_id)`` of a level graph's name (the inverse of :func:`graph_name`); None for a graph
    that is not a level's."""
    if name.startswith("citizen_"):
        return "N1", name.removeprefix("citizen_")
    level = next((lv for lv, graph in SHARED_GRAPHS.items() if graph == name), None)
    return None if level is None else (level, None)


def home_key(level: str, citizen_id: str | None) -> tuple[str, str | None]:
    """``(level, citizen)`` naming a record's level graph: the citizen counts in N1 only.

    N2 and N3 are shared graphs, so a citizen id on a record there (who
    wrote it) must not split them into one batch or lane per writer.
    """
    return level, citizen_id if level == "N1" else None


def level_key(level: str) -> str:
    """The stream key of a level: ``n1_personal``, ``n2_collective``, ``n3_ecosystem``."""
    return LEVEL_KEYS[check_level(level)]
