"""The default ingestion pipeline, and ``ingest``: a memory file into the level graphs.

An ordinary LlamaIndex ``IngestionPipeline`` of: validate -> scrub PII -> guard against injections ->
concepts -> surfaces_when -> authority -> entities -> near-duplicates -> knowledge updates -> write.  Validation comes first,
so a bad record costs no work; scrubbing before anything that embeds or extracts, so secrets never
reach a vector or an entity name.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.schema import BaseNode

from llama_consciousness.embeddings import WordLlamaEmbedding
from llama_consciousness.errors import LevelError
from llama_consciousness.gcquiet import BULK_YOUNG_COLLECTION_THRESHOLD, fewer_collections
from llama_consciousness.ingestion.dedupe import DuplicateMemo, NearDuplicateFilter
from llama_consciousness.ingestion.lanes import GraphLanes
from llama_consciousness.ingestion.loader import check_memory_file, iter_json_objects
from llama_consciousness.ingestion.plan import CallPlan
from llama_consciousness.ingestion.report import IngestReport
from llama_consciousness.ingestion.steps import IngestOptions, collect_reports, pure_steps
from llama_consciousness.ingestion.updates import KnowledgeUpdateDetector
from llama_consciousness.ingestion.validator import (
    LINE_KEY, MemoryValidationError, RelationshipError, _check, record_id,
)
from llama_consciousness.ingestion.writer import (
    RELATIONSHIP_FACTOR, ConsciousnessGraphWriter, GraphKey, ambiguous_source, source_homes,
)
from llama_consciousness.levels import graph_name, home_key
from llama_consciousness.nodes import (
    is_relationship, memory_to_text_node, record_text_node, relationship_to_text_node,
)
from llama_consciousness.schema import ConsciousnessRelationship, MemoryNode
from llama_consciousness.storage.reader import MemoryReader

log = logging.getLogger(__name__)

KEEP_PARSED_BYTES = 64 * 2**20
"""Files up to this size are parsed once and kept; larger ones are read twice."""

WORKER_THRESHOLD = 3000
"""Records above which ``worker="auto"`` runs the pure steps in a worker process."""

CHUNK_CHARS = 100_000
"""Text a chunk of memories holds at most (besides ``chunk_size`` records): long messages then still come in
chunks small enough for the pure steps of one to run while the store writes another (two BEAM conversations,
1,676 messages of 2,300 characters, were one chunk each: with the worker, 236 messages/s in chunks of 1,000
records, 332 in chunks of 100,000 characters, 336 of 200,000, 325 of 50,000)."""

WORKER_CHARS = 1_000_000
"""Text (characters of memories, or bytes of a file) above which ``worker="auto"`` starts a worker process for
the pure steps.  ``auto`` hands chunks to a worker only once it has started, but its start (about a second of
imports) takes a core from the run: BEAM messages of a fresh process, worker against none, 1.27 s against
1.15 s for 690,000 characters, 2.89 s against 3.05 s for 1.8 million."""

WORKER_CHARS_KEPT = 2 * CHUNK_CHARS
"""The same when a started worker is kept from an earlier ingestion: two chunks, one to run there while the
other is written, pay (300 BEAM messages: 0.84 s against 1.14 s)."""

STORE_THREADS = 6
"""Threads serving the graph lanes: while some wait for the server, one runs Python (measured on 2 cores,
4,000 memories over six graphs: 2 threads 3.6 s, 3 threads 3.5 s, 6 threads 3.25 s)."""

SMALL_RUN = 16
"""Records (memories and relationships) of a run small enough for its store steps to run in the calling
thread when they all go to one graph: a chatbot turn's messages and their links.  Starting and joining a lane
thread for each put cost more than it overlapped: a put of two long messages spends 10.7 ms of CPU against
11.7, and 16 conversations' client holds 13 MB less (``benchmarks/chat_load.py``).  Into several graphs the
lanes still pay (twelve memories over three levels: 20 ms against 22 in the calling thread)."""

STORE_DEPTH = 2
"""Chunks whose store steps may be under way at once."""

WORKER_LOOKAHEAD = 2
"""Chunks the worker process may hold beyond the one being written."""


def build_pipeline(memory: MemoryReader, options: IngestOptions | None = None) -> IngestionPipeline:
    """The default ingestion pipeline writing into ``memory``; without LlamaIndex's cache, which would
    skip the writer for nodes it has seen in a store that may have changed since."""
    o = options or IngestOptions()
    return IngestionPipeline(transformations=pure_steps(o) + _store_steps(memory, o), disable_cache=True)


def _store_steps(
    memory: MemoryReader, o: IngestOptions, memo: DuplicateMemo | None = None, prepared: dict[int, Any] | None = None,
    dropped: set[str] | None = None, plan: CallPlan | None = None,
) -> list[Any]:
    """The steps that read or write the level graphs (see ``ConsciousnessGraphWriter`` for the arguments)."""
    steps: list[Any] = []
    if o.duplicates != "off":
        steps.append(NearDuplicateFilter(memory=memory, action=o.duplicates, threshold=o.duplicate_threshold,
                                         memo=memo, plan=plan))
    if o.updates != "off":
        steps.append(KnowledgeUpdateDetector(memory=memory, llm_judge=o.update_judge, memo=memo,
                                             max_chars=o.update_max_chars))
    steps.append(ConsciousnessGraphWriter(
        memory=memory, batch_size=o.batch_size, link_entities=o.entities, on_error=o.on_invalid,
        prepared=prepared or {}, memo=memo, dropped=dropped, plan=plan))
    return steps


def to_text_nodes(items: Iterable[MemoryNode | ConsciousnessRelationship | BaseNode]) -> list[BaseNode]:
    """Models (or ready TextNodes) as the pipeline's input."""
    if isinstance(items, (MemoryNode, ConsciousnessRelationship, BaseNode, dict, bytes)):
        raise TypeError(f"cannot ingest a single {type(items).__name__}: give the path of a memory file, or a "
                        "list of MemoryNode / ConsciousnessRelationship records (or TextNodes)")
    out: list[BaseNode] = []
    for position, item in enumerate(items):
        if isinstance(item, MemoryNode):
            out.append(memory_to_text_node(item))
        elif isinstance(item, ConsciousnessRelationship):
            out.append(relationship_to_text_node(item))
        elif isinstance(item, BaseNode):
            out.append(item)
        else:
            hint = " (build it with MemoryNode(**record) or ConsciousnessRelationship(**record))" \
                if isinstance(item, dict) else ""
            raise TypeError(f"cannot ingest {type(item).__name__} at position {position}; expected MemoryNode, "
                            f"ConsciousnessRelationship or a TextNode{hint}")
    return out


