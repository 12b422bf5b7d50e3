"""Permanent erasure: the graph plan, and no trace of an erased memory left in the files of the data directory.

These tests start their own servers (FalkorDB, Postgres) in fresh data directories, so that reading every
file under one covers what they wrote and nothing else.  Each test that reads files first checks that the
erased marker IS on the disk before the erasure, and that a kept memory's marker still is afterwards: a
search that finds nothing must not pass by reading the wrong files.  The FalkorDB servers here write
uncompressed snapshots (``rdbcompression no``): compressed, a marker is still there, split by the compressor's
control bytes, and a byte search would miss it for the wrong reason.
"""

from __future__ import annotations

import contextlib
import random
import subprocess
import time
import uuid
from pathlib import Path

import psycopg2
import pytest
from falkordb import FalkorDB

from llama_consciousness.errors import StorageError
from llama_consciousness.levels import graph_name
from llama_consciousness.schema import ConsciousnessRelationship, MemoryNode
from llama_consciousness.storage import usage
from llama_consciousness.storage.channels import catch_up
from llama_consciousness.storage.erasure import Erasure, erase_memories, forget_graph, scrub_server, telemetry_key
from llama_consciousness.storage.falkordb_server import EmbeddedFalkorDB, _bundled_binaries, background_job
from llama_consciousness.storage.keyword_index import KeywordIndex, query_terms
from llama_consciousness.storage.level_store import (
    CHANGES_LABEL, GRAPH_LAYOUT, GRAPH_REGISTRY, LevelGraphStore, LevelPlans, Query, register_graph,
)
from llama_consciousness.storage.pgvector_store import PgVectorStore
from llama_consciousness.storage.postgres_server import EmbeddedPostgres


def marker(prefix: str) -> str:
    """A word no other test writes; capitalised, so that its lower-case form (what an index keeps) differs.
    Its letters are G to Z, none a hex digit: tantivy compresses its document store, and bytes that
    also occur earlier in a block (the graph's and ids' hex) may be stored as a back-reference, splitting the
    word, so that a byte search missed a kept marker (1 run in many: a control that failed, not the erasure)."""
    return prefix + "".join(random.choice("ghijklmnopqrstuvwxyz") for _ in range(14))


def files_with(root: Path, text: str) -> list[str]:
    """The files under ``root`` whose bytes hold ``text`` or its lower-case form (what ``grep -ri`` finds)."""
    needles = {text.encode(), text.lower().encode()}
    found = []
    for path in sorted(root.rglob("*")):
        if not path.is_file():  # directories, the server's socket
            continue
        try:
            data = path.read_bytes()
        except FileNotFoundError:  # deleted meanwhile by the server
            continue
        if any(needle in data for needle in needles):
            found.append(str(path.relative_to(root)))
    return found


_RNG = random.Random(7)


def mk(node_id: str, text: str = "", *, name: str | None = None, entity: bool = False, level: str = "N2",
       citizen: str | None = None) -> MemoryNode:
    return MemoryNode(node_id=node_id, level=level, citizen_id=citizen, name=name or f"memory {node_id}",
                      description=text, energy=0.5, confidence=0.5, is_entity=entity,
                      embedding=[_RNG.uniform(0.1, 1.0) for _ in range(4)])


def link(source: str, target: str) -> ConsciousnessRelationship:
    return ConsciousnessRelationship(source_id=source, target_id=target, relation_type="MENTIONS", goal="recall",
                                     mindstate="calm", energy=0.5, confidence=0.5)


def read(store: LevelGraphStore, cypher: str, **params) -> list:
    def plan():
        return (yield Query(cypher, params, read_only=True))

    return store.run(plan())


@pytest.fixture(scope="module")
def server(data_root: Path):
    """A FalkorDB of these tests alone, in a fresh data directory: ``(data directory, its client)``."""
    root = data_root / f"erasure-{uuid.uuid4().hex[:8]}"
    embedded = EmbeddedFalkorDB(root).start()
    db = FalkorDB(unix_socket_path=str(embedded.socket_path))
    db.connection.config_set("rdbcompression", "no")  # see the module's docstring
    yield root, db
    db.connection.close()
    embedded.stop(force=True)


def new_level(db: FalkorDB, level: str = "N2", citizen: str | None = None) -> LevelGraphStore:
    name = graph_name(level, citizen) if level == "N1" else f"erase_{uuid.uuid4().hex[:10]}"
    store = LevelGraphStore(db, LevelPlans(name, level, citizen, dimension=4))
    store.ensure_schema()
    register_graph(db, name)
    return store


