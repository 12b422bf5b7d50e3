"""Any number of processes (and threads) may open and write a fresh data directory at once.

Reproduced before: two processes doing their first write to a fresh data
directory, and one of them failed with "Attribute 'node_id' is already
indexed" and lost its memory (10 of 10 trials).  Both had read the graph's
index list, both found the indexes missing and both created them; the
server refused the second creation, and the refusal aborted the write.

Now a refusal because the index (or the constraint) already exists counts
as the work done.  The schema is read again, and anything still missing is
created; any other error is still raised.  The tests below race real
processes and threads on the server start and on the first write, then
check that every memory arrived, the schema is complete, and the last
``close()`` stopped the server.  Other tests stop a plan at each kind of
creation and let a competitor finish first, so that every refusal the
server can send is met on every run.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from llama_consciousness import ConsciousnessMemory, MemoryNode
from llama_consciousness.errors import EmbeddingDimensionError, StorageError
from llama_consciousness.storage import EmbeddedFalkorDB
from llama_consciousness.storage import state_queries as sq
from llama_consciousness.storage.level_store import (EDGE_RANGE_INDEXES, NODE_RANGE_INDEXES, LevelGraphStore,
                                                     LevelPlans, Query, UniqueConstraint)

PROCESSES = 4
THREADS = 8
TRIALS = 3
PER_WRITER = 3  # memories of each writer in each of its two graphs

# One writer process: meet the others, open the data directory, meet again,
# write the first memories of N2 (shared by all) and of its own citizen's
# N1, close.  Two meetings: one races the server start, the other the schema.
WORKER = r"""
import sys, time, traceback
from pathlib import Path

data_dir, gate, me, n = sys.argv[1], Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
from llama_consciousness import ConsciousnessMemory, MemoryNode

def meet(stage):
    (gate / f"{stage}.{me}").touch()
    deadline = time.monotonic() + 30
    while len(list(gate.glob(stage + ".*"))) < n:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the other writers never reached {stage!r}")
        time.sleep(0.001)

def note(node_id, level, citizen):
    return MemoryNode(node_id=node_id, level=level, citizen_id=citizen, name=f"Note {node_id}",
                      description=f"What writer {me} noted as {node_id}", energy=0.5, confidence=0.7)

try:
    meet("open")
    memory = ConsciousnessMemory(data_dir=data_dir)
    try:
        print("server", memory._falkordb_server.pid)
        notes = [note(f"{me}-n2-{i}", "N2", None) for i in range(PER_WRITER)]
        notes += [note(f"{me}-n1-{i}", "N1", f"c{me}") for i in range(PER_WRITER)]
        meet("write")
        result = memory.upsert(notes)
        assert result.nodes_created == len(notes), result
    finally:
        memory.close()
except BaseException:
    traceback.print_exc()
    sys.exit(1)
print("written")
""".replace("PER_WRITER", str(PER_WRITER))


def _ids(writer: str) -> dict[tuple[str, str | None], list[str]]:
    return {("N2", None): [f"{writer}-n2-{i}" for i in range(PER_WRITER)],
            ("N1", f"c{writer}"): [f"{writer}-n1-{i}" for i in range(PER_WRITER)]}


def _note(node_id: str, level: str, citizen: str | None) -> MemoryNode:
    return MemoryNode(node_id=node_id, level=level, citizen_id=citizen, name=f"Note {node_id}",
                      description=f"A note written as {node_id}", energy=0.5, confidence=0.7)


def _servers_of(directory: Path) -> list[psutil.Process]:
    """redis-server processes serving ``directory`` (its socket path is in their command line)."""
    found = []
    for proc in psutil.process_iter(["name", "cmdline"]):
        command = " ".join(proc.info["cmdline"] or [])
        if f"{directory}/" in command and "redis" in command + (proc.info["name"] or ""):
            try:
                if proc.status() != psutil.STATUS_ZOMBIE:
                    found.append(proc)
            except psutil.NoSuchProcess:
                pass
    return found


def _log(directory: Path) -> str:
    """The server log's end, for a failure's message."""
    try:
        return "\n".join((directory / "falkordb" / "falkordb.log").read_text(errors="replace").splitlines()[-30:])
    except FileNotFoundError:
        return "(no server log)"


def _schema_complete(store: LevelGraphStore) -> None:
    """Every index and the constraint a level graph should have, operational."""
    store.run(store.plans.wait_operational())  # a restarted server may still be building them
    rows = store.graph.query("CALL db.indexes() YIELD label, properties, types, entitytype, status "
                             "RETURN label, properties, types, entitytype, status").result_set
    have: dict[tuple[str, str], set[str]] = {}
    for label, props, types, entity, status in rows:
        assert status == "OPERATIONAL", rows
        for prop in props:
            have.setdefault((entity, f"{label}.{prop}"), set()).update(types.get(prop, []))
    for prop in NODE_RANGE_INDEXES:
        assert "RANGE" in have.get(("NODE", f"Memory.{prop}"), set()), (prop, rows)
    for prop in EDGE_RANGE_INDEXES:
        assert "RANGE" in have.get(("RELATIONSHIP", f"LINK.{prop}"), set()), (prop, rows)
    if store.plans.store_vectors and store.plans.dimension is not None:
        assert "VECTOR" in have[("NODE", "Memory.embedding")], rows
    constraints = store.graph.query("CALL db.constraints() YIELD label, properties, status "
                                    "RETURN label, properties, status").result_set
    assert ["Memory", ["node_id"], "OPERATIONAL"] in [list(c) for c in constraints], constraints


def _check_directory(directory: Path, writers: list[str]) -> None:
    """Open the directory again: every writer's memories are there, the schema complete; the server stops."""
    with ConsciousnessMemory(data_dir=directory) as memory:
        for writer in writers:
            for (level, citizen), ids in _ids(writer).items():
                found = [n.node_id for n in memory.get_nodes(ids, level, citizen)]
                assert found == ids, (writer, level, found)
        assert memory.counts("N2")[0] == PER_WRITER * len(writers)
        for key in [("N2", None)] + [("N1", f"c{w}") for w in writers]:
            _schema_complete(memory.level(*key))
    assert not _servers_of(directory), "the last close() left the server running"


