"""``ConsciousnessMemory``: the servers, the three levels and the embedding, in one object.

An application opens one memory (usually as a context manager), writes
memories and relationships into it, and hands it to the retrievers.  By
default everything is embedded: FalkorDB is started in the data directory,
vectors live in FalkorDB, and the offline WordLlama model embeds.  Each of
these can be swapped by configuration: external servers by URL, Postgres for
a level's vectors, OpenAI or any LlamaIndex embedding.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from falkordb import FalkorDB
from redis import Redis, UnixDomainSocketConnection
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.retry import Retry

from llama_consciousness.embeddings import embedding_dimension, resolve_embed_model
from llama_consciousness.errors import LevelError
from llama_consciousness.levels import LEVELS, check_level, graph_level, graph_name
from llama_consciousness.nodes import memory_text
from llama_consciousness import erasing, forgetting, living, warmup
from llama_consciousness.schema import (ConsciousnessNode, ConsciousnessRelationship, ConsciousnessStream, ErasureReceipt,
                                        ForgetReason, ForgetReport, MemoryNode, RestoreReport)
from llama_consciousness.schema.citizen import CitizenState, FeedbackReport, UseReport
from llama_consciousness.gcquiet import settle_heap
from llama_consciousness.storage import citizen_states, run_interleaved, usage
from llama_consciousness.schema.common import check_vector
from llama_consciousness.storage.level_store import (
    LevelGraphStore,
    LevelPlans,
    UpsertResult,
    VectorIndexConfig,
    as_consciousness_node,
    migrate_layout,
    register_graph,
)
from llama_consciousness.storage import cluster
from llama_consciousness.storage.filters import MemoryFilter
from llama_consciousness.storage.keyword_index import KeywordIndexes
from llama_consciousness.storage.paths import default_data_dir, ensure_writable_dir
from llama_consciousness.storage.pool import CONNECTIONS_PER_RETRIEVAL, DEFAULT_MAX_CONNECTIONS, BoundedPool
from llama_consciousness.storage.vectors import VECTOR_BACKENDS, GraphVectors, LevelVectors, PostgresVectors
from llama_consciousness.schema._time import utcnow
from llama_consciousness.temporal import TemporalWindow

logger = logging.getLogger(__name__)

FALKORDB_URL_ENV = "LLAMA_CONSCIOUSNESS_FALKORDB_URL"
SERVER_IDLE_ENV = "LLAMA_CONSCIOUSNESS_SERVER_IDLE_S"
POSTGRES_URL_ENV = "LLAMA_CONSCIOUSNESS_POSTGRES_URL"
PGVECTOR_LEVELS_ENV = "LLAMA_CONSCIOUSNESS_PGVECTOR_LEVELS"


CONNECT_TIMEOUT_S = 5.0
"""How long connecting to FalkorDB may take."""
SOCKET_TIMEOUT_S = 120.0
"""How long any FalkorDB reply may take (a write of a large batch included)."""


def _parse_backends(vector_backends: Mapping[str, str] | None) -> dict[str, str]:
    backends = {level: "falkordb" for level in LEVELS}
    if vector_backends is None:
        env = os.environ.get(PGVECTOR_LEVELS_ENV, "")
        vector_backends = {lvl.strip(): "pgvector" for lvl in env.split(",") if lvl.strip()}
    for level, backend in vector_backends.items():
        check_level(level)
        if backend not in VECTOR_BACKENDS:
            raise ValueError(f"vector backend of {level} must be one of {VECTOR_BACKENDS}, not {backend!r}")
        backends[level] = backend
    return backends


def _idle_timeout(value: float | None) -> float:
    if value is None:
        text = os.environ.get(SERVER_IDLE_ENV, "").strip()
        try:
            value = float(text) if text else 0.0
        except ValueError:
            raise ValueError(f"${SERVER_IDLE_ENV} must be a number of seconds, not {text!r}") from None
    from llama_consciousness.storage.falkordb_server import check_idle_timeout

    return check_idle_timeout(value, "server_idle_timeout_s")


class _RevivingConnection(UnixDomainSocketConnection):
    """A connection to the embedded server that starts the server again when it died, so the first call
    after (retrieval, upsert, ingestion or a plain read) finds it running, with what it had persisted."""

    def __init__(self, *, revive: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._revive = revive

    def connect_check_health(self, *args: Any, **kwargs: Any) -> None:
        try:
            super().connect_check_health(*args, **kwargs)
        except RedisConnectionError:
            if not self._revive():
                raise
            super().connect_check_health(*args, **kwargs)


class _Retrievals:
    """How many retrievals run at once (a bounded semaphore: ``with memory.retrievals:``), and a call made
    once, when the first of them is over (``settle_heap``: what the first retrieval imported and built is
    then frozen too)."""

    def __init__(self, at_once: int, after_first: Callable[[], None] | None) -> None:
        self._slots = threading.BoundedSemaphore(at_once)
        self._after_first = after_first
        self._lock = threading.Lock()

    def __enter__(self) -> "_Retrievals":
        self._slots.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self._slots.release()
        if self._after_first is not None:
            with self._lock:
                call, self._after_first = self._after_first, None
            if call is not None:
                call()


class ConsciousnessMemory:
    """The memory of a set of citizens: N1 per citizen, N2 collective, N3 ecosystem.

    Parameters
    ----------
    data_dir:
        Where embedded servers keep their data; ``$LLAMA_CONSCIOUSNESS_HOME``
        or ``~/.llama_consciousness`` by default.  Unused for servers given
        by URL.
    falkordb_url:
        An existing FalkorDB (``redis://host:port``, ``unix:///path.sock``), or any node of a FalkorDB
        cluster (each graph is then read and written on the master that owns its slot:
        docs/how-to/cluster.md); ``$LLAMA_CONSCIOUSNESS_FALKORDB_URL`` by default.  When set, nothing is started.
    postgres_url:
        An existing Postgres with pgvector, for levels whose vectors live
        there; ``$LLAMA_CONSCIOUSNESS_POSTGRES_URL`` by default.
    embed_model:
        A LlamaIndex embedding, or ``"wordllama"`` (default, offline),
        ``"openai"``, ``"openai:<model>"``.
    vector_backends:
        ``{"N2": "pgvector"}`` keeps that level's vectors in Postgres (its
        graph stays in FalkorDB); ``$LLAMA_CONSCIOUSNESS_PGVECTOR_LEVELS``
        (``"N2,N3"``) by default.  Postgres is started only if some level
        uses it.
    vector_index:
        HNSW parameters for FalkorDB vector indexes.
    read_from_replicas:
        On a FalkorDB cluster (``falkordb_url`` of any of its nodes), retrievals read each graph from its
        master's replicas rather than from the master (writes, and the reads a write makes, go to the
        master; a write waits for a replica).
    server_idle_timeout_s:
        The embedded FalkorDB server outlives its last user by this many seconds
        (``$LLAMA_CONSCIOUSNESS_SERVER_IDLE_S``; 0 by default: it stops with the last ``close``), so
        that an application restarting meanwhile finds its memory loaded instead of waiting for the
        server to read its data again.
    max_connections:
        At most this many FalkorDB connections (64) per server: callers beyond wait for one.  A retrieval holds up
        to ten, so ``max_connections // 10`` retrievals run at once, the others waiting before their
        ``channel_timeout_s`` starts.  Postgres has its own pool of 8.
    freeze_heap:
        ``gc.freeze()`` when the memory opens and after its first retrieval (``gcquiet.settle_heap``): the
        objects alive then (libraries, the model) are never walked by a garbage collection again, so a full
        collection no longer adds 50-120 ms to one question in fifteen.  Process-wide; ``False`` leaves the
        collector as the application set it.
    warm_up:
        Load at open what a process's first write and first question would load while someone waits
        (``warmup.warm_up``: the ingestion modules and the token counter of rendered contexts, about 0.1 s and
        40 MB, once per process): the first chat turn of a process took 160 ms instead of 30.  ``False`` for a
        process that never renders a context and wants it to open faster.
    restore_window:
        How long after :meth:`forget` a :meth:`restore` is accepted (30 days).
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str] | None = None,
        falkordb_url: str | None = None,
        postgres_url: str | None = None,
        embed_model: Any = None,
        *,
        vector_backends: Mapping[str, str] | None = None,
        vector_index: VectorIndexConfig | None = None,
        embed_batch_size: int = 256,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        read_from_replicas: bool = False,
        server_idle_timeout_s: float | None = None,
        freeze_heap: bool = True,
        warm_up: bool = True,
        restore_window: timedelta = forgetting.RESTORE_WINDOW,
    ) -> None:
        if not isinstance(restore_window, timedelta) or restore_window <= timedelta(0):
            raise ValueError(f"restore_window must be a positive timedelta, got {restore_window!r}")
        self.restore_window = restore_window
        self.max_connections = max_connections
        self.server_idle_timeout_s = _idle_timeout(server_idle_timeout_s)
        self.read_from_replicas = bool(read_from_replicas)
        # Retrievals at once: a caller beyond them waits here, before its deadline starts, instead of
        # spending its channel_timeout_s in a queue for connections (and coming back partial).
        self.retrievals = _Retrievals(max(1, max_connections // CONNECTIONS_PER_RETRIEVAL),
                                      settle_heap if freeze_heap else None)
        self.falkordb_url = falkordb_url or os.environ.get(FALKORDB_URL_ENV) or None
        self.postgres_url = postgres_url or os.environ.get(POSTGRES_URL_ENV) or None
        self.vector_backends = _parse_backends(vector_backends)
        self.vector_index = vector_index or VectorIndexConfig()
        self.embed_model = resolve_embed_model(embed_model)
        self.dimension = embedding_dimension(self.embed_model)
        self.embed_batch_size = embed_batch_size
        needs_dir = self.falkordb_url is None or (self.postgres_url is None and self.uses_pgvector)
        self.data_dir = ensure_writable_dir(Path(data_dir) if data_dir else default_data_dir()) if needs_dir else None
        self._falkordb_server = None
        self._postgres_server = None
        self._pgvector = None
        self._stores: dict[str, LevelGraphStore] = {}
        self._schema_ready: set[str] = set()
        # Bumped by every write through this object: caches built on a graph
        # (entity names, cached streams) compare versions to know they are stale.
        self._versions: dict[str, int] = {}
        self._versions_lock = threading.Lock()
        self._unindexed: set[str] = set()  # graphs written since their keyword indexes last caught up
        self._use_recorder: living.UseRecorder | None = None
        self._recorder_lock = threading.Lock()
        # BM25 indexes of the keyword channel, beside the embedded server's data (a temporary directory
        # for a server given by URL); rebuilt from the graphs when missing
        self.keyword_indexes = KeywordIndexes(self.data_dir / "keyword" if self.data_dir else None)
        self._closed = False
        try:
            self.db = self._connect_falkordb()
            migrate_layout(self.db, self.graphs())
            if self.uses_pgvector:
                self._open_pgvector()
        except BaseException:
            self.close()
            raise
        if warm_up:
            warmup.warm_up()
        if freeze_heap:
            settle_heap()

    # -- servers ----------------------------------------------------------------

    @property
    def uses_pgvector(self) -> bool:
        """True when a level keeps its vectors in Postgres (``vector_backends``)."""
        return "pgvector" in self.vector_backends.values()

    def _connect_falkordb(self) -> FalkorDB:
        # A dead server fails a query in well under a second (not redis-py's backoff of seconds); every
        # connect and read has a timeout.  RESP2 and no CLIENT SETINFO: a new connection sends nothing before
        # the first command (a handshake read would wait out the socket timeout on a stalled server).
        retry = Retry(ExponentialBackoff(cap=0.2, base=0.01), 2)
        options = {"socket_timeout": SOCKET_TIMEOUT_S, "socket_connect_timeout": CONNECT_TIMEOUT_S, "retry": retry,
                   "decode_responses": True, "protocol": 2, "driver_info": None}
        if self.falkordb_url:
            url = self.falkordb_url
            for scheme, redis_scheme in (("falkor://", "redis://"), ("falkors://", "rediss://")):
                if url.startswith(scheme):
                    url = redis_scheme + url[len(scheme):]
            pool = BoundedPool.from_url(url, max_connections=self.max_connections, **options)
            if cluster.is_cluster(Redis(connection_pool=pool)):
                kwargs = {**pool.connection_kwargs, **options}  # credentials and TLS settings of the URL too
                pool.disconnect()
                seed = (kwargs.pop("host"), kwargs.pop("port"))
                return cluster.ClusterDB(seed, lambda host, port, **extra: BoundedPool(
                    self.max_connections, host=host, port=port, **kwargs, **extra),
                    max_connections=self.max_connections, connection_class=pool.connection_class,
                    client_kwargs=kwargs, read_from_replicas=self.read_from_replicas)
        else:
            from llama_consciousness.storage.falkordb_server import EmbeddedFalkorDB

            self._falkordb_server = EmbeddedFalkorDB(self.data_dir, idle_timeout_s=self.server_idle_timeout_s).start()
            pool = BoundedPool(self.max_connections, connection_class=_RevivingConnection,
                               revive=self._falkordb_server.revive, path=str(self._falkordb_server.socket_path),
                               **options)
        return FalkorDB(connection_pool=pool)

    def ensure_server(self) -> bool:
        """Start the embedded servers again if one died (they reload what they persisted); True when one had
        to be.  A server given by URL is not ours to start."""
        revived = self._falkordb_server is not None and self._falkordb_server.revive()
        return bool(self._postgres_server is not None and self._postgres_server.revive()) or revived

    def _open_pgvector(self) -> None:
        from llama_consciousness.storage.pgvector_store import PgVectorStore

        url, revive = self.postgres_url, None
        if url is None:
            from llama_consciousness.storage.postgres_server import EmbeddedPostgres

            self._postgres_server = EmbeddedPostgres(self.data_dir).start()
            url, revive = self._postgres_server.url, self._postgres_server.revive
        index = self.vector_index
        m = min(100, max(2, index.m))  # pgvector's bounds, narrower than FalkorDB's
        ef_construction = min(1000, max(2 * m, 4, index.ef_construction))
        if (m, ef_construction) != (index.m, index.ef_construction):
            logger.warning("VectorIndexConfig(m=%d, ef_construction=%d) is outside pgvector's bounds; its index "
                           "is built with m=%d, ef_construction=%d", index.m, index.ef_construction, m,
                           ef_construction)
        self._pgvector = PgVectorStore(url, self.dimension, ef_search=index.ef_runtime, m=m,
                                      ef_construction=ef_construction, revive=revive)
        self._pgvector.ensure_schema()

    def vectors(self, level: str) -> LevelVectors:
        """Where ``level`` keeps its vectors (FalkorDB's index or Postgres): one interface either way."""
        check_level(level)
        if self.vector_backends[level] == "pgvector":
            return PostgresVectors(self._pgvector)
        return GraphVectors()

    @property
    def pgvector(self) -> Any:
        """The Postgres vector store (None when no level uses it)."""
        return self._pgvector

    def close(self) -> None:
        """Release connections and this process's hold on embedded servers."""
        if self._closed:
            return
        self._closed = True
        lock = getattr(self, "_recorder_lock", None)
        if lock is not None:
            with lock:  # a record_use from now on is refused; what callers marked as used is written first
                recorder = self._use_recorder
            if recorder is not None:
                recorder.close()
        if getattr(self, "keyword_indexes", None) is not None:
            self.keyword_indexes.close()
        if self._pgvector is not None:
            self._pgvector.close()
        if self._postgres_server is not None:
            self._postgres_server.stop()
        db = getattr(self, "db", None)
        if db is not None:
            db.connection.close()
        if self._falkordb_server is not None:
            self._falkordb_server.stop()

    def __enter__(self) -> ConsciousnessMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- levels -----------------------------------------------------------------

    def plans(self, level: str, citizen_id: str | None = None) -> LevelPlans:
        """The query plans of one level graph (shared by the sync and async stores)."""
        return LevelPlans(
            graph_name(level, citizen_id),
            level,
            citizen_id if level == "N1" else None,
            dimension=self.dimension,
            index=self.vector_index,
            store_vectors=self.vector_backends[level] == "falkordb",
        )

    def level(self, level: str, citizen_id: str | None = None) -> LevelGraphStore:
        """The store of one level graph (N1 needs the citizen)."""
        name = graph_name(level, citizen_id)
        if name not in self._stores:
            self._stores[name] = LevelGraphStore(self.db, self.plans(level, citizen_id))
        return self._stores[name]

    def writable(self, level: str, citizen_id: str | None = None) -> LevelGraphStore:
        """The store of one level graph, its schema (indexes, constraints) made on first use."""
        store = self.level(level, citizen_id)
        if store.plans.graph not in self._schema_ready:
            store.ensure_schema()
            register_graph(self.db, store.plans.graph)
            self._schema_ready.add(store.plans.graph)
        return store

    def move_vectors(self, level: str, to: str) -> Any:
        """Move the vectors of every graph of ``level`` to ``to`` ("pgvector" or "falkordb") and use them there.

        FalkorDB rebuilds each vector index it loads, memory by memory, at every start and crash recovery
        (minutes at 100,000 memories per level); Postgres keeps its index on disk, so a large level restarts
        in seconds with its vectors there.  In batches; run it again to complete an interrupted move.  Nothing
        else should write to the level meanwhile, and later processes open it with the new
        ``vector_backends`` (a write with the old one raises ``VectorBackendError``).  Returns a
        :class:`~llama_consciousness.vector_moves.VectorMoveReport`."""
        from llama_consciousness.vector_moves import move_vectors

        return move_vectors(self, level, to)

    def _use_vector_backend(self, level: str, backend: str) -> None:
        """Read and write ``level``'s vectors in ``backend`` from now on (its stores are made again)."""
        self.vector_backends[check_level(level)] = backend
        for name in [n for n, store in self._stores.items() if store.plans.level == level]:
            del self._stores[name]
            self._schema_ready.discard(name)

    def graph_version(self, graph: str) -> int:
        """How many writes this process has made to ``graph`` (for cache invalidation)."""
        return self._versions.get(graph, 0)

    def bump_graph(self, graph: str, index: bool = True) -> None:
        """Mark ``graph`` as written (the caches keyed on its version let go of what they hold), and as one
        ``index_written`` brings up to date; ``index=False``: nothing for it to do (the writer indexes what it
        writes itself, ``index_graph``)."""
        with self._versions_lock:
            self._versions[graph] = self._versions.get(graph, 0) + 1
            if index:
                self._unindexed.add(graph)

    def index_written(self) -> None:
        """Bring the keyword indexes of the graphs written since last time up to their change logs (commits
        included), so that a write (``upsert``, an erasure), not the next question, reads and indexes what it
        wrote: a bulk load left a citizen's first question to index a thousand long messages (~800 ms), in
        every process until one had searched and closed.  (``ingest``'s writer indexes each part it writes.)"""
        with self._versions_lock:
            graphs, self._unindexed = self._unindexed, set()
        for graph in sorted(graphs):
            self.index_graph(graph)

    def index_graph(self, graph: str) -> None:
        """Bring ``graph``'s keyword index up to its change log.  A failure is logged, never raised: the write
        is done, and the next search catches up."""
        from llama_consciousness.storage.channels import catch_up

        try:
            index = self.keyword_indexes.get(graph)
            (result,) = run_interleaved(self.db, [(graph, catch_up(index))], int(SOCKET_TIMEOUT_S * 1000))
        except Exception as exc:  # noqa: BLE001 - the write is done: indexing it can wait for a search
            result = exc
        if isinstance(result, BaseException):
            logger.warning("keyword index of %s not caught up after the write: %s", graph, result)

    def delete_level(self, level: str, citizen_id: str | None = None) -> None:
        """Delete one level graph (N1: one citizen's memory) with its vectors and keyword index: an explicit
        administrative act (superseding a memory never deletes it)."""
        store = self.level(level, citizen_id)
        store.delete()
        if self.vector_backends[level] == "pgvector":
            self._pgvector.delete_graph(store.plans.graph)
        self.keyword_indexes.remove(store.plans.graph)
        self._schema_ready.discard(store.plans.graph)
        self.bump_graph(store.plans.graph)
        with self._versions_lock:
            self._unindexed.discard(store.plans.graph)  # nothing left to index

    def graphs(self) -> list[str]:
        """The level graphs that exist on the server."""
        names = self.db.list_graphs()
        return sorted(n for n in names if n.startswith("citizen_") or n in ("collective_n2", "ecosystem_n3"))

    def citizens(self) -> list[str]:
        """The citizens that have an N1 memory (on a cluster: across every master)."""
        return [key[1] for key in map(graph_level, self.graphs()) if key and key[0] == "N1"]

    def server_of(self, level: str, citizen_id: str | None = None) -> str:
        """Where a level graph lives: ``host:port`` of its cluster master, else the one server's address."""
        name = graph_name(level, citizen_id)
        address_of = getattr(self.db, "address_of", None)
        if address_of is not None:
            host, port = address_of(name)
            return f"{host}:{port}"
        if self.falkordb_url:  # where, without the credentials a URL may carry
            kwargs = self.db.connection.connection_pool.connection_kwargs
            return kwargs.get("path") or f"{kwargs.get('host')}:{kwargs.get('port')}"
        return str(self._falkordb_server.socket_path)

    # -- embedding --------------------------------------------------------------

    def embed_nodes(self, nodes: Sequence[MemoryNode]) -> list[MemoryNode]:
        """Copies of ``nodes`` with embeddings, computed in batches for those without, but for entity hubs
        (``is_entity``): no search looks for a hub by its vector (answers leave hubs out; a walk starts from the
        names a question mentions, matched in the keyword index), and in chat they outnumber the messages (one
        citizen of BEAM's conversations 1-8: 10,247 of 18,049 memories).  Without theirs the same recall on the
        tune halves of LoCoMo and BEAM, to the last digit; the server's CPU on a BEAM ingestion 1.45 -> 0.82 s,
        and that citizen's reopening 4.7 -> 2.8 s (its vector index is rebuilt on every start)."""
        todo = [i for i, n in enumerate(nodes) if n.embedding is None and not n.is_entity]
        out = list(nodes)
        for start in range(0, len(todo), self.embed_batch_size):
            chunk = todo[start : start + self.embed_batch_size]
            vectors = self.embed_model.get_text_embedding_batch([memory_text(nodes[i]) for i in chunk])
            for i, vector in zip(chunk, vectors):
                out[i] = nodes[i].model_copy(update={"embedding": check_vector(vector, f"embedding of {nodes[i].node_id!r}")})
        return out

    def embed_query(self, text: str) -> list[float]:
        """The embedding of a question (refused if the model returns a non-finite or out-of-range vector)."""
        return check_vector(self.embed_model.get_query_embedding(text), "query embedding")

    # -- writes -----------------------------------------------------------------

    def upsert(
        self,
        nodes: Iterable[MemoryNode] = (),
        relationships: Iterable[ConsciousnessRelationship] = (),
        *,
        level: str | None = None,
        citizen_id: str | None = None,
        embed: bool = True,
        detect_updates: bool = True,
        update_judge: Any = None,
    ) -> UpsertResult:
        """Write memories and relationships, one transaction per level graph; the same records again change
        nothing.  A relationship goes to the graph of its ``level``, else of the ``level`` argument, else of
        its source memory in this batch.  Memories without an embedding are embedded first (``embed``).
        Anything but the models is refused with a ``TypeError`` before any write (raw records: :meth:`ingest`).

        Versions are applied as :meth:`ingest` applies them: a memory that ``supersedes`` another (or a new
        version of its base identity) expires it; with ``detect_updates``, a memory whose text updates an
        earlier one's (``ingestion.updates``; confirmed by ``update_judge`` when given) expires it or, when the
        judge is unsure, marks it ``possibly_superseded_by``.
        """
        def models(items: Any, name: str, model: type) -> list[Any]:
            """``items`` as a list, if every item is a ``model``; a ``TypeError`` naming the first that is not."""
            if isinstance(items, (MemoryNode, ConsciousnessRelationship, dict, str, bytes)):
                raise TypeError(f"upsert takes a list of {model.__name__} models as {name}, not a single "
                                f"{type(items).__name__}: wrap it in a list")
            out = list(items)
            for position, item in enumerate(out):
                if not isinstance(item, model):
                    if isinstance(item, dict):
                        hint = f"; build it with {model.__name__}(**record), or ingest raw records with memory.ingest()"
                    elif isinstance(item, (MemoryNode, ConsciousnessRelationship)):
                        hint = f"; pass it in {'relationships' if name == 'nodes' else 'nodes'}"
                    else:
                        hint = ""
                    raise TypeError(f"upsert takes MemoryNode models as nodes and ConsciousnessRelationship models "
                                    f"as relationships: {name}[{position}] is a {type(item).__name__}{hint}")
            return out

        nodes = models(nodes, "nodes", MemoryNode)
        relationships = models(relationships, "relationships", ConsciousnessRelationship)
        from llama_consciousness.ingestion.validator import MemoryValidationError, surrogate_reasons

        for item in [*nodes, *relationships]:  # text that cannot be embedded or stored, refused before any write
            fields = {k: v for k, v in vars(item).items() if k != "embedding"}
            if reasons := surrogate_reasons("", fields):
                raise MemoryValidationError(str(getattr(item, "node_id", None) or item.edge_id), reasons)
        if level is not None:
            check_level(level)
        if embed:
            nodes = self.embed_nodes(nodes)
        by_graph: dict[tuple[str, str | None], tuple[list, list]] = {}
        home: dict[str, dict[tuple[str, str | None], None]] = {}  # memory id -> its graphs in this batch
        for node in nodes:
            key = (node.level, node.citizen_id if node.level == "N1" else None)
            by_graph.setdefault(key, ([], []))[0].append(node)
            home.setdefault(node.node_id, {})[key] = None
        for rel in relationships:
            if rel.level is not None:
                key = (rel.level, rel.citizen_id if rel.level == "N1" else None)
            elif level is not None:
                key = (level, citizen_id if level == "N1" else None)
            elif rel.source_id in home:
                from llama_consciousness.ingestion.writer import ambiguous_source, source_homes

                keys = source_homes(list(home[rel.source_id]), rel.citizen_id)
                if len(keys) > 1:
                    raise LevelError(f"relationship {rel.edge_id!r}: {ambiguous_source(rel.source_id, keys)}, "
                                     "or pass level=...")
                key = keys[0]
            else:
                raise LevelError(
                    f"relationship {rel.edge_id!r}: cannot tell its level; give it a level, pass level=..., "
                    "or write it together with its source memory"
                )
            by_graph.setdefault(key, ([], []))[1].append(rel)
        for key in by_graph:  # validate every graph name before writing anything
            graph_name(*key)
        from llama_consciousness.ingestion.updates import KnowledgeUpdateDetector
        from llama_consciousness.ingestion.writer import ConsciousnessGraphWriter

        writer = ConsciousnessGraphWriter(memory=self)
        detector = KnowledgeUpdateDetector(memory=self, llm_judge=update_judge) if detect_updates else None
        total = UpsertResult()
        for (lvl, cid), (level_nodes, level_rels) in by_graph.items():
            store = self.writable(lvl, cid)
            updates = detector.detect(level_nodes) if detector is not None else []
            changes, links, base_ids = writer._supersessions(store, level_nodes, updates=updates)
            result = store.upsert(level_nodes, [*level_rels, *links], changes, base_ids,
                                  derived={link.edge_id for link in links})
            total += result
            self.bump_graph(store.plans.graph)
            vectors = self.vectors(lvl)
            vectors.write(store.plans, level_nodes)
            expired = [c.old_id for c in changes if c.confirmed]
            if expired and vectors.mirrors_validity:  # expired versions stop matching there too
                vectors.mirror_validity(store.plans, store.get_nodes(expired))
        self.index_written()
        return total

    def unsupersede(self, node_id: str, level: str, citizen_id: str | None = None, *, reason: str) -> MemoryNode:
        """Revert a wrong supersession (soft and bitemporal: nothing is deleted).  The memory is current
        again; the link that superseded it expires now but stays, so the history shows what was believed
        and when; ``reason`` is recorded (``unsupersede_reason``, with ``unsuperseded_from``), and the same
        newer memory never supersedes it again, not even when both are ingested again."""
        if not isinstance(reason, str) or not reason.strip():
            raise ValueError("unsupersede needs a reason: say why the supersession was wrong")
        store = self.writable(level, citizen_id)
        if store.get_node(node_id) is None:
            raise KeyError(f"no memory {node_id!r} in graph {store.plans.graph!r}")
        if store.unsupersede(node_id, reason.strip(), utcnow()) is None:
            raise ValueError(f"memory {node_id!r} is not superseded, nor possibly superseded")
        node = store.get_node(node_id)
        self.vectors(level).mirror_validity(store.plans, [node])
        return node

    def forget(self, node_ids: str | Sequence[str] | None, level: str, citizen_id: str | None = None, *,
               reason: ForgetReason | str, by: str | None = None, note: str | None = None,
               where: forgetting.MemorySelector | Mapping[str, Any] | None = None) -> ForgetReport:
        """Stop believing memories from now on: a bitemporal retraction, nothing deleted.

        The memories of ``node_ids`` (or those ``where`` selects, a :class:`~llama_consciousness.forgetting.
        MemorySelector` or its fields as a dict) in one level graph expire now: they no longer surface in
        ``current`` mode nor in ``point_in_time`` questions about later moments, walks and spreading do not
        pass through them, their use is not counted; ``full_history`` and ``inspect`` still show them with
        ``forgotten_at``, ``forgotten_reason``, ``forgotten_by`` and the ``retractions`` record.  Idempotent:
        a memory already forgotten is left as it was (``already_forgotten``).  ``reason``: a
        :class:`~llama_consciousness.schema.ForgetReason` (or its value).  Undo with :meth:`restore` within
        ``restore_window``; remove the text itself with ``erase``.

        Raises ``ValueError`` for an unknown reason, both or neither of ``node_ids`` and ``where``, or a
        selector with no condition; ``LevelError`` for a bad level or citizen.
        """
        return forgetting.forget(self, node_ids, level, citizen_id, reason=reason, by=by, note=note, where=where)

    def restore(self, node_ids: str | Sequence[str], level: str, citizen_id: str | None = None, *,
                by: str | None = None, note: str | None = None, window: timedelta | None = None) -> RestoreReport:
        """Believe forgotten memories again, exactly as they were (links, vectors, keyword hits, counts): a
        memory that was current is current again, one that was superseded stays superseded.  Only within
        ``window`` (the memory's ``restore_window``, 30 days) of the forget: later ones are reported in
        ``too_late`` and left forgotten.  The restore is recorded in the memory's ``retractions``.
        """
        return forgetting.restore(self, node_ids, level, citizen_id, by=by, note=note, window=window)

    def erase(self, node_ids: str | Sequence[str] | None, level: str, citizen_id: str | None = None, *,
              where: forgetting.MemorySelector | Mapping[str, Any] | None = None, reason: str = "user_requested",
              wait: bool = True) -> ErasureReceipt:
        """Remove memories for good: nothing to restore, nothing left to find.

        The memories of ``node_ids`` (or those ``where`` selects, forgotten ones included) go from their level
        graph with their links, the entity memories only they named, their use and access records, their
        vectors (pgvector rows too) and keyword documents; the keyword index is rebuilt without them.  With
        ``wait`` (the default) the files are rewritten before this returns: the FalkorDB write log and
        snapshot on every server holding the graph (replicas too), Postgres vacuumed and its old WAL gone, so
        that a byte search of the data directory finds none of the erased text; ``wait=False`` leaves that to
        the servers' next rewrite (the text is gone from every query at once).  Other versions of a memory
        (the ones it superseded or that superseded it) hold their own text: list them too.

        Returns an :class:`~llama_consciousness.schema.ErasureReceipt` (counts and ids, never the text), also
        logged.  Erasing again is harmless and completes an erasure a crash interrupted.  Raises
        ``ValueError`` for both or neither of ``node_ids`` and ``where``; ``StorageError`` when a server
        cannot rewrite its files in time (the memories are erased; erase them again to finish the files).
        """
        return erasing.erase(self, node_ids, level, citizen_id, where=where, reason=reason, wait=wait)

    def erase_citizen(self, citizen_id: str, *, reason: str = "user_requested", wait: bool = True) -> ErasureReceipt:
        """Remove everything about a citizen for good: their N1 graph (memories, links, states, uses, access
        counts), its vectors and keyword index, their memories and links in N2 and N3, and the graph's name
        from the server's own records; then the files, as :meth:`erase` does.  A receipt, as :meth:`erase`."""
        return erasing.erase_citizen(self, citizen_id, reason=reason, wait=wait)

    def apply_retention(self, policy: Any, *, dry_run: bool = False, now: datetime | None = None) -> Any:
        """Apply a :class:`~llama_consciousness.retention.RetentionPolicy` (or its fields): forget what is
        old enough to forget (reason ``retention``), erase what was forgotten long enough ago; every citizen's
        graph for N1 rules.  ``dry_run`` only reports what it would do.  A ``RetentionReport``."""
        from llama_consciousness.retention import apply_retention

        return apply_retention(self, policy, dry_run=dry_run, now=now)

    def ingest(self, source: Any, *, progress: bool = False, **options: Any) -> Any:
        """Ingest a memory file (JSON Lines) or records through the default pipeline.

        ``options`` are the fields of ``IngestOptions`` (``on_invalid``,
        ``on_bad_line``, ``pii``, ``injection``, ``duplicates``, ...).
        Returns the ``IngestReport``.
        """
        from llama_consciousness.ingestion.pipeline import ingest
        from llama_consciousness.ingestion.steps import IngestOptions

        # The writer indexes each part it writes, on its lane (``ConsciousnessGraphWriter``).
        return ingest(self, source, IngestOptions(**options), progress=progress)

    # -- retrieval --------------------------------------------------------------

    def retriever(self, citizen_id: str | None = None, **kwargs: Any) -> Any:
        """A ``SixWayHybridRetriever`` over this memory (kwargs: config, intention_defaults, ...)."""
        from llama_consciousness.retrievers import SixWayHybridRetriever

        return SixWayHybridRetriever(self, citizen_id, **kwargs)

    def stream_retriever(self, citizen_id: str | None = None, postprocessors: Any = "default", **kwargs: Any) -> Any:
        """A retriever whose ``retrieve_stream`` gives the complete stream of the spec."""
        from llama_consciousness.postprocessors.pipeline import default_postprocessors

        steps = default_postprocessors(self) if postprocessors == "default" else list(postprocessors or [])
        return self.retriever(citizen_id, stream_postprocessors=steps, **kwargs)

    def retrieve_stream(self, intention: Any, config: Any = None, postprocessors: Any = "default") -> Any:
        """The complete consciousness stream of a ``RetrievalIntention``.

        Six-way retrieval, then the postprocessors (ranking, activation
        tiers, temporal dissonances, traversal graph, metadata validation,
        constellation); ``postprocessors=None`` gives the bare retrieval stream.
        """
        return self.stream_retriever(postprocessors=postprocessors, config=config).retrieve_stream(intention)

    async def aretrieve_stream(self, intention: Any, config: Any = None, postprocessors: Any = "default") -> Any:
        """``retrieve_stream`` in a worker thread: the complete stream of ``intention`` (``postprocessors=None``
        for the bare retrieval stream, a list for your own chain)."""
        return await self.stream_retriever(postprocessors=postprocessors, config=config).aretrieve_stream(intention)

    def property_graph_store(self, level: str, citizen_id: str | None = None, *,
                             temporal_mode: str = "current") -> Any:
        """One level graph as a read-only LlamaIndex ``PropertyGraphStore`` (``MemoryPropertyGraphStore``), for
        stock property-graph retrievers: ``PropertyGraphIndex.from_existing(property_graph_store=...)``."""
        from llama_consciousness.property_graph import MemoryPropertyGraphStore

        return MemoryPropertyGraphStore(self, level, citizen_id, temporal_mode=temporal_mode)

    # -- reads ------------------------------------------------------------------

    def get_node(self, node_id: str, level: str, citizen_id: str | None = None) -> MemoryNode | None:
        """A memory by id, or None."""
        return self.level(level, citizen_id).get_node(node_id)

    def get_nodes(self, node_ids: Sequence[str], level: str, citizen_id: str | None = None) -> list[MemoryNode]:
        """The memories of a level graph with these ids, in the order given; ids not found are left out."""
        return self.level(level, citizen_id).get_nodes(node_ids)

    def counts(self, level: str, citizen_id: str | None = None) -> tuple[int, int]:
        """(memories, relationships) in a level graph."""
        return self.level(level, citizen_id).counts()

    def vector_search(
        self,
        query: str | Sequence[float],
        level: str,
        citizen_id: str | None = None,
        *,
        k: int = 10,
        temporal_mode: str = "current",
        as_of_time: datetime | None = None,
        time_range_start: datetime | None = None,
        time_range_end: datetime | None = None,
        min_energy: float | None = None,
        min_confidence: float | None = None,
        window: TemporalWindow | None = None,
    ) -> list[ConsciousnessNode]:
        """The k memories of one level nearest to ``query``, under a temporal mode.

        The building block of the retrievers' vector channel; results carry
        ``retrieval_source`` (``N2_vector``) and cosine similarity as
        ``relevance_score``.
        """
        window = window or TemporalWindow(
            temporal_mode, as_of_time=as_of_time, time_range_start=time_range_start, time_range_end=time_range_end
        )
        embedding = self.embed_query(query) if isinstance(query, str) else check_vector(query, "query vector")
        store = self.level(level, citizen_id)
        source = f"{level}_vector"
        memory_filter = MemoryFilter(window, min_energy=min_energy, min_confidence=min_confidence)
        hits = store.run(self.vectors(level).search(store.plans, embedding, k, memory_filter))
        return [as_consciousness_node(hit, source) for hit in hits]

    def reindex(self, level: str, citizen_id: str | None = None) -> None:
        """Rebuild a level's vector index (clears FalkorDB's orphan vectors)."""
        self.writable(level, citizen_id).reindex_vectors()

    # -- the living memory (see living.py) ---------------------------------------------------------------

    def citizen_state(self, citizen_id: str, *, as_of: datetime | None = None,
                      known_at: datetime | None = None) -> CitizenState | None:
        """How the citizen feels: the state version in force at ``as_of`` (default now), as recorded by
        ``known_at`` (default now: corrections made since then are ignored before it); None when none is."""
        now = utcnow()
        return self.level("N1", citizen_id).run(citizen_states.state_as_of(citizen_id, as_of or now, known_at or now))

    def citizen_state_history(self, citizen_id: str, *, known_at: datetime | None = None) -> list[CitizenState]:
        """Every state version of the citizen in valid-time order, corrected ones included (``expired_at``)."""
        return self.level("N1", citizen_id).run(citizen_states.history(citizen_id, known_at))

    def update_citizen_state(self, citizen_id: str, *, energy: Any = living.UNSET, emotion_vector: Any = living.UNSET,
                             goal: Any = living.UNSET, mindstate: Any = living.UNSET,
                             valid_at: datetime | None = None, reason: str | None = None) -> CitizenState:
        """Record a new version of the citizen's state, valid from ``valid_at`` (default now).

        Fields not given carry over from the version in force then (``None`` clears a goal or mindstate).
        A version valid from the very same instant is a correction: the old one is expired, never deleted.
        """
        return living.update_state(self, citizen_id, energy=energy, emotion_vector=emotion_vector, goal=goal,
                                   mindstate=mindstate, valid_at=valid_at, reason=reason)

    def apply_feedback(self, stream: ConsciousnessStream, citizen_id: str | None = None, *,
                       feedback_weight: float = 0.3) -> FeedbackReport:
        """Apply a retrieval's energy feedback to the citizen's stored energy, once per stream.

        The spec's ``apply_energy_feedback`` (energy + (potential - 0.5) x weight, clamped) with the
        potential of ``scoring.energy.feedback_potential`` over the focus memories and relationships still
        current (see there why not the spec's sum over 150).  The citizen is the stream's (its N1
        memories) unless given.  The report says what counted and what was skipped.
        """
        return living.apply_feedback(self, stream, citizen_id, feedback_weight)

    async def aapply_feedback(self, stream: ConsciousnessStream, citizen_id: str | None = None, *,
                              feedback_weight: float = 0.3) -> FeedbackReport:
        """``apply_feedback`` in a worker thread: the stream's energy feedback applied to the citizen's stored
        energy, once per stream."""
        return await asyncio.to_thread(self.apply_feedback, stream, citizen_id, feedback_weight=feedback_weight)

    def record_use(self, used: Any, *, use_id: str | None = None) -> Future:
        """Mark what a retrieval gave as used: its focus memories count one more access, links between two
        of them one more co-activation.  Returns at once; the future's ``UseReport`` tells what was written.

        ``used`` is a ``ConsciousnessStream``, the ``NodeWithScore`` list a retriever returned, or a query
        engine's response.  The same retrieval recorded twice counts once.
        """
        use, members = living.used_members(used, use_id)
        with self._recorder_lock:
            if self._closed:
                raise RuntimeError("the memory is closed: nothing more can be recorded")
            if self._use_recorder is None:
                self._use_recorder = living.UseRecorder(self)
            recorder = self._use_recorder
        return recorder.submit(use, members)

    async def arecord_use(self, used: Any, *, use_id: str | None = None) -> UseReport:
        """``record_use``, awaited until written (on any event loop)."""
        return await asyncio.wrap_future(self.record_use(used, use_id=use_id))

    def prune_uses(self, older_than: Any = None) -> int:
        """Delete the records of uses older than ``older_than`` (a ``timedelta``, default
        ``living.USE_RETENTION``, 30 days) from every graph; their access counts and co-activation stay.
        The use recorder does this by itself, once an hour per graph it writes to.  Returns how many."""
        from datetime import timedelta

        older_than = living.USE_RETENTION if older_than is None else older_than
        if not isinstance(older_than, timedelta) or older_than.total_seconds() < 0:
            raise ValueError(f"older_than must be a non-negative timedelta, got {older_than!r}")
        before = citizen_states.micros(utcnow() - older_than)
        return sum(self.writable(*key).run(usage.prune_uses(before))
                   for key in map(graph_level, self.graphs()) if key is not None)

    def flush_uses(self, timeout: float | None = None) -> bool:
        """Wait until every use recorded so far is written (False on timeout)."""
        recorder = getattr(self, "_use_recorder", None)
        return True if recorder is None else recorder.flush(timeout)

    def access_stats(self, level: str, node_ids: Sequence[str], citizen_id: str | None = None
                     ) -> dict[str, tuple[int, datetime | None]]:
        """``{node_id: (access_count, last_accessed_at)}`` of the memories used at least once."""
        stats = self.level(level, citizen_id).run(usage.access_stats(list(node_ids)))
        return {k: (count, citizen_states.from_micros(at)) for k, (count, at) in stats.items()}