def _raw_text_node(obj: dict[str, Any], line: int) -> BaseNode:
    """A record as a TextNode *without* validating it: the validator reports bad records by tier, or drops them."""
    return _raw_record(obj, line).node()


class _Record:
    """A parsed line as the TextNode it will be, not built yet (that waits until the store works):
    what the first pass of an all-or-nothing run reads of every record before the first write."""

    __slots__ = ("node_id", "text", "metadata")
    embedding = None

    def __init__(self, node_id: str, text: str, metadata: dict[str, Any]) -> None:
        self.node_id, self.text, self.metadata = node_id, text, metadata

    def get_content(self, metadata_mode: Any = None) -> str:
        return self.text

    def node(self) -> BaseNode:
        return record_text_node(self.node_id, self.text, self.metadata)


def _raw_record(obj: dict[str, Any], line: int) -> _Record:
    data = dict(obj)
    kind = data.pop("kind", "memory")
    data[LINE_KEY] = line
    if kind == "relationship":
        data["kind"] = "relationship"
        node_id = f"rel:{data.get('edge_id') or data.get('source_id')}|{data.get('relation_type')}|{data.get('target_id')}"
        return _Record(node_id, "", data)
    node_id = str(data.pop("node_id", "") or f"line-{line}")
    description = data.pop("description", "") or ""
    data.pop("embedding", None)
    data["node_id"] = node_id
    return _Record(node_id, str(description), data)


def _as_node(item: BaseNode | _Record) -> BaseNode:
    return item.node() if isinstance(item, _Record) else item


