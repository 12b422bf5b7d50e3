"""``erase_citizen`` on a cluster: the citizen is gone from every master and every replica (their graph, their
memories of the shared level, their text in each node's files), and the other citizens, on the other masters,
are untouched.

Against the session's real local cluster (``local_cluster.py``: 3 masters, 3 replicas).  Citizens are chosen
so that their N1 graphs live on different masters; their N2 memories (``citizen_id`` set) all live on the
master of ``collective_n2``.  Each node's directory is grepped for the erased citizen's marker, with the kept
citizens' markers as controls (their text must be found, else the search proves nothing).
"""

from __future__ import annotations

import contextlib
import time
import uuid
from pathlib import Path

import pytest
import redis

from files_on_disk import files_holding
from llama_consciousness import ConsciousnessMemory
from llama_consciousness.schema import MemoryNode
from local_cluster import LocalCluster, Node

REPLICATED_WITHIN_S = 10.0


def _node(node_id: str, level: str, citizen: str, text: str) -> MemoryNode:
    return MemoryNode(node_id=node_id, level=level, citizen_id=citizen, name=text[:30], description=text,
                      energy=0.5, confidence=0.7)


def _live(cluster: LocalCluster) -> list[Node]:
    return [node for node in cluster.nodes if node.alive()]


def _count(node: Node, graph: str, ids: list[str]) -> int:
    """Memories of ``ids`` in ``graph`` on ``node`` (master or replica: a read-only query)."""
    with node.client() as c:
        if graph not in c.execute_command("GRAPH.LIST"):
            return 0
        c.execute_command("READONLY")  # a replica answers for its master's slots
        reply = c.execute_command("GRAPH.RO_QUERY", graph,
                                  f"CYPHER ids={ids!r} MATCH (n) WHERE n.node_id IN $ids RETURN count(n)")
        return int(reply[1][0][0])


def _wait_for(check, what: str, timeout_s: float = REPLICATED_WITHIN_S) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.fixture
def plain_cluster_snapshots(falkordb_cluster: LocalCluster):
    """Every node writes its snapshots (``dump.rdb``, the RDB preamble of its append-only base file)
    uncompressed while the test runs: compressed, a byte search would miss a text they hold."""
    nodes = _live(falkordb_cluster)
    for node in nodes:
        with node.client() as c:
            c.config_set("rdbcompression", "no")
    yield
    for node in nodes:
        with contextlib.suppress(redis.RedisError, OSError), node.client() as c:
            c.config_set("rdbcompression", "yes")


