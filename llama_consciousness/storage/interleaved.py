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
    __slots__ = ("graph", "plan", "connection", "sent", "result", "done", "gate", "pending", "error")

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
        # what the plan's ``Query.meanwhile`` raised: the plan stops with it
        # once the reply of the query it ran beside is read
        self.error: BaseException | None = None


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
    ``timeout_ms`` is the server-side limit of every query.
    """
    return Interleaved(db, jobs, timeout_ms).results()


class Interleaved:
    """``run_interleaved`` in two halves, so that the caller can work in between.

    Creating it sends every plan's first query; :meth:`results` reads the
    replies (sending any further queries) and returns the results.  Between
    the two the server runs the queries while this thread does something
    else: a retrieval starts reading the neighbourhood of its memories
    before it ranks and tiers them.  Call :meth:`results` (or
    :meth:`discard`) exactly once: the connections go back to the pool then.
    """

    def __init__(self, db: Any, jobs: Sequence[tuple[str, Plan]], timeout_ms: int | None = None) -> None:
        self._db = db
        self._pool = db.connection.connection_pool
        self._timeout_ms = timeout_ms
        self._state = [_Job(db.select_graph(name), plan) for name, plan in jobs]
        self._closed = False
        try:
            for job in self._state:
                _advance(self._db, self._pool, job, None, first=True, timeout_ms=timeout_ms)
        except BaseException:
            self._close()
            raise

    @classmethod
    def empty(cls) -> Interleaved:
        """Nothing to run (no connection is taken)."""
        out = cls.__new__(cls)
        out._db, out._pool, out._timeout_ms, out._state, out._closed = None, None, None, [], False
        return out

    def results(self) -> list[Any]:
        """Every job's result (or exception), in the order of the jobs."""
        if self._closed:
            raise RuntimeError("the results of these plans were already taken")
        try:
            while True:
                self._send_pending(wait=False)
                waiting = [job for job in self._state if job.sent]
                if not waiting:
                    if not any(job.pending for job in self._state):
                        break
                    # Nothing of ours in flight, so no gate held: waiting for
                    # one that another thread holds cannot close a cycle.
                    self._send_pending(wait=True)
                    continue
                # the first reply that is ready, else wait for the oldest query
                self._read(next((j for j in waiting if j.connection.can_read(timeout=0)), waiting[0]))
        finally:
            self._close()
        return [job.result for job in self._state]

    def _send_pending(self, *, wait: bool) -> None:
        """Send the vector searches whose graph's gate is free (with ``wait``, the first one at least)."""
        for job in self._state:
            if job.pending is None:
                continue
            command, lock = job.pending
            if not lock.acquire(blocking=wait):
                continue
            wait = False
            job.gate, job.pending = lock, None
            _send(job, command)

    def progress(self) -> None:
        """Read the replies that are ready now and send the queries that follow them; never waits.

        A plan of several queries (connectors, then the links among them)
        otherwise sends its second query only when :meth:`results` is
        called; called between other work, this keeps the server busy.
        """
        if self._closed:
            return
        for job in self._state:
            try:
                ready = job.sent and job.connection.can_read(timeout=0)
            except Exception:  # a broken connection: results() reports it
                return
            if ready:
                self._read(job)
        self._send_pending(wait=False)

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
        if job.error is not None:
            job.result, job.done = job.error, True
            job.plan.close()
            return
        _advance(self._db, self._pool, job, rows, first=False, timeout_ms=self._timeout_ms)

    def discard(self) -> None:
        """Give up on the results (their connections are dropped, not reused)."""
        if not self._closed:
            self._close()

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
    if step.meanwhile is not None and not job.done:
        try:
            step.meanwhile()
        except Exception as exc:
            job.error = exc


class PrefetchSlot:
    """Reads started early for a key, until the work that asks for the same key claims them.

    A postprocessor starts its reads before its turn (``prefetch``) and
    builds later: the build claims them only if it asks for what was
    fetched (same memories, same window); otherwise they are dropped and it
    reads afresh.  ``extra`` is what the claimant needs besides the replies
    (e.g. which level each job was for).  One slot per postprocessor: a new
    prefetch drops the reads of the previous one.
    """

    def __init__(self) -> None:
        self._held: tuple[Any, Interleaved, Any] | None = None

    @property
    def empty(self) -> bool:
        return self._held is None

    @property
    def key(self) -> Any:
        """The key of the held reads (None when nothing is held)."""
        return None if self._held is None else self._held[0]

    def hold(self, key: Any, running: Interleaved, extra: Any = None) -> None:
        self.discard()
        self._held = (key, running, extra)

    def claim(self, key: Any) -> tuple[Interleaved, Any] | None:
        """``(running, extra)`` of reads started for ``key``; reads for any other key are dropped."""
        held, self._held = self._held, None
        if held is None:
            return None
        if held[0] == key:
            return held[1], held[2]
        held[1].discard()
        return None

    def claim_if(self, accept: Any) -> tuple[Interleaved, Any] | None:
        """``claim`` for the first key ``accept(key)`` says covers what is asked (a superset read)."""
        held, self._held = self._held, None
        if held is None:
            return None
        if accept(held[0]):
            return held[1], held[2]
        held[1].discard()
        return None

    def progress(self) -> None:
        """Let the held reads send their next queries if their replies are in (never waits)."""
        if self._held is not None:
            self._held[1].progress()

    def discard(self) -> None:
        held, self._held = self._held, None
        if held is not None:
            held[1].discard()
