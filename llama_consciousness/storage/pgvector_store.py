"""Vectors of a level kept in Postgres/pgvector while its graph stays in FalkorDB.

Our own SQL, not ``llama-index-vector-stores-postgres``: that store pastes filter values into the SQL,
never updates (a node added twice gives two rows) and keeps times in JSONB, compared as text.  Here values
are bound parameters, a write is an idempotent upsert keyed by ``(graph, node_id)``, and times are typed
``timestamptz`` columns.  One table per embedding dimension, shared by the level graphs that use Postgres.
"""

from __future__ import annotations

import json
import logging
import math
import select
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import psycopg2
import psycopg2.extensions
from psycopg2 import sql

from llama_consciousness.errors import EmbeddingDimensionError, StorageError
from llama_consciousness.schema import MemoryNode
from llama_consciousness.schema._time import to_utc
from llama_consciousness.storage.records import defaulted_times, node_row
from llama_consciousness.scoring.emotions import canonical_vector
from llama_consciousness.storage.filters import MemoryFilter
from llama_consciousness.temporal import TemporalWindow, sql_predicate

logger = logging.getLogger(__name__)


def _vector_literal(values: Sequence[float]) -> str:
    """pgvector's text input form, passed as a bound parameter (never as SQL)."""
    parts = []
    for v in values:
        f = float(v)
        if not math.isfinite(f):
            raise ValueError("embedding components must be finite")
        parts.append(repr(f))
    return "[" + ",".join(parts) + "]"


def _ts(value: datetime | None) -> datetime | None:
    return None if value is None else to_utc(value).replace(microsecond=0)


PURGE_TIMEOUT_S = 300.0
"""Bound of :meth:`PgVectorStore.purge_files` (rewriting the table takes about as long as reading it)."""

_SCHEMA_LOCK = 0x6C63_7363  # "lcsc": the advisory lock of ensure_schema

# Left out of a row's content hash: ``authority_score`` follows the clock (its freshness; the graph leaves it out
# of its hash as volatile) and is no column here, so re-ingesting a memory must not rewrite its row.
_UNHASHED = ("authority_score",)


def _wait(conn: Any, deadline: float) -> None:
    """Drive a non-blocking libpq connection until its current operation ends, or raise ``TimeoutError``."""
    poller = select.poll()
    fd = conn.fileno()
    while True:
        state = conn.poll()
        if state == psycopg2.extensions.POLL_OK:
            return
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("Postgres did not answer within the timeout")
        poller.register(fd, select.POLLIN if state == psycopg2.extensions.POLL_READ else select.POLLOUT)
        poller.poll(remaining * 1000)
        poller.unregister(fd)


def _execute(cur: Any, statement: Any, params: Any, deadline: float) -> None:
    cur.execute(statement, params)
    _wait(cur.connection, deadline)


def _execute_values(cur: Any, statement: str, template: str, rows: list[tuple], deadline: float,
                    page_size: int = 500) -> list[tuple]:
    """``psycopg2.extras.execute_values`` for a non-blocking connection: ``VALUES %s`` filled page by page,
    the rows quoted by the driver (``mogrify``)."""
    pre, post = statement.encode().split(b"%s")
    out: list[tuple] = []
    for start in range(0, len(rows), page_size):
        values = b",".join(cur.mogrify(template, row) for row in rows[start:start + page_size])
        _execute(cur, pre + values + post, None, deadline)
        out.extend(cur.fetchall())
    return out


