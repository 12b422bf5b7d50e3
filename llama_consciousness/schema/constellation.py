"""The memory constellation of spec 004: an answer with its context (SUPPORTS) and its exceptions (CONTRADICTS)."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from .common import LevelName

__all__ = ["ConstellationMember", "ConstellationRole", "MemoryConstellation"]

ConstellationRole = Literal["direct_answer", "context", "exception"]


class ConstellationMember(BaseModel):
    """One memory of a constellation: ``score`` None when fetched from the graph for its link to the primary;
    ``link_energy`` / ``link_confidence`` those of that link (None for the primary)."""

    model_config = ConfigDict(extra="forbid")

    node_id: str
    level: Optional[LevelName] = None
    name: str
    score: Optional[float] = None
    role: ConstellationRole
    retrieved: bool = True
    link_energy: Optional[float] = Field(default=None, ge=0.0, le=1.0)
    link_confidence: Optional[float] = Field(default=None, ge=0.0, le=1.0)


class MemoryConstellation(BaseModel):
    """A primary memory, what supports it, what contradicts it, and a one-line synthesis."""

    model_config = ConfigDict(extra="forbid")

    primary: Optional[ConstellationMember] = None
    supporting: list[ConstellationMember] = Field(default_factory=list)
    contradicting: list[ConstellationMember] = Field(default_factory=list)
    synthesis: str = ""