# -- the graph ----------------------------------------------------------------------------------------------


def test_erasing_deletes_the_memories_their_links_orphaned_entities_and_what_their_use_left(server) -> None:
    _, db = server
    store = new_level(db)
    store.upsert(
        [mk("a"), mk("b"), mk("c"), mk("e_only", entity=True), mk("e_shared", entity=True),
         mk("e_alone", entity=True)],
        [link("a", "b"), link("a", "e_only"), link("b", "e_only"), link("a", "e_shared"), link("c", "e_shared"),
         link("c", "a")])
    store.run(usage.record_uses([("u_both", 1, ["a", "c"]), ("u_a", 2, ["a"]), ("u_c", 3, ["c"]),
                                 ("u_none", 4, ["never_stored"])]))  # u_none counted nothing: an empty list
    (epoch_before,), = read(store, f"MATCH (m:{CHANGES_LABEL}) RETURN m.epoch")

    erasure = store.run(erase_memories(["a", "b", "a", "not_in_graph"]))

    assert sorted(erasure.erased_ids) == ["a", "b"] and erasure.entity_ids == ["e_only"]
    assert (erasure.memories, erasure.entities, erasure.links) == (2, 1, 5)  # a-b, a-e_only, b-e_only, a-e_shared, c-a
    assert (erasure.access_records, erasure.uses_touched, erasure.uses_deleted) == (1, 2, 1)  # Access(a); u_both, u_a
    assert erasure.epoch not in (None, epoch_before)
    assert read(store, f"MATCH (m:{CHANGES_LABEL}) RETURN m.epoch") == [[erasure.epoch]]
    # kept: the other memory, the entity it still names, the entity that was alone before
    assert read(store, "MATCH (n:Memory) RETURN n.node_id ORDER BY n.node_id") == [["c"], ["e_alone"], ["e_shared"]]
    assert read(store, "MATCH (s)-[r:LINK]->(t) RETURN s.node_id, t.node_id") == [["c", "e_shared"]]
    assert read(store, "MATCH (x:Use) RETURN x.use_id, x.node_ids ORDER BY x.use_id") == [
        ["u_both", ["c"]], ["u_c", ["c"]], ["u_none", []]]
    assert read(store, "MATCH (a:Access) RETURN a.node_id") == [["c"]]
    assert store.run(usage.uses_of("c")) == [("u_c", 3), ("u_both", 1)]

    again = store.run(erase_memories(["a", "b"]))  # nothing left to erase: nothing changes, not even the epoch
    assert again == Erasure() and read(store, f"MATCH (m:{CHANGES_LABEL}) RETURN m.epoch") == [[erasure.epoch]]
    assert store.run(erase_memories([])) == Erasure()
    with pytest.raises(TypeError):
        store.run(erase_memories([7]))  # type: ignore[list-item]


# -- the keyword index --------------------------------------------------------------------------------------


def test_a_purged_keyword_index_keeps_no_word_of_an_erased_memory_on_disk(server) -> None:
    root, db = server
    for _ in range(10):  # until the document store shows both words as bytes (see ``marker``), so checks can fail
        store = new_level(db)
        gone, kept = marker("Zebra"), marker("Okapi")
        store.upsert([mk("gone", f"the locker code is {gone}", name=gone),
                      mk("kept", f"the gate code is {kept}", name=kept)])
        index = KeywordIndex(root / "keyword" / store.plans.graph)
        other = KeywordIndex(index.directory)  # another process's index of the same graph
        store.run(catch_up(index))
        store.run(catch_up(other))  # holds both memories pending, not yet committed
        assert index.flush()
        if files_with(index.directory, gone) and files_with(index.directory, kept):
            break
    else:
        pytest.fail("no pair of markers was readable as bytes in the index files in 10 tries")
    assert [hit[0] for hit in index.search(query_terms(gone), 5)] == ["gone"]

    erasure = store.run(erase_memories(["gone"]))
    held = other._writer()  # the other process holds the writer: the purge waits for it, then gives up clearly
    with pytest.raises(StorageError, match="writer"):
        index.purge(erasure.epoch, timeout_s=0.2)
    del held
    index.purge(erasure.epoch)

    assert files_with(index.directory, gone) == []
    assert other.flush()  # finds the files started over under the new epoch: writes nothing it held back
    assert files_with(index.directory, gone) == []
    for view in (index, other):
        store.run(catch_up(view))  # what a search does first: the graph again, from its change log
        assert view.search(query_terms(gone), 5) == []
        assert [hit[0] for hit in view.search(query_terms(kept), 5)] == ["kept"]
    assert index.flush() and other.flush()
    assert files_with(index.directory, gone) == []  # (the kept word is found by the searches above: its bytes
    # may now sit in a compressed block, which a byte search cannot read; the erased one is in no document)


