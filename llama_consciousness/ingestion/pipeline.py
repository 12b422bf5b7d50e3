"""The default ingestion pipeline, and ``ingest``: a memory file into the level graphs.

The pipeline is an ordinary LlamaIndex ``IngestionPipeline``; users who want
another order or their own transforms build one from the same pieces:

    validate -> scrub PII -> guard against injections -> concepts ->
    surfaces_when -> authority -> entities -> near-duplicates -> write

Scrubbing comes before anything that embeds or extracts, so secrets never
reach an embedding or an entity name.  Validation comes first so that a bad
record is rejected before any work is spent on it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.schema import BaseNode

from llama_consciousness.ingestion.cognitive import AuthorityScorer, ConceptExtractor, SurfacesWhenInferrer
from llama_consciousness.ingestion.dedupe import NearDuplicateFilter
from llama_consciousness.ingestion.entities import EntityExtractor
from llama_consciousness.ingestion.guards import InjectionGuard, PIIScrubber
from llama_consciousness.ingestion.loader import MemoryFileError, iter_json_objects
from llama_consciousness.ingestion.nodes import memory_to_text_node, relationship_to_text_node
from llama_consciousness.ingestion.report import IngestReport
from llama_consciousness.ingestion.validator import LINE_KEY, ConsciousnessMetadataValidator
from llama_consciousness.ingestion.writer import ConsciousnessGraphWriter
from llama_consciousness.schema import ConsciousnessRelationship, MemoryNode


@dataclass(frozen=True)
class IngestOptions:
    """How ``ingest`` treats the records it is given.

    ``on_invalid``: a record that fails validation stops the run (``raise``)
    or is skipped and reported (``drop``).  ``on_bad_line``: a line that is
    not JSON makes the whole file refused before anything is written
    (``raise``: all or nothing) or is skipped and reported (``skip``: the
    rest is ingested).  ``pii``, ``injection`` (``flag`` / ``quarantine`` /
    ``drop`` / ``off``), ``duplicates`` (``link`` / ``skip`` / ``off``),
    ``entities`` and ``concepts`` switch the transforms.
    """

    on_invalid: Literal["raise", "drop"] = "raise"
    on_bad_line: Literal["raise", "skip"] = "raise"
    pii: bool = True
    injection: Literal["flag", "quarantine", "drop", "off"] = "flag"
    duplicates: Literal["link", "skip", "off"] = "link"
    duplicate_threshold: float = 0.9
    entities: bool = True
    concepts: bool = True
    batch_size: int = 500
    chunk_size: int = 1000


def build_pipeline(memory: Any, options: IngestOptions | None = None) -> IngestionPipeline:
    """The default ingestion pipeline writing into ``memory``."""
    # The pipeline cache would skip the writer for nodes it has seen, which
    # is wrong for a store that may have changed since: writes are
    # idempotent anyway.
    return IngestionPipeline(transformations=_steps(memory, options or IngestOptions()), disable_cache=True)


def _steps(memory: Any, o: IngestOptions) -> list[Any]:
    """The default steps, in order (see the module docstring)."""
    steps: list[Any] = [ConsciousnessMetadataValidator(mode=o.on_invalid)]
    if o.pii:
        steps.append(PIIScrubber())
    if o.injection != "off":
        steps.append(InjectionGuard(action=o.injection))
    if o.concepts:
        steps += [ConceptExtractor(), SurfacesWhenInferrer(), AuthorityScorer()]
    if o.entities:
        # Names only: the concepts are already stored as the memory's
        # ``concepts``; as entities they would link every memory to "asked".
        steps.append(EntityExtractor(use_concepts=False))
    if o.duplicates != "off":
        steps.append(NearDuplicateFilter(memory=memory, action=o.duplicates, threshold=o.duplicate_threshold))
    steps.append(
        ConsciousnessGraphWriter(memory=memory, batch_size=o.batch_size, link_entities=o.entities,
                                 on_error="raise" if o.on_invalid == "raise" else "drop")
    )
    return steps


def _stages(memory: Any, o: IngestOptions) -> tuple[IngestionPipeline, IngestionPipeline]:
    """The default steps cut in two: those that read only their records, and
    those that read or write the store (near-duplicates, the writer).

    The first stage of one chunk can then run while the second stage of the
    previous chunk waits on the server.
    """
    steps = _steps(memory, o)
    cut = next(i for i, step in enumerate(steps) if isinstance(step, STORE_STEPS))
    return (IngestionPipeline(transformations=steps[:cut], disable_cache=True),
            IngestionPipeline(transformations=steps[cut:], disable_cache=True))


STORE_STEPS = (NearDuplicateFilter, ConsciousnessGraphWriter)
"""Steps that read or write the level graphs (everything before them is pure)."""


def _run(pipeline: IngestionPipeline, nodes: list[BaseNode], report: IngestReport) -> list[BaseNode]:
    """Run one chunk through ``pipeline``; fold what every step reported into ``report``."""
    out = pipeline.run(nodes=nodes)
    _collect_reports(pipeline, report)
    return out


def _warn_injections(out: Sequence[BaseNode], report: IngestReport) -> None:
    for node in out:
        matches = node.metadata.get("lc_injection_matches")
        if matches:
            state = "quarantined" if node.metadata.get("lc_quarantine") else "flagged"
            report.warn(node.node_id, f"{state} as a possible prompt injection: {', '.join(map(str, matches))}")


def _collect_reports(pipeline: IngestionPipeline, report: IngestReport) -> None:
    """Fold the reports of every step into one."""
    for step in pipeline.transformations:
        part = getattr(step, "report", None)
        if isinstance(part, IngestReport):
            report.merge(part)
        if isinstance(step, InjectionGuard):
            for node_id in step.last_report.get("dropped_ids", []):
                report.reject(node_id, "InjectionGuard", ["dropped: looks like a prompt injection"])


def to_text_nodes(items: Iterable[MemoryNode | ConsciousnessRelationship | BaseNode]) -> list[BaseNode]:
    """Models (or ready TextNodes) as the pipeline's input."""
    out: list[BaseNode] = []
    for item in items:
        if isinstance(item, MemoryNode):
            out.append(memory_to_text_node(item))
        elif isinstance(item, ConsciousnessRelationship):
            out.append(relationship_to_text_node(item))
        elif isinstance(item, BaseNode):
            out.append(item)
        else:
            raise TypeError(f"cannot ingest {type(item).__name__}; expected MemoryNode, ConsciousnessRelationship or a TextNode")
    return out


