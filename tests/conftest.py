"""Shared fixtures: the real embedded servers, started once per test session.

Tests isolate themselves by graph name (a fresh citizen id or a fresh
``LevelPlans`` graph), not by starting servers, so the whole suite pays the
start-up cost of FalkorDB and Postgres once.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("IS_TESTING", "1")
# Nothing in the suite may need the network: make tiktoken and hubs fail fast.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
for _var in ("LLAMA_CONSCIOUSNESS_FALKORDB_URL", "LLAMA_CONSCIOUSNESS_POSTGRES_URL",
             "LLAMA_CONSCIOUSNESS_PGVECTOR_LEVELS", "LLAMA_CONSCIOUSNESS_EMBED_MODEL",
             "LLAMA_CONSCIOUSNESS_SERVER_IDLE_S"):
    os.environ.pop(_var, None)


@pytest.fixture(scope="session")
def data_root() -> Iterator[Path]:
    """A short directory (unix socket paths are limited to ~107 bytes)."""
    root = Path(tempfile.mkdtemp(prefix="lct", dir="/tmp"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def memory(data_root: Path):
    """One ConsciousnessMemory on embedded FalkorDB + Postgres (N3 vectors in pgvector)."""
    from llama_consciousness import ConsciousnessMemory

    mem = ConsciousnessMemory(data_dir=data_root / "shared", vector_backends={"N3": "pgvector"})
    yield mem
    mem.close()


@pytest.fixture(scope="session")
def falkordb_server(memory):
    return memory._falkordb_server


@pytest.fixture(scope="session")
def postgres_url(memory) -> str:
    return memory.pgvector.url


@pytest.fixture
def citizen() -> str:
    """A citizen id no other test uses, so its N1 graph is private to the test."""
    return "t" + uuid.uuid4().hex[:12]


@pytest.fixture
def fresh_graph(memory):
    """A factory of empty level stores on their own graphs, deleted afterwards."""
    from llama_consciousness.storage.level_store import LevelGraphStore, LevelPlans

    made = []

    def make(level: str = "N2", *, dimension: int | None = 4, store_vectors: bool = True, index=None):
        plans = LevelPlans(f"test_{uuid.uuid4().hex[:12]}", level, "x" if level == "N1" else None,
                           dimension=dimension, store_vectors=store_vectors, index=index)
        store = LevelGraphStore(memory.db, plans)
        store.ensure_schema()
        made.append(store)
        return store

    yield make
    for store in made:
        store.delete()
