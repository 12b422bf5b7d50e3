"""A real local FalkorDB cluster (3 masters, 3 replicas), started once for the cluster tests."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from local_cluster import LocalCluster


@pytest.fixture(scope="session")
def falkordb_cluster() -> Iterator[LocalCluster]:
    cluster = LocalCluster(Path(tempfile.mkdtemp(prefix="lccl", dir="/tmp"))).start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def cluster_memory(falkordb_cluster: LocalCluster) -> Iterator:
    from llama_consciousness import ConsciousnessMemory

    data_dir = Path(tempfile.mkdtemp(prefix="lccm", dir="/tmp"))
    memory = ConsciousnessMemory(data_dir=data_dir, falkordb_url=falkordb_cluster.url)
    yield memory
    memory.close()
    shutil.rmtree(data_dir, ignore_errors=True)
