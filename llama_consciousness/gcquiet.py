"""Fewer garbage collections while a bulk operation builds many objects.

Why: an ingestion keeps many container objects alive for a while (the
chunks in flight); young collections examine and promote them only for
reference counting to free them later (2 of 9 CPU-seconds on 10,000
memories), full ones walk the whole heap (a third of the CPU on 4,000).
Cycles are still collected, less often.  Only the thresholds change, for
the block; nested and concurrent blocks share one raise (``SharedSetting``).
Retrievals leave them alone: an application may use ``with fewer_collections():``.
"""

from __future__ import annotations

import gc
from contextlib import AbstractContextManager

from llama_consciousness.shared_setting import SharedSetting

YOUNG_COLLECTION_THRESHOLD = 100_000
"""Net new container objects between young collections in a ``fewer_collections`` block (CPython: 700)."""

BULK_YOUNG_COLLECTION_THRESHOLD = 1_000_000
"""The same during an ingestion, which holds some 300,000 objects in use on a 10,000-memory file.

At 100,000 its writing process still ran six young collections that found
nothing (0.45 of 4.7 CPU-seconds); at a million there is at most one.
"""

FULL_COLLECTION_THRESHOLD = 1000
"""Young collections between full ones during a bulk operation (CPython: 10)."""


def _raise_to_asked(saved: tuple[int, ...], asked: list[int]) -> None:
    first, second, third = saved
    if first > 0:  # 0 means collection is off; leave it off
        gc.set_threshold(max(first, *asked), second, max(third, FULL_COLLECTION_THRESHOLD))


class _RaisedThresholds(SharedSetting):
    """``fewer_collections(young=...)``: the thresholds raised for the block (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__(gc.get_threshold, lambda saved: gc.set_threshold(*saved), _raise_to_asked)

    def __call__(self, young: int = YOUNG_COLLECTION_THRESHOLD) -> AbstractContextManager[None]:  # type: ignore[override]
        return super().__call__(young)


fewer_collections = _RaisedThresholds()
