"""Retrieval requests (Couche 3 -> Couche 2), validated aggressively: a contradictory request (``as_of_time`` in
``current`` mode) would otherwise be silently reinterpreted by the retriever."""

from __future__ import annotations

from typing import Any, Literal, Optional
from uuid import uuid4

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ._time import UTCDateTime, utcnow
from .common import (
    MAX_EMOTIONS,
    MAX_QUERY_CHARS,
    MAX_RESULTS_PER_LEVEL,
    CitizenId,
    EmotionVector,
    LevelName,
    TemporalMode,
    check_temporal_mode,
    check_temporal_request,
)

__all__ = ["RetrievalIntention", "StateBasedRetrieval"]


class RetrievalIntention(BaseModel):
    """A specific "I need context on X" request (ids and provenance default: say what and for whom)."""

    model_config = ConfigDict(extra="forbid")

    query_text: str = Field(description="Natural language description of needed context")

    temporal_mode: TemporalMode = "current"
    as_of_time: Optional[UTCDateTime] = None
    time_range_start: Optional[UTCDateTime] = None
    time_range_end: Optional[UTCDateTime] = None

    query_levels: list[LevelName] = Field(default_factory=lambda: ["N1", "N2", "N3"])

    max_results_per_level: int = Field(default=20, ge=1, le=MAX_RESULTS_PER_LEVEL)

    min_energy: Optional[float] = Field(default=None, ge=0.0, le=1.0)
    min_confidence: Optional[float] = Field(default=None, ge=0.0, le=1.0)
    required_emotions: Optional[list[str]] = None

    citizen_id: CitizenId = Field(description="Which citizen's consciousness to query")

    intention_id: str = Field(default_factory=lambda: "intent_" + uuid4().hex)
    generated_at: UTCDateTime = Field(default_factory=utcnow)
    generated_by: str = "llama_consciousness"

    @field_validator("query_text")
    @classmethod
    def _check_query_text(cls, value: str) -> str:
        text = value.strip()
        if not text:
            raise ValueError("query_text must not be empty or whitespace")
        if not text.isascii():
            # A lone UTF-16 surrogate cannot be tokenized, embedded or sent
            # anywhere: refused here, with where it is, rather than replaced
            # (strict UTF-8 encoding fails on surrogates and on nothing else).
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise ValueError(
                    f"query_text contains a lone surrogate (U+{ord(text[exc.start]):04X}) at character "
                    f"{exc.start + 1}, which is not valid Unicode text; decode the text properly first"
                ) from None
        if len(text) > MAX_QUERY_CHARS:
            raise ValueError(f"query_text has {len(text)} characters; at most {MAX_QUERY_CHARS} allowed")
        return text

    @field_validator("temporal_mode", mode="before")
    @classmethod
    def _check_temporal_mode(cls, value: Any) -> Any:
        return check_temporal_mode(value)

    @field_validator("query_levels")
    @classmethod
    def _dedupe_levels(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("query_levels must name at least one of 'N1', 'N2', 'N3'")
        return list(dict.fromkeys(value))

    @field_validator("required_emotions")
    @classmethod
    def _check_required_emotions(cls, value: Optional[list[str]]) -> Optional[list[str]]:
        if value is None:
            return None
        if len(value) > MAX_EMOTIONS:
            raise ValueError(f"required_emotions has {len(value)} names; at most {MAX_EMOTIONS} allowed")
        cleaned = []
        for emotion in value:
            name = emotion.strip()
            if not name:
                raise ValueError(f"required_emotions must contain non-empty names, got {emotion!r}")
            cleaned.append(name)
        return cleaned

    @model_validator(mode="after")
    def _check_temporal_consistency(self) -> "RetrievalIntention":
        check_temporal_request(self.temporal_mode, self.as_of_time, self.time_range_start, self.time_range_end)
        return self


class StateBasedRetrieval(BaseModel):
    """A "what matters given how I feel right now?" request, when consciousness wakes without a question (S6)."""

    model_config = ConfigDict(extra="forbid")

    current_energy: float = Field(ge=0.0, le=1.0)
    current_emotions: EmotionVector
    current_goal: Optional[str] = None

    query_mode: Literal[
        "find_related_unresolved",
        "find_similar_state",
        "find_what_i_was_doing",
        "find_resolution_patterns",
    ] = "find_related_unresolved"

    include_only_unresolved: bool = True
    temporal_scope: Literal["recent", "all_time"] = "recent"

    citizen_id: CitizenId

    state_id: str = Field(default_factory=lambda: "state_" + uuid4().hex)
    generated_at: UTCDateTime = Field(default_factory=utcnow)
