"""What retrievers and postprocessors need of a memory: the level stores, by level and citizen.

A ``Protocol`` rather than ``ConsciousnessMemory`` itself, so that the
layers above storage name the one thing they use and never import the
memory's module (which imports them).
"""

from __future__ import annotations

from typing import Protocol

from llama_consciousness.storage.level_store import LevelGraphStore, LevelPlans


class MemoryReader(Protocol):
    """Anything that hands out level graph stores (``ConsciousnessMemory`` does)."""

    def level(self, level: str, citizen_id: str | None = None) -> LevelGraphStore:
        """The store of one level graph (N1 needs the citizen)."""
        ...

    def plans(self, level: str, citizen_id: str | None = None) -> LevelPlans:
        """The query plans of one level graph."""
        ...
