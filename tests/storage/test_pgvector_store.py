"""The Postgres/pgvector vector channel, on the real embedded Postgres.

The temporal boundaries are the same as in ``test_temporal`` (there on
FalkorDB): the SQL predicate must agree with :func:`is_visible` everywhere.
Each test writes to its own graph name in the shared ``lc_memory_vectors_4``
table and deletes its rows afterwards.
"""

from __future__ import annotations

import itertools
import math
import random
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Any

import psycopg2
import pytest

from llama_consciousness.errors import EmbeddingDimensionError
from llama_consciousness.schema import MemoryNode
from llama_consciousness.storage.pgvector_store import PgVectorStore
from llama_consciousness.temporal import TemporalWindow, is_visible

T0 = datetime(2024, 3, 1, 12, 0, 0, tzinfo=timezone.utc)
FAR = 10**6

SCENARIO: dict[str, tuple[float | None, float | None, float | None, float | None]] = {
    "open": (0, None, 0, None),
    "closed_valid": (10, 20, 10, None),
    "superseded_v1": (0, None, 0, 30),
    "superseding_v2": (0, None, 30, None),
    "late_recorded": (5, None, 25, None),
    "future_valid": (100, None, 0, None),
    "fully_closed": (12, 18, 14, 16),
    "micro": (40.7, 45.2, 40.3, 48.9),
    "zero_length": (15, 15, 15, 15),
}


def at(offset: float | None) -> datetime | None:
    return None if offset is None else T0 + timedelta(seconds=offset)


def node(node_id: str, embedding: list[float], **kwargs) -> MemoryNode:
    kwargs.setdefault("energy", 0.5)
    kwargs.setdefault("confidence", 0.5)
    return MemoryNode(node_id=node_id, level="N3", name=f"memory {node_id}", embedding=embedding, **kwargs)


def random_vector(rng: random.Random, dim: int = 4) -> list[float]:
    return [rng.uniform(0.1, 1.0) * rng.choice((-1, 1)) for _ in range(dim)]


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


@pytest.fixture
def pg(postgres_url):
    store = PgVectorStore(postgres_url, dimension=4)
    store.ensure_schema()
    graphs: list[str] = []

    def new_graph(name: str | None = None) -> str:
        graph = name or f"pgtest_{uuid.uuid4().hex[:12]}"
        graphs.append(graph)
        return graph

    yield store, new_graph
    with sql_cursor(store.url) as cur:
        cur.execute("DELETE FROM lc_memory_vectors_4 WHERE graph = ANY(%s)", (graphs,))
    store.close()


@contextmanager
def sql_cursor(url: str) -> Iterator[Any]:
    """A cursor on a connection of the test's own, in a transaction committed on success."""
    conn = psycopg2.connect(url)
    try:
        with conn, conn.cursor() as cur:
            yield cur
    finally:
        conn.close()


def stored_row(store: PgVectorStore, graph: str, node_id: str) -> dict:
    with sql_cursor(store.url) as cur:
        cur.execute(
            "SELECT node_id, level, citizen_id, embedding::text, energy, confidence, resolution_state,"
            " valid_at, invalid_at, created_at, expired_at, content_hash"
            " FROM lc_memory_vectors_4 WHERE graph = %s AND node_id = %s",
            (graph, node_id),
        )
        row = cur.fetchone()
        names = [d[0] for d in cur.description]
    return None if row is None else dict(zip(names, row))


@pytest.fixture
def scenario(pg):
    store, new_graph = pg
    graph = new_graph()
    rng = random.Random(7)
    nodes = [
        node(node_id, random_vector(rng), valid_at=at(v), invalid_at=at(inv), created_at=at(c), expired_at=at(exp))
        for node_id, (v, inv, c, exp) in SCENARIO.items()
    ]
    assert store.upsert(graph, nodes) == len(nodes)
    return store, graph, {n.node_id: n for n in nodes}


def search_ids(store: PgVectorStore, graph: str, window: TemporalWindow, **filters) -> set[str]:
    found = store.search(graph, [1.0, 0.5, -0.25, 0.1], 100, window, **filters)
    return {node_id for node_id, _ in found}


def current(offset: float) -> TemporalWindow:
    return TemporalWindow("current", now=at(offset))


def pit(offset: float) -> TemporalWindow:
    return TemporalWindow("point_in_time", as_of_time=at(offset))


def ranged(mode: str, start: float | None, end: float | None) -> TemporalWindow:
    return TemporalWindow(mode, time_range_start=at(start), time_range_end=at(end))


# -- temporal boundaries ----------------------------------------------------------


