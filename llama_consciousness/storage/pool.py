"""A bounded pool of FalkorDB connections that callers wait for, never fail for.

A retrieval holds one connection per query in flight (``run_interleaved``),
about ten at once; unbounded, a burst of callers opens thousands.  Bounded
naively (redis-py's ``BlockingConnectionPool`` alone), callers that each hold
part of what they need and wait for the rest deadlock.  So a caller that
needs several connections reserves them all at once first (``reserve``),
and callers of one connection at a time never wait while holding one: the
pool always drains.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from redis import BlockingConnectionPool

DEFAULT_MAX_CONNECTIONS = 64
CONNECTIONS_PER_RETRIEVAL = 10
"""About the most a retrieval holds at once (three levels x three channels, and the graph listing)."""


class BoundedPool(BlockingConnectionPool):
    """At most ``max_connections`` connections; a caller beyond that waits for one (no timeout of its own:
    every reply has the socket's timeout, so a connection always comes back)."""

    def __init__(self, max_connections: int = DEFAULT_MAX_CONNECTIONS, **kwargs: Any) -> None:
        if not isinstance(max_connections, int) or max_connections < 1:
            raise ValueError(f"max_connections must be a positive int, got {max_connections!r}")
        kwargs.pop("timeout", None)
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

    def unreserve(self, n: int) -> None:
        with self._changed:
            self._reservable += n
            self._changed.notify_all()
