"""Store work per level graph: in order within a graph, side by side across graphs.

Why: the store steps (near-duplicates, the writer) spend about half their
time waiting for the server.  Level graphs are independent, so the next
chunk's work on one graph may start while this chunk's write to another
graph is still on the server; within one graph, work must stay in order,
because each chunk reads what the chunks before it wrote (stored ids,
versions, entity names, near-duplicates).

A lane is the queue of one graph.  A bounded pool runs the lanes; a task
is handed to the pool only when the task before it in its lane is done, so
no thread ever blocks waiting for its predecessor.  After a failure in a
lane, the later tasks of that lane do not run (they fail with
:class:`LaneStopped`); other lanes carry on with what they were given.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

from llama_consciousness.errors import ConsciousnessError


class LaneStopped(ConsciousnessError, RuntimeError):
    """A task not run because an earlier task of its lane failed."""


class GraphLanes:
    """Run tasks serially per key and concurrently across keys, on ``threads`` threads."""

    def __init__(self, threads: int) -> None:
        if threads < 0:
            raise ValueError("a lane pool needs zero threads (inline) or more")
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="lc-ingest-lane") if threads else None
        self._tails: dict[Hashable, Future] = {}
        self._lock = threading.Lock()

    def submit(self, key: Hashable, fn: Callable[..., Any], *args: Any) -> Future:
        """Run ``fn(*args)`` after every task submitted before it under ``key``."""
        outcome: Future = Future()

        def start(previous: Future | None = None) -> None:
            if previous is not None and (previous.cancelled() or previous.exception() is not None):
                outcome.set_exception(LaneStopped(f"not run: an earlier task of lane {key!r} failed"))
                return
            if self._pool is None:  # inline: run here, now
                try:
                    outcome.set_result(fn(*args))
                except BaseException as exc:  # noqa: BLE001 - the task's outcome, as a pool thread gives it
                    outcome.set_exception(exc)
                return
            try:
                task = self._pool.submit(fn, *args)
            except RuntimeError as exc:  # the pool is shutting down
                outcome.set_exception(exc)
                return
            task.add_done_callback(lambda done: _pass_on(done, outcome))

        with self._lock:
            previous = self._tails.get(key)
            self._tails[key] = outcome
        if previous is None:
            start()
        else:
            previous.add_done_callback(start)
        return outcome

    def close(self) -> None:
        """Wait for every task given so far, then stop the threads."""
        with self._lock:
            tails = list(self._tails.values())
        wait(tails)
        if self._pool is not None:
            self._pool.shutdown(wait=True)


def _pass_on(done: Future, outcome: Future) -> None:
    exc = done.exception()
    if exc is not None:
        outcome.set_exception(exc)
    else:
        outcome.set_result(done.result())
