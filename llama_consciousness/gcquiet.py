"""Fewer full garbage collections while a bulk operation builds many objects.

Why: CPython runs a full (oldest-generation) collection whenever the
objects that survived since the last one reach a quarter of all tracked
objects.  An ingestion keeps creating long-lived objects (parsed records,
nodes, rows), so full collections come again and again, each walking the
whole heap: on a 4,000-memory file they took a third of the writing
process's CPU.  Nothing they find is garbage that cannot wait: the records
are freed by reference counting, and cycles are still collected by the
young generations, and by full collections after the operation.

Only the third threshold changes, and only for the time of the operation;
``gc.freeze`` is not used, so an application's own frozen objects stay
frozen.  Nested and concurrent uses share one raise: the first entry
raises the threshold, the last exit restores what was there.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

FULL_COLLECTION_THRESHOLD = 1000
"""Young collections between full ones during a bulk operation (CPython's default is 10)."""

_lock = threading.Lock()
_users = 0
_saved: tuple[int, ...] | None = None


@contextmanager
def fewer_full_collections() -> Iterator[None]:
    """Raise the oldest generation's threshold for the duration of the block."""
    global _users, _saved
    with _lock:
        if _users == 0:
            _saved = gc.get_threshold()
            first, second, third = _saved
            gc.set_threshold(first, second, max(third, FULL_COLLECTION_THRESHOLD))
        _users += 1
    try:
        yield
    finally:
        with _lock:
            _users -= 1
            if _users == 0 and _saved is not None:
                gc.set_threshold(*_saved)
                _saved = None
