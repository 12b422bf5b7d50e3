"""Several read plans at once from one thread, each on its own connection.

Every plan's first query is sent before any reply is read, a reply is read
as soon as it is ready, and the plan's next query goes out at once.  The
replies are waited for on every connection at once: a server (or graph)
that stalls holds back its own plans, not the replies of the others.  (Threads
queue for the GIL behind each other's reply parsing, and a reply arriving
meanwhile waits up to a switch interval, 5 ms: most of the tail latency.)
"""

from __future__ import annotations

import selectors
import threading
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future
from concurrent.futures import wait as wait_futures
from dataclasses import dataclass
from typing import Any

from redis.exceptions import ResponseError

from llama_consciousness.storage import knn_gate, replies
from llama_consciousness.storage.level_store import (
    GRAPH_REGISTRY, INDEX_STATUS, Await, Plan, Query, StorageError, _index_not_ready, _missing_graph,
)
from llama_consciousness.storage.params import header as params_header


@dataclass(slots=True)
class _Job:
    graph: Any
    plan: Plan
    pool: Any  # of the server that holds the graph
    connection: Any = None
    sent: bool = False
    result: Any = None
    done: bool = False
    # a vector search holds its graph's gate while in flight (knn_gate);
    # one whose gate was taken waits in ``pending`` (its command)
    gate: threading.Lock | None = None
    pending: tuple[list[Any], threading.Lock] | None = None
    awaiting: Future | None = None  # the plan waits for this (``Await``), no query in flight
    command: list[Any] | None = None  # the query last sent
    retry_at: float | None = None  # its vector index was being built: asked again at this time


# how often a vector search whose index the server is still building is asked again (within the deadline)
_INDEX_RETRY_S = 0.05

# how often replies are polled while a plan awaits work beside the server's queries
_AWAIT_POLL_S = 0.002

# poll(2) has no limit on descriptor numbers (select's is 1024) and, unlike epoll, needs no descriptor of its own
_Selector = getattr(selectors, "PollSelector", selectors.SelectSelector)


def _connection(pool: Any, deadline: float | None = None) -> Any:
    """A connection of ``pool``; one it has to make gives up at ``deadline`` where the pool can bound it
    (``BoundedPool.connection_by``): a host that drops packets costs the caller's deadline, not the
    connect timeout."""
    bounded = getattr(pool, "connection_by", None)
    if bounded is not None and deadline is not None:
        return bounded(deadline)
    try:
        return pool.get_connection()
    except TypeError:  # redis-py before 6 wants a command name
        return pool.get_connection("GRAPH.RO_QUERY")


def pool_for(db: Any, graph: str) -> Any:
    """The connection pool of the server holding ``graph`` (a cluster's master by slot, else the one server)."""
    route = getattr(db, "pool_for", None)
    return route(graph) if route is not None else db.connection.connection_pool


def run_interleaved(db: Any, jobs: Sequence[tuple[str, Plan]], timeout_ms: int | None = None) -> list[Any]:
    """Run read-only ``(graph name, plan)`` jobs all at once; their results in order.

    A result is what the plan returns, or the exception that stopped it (a
    ``StorageError`` for a failed query): one failing channel does not stop
    the others.  A graph that does not exist reads as empty.  ``timeout_ms``
    limits every query on the server and the whole run here: what is
    unanswered by then fails with ``TimeoutError``.
    """
    bound = getattr(db, "max_connections", None) or getattr(getattr(db.connection, "connection_pool", None),
                                                               "max_connections", 0) or len(jobs)
    if len(jobs) <= bound:
        return Interleaved(db, jobs, timeout_ms).results()
    # more jobs than the pool holds connections: in turns, within the one deadline
    deadline = None if timeout_ms is None else time.monotonic() + timeout_ms / 1000
    out: list[Any] = []
    for start in range(0, len(jobs), bound):
        left = None if deadline is None else max(0, int((deadline - time.monotonic()) * 1000))
        out += Interleaved(db, jobs[start:start + bound], left).results()
    return out