def _read_lines(path: Path, report: IngestReport, on_bad_line: str) -> Iterator[BaseNode]:
    """Records of a memory file as TextNodes (line numbers kept for the report)."""

    def skip(error: MemoryFileError) -> None:
        report.reject(f"line {error.line}", "loader", [error.reason], error.line)

    for number, obj in iter_json_objects(path, None if on_bad_line == "raise" else skip):
        yield _raw_text_node(obj, number)


def _raw_text_node(obj: dict[str, Any], line: int) -> BaseNode:
    """A record as a TextNode *without* validating it (the validator's job).

    Building the pydantic model here would reject bad records before the
    validator could report them by tier, or drop them in ``drop`` mode.
    """
    from llama_index.core.schema import TextNode

    data = dict(obj)
    kind = data.pop("kind", "memory")
    data[LINE_KEY] = line
    if kind == "relationship":
        data["kind"] = "relationship"
        node_id = f"rel:{data.get('edge_id') or data.get('source_id')}|{data.get('relation_type')}|{data.get('target_id')}"
        return TextNode(id_=node_id, text="", metadata=data)
    node_id = str(data.pop("node_id", "") or f"line-{line}")
    description = data.pop("description", "") or ""
    data.pop("embedding", None)
    node = TextNode(id_=node_id, text=str(description), metadata=data)
    node.metadata["node_id"] = node_id
    return node


