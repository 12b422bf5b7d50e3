"""The spec's three-tier metadata validation (Component 6), as pure functions.

REQUIRED fields make a record unusable when missing or invalid (an error),
IMPORTANT ones make it poorer (a warning), CONDITIONAL ones are checked only
when present.  Completeness is the share of all listed fields that are
present.  The same rules serve ingestion (reject or drop a record) and
retrieval (grade what came back, rank incomplete memories lower).

For memories (nodes) the spec lists no tiers of its own.  We require what
ranking cannot do without (energy, confidence, resolution state, a name) and
rate the emotion vector, goal and mindstate IMPORTANT: a memory imported
from a plain chat log has none of them and is still worth keeping.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from llama_consciousness.schema import ValidationResult
from llama_consciousness.schema.trusted import trusted_model

RESOLUTION_STATES = ("resolved", "in_progress", "blocked")


def _unit(value: Any) -> bool:
    if type(value) is float or type(value) is int:  # the common case, without the ABC check
        return 0.0 <= value <= 1.0
    return (
        isinstance(value, numbers.Real)
        and not isinstance(value, bool)
        and math.isfinite(float(value))
        and 0.0 <= float(value) <= 1.0
    )


def _text(value: Any) -> bool:
    return isinstance(value, str) and len(value.strip()) > 0


def _emotions(value: Any) -> bool:
    return isinstance(value, Mapping) and all(
        isinstance(k, str) and k.strip() and _unit(v) for k, v in value.items()
    )


FIELD_SPECS: dict[str, Callable[[Any], bool]] = {
    "energy": _unit,
    "confidence": _unit,
    "emotion_vector": _emotions,
    "goal": _text,
    "mindstate": _text,
    "energy_transfer_coefficient": _unit,
    "resolution_state": lambda v: v in RESOLUTION_STATES,
    "formation_trigger": lambda v: isinstance(v, str),
    "felt_quality": lambda v: isinstance(v, str),
    "emotion_description": lambda v: isinstance(v, str),
    "body_sensation": lambda v: isinstance(v, str),
    "spatial_context": lambda v: isinstance(v, str),
    "sensory_details": lambda v: isinstance(v, Mapping) and all(isinstance(x, str) for x in v.values()),
    "name": _text,
    "node_id": _text,
}

LINK_REQUIRED = (
    "energy", "confidence", "emotion_vector", "goal", "mindstate",
    "energy_transfer_coefficient", "resolution_state",
)
LINK_IMPORTANT = ("formation_trigger", "felt_quality", "emotion_description")
LINK_CONDITIONAL = ("body_sensation", "spatial_context", "sensory_details")

NODE_REQUIRED = ("node_id", "name", "energy", "confidence", "resolution_state")
NODE_IMPORTANT = ("emotion_vector", "goal", "mindstate", "formation_trigger", "felt_quality", "emotion_description")
NODE_CONDITIONAL = LINK_CONDITIONAL


def validate_field_type(field_name: str, value: Any) -> bool:
    """Whether ``value`` is a valid value for ``field_name`` (unknown fields pass)."""
    spec = FIELD_SPECS.get(field_name)
    if spec is None:
        return True
    try:
        return bool(spec(value))
    except Exception:
        return False


def validate_metadata(
    data: Mapping[str, Any],
    required: Sequence[str],
    important: Sequence[str],
    conditional: Sequence[str],
) -> ValidationResult:
    """Validate ``data`` against one set of tiers (the spec's algorithm), in one pass over the listed fields."""
    errors: list[str] = []
    warnings: list[str] = []
    present = 0
    for tier, fields in (("REQUIRED", required), ("IMPORTANT", important), ("CONDITIONAL", conditional)):
        for field in fields:
            value = data.get(field)
            if value is None:
                if tier == "REQUIRED":
                    errors.append(f"REQUIRED field missing: {field}")
                elif tier == "IMPORTANT":
                    warnings.append(_missing_important(field))
                continue
            present += 1
            if not validate_field_type(field, value):
                errors.append(f"{tier} field invalid: {field} (got {value!r})")
    listed = len(required) + len(important) + len(conditional)
    return trusted_model(ValidationResult, {
        "valid": not errors,
        "errors": errors,
        "warnings": warnings,
        "metadata_completeness": present / listed if listed else 1.0,
    })


@functools.lru_cache(maxsize=1024)
def _missing_important(field: str) -> str:
    """The warning for a missing IMPORTANT field, one string object per field: 30,000 relationships without
    ``felt_quality`` pickle one copy of it, not 30,000, when their reports cross from the ingestion worker."""
    return f"IMPORTANT field missing: {field}. Recommended for rich consciousness representation."


def validate_consciousness_link(link_data: Mapping[str, Any]) -> ValidationResult:
    """The spec's ``validate_consciousness_link``: relationship metadata tiers."""
    return validate_metadata(link_data, LINK_REQUIRED, LINK_IMPORTANT, LINK_CONDITIONAL)


def validate_consciousness_node(node_data: Mapping[str, Any]) -> ValidationResult:
    """The same tiers for a memory's own metadata."""
    return validate_metadata(node_data, NODE_REQUIRED, NODE_IMPORTANT, NODE_CONDITIONAL)


def assess_metadata_quality(validation_results: Sequence[ValidationResult]) -> str:
    """The spec's grade: excellent / good / acceptable / poor ("excellent" for none: nothing has bad metadata)."""
    if not validation_results:
        return "excellent"
    # Rounded: ten results at 0.9 must average 0.9, not 0.9000000000000001
    # (which would pass "> 0.9" and grade excellent).
    avg_completeness = round(sum(r.metadata_completeness for r in validation_results) / len(validation_results), 9)
    error_rate = round(sum(1 for r in validation_results if not r.valid) / len(validation_results), 9)
    if avg_completeness > 0.9 and error_rate == 0:
        return "excellent"
    if avg_completeness > 0.75 and error_rate < 0.1:
        return "good"
    if avg_completeness > 0.6 and error_rate < 0.25:
        return "acceptable"
    return "poor"