GRAPH_TYPE = "graphdata"
"""What ``TYPE`` says of a FalkorDB graph's key."""


def list_graphs(db: Any, timeout_ms: int | None = None) -> list[str]:
    """The names of the server's graphs (``GRAPH.LIST``); a stalled server raises ``TimeoutError`` after
    ``timeout_ms`` (its connection dropped) instead of holding the caller."""
    return [_text(n) for n in ask(db, [("GRAPH.LIST",)], timeout_ms)[0]]


def graph_states(db: Any, names: Sequence[str], timeout_ms: int | None = None) -> tuple[set[str], set[str]]:
    """Of the graphs ``names``: those that exist now, and those registered as written (``GRAPH_REGISTRY``),
    in one round trip whatever the number of graphs on the server.

    A registered name that is no graph now was deleted or replaced by another key.
    """
    if not names:
        return set(), set()
    replies_in = ask(db, [*(("TYPE", n) for n in names), ("SMISMEMBER", GRAPH_REGISTRY, *names)], timeout_ms)
    present = {n for n, kind in zip(names, replies_in) if _text(kind) == GRAPH_TYPE}
    written = {n for n, member in zip(names, replies_in[-1]) if int(member)}
    return present, written


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def ask(db: Any, commands: Sequence[tuple[Any, ...]], timeout_ms: int | None) -> list[Any]:
    """The replies to ``commands``, pipelined on one connection of the server, each within ``timeout_ms``
    (a stalled server raises ``TimeoutError``, its connection dropped)."""
    pool = db.connection.connection_pool
    connection = _connection(pool, None if timeout_ms is None else time.monotonic() + timeout_ms / 1000)
    replies_in: list[Any] = []
    try:
        connection.send_packed_command(connection.pack_commands(commands))
        for command in commands:
            if timeout_ms is not None and not connection.can_read(timeout=timeout_ms / 1000):
                connection.disconnect()
                raise TimeoutError(f"no answer to {command[0]} within {timeout_ms} ms")
            replies_in.append(connection.read_response())
    except BaseException:
        connection.disconnect()
        raise
    finally:
        pool.release(connection)
    return replies_in