_Pure = tuple[list[BaseNode], IngestReport, dict[int, Any]]
"""A chunk after its pure steps: the nodes kept, the report, prepared relationships by position."""


@dataclass(frozen=True)
class _Failed:
    """A chunk whose pure steps failed, read before its turn (``open_gate``): raised in its turn."""

    error: BaseException


@dataclass(frozen=True)
class _Sent:
    """A chunk handed to the worker process (kept to run here if the worker fails)."""

    ticket: int
    chunk: list[BaseNode]


def _pure_here(o: IngestOptions, chunk: list[BaseNode]) -> _Pure:
    """The pure steps in this process (the writer makes the relationships' rows itself)."""
    from llama_consciousness.ingestion.worker import run_pure

    return (*run_pure(o, chunk), {})


def _wants_worker(o: IngestOptions, records: int | None, chars: int) -> bool:
    """Whether the pure steps of this run go to a worker process: never with an LLM extracting entities (its
    client does not travel), always with ``worker="on"``; with ``"auto"``, for more records than
    ``WORKER_THRESHOLD`` or more text than ``WORKER_CHARS`` (``WORKER_CHARS_KEPT`` when a started worker is
    kept)."""
    from llama_consciousness.ingestion import worker as workers
    from llama_consciousness.llms import resolve_llm

    if o.entity_llm is not None and resolve_llm(o.entity_llm) is not None:
        return False
    if o.worker != "auto":
        return o.worker == "on"
    if records is not None and records > WORKER_THRESHOLD:
        return True
    return chars > (WORKER_CHARS_KEPT if workers.idle() else WORKER_CHARS)


