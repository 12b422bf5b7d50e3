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

import logging
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.schema import BaseNode

from llama_consciousness.ingestion.dedupe import DuplicateMemo, NearDuplicateFilter
from llama_consciousness.ingestion.lanes import GraphLanes
from llama_consciousness.ingestion.loader import MemoryFileError, iter_json_objects
from llama_consciousness.nodes import memory_to_text_node, record_text_node, relationship_to_text_node
from llama_consciousness.ingestion.report import IngestReport
from llama_consciousness.ingestion.steps import IngestOptions, collect_reports, pure_steps
from llama_consciousness.ingestion.validator import LINE_KEY
from llama_consciousness.ingestion.writer import RELATIONSHIP_FACTOR, ConsciousnessGraphWriter
from llama_consciousness.errors import LevelError
from llama_consciousness.gcquiet import BULK_YOUNG_COLLECTION_THRESHOLD, fewer_collections
from llama_consciousness.levels import graph_name
from llama_consciousness.schema import ConsciousnessRelationship, MemoryNode
from llama_consciousness.storage.reader import MemoryReader


def build_pipeline(memory: MemoryReader, options: IngestOptions | None = None) -> IngestionPipeline:
    """The default ingestion pipeline writing into ``memory``."""
    # The pipeline cache would skip the writer for nodes it has seen, which
    # is wrong for a store that may have changed since: writes are
    # idempotent anyway.
    return IngestionPipeline(transformations=_steps(memory, options or IngestOptions()), disable_cache=True)


def _steps(memory: MemoryReader, o: IngestOptions) -> list[Any]:
    """The default steps, in order (see the module docstring)."""
    return pure_steps(o) + _store_steps(memory, o)


def _store_steps(
    memory: MemoryReader, o: IngestOptions, memo: DuplicateMemo | None = None, prepared: dict[int, Any] | None = None
) -> list[Any]:
    """The steps that read or write the level graphs: near-duplicates, the writer.

    ``memo`` is shared by the store steps of one run (see ``DuplicateMemo``);
    ``prepared`` are relationships the worker made ready, by node identity
    (see ``ConsciousnessGraphWriter.prepared``).
    """
    steps: list[Any] = []
    if o.duplicates != "off":
        steps.append(NearDuplicateFilter(memory=memory, action=o.duplicates, threshold=o.duplicate_threshold,
                                         memo=memo))
    steps.append(
        ConsciousnessGraphWriter(memory=memory, batch_size=o.batch_size, link_entities=o.entities,
                                 on_error="raise" if o.on_invalid == "raise" else "drop", prepared=prepared or {},
                                 memo=memo)
    )
    return steps


log = logging.getLogger(__name__)

KEEP_PARSED_BYTES = 64 * 2**20
"""Files up to this size are parsed once and kept; larger ones are read twice."""

WORKER_THRESHOLD = 3000
"""Records above which ``worker="auto"`` runs the pure steps in a worker process."""


def _run(pipeline: IngestionPipeline, nodes: list[BaseNode], report: IngestReport) -> list[BaseNode]:
    """Run one chunk through ``pipeline``; fold what every step reported into ``report``."""
    out = pipeline.run(nodes=nodes)
    collect_reports(pipeline, report)
    return out


def _warn_injections(out: Sequence[BaseNode], report: IngestReport) -> None:
    for node in out:
        matches = node.metadata.get("lc_injection_matches")
        if matches:
            state = "quarantined" if node.metadata.get("lc_quarantine") else "flagged"
            report.warn(node.node_id, f"{state} as a possible prompt injection: {', '.join(map(str, matches))}")


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
    data = dict(obj)
    kind = data.pop("kind", "memory")
    data[LINE_KEY] = line
    if kind == "relationship":
        data["kind"] = "relationship"
        node_id = f"rel:{data.get('edge_id') or data.get('source_id')}|{data.get('relation_type')}|{data.get('target_id')}"
        return record_text_node(node_id, "", data)
    node_id = str(data.pop("node_id", "") or f"line-{line}")
    description = data.pop("description", "") or ""
    data.pop("embedding", None)
    data["node_id"] = node_id
    return record_text_node(node_id, str(description), data)


