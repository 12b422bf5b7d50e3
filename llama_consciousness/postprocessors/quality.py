"""``MetadataQualityPostprocessor``: grade the metadata of what was retrieved (the spec's validation in retrieval).

Each node is checked with :func:`~llama_consciousness.scoring.validation.validate_consciousness_node`
and gets ``metadata_completeness``, ``metadata_valid``, ``metadata_warnings`` and
``metadata_errors`` (counts) in its metadata; the stream gets a
:class:`MetadataValidationReport` over every node retrieved (``drop_invalid``
removes the memories with errors, but the report still counts them).
Validation reads the raw metadata, not a rebuilt ``MemoryNode``: a model would
fill defaults and hide exactly the gaps this is meant to show.  With no
memories the report is ``average_completeness=1.0``, grade ``"excellent"``.
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
    """``validate_consciousness_node`` on the graded fields of a retrieved node (a stream grades a hundred
    nodes of forty fields each)."""
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


class MetadataQualityPostprocessor(StreamPostprocessor):
    """Validates each retrieved memory's metadata and reports the overall grade."""

    drop_invalid: bool = Field(
        default=False, description="Remove memories whose metadata has errors (missing REQUIRED fields)."
    )

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex serialises the class under."""
        return "MetadataQualityPostprocessor"

    def process(self, nodes: list[NodeWithScore], query_bundle: Optional[QueryBundle] = None,
                intention: Any = None) -> StepResult:
        """The nodes kept (annotated); the stream's ``metadata_validation`` counts every node given."""
        results = [validate_retrieved_node(n) for n in nodes]
        for node, result in zip(nodes, results):
            node.node.metadata.update(metadata_completeness=result.metadata_completeness, metadata_valid=result.valid,
                                      metadata_warnings=len(result.warnings), metadata_errors=len(result.errors))
            hide_from_text(node, QUALITY_KEYS)  # bookkeeping for the pipeline
        kept = [n for n, r in zip(nodes, results) if r.valid or not self.drop_invalid]
        report = build_validation_report(results, [n.node.node_id for n in nodes])
        return StepResult(kept, {"metadata_validation": report})
