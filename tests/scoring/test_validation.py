"""Three-tier validation of memory and link fields, and the quality grade (pure functions)."""

from __future__ import annotations

import pytest

from llama_consciousness.schema import ValidationResult
from llama_consciousness.scoring.validation import (
    assess_metadata_quality,
    validate_consciousness_link,
    validate_consciousness_node,
    validate_field_type,
)

SPEC_LINK = {
    "energy": 0.8, "confidence": 0.9, "emotion_vector": {"drive": 0.7}, "goal": "g", "mindstate": "m",
    "energy_transfer_coefficient": 0.5, "resolution_state": "blocked",
}


def test_link_tiers_follow_the_spec() -> None:
    full = validate_consciousness_link({**SPEC_LINK, "formation_trigger": "t", "felt_quality": "q",
                                        "emotion_description": "d"})
    assert full.valid and full.warnings == [] and full.metadata_completeness == pytest.approx(10 / 13)
    missing = validate_consciousness_link({k: v for k, v in SPEC_LINK.items() if k != "goal"})
    assert not missing.valid and missing.errors == ["REQUIRED field missing: goal"]
    assert len(missing.warnings) == 3
    bad = validate_consciousness_link({**SPEC_LINK, "energy": 1.2, "emotion_vector": {"joy": 2}})
    assert [e.split(" (")[0] for e in bad.errors] == ["REQUIRED field invalid: energy", "REQUIRED field invalid: emotion_vector"]
    conditional = validate_consciousness_link({**SPEC_LINK, "sensory_details": "loud"})
    assert conditional.errors == ["CONDITIONAL field invalid: sensory_details (got 'loud')"]
    extra = validate_consciousness_link({**SPEC_LINK, "future_field": object()})
    assert extra.valid  # unknown fields are allowed (extensibility)


@pytest.mark.parametrize(
    "data",
    [
        {},
        SPEC_LINK,
        {**SPEC_LINK, "energy": None, "goal": "  ", "felt_quality": "q", "sensory_details": {"sound": "hum"}},
        {**SPEC_LINK, "emotion_vector": {"": 0.5}, "body_sensation": 3, "formation_trigger": 7},
    ],
)
def test_tier_results_are_what_validation_of_their_fields_gives(data) -> None:
    """The results are built without pydantic's checks: they must equal validated ones, fields set included."""
    from llama_consciousness.scoring import validation as v

    for result, listed in ((validate_consciousness_link(data), v.LINK_REQUIRED + v.LINK_IMPORTANT + v.LINK_CONDITIONAL),
                           (validate_consciousness_node(data), v.NODE_REQUIRED + v.NODE_IMPORTANT + v.NODE_CONDITIONAL)):
        again = ValidationResult.model_validate(result.model_dump())
        assert result == again and result.model_fields_set == again.model_fields_set
        assert result.metadata_completeness == sum(data.get(f) is not None for f in listed) / len(listed)
        assert result.valid == (result.errors == [])


def test_a_missing_important_fields_warning_is_one_shared_string() -> None:
    """30,000 records without felt_quality pickle one copy of its warning (worker replies)."""
    first = validate_consciousness_link(SPEC_LINK).warnings
    second = validate_consciousness_link(dict(SPEC_LINK)).warnings
    assert first == second and len(first) == 3
    assert all(a is b for a, b in zip(first, second))


def test_field_types() -> None:
    assert validate_field_type("resolution_state", "blocked")
    assert not validate_field_type("resolution_state", "done")
    assert not validate_field_type("energy", True)
    assert not validate_field_type("energy", float("nan"))
    assert not validate_field_type("goal", "  ")
    assert validate_field_type("unknown", None)


def test_node_tiers_require_ranking_fields_only() -> None:
    result = validate_consciousness_node({"node_id": "a", "name": "A", "energy": 0.5, "confidence": 0.5,
                                          "resolution_state": "in_progress"})
    assert result.valid
    assert any("emotion_vector" in w for w in result.warnings)


@pytest.mark.parametrize(
    ("completeness", "invalid", "grade"),
    [(0.95, 0, "excellent"), (0.95, 1, "good"), (0.95, 2, "acceptable"), (0.8, 0, "good"),
     (0.7, 4, "acceptable"), (0.7, 5, "poor"), (0.5, 0, "poor")],
)
def test_quality_grade_thresholds(completeness: float, invalid: int, grade: str) -> None:
    # 20 results: 1 invalid is a 5% error rate, 2 are 10% (not < 10%), 5 are 25%
    results = [ValidationResult(valid=i >= invalid, metadata_completeness=completeness) for i in range(20)]
    assert assess_metadata_quality(results) == grade
    assert assess_metadata_quality([]) == "excellent"


def test_quality_grade_is_not_fooled_by_float_sums() -> None:
    # 0.9 summed ten times is 8.999999999999998 / 10 -> 0.9000000000000001 unrounded
    results = [ValidationResult(valid=True, metadata_completeness=0.9) for _ in range(10)]
    assert assess_metadata_quality(results) == "good"
    results = [ValidationResult(valid=True, metadata_completeness=0.6) for _ in range(10)]
    assert assess_metadata_quality(results) == "poor"
