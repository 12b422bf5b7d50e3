"""On a cluster, a level whose master (or graph) stalls is an error, and the other levels answer (issue 40,
item 5).

Against the real local cluster, every node reached through a real TCP
proxy (``stalling_proxy.py``): the memory's pools are made for the proxies'
ports instead of the nodes' (``_Routed``, a stand-in for the routing only;
the slot map, the servers and the queries are real).  A proxy holds the
replies to one graph's queries, or to all of its master's, as a master
whose query threads are busy or whose graph a long write locks does; or it
turns into a black hole, as a host that drops packets.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from llama_consciousness import ConsciousnessMemory, RetrievalIntention
from llama_consciousness import memory as memory_module
from llama_consciousness.ingestion import demo_memory_file
from llama_consciousness.retrievers.config import RetrievalConfig
from llama_consciousness.schema.stream import LEVEL_KEYS
from llama_consciousness.storage.cluster import ClusterDB
from llama_consciousness.storage.pool import DEFAULT_MAX_CONNECTIONS, BoundedPool
from local_cluster import LocalCluster
from stalling_proxy import StallingProxy

HOLD_S = 5.0  # far past every deadline below: a retrieval that waited for a held reply would take this long
QUESTION = "what do we know about vector search and the retrieval architecture"  # names no memory


class _Setup:
    def __init__(self, memory: ConsciousnessMemory, proxies: dict[int, StallingProxy], citizen: str,
                 graphs: dict[str, str]) -> None:
        self.memory = memory
        self.citizen = citizen
        self.proxies = proxies  # by the port of the node they stand in front of
        self.graphs = graphs  # level -> graph

    def proxy_of(self, level: str) -> StallingProxy:
        return self.proxies[self.memory.db.address_of(self.graphs[level])[1]]


def _citizen_apart(db: ClusterDB, *taken: tuple[str, int]) -> str:
    """A citizen whose N1 graph is on a master none of ``taken`` is."""
    for i in range(1000):
        citizen = f"stall{i}"
        if db.address_of(f"citizen_{citizen}") not in taken:
            return citizen
    raise AssertionError("no citizen id lands on another master")


@pytest.fixture(scope="module")
def setup(falkordb_cluster: LocalCluster):
    proxies = {node.port: StallingProxy(("127.0.0.1", node.port)) for node in falkordb_cluster.nodes}
    routes = {port: proxy.port for port, proxy in proxies.items()}

    class _Routed(BoundedPool):
        def __init__(self, max_connections: int = DEFAULT_MAX_CONNECTIONS, **kwargs: Any) -> None:
            if "port" in kwargs:
                kwargs["port"] = routes.get(int(kwargs["port"]), kwargs["port"])
            super().__init__(max_connections, **kwargs)

    data_dir = Path(tempfile.mkdtemp(prefix="lcst", dir="/tmp"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(memory_module, "BoundedPool", _Routed)  # the pools of servers met later too
        memory = ConsciousnessMemory(data_dir=data_dir / "memory", falkordb_url=falkordb_cluster.url)
        try:
            db = memory.db
            assert isinstance(db, ClusterDB)
            shared = db.address_of("collective_n2")
            seed = ("127.0.0.1", falkordb_cluster.masters[0].port)
            citizen = _citizen_apart(db, shared, db.address_of("ecosystem_n3"), seed)
            demo = demo_memory_file().read_text().replace('"citizen_id": "ada"', f'"citizen_id": "{citizen}"')
            (data_dir / "demo.jsonl").write_text(demo)
            report = memory.ingest(data_dir / "demo.jsonl")
            assert not report.rejected
            graphs = {"N1": f"citizen_{citizen}", "N2": "collective_n2", "N3": "ecosystem_n3"}
            assert db.address_of(graphs["N1"]) != shared
            yield _Setup(memory, proxies, citizen, graphs)
        finally:
            memory.close()
            for proxy in proxies.values():
                proxy.close()
            shutil.rmtree(data_dir, ignore_errors=True)


def _levels(stream: Any) -> dict[str, tuple[list[list[str]], str | None]]:
    """Per level, what each channel found (in order) and the level's error."""
    return {level: ([[n.node_id for n in r.vector_results], [n.node_id for n in r.graph_results],
                     [n.node_id for n in r.keyword_results]], r.error)
            for level, r in ((level, stream.levels[key]) for level, key in LEVEL_KEYS.items())}


def _retrieve(setup: _Setup, run: str, timeout_s: float) -> tuple[Any, list[Any], float]:
    retriever = setup.memory.retriever(setup.citizen, config=RetrievalConfig(channel_timeout_s=timeout_s))
    assert retriever._query_names(QUESTION) == []  # no pre-stage asks the stalled graph for named memories
    intention = RetrievalIntention(query_text=QUESTION, citizen_id=setup.citizen, query_levels=["N1", "N2", "N3"])
    started = time.monotonic()
    if run == "async":
        stream, nodes = asyncio.run(retriever.aretrieve_stream_and_nodes(intention))
    else:
        stream, nodes = retriever.retrieve_stream_and_nodes(intention)
    return stream, nodes, time.monotonic() - started


@pytest.mark.parametrize("run", ["sync", "async"])
@pytest.mark.parametrize("stalled", [("N1",), ("N2",), ("N3",), ("N2", "N3")],
                         ids=["N1-graph", "N2-graph", "N3-graph", "N2-N3-master"])
def test_a_stalled_level_is_an_error_and_the_others_answer_as_alone(setup: _Setup, stalled: tuple[str, ...],
                                                                    run: str) -> None:
    """One level's graph stalls on its master (or the master of N2 and N3 stalls as a whole): those levels'
    channels are errors, the others' results are those of the same retrieval with nothing stalled."""
    alone, _, _ = _retrieve(setup, run, 0.8)
    expected = _levels(alone)
    assert all(error is None and any(ids) for ids, error in expected.values()), expected
    proxy = setup.proxy_of(stalled[0])
    assert all(setup.proxy_of(level) is proxy for level in stalled)
    whole_master = len(stalled) > 1
    proxy.stall(HOLD_S, None if whole_master else [setup.graphs[stalled[0]]])
    try:
        stream, nodes, took = _retrieve(setup, run, 0.8)
    finally:
        proxy.release()
    got = _levels(stream)
    for level in LEVEL_KEYS:
        if level in stalled:
            ids, error = got[level]
            assert ids == [[], [], []] and error and "timed out" in error, got[level]
        else:
            assert got[level] == expected[level], level
    assert {n.node.metadata["level"] for n in nodes} <= set(LEVEL_KEYS) - set(stalled)
    assert took < HOLD_S - 1


def test_a_master_that_accepts_no_connection_costs_the_deadline(setup: _Setup) -> None:
    """N1's master turns into a host that drops packets (its pooled connections gone, connects hang): a
    retrieval returns within its deadline, with N1's channels as errors, though a connect may take 5 s and is
    retried twice.  (Last in this module: the black hole stays.)"""
    _retrieve(setup, "sync", 0.5)  # every pool holds connections, now dropped
    setup.proxy_of("N1").black_hole()
    for run in ("sync", "async"):
        stream, nodes, took = _retrieve(setup, run, 0.5)
        ids, error = _levels(stream)["N1"]
        assert ids == [[], [], []] and error, error
        assert took < 2.5, took
        assert all(n.node.metadata["level"] != "N1" for n in nodes)
