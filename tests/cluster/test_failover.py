"""A master killed during a run of retrievals and writes: its replica takes over, nothing reported stored is lost.

Its own cluster (the fixture's ``cluster-node-timeout`` is 1 s), since a
master dies here.  Three citizens whose N1 graphs live on three masters are
read and written from two threads through the same objects the whole time;
the master of one of them is killed.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from pathlib import Path

from llama_consciousness import ConsciousnessMemory, RetrievalIntention
from local_cluster import LocalCluster
from memory_builders import mem

RUN_AFTER_RECOVERY_S = 1.0
MAX_GAP_S = 20.0


def _citizens_on_each_master(memory: ConsciousnessMemory) -> list[str]:
    by_master: dict[tuple[str, int], str] = {}
    for i in range(1000):
        by_master.setdefault(memory.db.address_of(f"citizen_fo{i}"), f"fo{i}")
    return list(by_master.values())


def test_a_killed_master_fails_over_without_losing_a_stored_write() -> None:
    directory = Path(tempfile.mkdtemp(prefix="lcfo", dir="/tmp"))
    cluster = LocalCluster(directory / "cluster").start()
    try:
        with ConsciousnessMemory(data_dir=directory / "memory", falkordb_url=cluster.url) as memory:
            citizens = _citizens_on_each_master(memory)
            assert len(citizens) == 3
            for citizen in citizens:
                memory.upsert([mem(f"{citizen}_0", level="N1", citizen=citizen, description="tea in the garden")])
            victim_citizen = citizens[0]
            victim_port = memory.db.address_of(f"citizen_{victim_citizen}")[1]
            victim = next(m for m in cluster.masters if m.port == victim_port)
            retrievers = {c: memory.retriever(c) for c in citizens}  # the same objects before and after
            reads: list[tuple[float, str, str | None]] = []
            stored: dict[str, list[str]] = {c: [f"{c}_0"] for c in citizens}
            refused: list[tuple[float, str, str]] = []
            stop = threading.Event()

            def read() -> None:
                while not stop.is_set():
                    for citizen in citizens:
                        intention = RetrievalIntention(query_text="tea in the garden", citizen_id=citizen,
                                                       query_levels=["N1"])
                        stream = retrievers[citizen].retrieve_stream(intention)
                        reads.append((time.monotonic(), citizen, stream.levels["n1_personal"].error))

            def write() -> None:
                n = 0
                while not stop.is_set():
                    n += 1
                    for citizen in citizens:
                        node_id = f"{citizen}_{n}"
                        try:
                            memory.upsert([mem(node_id, level="N1", citizen=citizen, description=f"cup {n} of tea")])
                        except Exception as exc:  # noqa: BLE001 - a refused write is recorded, not stored
                            refused.append((time.monotonic(), citizen, str(exc)))
                        else:
                            stored[citizen].append(node_id)

            threads = [threading.Thread(target=read), threading.Thread(target=write)]
            for thread in threads:
                thread.start()
            try:
                time.sleep(0.5)
                killed_at = time.monotonic()
                victim.kill()
                deadline = killed_at + MAX_GAP_S + 10
                while time.monotonic() < deadline:  # until the victim's graph has answered for a while again
                    ok = [t for t, c, e in reads if c == victim_citizen and e is None and t > killed_at]
                    if ok and ok[-1] - ok[0] > RUN_AFTER_RECOVERY_S and cluster.ok_without(victim):
                        break
                    time.sleep(0.05)
            finally:
                stop.set()
                for thread in threads:
                    thread.join(60)

            victim_errors = [t for t, c, e in reads if c == victim_citizen and e is not None]
            others_errors = [(c, e) for t, c, e in reads if c != victim_citizen and e is not None]
            assert not others_errors, others_errors[:3]
            assert victim_errors, "the victim's master was killed: some retrieval must have seen it"
            gap = max(victim_errors) - killed_at
            recovered = [t for t, c, e in reads if c == victim_citizen and e is None and t > max(victim_errors)]
            print(f"\nfailover gap (kill to last failed retrieval of its shard): {gap:.2f} s; "
                  f"{len(victim_errors)} failed retrievals of it, {len(recovered)} after; "
                  f"{len(refused)} writes refused; {sum(map(len, stored.values()))} stored")
            assert min(victim_errors) >= killed_at and gap <= MAX_GAP_S
            assert recovered, "the victim's graph answers again on the same retriever"
            error = next(e for t, c, e in reads if c == victim_citizen and e is not None)
            # the master's connection refused, or, while the cluster fails it over, CLUSTERDOWN / TRYAGAIN
            assert "its master does not answer" in error or "failing its master over" in error, error
            assert all(c == victim_citizen for _, c, _ in refused), refused[:3]
            # every write reported stored is there, on the promoted replica for the victim's graph
            for citizen, ids in stored.items():
                found = {n.node_id for n in memory.get_nodes(ids, "N1", citizen)}
                assert found == set(ids), (citizen, set(ids) - found)
            assert memory.db.address_of(f"citizen_{victim_citizen}")[1] != victim_port
    finally:
        cluster.stop()
        shutil.rmtree(directory, ignore_errors=True)
