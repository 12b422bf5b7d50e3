"""FalkorDB in Redis Cluster mode: each graph is one key, so each graph lives on the master owning its slot.

The package speaks to servers through its own reply codec and interleaved
runner (``storage.interleaved``), which hold plain connections; so instead
of redis-py's ``RedisCluster`` (whose connections are not ours to send on),
the routing is done here: a slot map read with ``CLUSTER SLOTS``, one
bounded pool per server, and each graph's queries sent to the pool of the
master that owns ``key_slot(graph name)``.  A retrieval's three levels,
being three graphs, run on their own shards at once.

When a master dies, the queries of its graphs fail (connection refused) and
the map is read again from the nodes still answering; once the cluster has
promoted the master's replica, the next query goes to it.  Writes are never
retried blindly (a lost reply may hide a done write); reads, and writes the
server refused with ``MOVED`` (not run), are tried again once on the new
owner.

A write reported stored was acknowledged by a replica: to a master with a
replica connected, every write query is followed, on its connection, by
``WAIT 1`` (``wait_replicas``), so that a failover never loses it.  A master
with no replica (a cluster without replicas, or a promoted replica until a
new one joins) takes writes on its own, as one server does.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import redis
from falkordb import FalkorDB
from falkordb.graph import Graph
from falkordb.graph_schema import GraphSchema
from redis.crc import key_slot
from redis.exceptions import AskError, ClusterDownError, ResponseError, TryAgainError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from llama_consciousness.errors import ConsciousnessError
from llama_consciousness.storage.interleaved import GRAPH_TYPE, ask, list_graphs

logger = logging.getLogger(__name__)

WAIT_TIMEOUT_MS = 5000
"""How long a write waits for a replica's acknowledgement before it is reported as not stored."""

REPLICAS_TTL_S = 1.0
"""How long a master's count of connected replicas is trusted before a write asks again."""

MAP_TTL_S = 30.0
"""The slot map is read again at least this often (a replica that joined is read from after that)."""

REFRESH_INTERVAL_S = 0.1
"""The slot map is read again at most this often while nodes fail (a failover takes about a second)."""

# the slot moved (MOVED, ASK), or its master is failing over (CLUSTERDOWN, MASTERDOWN, TRYAGAIN)
_REDIRECTS = (AskError, TryAgainError, ClusterDownError)
# a server that does not answer (Python's own TimeoutError is left out: a deadline of ours is no outage)
_DOWN = (RedisConnectionError, RedisTimeoutError, ConnectionError)


_ASKS = ThreadPoolExecutor(max_workers=8, thread_name_prefix="lc-cluster-ask")
"""Masters asked at once: one thread per master (a retrieval reads two or three), shared by every caller."""


def _ask_each(asks: Sequence[tuple[Callable[[], Any], Sequence[tuple[Any, ...]]]], timeout_ms: int | None
              ) -> list[Any]:
    """``ask(server(), commands, timeout_ms)`` for each ``(server, commands)`` at once; each one's replies or the
    exception it raised (a master that cannot even be named raises here too)."""
    def one(server: Callable[[], Any], commands: Sequence[tuple[Any, ...]]) -> Any:
        try:
            return ask(server(), commands, timeout_ms)
        except BaseException as exc:  # noqa: BLE001 - returned: each master's answer is its own
            return exc

    if len(asks) <= 1:
        return [one(*a) for a in asks]
    return [f.result() for f in [_ASKS.submit(one, *a) for a in asks]]


class ClusterError(ConsciousnessError, RuntimeError):
    """The cluster cannot serve a graph now: its master is down, or the cluster reports no owner for its slot."""


def is_cluster(client: redis.Redis) -> bool:
    """Whether the server behind ``client`` runs in Redis Cluster mode (a server that refuses ``INFO`` to this
    user is taken for a single one, as before clusters were known here)."""
    try:
        return client.info(section="server").get("redis_mode") == "cluster"
    except ResponseError:
        return False


