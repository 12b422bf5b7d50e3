"""Fewer garbage collections while a bulk operation builds many objects, and shorter full ones.

Why: an ingestion keeps many container objects alive for a while (the
chunks in flight); young collections examine and promote them only for
reference counting to free them later (2 of 9 CPU-seconds on 10,000
memories), full ones walk the whole heap (a third of the CPU on 4,000).
Cycles are still collected, less often.  Only the thresholds change, for
the block; nested and concurrent blocks share one raise (``SharedSetting``).
Retrievals leave them alone: an application may use ``with fewer_collections():``.

Full collections (``settle_heap``): a retrieval allocates enough that objects
living through it (rows, models, the stream) are promoted to the oldest
generation, so CPython runs a full collection every 15-20 retrievals, and a
full collection walks every object of the process: the ~150K of the imported
libraries, 50-120 ms landing on one question in fifteen (issue 40, measured
in a fresh process at 50K memories per level).  ``gc.freeze()`` moves what
is alive to a generation no collection walks; what was alive then is almost
all modules, classes and the embedding model, which live as long as the
process anyway.  Measured on a chat load of 16 conversations: the longest
full collection 77 ms -> 9 ms.
"""

from __future__ import annotations

import gc
import threading
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


_settled = threading.Lock()


def settle_heap() -> None:
    """``gc.freeze()``: every object alive now is left out of all later collections (see the module
    docstring: why, and what it costs).  ``ConsciousnessMemory(freeze_heap=True)``, the default, calls it when
    it opens and after its first retrieval (which imports and builds the rest of what retrieval needs)."""
    with _settled:  # two memories opening at once freeze once each, never half of one
        gc.freeze()