@pytest.fixture
def fresh_dir(data_root: Path):
    """A fresh, short data directory; its server is stopped whatever the test did."""
    made: list[Path] = []

    def make() -> Path:
        made.append(data_root / f"cw{uuid.uuid4().hex[:8]}")
        return made[-1]

    yield make
    for directory in made:
        if _servers_of(directory):
            EmbeddedFalkorDB(directory).stop(force=True)
        assert not _servers_of(directory)


@pytest.mark.parametrize("trial", range(TRIALS))
def test_processes_open_and_write_a_fresh_directory_at_once(fresh_dir, trial: int) -> None:
    directory = fresh_dir()
    gate = directory.parent / f"{directory.name}-gate"
    gate.mkdir()
    writers = [f"p{i}" for i in range(PROCESSES)]
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, str(directory), str(gate), w, str(PROCESSES)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for w in writers]
    outcomes = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=90)
            outcomes.append((proc.returncode, out, err))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    failed = [(w, code, err[-3000:]) for w, (code, out, err) in zip(writers, outcomes)
              if code != 0 or "written" not in out or "Traceback" in err]
    assert not failed, (failed, _log(directory))
    servers = {line.split()[1] for _, out, _ in outcomes for line in out.splitlines() if line.startswith("server ")}
    assert len(servers) == 1, (f"the writers started {len(servers)} servers for one directory: {servers}",
                               _log(directory))
    assert not _servers_of(directory), ("the last writer's close() left the server running", _log(directory))
    _check_directory(directory, writers)


@pytest.mark.parametrize("trial", range(TRIALS))
def test_threads_open_and_write_a_fresh_directory_at_once(fresh_dir, trial: int) -> None:
    directory = fresh_dir()
    writers = [f"t{i}" for i in range(THREADS)]
    opened, written = threading.Barrier(THREADS), threading.Barrier(THREADS)
    errors: dict[str, BaseException] = {}
    servers: set[int | None] = set()

    def write(writer: str) -> None:
        try:
            opened.wait(timeout=30)
            with ConsciousnessMemory(data_dir=directory) as memory:
                servers.add(memory._falkordb_server.pid)
                notes = [_note(i, level, citizen) for (level, citizen), ids in _ids(writer).items() for i in ids]
                notes.sort(key=lambda n: n.level != "N2")  # every thread's first write: the shared N2
                written.wait(timeout=30)
                result = memory.upsert(notes)
                assert result.nodes_created == len(notes), result
        except BaseException as exc:
            errors[writer] = exc
            opened.abort()
            written.abort()

    threads = [threading.Thread(target=write, args=(w,)) for w in writers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=90)
    assert not any(thread.is_alive() for thread in threads), "a writer did not finish"
    assert not errors, {w: f"{type(e).__name__}: {e}" for w, e in errors.items()}
    assert len(servers) == 1, servers
    assert not _servers_of(directory), "the last close() left the server running"
    _check_directory(directory, writers)


# -- every refusal the server can send, met on every run --------------------------------------------


@pytest.fixture(scope="module")
def own_memory(data_root: Path):
    with ConsciousnessMemory(data_dir=data_root / f"cw{uuid.uuid4().hex[:8]}") as memory:
        yield memory


