"""Fewer garbage collections while a bulk operation builds many objects.

Why: CPython's cycle collector runs on the *net* number of new container
objects.  An ingestion keeps creating objects that live for a while
(parsed records, nodes, models and rows of the chunks in flight), and two
costs follow:

* **young collections** (every 700 new objects by default) find each
  chunk's objects still in use, examine them, and promote them, only for
  reference counting to free them a little later.  On a 10,000-memory file
  they took about 2 of the writing process's 9 CPU-seconds; with a young
  threshold of 100,000 most of a chunk's objects are freed before any
  collection sees them, and collections took about 0.1 s;
* **full collections** come whenever the objects that survived since the
  last one reach a quarter of all tracked objects, each walking the whole
  heap: on a 4,000-memory file they took a third of the process's CPU.

Nothing these collections find is garbage that cannot wait: the records
are freed by reference counting, and cycles are still collected, only
less often, during the operation and after it.

Retrievals leave the collector alone: the thresholds are process-wide, and
a library should not change them under an application around every call.
An application that wants the same for its retrievals wraps its own calls
in ``with fewer_collections():``.

Only the thresholds change, and only for the time of the operation;
``gc.freeze`` is not used, so an application's own frozen objects stay
frozen.  Nested and concurrent uses share one raise: the first entry
saves the thresholds, the highest young threshold asked for by a block
still inside applies, and the last exit restores what was there.
"""

from __future__ import annotations

import gc
from contextlib import AbstractContextManager

from llama_consciousness.shared_setting import SharedSetting

YOUNG_COLLECTION_THRESHOLD = 100_000
"""Net new container objects between young collections in a ``fewer_collections`` block (CPython's default is 700)."""

BULK_YOUNG_COLLECTION_THRESHOLD = 1_000_000
"""The same during an ingestion, which keeps far more objects alive at once.

Why: an ingestion holds a parsed file (up to ``KEEP_PARSED_BYTES``) and the
chunks in flight, some 300,000 container objects for a 10,000-memory file,
all in use.  At 100,000 its writing process still ran six young collections
that examined them and found nothing (0.45 of its 4.7 CPU-seconds); at a
million there is at most one.  Garbage in cycles waits longer, bounded by the
threshold: the records themselves are freed by reference counting.
"""

FULL_COLLECTION_THRESHOLD = 1000
"""Young collections between full ones during a bulk operation (CPython's default is 10)."""


def _raise_to_asked(saved: tuple[int, ...], asked: list[int]) -> None:
    first, second, third = saved
    if first > 0:  # 0 means collection is off; leave it off
        gc.set_threshold(max(first, *asked), second, max(third, FULL_COLLECTION_THRESHOLD))


class _RaisedThresholds(SharedSetting):
    """The collector's thresholds raised to the highest young threshold the blocks inside ask for.

    An ingestion that runs a retrieval keeps its own, higher one, and the
    retrieval's raise is back when the ingestion ends first.
    """

    def __init__(self) -> None:
        super().__init__(gc.get_threshold, lambda saved: gc.set_threshold(*saved), _raise_to_asked)

    def __call__(self, young: int = YOUNG_COLLECTION_THRESHOLD) -> AbstractContextManager[None]:  # type: ignore[override]
        return super().__call__(young)


fewer_collections = _RaisedThresholds()
"""``with fewer_collections():`` raises the youngest and the oldest generation's thresholds for the block.

``fewer_collections(young=BULK_YOUNG_COLLECTION_THRESHOLD)`` asks for a
higher young threshold; concurrent blocks get the highest one asked for.
"""
