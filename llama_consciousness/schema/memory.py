"""Stored memory nodes.

``MemoryNode`` is what ingestion writes; ``ConsciousnessNode`` is the same
record as seen by a retriever, with where-it-came-from and how-relevant
added.  Sharing one class keeps the read path from drifting away from the
write path.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Optional

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationInfo,
    field_validator,
    model_validator,
)

from ._time import UTCDateTime, utcnow
from .trusted import trusted_model
from .common import (
    MAX_LIST_ITEMS,
    CitizenId,
    EmotionVector,
    InvalidationReason,
    LevelName,
    ResolutionState,
    check_vector,
)

__all__ = ["ConsciousnessNode", "MemoryNode"]

NodeId = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=256)]
NonEmptyStr = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
UnitFloat = Annotated[float, Field(ge=0.0, le=1.0)]
# A memory's goal, outer whitespace stripped on validation (like ``name``):
# FalkorDB's range index on ``goal`` does not find a string with outer ASCII
# whitespace by ``=`` / ``IN`` (it trims what it indexes), so such a goal would
# be invisible to goal matching, which asks that index.  Goals written before
# this rule keep their whitespace in the store (no migration): read back,
# they validate stripped, but the index still misses them.
GoalText = Annotated[str, StringConstraints(strip_whitespace=True)]


def _apply_bitemporal_rules(model: Any) -> None:
    """Fill ``valid_at`` and enforce interval ordering on a bitemporal model.

    ``valid_at`` defaults to ``created_at`` because a fact recorded without an
    explicit validity start is, by default, true from when we learned it.
    Inverted intervals would make point-in-time queries return nonsense, so
    they are rejected at construction.
    """
    if model.valid_at is None:
        model.valid_at = model.created_at
    if model.invalid_at is not None and model.invalid_at < model.valid_at:
        raise ValueError(
            f"invalid_at ({model.invalid_at.isoformat()}) must be >= "
            f"valid_at ({model.valid_at.isoformat()})"
        )
    if model.expired_at is not None and model.expired_at < model.created_at:
        raise ValueError(
            f"expired_at ({model.expired_at.isoformat()}) must be >= "
            f"created_at ({model.created_at.isoformat()})"
        )


class MemoryNode(BaseModel):
    """A memory as written to the graph and vector stores.

    Bitemporal (valid/invalid = world time, created/expired = record time) so
    that beliefs can be superseded without being forgotten; N1 memories are
    personal and therefore must name their citizen.
    """

    model_config = ConfigDict(extra="forbid")

    node_id: NodeId
    # Set by the injection guard (``flag`` and ``quarantine``): the memory's
    # text looks like a prompt injection and reaches an LLM only marked as
    # untrusted (``render.memory_line``).  Placed first so that, in the LLM
    # text of a retrieved node, it is the first line before the memory's
    # words (the retrievers hide it there while False).  Stored records
    # without it read as False.
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
    # Why this version replaces ``supersedes``; when absent the writer infers
    # it (a later valid_at means reality changed, else the old was false).
    supersede_reason: Optional[InvalidationReason] = None
    # Set by the store when a newer version expires this one; read-only.
    superseded_by: Optional[str] = None
    # Stored for audit but never retrieved (e.g. a suspected prompt injection).
    quarantined: bool = False
    # An entity the writer made from a name mentioned in memories: a hub that
    # graph traversal starts from and walks through, not itself an answer.
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
                raise ValueError(
                    f"extra[{key!r}] is not JSON-serialisable ({type(item).__name__}): {exc}"
                ) from None
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
            raise ValueError(
                "citizen_id is required for level 'N1' (personal memories belong to one citizen)"
            )
        _apply_bitemporal_rules(self)
        return self


class ConsciousnessNode(MemoryNode):
    """A retrieved memory plus provenance and relevance.

    ``level`` is optional here because some retrieval channels (e.g. graph
    traversal across levels) return nodes whose level is not known up front.
    """

    level: Optional[LevelName] = None

    retrieval_source: str
    relevance_score: float


_RETRIEVED_FIELDS = frozenset(ConsciousnessNode.model_fields)


def retrieved_node(node: MemoryNode, source: str, score: float) -> ConsciousnessNode:
    """A stored memory as the spec's retrieved node (without its embedding).

    Built from the fields of the valid model as they are, without a second
    validation: ``node`` passed every check of ``MemoryNode`` already, and
    ``ConsciousnessNode`` is that model plus the two fields set here.
    """
    data = dict(node.__dict__)
    data["embedding"] = None
    if type(node) not in (MemoryNode, ConsciousnessNode):  # a subclass may carry more: validate
        data.update(retrieval_source=source, relevance_score=score)
        return ConsciousnessNode.model_validate({k: v for k, v in data.items() if k in _RETRIEVED_FIELDS})
    data["retrieval_source"] = str(source)
    data["relevance_score"] = float(score)
    return trusted_model(ConsciousnessNode, data)
