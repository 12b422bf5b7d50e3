"""A stalled server or graph costs its own plans the deadline, and nothing more (issue 40, item 5).

Against the real embedded FalkorDB, reached through a real TCP proxy
(``stalling_proxy.py``) that holds the replies of one graph's queries, or
through a port that accepts no connection.  Where one graph must go through
the proxy and the others not, ``_RoutedDB`` routes it as a cluster routes
each graph to its master's pool (``pool_for``): only the routing is a
stand-in, the servers and the queries are real.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from llama_consciousness import ConsciousnessMemory, RetrievalIntention
from llama_consciousness.errors import StorageError
from llama_consciousness.ingestion import demo_memory_file
from llama_consciousness.retrievers.config import RetrievalConfig
from llama_consciousness.schema.stream import LEVEL_KEYS
from llama_consciousness.storage.cluster import ServerDB
from llama_consciousness.storage.interleaved import list_graphs, run_interleaved
from llama_consciousness.storage.pool import BoundedPool
from stalling_proxy import StallingProxy, black_hole_listener
from tests.storage.test_interleaved import _memory, _two_step

HOLD_S = 5.0  # far past every deadline below: a run that waited for a held reply would take this long




class _RoutedDB:
    """The memory's server, with the graphs of ``routes`` read through the pools given."""

    def __init__(self, db: Any, routes: dict[str, Any]) -> None:
        self._db = db
        self._routes = routes
        self.connection = db.connection

    def select_graph(self, name: str) -> Any:
        return self._db.select_graph(name)

    def pool_for(self, name: str) -> Any:
        return self._routes.get(name, self.connection.connection_pool)


class _Sockless:
    """A connection that shows no socket (a wrapper a driver might hand out): it can only be polled."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        if name == "_sock":
            raise AttributeError(name)
        return getattr(self.inner, name)


class _SocklessPool:
    def __init__(self, pool: Any) -> None:
        self._pool = pool

    def get_connection(self, *args: Any) -> _Sockless:
        return _Sockless(self._pool.get_connection(*args))

    def release(self, connection: _Sockless) -> None:
        self._pool.release(connection.inner)


def _pool_to(memory: ConsciousnessMemory, port: int) -> BoundedPool:
    """A pool with the memory's own connection settings (timeouts, retries, codec), to 127.0.0.1:``port``."""
    kwargs = {k: v for k, v in memory.db.connection.connection_pool.connection_kwargs.items()
              if k not in ("path", "revive")}
    return BoundedPool(8, host="127.0.0.1", port=port, **kwargs)


def _jobs(stores: list[Any]) -> list[tuple[str, Any]]:
    """Per store, a one-query plan and a two-query plan."""
    jobs = []
    for i, store in enumerate(stores):
        jobs += [(store.plans.graph, store.plans.get_nodes([f"m{i}"])), (store.plans.graph, _two_step(f"v{i}"))]
    return jobs


@pytest.mark.parametrize("sockless", [False, True], ids=["sockets", "polled"])
@pytest.mark.parametrize("stalled", [0, 1, 2], ids=["first", "middle", "last"])
def test_a_stalled_graph_holds_back_its_own_plans_alone(memory, fresh_graph, falkordb_server, stalled: int,
                                                        sockless: bool) -> None:
    """Plans on three graphs, one graph's replies held: the other plans answer (each of its two queries), the
    stalled ones time out at the deadline.  Waiting on the oldest query alone used to leave the replies sent
    after it unread until the deadline: a stall of the first graph failed all three."""
    stores = [fresh_graph() for _ in range(3)]
    for i, store in enumerate(stores):
        store.upsert([_memory(f"m{i}")])
    proxy = StallingProxy(falkordb_server.socket_path)
    pool = _pool_to(memory, proxy.port)
    try:
        routes = {stores[stalled].plans.graph: pool}
        if sockless:  # the answering graphs' connections can only be polled
            routes.update({s.plans.graph: _SocklessPool(memory.db.connection.connection_pool)
                           for i, s in enumerate(stores) if i != stalled})
        db = _RoutedDB(memory.db, routes)
        # the proxy forwards: the stall below is of replies, not of the route
        assert run_interleaved(db, [(stores[stalled].plans.graph, _two_step("warm"))], 5000) == ["warm!"]
        proxy.stall(HOLD_S)
        started = time.monotonic()
        results = run_interleaved(db, _jobs(stores), timeout_ms=800)
        took = time.monotonic() - started
    finally:
        proxy.close()
        pool.disconnect()
    for i in range(3):
        nodes, two = results[2 * i], results[2 * i + 1]
        if i == stalled:
            assert isinstance(nodes, TimeoutError) and isinstance(two, TimeoutError), (nodes, two)
        else:
            assert [n.node_id for n in nodes] == [f"m{i}"], nodes
            assert two == f"v{i}!"
    assert took < HOLD_S - 1  # the deadline, not the held reply
    # the connections of the memory's own pool came back reusable
    assert run_interleaved(memory.db, [(stores[0].plans.graph, _two_step("again"))], 5000) == ["again!"]