def test_times_are_stored_in_whole_seconds(scenario):
    store, graph, _ = scenario
    row = stored_row(store, graph, "micro")
    assert (row["valid_at"], row["invalid_at"], row["created_at"], row["expired_at"]) == (at(40), at(45), at(40), at(48))


def test_interval_boundaries(scenario):
    store, graph, _ = scenario
    ids = lambda window: search_ids(store, graph, window)  # noqa: E731
    assert "closed_valid" in ids(pit(10))          # as_of == valid_at
    assert "closed_valid" not in ids(pit(20))      # as_of == invalid_at
    assert "fully_closed" in ids(pit(14))          # as_of == created_at
    assert "fully_closed" not in ids(pit(16))      # as_of == expired_at
    assert "zero_length" not in ids(pit(15))
    assert {"open", "superseding_v2", "late_recorded", "future_valid"} == ids(current(FAR))  # open intervals
    assert "superseded_v1" not in ids(current(50)) and "superseding_v2" in ids(current(50))
    assert {"superseded_v1", "superseding_v2"} <= ids(TemporalWindow("evolution"))
    assert "late_recorded" not in ids(pit(10)) and "late_recorded" in ids(pit(25))
    assert "future_valid" not in ids(current(99)) and "future_valid" in ids(current(100))
    assert "superseded_v1" not in ids(ranged("evolution", 30, 40))
    assert "superseded_v1" in ids(ranged("evolution", 29, 40))
    assert "late_recorded" in ids(ranged("full_history", 6, 10))
    assert "late_recorded" not in ids(ranged("evolution", 6, 10))
    assert "future_valid" in ids(ranged("full_history", None, 100))
    assert "future_valid" not in ids(ranged("full_history", None, 99))
    assert "closed_valid" not in ids(ranged("full_history", 20, None))
    # microseconds truncate like on FalkorDB
    assert "micro" in ids(pit(44.999999)) and "micro" not in ids(pit(45.2))
    assert "micro" not in ids(pit(39.999999)) and "micro" in ids(pit(40.5))
    assert "micro" not in ids(ranged("full_history", 45.9, None))
    assert "micro" in ids(ranged("evolution", None, 40.1))


INSTANTS = [-1, 0, 0.5, 5, 9.999, 10, 12, 14, 15, 15.5, 16, 18, 19, 20, 25, 29, 30, 30.999999, 31,
            40, 40.3, 40.7, 44.999999, 45, 45.2, 48, 48.9, 49, 99, 100, FAR]
RANGE_POINTS = [None, -1, 0, 5, 10, 14, 15, 16, 20, 25, 30, 30.5, 40.7, 45, 48.9, 100]


def test_sql_agrees_with_is_visible_on_a_grid(scenario):
    store, graph, nodes = scenario
    windows = [current(x) for x in INSTANTS] + [pit(x) for x in INSTANTS]
    for start, end in itertools.product(RANGE_POINTS, repeat=2):
        if start is None or end is None or start <= end:
            windows += [ranged("evolution", start, end), ranged("full_history", start, end)]
    answers = set()
    for window in windows:
        found = search_ids(store, graph, window)
        assert found == {i for i, n in nodes.items() if is_visible(window, n)}, window
        answers.add(frozenset(found))
    assert len(answers) > 20


def test_results_sorted_by_cosine_similarity(scenario):
    store, graph, nodes = scenario
    query = [1.0, 0.5, -0.25, 0.1]
    found = store.search(graph, query, 4, TemporalWindow("full_history"))
    assert len(found) == 4
    sims = [s for _, s in found]
    assert sims == sorted(sims, reverse=True)
    for node_id, sim in found:
        assert sim == pytest.approx(cosine(query, nodes[node_id].embedding), abs=1e-5)
    best = sorted(nodes.values(), key=lambda n: -cosine(query, n.embedding))[:4]
    assert [n.node_id for n in best] == [i for i, _ in found]


# -- writes -----------------------------------------------------------------------


def test_upsert_is_idempotent(pg):
    store, new_graph = pg
    graph = new_graph()
    rng = random.Random(3)
    nodes = [node(f"n{i}", random_vector(rng), created_at=at(i)) for i in range(30)]
    assert store.upsert(graph, nodes) == 30
    before = {n.node_id: stored_row(store, graph, n.node_id) for n in nodes}
    assert store.upsert(graph, nodes) == 0
    assert store.count(graph) == 30
    assert {n.node_id: stored_row(store, graph, n.node_id) for n in nodes} == before
    # one changed record: one row written, the others untouched
    changed = nodes[4].model_copy(update={"energy": 0.9})
    assert store.upsert(graph, [changed] + nodes[5:]) == 1
    assert store.count(graph) == 30
    assert stored_row(store, graph, "n4")["energy"] == 0.9
    assert stored_row(store, graph, "n5") == before["n5"]