def _pipelined(
    memory: MemoryReader,
    o: IngestOptions,
    chunks: Iterable[list[BaseNode] | _Pure],
    report: IngestReport,
    records: int | None = None,
    chars: int = 0,
    gate: Callable[[], Any] | None = None,
    plan: CallPlan | None = None,
) -> None:
    """Run every chunk through the default steps, pure and store steps side by side.

    Pure steps run here or in the worker process (a ready chunk, ``_ready``, skips them); store steps are
    queued on their graph's lane.  ``gate`` (the first pass) runs once before the store gets its first
    chunk; after the last, each graph of ``plan`` is settled on its lane (``ConsciousnessGraphWriter.finish``).
    A failure stops the run (a rerun completes it); a failure of the worker moves its chunks here.
    """
    from llama_consciousness.ingestion import worker as workers
    from llama_consciousness.ingestion.worker import IngestWorkerError

    worker = workers.acquire() if _wants_worker(o, records, chars) else None
    # The worker embeds with the bundled WordLlama (it reloads its own table); a remote model stays here.
    ships = worker is not None and type(memory.embed_model) is WordLlamaEmbedding
    embed_model = memory.embed_model if ships else None
    lookahead = WORKER_LOOKAHEAD if worker is not None else 0
    small = worker is None and records is not None and records <= SMALL_RUN
    lanes: GraphLanes | None = None  # made for the first chunk the store gets: threaded unless it is a small run's
    waiting: deque[_Pure | _Sent | _Failed] = deque()  # pure results, chunks sent, or failed
    in_store: deque[list[Future]] = deque()  # per chunk, its parts' futures
    healthy = False
    memo = DuplicateMemo()
    # Memories left out on purpose (injection "drop", duplicates "skip"): a
    # relationship to one is then rejected, not an error.  A graph's lane
    # runs its memory chunks before its relationships, so they are known.
    dropped: set[str] = set()

    def store_part(part: list[BaseNode], prepared: dict[int, Any]) -> tuple[list[BaseNode], IngestReport]:
        done = IngestReport()
        pipeline = IngestionPipeline(transformations=_store_steps(memory, o, memo, prepared, dropped, plan),
                                     disable_cache=True)
        out = pipeline.run(nodes=part)
        collect_reports(pipeline, done)
        if o.duplicates == "skip" and len(out) < len(part):
            kept = {id(node) for node in out}
            dropped.update({node.node_id for node in part if id(node) not in kept and not is_relationship(node)})
        return out, done

    def collect() -> None:
        for future in in_store.popleft():
            out, part = future.result()
            report.merge(part)
            for node in out:
                if matches := node.metadata.get("lc_injection_matches"):
                    state = "quarantined" if node.metadata.get("lc_quarantine") else "flagged"
                    matched = ", ".join(map(str, matches))
                    report.warn(node.node_id, f"{state} as a possible prompt injection: {matched}")

    def pure(entry: _Pure | _Sent | _Failed) -> _Pure:
        if isinstance(entry, _Failed):
            raise entry.error
        if not isinstance(entry, _Sent):
            return entry
        if worker is not None:
            try:
                return worker.result(entry.ticket)
            except IngestWorkerError as exc:
                abandon(exc)
        return _pure_here(o, entry.chunk)

    def abandon(exc: BaseException) -> None:
        """The worker failed: run its chunks, and all later ones, in this process."""
        nonlocal worker, lookahead
        log.warning("the ingestion worker failed (%s); running every step in this process", exc)
        workers.release(worker, healthy=False)
        worker, lookahead = None, 0

    def open_gate() -> None:
        """Run ``gate`` once; with a worker, in a thread while this one reads the worker's answers
        (it blocks on each answer until read).  A chunk's error is raised in that chunk's turn."""
        nonlocal gate
        check, gate = gate, None
        if worker is None or not any(isinstance(entry, _Sent) for entry in waiting):
            check()
            return
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="lc-first-pass") as pool:
            checking = pool.submit(check)
            for position in range(len(waiting)):
                entry = waiting[position]
                if checking.done():  # the store may have its first chunk now: no more waiting here
                    break
                if isinstance(entry, _Sent):
                    try:
                        waiting[position] = pure(entry)
                    except BaseException as exc:  # noqa: BLE001 - raised in its turn (``pure``)
                        waiting[position] = _Failed(exc)
                        break
            checking.result()

    def lanes_for(graphs: Collection[str | None]) -> GraphLanes:
        """The run's lanes, made at its first chunk: in this thread for a small run into one graph (lane
        threads overlap graphs; a chatbot turn writes one), else on ``STORE_THREADS`` threads."""
        nonlocal lanes
        if lanes is None:
            lanes = GraphLanes(0 if small and len(graphs) == 1 else STORE_THREADS)
        return lanes

    def hand_over() -> None:
        if gate is not None:  # before the store gets its first chunk
            open_gate()
        ready, part, prepared = pure(waiting.popleft())
        report.merge(part)
        if o.injection == "drop":
            dropped.update({r.item_id for r in part.rejected if r.stage == "InjectionGuard"})
        # by node identity: only these very nodes carry their prepared rows to the writer
        by_node = {id(ready[position]): edge for position, edge in prepared.items()}
        parts = _by_graph(ready)
        store = lanes_for(parts)
        in_store.append([store.submit(key, store_part, nodes, by_node) for key, nodes in parts.items()])
        while len(in_store) > STORE_DEPTH:
            collect()

    try:
        for chunk in chunks:
            if isinstance(chunk, tuple):  # ready: relationships the first pass checked
                waiting.append(chunk)
            elif worker is None or (o.worker == "auto" and not worker.ready()):
                # "auto" does not wait for a worker still starting (its imports take about a second)
                waiting.append(_pure_here(o, chunk))
            else:
                try:
                    waiting.append(_Sent(worker.submit(replace(o, update_judge=None), chunk, embed_model), chunk))
                except IngestWorkerError as exc:
                    abandon(exc)
                    waiting.append(_Sent(-1, chunk))  # runs here when its turn comes
            # A chunk done here goes to the store at once; the worker may
            # hold up to ``lookahead`` chunks before we wait for its answers.
            while waiting and (not isinstance(waiting[0], _Sent) or len(waiting) > lookahead):
                hand_over()
        while waiting:
            hand_over()
        if plan is not None and plan.graphs:
            writer = _store_steps(memory, o, memo, None, dropped, plan)[-1]

            def finish(graph: str) -> tuple[list[BaseNode], IngestReport]:
                return [], writer.finish(graph)

            store = lanes_for(plan.graphs)
            in_store.append([store.submit(graph, finish, graph) for graph in plan.graphs])
        while in_store:
            collect()
        healthy = True
    finally:
        if lanes is not None:
            lanes.close()
        if worker is not None:
            workers.release(worker, healthy)