def _pipelined(
    memory: MemoryReader,
    o: IngestOptions,
    chunks: Iterable[list[BaseNode]],
    report: IngestReport,
    records: int | None = None,
) -> None:
    """Run every chunk through the default steps, pure and store steps side by side.

    Pure steps run here, or, for large inputs (``o.worker``), in a worker
    process (``ingestion.worker``) that keeps up to ``WORKER_LOOKAHEAD``
    chunks in hand.  The store steps of a chunk are cut by level graph and queued
    on that graph's lane (``ingestion.lanes``): in chunk order within a
    graph, so every read of a graph sees the chunks before it; side by
    side across graphs, so one graph's server work overlaps another's
    client work.  At most ``STORE_DEPTH`` chunks are in the store at once.

    A failure stops the run: no further chunk is handed on, the lanes
    finish what they hold (each batch is one transaction, so nothing is
    left half-written), chunks the worker had in hand are discarded with
    it, and a rerun completes the rest.  A failure of the worker itself
    (it died, or could not send an error back) is not a failure of the
    run: its chunks, and all later ones, run here instead, with a warning.
    """
    from llama_consciousness.ingestion import worker as workers
    from llama_consciousness.ingestion.worker import IngestWorkerError

    worker = None
    if o.worker == "on" or (o.worker == "auto" and records is not None and records > WORKER_THRESHOLD):
        worker = workers.acquire()
    embed_model = memory.embed_model if worker is not None and workers.ships_to_worker(memory.embed_model) else None
    lookahead = WORKER_LOOKAHEAD if worker is not None else 0
    lanes = GraphLanes(STORE_THREADS)
    waiting: deque[_Pure | _Sent] = deque()  # pure results, or chunks sent
    in_store: deque[list[Future]] = deque()  # per chunk, its parts' futures
    healthy = False

    memo = DuplicateMemo()

    def store_part(part: list[BaseNode], prepared: dict[int, Any]) -> tuple[list[BaseNode], IngestReport]:
        done = IngestReport()
        steps = _store_steps(memory, o, memo, prepared)
        return _run(IngestionPipeline(transformations=steps, disable_cache=True), part, done), done

    def collect() -> None:
        for future in in_store.popleft():
            out, part = future.result()
            report.merge(part)
            _warn_injections(out, report)

    def abandon(exc: BaseException) -> None:
        """The worker failed: run its chunks, and all later ones, in this process."""
        nonlocal worker, lookahead
        log.warning("the ingestion worker failed (%s); running every step in this process", exc)
        workers.release(worker, healthy=False)
        worker, lookahead = None, 0

    def pure(entry: _Pure | _Sent) -> _Pure:
        if not isinstance(entry, _Sent):
            return entry
        if worker is not None:
            try:
                return worker.result(entry.ticket)
            except IngestWorkerError as exc:
                abandon(exc)
        return _pure_here(o, entry.chunk)

    def hand_over() -> None:
        ready, part, prepared = pure(waiting.popleft())
        report.merge(part)
        # by node identity: only these very nodes carry their prepared rows to the writer
        by_node = {id(ready[position]): edge for position, edge in prepared.items()}
        in_store.append([lanes.submit(key, store_part, nodes, by_node) for key, nodes in _by_graph(ready).items()])
        while len(in_store) > STORE_DEPTH:
            collect()

    try:
        for chunk in chunks:
            if worker is None:
                waiting.append(_pure_here(o, chunk))
            else:
                try:
                    waiting.append(_Sent(worker.submit(o, chunk, embed_model), chunk))
                except IngestWorkerError as exc:
                    abandon(exc)
                    waiting.append(_Sent(-1, chunk))  # runs here when its turn comes
            # A chunk done here goes to the store at once; the worker may
            # hold up to ``lookahead`` chunks before we wait for its answers.
            while waiting and (not isinstance(waiting[0], _Sent) or len(waiting) > lookahead):
                hand_over()
        while waiting:
            hand_over()
        while in_store:
            collect()
        healthy = True
    finally:
        lanes.close()
        if worker is not None:
            workers.release(worker, healthy)