def test_upsert_counts_rows_of_every_page(pg):
    store, new_graph = pg
    graph = new_graph()
    rng = random.Random(5)
    nodes = [node(f"n{i}", random_vector(rng), created_at=at(0)) for i in range(1203)]
    assert store.upsert(graph, nodes) == 1203
    assert store.count(graph) == 1203
    assert store.upsert(graph, nodes) == 0
    assert store.upsert(graph, [n.model_copy(update={"confidence": 0.75}) for n in nodes[:700]]) == 700
    assert store.count(graph) == 1203


def test_nodes_without_embedding_are_skipped(pg):
    store, new_graph = pg
    graph = new_graph()
    bare = MemoryNode(node_id="bare", level="N3", name="bare", energy=0.5, confidence=0.5)
    assert store.upsert(graph, [bare]) == 0
    assert store.upsert(graph, []) == 0
    assert store.count(graph) == 0


def test_defaulted_created_at_keeps_the_stored_one(pg):
    store, new_graph = pg
    graph = new_graph()
    first = node("kept", [1, 0, 0, 0], created_at=at(0))
    assert store.upsert(graph, [first]) == 1
    # re-ingested later, without times, and with a changed energy: the row is
    # rewritten, but the belief started when it was first recorded
    again = node("kept", [1, 0, 0, 0], energy=0.8)
    assert "created_at" not in again.model_fields_set and again.created_at > at(FAR)
    assert store.upsert(graph, [again]) == 1
    row = stored_row(store, graph, "kept")
    assert row["energy"] == 0.8
    assert row["created_at"] == at(0) and row["valid_at"] == at(0)
    # the same re-ingestion once more changes nothing
    assert store.upsert(graph, [node("kept", [1, 0, 0, 0], energy=0.8)]) == 0
    # a new node with defaulted times gets "now"
    fresh = node("fresh", [0, 1, 0, 0])
    store.upsert(graph, [fresh])
    assert stored_row(store, graph, "fresh")["created_at"] == fresh.created_at.replace(microsecond=0)
    # explicit times are applied
    store.upsert(graph, [node("kept", [1, 0, 0, 0], energy=0.8, created_at=at(5), expired_at=at(9))])
    row = stored_row(store, graph, "kept")
    assert (row["created_at"], row["valid_at"], row["expired_at"]) == (at(5), at(5), at(9))


def test_dimension_mismatch(pg):
    store, new_graph = pg
    graph = new_graph()
    with pytest.raises(EmbeddingDimensionError, match="dimension 3"):
        store.upsert(graph, [node("ok", [1, 0, 0, 0]), node("short", [1, 0, 0])])
    assert store.count(graph) == 0  # checked before anything is written
    with pytest.raises(EmbeddingDimensionError):
        store.search(graph, [1, 0, 0, 0, 0], 3, TemporalWindow())
    with pytest.raises(ValueError):
        PgVectorStore(store.url, dimension=0)


def test_quotes_in_graph_names_and_values(pg):
    store, new_graph = pg
    plain = new_graph()
    quoted = new_graph("it's a \"graph\"; DROP TABLE lc_memory_vectors_4; --")
    tricky = node("o'brien\"; DELETE FROM lc_memory_vectors_4; --", [1, 1, 0, 0], created_at=at(0),
                  citizen_id=None, resolution_state="resolved")
    store.upsert(plain, [node("plain", [1, 1, 0, 0], created_at=at(0))])
    assert store.upsert(quoted, [tricky]) == 1
    assert store.search(quoted, [1, 1, 0, 0], 5, TemporalWindow())[0][0] == tricky.node_id
    assert store.count(quoted) == 1 and store.count(plain) == 1
    assert [i for i, _ in store.search(plain, [1, 1, 0, 0], 5, TemporalWindow())] == ["plain"]
    assert stored_row(store, quoted, tricky.node_id)["node_id"] == tricky.node_id
    assert store.upsert(quoted, [tricky]) == 0


