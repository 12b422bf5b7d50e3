"""Memories built by hand, shared by test files of different packages.

``mem`` and ``versions`` (two versions of a belief, the first corrected by the
second) serve ``tests/scoring/test_dissonance.py`` and
``tests/postprocessors/test_dissonance_quality_constellation.py``; ``_m``
serves ``tests/scoring/test_identity.py`` and ``tests/ingestion/test_validator.py``.
"""

from __future__ import annotations

from datetime import datetime, timezone

from llama_consciousness.schema import MemoryNode

UTC = timezone.utc
T0 = datetime(2025, 1, 1, 9, 0, tzinfo=UTC)
T1 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
T2 = datetime(2025, 6, 1, 9, 0, tzinfo=UTC)


def mem(node_id: str, *, level: str = "N2", citizen: str | None = None, name: str = "Belief",
        description: str = "", **kw) -> MemoryNode:
    kw.setdefault("energy", 0.5)
    kw.setdefault("confidence", 0.7)
    return MemoryNode(node_id=node_id, level=level, citizen_id=citizen if level == "N1" else None,
                      name=name, description=description, **kw)


def versions(base: str = "belief", reason: str | None = None, *, level: str = "N2", v2_valid: datetime = T0,
             **v2_kw) -> tuple[MemoryNode, MemoryNode]:
    """v1 written at T0 and expired at T1 by v2 (valid from ``v2_valid``)."""
    v1 = mem(f"{base}_v1", level=level, citizen="ada", description="old view", created_at=T0, valid_at=T0,
             expired_at=T1, invalidation_reason=reason)
    v2 = mem(f"{base}_v2", level=level, citizen="ada", description="new view", created_at=T1, valid_at=v2_valid,
             supersedes=f"{base}_v1", **v2_kw)
    return v1, v2


def _m(node_id: str, **kw) -> MemoryNode:
    return MemoryNode(node_id=node_id, level="N2", name="belief", energy=0.5, confidence=0.5, **kw)