def _by_graph(nodes: list[BaseNode]) -> dict[str | None, list[BaseNode]]:
    """A chunk cut by the level graph its records go to, in order; records with no or a bad level share a lane."""
    parts: dict[str | None, list[BaseNode]] = {}
    names: dict[GraphKey | None, str | None] = {None: None}  # a chunk names a handful of graphs: each checked once
    for node in nodes:
        if (place := _raw_home(node.metadata)) not in names:
            try:
                names[place] = graph_name(place[0], place[1] and place[1].strip())
            except (LevelError, ValueError):
                names[place] = None
        parts.setdefault(names[place], []).append(node)
    return parts


def _chunks(items: Iterable[BaseNode], size: int, chars: int) -> Iterator[list[BaseNode]]:
    """``items`` in chunks of ``size`` records, or fewer when their text reaches ``chars``."""
    chunk: list[BaseNode] = []
    held = 0
    for item in items:
        chunk.append(item)
        held += len(getattr(item, "text", "") or "")
        if len(chunk) >= size or held >= chars:
            yield chunk
            chunk, held = [], 0
    if chunk:
        yield chunk


def ingest(
    memory: MemoryReader,
    source: str | Path | Sequence[MemoryNode | ConsciousnessRelationship | BaseNode],
    options: IngestOptions | None = None,
    *,
    progress: bool = False,
) -> IngestReport:
    """Ingest a memory file (JSON Lines, read in chunks) or a sequence of records; returns the report.

    With ``on_bad_line="raise"`` a malformed line anywhere means nothing is
    ingested; with ``on_invalid="raise"`` (the default) an invalid record
    anywhere, or a relationship that cannot be placed or whose endpoint
    exists nowhere, means nothing is written (``_first_pass``).
    """
    with fewer_collections(young=BULK_YOUNG_COLLECTION_THRESHOLD):  # see gcquiet: a third of this process's CPU otherwise
        return _ingest(memory, source, options, progress=progress)


_Valid = tuple["BaseNode | _Record", ConsciousnessRelationship, list[str]]
"""A relationship the first pass placed and validated: its node (or record), its model, its warnings."""


@dataclass
class _Checked:
    """What the first pass of an all-or-nothing run learnt: its relationships, ready to be written."""

    relationships: list[_Valid]
    memories: int = 0


def _raw_home(metadata: dict[str, Any]) -> GraphKey | None:
    """The graph a memory record names (``home_key``), read as given; None if it cannot be one."""
    level, citizen = metadata.get("level"), metadata.get("citizen_id")
    if type(level) is not str or not (citizen is None or type(citizen) is str):
        return None
    return home_key(level, citizen)


def _place(node: BaseNode, homes: dict[str, dict[GraphKey, None]]) -> str | None:
    """Give a relationship without a level the graph of its source memory in this call, in place; returns
    why not when that source is a memory of several graphs here (two citizens with that id)."""
    metadata = node.metadata
    source = metadata.get("source_id")
    if metadata.get("level") is not None or type(source) is not str or source not in homes:
        return None
    keys = source_homes(list(homes[source]), metadata.get("citizen_id"))
    if len(keys) > 1:
        return ambiguous_source(source, keys)
    level, citizen = keys[0]
    metadata["level"] = level
    if level == "N1" and metadata.get("citizen_id") is None:
        metadata["citizen_id"] = citizen
    return None


