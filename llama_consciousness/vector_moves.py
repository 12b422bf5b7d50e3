"""Moving a level's vectors between FalkorDB and Postgres: ``ConsciousnessMemory.move_vectors``.

Why: FalkorDB's snapshot keeps the vectors but not their HNSW index, so every start of the server, and every
recovery from a crash, builds each level's index again, memory by memory, before the server answers anything
(30,000 memories: 15 s on 2 cores; 100,000 per level: minutes).  Postgres keeps its index on disk: with the
vectors there, 100,000 memories per level come back in about 20 s (``benchmarks/recovery.py``).  A level
chosen when it was small can be moved when it has grown, and moved back.

A move is per level (every graph of it: each citizen's for N1), in batches, and can be run again after an
interruption, which it then completes: vectors are written to their new home before they leave the old one.
Nothing else should write to the level while it moves; after it, every process opens the level with the new
``vector_backends`` (one that does not is refused at its first write: ``VectorBackendError``).  FalkorDB gives
a vector back with float32 precision (its compact replies), so the vectors arrive as they were.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from llama_consciousness.levels import check_level, graph_level
from llama_consciousness.storage.level_store import NODE_LABEL, VECTOR_PROPERTY, Query, indexed
from llama_consciousness.storage.params import Ids, Rows
from llama_consciousness.storage.reader import MemoryKeeper
from llama_consciousness.storage.vectors import VECTOR_BACKENDS

BATCH = 1_000
"""Memories per round trip of a move (a batch of 256-d vectors is about 2 MB on the wire)."""


@dataclass(frozen=True)
class VectorMoveReport:
    """What a move did: vectors moved per graph (0 for a graph already there), and how long it took."""

    level: str
    to: str
    moved: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def total(self) -> int:
        return sum(self.moved.values())


def move_vectors(memory: MemoryKeeper, level: str, to: str, *, batch: int = BATCH) -> VectorMoveReport:
    """Move every vector of ``level`` to ``to`` ("falkordb" or "pgvector"), then use it there (see the module)."""
    check_level(level)
    if to not in VECTOR_BACKENDS:
        raise ValueError(f"vectors can move to one of {VECTOR_BACKENDS}, not {to!r}")
    if batch < 1:
        raise ValueError(f"batch must be at least 1, got {batch}")
    started = time.perf_counter()
    graphs = [(g, key[1]) for g in memory.graphs() if (key := graph_level(g)) is not None and key[0] == level]
    if memory.pgvector is None:
        if memory.data_dir is None and memory.postgres_url is None:
            raise ValueError("moving vectors needs Postgres: give postgres_url, or a data directory for the "
                             "embedded one")
        memory._open_pgvector()
    moved: dict[str, int] = {}
    for graph, citizen in graphs:
        if to == "pgvector":
            moved[graph] = _to_postgres(memory, level, citizen, batch)
        else:
            moved[graph] = _to_falkordb(memory, level, citizen, batch)
    memory._use_vector_backend(level, to)
    for graph, citizen in graphs:
        memory.writable(level, citizen)  # the schema of the new home (moving back: FalkorDB's vector index)
    return VectorMoveReport(level, to, moved, time.perf_counter() - started)


def _to_postgres(memory: MemoryKeeper, level: str, citizen: str | None, batch: int) -> int:
    """FalkorDB's index goes first (clearing vectors one by one from a live index costs more than building
    it); then, batch by batch, the vectors are written to Postgres and cleared from the nodes."""
    store = memory.level(level, citizen)
    graph = store.plans.graph
    store.run(_drop_vector_index())
    moved = 0
    while True:
        rows = store.run(_with_vectors(batch))
        if not rows:
            return moved
        vectors = {node_id: list(vector) for node_id, vector in rows}
        nodes = store.get_nodes(list(vectors))
        memory.pgvector.upsert(graph, [n.model_copy(update={"embedding": vectors[n.node_id]}) for n in nodes])
        store.run(_clear_vectors(list(vectors)))
        moved += len(rows)


def _to_falkordb(memory: MemoryKeeper, level: str, citizen: str | None, batch: int) -> int:
    """Batch by batch (by node id), each vector set on its node, then the Postgres rows go; the graph's index
    is made by ``move_vectors`` after every graph has moved (a start makes a missing one too)."""
    store = memory.level(level, citizen)
    graph = store.plans.graph
    moved, after = 0, ""
    while True:
        rows = memory.pgvector.vectors_after(graph, after, batch)
        if not rows:
            break
        store.run(_set_vectors(rows))
        moved += len(rows)
        after = rows[-1][0]
    memory.pgvector.delete_graph(graph)
    return moved


def _drop_vector_index() -> Any:
    _, vector_options = yield from indexed()
    if vector_options is not None:
        yield Query(f"DROP VECTOR INDEX FOR (n:{NODE_LABEL}) ON (n.{VECTOR_PROPERTY})")


def _with_vectors(limit: int) -> Any:
    return (yield Query(f"MATCH (n:{NODE_LABEL}) WHERE n.{VECTOR_PROPERTY} IS NOT NULL "
                        f"RETURN n.node_id, n.{VECTOR_PROPERTY} LIMIT $limit", {"limit": limit}, read_only=True))


def _clear_vectors(node_ids: Sequence[str]) -> Any:
    yield Query(f"UNWIND $ids AS id MATCH (n:{NODE_LABEL} {{node_id: id}}) SET n.{VECTOR_PROPERTY} = NULL",
                {"ids": Ids(node_ids)})


def _set_vectors(rows: Sequence[tuple[str, list[float]]]) -> Any:
    yield Query(f"UNWIND $rows AS row MATCH (n:{NODE_LABEL} {{node_id: row[0]}}) "
                f"SET n.{VECTOR_PROPERTY} = vecf32(row[1])", {"rows": Rows([node_id, v] for node_id, v in rows)})