class Interleaved:
    """``run_interleaved`` in two halves: creating it sends every plan's first query, :meth:`results`
    (called once) reads the replies, sending any further queries, and returns the connections to the pool."""

    def __init__(self, db: Any, jobs: Sequence[tuple[str, Plan]], timeout_ms: int | None = None) -> None:
        self._db = db
        self._timeout_ms = timeout_ms
        self._deadline = None if timeout_ms is None else time.monotonic() + timeout_ms / 1000
        self._state: list[_Job] = []
        self._closed = False
        self._reserved: list[tuple[Any, int]] = []
        try:
            for name, plan in jobs:
                job = _Job(db.select_graph(name), plan, None)
                self._state.append(job)
                try:
                    job.pool = pool_for(db, name)
                except Exception as exc:  # a cluster with no master for the graph now: this job fails
                    _fail(job, exc)
            # every connection the run needs, at once (BoundedPools), pool by pool in one order: no cycle
            needs: dict[int, list[Any]] = {}
            for job in self._state:
                if job.pool is not None:
                    needs.setdefault(id(job.pool), [job.pool, 0])[1] += 1
            for pool, n in sorted(needs.values(), key=lambda e: id(e[0])):
                reserve = getattr(pool, "reserve", None)
                if reserve is None:
                    continue
                try:
                    self._reserved.append((pool, reserve(n, self._deadline)))
                except TimeoutError as exc:
                    for job in self._state:
                        if not job.done:
                            job.result, job.done = exc, True
                            job.plan.close()
                    return
            for job in self._state:
                if not job.done:
                    _advance(self._db, job, None, timeout_ms, self._deadline)
        except BaseException:
            self._close()
            raise

    def results(self) -> list[Any]:
        """Every job's result (or exception), in order; unanswered after ``timeout_ms``: ``TimeoutError``."""
        if self._closed:
            raise RuntimeError("the results of these plans were already taken")
        try:
            while True:
                retry_in = self._due_retries()
                self._send_pending(wait=False)
                self._settle_awaited()
                waiting = [job for job in self._state if job.sent]
                awaited = [job.awaiting for job in self._state if job.awaiting is not None]
                remaining = None if self._deadline is None else self._deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    self._expire()
                    break
                if not waiting:
                    if awaited:
                        timeout = remaining if retry_in is None else (
                            retry_in if remaining is None else min(remaining, retry_in))
                        wait_futures(awaited, timeout=timeout, return_when=FIRST_COMPLETED)
                        continue
                    if not any(job.pending for job in self._state):
                        if retry_in is None:
                            break
                        time.sleep(retry_in if remaining is None else max(0.0, min(retry_in, remaining)))
                        continue
                    # Nothing of ours in flight, so no gate held: waiting for
                    # one that another thread holds cannot close a cycle.
                    self._send_pending(wait=True, timeout=remaining)
                    continue
                # a moment at a time while other work is awaited: it may finish first
                wait = remaining
                if awaited:
                    wait = _AWAIT_POLL_S if remaining is None else min(remaining, _AWAIT_POLL_S)
                if retry_in is not None:
                    wait = retry_in if wait is None else min(wait, retry_in)
                ready = _first_ready(waiting, wait)
                if ready is not None:
                    self._read(ready)
        finally:
            self._close()
        return [job.result for job in self._state]

    def _settle_awaited(self) -> None:
        """Plans whose awaited work is done go on with its result (or its error)."""
        for job in self._state:
            if job.awaiting is not None and job.awaiting.done():
                future, job.awaiting = job.awaiting, None
                exc = future.exception()
                if exc is not None:
                    _fail(job, exc)
                else:
                    _advance(self._db, job, future.result(), self._timeout_ms, self._deadline)

    def _time_left(self, seconds: float) -> bool:
        return self._deadline is None or time.monotonic() + seconds < self._deadline

    def _due_retries(self) -> float | None:
        """Queries whose vector index was being built go out again once their time has come (as any vector
        search: through their graph's gate); the seconds until the next one still waiting, or None."""
        now, soonest = time.monotonic(), None
        for job in self._state:
            if job.retry_at is None:
                continue
            if job.retry_at <= now:
                job.retry_at = None
                job.pending = (job.command, knn_gate.gate(self._db, job.graph.name))
            else:
                soonest = min(soonest if soonest is not None else job.retry_at, job.retry_at)
        return None if soonest is None else soonest - now

    def _expire(self) -> None:
        for job in self._state:
            if not job.done:
                _release(job)
                job.retry_at = None
                job.pending = job.awaiting = None
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
            if (_index_not_ready(exc) and job.command is not None and self._time_left(_INDEX_RETRY_S)
                    and _index_building(job, self._deadline)):
                job.retry_at = time.monotonic() + _INDEX_RETRY_S  # the server is building it after a restart
                return
            if not _missing_graph(exc):
                _fail(job, exc)
                return
            rows = []
        except Exception as exc:  # connection lost: this job fails, the others go on
            job.connection.disconnect()
            _fail(job, exc)
            return
        _advance(self._db, job, rows, self._timeout_ms, self._deadline)

    def _close(self) -> None:
        self._closed = True
        for job in self._state:
            if job.connection is not None:
                if job.sent:  # a reply left unread: the connection is not reusable
                    job.connection.disconnect()
                    job.sent = False
                job.pool.release(job.connection)
                job.connection = None
            _release(job)
            job.pending = None
            if not job.done:
                job.plan.close()
        for pool, n in self._reserved:
            pool.unreserve(n)
        self._reserved = []


def _can_read(job: _Job, timeout: float | None) -> bool:
    """Whether the job's reply is ready; a connection the server closed is "ready" too: reading it fails
    that job alone (the server died with the query in flight), not the whole run."""
    try:
        return job.connection.can_read(timeout=timeout)
    except Exception:  # noqa: BLE001 - the read that follows raises it again, for this job
        return True


