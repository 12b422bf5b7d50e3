"""The memory constellation of spec 004: an answer with its context and its exceptions.

Search "returns structured results, not flat lists": the memory that best
answers (``primary``, role ``direct_answer``), the memories linked to it by
SUPPORTS (``supporting``, role ``context``) and by CONTRADICTS
(``contradicting``, role ``exception``), and a one-line ``synthesis``:
``"Primary: X | Supported by: Y, Z | Note: Conflicting info in W"``.
"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from .common import LevelName

__all__ = ["ConstellationMember", "ConstellationRole", "MemoryConstellation"]

ConstellationRole = Literal["direct_answer", "context", "exception"]


class ConstellationMember(BaseModel):
    """One memory of a constellation.

    ``score`` is the retrieval score for a retrieved memory and None for a
    memory fetched from the graph because it is linked to the primary
    (``retrieved`` tells which).  ``link_energy`` / ``link_confidence`` are
    those of the SUPPORTS / CONTRADICTS link to the primary (None for the
    primary itself).
    """

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
