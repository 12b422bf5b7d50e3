"""What both retrievers share: one orchestration, a stream with its nodes, LlamaIndex's instrumentation.

A retrieval is written once, synchronously, in :meth:`StreamRetriever.gather`:
each level's queries go out at once on their own connections, so the sync path
is already concurrent; the async methods run it in a worker thread (any event
loop, never blocked).  Nothing of one call is kept on the retriever: one
retriever serves many threads and conversations.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import Any, Generic, TypeVar

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks import CallbackManager
from llama_index.core.callbacks.schema import CBEventType, EventPayload
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.events.retrieval import RetrievalEndEvent, RetrievalStartEvent
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle

from llama_consciousness.nodes import record_text_node
from llama_consciousness.postprocessors.pipeline import complete_stream
from llama_consciousness.schema import ConsciousnessStream
from llama_consciousness.errors import StorageError
from llama_consciousness.scoring.fusion import later_first
from llama_consciousness.scoring.recency import Candidate, later_versions, latest_first
from llama_consciousness.storage import graph_states
from llama_consciousness.storage.level_store import GRAPH_REGISTRY
from llama_consciousness.storage.reader import MemoryReader

dispatcher = get_dispatcher(__name__)

R = TypeVar("R")  # the request a retriever answers (RetrievalIntention or StateBasedRetrieval)

# Keys that are noise in an LLM prompt (ids, hashes, bookkeeping).
LLM_HIDDEN = ("node_id", "citizen_id", "extra", "sensory_details", "metadata_completeness", "supersedes",
              "superseded_by", "correction_pattern_id", "retrieval_sources", "start_id", "quarantined",
              "temporal_mode", "supersession_source", "supersession_confidence", "possibly_superseded_by",
              "possibly_outdated_by", "possibly_outdated_since", "unsuperseded_from", "unsupersede_reason", "retrieval_id",
              "forgotten_by", "retractions")
# Shown to the LLM only when set: a flagged memory reads "injection_suspected: True" before its text, one that
# a later memory may replace "possibly_outdated: True", a forgotten one (full history) when and why.
LLM_HIDDEN_UNLESS_SET = ("injection_suspected", "possibly_outdated", "forgotten_at", "forgotten_reason")
MISSING = object()


def remaining_ms(deadline: float) -> int:
    """Milliseconds left before ``deadline`` (a ``time.monotonic()`` value), never negative."""
    return max(0, int((deadline - time.monotonic()) * 1000))


class GraphListing(dict):
    """Graph name -> None (read it) or the error that stops reading it; ``unreachable(name)`` says why a
    graph not listed cannot be read now (a cluster master that does not answer), None when it was never
    written."""

    def __init__(self, entries: dict[str, Exception | None],
                 unreachable: Callable[[str], Exception | None] | None = None) -> None:
        super().__init__(entries)
        self.unreachable = unreachable


def existing_graphs(memory: MemoryReader, timeout_s: float, graphs: Sequence[str]) -> GraphListing | Exception:
    """Of the level graphs ``graphs`` a retrieval reads: those to read (name -> None), those written before
    and now gone (name -> their error: deleted, or replaced by another key), or why the server cannot say
    (every level is then an error entry).  Asked about these graphs alone, so that the cost does not grow
    with the number of citizens on the server.

    A graph never written is absent: its level is empty, not an error.  When the memory's own embedded
    server died, it is started again and asked once more.  On a cluster, a graph whose master does not
    answer is an error, the others are read.
    """
    states = getattr(memory.db, "graph_states", None)
    unreachable = None
    for attempt in range(2):
        try:
            if states is not None:
                present, written, unreachable = states(GRAPH_REGISTRY, graphs, int(timeout_s * 1000))
            else:
                present, written = graph_states(memory.db, graphs, int(timeout_s * 1000))
            break
        except Exception as exc:  # server down or stalled
            if attempt == 1 or not memory.ensure_server():
                return exc
    lost = {name: StorageError(f"level graph {name!r} is gone: it was written, then deleted or replaced by "
                               "another key") for name in written.difference(present)
            if unreachable is None or unreachable(name) is None}
    return GraphListing({**lost, **dict.fromkeys(present)}, unreachable)


def graph_problem(existing: dict[str, Exception | None] | Exception, graph: str) -> Exception | None | bool:
    """Why ``graph`` cannot be read (an exception), None to read it, False when it was never written."""
    if isinstance(existing, Exception):
        return existing
    if graph in existing:
        return existing[graph]
    unreachable = getattr(existing, "unreachable", None)
    problem = unreachable(graph) if unreachable is not None else None
    return problem if problem is not None else False


def channel_error(level: str, channel: str, exc: BaseException, log: logging.Logger) -> str:
    """The error entry of a failed channel (or level), logged as a warning."""
    what = "timed out" if isinstance(exc, TimeoutError) else f"{type(exc).__name__}: {exc}"
    message = f"{level}_{channel} {what}"
    log.warning("retrieval channel failed: %s", message)
    return message


def cached(cache: dict[str, tuple[int, float, Any]], memory: MemoryReader, graph: str, ttl_s: float) -> Any:
    """What ``cache`` holds for ``graph`` while the graph is unchanged and ``ttl_s`` has not passed, else MISSING."""
    entry = cache.get(graph)
    if entry and entry[0] == memory.graph_version(graph) and time.monotonic() - entry[1] < ttl_s:
        return entry[2]
    return MISSING


def remember(cache: dict[str, tuple[int, float, Any]], graph: str, value: Any, version: int) -> Any:
    """Keep ``value`` for ``graph`` as of ``version``, the graph's version taken BEFORE ``value`` was read: a
    write meanwhile then leaves it stale (the version after the read could claim a write the read missed)."""
    cache[graph] = (version, time.monotonic(), value)
    return value


def later_statements_first(ranked: list[tuple[str, float]], found: dict[str, dict[str, Any]]
                           ) -> list[tuple[str, float]]:
    """``ranked`` (keys of ``found``, ``<level>:<node_id>``) with each memory that a later one may replace
    (``possibly_superseded_by``, still current) marked ``possibly_outdated_by`` and moved below that later
    one when both were found (``scoring.fusion.later_first``)."""
    successors: dict[str, str] = {}
    for key, _ in ranked:
        entry = found[key]
        later = entry["node"].possibly_superseded_by
        if later and entry["node"].expired_at is None:
            entry["details"].update(possibly_outdated_by=later, possibly_outdated=True)
            successors[key] = f"{entry['level']}:{later}"
    return later_first(ranked, successors.get) if successors else ranked


READ_TIME_MODES = ("current", "evolution")
"""The temporal modes in which retrieved memories giving the same thing other values are put later first."""


def later_versions_first(ranked: list[tuple[str, float]], found: dict[str, dict[str, Any]], question: str,
                         temporal_mode: str) -> list[tuple[str, float]]:
    """Read-time knowledge updates (``scoring.recency``): in current and evolution mode, found memories of one
    level that give what ``question`` asks about different values are brought together at the place of the
    best-ranked of them, latest first (``latest_first``), and each but the latest is marked
    ``possibly_outdated_by`` it (with ``possibly_outdated_since``, its date).  Nothing is written: the mark
    holds for this answer only."""
    if temporal_mode not in READ_TIME_MODES or len(ranked) < 2 or not question:
        return ranked
    by_level: dict[str, list[Candidate]] = {}
    for key, _ in ranked:
        entry = found[key]
        node = entry["node"]
        if node.expired_at is None and not entry["details"].get("possibly_outdated_by"):
            by_level.setdefault(entry["level"], []).append(
                Candidate(key, node.description or node.name, node.valid_at))
    successors: dict[str, str] = {}
    for candidates in by_level.values():
        successors.update(later_versions(question, candidates))
    for earlier, later in successors.items():
        later_node = found[later]["node"]
        found[earlier]["details"].update(possibly_outdated_by=later_node.node_id, possibly_outdated=True,
                                         possibly_outdated_since=later_node.valid_at.isoformat())
    if not successors:
        return ranked
    return latest_first(ranked, successors, {key: found[key]["node"].valid_at for key, _ in ranked})


def result_node(entry: dict[str, Any], score: float, temporal_mode: str,
                hidden: Sequence[str] = LLM_HIDDEN, retrieval_id: str | None = None) -> NodeWithScore:
    """A found memory as a node: id ``<level>:<node_id>`` (levels are separate graphs: the same
    node_id in N1 and N2 are two memories), every field of the memory and how it was found in the
    metadata, with the temporal mode (postprocessors in a query engine never see the request)."""
    node = entry["node"]
    metadata = node.model_dump(mode="json", exclude={"embedding"})
    metadata.update(entry["details"])
    metadata.update(level=entry["level"], retrieval_source=entry["sources"][0],
                    retrieval_sources=list(entry["sources"]), relevance_score=float(entry["score"]),
                    temporal_mode=temporal_mode)
    if retrieval_id is not None:  # which retrieval found it: record_use counts a retrieval once
        metadata["retrieval_id"] = retrieval_id
    text_node = record_text_node(
        f"{entry['level']}:{node.node_id}", node.description or node.name, metadata,
        excluded_embed_metadata_keys=list(metadata),
        excluded_llm_metadata_keys=[k for k in hidden if k in metadata]
        + [k for k in LLM_HIDDEN_UNLESS_SET if not metadata.get(k, True)],
    )
    return NodeWithScore(node=text_node, score=float(score))


class StreamRetriever(BaseRetriever, Generic[R]):
    """A LlamaIndex retriever that also answers with the spec's consciousness stream.

    Subclasses give :meth:`request_for` and :meth:`gather`.  ``retrieve`` returns
    the nodes as the channels ranked them; ``retrieve_stream`` runs the
    ``stream_postprocessors`` too (a query engine runs its own postprocessors on
    ``retrieve``'s nodes, and running them twice would rank twice).
    """

    def __init__(self, stream_postprocessors: Sequence[BaseNodePostprocessor] | None = None,
                 callback_manager: CallbackManager | None = None, verbose: bool = False) -> None:
        super().__init__(callback_manager=callback_manager, verbose=verbose)
        self.stream_postprocessors = list(stream_postprocessors or [])

    def request_for(self, query: Any) -> R:
        raise NotImplementedError

    def gather(self, request: R) -> tuple[ConsciousnessStream, list[NodeWithScore]]:
        """The retrieval: the stream of what the channels found, and the ranked nodes."""
        raise NotImplementedError

    def _admitted(self, request: R) -> tuple[ConsciousnessStream, list[NodeWithScore]]:
        """``gather`` once the memory admits another retrieval (``memory.retrievals``): callers beyond
        what its connections serve at once wait their turn here, before their deadline starts."""
        with getattr(getattr(self, "memory", None), "retrievals", None) or nullcontext():
            return self.gather(request)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return self._admitted(self.request_for(query_bundle))[1]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return await asyncio.to_thread(self._retrieve, query_bundle)

    @dispatcher.span
    def retrieve_stream_and_nodes(self, request: Any = None) -> tuple[ConsciousnessStream, list[NodeWithScore]]:
        """The stream completed by ``stream_postprocessors``, and the nodes as they left them.

        Emits what ``retrieve`` emits: a dispatcher span, retrieval start and end
        events, and the callback manager's RETRIEVE event.
        """
        request = self.request_for(request)
        bundle = QueryBundle(str(getattr(request, "query_text", "") or ""))
        self._check_callback_manager()
        dispatcher.event(RetrievalStartEvent(str_or_query_bundle=bundle))
        with self.callback_manager.as_trace("query"):
            with self.callback_manager.event(
                CBEventType.RETRIEVE, payload={EventPayload.QUERY_STR: bundle.query_str}
            ) as retrieve_event:
                stream, nodes = self._admitted(request)
                if self.stream_postprocessors:
                    stream, nodes = complete_stream(stream, nodes, request, self.stream_postprocessors)
                retrieve_event.on_end(payload={EventPayload.NODES: nodes})
        dispatcher.event(RetrievalEndEvent(str_or_query_bundle=bundle, nodes=nodes))
        return stream, nodes

    async def aretrieve_stream_and_nodes(self, request: Any = None) -> tuple[ConsciousnessStream, list[NodeWithScore]]:
        return await asyncio.to_thread(self.retrieve_stream_and_nodes, request)

    def retrieve_stream(self, request: Any = None) -> ConsciousnessStream:
        """The spec's consciousness stream (complete with ``stream_postprocessors``)."""
        return self.retrieve_stream_and_nodes(request)[0]

    async def aretrieve_stream(self, request: Any = None) -> ConsciousnessStream:
        return (await self.aretrieve_stream_and_nodes(request))[0]
