"""Storage: embedded servers, the level graph store (all Cypher), the pgvector store.

Layers above use the stores, the query plans (``channels``, ``state_queries``,
``links``, ``neighbourhood``), :func:`run_interleaved` to run several plans at
once, and the vector interface (``vectors``); the wire format and the
connection handling stay in here.
"""

from llama_consciousness.storage.falkordb_server import EmbeddedFalkorDB
from llama_consciousness.storage.interleaved import graph_states, list_graphs, run_interleaved
from llama_consciousness.storage.level_store import (
    LevelGraphStore,
    LevelPlans,
    UpsertResult,
    VectorHit,
    VectorIndexConfig,
)
from llama_consciousness.storage.paths import default_data_dir
from llama_consciousness.storage.postgres_server import EmbeddedPostgres

__all__ = [
    "EmbeddedFalkorDB",
    "EmbeddedPostgres",
    "LevelGraphStore",
    "LevelPlans",
    "UpsertResult",
    "VectorHit",
    "VectorIndexConfig",
    "default_data_dir",
    "graph_states",
    "list_graphs",
    "register_graph",
    "run_interleaved",
]