class PgVectorStore:
    """The vector channel of the levels configured for Postgres.

    A pool of at most ``pool_size`` connections (a caller beyond waits for one).  Every wait has a timeout:
    connecting (``connect_timeout_s``), a free connection and a reply (``timeout_s`` or the caller's
    deadline, polled on the client in libpq's non-blocking mode).  A broken connection is replaced and the
    call tried once more (every statement is idempotent), after ``revive`` restarts a dead embedded server.
    """

    def __init__(self, url: str, dimension: int, *, ef_search: int = 200, m: int = 16, ef_construction: int = 200,
                 pool_size: int = 8, timeout_s: float = 120.0, connect_timeout_s: float = 5.0,
                 revive: Callable[[], bool] | None = None) -> None:
        if not isinstance(dimension, int) or dimension <= 0 or dimension > 16000:
            raise ValueError(f"dimension must be a positive int (pgvector allows up to 16000), got {dimension!r}")
        # pgvector's own bounds; its build defaults (m 16, ef_construction 64) gave recall@10 0.919 at 100K
        # memories, ef_construction 200 (FalkorDB's, VectorIndexConfig) is measured by pgvector_params.py
        if not isinstance(m, int) or isinstance(m, bool) or not 2 <= m <= 100:
            raise ValueError(f"m must be an int in [2, 100], got {m!r}")
        if not isinstance(ef_construction, int) or isinstance(ef_construction, bool) or \
                not max(4, 2 * m) <= ef_construction <= 1000:
            raise ValueError(f"ef_construction must be an int in [2 * m, 1000], got {ef_construction!r}")
        if pool_size < 1:
            raise ValueError(f"pool_size must be at least 1, got {pool_size!r}")
        self.url = url
        self.dimension = dimension
        self.ef_search = int(ef_search)
        self.m, self.ef_construction = m, ef_construction
        self.timeout_s = float(timeout_s)
        self.connect_timeout_s = float(connect_timeout_s)
        self.pool_size = pool_size
        self._revive = revive
        self.table = sql.Identifier(f"lc_memory_vectors_{dimension}")
        self._idle: list[Any] = []
        self._idle_lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(pool_size)

    # -- connection -----------------------------------------------------

    def _connect(self, deadline: float) -> Any:
        timeout = max(1, math.ceil(min(self.connect_timeout_s, deadline - time.monotonic())))
        conn = psycopg2.connect(self.url, async_=True, connect_timeout=timeout)
        try:
            _wait(conn, min(deadline, time.monotonic() + self.connect_timeout_s))
            with conn.cursor() as cur:
                # hnsw.iterative_scan: keep walking the HNSW graph until k rows pass the filters
                _execute(cur, "SET hnsw.iterative_scan = relaxed_order; SET hnsw.ef_search = %s;"
                         " SET statement_timeout = %s", (self.ef_search, int(self.timeout_s * 1000)), deadline)
        except BaseException:
            conn.close()
            raise
        return conn

    def _call(self, what: str, work: Callable[[Any, float], Any], deadline: float | None = None) -> Any:
        """``work(cursor, deadline)`` on a pooled connection; a broken connection is replaced once."""
        deadline = time.monotonic() + self.timeout_s if deadline is None else deadline
        for attempt in (0, 1):
            if not self._slots.acquire(timeout=max(0.0, deadline - time.monotonic())):
                raise StorageError(f"{what} failed: no Postgres connection free within the timeout")
            conn = None
            try:
                with self._idle_lock:
                    conn = self._idle.pop() if self._idle else None
                if conn is None or conn.closed:
                    conn = self._connect(deadline)
                with conn.cursor() as cur:
                    result = work(cur, deadline)
                with self._idle_lock:
                    self._idle.append(conn)
                return result
            except (psycopg2.OperationalError, psycopg2.InterfaceError, TimeoutError) as exc:
                if conn is not None:
                    conn.close()
                broken = not isinstance(exc, TimeoutError) and time.monotonic() < deadline
                if attempt == 0 and broken:
                    if self._revive is not None:
                        self._revive()
                    continue
                raise StorageError(f"{what} failed: {exc}") from exc
            except psycopg2.Error as exc:
                if conn is not None:  # its transaction is aborted: a new connection is simpler than a rollback
                    conn.close()
                raise StorageError(f"{what} failed: {exc}") from exc
            except BaseException:
                if conn is not None:
                    conn.close()
                raise
            finally:
                self._slots.release()
        raise AssertionError("unreachable")

    def close(self) -> None:
        with self._idle_lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def ensure_schema(self) -> None:
        t = self.table
        statements = [
            sql.SQL("CREATE EXTENSION IF NOT EXISTS vector"),
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {t} ("
                " graph text NOT NULL, node_id text NOT NULL, level text NOT NULL, citizen_id text,"
                " embedding vector({dim}) NOT NULL,"
                " energy double precision NOT NULL, confidence double precision NOT NULL,"
                " resolution_state text NOT NULL,"
                " valid_at timestamptz NOT NULL, invalid_at timestamptz,"
                " created_at timestamptz NOT NULL, expired_at timestamptz,"
                " content_hash text NOT NULL,"
                " PRIMARY KEY (graph, node_id))"
            ).format(t=t, dim=sql.Literal(self.dimension)),
            # the filters a retrieval applies inside the query (see storage.filters)
            sql.SQL("ALTER TABLE {t} ADD COLUMN IF NOT EXISTS quarantined boolean NOT NULL DEFAULT false").format(t=t),
            sql.SQL("ALTER TABLE {t} ADD COLUMN IF NOT EXISTS is_entity boolean NOT NULL DEFAULT false").format(t=t),
            sql.SQL("ALTER TABLE {t} ADD COLUMN IF NOT EXISTS emotions text[] NOT NULL DEFAULT '{{}}'").format(t=t),
            # the build settings apply when the index is created: an existing index keeps its own
            sql.SQL("CREATE INDEX IF NOT EXISTS {i} ON {t} USING hnsw (embedding vector_cosine_ops)"
                    " WITH (m = {m}, ef_construction = {efc})").format(
                i=sql.Identifier(f"lc_memory_vectors_{self.dimension}_hnsw"), t=t,
                m=sql.Literal(self.m), efc=sql.Literal(self.ef_construction),
            ),
            sql.SQL("CREATE INDEX IF NOT EXISTS {i} ON {t} (graph, created_at, expired_at)").format(
                i=sql.Identifier(f"lc_memory_vectors_{self.dimension}_time"), t=t
            ),
        ]

        def work(cur: Any, deadline: float) -> None:
            _execute(cur, "BEGIN", None, deadline)
            # processes opening a fresh database together: "IF NOT EXISTS" is not atomic in Postgres
            # (a duplicate key on pg_type), so they take turns
            _execute(cur, "SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,), deadline)
            for statement in statements:
                _execute(cur, statement, None, deadline)
            _execute(cur, "COMMIT", None, deadline)

        self._call("creating the Postgres vector table", work)

    # -- writes ---------------------------------------------------------

    def upsert(self, graph: str, nodes: Sequence[MemoryNode]) -> int:
        """Insert or update the vectors of ``nodes``, unchanged rows untouched; returns the rows written.
        Defaulted times keep their stored value, as in the graph store, so re-ingesting is a no-op."""
        rows = []
        # last write wins for a repeated id, as in the graph store (Postgres
        # refuses to update one row twice in one INSERT ... ON CONFLICT)
        nodes = list({node.node_id: node for node in nodes}.values())
        for node in nodes:
            if node.embedding is None:
                continue
            if len(node.embedding) != self.dimension:
                raise EmbeddingDimensionError(
                    f"memory {node.node_id!r} has an embedding of dimension {len(node.embedding)}, "
                    f"but the Postgres vector table holds dimension {self.dimension}"
                )
            keep = defaulted_times(node)
            rows.append((
                graph, node.node_id, node.level, node.citizen_id, _vector_literal(node.embedding),
                node.energy, node.confidence, node.resolution_state,
                _ts(node.valid_at), _ts(node.invalid_at), _ts(node.created_at), _ts(node.expired_at),
                node.quarantined, node.is_entity, sorted(canonical_vector(node.emotion_vector)),
                node_row(node, volatile=_UNHASHED)["hash"], "created_at" in keep, "valid_at" in keep,
            ))
        if not rows:
            return 0
        statement = sql.SQL(
            "WITH v (graph, node_id, level, citizen_id, embedding, energy, confidence, resolution_state,"
            " valid_at, invalid_at, created_at, expired_at, quarantined, is_entity, emotions, content_hash,"
            " keep_created, keep_valid) AS (VALUES %s) "
            "INSERT INTO {t} (graph, node_id, level, citizen_id, embedding, energy, confidence, resolution_state,"
            " valid_at, invalid_at, created_at, expired_at, quarantined, is_entity, emotions, content_hash) "
            "SELECT v.graph, v.node_id, v.level, v.citizen_id, v.embedding::vector, v.energy, v.confidence,"
            " v.resolution_state,"
            " CASE WHEN v.keep_valid AND e.node_id IS NOT NULL THEN e.valid_at ELSE v.valid_at END,"
            " v.invalid_at,"
            " CASE WHEN v.keep_created AND e.node_id IS NOT NULL THEN e.created_at ELSE v.created_at END,"
            " v.expired_at, v.quarantined, v.is_entity, v.emotions, v.content_hash "
            "FROM v LEFT JOIN {t} e ON e.graph = v.graph AND e.node_id = v.node_id "
            "ON CONFLICT (graph, node_id) DO UPDATE SET"
            " level = EXCLUDED.level, citizen_id = EXCLUDED.citizen_id, embedding = EXCLUDED.embedding,"
            " energy = EXCLUDED.energy, confidence = EXCLUDED.confidence,"
            " resolution_state = EXCLUDED.resolution_state, valid_at = EXCLUDED.valid_at,"
            " invalid_at = EXCLUDED.invalid_at, created_at = EXCLUDED.created_at,"
            " expired_at = EXCLUDED.expired_at, quarantined = EXCLUDED.quarantined,"
            " is_entity = EXCLUDED.is_entity, emotions = EXCLUDED.emotions, content_hash = EXCLUDED.content_hash "
            "WHERE {t}.content_hash IS DISTINCT FROM EXCLUDED.content_hash RETURNING 1"
        ).format(t=self.table)
        template = (
            "(%s, %s, %s, %s, %s, %s::double precision, %s::double precision, %s,"
            " %s::timestamptz, %s::timestamptz, %s::timestamptz, %s::timestamptz, %s::boolean, %s::boolean,"
            " %s::text[], %s, %s::boolean, %s::boolean)"
        )
        return self._call(f"writing vectors of graph {graph!r} to Postgres", _in_transaction(statement, template, rows))

    # -- reads ----------------------------------------------------------

    def search(
        self,
        graph: str,
        embedding: Sequence[float],
        k: int,
        window: TemporalWindow | MemoryFilter,
        *,
        min_energy: float | None = None,
        min_confidence: float | None = None,
        deadline: float | None = None,
    ) -> list[tuple[str, float]]:
        """``(node_id, cosine similarity)`` of the k nearest memories that pass the filters of the FalkorDB
        channel, applied inside the SQL (pgvector's iterative scan keeps them from starving the result).
        ``deadline`` (``time.monotonic()``) bounds the wait, by default ``timeout_s``."""
        if len(embedding) != self.dimension:
            raise EmbeddingDimensionError(
                f"query embedding has dimension {len(embedding)}, the Postgres vector table holds {self.dimension}"
            )
        if k <= 0:
            return []
        f = window if isinstance(window, MemoryFilter) else MemoryFilter(
            window, min_energy=min_energy, min_confidence=min_confidence)
        predicate = sql_predicate(f.window)
        clauses = [sql.SQL("graph = %(graph)s"), sql.SQL(predicate.text)]
        params: dict[str, Any] = {**predicate.params, "graph": graph, "q": _vector_literal(embedding), "k": int(k)}
        if not f.include_quarantined:
            clauses.append(sql.SQL("NOT quarantined"))
        if not f.include_entities:
            clauses.append(sql.SQL("NOT is_entity"))
        if f.min_energy is not None:
            clauses.append(sql.SQL("energy >= %(min_energy)s"))
            params["min_energy"] = float(f.min_energy)
        if f.min_confidence is not None:
            clauses.append(sql.SQL("confidence >= %(min_confidence)s"))
            params["min_confidence"] = float(f.min_confidence)
        if f.required_emotions:
            clauses.append(sql.SQL("emotions && %(emotions)s::text[]"))
            params["emotions"] = f.canonical_emotions
        statement = sql.SQL(
            "SELECT node_id, 1 - (embedding <=> %(q)s::vector) AS similarity FROM {t} WHERE {w} "
            "ORDER BY embedding <=> %(q)s::vector LIMIT %(k)s"
        ).format(t=self.table, w=sql.SQL(" AND ").join(clauses))

        def work(cur: Any, deadline: float) -> list[tuple[str, float]]:
            _execute(cur, statement, params, deadline)
            return cur.fetchall()

        found = self._call(f"vector search of graph {graph!r} in Postgres", work, deadline)
        # relaxed_order may return rows slightly out of order: restore it.
        return sorted(((node_id, float(sim)) for node_id, sim in found), key=lambda r: -r[1])

    def mirror_validity(self, graph: str, nodes: Sequence[MemoryNode]) -> int:
        """Copy the stored times and flags of ``nodes`` (read back from the graph): an expired version's
        row must stop matching ``current`` too."""
        rows = [(graph, node.node_id, _ts(node.valid_at), _ts(node.invalid_at), _ts(node.created_at),
                 _ts(node.expired_at), node.quarantined) for node in nodes]
        if not rows:
            return 0
        statement = sql.SQL(
            "UPDATE {t} AS t SET valid_at = v.valid_at, invalid_at = v.invalid_at, created_at = v.created_at,"
            " expired_at = v.expired_at, quarantined = v.quarantined "
            "FROM (VALUES %s) AS v (graph, node_id, valid_at, invalid_at, created_at, expired_at, quarantined) "
            "WHERE t.graph = v.graph AND t.node_id = v.node_id RETURNING 1"
        ).format(t=self.table)
        template = "(%s, %s, %s::timestamptz, %s::timestamptz, %s::timestamptz, %s::timestamptz, %s::boolean)"
        return self._call(f"updating vector rows of graph {graph!r} in Postgres",
                          _in_transaction(statement, template, rows))

    def vectors_after(self, graph: str, after: str, limit: int) -> list[tuple[str, list[float]]]:
        """``(node_id, vector)`` of ``graph``'s memories with node ids after ``after``, in id order, at most
        ``limit`` (a page of ``ConsciousnessMemory.move_vectors``)."""
        def work(cur: Any, deadline: float) -> list[tuple[str, list[float]]]:
            _execute(cur, sql.SQL("SELECT node_id, embedding::text FROM {t} WHERE graph = %s AND node_id > %s "
                                  "ORDER BY node_id LIMIT %s").format(t=self.table), (graph, after, limit), deadline)
            return [(node_id, json.loads(text)) for node_id, text in cur.fetchall()]

        return self._call(f"reading the vectors of graph {graph!r}", work)

    def delete_graph(self, graph: str) -> int:
        """Remove every vector of ``graph`` (the graph itself was deleted); returns the rows removed."""
        def work(cur: Any, deadline: float) -> int:
            _execute(cur, sql.SQL("DELETE FROM {t} WHERE graph = %s").format(t=self.table), (graph,), deadline)
            return int(cur.rowcount)

        return self._call(f"deleting the vectors of graph {graph!r}", work)

    def delete_nodes(self, graph: str, node_ids: Sequence[str]) -> int:
        """Remove the vectors of memories ``node_ids`` of ``graph`` (erased); returns the rows removed.  The
        rows stay readable in the table's files and the WAL until :meth:`purge_files`."""
        ids = list(dict.fromkeys(node_ids))
        if not ids:
            return 0

        def work(cur: Any, deadline: float) -> int:
            _execute(cur, sql.SQL("DELETE FROM {t} WHERE graph = %s AND node_id = ANY(%s)").format(t=self.table),
                     (graph, ids), deadline)
            return int(cur.rowcount)

        return self._call(f"deleting vectors of graph {graph!r}", work)

    def purge_files(self, timeout_s: float = PURGE_TIMEOUT_S) -> int:
        """Make the rows deleted from the table unreadable on the disk (after an erasure); returns the WAL
        segment files deleted.

        A deleted row stays in the table's pages (and its ids in the primary key's) until they are rewritten,
        its values in the column statistics ANALYZE keeps (``pg_statistic``: node ids, graph names, which hold
        citizen ids), and in the WAL segments, which Postgres keeps until a checkpoint no longer needs them
        and then, by default, renames for reuse with their contents (``wal_recycle``).  So this rewrites the
        table, its indexes and its statistics (``VACUUM (FULL, ANALYZE)``), then the statistics catalog
        (``VACUUM FULL pg_statistic``), then switches to a new WAL segment and checkpoints until none of the
        segment files present at the start is left (with ``wal_recycle`` off, the embedded server's setting,
        Postgres deletes them; one that was recycled earlier, with old contents, is left behind the same way).

        The table is locked while it is rewritten (searches of Postgres levels wait).  Needs a superuser (the
        embedded server's is one) and ``wal_recycle`` off; raises ``StorageError`` when either is missing or
        when segments are still kept at ``timeout_s`` (a replication slot or ``wal_keep_size`` keeps them).
        WAL already archived elsewhere (``archive_mode``) is beyond its reach.
        """
        deadline = time.monotonic() + timeout_s

        def names(cur: Any) -> set[str]:
            _execute(cur, "SELECT name FROM pg_ls_waldir() WHERE name ~ '^[0-9A-F]{24}$'", None, deadline)
            return {row[0] for row in cur.fetchall()}

        def work(cur: Any, deadline: float) -> int:
            _execute(cur, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user", None, deadline)
            if not cur.fetchone()[0]:
                raise StorageError("purging Postgres files needs a superuser (VACUUM of pg_statistic, "
                                   "pg_switch_wal, CHECKPOINT); the deleted rows remain readable in its files")
            # the session's own limit (``timeout_s`` of the store) would cut a long rewrite short
            _execute(cur, "SET statement_timeout = %s", (max(1, int((deadline - time.monotonic()) * 1000)),),
                     deadline)
            _execute(cur, sql.SQL("VACUUM (FULL, ANALYZE) {t}").format(t=self.table), None, deadline)
            _execute(cur, "VACUUM FULL pg_catalog.pg_statistic", None, deadline)
            _execute(cur, "SELECT current_setting('wal_recycle'), current_setting('archive_mode'),"
                          " current_setting('wal_keep_size'), (SELECT count(*) FROM pg_replication_slots)",
                     None, deadline)
            recycle, archive, keep, slots = cur.fetchone()
            if recycle == "on":
                raise StorageError(
                    "Postgres renames old WAL segments for reuse with their contents (wal_recycle = on): the "
                    "deleted rows remain in pg_wal; set it off (ALTER SYSTEM SET wal_recycle = off; SELECT "
                    "pg_reload_conf()), as the embedded server does, and purge again")
            if archive != "off":
                logger.warning("Postgres archives its WAL (archive_mode = %s): archived copies of the deleted rows "
                               "are beyond the purge", archive)
            before = names(cur)
            left = set(before)
            while left:
                _execute(cur, "SELECT pg_switch_wal()", None, deadline)
                _execute(cur, "CHECKPOINT", None, deadline)
                left = before & names(cur)
                if left and time.monotonic() >= deadline:
                    raise StorageError(
                        f"Postgres still keeps WAL segments {sorted(left)} after {timeout_s:.0f} s "
                        f"(replication slots: {slots}, wal_keep_size: {keep}); the deleted rows remain in them")
            _execute(cur, "SET statement_timeout = %s", (int(self.timeout_s * 1000),), deadline)
            return len(before)

        return self._call("purging deleted rows from the Postgres files", work, deadline)

    def count(self, graph: str) -> int:
        def work(cur: Any, deadline: float) -> int:
            _execute(cur, sql.SQL("SELECT count(*) FROM {t} WHERE graph = %s").format(t=self.table), (graph,), deadline)
            return int(cur.fetchone()[0])

        return self._call(f"counting the vectors of graph {graph!r}", work)


def _in_transaction(statement: sql.Composable, template: str, rows: list[tuple]) -> Callable[[Any, float], int]:
    """The work of a paged ``INSERT/UPDATE ... FROM (VALUES %s) ... RETURNING 1``, all pages in one transaction."""

    def work(cur: Any, deadline: float) -> int:
        _execute(cur, "BEGIN", None, deadline)
        written = _execute_values(cur, statement.as_string(cur.connection), template, rows, deadline)
        _execute(cur, "COMMIT", None, deadline)
        return len(written)

    return work
