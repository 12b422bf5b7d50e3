"""Base identity of versions (pure functions)."""

from __future__ import annotations

import pytest

from llama_consciousness.scoring.identity import base_identity, extract_base_identity, group_by_identity

from memory_builders import _m


@pytest.mark.parametrize(
    ("node_id", "base"),
    [
        ("decision_v2_architecture_v1", "decision_v2_architecture"),  # the spec's example
        ("belief-V12", "belief"),
        ("belief.v3", "belief"),
        ("belief_version2", "belief"),
        ("belief@4", "belief"),
        ("v2", "v2"),  # nothing left after stripping: keep the id
        ("phase_v2_plan", "phase_v2_plan"),  # a version inside the name is part of it
    ],
)
def test_extract_base_identity(node_id: str, base: str) -> None:
    assert extract_base_identity(node_id) == base


def test_supersedes_chain_and_explicit_base_win_over_names() -> None:
    v1 = _m("alpha")
    v2 = _m("beta", supersedes="alpha")
    v3 = _m("gamma", supersedes="beta")
    other = _m("delta", extra={"base_id": "alpha"})
    unrelated = _m("zeta")
    groups = group_by_identity([v1, v2, v3, other, unrelated])
    assert {k: sorted(n.node_id for n in v) for k, v in groups.items()} == {
        "alpha": ["alpha", "beta", "delta", "gamma"]
    }
    assert base_identity(v3) == "beta"  # without the chain at hand, the parent's id is the best guess
    assert len(group_by_identity([v1, unrelated], only_versioned=False)) == 2