def test_a_connect_that_hangs_costs_the_deadline_not_the_connect_timeout(memory, fresh_graph) -> None:
    """A graph on a host that accepts no connection (it drops packets): its plans fail within the run's
    deadline, though the connection's own connect timeout is 5 s and redis-py retries it twice."""
    store, lost = fresh_graph(), fresh_graph()
    store.upsert([_memory("m1")])
    hole, filler = black_hole_listener()
    pool = _pool_to(memory, hole.getsockname()[1])
    try:
        assert pool.connection_kwargs["socket_connect_timeout"] >= 5
        db = _RoutedDB(memory.db, {lost.plans.graph: pool})
        started = time.monotonic()
        answered, failed = run_interleaved(db, [(store.plans.graph, store.plans.get_nodes(["m1"])),
                                                (lost.plans.graph, lost.plans.get_nodes(["m1"]))], timeout_ms=500)
        took = time.monotonic() - started
        assert isinstance(failed, StorageError) and "connecting" in str(failed).lower(), failed
        # sent before the connect began: answered, or timed out while the connect held the thread
        assert isinstance(answered, TimeoutError) or [n.node_id for n in answered] == ["m1"], answered
        assert took < 2.5

        # the server's graph listing and states (``ask``) too
        started = time.monotonic()
        with pytest.raises(Exception, match="(?i)timeout connecting"):
            list_graphs(ServerDB(pool), timeout_ms=500)
        assert time.monotonic() - started < 2.5
    finally:
        pool.disconnect()
        filler.close()
        hole.close()
    # a run with no deadline still connects with the pool's own timeout: nothing of the bound stayed behind
    conn = memory.db.connection.connection_pool.get_connection()
    try:
        assert conn.socket_connect_timeout == pool.connection_kwargs["socket_connect_timeout"]
    finally:
        memory.db.connection.connection_pool.release(conn)


# -- end to end: a retriever over a server whose one level graph stalls ---------------------------------

QUESTION = "what do we know about vector search and the retrieval architecture"  # names no memory
NAMED = "What does Felix think about FalkorDB capabilities?"  # names memories: their lookup is in the level's plan
LEVEL_GRAPHS = {"N1": "citizen_ada", "N2": "collective_n2", "N3": "ecosystem_n3"}


@pytest.fixture(scope="module")
def proxied(data_root):
    """A memory of the demo scenario on its own embedded server, read by URL through a stalling proxy."""
    with ConsciousnessMemory(data_dir=data_root / "stalled_level") as own:
        own.ingest(demo_memory_file())
        proxy = StallingProxy(own._falkordb_server.socket_path)
        try:
            with ConsciousnessMemory(falkordb_url=f"redis://127.0.0.1:{proxy.port}",
                                     data_dir=data_root / "stalled_level_url") as routed:
                yield routed, proxy
        finally:
            proxy.close()


def _levels(stream: Any) -> dict[str, tuple[list[list[str]], str | None]]:
    """Per level, what each channel found (in order) and the level's error."""
    return {level: ([[n.node_id for n in r.vector_results], [n.node_id for n in r.graph_results],
                     [n.node_id for n in r.keyword_results]], r.error)
            for level, r in ((level, stream.levels[key]) for level, key in LEVEL_KEYS.items())}


@pytest.mark.parametrize("question", [QUESTION, NAMED])
@pytest.mark.parametrize("run", ["sync", "async"])
@pytest.mark.parametrize("level", ["N1", "N2", "N3"])
def test_a_stalled_level_is_an_error_and_the_others_answer_as_alone(proxied, level: str, run: str,
                                                                    question: str) -> None:
    memory, proxy = proxied
    retriever = memory.retriever("ada", config=RetrievalConfig(channel_timeout_s=0.8))
    assert bool(retriever._query_names(question)) == (question == NAMED)
    intention = RetrievalIntention(query_text=question, citizen_id="ada", query_levels=["N1", "N2", "N3"])

    def retrieve():
        if run == "async":
            return asyncio.run(retriever.aretrieve_stream_and_nodes(intention))
        return retriever.retrieve_stream_and_nodes(intention)

    alone, _ = retrieve()
    expected = _levels(alone)
    assert all(error is None for _, error in expected.values())
    assert all(any(ids) for ids, _ in expected.values())  # every level finds something: its loss shows
    proxy.stall(HOLD_S, [LEVEL_GRAPHS[level]])
    try:
        started = time.monotonic()
        stream, nodes = retrieve()
        took = time.monotonic() - started
    finally:
        proxy.release()
    got = _levels(stream)
    for other in set(LEVEL_GRAPHS) - {level}:
        assert got[other] == expected[other], other
    ids, error = got[level]
    assert ids == [[], [], []] and error and "timed out" in error, got[level]
    assert {n.node.metadata["level"] for n in nodes} <= set(LEVEL_GRAPHS) - {level}
    assert took < HOLD_S - 1
