"""``MetadataQualityPostprocessor``: grade the metadata of what was retrieved.

The spec's "Validation in Retrieval Pipeline": every retrieved memory is
checked with :func:`~llama_consciousness.scoring.validation.validate_consciousness_node`
(REQUIRED fields missing or invalid are errors, IMPORTANT ones missing are
warnings) and the stream carries a :class:`MetadataValidationReport` so the
Mind can judge how far to trust its context.

On each node it writes ``metadata["metadata_completeness"]`` (share of the
listed fields present), ``metadata["metadata_valid"]`` (no errors),
``metadata["metadata_warnings"]`` and ``metadata["metadata_errors"]``
(counts).  With ``drop_invalid`` the memories with errors are removed (the
spec's "only fully-valid memories" request); the report still describes
every memory that was retrieved, dropped ones included.

Validation reads the raw metadata, not a re-built ``MemoryNode``: a model
would fill defaults (``resolution_state="in_progress"``) and hide exactly
the gaps this is meant to show, and it would reject nodes that lack
``energy`` instead of grading them.

Report conventions (the spec leaves them open):

* ``fully_valid_memories``: memories without errors (all REQUIRED fields
  present and valid, the spec's comment); ``fully_valid + with_errors ==
  total``, and ``memories_with_warnings`` overlaps both.
* ``incomplete_memory_ids``: the node ids (LlamaIndex ids, ``"<level>:<node_id>"``
  for the six-way retriever's nodes) of the memories with errors.
* No memories: ``total_memories=0``, ``average_completeness=1.0`` and grade
  ``"excellent"`` (nothing retrieved has bad metadata; the spec's formula
  would divide by zero).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Optional

from llama_index.core.bridge.pydantic import Field
from llama_index.core.schema import NodeWithScore, QueryBundle

from llama_consciousness.postprocessors.base import StepResult, StreamPostprocessor, hide_from_text
from llama_consciousness.schema import MetadataValidationReport, ValidationResult
from llama_consciousness.scoring.validation import (
    NODE_CONDITIONAL,
    NODE_IMPORTANT,
    NODE_REQUIRED,
    assess_metadata_quality,
    validate_consciousness_node,
)

QUALITY_KEYS = ("metadata_completeness", "metadata_valid", "metadata_warnings", "metadata_errors")
_GRADED = tuple(dict.fromkeys(NODE_REQUIRED + NODE_IMPORTANT + NODE_CONDITIONAL))


def validate_retrieved_node(node: NodeWithScore) -> ValidationResult:
    """``validate_consciousness_node`` on the memory a retrieved node carries.

    Only the graded fields are read (the tiers look at nothing else): a
    stream grades a hundred nodes of forty fields each.
    """
    meta = node.node.metadata
    data = {f: meta[f] for f in _GRADED if f in meta}
    if data.get("node_id") is None:
        data["node_id"] = node.node.node_id
    return validate_consciousness_node(data)


def build_validation_report(
    results: Sequence[ValidationResult], ids: Sequence[str]
) -> MetadataValidationReport:
    """The stream's report over ``results`` (``ids[i]`` names ``results[i]``)."""
    if len(results) != len(ids):
        raise ValueError(f"{len(results)} validation results but {len(ids)} ids")
    total = len(results)
    average = sum(r.metadata_completeness for r in results) / total if total else 1.0
    return MetadataValidationReport(
        total_memories=total,
        fully_valid_memories=sum(1 for r in results if r.valid),
        memories_with_warnings=sum(1 for r in results if r.warnings),
        memories_with_errors=sum(1 for r in results if not r.valid),
        average_completeness=min(1.0, max(0.0, average)),
        incomplete_memory_ids=[i for i, r in zip(ids, results) if not r.valid],
        quality_grade=assess_metadata_quality(results),
    )


def annotate(node: NodeWithScore, result: ValidationResult) -> None:
    """Write the node's validation outcome into its metadata."""
    meta = node.node.metadata
    meta["metadata_completeness"] = result.metadata_completeness
    meta["metadata_valid"] = result.valid
    meta["metadata_warnings"] = len(result.warnings)
    meta["metadata_errors"] = len(result.errors)
    hide_from_text(node, QUALITY_KEYS)  # bookkeeping for the pipeline


class MetadataQualityPostprocessor(StreamPostprocessor):
    """Validates each retrieved memory's metadata and reports the overall grade."""

    drop_invalid: bool = Field(
        default=False, description="Remove memories whose metadata has errors (missing REQUIRED fields)."
    )

    @classmethod
    def class_name(cls) -> str:
        return "MetadataQualityPostprocessor"

    def assess(self, nodes: list[NodeWithScore]) -> tuple[MetadataValidationReport, list[NodeWithScore]]:
        """Annotate ``nodes`` (in place); the report and the nodes to keep."""
        results = [validate_retrieved_node(n) for n in nodes]
        for node, result in zip(nodes, results):
            annotate(node, result)
        report = build_validation_report(results, [n.node.node_id for n in nodes])
        kept = [n for n, r in zip(nodes, results) if r.valid or not self.drop_invalid]
        return report, kept

    def process(self, nodes: list[NodeWithScore], query_bundle: Optional[QueryBundle] = None,
                intention: Any = None) -> StepResult:
        """The nodes kept; the stream's ``metadata_validation`` counts every node given, dropped ones too."""
        report, kept = self.assess(nodes)
        return StepResult(kept, {"metadata_validation": report})
