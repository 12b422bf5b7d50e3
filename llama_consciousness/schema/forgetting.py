"""Taking memories back out: why a memory was forgotten, the record a forget or restore leaves, and what they
report.

Forgetting is a bitemporal retraction: the memory stops being believed from the moment it is forgotten
(its ``expired_at``), so it no longer surfaces in ``current`` mode or in ``point_in_time`` questions about
later moments, while ``full_history`` and the inspector still show it, with who forgot it, when and why.
A restore within the window (30 days by default) makes it believed again exactly as before.  Erasure, which
really removes the text, is another act (``memory.erase``).
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

from ._time import UTCDateTime

__all__ = ["ErasureReceipt", "ForgetReason", "ForgetReport", "RestoreReport", "Retraction"]


class ForgetReason(StrEnum):
    """Why a memory is taken out of what is believed (stored with it, shown by the inspector)."""

    USER_REQUESTED = "user_requested"
    """The person the memory is about (or who said it) asked for it to be forgotten."""
    OBSOLETE = "obsolete"
    """True once, no longer worth recalling (a plan abandoned, a finished task)."""
    INCORRECT = "incorrect"
    """It was never true (a misheard fact, a wrong extraction)."""
    INJECTION = "injection"
    """Text written to steer the model rather than to be remembered."""
    RETENTION = "retention"
    """A retention policy's time for it came (``memory.apply_retention``)."""
    DUPLICATE = "duplicate"
    """Another memory says the same."""
    OTHER = "other"
    """Any other reason; say which in the note."""


class Retraction(BaseModel):
    """One forget or restore of a memory, kept with it (``MemoryNode.retractions``) in the order they happened."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    event: Literal["forgotten", "restored"]
    at: UTCDateTime
    reason: Optional[ForgetReason] = None
    by: Optional[str] = None
    note: Optional[str] = None


class _InGraph(BaseModel):
    """What an act did in one level graph, and the ids it was given that are not there."""

    model_config = ConfigDict(extra="forbid")

    graph: str
    at: datetime
    missing: list[str] = Field(default_factory=list, description="ids with no memory in this graph")


class ForgetReport(_InGraph):
    """What ``memory.forget`` did in one level graph."""

    reason: ForgetReason
    forgotten: list[str] = Field(default_factory=list, description="memories forgotten now")
    already_forgotten: list[str] = Field(default_factory=list, description="left as they were (idempotent)")


class RestoreReport(_InGraph):
    """What ``memory.restore`` did in one level graph."""

    restored: list[str] = Field(default_factory=list, description="memories believed again from now")
    not_forgotten: list[str] = Field(default_factory=list, description="were not forgotten: left as they were")
    too_late: list[str] = Field(default_factory=list, description="forgotten before the restore window")


class ErasureReceipt(BaseModel):
    """What ``memory.erase`` or ``memory.erase_citizen`` removed, for good: counts and ids, never the text.
    Safe to log and to keep as the record that a person's data was erased."""

    model_config = ConfigDict(extra="forbid")

    at: datetime
    reason: str
    citizen_id: Optional[str] = Field(default=None, description="the citizen erased (erase_citizen)")
    graphs: list[str] = Field(default_factory=list, description="the level graphs erased from")
    graphs_deleted: list[str] = Field(default_factory=list, description="whole graphs deleted (a citizen's N1)")
    node_ids: list[str] = Field(default_factory=list, description="memories erased (ids are not text)")
    memories: int = 0
    entities: int = Field(default=0, description="entity memories left without any memory, erased with them")
    links: int = 0
    access_records: int = 0
    uses_touched: int = 0
    vector_rows: int = Field(default=0, description="rows deleted from Postgres (pgvector levels)")
    files_rewritten: bool = Field(default=False, description=(
        "the server's write log and snapshot were rewritten (and Postgres vacuumed) before returning"))
