"""Pydantic models shared by ingestion, storage and retrieval: every layer validates the same contract."""

from .constellation import ConstellationMember, ConstellationRole, MemoryConstellation
from ._time import UTCDateTime, to_utc, utcnow
from .common import (
    CITIZEN_ID_PATTERN,
    MAX_QUERY_CHARS,
    MAX_RESULTS_PER_LEVEL,
    CitizenId,
    EmotionVector,
    InvalidationReason,
    LevelName,
    ResolutionState,
    TemporalMode,
    validate_citizen_id,
)
from .forgetting import ErasureReceipt, ForgetReason, ForgetReport, RestoreReport, Retraction
from .graph import GraphEdge, GraphNode, TraversalGraph, TraversalPath
from .intention import RetrievalIntention, StateBasedRetrieval
from .memory import ConsciousnessNode, MemoryNode
from .relationship import (
    RELATION_TYPE_PATTERN,
    ConditionalLinkMetadata,
    ConsciousnessRelationship,
    ImportantLinkMetadata,
    RequiredLinkMetadata,
)
from .stream import (
    ACTIVATION_TIERS,
    LEVEL_KEYS,
    ConsciousnessLevelResults,
    ConsciousnessStream,
    ConsciousnessSummary,
    TemporalDissonance,
)
from .validation import MetadataValidationReport, QualityGrade, ValidationResult

__all__ = [
    "ACTIVATION_TIERS",
    "CITIZEN_ID_PATTERN",
    "CitizenId",
    "ConditionalLinkMetadata",
    "ConsciousnessLevelResults",
    "ConsciousnessNode",
    "ConsciousnessRelationship",
    "ConsciousnessStream",
    "ConsciousnessSummary",
    "ConstellationMember",
    "ConstellationRole",
    "EmotionVector",
    "ErasureReceipt",
    "ForgetReason",
    "ForgetReport",
    "GraphEdge",
    "GraphNode",
    "ImportantLinkMetadata",
    "InvalidationReason",
    "LEVEL_KEYS",
    "LevelName",
    "MAX_QUERY_CHARS",
    "MAX_RESULTS_PER_LEVEL",
    "MemoryConstellation",
    "MemoryNode",
    "MetadataValidationReport",
    "RestoreReport",
    "Retraction",
    "QualityGrade",
    "RELATION_TYPE_PATTERN",
    "RequiredLinkMetadata",
    "ResolutionState",
    "RetrievalIntention",
    "StateBasedRetrieval",
    "TemporalDissonance",
    "TemporalMode",
    "TraversalGraph",
    "TraversalPath",
    "UTCDateTime",
    "ValidationResult",
    "to_utc",
    "utcnow",
    "validate_citizen_id",
]