def test_a_new_epoch_alone_also_deletes_the_old_segment_files(server) -> None:
    """Every process's index sees the erasure as a new epoch at its next search; the reset that follows must
    leave no old segment on the disk either (not only hide it from searches)."""
    root, db = server
    for _ in range(10):  # until the document store shows the word as bytes (see ``marker``)
        store = new_level(db)
        gone = marker("Zebra")
        store.upsert([mk("gone", f"my pin is {gone}", name=gone), mk("kept", "nothing secret")])
        index = KeywordIndex(root / "keyword" / store.plans.graph)
        store.run(catch_up(index))
        assert index.flush()
        if files_with(index.directory, gone):
            break
    else:
        pytest.fail("no marker was readable as bytes in the index files in 10 tries")
    (index.directory / ("f" * 32 + ".store")).write_bytes(gone.encode())  # a segment a crashed writer left
    store.run(erase_memories(["gone"]))
    store.run(catch_up(index))
    assert files_with(index.directory, gone) == []
    assert [hit[0] for hit in index.search(query_terms("secret"), 5)] == ["kept"]


# -- the FalkorDB server's files ----------------------------------------------------------------------------


def test_scrubbing_the_server_leaves_no_trace_of_erased_memories_in_its_files(server) -> None:
    root, db = server
    client = db.connection
    store = new_level(db)
    gone, kept = marker("Zebra"), marker("Okapi")
    citizen = marker("cz").lower()  # a citizen whose whole memory is erased: its id is in its graph's name
    store.upsert([mk("m-gone", f"my passport number is {gone}", name=gone),
                  mk("m-kept", f"my library card is {kept}", name=kept)], [link("m-gone", "m-kept")])
    whole = new_level(db, "N1", citizen)
    whole.upsert([mk("c1", f"{citizen} likes tea", level="N1", citizen=citizen)])
    store.get_nodes(["m-gone"])
    read(store, "MATCH (n:Memory) WHERE n.name = $name RETURN n.node_id", name=gone)  # a query naming it
    assert background_job(client, "BGSAVE", time.monotonic() + 30) == "ok"  # the snapshot holds them too
    before = files_with(root, gone)
    assert "falkordb/dump.rdb" in before and any(f.startswith("falkordb/appendonlydir/") for f in before)
    assert files_with(root, citizen)

    assert store.run(erase_memories(["m-gone"])).erased_ids == ["m-gone"]
    whole.delete()
    forget_graph(client, whole.plans.graph)
    scrub = scrub_server(client, [store.plans.graph, whole.plans.graph], timeout_s=60)

    assert scrub.aof_rewritten and scrub.snapshot_saved and scrub.files_checked
    assert scrub.slowlogs_reset == 1  # the deleted graph has none
    assert scrub.log_lines_removed >= 1  # FalkorDB named the deleted graph at the snapshot above
    assert files_with(root, gone) == []
    assert files_with(root, citizen) == []
    assert "falkordb/dump.rdb" in files_with(root, kept)  # what was not erased is still saved
    assert not client.sismember(GRAPH_REGISTRY, whole.plans.graph) and not client.hexists(GRAPH_LAYOUT,
                                                                                          whole.plans.graph)
    # the embedded server keeps no query log at all
    assert client.execute_command("GRAPH.CONFIG", "GET", "CMD_INFO")[1] == 0
    assert client.keys("telemetry*") == []