_Pure = tuple[list[BaseNode], IngestReport, dict[int, Any]]
"""A chunk after its pure steps: the nodes kept, the report, prepared relationships by position."""


@dataclass(frozen=True)
class _Sent:
    """A chunk handed to the worker process (kept to run here if the worker fails)."""

    ticket: int
    chunk: list[BaseNode]


def _by_graph(nodes: list[BaseNode]) -> dict[str | None, list[BaseNode]]:
    """A chunk cut by the level graph its records go to (in the chunk's order).

    Records whose graph cannot be told here (no or a bad level) go to one
    lane of their own, where the writer reports them as usual.
    """
    parts: dict[str | None, list[BaseNode]] = {}
    keys: dict[tuple[Any, Any], str | None] = {}  # a chunk names a handful of graphs: each is checked once
    for node in nodes:
        metadata = node.metadata
        level, citizen = metadata.get("level"), metadata.get("citizen_id")
        place = (level, citizen) if type(level) is str and (citizen is None or type(citizen) is str) else None
        key = keys.get(place, False) if place is not None else False
        if key is False:
            try:
                key = graph_name(str(level), citizen.strip() if isinstance(citizen, str) else citizen)
            except (LevelError, ValueError):
                key = None
            if place is not None:
                keys[place] = key
        parts.setdefault(key, []).append(node)
    return parts


STORE_THREADS = 6
"""Threads serving the graph lanes: while some wait for the server, one runs Python.

Measured on 2 cores (4,000 memories over six graphs): 2 threads 3.6 s,
3 threads 3.5 s, 6 threads 3.25 s for the stock path's job.
"""

STORE_DEPTH = 2
"""Chunks whose store steps may be under way at once."""

WORKER_LOOKAHEAD = 2
"""Chunks the worker process may hold beyond the one being written."""

def _pure_here(o: IngestOptions, chunk: list[BaseNode]) -> _Pure:
    """The pure steps in this process (the writer makes the relationships' rows itself)."""
    from llama_consciousness.ingestion.worker import run_pure

    return (*run_pure(o, chunk), {})


def _count_records(path: Path) -> int:
    """Record lines of a file, at most, without parsing them (no blank lines, no comments, as the loader reads)."""
    with path.open("rb") as handle:
        return sum(1 for line in handle if (text := line.strip()) and not text.startswith((b"#", b"//")))


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
    memory: MemoryReader,
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
    with fewer_collections(young=BULK_YOUNG_COLLECTION_THRESHOLD):  # see gcquiet: a third of this process's CPU otherwise
        return _ingest(memory, source, options, progress=progress)


def _ingest(
    memory: MemoryReader,
    source: str | Path | Sequence[MemoryNode | ConsciousnessRelationship | BaseNode],
    options: IngestOptions | None,
    *,
    progress: bool,
) -> IngestReport:
    o = options or IngestOptions()
    report = IngestReport()
    if isinstance(source, (str, Path)):
        path = Path(source)
        nodes: Iterable[BaseNode]
        if o.on_bad_line == "raise":  # a full pass before the first write: all or nothing
            if path.stat().st_size <= KEEP_PARSED_BYTES:  # parsed once, kept
                parsed = list(iter_json_objects(path))
                records = len(parsed)
                nodes = (_raw_text_node(obj, number) for number, obj in parsed)
            else:
                records = sum(1 for _ in iter_json_objects(path))
                nodes = _read_lines(path, report, o.on_bad_line)
        else:
            records = _count_records(path)
            nodes = _read_lines(path, report, o.on_bad_line)
        total = records if progress else None
    else:
        nodes = to_text_nodes(source)
        records = len(nodes)
        total = records if progress else None
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
        # Relationships are light to check and each chunk costs a few round
        # trips per graph: they go in larger chunks.
        size = o.chunk_size * RELATIONSHIP_FACTOR
        for start in range(0, len(held), size):
            if bar is not None:
                bar.update(min(size, len(held) - start))
            yield held[start : start + size]

    try:
        _pipelined(memory, o, work(), report, records)
    finally:
        if bar is not None:
            bar.close()
    return report
