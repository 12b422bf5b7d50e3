"""Fusion of ranked lists: weighted score fusion (pure functions)."""

from __future__ import annotations

import pytest

from llama_consciousness.scoring.fusion import weighted_score_fusion


def test_weighted_score_fusion_scales_each_list_and_keeps_the_gaps() -> None:
    fused = weighted_score_fusion(
        {"N1_keyword": [("a", 9.0), ("b", 3.0), ("c", 1.0)], "N1_vector": [("c", 0.9), ("b", 0.8), ("d", 0.7)]},
        {"N1_keyword": 1.0, "N1_vector": 0.1},
    )
    scores = dict(fused)
    assert [key for key, _ in fused] == ["a", "b", "c", "d"]
    assert scores["a"] == pytest.approx(1.0)  # top keyword hit, no vector
    assert scores["b"] == pytest.approx(0.25 + 0.1 * 0.5)  # (3-1)/(9-1) and (0.8-0.7)/(0.9-0.7)
    assert scores["c"] == pytest.approx(0.0 + 0.1)
    assert scores["d"] == pytest.approx(0.0)  # weight kept the id, contributed nothing
    assert weighted_score_fusion({"x": [("only", 0.3)]}) == [("only", 1.0)]  # a flat list scales to 1
    with pytest.raises(ValueError, match="weight"):
        weighted_score_fusion({"x": [("a", 1.0)]}, {"x": -1.0})


def test_path_relevance_is_summed_energy_over_the_depth_in_unit_range() -> None:
    from llama_consciousness.scoring.fusion import path_relevance

    assert path_relevance(1.2, 2) == 0.6
    assert path_relevance(3.0, 2) == 1.0 and path_relevance(-0.5, 2) == 0.0
    assert path_relevance(0.4, 0) == 0.4  # a depth of 0 counts as 1
    energies = [0.1, 0.7, 1.3, 1.9]
    assert [path_relevance(e, 2) for e in energies] == sorted(path_relevance(e, 2) for e in energies)
