"""Retention: how long memories are kept, per level and node type, applied by ``memory.apply_retention``.

A rule says when memories of a level (and of some node types) are forgotten, by age, and when forgotten
ones are erased, by time since they were forgotten, e.g. chat messages of every citizen forgotten after 90
days and erased 30 days later::

    RetentionPolicy(rules=[RetentionRule(level="N1", node_types=["Memory"], forget_after=timedelta(days=90),
                                         erase_after=timedelta(days=30))])

or the same as JSON (durations in ISO 8601 or seconds), for the command line::

    {"rules": [{"level": "N1", "node_types": ["Memory"], "forget_after": "P90D", "erase_after": "P30D"}]}

The erase step erases every forgotten memory of the rule's kind forgotten long enough ago, whatever the
reason it was forgotten for: a person's own request is even more reason to let it go for good.  Entities
(names extracted from memories) are never selected; an erase removes those left without a memory.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator

from llama_consciousness.erasing import rewrite_files
from llama_consciousness.forgetting import MemorySelector
from llama_consciousness.schema import ErasureReceipt, ForgetReason
from llama_consciousness.storage.reader import MemoryKeeper
from llama_consciousness.schema._time import utcnow
from llama_consciousness.schema.common import LevelName


RETENTION_BY = "retention policy"
"""Who forgets, in the memories' record, when a policy does."""


class RetentionRule(BaseModel):
    """When memories of ``level`` (of ``node_types``, or of every type) are forgotten and erased."""

    model_config = ConfigDict(extra="forbid")

    level: LevelName
    node_types: Optional[list[str]] = Field(default=None, min_length=1)
    forget_after: Optional[timedelta] = Field(default=None, description="age (since recorded) to forget at")
    erase_after: Optional[timedelta] = Field(default=None, description="time since forgotten to erase at")

    @model_validator(mode="after")
    def _says_something(self) -> RetentionRule:
        if self.forget_after is None and self.erase_after is None:
            raise ValueError("a retention rule needs forget_after, erase_after or both")
        for name in ("forget_after", "erase_after"):
            value = getattr(self, name)
            if value is not None and value <= timedelta(0):
                raise ValueError(f"{name} must be positive, got {value}")
        return self


class RetentionPolicy(BaseModel):
    """The rules applied together (a memory selected by two rules is forgotten or erased once)."""

    model_config = ConfigDict(extra="forbid")

    rules: list[RetentionRule] = Field(min_length=1)

    @classmethod
    def from_file(cls, path: str | Path) -> RetentionPolicy:
        """A policy from a JSON file (``{"rules": [...]}``); ``ValueError`` saying what is wrong in it."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ValueError(f"cannot read the retention policy {path}: {exc}") from None
        return cls.model_validate(data)


class RetentionStep(BaseModel):
    """What a policy does (or, in a dry run, would do) in one level graph."""

    graph: str
    level: str
    citizen_id: Optional[str] = None
    forget: list[str] = Field(default_factory=list, description="memories old enough to forget")
    erase: list[str] = Field(default_factory=list, description="forgotten memories old enough to erase")


class RetentionReport(BaseModel):
    """The steps of one application of a policy, and whether they were carried out."""

    at: datetime
    dry_run: bool
    steps: list[RetentionStep] = Field(default_factory=list)
    receipts: list[ErasureReceipt] = Field(default_factory=list, description="the erasure receipts (not in a dry run)")

    @property
    def forgotten(self) -> int:
        """How many memories the policy's steps forget (or would, in a dry run)."""
        return sum(len(s.forget) for s in self.steps)

    @property
    def erased(self) -> int:
        """How many memories the policy's steps erase (or would, in a dry run)."""
        return sum(len(s.erase) for s in self.steps)


def _graphs(memory: MemoryKeeper, level: str) -> list[str | None]:
    """The citizens of ``level``'s graphs (None for N2 and N3)."""
    return list(memory.citizens()) if level == "N1" else [None]


def apply_retention(memory: MemoryKeeper, policy: RetentionPolicy, *, dry_run: bool = False,
                    now: datetime | None = None) -> RetentionReport:
    """See ``ConsciousnessMemory.apply_retention``."""
    policy = RetentionPolicy.model_validate(policy)
    now = utcnow() if now is None else now
    steps: dict[tuple[str, str | None], RetentionStep] = {}
    for rule in policy.rules:
        for citizen in _graphs(memory, rule.level):
            store = memory.level(rule.level, citizen)
            if not store.exists():
                continue
            step = steps.setdefault((rule.level, citizen), RetentionStep(graph=store.plans.graph, level=rule.level,
                                                                         citizen_id=citizen))
            if rule.forget_after is not None:
                chosen = store.run(MemorySelector(node_types=rule.node_types,
                                                  created_before=now - rule.forget_after).plan())
                step.forget = sorted(set(step.forget) | set(chosen))
            if rule.erase_after is not None:
                chosen = store.run(MemorySelector(node_types=rule.node_types,
                                                  forgotten_before=now - rule.erase_after).plan())
                step.erase = sorted(set(step.erase) | set(chosen))
    report = RetentionReport(at=now, dry_run=dry_run, steps=[s for s in steps.values() if s.forget or s.erase])
    if dry_run:
        return report
    for step in report.steps:
        if step.forget:
            memory.forget(step.forget, step.level, step.citizen_id, reason=ForgetReason.RETENTION, by=RETENTION_BY)
        if step.erase:
            report.receipts.append(memory.erase(step.erase, step.level, step.citizen_id, reason="retention",
                                                wait=False))
    erased = [receipt.graphs[0] for receipt in report.receipts if receipt.memories]
    if erased:  # the files once for every graph, not once per graph
        rewrite_files(memory, erased)
        for receipt in report.receipts:
            receipt.files_rewritten = True
    return report
