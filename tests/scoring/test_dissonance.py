"""Temporal dissonance detection (pure functions), on hand-made versions and on the demo file."""

from __future__ import annotations

from datetime import datetime

import pytest

from llama_consciousness.ingestion import demo_memory_file, read_memory_file
from llama_consciousness.schema import ConsciousnessNode
from llama_consciousness.scoring.dissonance import (
    detect_temporal_dissonances,
    dissonance_pairs,
    group_nodes_by_identity,
)

from memory_builders import T0, T1, T2, UTC, mem, versions

FALKOR_BASE = "ada_belief_falkordb_capabilities"
TEAM_BASE = "n2_team_composition"


def test_demo_file_has_one_dissonance_of_each_type_with_the_spec_fields() -> None:
    nodes, _ = read_memory_file(demo_memory_file())
    found = detect_temporal_dissonances(nodes, "evolution")
    assert sorted(d.dissonance_type for d in found) == ["discovered_false", "reality_changed"]
    by_type = {d.dissonance_type: d for d in found}

    falkor = by_type["discovered_false"]
    assert falkor.node_id == FALKOR_BASE
    assert falkor.node_name == "FalkorDB capabilities"
    assert falkor.original_belief.startswith("FalkorDB has no native vector search")
    assert falkor.corrected_belief.startswith("FalkorDB ships native HNSW vector indexes")
    assert falkor.correction_trigger == "Corrected by pattern_read_primary_docs"
    assert falkor.discovery_energy == 0.85
    assert falkor.discovery_emotions == {"surprise": 0.7, "excitement": 0.8, "relief": 0.5}
    assert falkor.belief_held_from == datetime(2025, 8, 1, 9, 0, tzinfo=UTC)
    assert falkor.belief_held_until == datetime(2025, 9, 15, 14, 30, tzinfo=UTC)
    assert falkor.corrected_at == datetime(2025, 9, 15, 14, 30, tzinfo=UTC)

    team = by_type["reality_changed"]
    assert team.node_id == TEAM_BASE
    assert team.node_name == "Team composition"
    assert team.original_belief == "Nicolas is the solo founder of the consciousness project."
    assert team.corrected_belief.startswith("Nicolas leads a team")
    assert team.correction_trigger == "Corrected by pattern_org_change_announcement"
    assert team.discovery_energy == 0.6
    assert team.belief_held_from == datetime(2025, 1, 5, 10, 0, tzinfo=UTC)
    assert team.belief_held_until == datetime(2025, 9, 3, 12, 0, tzinfo=UTC)
    assert team.corrected_at == datetime(2025, 9, 3, 12, 0, tzinfo=UTC)

    assert [d.dissonance_type for d in detect_temporal_dissonances(nodes, "full_history")] == \
        [d.dissonance_type for d in found]


@pytest.mark.parametrize("mode", ["current", "point_in_time"])
def test_no_dissonance_outside_evolution_and_full_history(mode: str) -> None:
    nodes, _ = read_memory_file(demo_memory_file())
    assert detect_temporal_dissonances(nodes, mode) == []


def test_missing_reason_is_inferred_like_the_writer() -> None:
    # valid_at moved forward: the world changed
    assert detect_temporal_dissonances(list(versions(v2_valid=T1)), "evolution")[0].dissonance_type == "reality_changed"
    # same validity start: the old belief was never true
    assert detect_temporal_dissonances(list(versions(v2_valid=T0)), "evolution")[0].dissonance_type == "discovered_false"
    # an explicit supersede_reason on the new version wins over the inference
    explicit = versions(v2_valid=T1, supersede_reason="discovered_false")
    assert detect_temporal_dissonances(list(explicit), "evolution")[0].dissonance_type == "discovered_false"
    # and the stored invalidation_reason of the old version wins over everything
    stored = versions("b", "reality_changed", v2_valid=T0)
    assert detect_temporal_dissonances(list(stored), "evolution")[0].dissonance_type == "reality_changed"


def test_defaults_when_the_correction_says_little() -> None:
    (d,) = detect_temporal_dissonances(list(versions(reason="discovered_false")), "evolution")
    assert d.correction_trigger == "Unknown correction trigger"
    assert d.discovery_energy == 0.5
    assert d.discovery_emotions is None
    (zero,) = detect_temporal_dissonances(list(versions(discovery_energy=0.0)), "evolution")
    assert zero.discovery_energy == 0.0  # an explicit 0.0 is not replaced by the default


def test_chains_order_and_unexpired_versions() -> None:
    v1 = mem("plan_v1", description="one", created_at=T0, expired_at=T1, invalidation_reason="discovered_false")
    v2 = mem("plan_v2", description="two", created_at=T1, expired_at=T2, supersedes="plan_v1",
             invalidation_reason="reality_changed")
    v3 = mem("plan_v3", description="three", created_at=T2, supersedes="plan_v2")
    found = detect_temporal_dissonances([v3, v1, v2], "evolution")  # input order does not matter
    assert [(d.original_belief, d.corrected_belief, d.dissonance_type) for d in found] == [
        ("one", "two", "discovered_false"), ("two", "three", "reality_changed")]
    assert {d.node_id for d in found} == {"plan"}
    # two versions, the older never expired: not a correction
    a = mem("idea_v1", created_at=T0)
    b = mem("idea_v2", created_at=T1)
    assert detect_temporal_dissonances([a, b], "evolution") == []
    # a lone version has nothing to be compared with
    assert detect_temporal_dissonances([v1], "evolution") == []


def test_versions_are_grouped_within_one_level_graph_only() -> None:
    n2_v1, _ = versions("shared")
    _, n3_v2 = versions("shared", level="N3")
    assert group_nodes_by_identity([n2_v1, n3_v2]) == {}
    assert detect_temporal_dissonances([n2_v1, n3_v2], "evolution") == []
    # two citizens' N1 graphs are two graphs too
    ada_v1, _ = versions("personal", level="N1")
    bob_v2 = mem("personal_v2", level="N1", citizen="bob", created_at=T1, supersedes="personal_v1")
    assert detect_temporal_dissonances([ada_v1, bob_v2], "evolution") == []
    groups = group_nodes_by_identity(list(versions("x")) + list(versions("x", level="N3")))
    assert set(groups) == {("N2", None, "x"), ("N3", None, "x")}


def test_consciousness_nodes_are_accepted_and_pairs_name_the_versions() -> None:
    v1, v2 = versions(reason="discovered_false")
    cn = [ConsciousnessNode(**m.model_dump(), retrieval_source="N2_vector", relevance_score=0.3) for m in (v2, v1)]
    (pair,) = dissonance_pairs(cn, "full_history")
    assert pair.original is cn[1] and pair.correction is cn[0]
    assert pair.dissonance.node_id == "belief"