class _Overtaken(LevelGraphStore):
    """A store whose plan is overtaken: ``competitor`` runs to its end just before the first step ``at`` picks."""

    def __init__(self, db: Any, plans: LevelPlans, at: Callable[[Any], bool], competitor: Callable[[], Any]):
        super().__init__(db, plans)
        self.at, self.competitor, self.overtaken = at, competitor, False

    def _execute(self, query: Any) -> Any:
        if not self.overtaken and self.at(query):
            self.overtaken = True
            self.competitor()
        return super()._execute(query)


def _cypher(start: str) -> Callable[[Any], bool]:
    return lambda step: isinstance(step, Query) and step.cypher.lstrip().startswith(start)


_KINDS = {
    "node range index": _cypher("CREATE INDEX FOR (n:"),
    "relationship range index": _cypher("CREATE INDEX FOR ()-["),
    "vector index": _cypher("CREATE VECTOR INDEX"),
    "unique constraint": lambda step: isinstance(step, UniqueConstraint),
}


def _plans(memory: ConsciousnessMemory, dimension: Any = 8) -> LevelPlans:
    return LevelPlans(f"cw_{uuid.uuid4().hex[:12]}", "N2", dimension=dimension)


@pytest.mark.parametrize("kind", list(_KINDS))
def test_a_schema_created_meanwhile_by_another_writer_is_done(own_memory, kind: str) -> None:
    """The server's "Attribute '...' is already indexed" / "Constraint already exists" is the work done."""
    plans = _plans(own_memory)
    rival = LevelGraphStore(own_memory.db, plans)
    store = _Overtaken(own_memory.db, plans, _KINDS[kind], rival.ensure_schema)
    try:
        store.ensure_schema()
        assert store.overtaken
        _schema_complete(store)
        store.upsert([_note("a", "N2", None).model_copy(update={"embedding": [0.1] * 8})])
        assert store.get_node("a") is not None
    finally:
        store.delete()


def test_a_subset_indexed_meanwhile_leaves_nothing_missing(own_memory) -> None:
    """The server refuses a whole CREATE INDEX for one attribute indexed meanwhile: the rest is still created."""
    plans = _plans(own_memory)
    rival = LevelGraphStore(own_memory.db, plans)
    store = _Overtaken(own_memory.db, plans, _KINDS["node range index"],
                       lambda: rival.run(sq.ensure_state_indexes(plans)))
    try:
        store.ensure_schema()
        assert store.overtaken
        _schema_complete(store)
    finally:
        store.delete()


def test_state_indexes_created_meanwhile_are_done(own_memory) -> None:
    plans = _plans(own_memory)
    LevelGraphStore(own_memory.db, plans).graph.query("CREATE (:Memory {node_id: 'old'})")  # an older graph
    rival = LevelGraphStore(own_memory.db, plans)
    store = _Overtaken(own_memory.db, plans, _KINDS["node range index"], rival.ensure_schema)
    try:
        store.run(sq.ensure_state_indexes(plans))
        assert store.overtaken
        _schema_complete(store)
    finally:
        store.delete()


def test_a_vector_index_of_another_dimension_made_meanwhile_is_still_refused(own_memory) -> None:
    plans = _plans(own_memory, dimension=8)
    rival = LevelGraphStore(own_memory.db, LevelPlans(plans.graph, "N2", dimension=4))
    store = _Overtaken(own_memory.db, plans, _KINDS["vector index"], rival.ensure_schema)
    try:
        with pytest.raises(EmbeddingDimensionError, match="dimension 4"):
            store.ensure_schema()
        assert store.overtaken
    finally:
        store.delete()


def test_other_refusals_of_a_creation_still_raise(own_memory) -> None:
    """Only "already there" is forgiven, and only when the index list bears it out."""
    store = LevelGraphStore(own_memory.db, _plans(own_memory, dimension=4.5))  # type: ignore[arg-type]
    try:
        with pytest.raises(StorageError, match="Invalid vector index configuration"):
            store.ensure_schema()
    finally:
        store.delete()


def test_writers_creating_the_postgres_vector_table_at_once_all_succeed(postgres_url) -> None:
    """Reproduced before (benchmarks/chaos.py, 3 of 5 trials): two writers creating the table of a new
    dimension together failed with a duplicate key on pg_type ("IF NOT EXISTS" is not atomic)."""
    import random

    import psycopg2

    from llama_consciousness.storage.pgvector_store import PgVectorStore
    from tests.concurrency import at_once

    for _ in range(3):
        dimension = random.randint(300, 2000)
        stores = [PgVectorStore(postgres_url, dimension) for _ in range(8)]
        try:
            at_once(lambda i: stores[i].ensure_schema(), 8, rounds=1)
        finally:
            for store in stores:
                store.close()
            conn = psycopg2.connect(postgres_url)
            with conn, conn.cursor() as cur:
                cur.execute(f"DROP TABLE IF EXISTS lc_memory_vectors_{dimension}")
            conn.close()
