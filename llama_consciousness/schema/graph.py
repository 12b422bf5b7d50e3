"""The traversal graph returned with a consciousness stream: the subgraph connecting what was retrieved and
the likely paths through it (thinking is traversal)."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from ._time import UTCDateTime
from .common import EmotionVector, ResolutionState

__all__ = ["GraphEdge", "GraphNode", "TraversalGraph", "TraversalPath"]


class GraphNode(BaseModel):
    """A node with its activation in this retrieval, not just its stored state."""

    model_config = ConfigDict(extra="forbid")

    node_id: str
    node_type: str
    content: str

    activation_score: float = Field(ge=0.0, le=1.0)
    activation_tier: Literal["focus", "peripheral", "background"]

    energy: float = Field(ge=0.0, le=1.0)
    confidence: float = Field(ge=0.0, le=1.0)
    emotion_vector: Optional[EmotionVector] = None

    valid_at: UTCDateTime
    invalid_at: Optional[UTCDateTime] = None
    created_at: UTCDateTime
    expired_at: Optional[UTCDateTime] = None


class GraphEdge(BaseModel):
    """A link with its metadata and how likely it is to be followed now."""

    model_config = ConfigDict(extra="forbid")

    edge_id: Optional[str] = None
    source_id: str
    target_id: str
    relation_type: str

    goal: str
    mindstate: str
    energy: float = Field(ge=0.0, le=1.0)
    confidence: float = Field(ge=0.0, le=1.0)
    emotion_vector: Optional[EmotionVector] = None

    energy_transfer_coefficient: float = Field(ge=0.0, le=1.0)
    resolution_state: ResolutionState

    traversal_weight: float = Field(ge=0.0, le=1.0)


class TraversalPath(BaseModel):
    """A likely thought progression, scored so the Mind can prefer natural ones."""

    model_config = ConfigDict(extra="forbid")

    path_id: str
    path_nodes: list[str]
    path_edges: list[str]

    total_activation: float
    semantic_coherence: float = Field(ge=0.0, le=1.0)
    emotional_consistency: float = Field(ge=0.0, le=1.0)

    path_narrative: str

    traversal_probability: float = Field(ge=0.0, le=1.0)


class TraversalGraph(BaseModel):
    """How retrieved memories connect: structure of thought, not just content."""

    model_config = ConfigDict(extra="forbid")

    nodes: list[GraphNode]
    edges: list[GraphEdge]

    suggested_paths: list[TraversalPath] = Field(default_factory=list)
    hub_nodes: list[str] = Field(default_factory=list)
    central_themes: list[str] = Field(default_factory=list)

    node_count: int = Field(ge=0)
    edge_count: int = Field(ge=0)
    path_count: int = Field(ge=0)
    graph_density: float = Field(ge=0.0, le=1.0)
