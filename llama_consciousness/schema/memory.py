"""Stored memory nodes: ``MemoryNode`` as written, ``ConsciousnessNode`` the same record as retrieved (with its
source and relevance), one class so that the read path cannot drift from the write path."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any, Optional

from pydantic import (BaseModel, ConfigDict, Field, StringConstraints, ValidationInfo, field_validator,
                      model_validator)

from ._time import UTCDateTime, utcnow
from .trusted import trusted_model
from .forgetting import ForgetReason, Retraction
from .common import (MAX_LIST_ITEMS, CitizenId, EmotionVector, InvalidationReason, LevelName, ResolutionState,
                     SupersessionSource, check_order, check_vector)

__all__ = ["ConsciousnessNode", "MemoryNode"]

NodeId = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=256)]
NonEmptyStr = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
UnitFloat = Annotated[float, Field(ge=0.0, le=1.0)]
# A memory's goal, outer whitespace stripped: FalkorDB's range index on ``goal`` trims what it indexes, so a
# goal with outer whitespace would be invisible to goal matching (goals stored before this rule keep theirs).
GoalText = Annotated[str, StringConstraints(strip_whitespace=True)]


def _apply_bitemporal_rules(model: Any) -> None:
    """``valid_at`` defaults to ``created_at`` (a fact recorded without a validity start is true from when we
    learned it); inverted intervals are refused."""
    if model.valid_at is None:
        model.valid_at = model.created_at
    check_order(model, "valid_at", "invalid_at")
    check_order(model, "created_at", "expired_at")


class MemoryNode(BaseModel):
    """A memory as written: bitemporal (valid/invalid = world time, created/expired = record time) so that
    beliefs can be superseded without being forgotten; N1 memories are personal and name their citizen."""

    model_config = ConfigDict(extra="forbid")

    node_id: NodeId
    # Set by the injection guard: the text reaches an LLM only marked as untrusted.  Placed first so that, in
    # a retrieved node's LLM text, it comes before the memory's words (hidden there while False).
    injection_suspected: bool = False
    level: LevelName
    citizen_id: Optional[CitizenId] = None
    node_type: str = "Memory"
    name: NonEmptyStr
    description: str = ""

    valid_at: Optional[UTCDateTime] = None
    invalid_at: Optional[UTCDateTime] = None
    created_at: UTCDateTime = Field(default_factory=utcnow)
    expired_at: Optional[UTCDateTime] = None

    invalidation_reason: Optional[InvalidationReason] = None
    correction_pattern_id: Optional[str] = None
    discovery_energy: Optional[UnitFloat] = None

    energy: UnitFloat
    confidence: UnitFloat
    emotion_vector: Optional[EmotionVector] = None
    felt_quality: Optional[str] = None
    body_sensation: Optional[str] = None
    goal: Optional[GoalText] = None
    mindstate: Optional[str] = None
    formation_trigger: Optional[str] = None
    emotion_description: Optional[str] = None
    spatial_context: Optional[str] = None
    sensory_details: Optional[dict[str, str]] = None

    resolution_state: ResolutionState = "in_progress"
    supersedes: Optional[str] = None
    # Why this version replaces ``supersedes`` (absent: inferred by the writer).
    supersede_reason: Optional[InvalidationReason] = None
    # Set by the store when a newer version expires this one; read-only.
    superseded_by: Optional[str] = None
    # Set by the store with ``superseded_by`` (or ``possibly_superseded_by``): what decided it, how sure it was.
    supersession_source: Optional[SupersessionSource] = None
    supersession_confidence: Optional[UnitFloat] = None
    # Set by the store: a later memory that may replace this one (a POSSIBLY_SUPERSEDES link from it); nothing
    # expired, retrieval ranks the later one first.  Read-only.
    possibly_superseded_by: Optional[str] = None
    # Set by ``memory.unsupersede``: the newer memory whose supersession of this one was taken back, and why.
    unsuperseded_from: Optional[str] = None
    unsupersede_reason: Optional[str] = None
    # Set by ``memory.forget`` (read-only): when the memory stopped being believed, why, and who asked; a
    # restore clears them.  ``retractions`` keeps every forget and restore, in order.
    forgotten_at: Optional[UTCDateTime] = None
    forgotten_reason: Optional[ForgetReason] = None
    forgotten_by: Optional[str] = None
    retractions: list[Retraction] = Field(default_factory=list)
    # Stored for audit but never retrieved (e.g. a suspected prompt injection).
    quarantined: bool = False
    # An entity made from a name mentioned in memories: a hub traversal walks through, not an answer.
    is_entity: bool = False

    concepts: list[str] = Field(default_factory=list)
    surfaces_when: list[str] = Field(default_factory=list)
    authority_score: Optional[UnitFloat] = None  # 004: importance x usage x freshness
    metadata_completeness: Optional[UnitFloat] = None

    extra: dict[str, Any] = Field(default_factory=dict)
    embedding: Optional[list[float]] = Field(default=None, repr=False)

    @field_validator("extra")
    @classmethod
    def _check_extra_is_json(cls, value: dict[str, Any]) -> dict[str, Any]:
        # Stored as a JSON property; fail here rather than deep inside a driver.
        for key, item in value.items():
            try:
                json.dumps(item, allow_nan=False)
            except (TypeError, ValueError) as exc:
                what = type(item).__name__
                raise ValueError(f"extra[{key!r}] is not JSON-serialisable ({what}): {exc}") from None
        return value

    @field_validator("embedding")
    @classmethod
    def _check_embedding(cls, value: Optional[list[float]]) -> Optional[list[float]]:
        # A single NaN poisons every cosine distance computed against it.
        return None if value is None else check_vector(value)

    @field_validator("concepts", "surfaces_when", "sensory_details")
    @classmethod
    def _check_collection_size(cls, value: Any, info: ValidationInfo) -> Any:
        if value is not None and len(value) > MAX_LIST_ITEMS:
            raise ValueError(f"{info.field_name} has {len(value)} items; at most {MAX_LIST_ITEMS} allowed")
        return value

    @model_validator(mode="after")
    def _check_node(self) -> "MemoryNode":
        if self.level == "N1" and self.citizen_id is None:
            raise ValueError("citizen_id is required for level 'N1' (personal memories belong to one citizen)")
        _apply_bitemporal_rules(self)
        return self


class ConsciousnessNode(MemoryNode):
    """A retrieved memory plus provenance and relevance (``level`` optional: a channel may not know it)."""

    level: Optional[LevelName] = None

    retrieval_source: str
    relevance_score: float
    # A later memory may replace it: the stored ``possibly_superseded_by`` of a write-time judgement, or, with
    # ``possibly_outdated_since`` (the later memory's time), a read-time one (``retrievers.base.
    # later_versions_first``: a memory retrieved with it gives what the question asks another value; nothing
    # stored says so).
    possibly_outdated_by: Optional[str] = None
    possibly_outdated_since: Optional[UTCDateTime] = None


_RETRIEVED_FIELDS = frozenset(ConsciousnessNode.model_fields)


def retrieved_node(node: MemoryNode, source: str, score: float, outdated_by: str | None = None,
                   outdated_since: datetime | None = None) -> ConsciousnessNode:
    """A stored memory as the spec's retrieved node (without its embedding), not validated a second time:
    ``ConsciousnessNode`` is the valid ``MemoryNode`` plus the fields set here."""
    data = dict(node.__dict__)
    data["embedding"] = None
    if outdated_by is not None or "possibly_outdated_by" not in data:
        data["possibly_outdated_by"] = outdated_by
        data["possibly_outdated_since"] = outdated_since
    if type(node) not in (MemoryNode, ConsciousnessNode):  # a subclass may carry more: validate
        data.update(retrieval_source=source, relevance_score=score)
        return ConsciousnessNode.model_validate({k: v for k, v in data.items() if k in _RETRIEVED_FIELDS})
    data["retrieval_source"] = str(source)
    data["relevance_score"] = float(score)
    return trusted_model(ConsciousnessNode, data)
