"""Where a level keeps its vectors: on the memory nodes under FalkorDB's HNSW index (:class:`GraphVectors`,
the default) or in Postgres with pgvector (:class:`PostgresVectors`); memories and links are always in the graph.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Protocol

from llama_consciousness.schema import MemoryNode
from llama_consciousness.storage.filters import MemoryFilter
from llama_consciousness.storage.level_store import Await, LevelPlans, Plan, VectorHit

VECTOR_BACKENDS = ("falkordb", "pgvector")
"""Where a level's vectors can be (``ConsciousnessMemory(vector_backends=...)``, ``move_vectors``)."""

# Postgres searches run here, beside the graph queries (each waits for a pooled connection)
_SEARCHES = ThreadPoolExecutor(max_workers=8, thread_name_prefix="lc-pgvector")


class LevelVectors(Protocol):
    """The vector side of one level."""

    #: Whether ``mirror_validity`` does anything (vectors kept apart from the memories must follow their times).
    mirrors_validity: bool

    def search(self, plans: LevelPlans, embedding: Sequence[float], k: int, memory_filter: MemoryFilter,
               deadline: float | None = None) -> Plan:
        """A plan whose result is the k nearest memories that pass the filter (``VectorHit``s, nearest first)."""
        ...

    def candidates(self, plans: LevelPlans, embedding: Sequence[float], k: int,
                   memory_filter: MemoryFilter, deadline: float | None = None) -> Plan | None:
        """A plan whose result is ``(node_id, similarity)`` of the nearest memories, for a graph query to start
        from; None when the graph's own queries search the vectors themselves."""
        ...

    def write(self, plans: LevelPlans, nodes: Sequence[MemoryNode]) -> None:
        """Store the vectors of ``nodes`` (already upserted in the graph)."""
        ...

    def mirror_validity(self, plans: LevelPlans, nodes: Sequence[MemoryNode]) -> None:
        """Let the vectors of ``nodes`` follow their stored times and flags (a supersession expired them)."""
        ...


class GraphVectors:
    """Vectors on the memory nodes, under the graph's HNSW index: the graph's own upsert writes them."""

    mirrors_validity = False

    def search(self, plans: LevelPlans, embedding: Sequence[float], k: int, memory_filter: MemoryFilter,
               deadline: float | None = None) -> Plan:
        return plans.vector_search(embedding, k, memory_filter)

    def candidates(self, plans: LevelPlans, embedding: Sequence[float], k: int,
                   memory_filter: MemoryFilter, deadline: float | None = None) -> Plan | None:
        return None

    def write(self, plans: LevelPlans, nodes: Sequence[MemoryNode]) -> None:
        return None

    def mirror_validity(self, plans: LevelPlans, nodes: Sequence[MemoryNode]) -> None:
        return None


class PostgresVectors:
    """Vectors in Postgres (``PgVectorStore``); the memories they point to are read from the graph.

    A search starts at once in a thread of its own and its plan awaits it
    (``Await``), so the graph queries of a retrieval run meanwhile and a
    stalled Postgres costs only this level its answer.
    """

    mirrors_validity = True

    def __init__(self, store: Any) -> None:
        self.store = store

    def search(self, plans: LevelPlans, embedding: Sequence[float], k: int, memory_filter: MemoryFilter,
               deadline: float | None = None) -> Plan:
        return self._hits(plans, self._nearest(plans, embedding, k, memory_filter, deadline), memory_filter)

    @staticmethod
    def _hits(plans: LevelPlans, nearest: Plan, memory_filter: MemoryFilter) -> Plan:
        found = yield from nearest
        nodes = {n.node_id: n for n in (yield from plans.get_nodes([node_id for node_id, _ in found]))}
        # Postgres mirrors the times, not a forget: what the window leaves to the graph is checked here
        hidden = {i for i, n in nodes.items() if memory_filter.hides_forgotten and n.forgotten_at is not None}
        return [VectorHit(nodes[node_id], score) for node_id, score in found if node_id in nodes and node_id not in hidden]

    def candidates(self, plans: LevelPlans, embedding: Sequence[float], k: int,
                   memory_filter: MemoryFilter, deadline: float | None = None) -> Plan | None:
        return self._nearest(plans, embedding, k, memory_filter, deadline)

    def _nearest(self, plans: LevelPlans, embedding: Sequence[float], k: int, memory_filter: MemoryFilter,
                 deadline: float | None) -> Plan:
        future = _SEARCHES.submit(self.store.search, plans.graph, embedding, k, memory_filter, deadline=deadline)
        return _awaited(future)

    def write(self, plans: LevelPlans, nodes: Sequence[MemoryNode]) -> None:
        if nodes:
            self.store.upsert(plans.graph, nodes)

    def mirror_validity(self, plans: LevelPlans, nodes: Sequence[MemoryNode]) -> None:
        if nodes:
            self.store.mirror_validity(plans.graph, nodes)


def _awaited(future: Future) -> Plan:
    return (yield Await(future))
