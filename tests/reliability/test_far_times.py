"""Times at any distance compare correctly, in the four temporal modes, on FalkorDB and pgvector levels.

Reproduced before: FalkorDB's ``localdatetime`` comparisons wrap around 2^31
seconds (about 68 years), so an N3 memory valid from 1950 was missing in
current mode, ``invalid_at`` 2100 hid a memory, ``as_of`` 2100 saw nothing and
``as_of`` 1900 saw everything.  Times are now stored as integer seconds; the
range is the schema's (Python's), years 1 to 9999.
"""

from __future__ import annotations

import itertools
import uuid
from datetime import datetime, timezone

import psycopg2

from llama_consciousness import MemoryNode
from llama_consciousness.temporal import TemporalWindow, is_visible

YEARS = [1, 1066, 1900, 1950, 1969, 1970, 2024, 2100, 2500, 9999]


def _t(year: int) -> datetime:
    return datetime(year, 6, 1, 12, 0, 0, tzinfo=timezone.utc)


def _memories(tag: str, level: str, citizen: str | None) -> list[MemoryNode]:
    out = []
    for i, (start, end) in enumerate(itertools.combinations([None, *YEARS], 2)):
        if start is None:
            continue
        for j, (created, expired) in enumerate([(1950, None), (1900, 2100), (2024, None), (1, 9999)]):
            out.append(MemoryNode(
                node_id=f"{tag}_{i}_{j}", level=level, citizen_id=citizen, name=f"far {i} {j}",
                description=f"A tide record kept from {start} to {end}", energy=0.5, confidence=0.5,
                valid_at=_t(start), invalid_at=_t(end) if end else None,
                created_at=_t(created), expired_at=_t(expired) if expired else None))
    return out


WINDOWS = [
    TemporalWindow("current"),
    *(TemporalWindow("point_in_time", as_of_time=_t(y)) for y in (1, 1900, 1950, 2050, 2100, 9999)),
    TemporalWindow("evolution"),
    TemporalWindow("evolution", time_range_start=_t(1800), time_range_end=_t(1960)),
    TemporalWindow("evolution", time_range_start=_t(2090), time_range_end=_t(9999)),
    TemporalWindow("full_history", time_range_start=_t(1), time_range_end=_t(1955)),
    TemporalWindow("full_history", time_range_start=_t(2101)),
    TemporalWindow("full_history", time_range_end=_t(1000)),
]


def test_far_times_in_every_mode_on_falkordb_and_pgvector_levels(memory) -> None:
    citizen = f"far{uuid.uuid4().hex[:8]}"
    try:
        for level in ("N1", "N3"):  # N1 keeps its vectors in FalkorDB, N3 (in the test memory) in Postgres
            _check_level(memory, level, citizen)
    finally:  # the shared N3 is left as it was, for the tests that search it after this one
        graph = memory.plans("N3").graph
        memory.db.select_graph(graph).query("MATCH (n:Memory) WHERE n.node_id STARTS WITH 'N3far' DETACH DELETE n")
        conn = psycopg2.connect(memory.pgvector.url)
        with conn, conn.cursor() as cur:
            cur.execute(f"DELETE FROM lc_memory_vectors_{memory.dimension} WHERE graph = %s AND node_id LIKE %s",
                        (graph, "N3far%"))
        conn.close()


def _check_level(memory, level: str, citizen: str) -> None:
    tag = f"{level}far{uuid.uuid4().hex[:6]}"
    nodes = _memories(tag, level, citizen if level == "N1" else None)
    memory.upsert(nodes)
    for window in WINDOWS:
        found = {n.node_id for n in memory.vector_search(
            "tide record", level, citizen if level == "N1" else None, k=1000, temporal_mode=window.mode,
            as_of_time=window.as_of_time, time_range_start=window.time_range_start,
            time_range_end=window.time_range_end) if n.node_id.startswith(tag)}
        expected = {n.node_id for n in nodes if is_visible(window, n)}
        assert found == expected, (level, window, sorted(found ^ expected)[:5])
    stored = memory.get_node(nodes[0].node_id, level, citizen if level == "N1" else None)
    assert (stored.valid_at, stored.created_at) == (nodes[0].valid_at, nodes[0].created_at)



def test_a_graph_written_with_localdatetime_times_is_migrated_on_open(memory, data_root) -> None:
    """Graphs written before times were seconds hold ``localdatetime`` values: an open rewrites them once."""
    from llama_consciousness import ConsciousnessMemory
    from llama_consciousness.storage.level_store import GRAPH_LAYOUT

    citizen = f"old{uuid.uuid4().hex[:8]}"
    memory.upsert([MemoryNode(node_id="old", level="N1", citizen_id=citizen, name="Old tide", energy=0.5,
                              confidence=0.5, description="A tide record of 1950", valid_at=_t(1950),
                              created_at=_t(1950))])
    graph = memory.plans("N1", citizen).graph
    memory.db.select_graph(graph).query(  # as an earlier version wrote it
        "MATCH (n:Memory {node_id: 'old'}) SET n.valid_at = localdatetime('1950-06-01T12:00:00'), "
        "n.created_at = localdatetime('1950-06-01T12:00:00')")
    memory.db.connection.hdel(GRAPH_LAYOUT, graph)
    with ConsciousnessMemory(falkordb_url=memory._falkordb_server.url) as reopened:
        found = reopened.vector_search("tide record", "N1", citizen, k=5)
        assert [n.node_id for n in found] == ["old"]  # current: valid since 1950 (a wrapped compare said no)
        assert found[0].valid_at == _t(1950)
        raw = reopened.db.select_graph(graph).query("MATCH (n:Memory {node_id: 'old'}) RETURN n.valid_at")
        assert raw.result_set[0][0] == int((_t(1950) - datetime(1970, 1, 1, tzinfo=timezone.utc)).total_seconds())