def test_erasing_a_citizen_on_a_cluster_removes_them_from_every_node(
        cluster_memory: ConsciousnessMemory, falkordb_cluster: LocalCluster, plain_cluster_snapshots) -> None:
    memory = cluster_memory
    db = memory.db
    tag = uuid.uuid4().hex[:8]
    # one citizen per master (their N1 graphs on three masters)
    by_master: dict[tuple[str, int], str] = {}
    for i in range(1000):
        by_master.setdefault(db.address_of(f"citizen_er{tag}{i}"), f"er{tag}{i}")
    citizens = list(by_master.values())
    assert len(citizens) == 3 == len({db.address_of(f"citizen_{c}") for c in citizens})
    gone, kept = citizens[0], citizens[1:]
    marker = {c: f"zebra{uuid.uuid4().hex[:16]}" for c in citizens}
    n2_ids = {c: [f"n2_{c}_{k}" for k in range(2)] for c in citizens}
    for c in citizens:
        memory.ingest([_node(f"{c}_m{k}", "N1", c, f"Note {k}: {marker[c]} keeps the lighthouse keys.")
                       for k in range(3)])
        memory.upsert([_node(i, "N2", c, f"{marker[c]} told the collective about the lighthouse keys ({i}).")
                       for i in n2_ids[c]])
    assert set(citizens) <= set(memory.citizens())
    n2_graph = "collective_n2"
    holders = {c: [s for s in _live(falkordb_cluster) if f"citizen_{c}" in falkordb_cluster.graphs_on(s.port)]
               for c in citizens}
    # the graph is on its master and its replica once the write is acknowledged (the package WAITs for it)
    assert all(len(nodes) == 2 for nodes in holders.values()), holders
    assert [f.node.node_id for f in memory.retriever(citizen_id=gone).retrieve(f"{marker[gone]} lighthouse")]
    before = files_holding(falkordb_cluster.directory, *marker.values())
    assert before[marker[gone]], "the citizen's text should be in the nodes' files before the erasure"

    receipt = memory.erase_citizen(gone)
    assert receipt.graphs_deleted == [f"citizen_{gone}"] and receipt.files_rewritten
    assert sorted(receipt.node_ids) == sorted(n2_ids[gone]) and receipt.graphs == [n2_graph]
    assert marker[gone] not in receipt.model_dump_json()

    # every node: the graph is gone (replicas once they have the deletion), no N2 memory of theirs remains
    for node in _live(falkordb_cluster):
        _wait_for(lambda node=node: f"citizen_{gone}" not in falkordb_cluster.graphs_on(node.port),
                  f"citizen_{gone} to leave the node on port {node.port}")
        _wait_for(lambda node=node: _count(node, n2_graph, n2_ids[gone]) == 0,
                  f"the citizen's N2 memories to leave the node on port {node.port}")
    # the others: their graphs where they were, their N2 memories everywhere the collective is
    for c in kept:
        assert all(f"citizen_{c}" in falkordb_cluster.graphs_on(n.port) for n in holders[c])
        assert memory.counts("N1", c)[0] == 3
        assert all(memory.get_node(i, "N2") is not None for i in n2_ids[c])
    for node in _live(falkordb_cluster):
        if n2_graph in falkordb_cluster.graphs_on(node.port):
            assert _count(node, n2_graph, [i for c in kept for i in n2_ids[c]]) == 2 * len(kept)
    assert gone not in memory.citizens() and set(kept) <= set(memory.citizens())
    assert all(memory.get_node(i, "N2") is None for i in n2_ids[gone])
    n2_found = [h.node_id for h in memory.vector_search(f"{marker[gone]} told the collective", "N2", k=50,
                                                         temporal_mode="full_history")]
    assert not set(n2_found) & set(n2_ids[gone]) and set(n2_found) & set(n2_ids[kept[0]])
    kept_found = [f.node.node_id for f in memory.retriever(citizen_id=kept[0]).retrieve(f"{marker[kept[0]]} keys")]
    assert f"N1:{kept[0]}_m0" in kept_found

    # the files of every node (masters and replicas) and the memory's own (keyword indexes)
    on_disk = files_holding(falkordb_cluster.directory, *marker.values())
    on_disk_memory = files_holding(memory.keyword_indexes.root, marker[gone])  # (no data_dir: a server by URL)
    assert on_disk[marker[gone]] == [] and on_disk_memory[marker[gone]] == [], (on_disk, on_disk_memory)
    for c in kept:
        assert on_disk[marker[c]], f"the kept citizen {c}'s text should still be on disk (else this proves nothing)"
    # the citizen's id, in their graph's name: not in the nodes' files either (the package's registry keys live
    # on other masters than the graph), but for ``server.log``, the nodes' standard output as this fixture
    # starts them (no ``logfile``: the package cannot reach it; the embedded server's log it does clean)
    names = files_holding(falkordb_cluster.directory, f"citizen_{gone}", f"citizen_{kept[0]}")
    assert [f for f in names[f"citizen_{gone}"] if not f.endswith("server.log")] == [], names
    assert [f for f in names[f"citizen_{kept[0]}"] if not f.endswith("server.log")]
    assert memory.erase_citizen(gone).memories == 0  # again: harmless