class ServerDB(FalkorDB):
    """The FalkorDB client of one server of the cluster (no detection of cluster or sentinel: we route)."""

    def __init__(self, pool: Any) -> None:  # noqa: D107 - FalkorDB's own __init__ would detect the cluster
        self.connection = redis.Redis(connection_pool=pool)
        self.flushdb = self.connection.flushdb
        self.execute_command = self.connection.execute_command


class _ReadOnly:
    """A connection that may read from a replica (``READONLY`` first, as Redis Cluster requires)."""

    def on_connect_check_health(self, *args: Any, **kwargs: Any) -> None:
        super().on_connect_check_health(*args, **kwargs)  # type: ignore[misc]
        self.send_command("READONLY")  # type: ignore[attr-defined]
        if str(self.read_response()) != "OK":  # type: ignore[attr-defined]
            raise RedisConnectionError("the replica refused READONLY")


def replica_connection(base: type) -> type:
    """The connection class of ``base`` (plain TCP, TLS, ...) that may read a replica."""
    return type(f"ReadOnly{base.__name__}", (_ReadOnly, base), {})



class RoutedGraph(Graph):
    """A graph whose every command goes to the server owning it at the time it is sent (so a store built
    before a failover keeps working after it)."""

    def __init__(self, cluster: ClusterDB, name: str) -> None:  # noqa: D107
        self._name = name
        self.client = cluster
        self.schema = GraphSchema(self)
        self.cluster = cluster
        self.execute_command = self._execute

    def _execute(self, *args: Any, **options: Any) -> Any:
        return self.cluster.execute(self._name, args, options)