def _first_ready(jobs: Sequence[_Job], timeout: float | None) -> _Job | None:
    """The first of ``jobs`` whose reply is ready within ``timeout`` (None: no limit), else None.

    Waiting on one connection (the oldest query's) would leave the replies of the others unread behind a
    stalled server until the deadline, and fail them with it.
    """
    # what redis-py has buffered already (or an SSL layer holds) is no event on the socket: asked first
    ready = next((j for j in jobs if _can_read(j, 0)), None)
    if ready is not None or timeout == 0:
        return ready
    end = None if timeout is None else time.monotonic() + timeout
    unwatched: list[_Job] = []  # connections that show no socket: polled a moment at a time
    with _Selector() as selector:
        for job in jobs:
            try:
                selector.register(job.connection._sock, selectors.EVENT_READ, job)
            except (AttributeError, TypeError, ValueError, KeyError, OSError):
                unwatched.append(job)
        while True:
            left = None if end is None else end - time.monotonic()
            if left is not None and left <= 0:
                return None
            step = left if not unwatched else _AWAIT_POLL_S if left is None else min(left, _AWAIT_POLL_S)
            for key, _ in selector.select(step):
                if _can_read(key.data, 0):  # readable, though a partial TLS record is no reply yet
                    return key.data
            ready = next((j for j in unwatched if _can_read(j, 0)), None)
            if ready is not None:
                return ready


def _release(job: _Job) -> None:
    if job.gate is not None:
        job.gate.release()
        job.gate = None


def _fail(job: _Job, exc: BaseException) -> None:
    _release(job)
    job.pending = None
    cluster = getattr(job.graph, "cluster", None)
    if cluster is not None:  # the cluster reads its slot map again if the server is down or moved the graph
        exc = cluster.failed(job.graph.name, exc)
    job.result = exc if isinstance(exc, StorageError) else StorageError(
        f"query on graph {job.graph.name!r} failed: {exc}")
    job.done = True
    job.plan.close()


def _index_building(job: _Job, deadline: float | None) -> bool:
    """Whether one of the job's graph's indexes is under construction, asked on the job's own connection (its
    reply was just read: nothing else is in flight on it); any failure answers no (the error stands)."""
    try:
        job.connection.send_command(*replies.command(job.graph, INDEX_STATUS, True, None))
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        if not job.connection.can_read(timeout=left):
            job.connection.disconnect()
            return False
        rows = replies.result_rows(job.graph, job.connection.read_response())
    except Exception:  # noqa: BLE001 - no answer about the indexes: the query's own error stands
        job.connection.disconnect()
        return False
    return any(status != "OPERATIONAL" for (status,) in rows)  # as ``LevelPlans.wait_operational`` reads it


def _send(job: _Job, command: list[Any]) -> None:
    job.command = command
    try:
        job.connection.send_command(*command)
    except Exception as exc:
        job.connection.disconnect()
        _fail(job, exc)
        return
    job.sent = True


def _advance(db: Any, job: _Job, rows: Any, timeout_ms: int | None, deadline: float | None) -> None:
    """Give the plan its rows (None to start it) and send its next query (or record its result)."""
    try:
        step = job.plan.send(rows)
        if isinstance(step, Await):
            job.awaiting = step.future
            return
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
        try:
            job.connection = _connection(job.pool, deadline)
        except Exception as exc:  # the server refuses or does not answer: this job fails, the others go on
            _fail(job, exc)
            return
    command = replies.command(job.graph, params_header(step.params) + step.cypher, True, timeout_ms)
    if knn_gate.searches_vectors(step.cypher):
        lock = knn_gate.gate(db, job.graph.name)
        if not lock.acquire(blocking=False):  # sent when the search in flight is read
            job.pending = (command, lock)
            return
        job.gate = lock
    _send(job, command)
