"""``SixWayHybridRetriever``: vector + graph traversal over N1, N2, N3, concurrently.

For an intention, each level runs its channels (vector and graph by default,
keyword optionally) with every filter of the intention inside the queries,
every level's queries in flight at once (``StreamRetriever``).
Results come back as ``NodeWithScore`` with the full consciousness metadata
in ``node.metadata`` (so any LlamaIndex component downstream works), and as
the spec's ``ConsciousnessStream`` through ``retrieve_stream``.

A channel that fails or is slow becomes an error entry of its level (and a
warning in the log); the other channels still answer.  A citizen without an
N1 graph yet simply has an empty N1.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle

from llama_consciousness.entities import OfflineEntityExtractor
from llama_consciousness.nodes import record_text_node
from llama_consciousness.retrievers.base import StreamRetriever, existing_graphs, remaining_ms
from llama_consciousness.retrievers.config import RetrievalConfig
from llama_consciousness.schema import (
    ConsciousnessLevelResults,
    ConsciousnessNode,
    ConsciousnessRelationship,
    ConsciousnessStream,
    MemoryNode,
    RetrievalIntention,
)
from llama_consciousness.schema._time import utcnow
from llama_consciousness.schema.stream import LEVEL_KEYS
from llama_consciousness.scoring.fusion import path_relevance, weighted_rrf, weighted_score_fusion
from llama_consciousness.scoring.names import EntityIndex
from llama_consciousness.storage import channels as ch
from llama_consciousness.storage.filters import MemoryFilter
from llama_consciousness.storage import run_interleaved
from llama_consciousness.storage.level_store import LevelGraphStore, LevelPlans, Plan, VectorHit
from llama_consciousness.schema.memory import retrieved_node
from llama_consciousness.stream import assemble_stream, dedupe_relationships
from llama_consciousness.temporal import TemporalWindow
from llama_consciousness.storage.reader import MemoryReader

logger = logging.getLogger(__name__)

# Names written by other processes reach entity matching within this time
# (vector and graph channels see them at once); rebuilding the index of a
# 50K-memory level takes seconds, so it is not done often.
ENTITY_INDEX_TTL_S = 600.0
# Keys that are noise in an LLM prompt (ids, hashes, bookkeeping).
_LLM_HIDDEN = ["node_id", "citizen_id", "extra", "sensory_details", "metadata_completeness", "supersedes",
               "superseded_by", "correction_pattern_id", "retrieval_sources", "start_id", "quarantined"]
# Flags the LLM sees only when set: a memory the injection guard flagged shows
# "injection_suspected: True" before its text; an ordinary memory's text is as before.
_LLM_HIDDEN_UNLESS_SET = ["injection_suspected"]


_Fused = tuple[dict[str, dict[str, Any]], list[tuple[str, float]]]
"""Every memory found (by ``level:node_id``) and the fused order of their keys, with scores."""


@dataclass
class LevelOutcome:
    """What the channels of one level found."""

    level: str
    vector: list[VectorHit] = field(default_factory=list)
    graph: list[ch.GraphHit] = field(default_factory=list)
    keyword: list[ch.KeywordHit] = field(default_factory=list)
    relationships: list[ConsciousnessRelationship] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    queries: int = 0


class SixWayHybridRetriever(StreamRetriever[RetrievalIntention]):
    """Parallel vector + graph (+ keyword) retrieval over the three memory levels.

    ``memory`` is a :class:`~llama_consciousness.ConsciousnessMemory`.  A
    plain query string becomes a :class:`RetrievalIntention` with the
    retriever's ``citizen_id`` and ``intention_defaults`` (e.g.
    ``{"temporal_mode": "evolution"}``); pass an intention to
    :meth:`retrieve_intention` or :meth:`retrieve_stream` for full control.
    """

    def __init__(
        self,
        memory: MemoryReader,
        citizen_id: str | None = None,
        *,
        config: RetrievalConfig | None = None,
        intention_defaults: dict[str, Any] | None = None,
        entity_extractor: Any = None,
        stream_postprocessors: Sequence[Any] | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        super().__init__(stream_postprocessors, callback_manager=callback_manager, verbose=verbose)
        self.memory = memory
        self.citizen_id = citizen_id
        self.config = config or RetrievalConfig()
        self.intention_defaults = dict(intention_defaults or {})
        self.entity_extractor = entity_extractor or OfflineEntityExtractor()
        # shared by every retriever of the memory: building it is the costly part
        self._entity_indexes: dict[str, tuple[int, float, EntityIndex]] = memory.entity_index_cache
        self._fulltext_ready: set[str] = set()
        self._cache: dict[str, tuple[float, tuple[int, ...], ConsciousnessStream, list[NodeWithScore]]] = {}
        # fail fast on a bad default, not at the first query
        if self.intention_defaults or citizen_id:
            self.intention_for("probe")

    # -- intentions -------------------------------------------------------------

    def intention_for(self, query: str | QueryBundle | RetrievalIntention) -> RetrievalIntention:
        """The intention a query stands for (the retriever's defaults filled in)."""
        if isinstance(query, RetrievalIntention):
            return query
        text = query.query_str if isinstance(query, QueryBundle) else query
        data = {"citizen_id": self.citizen_id or "default", **self.intention_defaults, "query_text": text}
        return RetrievalIntention(**data)

    request_for = intention_for

    def retrieve_intention(self, intention: RetrievalIntention) -> list[NodeWithScore]:
        """The nodes for a full intention (no stream postprocessors)."""
        return self.gather(intention)[1]

    async def aretrieve_intention(self, intention: RetrievalIntention) -> list[NodeWithScore]:
        return await asyncio.to_thread(self.retrieve_intention, intention)

    # -- cache --------------------------------------------------------------------

    def _cache_key(self, intention: RetrievalIntention) -> str:
        # In current mode "now" moves; a cached stream stands for the whole
        # TTL (a fact expiring inside it lingers until the entry does), which
        # is the trade the spec's cache makes.
        data = intention.model_dump(mode="json", exclude={"intention_id", "generated_at", "generated_by"})
        payload = json.dumps([data, self.config.model_dump(mode="json")], sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()

    def _versions(self, intention: RetrievalIntention) -> tuple[int, ...]:
        return tuple(self.memory.graph_version(self._plans(lvl, intention).graph) for lvl in intention.query_levels)

    def _cached(self, intention: RetrievalIntention) -> tuple[ConsciousnessStream, list[NodeWithScore]] | None:
        if self.config.cache_ttl_s is None:
            return None
        entry = self._cache.get(self._cache_key(intention))
        if entry and entry[0] > time.monotonic() and entry[1] == self._versions(intention):
            # copies: a postprocessor that rescores must not rescore the cache
            return entry[2].model_copy(deep=True), [n.model_copy(deep=True) for n in entry[3]]
        return None

    def _store_cache(self, intention: RetrievalIntention, stream: ConsciousnessStream, nodes: list[NodeWithScore]) -> None:
        if self.config.cache_ttl_s is None:
            return
        if len(self._cache) > 1000:
            self._cache.clear()
        # copies: the caller's postprocessors write into the nodes they were given
        self._cache[self._cache_key(intention)] = (
            time.monotonic() + self.config.cache_ttl_s, self._versions(intention),
            stream.model_copy(deep=True), [n.model_copy(deep=True) for n in nodes],
        )

    # -- shared pieces --------------------------------------------------------------

    def _plans(self, level: str, intention: RetrievalIntention) -> LevelPlans:
        return self.memory.plans(level, intention.citizen_id if level == "N1" else None)

    def _query_names(self, text: str) -> list[str]:
        return self.entity_extractor.extract_query_entities(text)

    def _index_fresh(self, graph: str) -> EntityIndex | None:
        entry = self._entity_indexes.get(graph)
        if entry and entry[0] == self.memory.graph_version(graph) and time.monotonic() - entry[1] < ENTITY_INDEX_TTL_S:
            return entry[2]
        return None

    def _remember_index(self, graph: str, names: list[tuple[str, str]]) -> EntityIndex:
        index = EntityIndex(names)
        self._entity_indexes[graph] = (self.memory.graph_version(graph), time.monotonic(), index)
        return index

    def _start_ids(self, index: EntityIndex, names: Sequence[str]) -> list[str]:
        """Memories the query names, matched fuzzily against the level's names."""
        out: list[str] = []
        for name in names:
            for match in index.match(name, threshold=self.config.entity_match_threshold, limit=3):
                if match.entity_id not in out:
                    out.append(match.entity_id)
        return out[: self.config.max_start_entities]

    def _window_and_filter(self, intention: RetrievalIntention) -> MemoryFilter:
        return MemoryFilter.from_intention(intention, TemporalWindow.from_intention(intention))

    # -- sync path ----------------------------------------------------------------

    def gather(self, intention: RetrievalIntention) -> tuple[ConsciousnessStream, list[NodeWithScore]]:
        """Every channel of every level at once, fused; the stream of what they found and the ranked nodes."""
        intention = self.intention_for(intention)
        cached = self._cached(intention)
        if cached:
            return cached
        started = time.perf_counter()
        retrieved_at = utcnow()
        memory_filter = self._window_and_filter(intention)
        embedding = self.memory.embed_query(intention.query_text)
        names = self._query_names(intention.query_text)
        # one deadline for every query of the retrieval: a stalled server costs channel_timeout_s, once
        deadline = time.monotonic() + self.config.channel_timeout_s
        existing = existing_graphs(self.memory, self.config.channel_timeout_s)
        outcomes = self._levels_sync(intention, memory_filter, embedding, names, existing, deadline)
        fused = self._rank(outcomes)
        targets = self._neighbour_targets(fused, outcomes)
        if targets:
            self._add_neighbours(fused, self._neighbours_sync(targets, intention, memory_filter, deadline))
        return self._finish(intention, outcomes, retrieved_at, started, fused)

    def _neighbours_sync(self, targets: dict[str, list[str]], intention: RetrievalIntention,
                         memory_filter: MemoryFilter, deadline: float) -> dict[str, dict[str, list[MemoryNode]]]:
        jobs = [(self._plans(level, intention).graph,
                 ch.neighbours(self._plans(level, intention), node_ids, memory_filter, self.config.neighbours_per_memory))
                for level, node_ids in targets.items()]
        found = run_interleaved(self.memory.db, jobs, remaining_ms(deadline))
        near: dict[str, dict[str, list[MemoryNode]]] = {}
        for level, result in zip(targets, found):
            if isinstance(result, BaseException):  # the ranking without neighbours still stands
                logger.warning("retrieval: neighbours in %s unavailable: %s", level, result)
                result = {}
            near[level] = result
        return near

    def _levels_sync(self, intention: RetrievalIntention, memory_filter: MemoryFilter, embedding: list[float],
                     names: list[str], existing: set[str] | Exception, deadline: float) -> list[LevelOutcome]:
        """Every channel of every level, all in flight at once (``run_interleaved``)."""
        outcomes: list[LevelOutcome] = []
        jobs: list[tuple[str, Plan]] = []
        # each job's level, its channels, and the vector hits a walk-from-them job built before it failed
        owners: list[tuple[LevelOutcome, tuple[str, ...], list[list[VectorHit]]]] = []
        timeout_ms = remaining_ms(deadline)
        k = intention.max_results_per_level
        for level in intention.query_levels:
            out = LevelOutcome(level)
            outcomes.append(out)
            plans = self._plans(level, intention)
            if self._unreachable(out, existing) or plans.graph not in existing:
                continue
            store = LevelGraphStore(self.memory.db, plans, timeout_ms=timeout_ms)
            channels = list(self.config.channels)
            try:
                start = self._start_for(plans, names, remaining_ms(deadline)) if "graph" in channels else []
            except Exception as exc:
                self._channel_failed(out, "graph", exc)
                channels.remove("graph")
            if "graph" in channels and not start and self.config.fallback_start and "vector" in channels:
                # the traversal starts from the vector answers: one job for both
                channels.remove("vector")
                channels.remove("graph")
                found: list[list[VectorHit]] = []
                jobs.append((plans.graph, self._vector_then_graph(plans, level, embedding, k, memory_filter, found)))
                owners.append((out, ("vector", "graph"), found))
            for channel in channels:
                try:
                    if channel == "vector":
                        plan = self._vector_plan(plans, level, embedding, k, memory_filter)
                    elif channel == "graph":
                        plan = self._graph_plan(plans, level, embedding, start, k, memory_filter)
                    else:
                        if plans.graph not in self._fulltext_ready:
                            store.run(ch.ensure_fulltext(plans))
                            self._fulltext_ready.add(plans.graph)
                        plan = ch.keyword_search(plans, intention.query_text, k, memory_filter)
                except Exception as exc:  # isolate: one channel's failure is an entry, not an exception
                    self._channel_failed(out, channel, exc)
                    continue
                jobs.append((plans.graph, plan))
                owners.append((out, (channel,), []))
        for (out, channels, found), result in zip(owners, run_interleaved(self.memory.db, jobs, remaining_ms(deadline))):
            self._settle(out, channels, result, found)
        return outcomes

    def _settle(self, out: LevelOutcome, channels: tuple[str, ...], result: Any,
                found: list[list[VectorHit]]) -> None:
        """A job's result into its level's outcome: one value per channel, or an error entry per channel.

        A walk from the vector hits that fails (or times out) after those
        hits were built keeps them: only the graph channel is an error.
        """
        if isinstance(result, BaseException):
            if found and channels == ("vector", "graph"):
                out.vector = found[0]
                out.queries += 1
                channels = ("graph",)
            for channel in channels:
                self._channel_failed(out, channel, result)
            return
        for channel, value in zip(channels, result if len(channels) > 1 else (result,)):
            setattr(out, channel, value)
            out.queries += 1

    def _start_for(self, plans: LevelPlans, names: list[str], timeout_ms: int) -> list[str]:
        """The memories the query names in this level (the level's names are read once per TTL, within the timeout)."""
        index = self._index_fresh(plans.graph)
        if index is None:
            (found,) = run_interleaved(self.memory.db, [(plans.graph, plans.named_nodes_all())], timeout_ms)
            if isinstance(found, BaseException):
                raise found
            index = self._remember_index(plans.graph, found)
        return self._start_ids(index, names)

    def _vector_plan(self, plans: LevelPlans, level: str, embedding: list[float], k: int,
                     memory_filter: MemoryFilter) -> Plan:
        return self.memory.vectors(level).search(plans, embedding, k, memory_filter)

    def _graph_plan(self, plans: LevelPlans, level: str, embedding: list[float], start: list[str], k: int,
                    memory_filter: MemoryFilter) -> Plan:
        if not start and self.config.fallback_start:
            hits = yield from self._vector_plan(plans, level, embedding, self.config.fallback_start, memory_filter)
            start = self._fallback_ids(hits)
        return (yield from ch.traverse(plans, start, k, memory_filter, depth=self.config.graph_depth,
                                       include_start=True))

    def _fallback_ids(self, hits: list[VectorHit]) -> list[str]:
        """Where the walk starts when the question names none of the level's memories: the nearest ones."""
        return [h.node.node_id for h in hits[: self.config.fallback_start]]

    def _vector_then_graph(self, plans: LevelPlans, level: str, embedding: list[float], k: int,
                           memory_filter: MemoryFilter, found: list[list[VectorHit]]) -> Plan:
        """Both channels of a level whose question names none of its memories: the walk starts from the nearest.

        The vector hits go into ``found`` as soon as they are in, so that a
        walk that fails after them does not take them down (``_settle``).
        """
        vector = yield from self._vector_plan(plans, level, embedding, k, memory_filter)
        found.append(vector)
        graph = yield from ch.traverse(plans, self._fallback_ids(vector), k, memory_filter,
                                       depth=self.config.graph_depth, include_start=True)
        return vector, graph

    # -- assembly -------------------------------------------------------------------

    def _unreachable(self, out: LevelOutcome, existing: set[str] | Exception) -> bool:
        """When the graphs could not even be listed, every channel of the level failed."""
        if not isinstance(existing, Exception):
            return False
        for channel in self.config.channels:
            self._channel_failed(out, channel, existing)
        return True

    def _channel_failed(self, out: LevelOutcome, channel: str, exc: BaseException) -> None:
        what = "timed out" if isinstance(exc, (asyncio.TimeoutError, TimeoutError)) else f"{type(exc).__name__}: {exc}"
        message = f"{out.level}_{channel} {what}"
        out.errors.append(message)
        logger.warning("retrieval channel failed: %s", message)

    def _finish(self, intention: RetrievalIntention, outcomes: list[LevelOutcome], retrieved_at: Any,
                started: float, fused: _Fused | None = None) -> tuple[ConsciousnessStream, list[NodeWithScore]]:
        levels: dict[str, ConsciousnessLevelResults] = {}
        for out in outcomes:
            relationships = dedupe_relationships([r for hit in out.graph for r in hit.path])
            levels[LEVEL_KEYS[out.level]] = ConsciousnessLevelResults(
                vector_results=[self._cnode(h.node, f"{out.level}_vector", h.similarity) for h in out.vector],
                graph_results=[self._cnode(h.node, f"{out.level}_graph", path_relevance(h.path_energy, self.config.graph_depth)) for h in out.graph],
                keyword_results=[self._cnode(h.node, f"{out.level}_keyword", h.score) for h in out.keyword],
                relationships=relationships,
                error="; ".join(out.errors) or None,
            )
        found, ranked = fused or self._rank(outcomes)
        if self.config.final_top_k is not None:
            ranked = ranked[: self.config.final_top_k]
        nodes = [self._node_with_score(found[key], score) for key, score in ranked]
        for node in nodes:  # postprocessors in a query engine never see the intention
            node.node.metadata["temporal_mode"] = intention.temporal_mode
            node.node.excluded_embed_metadata_keys.append("temporal_mode")
            node.node.excluded_llm_metadata_keys.append("temporal_mode")
        latency_ms = int((time.perf_counter() - started) * 1000)
        stream = assemble_stream(intention.intention_id, levels, retrieved_at=retrieved_at,
                                 latency_ms=latency_ms, query_count=sum(o.queries for o in outcomes))
        self._store_cache(intention, stream, nodes)
        return stream, nodes

    @staticmethod
    def _cnode(node: MemoryNode, source: str, score: float) -> ConsciousnessNode:
        return retrieved_node(node, source, score)

    def _rank(self, outcomes: list[LevelOutcome]) -> _Fused:
        """Every memory found once (with each channel that found it), and the fused order."""
        lists: dict[str, list[tuple[MemoryNode, float, dict[str, Any]]]] = {}
        for channel in ("vector", "graph", "keyword"):
            for out in outcomes:
                source = f"{out.level}_{channel}"
                if channel == "vector":
                    lists[source] = [(h.node, h.similarity, {}) for h in out.vector]
                elif channel == "graph":
                    lists[source] = [(h.node, path_relevance(h.path_energy, self.config.graph_depth), ch.describe(h)) for h in out.graph]
                else:
                    lists[source] = [(h.node, h.score, ch.describe(h)) for h in out.keyword]
        found: dict[str, dict[str, Any]] = {}
        for source, items in lists.items():
            level = source.split("_", 1)[0]
            for node, score, details in items:
                entry = found.setdefault(f"{level}:{node.node_id}", {"node": node, "level": level, "score": score,
                                                                     "sources": [], "details": {}})
                if source not in entry["sources"]:
                    entry["sources"].append(source)
                entry["details"].update(details)
        keyed = {s: [(f"{s.split('_', 1)[0]}:{n.node_id}", score) for n, score, _ in items] for s, items in lists.items()}
        if self.config.fusion == "rrf":
            weights = {source: self.config.channel_weights.get(source.split("_", 1)[1], 1.0) for source in lists}
            ranked = weighted_rrf({s: [key for key, _ in items] for s, items in keyed.items()}, weights,
                                  k=self.config.rrf_k)
        elif self.config.fusion == "score":
            weights = {source: self.config.score_weights.get(source.split("_", 1)[1], 0.0) for source in lists}
            ranked = weighted_score_fusion(keyed, weights)
        else:
            ranked = [(key, entry["score"]) for key, entry in found.items()]
        return found, list(ranked)

    def _neighbour_targets(self, fused: _Fused, outcomes: list[LevelOutcome]) -> dict[str, list[str]]:
        """Per level, the node ids of the top fused memories whose neighbours join the answer."""
        top = self.config.neighbour_expansion
        if top <= 0 or "graph" not in self.config.channels:
            return {}
        found, ranked = fused
        targets: dict[str, list[str]] = {}
        failed = {out.level for out in outcomes if out.errors}
        for key, _ in ranked[:top]:
            entry = found[key]
            if entry["level"] not in failed:
                targets.setdefault(entry["level"], []).append(entry["node"].node_id)
        return targets

    def _add_neighbours(self, fused: _Fused, near: dict[str, dict[str, list[MemoryNode]]]) -> None:
        """Put the neighbours of the top memories after the first ``neighbours_after`` (in place).

        A neighbour is one link from a top memory (a traversal of depth 1
        started from the best answers rather than from the names in the
        question: in a conversation, the turns around the one that matched).
        It comes with source ``<level>_neighbour`` and ``neighbour_of``, and
        takes the score of the memory it follows, so scores never increase
        down the list.  The stream's level results keep what the channels
        themselves found.
        """
        found, ranked = fused
        keep = self.config.neighbours_after
        inserted: list[tuple[str, float]] = []
        seen = {key for key, _ in ranked[:keep]}
        floor = ranked[min(keep, len(ranked)) - 1][1] if ranked else 0.0
        for key, _ in ranked[: self.config.neighbour_expansion]:
            entry = found[key]
            for node in near.get(entry["level"], {}).get(entry["node"].node_id, []):
                near_key = f"{entry['level']}:{node.node_id}"
                if near_key in seen:
                    continue
                seen.add(near_key)
                source = f"{entry['level']}_neighbour"
                if near_key not in found:
                    found[near_key] = {"node": node, "level": entry["level"], "score": floor, "sources": [source],
                                       "details": {"neighbour_of": entry["node"].node_id}}
                elif source not in found[near_key]["sources"]:
                    found[near_key]["sources"].append(source)
                inserted.append((near_key, floor))
        if not inserted:
            return
        rest = [(key, score) for key, score in ranked[keep:] if key not in seen]
        ranked[:] = ranked[:keep] + inserted + rest

    @staticmethod
    def _node_with_score(entry: dict[str, Any], score: float) -> NodeWithScore:
        node: MemoryNode = entry["node"]
        metadata = node.model_dump(mode="json", exclude={"embedding"})
        metadata.update(entry["details"])
        metadata.update({
            "level": entry["level"],
            "retrieval_source": entry["sources"][0],
            "retrieval_sources": list(entry["sources"]),
            "relevance_score": float(entry["score"]),
        })
        text_node = record_text_node(
            # Levels are separate graphs: the same node_id in N1 and N2 are two
            # memories.  The plain id stays in metadata["node_id"].
            f"{entry['level']}:{node.node_id}",
            node.description or node.name,
            metadata,
            excluded_embed_metadata_keys=list(metadata),
            excluded_llm_metadata_keys=[k for k in _LLM_HIDDEN if k in metadata]
            + [k for k in _LLM_HIDDEN_UNLESS_SET if k in metadata and not metadata[k]],
        )
        return NodeWithScore(node=text_node, score=float(score))
