"""Work on several level graphs side by side, from synchronous code.

The sync retrieval path's answer to ``asyncio.gather``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")
R = TypeVar("R")

_LEVEL_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()
_PREFIX = "lc-level"


def side_by_side(work: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """``work(item)`` for every item (level graphs), side by side; results in order.

    The sync path's answer to ``asyncio.gather``: each level is a separate
    graph, so the server runs their queries in parallel while this process
    parses the replies of another; the threads spend their time waiting on
    sockets, which releases the GIL.  One small pool serves every retriever
    of the process; a call from inside that pool runs inline, so nested use
    cannot deadlock it.
    """
    global _LEVEL_POOL
    if len(items) < 2 or threading.current_thread().name.startswith(_PREFIX):
        return [work(item) for item in items]  # nested: inline, never wait on our own pool
    if _LEVEL_POOL is None:
        with _POOL_LOCK:
            if _LEVEL_POOL is None:
                _LEVEL_POOL = ThreadPoolExecutor(max_workers=6, thread_name_prefix=_PREFIX)
    futures = [_LEVEL_POOL.submit(work, item) for item in items]
    return [future.result() for future in futures]
