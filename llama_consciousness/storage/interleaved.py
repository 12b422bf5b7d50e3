"""Several read plans at once from one thread: the sync path's ``asyncio.gather``.

A retrieval runs a handful of short queries on separate level graphs.  The
server can run them in parallel, so they should all be in flight at once.
Threads do that, but on a small machine they queue for the GIL behind each
other's reply parsing, and a reply that arrives while another thread holds
the GIL waits up to a switch interval (5 ms) to be read: that wait was most
of the sync path's tail latency.

Here each plan gets its own connection: every plan's first query is sent
before any reply is read, a reply is read as soon as it is ready, and the
plan's next query (if any) goes out on the same connection at once.  One
thread, no lock hand-offs, and the server still sees every query early.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from redis.exceptions import ResponseError

from llama_consciousness.storage import knn_gate, replies
from llama_consciousness.storage.level_store import Pause, Plan, Query, StorageError, _missing_graph
from llama_consciousness.storage.params import header as params_header


class _Job:
    __slots__ = ("graph", "plan", "connection", "sent", "result", "done", "gate", "pending")

    def __init__(self, graph: Any, plan: Plan) -> None:
        self.graph = graph
        self.plan = plan
        self.connection: Any = None
        self.sent = False
        self.result: Any = None
        self.done = False
        # a vector search holds its graph's gate while in flight (knn_gate);
        # one whose gate was taken waits in ``pending`` (its command)
        self.gate: threading.Lock | None = None
        self.pending: tuple[list[Any], threading.Lock] | None = None


def _connection(pool: Any) -> Any:
    try:
        return pool.get_connection()
    except TypeError:  # redis-py before 6 wants a command name
        return pool.get_connection("GRAPH.RO_QUERY")


def run_interleaved(db: Any, jobs: Sequence[tuple[str, Plan]], timeout_ms: int | None = None) -> list[Any]:
    """Run read-only plans, each on its graph, all at once; results in order.

    ``jobs`` are ``(graph name, plan)`` pairs.  A job's result is what its
    plan returns, or the exception that stopped it (a ``StorageError`` for a
    failed query), so one failing channel does not stop the others.  A
    graph that does not exist reads as empty, as in ``LevelGraphStore``.
    ``timeout_ms`` limits every query on the server and the whole run
    here: what is unanswered by then fails with ``TimeoutError``.
    """
    return Interleaved(db, jobs, timeout_ms).results()


def list_graphs(db: Any, timeout_ms: int | None = None) -> list[str]:
    """The names of the server's graphs (``GRAPH.LIST``), waiting at most ``timeout_ms`` for the answer.

    A stalled server raises ``TimeoutError`` (its connection is dropped)
    instead of holding the caller.
    """
    pool = db.connection.connection_pool
    connection = _connection(pool)
    try:
        connection.send_command("GRAPH.LIST")
        if timeout_ms is not None and not connection.can_read(timeout=timeout_ms / 1000):
            connection.disconnect()
            raise TimeoutError(f"no answer to GRAPH.LIST within {timeout_ms} ms")
        names = connection.read_response()
    except BaseException:
        connection.disconnect()
        raise
    finally:
        pool.release(connection)
    return [n.decode() if isinstance(n, bytes) else str(n) for n in names]


class Interleaved:
    """``run_interleaved`` in two halves: creating it sends every plan's first query.

    :meth:`results` reads the replies (sending any further queries) and
    returns the results; call it exactly once, the connections go back to
    the pool then.
    """

    def __init__(self, db: Any, jobs: Sequence[tuple[str, Plan]], timeout_ms: int | None = None) -> None:
        self._db = db
        self._pool = db.connection.connection_pool
        self._timeout_ms = timeout_ms
        self._deadline = None if timeout_ms is None else time.monotonic() + timeout_ms / 1000
        self._state = [_Job(db.select_graph(name), plan) for name, plan in jobs]
        self._closed = False
        try:
            for job in self._state:
                _advance(self._db, self._pool, job, None, first=True, timeout_ms=timeout_ms)
        except BaseException:
            self._close()
            raise

    def results(self) -> list[Any]:
        """Every job's result (or exception), in the order of the jobs.

        With a ``timeout_ms``, a job still unanswered that long after the
        start fails with ``TimeoutError`` (its connection is dropped): a
        server that stops answering cannot hold the caller longer.
        """
        if self._closed:
            raise RuntimeError("the results of these plans were already taken")
        try:
            while True:
                self._send_pending(wait=False)
                waiting = [job for job in self._state if job.sent]
                remaining = None if self._deadline is None else self._deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    self._expire()
                    break
                if not waiting:
                    if not any(job.pending for job in self._state):
                        break
                    # Nothing of ours in flight, so no gate held: waiting for
                    # one that another thread holds cannot close a cycle.
                    self._send_pending(wait=True, timeout=remaining)
                    continue
                # the first reply that is ready, else wait for the oldest query
                ready = next((j for j in waiting if j.connection.can_read(timeout=0)), None)
                if ready is None and waiting[0].connection.can_read(timeout=remaining):
                    ready = waiting[0]
                if ready is not None:
                    self._read(ready)
        finally:
            self._close()
        return [job.result for job in self._state]

    def _expire(self) -> None:
        for job in self._state:
            if not job.done:
                _release(job)
                job.pending = None
                job.result = TimeoutError(f"no answer from graph {job.graph.name!r} within {self._timeout_ms} ms")
                job.done = True

    def _send_pending(self, *, wait: bool, timeout: float | None = None) -> None:
        """Send the vector searches whose graph's gate is free (with ``wait``, the first one at least)."""
        for job in self._state:
            if job.pending is None:
                continue
            command, lock = job.pending
            if not (lock.acquire(timeout=-1 if timeout is None else max(timeout, 0.0)) if wait
                    else lock.acquire(blocking=False)):
                continue
            wait = False
            job.gate, job.pending = lock, None
            _send(job, command)

    def _read(self, job: _Job) -> None:
        job.sent = False
        try:
            try:
                response = job.connection.read_response()
            finally:
                _release(job)
            rows = replies.result_rows(job.graph, response)
        except ResponseError as exc:
            if not _missing_graph(exc):
                _fail(job, exc)
                return
            rows = []
        except Exception as exc:  # connection lost: this job fails, the others go on
            job.connection.disconnect()
            _fail(job, exc)
            return
        _advance(self._db, self._pool, job, rows, first=False, timeout_ms=self._timeout_ms)

    def _close(self) -> None:
        self._closed = True
        for job in self._state:
            if job.connection is not None:
                if job.sent:  # a reply left unread: the connection is not reusable
                    job.connection.disconnect()
                    job.sent = False
                self._pool.release(job.connection)
                job.connection = None
            _release(job)
            job.pending = None
            if not job.done:
                job.plan.close()