class ClusterDB:
    """A FalkorDB cluster, with the part of ``falkordb.FalkorDB``'s interface the package uses.

    ``make_pool(host, port, **connection options)`` makes the bounded connection pool of one server.
    ``read_from_replicas`` sends retrievals' reads (``pool_for``) to the replicas of a graph's master, in
    turn: with one replica per master a write is on it before it is reported stored (``WAIT 1``), so a
    caller reads what it wrote; with more, a read may miss the last writes for a moment.
    """

    def __init__(self, seed: tuple[str, int], make_pool: Callable[..., Any], *, max_connections: int,
                 connection_class: type = redis.Connection, client_kwargs: dict[str, Any] | None = None,
                 read_from_replicas: bool = False, wait_replicas: bool = True,
                 connect_timeout_s: float = 1.0) -> None:
        self.max_connections = max_connections
        self.read_from_replicas = read_from_replicas
        self._turn = 0
        self._seeds = [seed]
        self._make_pool = make_pool
        self._connection_class = connection_class
        # credentials and TLS settings of the URL, for the short-lived clients that read the slot map
        self._client_kwargs = {k: v for k, v in (client_kwargs or {}).items()
                               if k not in ("host", "port", "socket_timeout", "socket_connect_timeout", "retry")}
        self.wait_replicas = wait_replicas
        self._connect_timeout_s = connect_timeout_s
        self._servers: dict[tuple[str, int, bool], ServerDB] = {}
        # (first slot of each range, sorted; the ranges: (first, last, master, replicas)), swapped whole
        self._map: tuple[list[int], list[tuple[int, int, tuple[str, int], list[tuple[str, int]]]]] = ([], [])
        self._answered: tuple[str, int] | None = None  # the node that gave the last map, asked first next time
        self._replicas: dict[int, tuple[float, int]] = {}  # id(master client) -> (asked at, replicas connected)
        self._lock = threading.Lock()
        self._stale = True
        self._read_at = 0.0
        self.connection = _KeyRouter(self)
        self.refresh(force=True)

    # -- the slot map -----------------------------------------------------------

    def refresh(self, force: bool = False) -> None:
        """Read the slot map again from the first node that answers (at most every ``REFRESH_INTERVAL_S``)."""
        with self._lock:
            if not force and time.monotonic() - self._read_at < REFRESH_INTERVAL_S:
                return
            self._read_at = time.monotonic()
            # the node that answered last first, then replicas (a failing master is the likeliest to be down)
            first = [self._answered] if self._answered else []
            known = list(dict.fromkeys([*first, *self._seeds, *self._replica_addresses(), *self.masters_addresses()]))
            errors = []
            for host, port in known:
                pool = redis.ConnectionPool(connection_class=self._connection_class, host=host, port=port,
                                            socket_timeout=self._connect_timeout_s,
                                            socket_connect_timeout=self._connect_timeout_s,
                                            **{"decode_responses": True, "protocol": 2, **self._client_kwargs})
                try:
                    with redis.Redis(connection_pool=pool, retry=None) as client:
                        slots = client.execute_command("CLUSTER", "SLOTS")
                except _DOWN as exc:
                    errors.append(f"{host}:{port}: {exc}")
                    continue
                except ResponseError as exc:
                    raise ClusterError(f"{host}:{port} is not a cluster node: {exc}") from exc
                finally:
                    pool.disconnect()
                ranges = []
                for entry in slots:
                    lo, hi, master, *replicas = entry
                    ranges.append((int(lo), int(hi), _address(master, host),
                                   [_address(r, host) for r in replicas]))
                ranges.sort()
                self._map = ([r[0] for r in ranges], ranges)
                self._answered = (host, port)
                self._stale = False
                return
            raise ClusterError("no node of the FalkorDB cluster answers: " + "; ".join(errors))

    def masters_addresses(self) -> list[tuple[str, int]]:
        return list(dict.fromkeys(r[2] for r in self._map[1]))

    def _replica_addresses(self) -> list[tuple[str, int]]:
        return [a for r in self._map[1] for a in r[3]]

    def _range_of(self, name: str) -> tuple[int, int, tuple[str, int], list[tuple[str, int]]]:
        """The slot range holding ``name`` (its master and replicas), from the map read again if stale."""
        slot = key_slot(name.encode())
        if self._stale or time.monotonic() - self._read_at > MAP_TTL_S:  # failures, or replicas joined since
            with contextlib.suppress(ClusterError):
                self.refresh()
        starts, ranges = self._map  # one map, even while another thread swaps in a new one
        i = bisect.bisect_right(starts, slot) - 1
        if i < 0 or not ranges[i][0] <= slot <= ranges[i][1]:
            raise ClusterError(f"no master of the FalkorDB cluster owns slot {slot} (graph {name!r})")
        return ranges[i]

    def address_of(self, name: str) -> tuple[str, int]:
        """The master that owns graph (or key) ``name``."""
        return self._range_of(name)[2]

    def server(self, address: tuple[str, int], read_only: bool = False) -> ServerDB:
        """The client of one server (``read_only``: connections that may read a replica)."""
        key = (*address, read_only)
        found = self._servers.get(key)
        if found is None:
            with self._lock:
                found = self._servers.get(key)
                if found is None:
                    base = self._connection_class
                    found = self._servers[key] = ServerDB(self._make_pool(
                        *address, connection_class=replica_connection(base) if read_only else base))
        return found

    def holders(self, name: str) -> list[ServerDB]:
        """The clients of every server holding ``name``: its master, then the master's replicas (each keeps
        its own write log and snapshot, which an erasure must rewrite too)."""
        _, _, master, replicas = self._range_of(name)
        return [self.server(master), *(self.server(address, read_only=True) for address in replicas)]

    def node(self, name: str) -> ServerDB:
        """The client of the master owning ``name``."""
        return self.server(self.address_of(name))

    def reader(self, name: str) -> ServerDB:
        """Where reads of ``name`` go: one of its master's replicas with ``read_from_replicas`` (in turn),
        else the master."""
        if self.read_from_replicas:
            replicas = self._range_of(name)[3]
            if replicas:
                self._turn = (self._turn + 1) % len(replicas)
                return self.server(replicas[self._turn], read_only=True)
        return self.node(name)

    def pool_for(self, name: str) -> Any:
        """The connection pool the interleaved runner reads graph ``name`` from."""
        return self.reader(name).connection.connection_pool

    def failed(self, name: str, exc: BaseException) -> BaseException:
        """A query of ``name`` failed with ``exc``: if its server is down or moved the slot, the map is read
        again before the next query; what to report (a ``ClusterError`` saying so, else ``exc``)."""
        if isinstance(exc, _DOWN):
            self._stale = True
            return ClusterError(f"graph {name!r}: its master does not answer ({exc}); the cluster promotes "
                                "its replica within its node timeout")
        if isinstance(exc, _REDIRECTS):
            self._stale = True
            return ClusterError(f"graph {name!r}: the cluster is moving its slot or failing its master over "
                                f"({type(exc).__name__}: {exc})")
        return exc

    # -- commands -------------------------------------------------------------------

    def execute(self, name: str, args: tuple[Any, ...], options: dict[str, Any]) -> Any:
        """Send one command of graph ``name`` to its master; reads and refused writes once more after a
        failover or a slot move."""
        read_only = str(args[0]).upper() in ("GRAPH.RO_QUERY", "GRAPH.LIST", "GRAPH.EXPLAIN")
        for attempt in range(2):
            server = self.node(name)
            try:
                if read_only or not self.wait_replicas or not self._has_replica(server):
                    return server.execute_command(*args, **options)  # a master with no replica writes alone
                return self._write(server, args, options)
            except ResponseError as exc:
                if not isinstance(exc, _REDIRECTS):
                    raise
                if attempt:
                    raise self.failed(name, exc) from exc
                self.failed(name, exc)
                with contextlib.suppress(ClusterError):
                    self.refresh(force=True)
            except _DOWN as exc:
                if attempt or not read_only:
                    raise self.failed(name, exc) from exc
                self.failed(name, exc)
                with contextlib.suppress(ClusterError):
                    self.refresh(force=True)
        raise AssertionError("unreachable")

    def _write(self, server: ServerDB, args: tuple[Any, ...], options: dict[str, Any]) -> Any:
        """The write, then ``WAIT 1`` on its connection: done when a replica has it too."""
        pipe = server.connection.pipeline(transaction=False)
        pipe.execute_command(*args, **options)
        pipe.execute_command("WAIT", 1, WAIT_TIMEOUT_MS)
        reply, acked = pipe.execute(raise_on_error=False)
        if isinstance(reply, Exception):
            raise reply
        if isinstance(acked, Exception):
            raise acked
        if int(acked) < 1 and self._has_replica(server, fresh=True):
            raise ClusterError(f"a write was not acknowledged by a replica within {WAIT_TIMEOUT_MS} ms: "
                               "it may be lost if its master fails now; write it again")
        return reply

    def _has_replica(self, server: ServerDB, fresh: bool = False) -> bool:
        """Whether the master has a replica connected (asked at most every ``REPLICAS_TTL_S``, or now)."""
        now = time.monotonic()
        known = self._replicas.get(id(server))
        if fresh or known is None or now - known[0] > REPLICAS_TTL_S:
            count = int(server.connection.info(section="replication").get("connected_slaves", 0))
            known = self._replicas[id(server)] = (now, count)
        return known[1] > 0

    # -- the FalkorDB interface -----------------------------------------------------------

    def select_graph(self, name: str) -> RoutedGraph:
        if not isinstance(name, str) or not name:
            raise TypeError(f"a graph name must be a non-empty string, got {name!r}")
        return RoutedGraph(self, name)

    def list_graphs(self) -> list[str]:
        """Every graph of every master; raises ``ClusterError`` when a master does not answer."""
        names, down = self.graphs_by_master()
        if down:
            raise ClusterError("masters of the FalkorDB cluster do not answer: "
                               + "; ".join(f"{a[0]}:{a[1]}: {e}" for a, e in down.items()))
        return names

    def graphs_by_master(self, timeout_ms: int | None = None) -> tuple[list[str], dict[tuple[str, int], Exception]]:
        """The graphs of the masters that answer (each listed by its own master, so a graph on a slot its
        master lost is not counted twice), and the masters that do not, with why."""
        names: list[str] = []
        down: dict[tuple[str, int], Exception] = {}
        for address in self.masters_addresses():
            try:
                listed = list_graphs(self.server(address), timeout_ms)
            except (*_DOWN, TimeoutError) as exc:  # down, or stalled past timeout_ms
                self._stale = True
                down[address] = exc
                continue
            names += [n for n in listed if self._owned_by(n, address)]
        return names, down

    def graph_states(self, registry: str, names: Sequence[str], timeout_ms: int | None = None
                     ) -> tuple[set[str], set[str], Callable[[str], Exception | None]]:
        """What a retrieval needs before reading the graphs ``names``: those that exist (asked of each
        graph's master), those in the set ``registry`` (none when its master does not answer), and a
        function telling why a graph cannot be read now (its master is down) or None."""
        present: set[str] = set()
        down: dict[str, Exception] = {}
        by_master: dict[tuple[str, int], list[str]] = {}
        for name in names:
            try:
                by_master.setdefault(self.address_of(name), []).append(name)
            except ClusterError as exc:
                down[name] = exc
        # Each master asked about its graphs in one round trip, and the registry's master about the registry,
        # all at once: a stalled master costs the timeout once, not once more for every master after it.
        asks: list[tuple[Any, Sequence[tuple[Any, ...]]]] = [
            (lambda address=address: self.server(address), [("TYPE", n) for n in owned])
            for address, owned in by_master.items()]
        if names:
            asks.append((lambda: self.node(registry), [("SMISMEMBER", registry, *names)]))
        answers = _ask_each(asks, timeout_ms)
        for (address, owned), answer in zip(by_master.items(), answers):
            if isinstance(answer, (*_DOWN, TimeoutError, ResponseError)):  # down, stalled, or its slots moved
                for name in owned:
                    down[name] = self.failed(name, answer if isinstance(answer, (*_DOWN, ResponseError))
                                             else RedisTimeoutError(str(answer)))
                continue
            if isinstance(answer, BaseException):
                raise answer
            present.update(n for n, kind in zip(owned, answer) if str(kind) == GRAPH_TYPE)
        written: set[str] = set()
        if names:
            flags = answers[-1]
            if isinstance(flags, BaseException):
                if not isinstance(flags, (ClusterError, *_DOWN, TimeoutError, ResponseError)):
                    raise flags
                self._stale = True  # the registry's master is down: nothing is called lost meanwhile
            else:
                written = {n for n, flag in zip(names, flags[0]) if int(flag)}
        return present, written, down.get

    def _owned_by(self, name: str, address: tuple[str, int]) -> bool:
        try:
            return self.address_of(name) == address
        except ClusterError:
            return False

    @property
    def server_key(self) -> Any:
        """What tells this cluster apart from other servers (the vector-search gates are per server)."""
        return ("cluster", *self._seeds[0])

    def close(self) -> None:
        for server in list(self._servers.values()):  # masters and replicas
            with contextlib.suppress(Exception):
                server.connection.close()
                server.connection.connection_pool.disconnect()


def _address(entry: list[Any], asked: str) -> tuple[str, int]:
    host = entry[0] if entry[0] not in ("", None) else asked
    return (host.decode() if isinstance(host, bytes) else str(host), int(entry[1]))


class _KeyRouter:
    """The plain keys the package keeps beside its graphs (the graph registry), each on its slot's master."""

    def __init__(self, cluster: ClusterDB) -> None:
        self._cluster = cluster

    def _call(self, command: str, key: str, *args: Any) -> Any:
        try:
            return getattr(self._cluster.node(key).connection, command)(key, *args)
        except (*_DOWN, ResponseError) as exc:
            reported = self._cluster.failed(key, exc)
            if reported is exc:
                raise
            raise reported from exc

    def sadd(self, key: str, *values: Any) -> Any:
        return self._call("sadd", key, *values)

    def srem(self, key: str, *values: Any) -> Any:
        return self._call("srem", key, *values)

    def hset(self, key: str, *args: Any) -> Any:
        return self._call("hset", key, *args)

    def hgetall(self, key: str) -> Any:
        return self._call("hgetall", key)

    def close(self) -> None:
        self._cluster.close()

