"""Metadata-quality reporting: the Mind is told how complete its context's metadata is."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["MetadataValidationReport", "QualityGrade", "ValidationResult"]

QualityGrade = Literal["excellent", "good", "acceptable", "poor"]


class ValidationResult(BaseModel):
    """Outcome for one link: errors block, warnings only degrade."""

    model_config = ConfigDict(extra="forbid")

    valid: bool
    errors: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    metadata_completeness: float = Field(ge=0.0, le=1.0)


class MetadataValidationReport(BaseModel):
    """Aggregate quality over a whole stream, so the Mind can judge trust."""

    model_config = ConfigDict(extra="forbid")

    total_memories: int = Field(ge=0)
    fully_valid_memories: int = Field(ge=0)
    memories_with_warnings: int = Field(ge=0)
    memories_with_errors: int = Field(ge=0)

    average_completeness: float = Field(ge=0.0, le=1.0)
    incomplete_memory_ids: list[str] = Field(default_factory=list)
    quality_grade: QualityGrade