@contextlib.contextmanager
def falkordb_logging_queries(directory: Path):
    """A FalkorDB with the module's defaults (query log on), persisting as the embedded one does: a server
    that was not started by this package."""
    redis_server, module = _bundled_binaries()
    directory.mkdir(parents=True)
    sock = directory / "s.sock"
    proc = subprocess.Popen([redis_server, "--port", "0", "--unixsocket", str(sock), "--dir", str(directory),
                             "--appendonly", "yes", "--aof-use-rdb-preamble", "yes", "--save", "",
                             "--rdbcompression", "no", "--loadmodule", module], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    db = None
    try:
        deadline = time.monotonic() + 30
        while True:
            with contextlib.suppress(Exception):
                db = FalkorDB(unix_socket_path=str(sock))
                db.connection.ping()
                break
            assert time.monotonic() < deadline and proc.poll() is None, "FalkorDB did not start"
            time.sleep(0.02)
        yield db
    finally:
        with contextlib.suppress(Exception):
            db.connection.execute_command("SHUTDOWN", "NOSAVE")
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def test_a_server_that_logs_queries_loses_its_query_log_and_slow_log_too(data_root: Path) -> None:
    directory = data_root / f"qlog-{uuid.uuid4().hex[:8]}"
    with falkordb_logging_queries(directory) as db:
        client, graph = db.connection, db.select_graph("qlog")
        gone, kept = marker("Zebra"), marker("Okapi")
        graph.query("CREATE (:Memory {node_id: 'g', name: $g}), (:Memory {node_id: 'k', name: $k})",
                    {"g": gone, "k": kept})
        # slow enough for both slow logs (over 10 ms), with the marker among its parameters
        graph.query("UNWIND range(1, 400000) AS x WITH x WHERE x < 0 RETURN $g", {"g": gone})
        deadline = time.monotonic() + 10
        while not client.exists(telemetry_key("qlog")):  # queries reach the stream within 0.25-3 s
            assert time.monotonic() < deadline, "FalkorDB kept no query log"
            time.sleep(0.05)
        assert gone in str(client.xrange(telemetry_key("qlog")))
        assert gone in str(client.execute_command("GRAPH.SLOWLOG", "qlog"))
        assert background_job(client, "BGSAVE", time.monotonic() + 30) == "ok"
        assert "dump.rdb" in files_with(directory, gone)

        graph.query("MATCH (n:Memory {node_id: 'g'}) DELETE n")
        scrub = scrub_server(client, ["qlog"], timeout_s=60)

        assert scrub.telemetry_keys >= 1 and scrub.slowlogs_reset == 1 and scrub.files_checked
        assert client.execute_command("GRAPH.SLOWLOG", "qlog") == []
        assert gone not in str(client.slowlog_get())
        assert gone not in str(client.xrange(telemetry_key("qlog")))
        assert files_with(directory, gone) == []
        assert "dump.rdb" in files_with(directory, kept)


# -- Postgres -----------------------------------------------------------------------------------------------


def test_purging_postgres_leaves_no_erased_id_in_its_files(data_root: Path) -> None:
    root = data_root / f"pgerase-{uuid.uuid4().hex[:8]}"
    server = EmbeddedPostgres(root).start()
    store = PgVectorStore(server.url, dimension=4)
    try:
        store.ensure_schema()
        gone, kept, other = marker("gone"), marker("kept"), marker("node")
        citizen, erased_citizen = marker("cz").lower(), marker("cy").lower()
        store.upsert(graph_name("N1", citizen), [mk(gone, level="N1", citizen=citizen),
                                                 mk(kept, level="N1", citizen=citizen)])
        store.upsert(graph_name("N1", erased_citizen), [mk(other, level="N1", citizen=erased_citizen)])
        with contextlib.closing(psycopg2.connect(server.url)) as conn:
            conn.autocommit = True
            with conn.cursor() as cur:
                cur.execute("SHOW wal_recycle")
                assert cur.fetchone() == ("off",)  # set by the embedded server
                cur.execute("ANALYZE")  # the ids in the column statistics too
                cur.execute("CHECKPOINT")  # and the rows in the table's files, not only in the WAL
        for text in (gone, erased_citizen):
            assert any(f.startswith("postgres/base/") for f in files_with(root, text))
            assert any(f.startswith("postgres/pg_wal/") for f in files_with(root, text))

        assert store.delete_nodes(graph_name("N1", citizen), [gone, "absent"]) == 1
        assert store.delete_graph(graph_name("N1", erased_citizen)) == 1
        assert store.purge_files(timeout_s=60) >= 1

        assert files_with(root, gone) == [] and files_with(root, other) == []
        assert files_with(root, erased_citizen) == []
        assert any(f.startswith("postgres/base/") for f in files_with(root, kept))
        assert store.count(graph_name("N1", citizen)) == 1
    finally:
        store.close()
        server.stop()
