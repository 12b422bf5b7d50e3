"""What an ingestion did: every transform that rejects, skips or warns records it here, not in a log,
so that ``llama-consciousness ingest`` ends with one report and a program can assert on it."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from llama_index.core.schema import BaseNode, TransformComponent
from pydantic import PrivateAttr


@dataclass
class Rejection:
    """An item that was not written, and why."""

    item_id: str
    stage: str
    reasons: list[str]
    line: int | None = None


@dataclass
class IngestReport:
    """Counts and reasons of one ingestion run."""

    inserted: int = 0
    updated: int = 0
    unchanged: int = 0
    relationships_inserted: int = 0
    relationships_updated: int = 0
    relationships_unchanged: int = 0
    superseded: int = 0
    duplicates: int = 0
    entities: int = 0
    updates: int = 0  # knowledge updates found by a judge (the older memory expires)
    possible_updates: int = 0  # pairs a judge is unsure of (linked, nothing expires)
    judge_errors: int = 0  # pairs left undecided because the update judge failed (the memories are stored)
    rejected: list[Rejection] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)

    def reject(self, item_id: str, stage: str, reasons: list[str], line: int | None = None) -> None:
        self.rejected.append(Rejection(item_id, stage, list(reasons), line))

    def warn(self, item_id: str, message: str) -> None:
        self.warnings.append((item_id, message))

    def merge(self, other: IngestReport) -> IngestReport:
        for name in (f.name for f in fields(self)):
            total = getattr(self, name)
            total += getattr(other, name)  # counts added, lists extended in place
            setattr(self, name, total)
        return self

    def summary(self) -> str:
        """One paragraph a person can read at the end of a run."""
        lines = [
            f"memories: {self.inserted} inserted, {self.updated} updated, {self.unchanged} unchanged, "
            f"{self.superseded} superseded, {self.duplicates} duplicates",
            f"knowledge updates: {self.updates} found, {self.possible_updates} possible"
            + (f", {self.judge_errors} left undecided (judge errors)" if self.judge_errors else ""),
            f"relationships: {self.relationships_inserted} inserted, {self.relationships_updated} updated, "
            f"{self.relationships_unchanged} unchanged; entities linked: {self.entities}",
            f"rejected: {len(self.rejected)}; warnings: {len(self.warnings)}",
        ]
        for r in self.rejected[:20]:
            where = f" (line {r.line})" if r.line else ""
            lines.append(f"  rejected {r.item_id}{where} at {r.stage}: {'; '.join(r.reasons)}")
        if len(self.rejected) > 20:
            lines.append(f"  ... and {len(self.rejected) - 20} more rejected")
        return "\n".join(lines)


class ReportingTransform(TransformComponent):
    """A transform whose ``report`` records what its last call rejected, skipped or warned about; async
    runs the sync path in a thread, so the event loop stays free."""

    _report: IngestReport = PrivateAttr(default_factory=IngestReport)

    @property
    def report(self) -> IngestReport:
        return self._report

    async def acall(self, nodes: Sequence[BaseNode], **kwargs: Any) -> Sequence[BaseNode]:
        return await asyncio.to_thread(self.__call__, nodes, **kwargs)
