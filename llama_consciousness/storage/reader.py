"""What the layers above storage need of a memory: its stores, vectors, embedding and versions.

A ``Protocol``, so that retrievers, postprocessors and ingestion never import
the memory's module (which imports them); ``ConsciousnessMemory`` satisfies it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any, Protocol

from llama_consciousness.schema import MemoryNode
from llama_consciousness.storage.level_store import LevelGraphStore, LevelPlans
from llama_consciousness.storage.vectors import LevelVectors


class MemoryReader(Protocol):
    """Anything that hands out a memory's level graph stores (``ConsciousnessMemory`` does)."""

    db: Any
    """The FalkorDB client (``falkordb.FalkorDB``) of the level graphs."""
    embed_model: Any
    """The LlamaIndex ``BaseEmbedding`` memories and questions are embedded with."""
    keyword_indexes: Any
    """The BM25 indexes of the keyword channel (``KeywordIndexes``), one per level graph; they hold the names
    the graph channel starts from too."""
    retrievals: Any
    """A semaphore: how many retrievals run at once (the others wait their turn before their deadline)."""

    def level(self, level: str, citizen_id: str | None = None) -> LevelGraphStore:
        """The store of one level graph (N1 needs the citizen)."""
        ...

    def writable(self, level: str, citizen_id: str | None = None) -> LevelGraphStore:
        """The store of one level graph, ready to be written (its schema made on first use)."""
        ...

    def plans(self, level: str, citizen_id: str | None = None) -> LevelPlans:
        """The query plans of one level graph."""
        ...

    def vectors(self, level: str) -> LevelVectors:
        """Where the level keeps its vectors."""
        ...

    def graph_version(self, graph: str) -> int:
        """A number that changes whenever this process writes to ``graph`` (for caches)."""
        ...

    def embed_query(self, text: str) -> list[float]:
        """The embedding of a question."""
        ...

    def embed_nodes(self, nodes: Sequence[MemoryNode]) -> list[MemoryNode]:
        """``nodes`` with their embeddings (computed where missing)."""
        ...

    def ensure_server(self) -> bool:
        """Start the memory's own server again if it died; True when it had to."""
        ...

    def bump_graph(self, graph: str, index: bool = True) -> None:
        """Mark ``graph`` as written (its version moves); ``index=False``: its keyword index needs nothing."""
        ...

    def index_graph(self, graph: str) -> None:
        """Bring ``graph``'s keyword index up to its change log (a failure is logged, never raised)."""
        ...


class MemoryKeeper(MemoryReader, Protocol):
    """What the memory's own acts need of it besides its stores: forgetting, erasing, retention, and the
    living memory's states and uses (``ConsciousnessMemory`` satisfies it; those modules are typed by this
    rather than by the memory's class, whose module imports theirs)."""

    restore_window: timedelta
    """How long after a forget a restore is accepted."""
    vector_backends: dict[str, str]
    """Level -> "falkordb" or "pgvector"."""
    pgvector: Any
    """The ``PgVectorStore`` of the levels whose vectors live in Postgres."""
    data_dir: Any
    """The memory's own data directory (a ``Path``), None when its servers are given by URL."""
    postgres_url: Any
    """The Postgres given by URL (None: the embedded one, in ``data_dir``, when a level needs it)."""

    def graphs(self) -> list[str]:
        """The level graphs that exist on the server."""
        ...

    def _open_pgvector(self) -> None:
        """Connect the Postgres vector store (starting the embedded Postgres without ``postgres_url``)."""
        ...

    def _use_vector_backend(self, level: str, backend: str) -> None:
        """Read and write ``level``'s vectors in ``backend`` from now on (``move_vectors`` moved them)."""
        ...

    def delete_level(self, level: str, citizen_id: str | None = None) -> None:
        """Delete one level graph with its vectors and keyword index."""
        ...

    def citizens(self) -> list[str]:
        """The citizens that have an N1 graph."""
        ...

    def index_written(self) -> None:
        """Bring the keyword indexes of the graphs written since last time up to their change logs."""
        ...

    def citizen_state(self, citizen_id: str, *, as_of: Any = None, known_at: Any = None) -> Any:
        """The citizen's state in force at ``as_of`` as known at ``known_at`` (now by default), or None."""
        ...

    def forget(self, node_ids: Any, level: str, citizen_id: str | None = None, **kwargs: Any) -> Any:
        """``ConsciousnessMemory.forget``."""
        ...

    def erase(self, node_ids: Any, level: str, citizen_id: str | None = None, **kwargs: Any) -> Any:
        """``ConsciousnessMemory.erase``."""
        ...
