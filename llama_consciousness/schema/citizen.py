"""A citizen's felt state over time, and the reports of what retrieval feedback and use changed.

A citizen's state (energy, emotions, goal, mindstate: the spec's fields of a
memory, felt by the citizen now) is kept in versions.  Valid time says when a
state held (``valid_at``, until the next version's, which reads back as
``invalid_at``); record time says when it was written (``created_at``) and, for
a version a correction replaced, when it stopped being believed
(``expired_at``).  Nothing is deleted: an old state stays readable as of then.
"""

from __future__ import annotations

from typing import Literal, Optional
from uuid import uuid4

from pydantic import BaseModel, ConfigDict, Field

from ._time import UTCDateTime, utcnow
from .common import CitizenId, EmotionVector, LevelName
from .intention import StateBasedRetrieval
from .memory import GoalText

StateSource = Literal["update", "feedback"]


class CitizenState(BaseModel):
    """One version of how a citizen feels: what ``StateBasedRetriever`` asks with when a call gives no state."""

    model_config = ConfigDict(extra="forbid")

    citizen_id: CitizenId
    energy: float = Field(ge=0.0, le=1.0)
    emotion_vector: EmotionVector = Field(default_factory=dict)
    goal: Optional[GoalText] = None
    mindstate: Optional[str] = None

    valid_at: UTCDateTime = Field(default_factory=utcnow, description="from when the citizen felt this")
    invalid_at: Optional[UTCDateTime] = Field(default=None, description="when the next version took over (read)")
    created_at: UTCDateTime = Field(default_factory=utcnow, description="when this version was recorded")
    expired_at: Optional[UTCDateTime] = Field(default=None, description="when a correction replaced it")

    version_id: str = Field(default_factory=lambda: "cs_" + uuid4().hex)
    source: StateSource = "update"
    reason: Optional[str] = None
    stream_id: Optional[str] = Field(default=None, description="the retrieval whose feedback made this version")

    def to_retrieval(self, query_mode: str = "find_related_unresolved", **fields: object) -> StateBasedRetrieval:
        """This state as a state-based retrieval request (``fields`` override, e.g. ``temporal_scope``)."""
        return StateBasedRetrieval(current_energy=self.energy, current_emotions=dict(self.emotion_vector),
                                   current_goal=self.goal, query_mode=query_mode, citizen_id=self.citizen_id,
                                   **fields)


SkipReason = Literal["superseded", "deleted", "already_recorded"]


class SkippedMemory(BaseModel):
    """A memory that feedback or reinforcement left alone, and why."""

    model_config = ConfigDict(extra="forbid")

    level: LevelName
    node_id: str
    reason: SkipReason


class FeedbackReport(BaseModel):
    """What ``memory.apply_feedback`` did to a citizen's stored energy."""

    model_config = ConfigDict(extra="forbid")

    citizen_id: CitizenId
    stream_id: str
    applied: bool
    energy_before: float
    energy_after: float
    potential: float = Field(description="the size-independent potential applied (scoring.energy.feedback_potential)")
    spec_potential: float = Field(description="the spec's sum-over-150 potential, as the stream reports it")
    counted: int = Field(description="retrieved memories and relationships that counted")
    skipped: list[SkippedMemory] = Field(default_factory=list)
    started_from_default: bool = Field(default=False, description="no state was stored: the spec's 0.5 was used")
    message: str = ""


class UseReport(BaseModel):
    """What ``memory.record_use`` wrote for one retrieval (``use_id``: the retrieval's id)."""

    model_config = ConfigDict(extra="forbid")

    use_id: str
    counted: list[tuple[LevelName, str]] = Field(default_factory=list)
    skipped: list[SkippedMemory] = Field(default_factory=list)
    co_activated_links: int = 0
    errors: list[str] = Field(default_factory=list)

    @property
    def message(self) -> str:
        """One line for a log: the use, how many memories were reinforced and links co-activated, what was
        skipped and why, and any errors."""
        parts = [f"use {self.use_id}: {len(self.counted)} memories reinforced, "
                 f"{self.co_activated_links} links co-activated"]
        by_reason: dict[str, list[str]] = {}
        for s in self.skipped:
            by_reason.setdefault(s.reason, []).append(f"{s.level}:{s.node_id}")
        parts += [f"{reason}: {', '.join(ids)}" for reason, ids in sorted(by_reason.items())]
        parts += [f"error: {e}" for e in self.errors]
        return "; ".join(parts)