def _pipelined(memory: Any, o: IngestOptions, chunks: Iterable[list[BaseNode]], report: IngestReport) -> None:
    """Run every chunk through the default steps, two chunks in flight.

    The pure steps of chunk k+1 run in this thread while the store steps of
    chunk k run in one writer thread: the server's work and the embedding
    release the GIL.  Store steps run in chunk order, and those of a chunk
    start only when the previous chunk is written, so every read of the
    store sees all earlier chunks, and a failure stops the run at the same
    chunk as a sequential run would; no write is left running behind an error.
    """
    writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lc-ingest-writer")
    in_flight: Future | None = None

    def store_stage(pipeline: IngestionPipeline, ready: list[BaseNode]) -> tuple[list[BaseNode], IngestReport]:
        part = IngestReport()
        return _run(pipeline, ready, part), part

    def finish() -> None:
        nonlocal in_flight
        if in_flight is not None:
            done, in_flight = in_flight, None
            out, part = done.result()
            report.merge(part)
            _warn_injections(out, report)

    try:
        for chunk in chunks:
            pure, store = _stages(memory, o)
            ready = _run(pure, chunk, report)
            finish()
            in_flight = writer.submit(store_stage, store, ready)
        finish()
    finally:
        if in_flight is not None:
            wait([in_flight])
        writer.shutdown(wait=True)


def _chunks(items: Iterable[BaseNode], size: int) -> Iterator[list[BaseNode]]:
    chunk: list[BaseNode] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def ingest(
    memory: Any,
    source: str | Path | Sequence[MemoryNode | ConsciousnessRelationship | BaseNode],
    options: IngestOptions | None = None,
    *,
    progress: bool = False,
) -> IngestReport:
    """Ingest a memory file (JSON Lines) or a sequence of records; returns the report.

    A file is read in chunks so large files stay out of memory.  With
    ``on_bad_line="raise"`` the file is checked completely before the first
    write, so a malformed line anywhere means nothing is ingested.
    """
    o = options or IngestOptions()
    report = IngestReport()
    if isinstance(source, (str, Path)):
        path = Path(source)
        if o.on_bad_line == "raise":
            for _ in _read_lines(path, report, "raise"):  # a full pass: all or nothing
                pass
        total = sum(1 for _ in _read_lines(path, IngestReport(), "skip")) if progress else None
        nodes: Iterable[BaseNode] = _read_lines(path, report, o.on_bad_line)
    else:
        nodes = to_text_nodes(source)
        total = len(nodes) if progress else None
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=total, unit="record", desc="ingesting")
    # Relationships are written after all memories: a relationship may
    # refer to a memory that comes later in the file.
    held: list[BaseNode] = []
    homes: dict[str, tuple[Any, Any]] = {}

    def work() -> Iterator[list[BaseNode]]:
        for chunk in _chunks(nodes, o.chunk_size):
            records = [n for n in chunk if n.metadata.get("kind") != "relationship"]
            held.extend(n for n in chunk if n.metadata.get("kind") == "relationship")
            for n in records:
                homes[n.node_id] = (n.metadata.get("level"), n.metadata.get("citizen_id"))
            if bar is not None:
                bar.update(len(records))
            if records:
                yield records
        for rel in held:  # a relationship lives in the graph of its source memory
            if rel.metadata.get("level") is None and rel.metadata.get("source_id") in homes:
                level, citizen = homes[rel.metadata["source_id"]]
                rel.metadata["level"] = level
                if level == "N1" and rel.metadata.get("citizen_id") is None:
                    rel.metadata["citizen_id"] = citizen
        for start in range(0, len(held), o.chunk_size):
            if bar is not None:
                bar.update(min(o.chunk_size, len(held) - start))
            yield held[start : start + o.chunk_size]

    try:
        _pipelined(memory, o, work(), report)
    finally:
        if bar is not None:
            bar.close()
    return report