def _first_pass(memory: MemoryReader, nodes: Iterable[BaseNode | _Record], plan: CallPlan) -> _Checked:
    """Every record of the call checked before the first write (``on_invalid="raise"``: all or nothing).

    Memories are validated (and fill ``plan``); relationships are placed, validated, and their endpoints
    found among the call's memories or in the store.  The first invalid record raises (``RelationshipError``
    for placement and endpoints).  The relationships come back with their models, for ``_ready`` to make
    their rows (through the worker they would be validated again, its pipes costing what the rows do).
    """
    homes: dict[str, dict[GraphKey, None]] = {}  # memory id -> its graphs in this call
    relationships: list[BaseNode | _Record] = []
    graphs: dict[GraphKey, str | None] = {}  # a call names a handful of graphs: each is checked once
    count = 0

    def bad_graph(key: GraphKey) -> str | None:
        if key not in graphs:
            try:
                graph_name(*key)
                graphs[key] = None
            except LevelError as exc:
                graphs[key] = str(exc)
        return graphs[key]

    for node in nodes:
        if is_relationship(node):
            relationships.append(node)
            continue
        count += 1
        errors, _, _, model = _check(node)
        if not errors:
            key = home_key(model.level, model.citizen_id)
            if (problem := bad_graph(key)) is not None:
                errors = [f"citizen_id: {problem}"]
        if errors:
            raise MemoryValidationError(record_id(node), errors, node.metadata.get(LINE_KEY))
        homes.setdefault(model.node_id, {})[key] = None
        plan.add_model(model)
    plan.finalize()

    checked: list[_Valid] = []
    wanted: dict[GraphKey, set[str]] = {}  # endpoints that are no memory of the call in their graph
    for node in relationships:
        line = node.metadata.get(LINE_KEY)
        problem = _place(node, homes)
        if problem is not None:
            raise RelationshipError(record_id(node), [problem], line)
        errors, warnings, _, model = _check(node)
        if errors:
            raise MemoryValidationError(record_id(node), errors, line)
        if model.level is None:
            raise RelationshipError(str(model.edge_id), [
                "cannot tell its level: give it a level or ingest it with its source memory"], line)
        key = home_key(model.level, model.citizen_id)
        if (problem := bad_graph(key)) is not None:
            raise RelationshipError(str(model.edge_id), [f"cannot tell its graph: {problem}"], line)
        for end in (model.source_id, model.target_id):
            if key not in homes.get(end, ()):
                wanted.setdefault(key, set()).add(end)
        checked.append((node, model, warnings))

    if wanted:  # reads only: a graph that does not exist is not made
        stored = {key: memory.level(*key).existing_ids(sorted(ids)) for key, ids in wanted.items()}
        for node, model, _ in checked:
            key = home_key(model.level, model.citizen_id)
            missing = [end for end in dict.fromkeys((model.source_id, model.target_id))
                       if key not in homes.get(end, ()) and end not in stored.get(key, ())]
            if missing:
                raise RelationshipError(str(model.edge_id), [
                    f"refers to missing memories {missing} in graph {graph_name(*key)!r}: "
                    "neither among the memories of this ingestion nor stored there"], node.metadata.get(LINE_KEY))
    return _Checked(checked, count)


def _ready(checked: list[_Valid]) -> _Pure:
    """Checked relationships as the pure steps and the worker would give them: completeness and warnings
    on the node, warnings in the report, the row of each by position."""
    from llama_consciousness.storage.records import prepare_edge

    part = IngestReport()
    nodes: list[BaseNode] = []
    prepared: dict[int, Any] = {}
    for position, (item, model, warnings) in enumerate(checked):
        node = _as_node(item)
        node.metadata["metadata_completeness"] = model.metadata_completeness
        if warnings:
            part.warnings.extend((record_id(node), warning) for warning in warnings)
            node.metadata["lc_warnings"] = warnings
        prepared[position] = prepare_edge(model)
        nodes.append(node)
    return nodes, part, prepared


