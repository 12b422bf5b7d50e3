"""Supersession in the level store: expire, never delete; one transaction per batch."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from llama_consciousness import StorageError
from llama_consciousness.schema import ConsciousnessRelationship, MemoryNode
from llama_consciousness.storage.level_store import Supersession
from llama_consciousness.storage.records import EDGE_WIRE
from llama_consciousness.temporal import TemporalWindow

T0 = datetime(2025, 8, 1, 9, 0, tzinfo=timezone.utc)
T1 = datetime(2025, 9, 15, 14, 30, tzinfo=timezone.utc)


def _node(node_id: str, **kw) -> MemoryNode:
    kw.setdefault("created_at", T0)
    return MemoryNode(node_id=node_id, level="N2", name="FalkorDB capabilities", energy=0.6, confidence=0.7,
                      embedding=[1.0, 0.0, 0.0, 0.1], **kw)


def test_supersession_expires_the_old_version_and_keeps_it(fresh_graph) -> None:
    store = fresh_graph("N2")
    store.upsert([_node("belief_v1", description="no native vectors")])
    new = _node("belief_v2", description="native HNSW vectors", created_at=T1, valid_at=T1,
                supersedes="belief_v1")
    change = Supersession("belief_v1", "belief_v2", expired_at=T1, reason="reality_changed", invalid_at=T1)
    result = store.upsert([new], supersessions=[change])
    assert (result.nodes_created, result.superseded) == (1, 1)

    old = store.get_node("belief_v1")
    assert old is not None  # nothing is deleted
    assert old.expired_at == T1 and old.invalid_at == T1
    assert old.invalidation_reason == "reality_changed" and old.superseded_by == "belief_v2"
    assert store.counts() == (2, 0)

    # current mode sees only the new version, evolution sees both
    found = store.vector_search([1.0, 0.0, 0.0, 0.1], 5, TemporalWindow())
    assert [h.node.node_id for h in found] == ["belief_v2"]
    evolution = store.vector_search([1.0, 0.0, 0.0, 0.1], 5, TemporalWindow("evolution"))
    assert {h.node.node_id for h in evolution} == {"belief_v1", "belief_v2"}

    # idempotent: the same batch again changes nothing
    again = store.upsert([new], supersessions=[change])
    assert (again.nodes_unchanged, again.superseded) == (1, 0)
    assert store.get_node("belief_v1").expired_at == T1

    # re-ingesting the old version (even edited) does not bring it back to life
    edited = store.upsert([_node("belief_v1", description="no native vectors (typo fixed)")])
    assert edited.nodes_updated == 1
    revived = store.get_node("belief_v1")
    assert revived.description.endswith("(typo fixed)")
    assert revived.expired_at == T1 and revived.invalidation_reason == "reality_changed"


def test_discovered_false_does_not_touch_validity(fresh_graph) -> None:
    store = fresh_graph("N2")
    store.upsert([_node("b1")])
    store.upsert([_node("b2", created_at=T1, supersedes="b1")],
                 supersessions=[Supersession("b1", "b2", expired_at=T1, reason="discovered_false", invalid_at=T0)])
    old = store.get_node("b1")
    assert old.expired_at == T1 and old.invalid_at is None
    assert old.invalidation_reason == "discovered_false"


def test_superseding_a_missing_memory_writes_nothing(fresh_graph) -> None:
    store = fresh_graph("N2")
    with pytest.raises(StorageError, match=r"missing \['ghost'\].*b2 supersedes ghost"):
        store.upsert([_node("b2")], supersessions=[Supersession("ghost", "b2", expired_at=T1, reason="discovered_false")])
    assert store.counts() == (0, 0)


def test_a_failing_batch_leaves_the_graph_as_it_was(fresh_graph) -> None:
    """One transaction per batch: a server-side failure in the last part rolls back the first."""
    store = fresh_graph("N2")
    store.upsert([_node("a")])
    before = store.get_node("a")
    rel = ConsciousnessRelationship(source_id="a", target_id="b", relation_type="ENABLES", goal="g",
                                    mindstate="m", energy=0.5, confidence=0.5)
    plan = store.plans.upsert([_node("b"), _node("a", description="changed")], [rel])
    query = next(plan)
    while query.params.get("edges") is None:  # skip the pre-check, reach the write
        query = plan.send([])
    row = query.params["edges"][0]
    row[EDGE_WIRE.index("emotion_values")] = {"not": "storable"}  # the server rejects this row (a map property)
    with pytest.raises(StorageError, match="query on graph"):
        store._execute(query)
    assert store.counts() == (1, 0)
    assert store.get_node("a") == before


def test_clock_derived_fields_do_not_make_a_rerun_an_update(fresh_graph) -> None:
    """A computed authority drifts with the clock; re-ingesting must still be a no-op."""
    store = fresh_graph("N2")
    first = _node("scored", authority_score=0.563851)
    assert store.upsert([first], volatile={"scored": ("authority_score",)}).nodes_created == 1
    later = _node("scored", authority_score=0.56385)  # the same memory, scored a few seconds later
    again = store.upsert([later], volatile={"scored": ("authority_score",)})
    assert (again.nodes_updated, again.nodes_unchanged) == (0, 1)
    assert store.get_node("scored").authority_score == 0.563851
    # an authority the user states is part of the record: changing it is an update
    assert store.upsert([_node("scored", authority_score=0.9)]).nodes_updated == 1
    assert store.get_node("scored").authority_score == 0.9
