"""A bounded pool of FalkorDB connections that callers wait for, never fail for.

A retrieval holds one connection per query in flight (``run_interleaved``),
about ten at once; unbounded, a burst of callers opens thousands.  Bounded
naively (redis-py's ``BlockingConnectionPool`` alone), callers that each hold
part of what they need and wait for the rest deadlock.  So a caller that
needs several connections reserves them all at once first (``reserve``),
and callers of one connection at a time never wait while holding one: the
pool always drains.

A connection made during a retrieval must not cost more than the
retrieval's deadline (a host that drops packets would hold it for the
connect timeout, times redis-py's retries): ``connection_by`` bounds it.
"""

from __future__ import annotations

import threading
import time
from contextvars import ContextVar
from typing import Any

from redis import BlockingConnectionPool, Connection
from redis.backoff import NoBackoff
from redis.retry import Retry

DEFAULT_MAX_CONNECTIONS = 64
CONNECTIONS_PER_RETRIEVAL = 10
"""About the most a retrieval holds at once (three levels x three channels, and the graph listing)."""

# the deadline of the caller of ``connection_by`` in this thread (not on the pool, which threads share)
_connect_by: ContextVar[float | None] = ContextVar("connect_by", default=None)
# one attempt: a retry after a timed-out connect would start over with no time left
_ONE_ATTEMPT = Retry(NoBackoff(), 0)


class _ConnectBy:
    """A connection whose connect, inside ``BoundedPool.connection_by``, gives up at its caller's deadline
    (redis-py connects in ``get_connection``, which takes no deadline: it comes through ``_connect_by``)."""

    def connect(self, *args: Any, **kwargs: Any) -> Any:
        deadline = _connect_by.get()
        if deadline is None:
            return super().connect(*args, **kwargs)  # type: ignore[misc]
        # the connection is this caller's alone until released, so its settings may change meanwhile
        timeout, retry = self.socket_connect_timeout, self.retry  # type: ignore[attr-defined]
        left = max(deadline - time.monotonic(), 0.001)
        self.socket_connect_timeout = left if timeout is None else min(timeout, left)
        self.retry = _ONE_ATTEMPT
        try:
            return super().connect(*args, **kwargs)  # type: ignore[misc]
        finally:
            self.socket_connect_timeout, self.retry = timeout, retry


def _bounded(connection_class: type) -> type:
    """``connection_class`` with ``_ConnectBy`` (once: a class derived from a bounded one stays as it is)."""
    if issubclass(connection_class, _ConnectBy):
        return connection_class
    return type(connection_class.__name__, (_ConnectBy, connection_class), {})


class BoundedPool(BlockingConnectionPool):
    """At most ``max_connections`` connections; a caller beyond that waits for one (no timeout of its own:
    every reply has the socket's timeout, so a connection always comes back)."""

    def __init__(self, max_connections: int = DEFAULT_MAX_CONNECTIONS, **kwargs: Any) -> None:
        if not isinstance(max_connections, int) or max_connections < 1:
            raise ValueError(f"max_connections must be a positive int, got {max_connections!r}")
        kwargs.pop("timeout", None)
        kwargs["connection_class"] = _bounded(kwargs.get("connection_class", Connection))
        super().__init__(max_connections=max_connections, timeout=None, **kwargs)
        self._reservable = max_connections
        self._changed = threading.Condition()

    def reserve(self, n: int, deadline: float | None) -> int:
        """Reserve ``n`` connections (at most the bound) for one caller, waiting until ``deadline``
        (``time.monotonic()``); the number reserved, to give back with :meth:`unreserve`.

        Raises ``TimeoutError`` when they are not free by the deadline.
        """
        n = min(n, self.max_connections)
        with self._changed:
            while self._reservable < n:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise TimeoutError(f"no {n} FalkorDB connections free before the deadline "
                                       f"(at most {self.max_connections} per memory)")
                self._changed.wait(remaining)
            self._reservable -= n
        return n

    def connection_by(self, deadline: float | None) -> Any:
        """A connection, as ``get_connection``, whose connect (if it has to connect) gives up at ``deadline``
        (``time.monotonic()``) with redis-py's ``TimeoutError``."""
        token = _connect_by.set(deadline)
        try:
            try:
                return self.get_connection()
            except TypeError:  # redis-py before 6 wants a command name
                return self.get_connection("GRAPH.RO_QUERY")
        finally:
            _connect_by.reset(token)

    def unreserve(self, n: int) -> None:
        with self._changed:
            self._reservable += n
            self._changed.notify_all()