def _ingest(
    memory: MemoryReader,
    source: str | Path | Sequence[MemoryNode | ConsciousnessRelationship | BaseNode],
    options: IngestOptions | None,
    *,
    progress: bool,
) -> IngestReport:
    o = options or IngestOptions()
    report = IngestReport()
    whole = o.on_invalid == "raise"  # all or nothing: a first pass checks every record before any write
    checked: _Checked | None = None
    everything: list[BaseNode] | list[_Record] | None = None  # what the first pass will check, when all is held
    nodes: Iterable[BaseNode]
    plan = CallPlan()  # filled before the first write: by the first pass, else from the records as given
    if isinstance(source, (str, Path)):
        path = check_memory_file(source)
        chars = path.stat().st_size  # bytes for characters: a file's records are mostly their text

        def skip(error: Any) -> None:
            report.reject(f"line {error.line}", "loader", [error.reason], error.line)

        on_error = None if o.on_bad_line == "raise" else skip
        if (on_error is None or whole) and path.stat().st_size <= KEEP_PARSED_BYTES:  # parsed once, kept
            parsed = list(iter_json_objects(path, on_error))
            records = len(parsed)
            if whole:
                everything = [_raw_record(obj, number) for number, obj in parsed]
            else:
                plan.add_objects(parsed)
                nodes = (_raw_text_node(obj, number) for number, obj in parsed)
        elif whole:  # a first read checks the file (and keeps its relationships), a second one feeds the memories
            checked = _first_pass(memory, (_raw_record(obj, number)
                                           for number, obj in iter_json_objects(path, on_error)), plan)
            records = checked.memories + len(checked.relationships)
            nodes = (_raw_text_node(obj, number) for number, obj in iter_json_objects(path, lambda error: None)
                     if obj.get("kind") != "relationship")  # its bad lines were reported by the first read
        else:  # a first read checks every line ("raise") or skips bad ones ("skip"), and fills the plan
            records = plan.add_objects(iter_json_objects(path, None if on_error is None else lambda error: None))
            if on_error is not None:  # lines, as the bar counts them
                records = _count_records(path)
            nodes = (_raw_text_node(obj, number) for number, obj in iter_json_objects(path, on_error))
    else:
        nodes = to_text_nodes(source)
        records = len(nodes)
        chars = sum(len(getattr(node, "text", "") or "") for node in nodes if not is_relationship(node))
        if whole:
            everything = nodes
        else:
            plan.add_all(nodes)
    if not whole:
        plan.finalize()
    workload = records  # what decides whether a worker pays: the records that need the pure steps
    if everything is not None:  # memories go on as TextNodes, built as the run needs them
        workload = sum(1 for item in everything if not is_relationship(item))
        nodes = (_as_node(item) for item in everything if not is_relationship(item))
    elif checked is not None:
        workload = checked.memories

    def first_pass() -> _Checked | None:  # once, when the store is about to get its first chunk
        nonlocal checked, everything
        if everything is not None:
            checked, everything = _first_pass(memory, everything, plan), None
        return checked

    from tqdm.auto import tqdm

    bar = tqdm(total=records, unit="record", desc="ingesting", disable=not progress)
    # Relationships go after all memories: one may refer to a memory later in the file.
    held: list[BaseNode] = []
    homes: dict[str, dict[GraphKey, None]] = {}  # memory id -> the graphs its records name

    def work() -> Iterator[list[BaseNode] | _Pure]:
        for chunk in _chunks(nodes, o.chunk_size, CHUNK_CHARS):
            records = [n for n in chunk if n.metadata.get("kind") != "relationship"]
            held.extend(n for n in chunk if n.metadata.get("kind") == "relationship")
            if not whole:
                for n in records:
                    if (key := _raw_home(n.metadata)) is not None:
                        homes.setdefault(n.node_id, {})[key] = None
            bar.update(len(records))
            if records:
                yield records
        if whole:  # placed, validated and checked by the first pass
            relationships, ready = first_pass().relationships, _ready
        else:
            relationships, ready = [], list
            for rel in held:  # a relationship lives in the graph of its source memory
                if (problem := _place(rel, homes)) is None:
                    relationships.append(rel)
                else:
                    report.reject(record_id(rel), "placement", [problem], rel.metadata.get(LINE_KEY))
        # Light to check, and each chunk costs a few round trips per graph: larger chunks.
        size = o.chunk_size * RELATIONSHIP_FACTOR
        for start in range(0, len(relationships), size):
            bar.update(min(size, len(relationships) - start))
            yield ready(relationships[start : start + size])

    try:
        _pipelined(memory, o, work(), report, workload, chars, gate=first_pass if whole else None, plan=plan)
    finally:
        bar.close()
    return report


def _count_records(path: Path) -> int:
    """Record lines of a file, at most, without parsing them (no blank lines, no comments, as the loader reads)."""
    with path.open("rb") as handle:
        return sum(1 for line in handle if (text := line.strip()) and not text.startswith((b"#", b"//")))