def test_min_energy_and_min_confidence(pg):
    store, new_graph = pg
    graph = new_graph()
    rng = random.Random(11)
    nodes = [node(f"n{i}", random_vector(rng), energy=i / 10, confidence=1 - i / 10, created_at=at(0))
             for i in range(11)]
    store.upsert(graph, nodes)
    window = TemporalWindow()
    assert search_ids(store, graph, window, min_energy=0.7) == {"n7", "n8", "n9", "n10"}
    assert search_ids(store, graph, window, min_confidence=0.7) == {"n0", "n1", "n2", "n3"}
    assert search_ids(store, graph, window, min_energy=0.3, min_confidence=0.5) == {"n3", "n4", "n5"}
    assert search_ids(store, graph, window, min_energy=1.0) == {"n10"}
    found = store.search(graph, nodes[0].embedding, 2, window, min_energy=0.5)
    assert len(found) == 2 and all(int(i[1:]) >= 5 for i, _ in found)
    assert store.search(graph, nodes[0].embedding, 0, window) == []


def test_search_is_scoped_to_its_graph(pg):
    store, new_graph = pg
    a, b = new_graph(), new_graph()
    store.upsert(a, [node("same", [1, 0, 0, 0], created_at=at(0))])
    store.upsert(b, [node("same", [0, 1, 0, 0], created_at=at(0)), node("other", [1, 0, 0, 0], created_at=at(0))])
    assert store.count(a) == 1 and store.count(b) == 2
    found_a = store.search(a, [1, 0, 0, 0], 10, TemporalWindow())
    assert found_a == [("same", pytest.approx(1.0))]
    assert [i for i, _ in store.search(b, [1, 0, 0, 0], 10, TemporalWindow())] == ["other", "same"]


def test_repeated_id_in_one_batch_last_wins(pg):
    store, new_graph = pg
    graph = new_graph()
    first = node("dup", [1, 0, 0, 0], created_at=at(0))
    last = first.model_copy(update={"energy": 0.9})
    assert store.upsert(graph, [first, node("other", [0, 1, 0, 0], created_at=at(0)), last]) == 2
    assert store.count(graph) == 2
    assert stored_row(store, graph, "dup")["energy"] == 0.9


def test_a_failed_transaction_is_rolled_back_and_invisible_meanwhile(pg):
    """Each caller has its own pooled connection: a transaction in progress is not visible to another
    caller (nor joined by it), and one that fails leaves nothing."""
    import threading

    from llama_consciousness.storage.pgvector_store import _execute

    store, new_graph = pg
    graph = new_graph()
    store.upsert(graph, [node("first", random_vector(random.Random(5)), created_at=at(0))])
    inside, release = threading.Event(), threading.Event()

    def work(cur, deadline):
        _execute(cur, "BEGIN", None, deadline)
        _execute(cur, "DELETE FROM lc_memory_vectors_4 WHERE graph = %s", (graph,), deadline)
        inside.set()
        release.wait(5)
        raise RuntimeError("roll this transaction back")

    w = threading.Thread(target=lambda: pytest.raises(RuntimeError, store._call, "test", work))
    w.start()
    assert inside.wait(5)
    assert store.count(graph) == 1  # answered at once, without the open transaction's delete
    release.set()
    w.join(5)
    assert store.count(graph) == 1


def test_callers_beyond_the_pool_wait_for_a_connection_and_all_get_their_answer(postgres_url):
    """64 threads on a pool of 2: nobody fails for want of a connection, every answer is its own."""
    from tests.concurrency import at_once

    store = PgVectorStore(postgres_url, dimension=4, pool_size=2)
    graph = f"pgtest_{uuid.uuid4().hex[:12]}"
    rng = random.Random(9)
    try:
        store.upsert(graph, [node(f"m{i}", random_vector(rng), created_at=at(0)) for i in range(40)])
        queries = [random_vector(rng) for _ in range(8)]
        alone = [store.search(graph, q, 5, TemporalWindow()) for q in queries]
        rounds = at_once(lambda i: store.search(graph, queries[i % 8], 5, TemporalWindow()), 64, rounds=2)
        assert all(found == alone[i % 8] for got in rounds for i, found in enumerate(got))
        assert len(store._idle) <= 2
    finally:
        with sql_cursor(postgres_url) as cur:
            cur.execute("DELETE FROM lc_memory_vectors_4 WHERE graph = %s", (graph,))
        store.close()


def test_connections_the_server_dropped_are_replaced_on_the_next_call(pg):
    """A restarted server (here: every backend of the store terminated) costs no call an error."""
    store, new_graph = pg
    graph = new_graph()
    store.upsert(graph, [node("kept", [1, 0, 0, 0], created_at=at(0))])
    with sql_cursor(store.url) as cur:
        cur.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()")
    assert store.search(graph, [1, 0, 0, 0], 3, TemporalWindow()) == [("kept", pytest.approx(1.0))]
    assert store.count(graph) == 1
