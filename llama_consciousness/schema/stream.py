"""The consciousness stream: everything one retrieval hands back to the Mind, per level (the Mind weighs
"what I remember" differently from "what the org knows")."""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from ._time import UTCDateTime, utcnow
from .common import EmotionVector, check_order
from .constellation import MemoryConstellation
from .graph import TraversalGraph
from .memory import ConsciousnessNode
from .relationship import ConsciousnessRelationship
from .validation import MetadataValidationReport

__all__ = ["ACTIVATION_TIERS", "ConsciousnessLevelResults", "ConsciousnessStream", "ConsciousnessSummary",
           "LEVEL_KEYS", "TemporalDissonance"]

LEVEL_KEYS: dict[str, str] = {"N1": "n1_personal", "N2": "n2_collective", "N3": "n3_ecosystem"}
ACTIVATION_TIERS: tuple[str, ...] = ("focus", "peripheral", "background")


class ConsciousnessLevelResults(BaseModel):
    """One level's results per channel; ``error`` records a failed channel (a partial answer, visibly so)."""

    model_config = ConfigDict(extra="forbid")

    vector_results: list[ConsciousnessNode] = Field(default_factory=list)
    graph_results: list[ConsciousnessNode] = Field(default_factory=list)
    keyword_results: list[ConsciousnessNode] = Field(default_factory=list)
    relationships: list[ConsciousnessRelationship] = Field(default_factory=list)
    error: Optional[str] = None


class TemporalDissonance(BaseModel):
    """A corrected belief, surfaced because being wrong is a learning moment."""

    model_config = ConfigDict(extra="forbid")

    node_id: str
    node_name: str
    original_belief: str
    corrected_belief: str

    dissonance_type: Literal["reality_changed", "discovered_false"]
    correction_trigger: str

    discovery_energy: float = Field(ge=0.0, le=1.0)
    discovery_emotions: Optional[EmotionVector] = None

    belief_held_from: UTCDateTime
    belief_held_until: UTCDateTime
    corrected_at: UTCDateTime

    # What decided it ("explicit": ids; "offline_judge" / "llm_judge": the memories' words) and whether the
    # older belief was expired (False: a POSSIBLY_SUPERSEDES pair, the older one still current).
    supersession_source: Optional[str] = None
    confirmed: bool = True

    @model_validator(mode="after")
    def _check_interval(self) -> "TemporalDissonance":
        check_order(self, "belief_held_from", "belief_held_until")
        return self


class ConsciousnessSummary(BaseModel):
    """Aggregate state of the retrieved context, for a quick orientation."""

    model_config = ConfigDict(extra="forbid")

    dominant_energy: float = Field(ge=0.0, le=1.0)
    emotional_themes: list[str] = Field(default_factory=list)
    confidence_average: float = Field(ge=0.0, le=1.0)

    earliest_memory: UTCDateTime
    latest_memory: UTCDateTime

    n1_result_count: int = Field(ge=0)
    n2_result_count: int = Field(ge=0)
    n3_result_count: int = Field(ge=0)

    total_results: int = Field(ge=0)
    active_vs_historical_ratio: float = Field(ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _check_span(self) -> "ConsciousnessSummary":
        check_order(self, "earliest_memory", "latest_memory")
        return self


class ConsciousnessStream(BaseModel):
    """The complete answer to one intention, organised the way attention works.

    Keys of ``levels`` and ``activation_tiers`` are checked: a typo would otherwise read as "no results".
    """

    model_config = ConfigDict(extra="forbid")

    intention_id: str
    retrieved_at: UTCDateTime = Field(default_factory=utcnow)

    levels: dict[str, ConsciousnessLevelResults]
    activation_tiers: dict[str, list[ConsciousnessNode]] = Field(default_factory=dict)
    traversal_graph: Optional[TraversalGraph] = None

    energy_feedback_potential: float = Field(default=0.0, ge=0.0, le=1.0)
    temporal_dissonances: list[TemporalDissonance] = Field(default_factory=list)

    consciousness_summary: ConsciousnessSummary
    metadata_validation: Optional[MetadataValidationReport] = None
    # spec 004: the top memory with what supports and contradicts it
    constellation: Optional[MemoryConstellation] = None

    retrieval_latency_ms: Optional[int] = Field(default=None, ge=0)
    query_count: int = Field(default=6, ge=0)

    @field_validator("levels", "activation_tiers")
    @classmethod
    def _check_keys(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        allowed = tuple(LEVEL_KEYS.values()) if info.field_name == "levels" else ACTIVATION_TIERS
        for key in value:
            if key not in allowed:
                raise ValueError(f"{info.field_name} key {key!r} is not one of {', '.join(map(repr, allowed))}")
        return value