def _release(job: _Job) -> None:
    if job.gate is not None:
        job.gate.release()
        job.gate = None


def _fail(job: _Job, exc: BaseException) -> None:
    _release(job)
    job.pending = None
    job.result = exc if isinstance(exc, StorageError) else StorageError(
        f"query on graph {job.graph.name!r} failed: {exc}")
    job.done = True
    job.plan.close()


def _send(job: _Job, command: list[Any]) -> None:
    try:
        job.connection.send_command(*command)
    except Exception as exc:
        job.connection.disconnect()
        _fail(job, exc)
        return
    job.sent = True


def _advance(db: Any, pool: Any, job: _Job, rows: Any, *, first: bool, timeout_ms: int | None) -> None:
    """Give the plan its rows and send its next query (or record its result)."""
    try:
        step = next(job.plan) if first else job.plan.send(rows)
        while isinstance(step, Pause):  # polling plans: rare in reads, so simply wait here
            time.sleep(step.seconds)
            step = job.plan.send(None)
        if not isinstance(step, Query) or not step.read_only:
            raise TypeError(f"run_interleaved runs read-only queries, got {step!r}")
    except StopIteration as stop:
        job.result, job.done = stop.value, True
        return
    except Exception as exc:
        job.result, job.done = exc, True
        job.plan.close()
        return
    if job.connection is None:
        job.connection = _connection(pool)
    command = replies.command(job.graph, params_header(step.params) + step.cypher, True, timeout_ms)
    if knn_gate.searches_vectors(step.cypher):
        lock = knn_gate.gate(db, job.graph.name)
        if not lock.acquire(blocking=False):  # sent when the search in flight is read
            job.pending = (command, lock)
        else:
            job.gate = lock
            _send(job, command)
    else:
        _send(job, command)
