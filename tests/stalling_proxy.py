"""A real TCP proxy in front of a real FalkorDB server, that can stall it the ways servers stall.

``stall`` holds the replies to graph queries (of some graphs, or all) for a
while, as a server whose query threads are busy or whose graph is locked by
a long write does: the connection stays up and other commands answer.
``black_hole`` drops every connection and then accepts none (a listener
whose backlog is full), as a host that drops packets does: a connect hangs
until its timeout.  Shared by ``tests/storage/test_stalled_level.py`` and
``tests/cluster/test_stalled_master.py``.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from pathlib import Path

_QUERIES = (b"GRAPH.RO_QUERY", b"GRAPH.QUERY")


def _bulk(text: str) -> bytes:
    """How a command names ``text`` (a RESP bulk string), so that one graph's name does not match another's."""
    data = text.encode()
    return b"$%d\r\n%s\r\n" % (len(data), data)


class StallingProxy:
    """Listens on 127.0.0.1 (``port``) and forwards to ``upstream``: a unix socket path or ``(host, port)``."""

    def __init__(self, upstream: str | Path | tuple[str, int]) -> None:
        self._upstream = upstream
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._hold_s = 0.0
        self._graphs: tuple[bytes, ...] | None = None
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._closed = False
        self._hole: list[socket.socket] = []
        threading.Thread(target=self._accept, args=(self._listener,), daemon=True).start()

    # -- control -----------------------------------------------------------------------------

    def stall(self, hold_s: float, graphs: list[str] | None = None) -> None:
        """From now on, the reply to a graph query (on ``graphs``, else on any graph) comes ``hold_s`` late."""
        self._graphs = None if graphs is None else tuple(_bulk(g) for g in graphs)
        self._hold_s = hold_s

    def release(self) -> None:
        self._hold_s = 0.0

    def black_hole(self) -> None:
        """Drop every connection and accept no new one: a connect to ``port`` now hangs."""
        with contextlib.suppress(OSError):  # wakes the accepting thread (close alone leaves it listening)
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        self._drop_all()
        hole = socket.socket()
        hole.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        hole.bind(("127.0.0.1", self.port))
        hole.listen(0)
        filler = socket.create_connection(("127.0.0.1", self.port), timeout=2)  # the backlog's one place
        self._hole = [hole, filler]
        probe = socket.socket()
        probe.settimeout(0.2)
        try:
            probe.connect(("127.0.0.1", self.port))
            raise AssertionError("the black hole accepted a connection")
        except TimeoutError:
            pass
        finally:
            probe.close()

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self._listener.close()
        for s in self._hole:
            s.close()
        self._drop_all()

    def _drop_all(self) -> None:
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for s in sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    # -- forwarding ----------------------------------------------------------------------------

    def _connect_upstream(self) -> socket.socket:
        if isinstance(self._upstream, tuple):
            return socket.create_connection(self._upstream, timeout=5)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(str(self._upstream))
        return s

    def _accept(self, listener: socket.socket) -> None:
        while not self._closed:
            try:
                client, _ = listener.accept()
            except OSError:  # closed
                return
            try:
                server = self._connect_upstream()
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self._lock:
                self._sockets += [client, server]
            held = [0.0]  # when the reply to this connection's last query may go
            threading.Thread(target=self._requests, args=(client, server, held), daemon=True).start()
            threading.Thread(target=self._replies, args=(server, client, held), daemon=True).start()

    def _requests(self, client: socket.socket, server: socket.socket, held: list[float]) -> None:
        try:
            while data := client.recv(65536):
                hold = self._hold_s
                if hold and any(q in data for q in _QUERIES) and (
                        self._graphs is None or any(g in data for g in self._graphs)):
                    held[0] = time.monotonic() + hold
                server.sendall(data)
        except OSError:
            pass
        finally:
            _close_both(client, server)

    def _replies(self, server: socket.socket, client: socket.socket, held: list[float]) -> None:
        try:
            while data := server.recv(65536):
                wait = held[0] - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                client.sendall(data)
        except OSError:
            pass
        finally:
            _close_both(client, server)


def _close_both(*sockets: socket.socket) -> None:
    for s in sockets:
        with contextlib.suppress(OSError):
            s.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            s.close()


def black_hole_listener() -> tuple[socket.socket, socket.socket]:
    """A local listener that accepts no connection (its backlog is full): a connect to its port hangs.
    The listener and the connection that fills it, for the caller to close."""
    hole = socket.socket()
    hole.bind(("127.0.0.1", 0))
    hole.listen(0)
    filler = socket.create_connection(hole.getsockname(), timeout=2)
    return hole, filler
