"""Links between memories, and the spec's three-tier link-metadata model.

Consciousness "lives in the links": goal, mindstate, energy and confidence are
mandatory on every relationship so traversal can weigh them.
"""

from __future__ import annotations

import re
from typing import Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ._time import UTCDateTime, utcnow
from .common import CitizenId, EmotionVector, LevelName, ResolutionState
from .memory import NodeId, NonEmptyStr, UnitFloat, _apply_bitemporal_rules

__all__ = ["ConditionalLinkMetadata", "ConsciousnessRelationship", "ImportantLinkMetadata",
           "RELATION_TYPE_PATTERN", "RequiredLinkMetadata"]

# relation_type becomes a Cypher relationship label, which cannot be passed
# as a query parameter; this pattern is what makes interpolating it safe.
RELATION_TYPE_PATTERN = r"^[A-Za-z][A-Za-z0-9_]{0,63}$"
_RELATION_TYPE_RE = re.compile(RELATION_TYPE_PATTERN)


def default_edge_id(source_id: str, relation_type: str, target_id: str) -> str:
    """The id of a relationship given none: one link of a type between two memories."""
    return f"{source_id}|{relation_type}|{target_id}"


class ConsciousnessRelationship(BaseModel):
    """A typed, bitemporal link carrying its own consciousness metadata.

    ``formation_trigger`` is optional (the spec's validation rates it IMPORTANT, not REQUIRED); ``edge_id``
    defaults to ``source|TYPE|target`` so the same link written twice has one identity.
    """

    model_config = ConfigDict(extra="forbid")

    edge_id: Optional[str] = None
    source_id: NodeId
    target_id: NodeId
    relation_type: str

    goal: NonEmptyStr
    mindstate: NonEmptyStr
    energy: UnitFloat
    confidence: UnitFloat
    formation_trigger: Optional[str] = None
    emotion_vector: Optional[EmotionVector] = None

    energy_transfer_coefficient: UnitFloat = 0.5
    resolution_state: ResolutionState = "in_progress"

    valid_at: Optional[UTCDateTime] = None
    invalid_at: Optional[UTCDateTime] = None
    created_at: UTCDateTime = Field(default_factory=utcnow)
    expired_at: Optional[UTCDateTime] = None

    level: Optional[LevelName] = None
    citizen_id: Optional[CitizenId] = None

    felt_quality: Optional[str] = None
    emotion_description: Optional[str] = None
    body_sensation: Optional[str] = None
    spatial_context: Optional[str] = None
    sensory_details: Optional[dict[str, str]] = None
    metadata_completeness: Optional[UnitFloat] = None

    @field_validator("relation_type")
    @classmethod
    def _check_relation_type(cls, value: str) -> str:
        candidate = value.strip()
        if _RELATION_TYPE_RE.fullmatch(candidate) is None:
            raise ValueError(f"invalid relation_type {value!r}: must match {RELATION_TYPE_PATTERN} "
                             "(a letter, then up to 63 letters, digits or '_')")
        return candidate.upper()

    @model_validator(mode="after")
    def _check_relationship(self) -> "ConsciousnessRelationship":
        _apply_bitemporal_rules(self)
        if self.edge_id is None:
            self.edge_id = default_edge_id(self.source_id, self.relation_type, self.target_id)
        return self


# The three link-metadata models are projections of a raw link dict (the spec allows unknown fields
# "for future extensibility"), so they ignore extras instead of forbidding them.


class RequiredLinkMetadata(BaseModel):
    """Fields without which traversal and ranking cannot work (ERROR if missing)."""

    model_config = ConfigDict(extra="ignore")

    energy: float = Field(ge=0.0, le=1.0)
    confidence: float = Field(ge=0.0, le=1.0)
    emotion_vector: EmotionVector
    goal: str = Field(min_length=1)
    mindstate: str = Field(min_length=1)
    energy_transfer_coefficient: float = Field(ge=0.0, le=1.0)
    resolution_state: ResolutionState


class ImportantLinkMetadata(BaseModel):
    """Fields that make a link rich but not usable-or-not (WARNING if missing)."""

    model_config = ConfigDict(extra="ignore")

    formation_trigger: Optional[str] = None
    felt_quality: Optional[str] = None
    emotion_description: Optional[str] = None


class ConditionalLinkMetadata(BaseModel):
    """Embodiment-specific fields, validated only when present."""

    model_config = ConfigDict(extra="ignore")

    body_sensation: Optional[str] = None
    spatial_context: Optional[str] = None
    sensory_details: Optional[dict[str, str]] = None
