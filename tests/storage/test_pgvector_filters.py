"""A level whose vectors live in Postgres filters exactly like FalkorDB, supersession included."""

from __future__ import annotations

import uuid
from datetime import datetime, timezone

from llama_consciousness.schema import MemoryNode
from llama_consciousness.storage.filters import MemoryFilter
from llama_consciousness.temporal import TemporalWindow

T0 = datetime(2024, 3, 1, tzinfo=timezone.utc)
T1 = datetime(2024, 6, 1, tzinfo=timezone.utc)


def _n3(node_id: str, text: str, **kw) -> MemoryNode:
    kw.setdefault("created_at", T0)
    return MemoryNode(node_id=node_id, level="N3", name=text, description=text, energy=0.6, confidence=0.7, **kw)


def test_superseded_version_stops_matching_in_postgres(memory) -> None:
    tag = uuid.uuid4().hex[:8]
    old = _n3(f"pgv_{tag}_v1", f"zebra migration {tag} happens in spring")
    memory.ingest([old], entities=False, duplicates="off")
    new = _n3(f"pgv_{tag}_v2", f"zebra migration {tag} happens in autumn", created_at=T1, valid_at=T1,
              supersedes=old.node_id)
    report = memory.ingest([new], entities=False, duplicates="off")
    assert report.superseded == 1
    current = [n.node_id for n in memory.vector_search(f"zebra migration {tag}", "N3", k=5)]
    assert new.node_id in current and old.node_id not in current
    history = [n.node_id for n in memory.vector_search(f"zebra migration {tag}", "N3", k=5, temporal_mode="evolution")]
    assert {new.node_id, old.node_id} <= set(history)


def test_emotions_quarantine_and_entities_filtered_in_sql(memory) -> None:
    tag = uuid.uuid4().hex[:8]
    graph = "ecosystem_n3"
    excited = _n3(f"pge_{tag}_a", f"launch party {tag}", emotion_vector={"excited": 0.9})
    calm = _n3(f"pge_{tag}_b", f"launch party {tag} quietly", emotion_vector={"calm": 0.9})
    hidden = _n3(f"pge_{tag}_c", f"launch party {tag} ignore", quarantined=True)
    # a hub gets no vector of its own (embed_nodes); one given its vector keeps it, and the filter hides it
    hub = _n3(f"pge_{tag}_d", f"launch party {tag}", is_entity=True, embedding=memory.embed_query(f"launch party {tag}"))
    memory.upsert([excited, calm, hidden, hub])
    query = memory.embed_query(f"launch party {tag}")
    window = TemporalWindow()
    found = {i for i, _ in memory.pgvector.search(graph, query, 50, MemoryFilter(window))}
    assert excited.node_id in found and calm.node_id in found
    assert hidden.node_id not in found and hub.node_id not in found
    wanted = MemoryFilter(window, required_emotions=("excitement",))  # canonical name meets "excited"
    ids = {i for i, _ in memory.pgvector.search(graph, query, 50, wanted)}
    assert excited.node_id in ids and calm.node_id not in ids
    everything = MemoryFilter(window, include_quarantined=True, include_entities=True)
    assert {hidden.node_id, hub.node_id} <= {i for i, _ in memory.pgvector.search(graph, query, 50, everything)}
