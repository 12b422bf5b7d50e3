"""``SixWayHybridRetriever``: vector + graph (+ keyword) over N1, N2, N3, every query in flight at once.

Every filter of the intention is inside the queries.  A channel that fails or is slow becomes an error
entry of its level; the others still answer.
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
from llama_consciousness.retrievers.base import (
    StreamRetriever,
    channel_error,
    existing_graphs,
    graph_problem,
    later_statements_first,
    later_versions_first,
    remaining_ms,
    result_node,
)
from llama_consciousness.retrievers.config import CHANNELS, RetrievalConfig
from llama_consciousness.schema import ConsciousnessLevelResults, ConsciousnessStream, MemoryNode, RetrievalIntention
from llama_consciousness.schema._time import parse_time, utcnow
from llama_consciousness.schema.memory import retrieved_node
from llama_consciousness.schema.stream import LEVEL_KEYS
from llama_consciousness.scoring.fusion import path_relevance, weighted_rrf, weighted_score_fusion
from llama_consciousness.storage import channels as ch
from llama_consciousness.storage import run_interleaved
from llama_consciousness.storage.filters import MemoryFilter
from llama_consciousness.storage.level_store import LevelPlans, Plan, VectorHit
from llama_consciousness.storage.spreading import spread
from llama_consciousness.scoring.activation import SpreadSettings, scaled_to_best
from llama_consciousness.scoring.traversal import calculate_traversal_probability
from llama_consciousness.storage.reader import MemoryReader
from llama_consciousness.stream import assemble_stream, dedupe_relationships
from llama_consciousness.temporal import TemporalWindow

logger = logging.getLogger(__name__)

_Fused = tuple[dict[str, dict[str, Any]], list[tuple[str, float]]]
"""Every memory found (by ``level:node_id``) and the fused order of their keys, with scores."""


@dataclass
class LevelOutcome:
    """What the channels of one level found."""

    level: str
    vector: list[VectorHit] = field(default_factory=list)
    graph: list[ch.GraphHit] = field(default_factory=list)
    keyword: list[ch.KeywordHit] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    queries: int = 0

    def failed(self, channel: str, exc: BaseException) -> None:
        self.errors.append(channel_error(self.level, channel, exc, logger))


def per_level_cap(ranked: list[tuple[str, float]], found: dict[str, dict[str, Any]], cap: int
                  ) -> list[tuple[str, float]]:
    """The fused order with at most ``cap`` memories of each level: each channel brought up to ``cap``, and
    the intention asked for ``cap`` per level, not for ``cap`` per channel plus neighbours."""
    kept: dict[str, int] = {}
    out = []
    for key, score in ranked:
        level = found[key]["level"]
        if kept.get(level, 0) < cap:
            kept[level] = kept.get(level, 0) + 1
            out.append((key, score))
    return out


def is_long(node: MemoryNode, longest: int | None) -> bool:
    """Whether a memory is longer than ``longest`` characters (``RetrievalConfig.long_memory_chars``; None:
    none is)."""
    return longest is not None and len(node.description or node.name) > longest


def mostly_long(found: dict[str, dict[str, Any]], longest: int | None) -> bool:
    """Whether more than half of the memories found are longer than ``longest`` characters."""
    return 2 * sum(1 for entry in found.values() if is_long(entry["node"], longest)) > len(found) > 0


class SixWayHybridRetriever(StreamRetriever[RetrievalIntention]):
    """Parallel vector + graph (+ keyword) retrieval over the three memory levels; a plain query string
    becomes a :class:`RetrievalIntention` with the retriever's ``citizen_id`` and ``intention_defaults``."""

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
        self._cache: dict[str, tuple[float, tuple[int, ...], ConsciousnessStream, list[NodeWithScore]]] = {}
        if self.intention_defaults or citizen_id:
            self.intention_for("probe")  # fail fast on a bad default, not at the first query

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
        """``retrieve_intention`` in a worker thread: the ranked nodes for a ``RetrievalIntention``, without
        blocking the event loop."""
        return await asyncio.to_thread(self.retrieve_intention, intention)

    # -- shared pieces --------------------------------------------------------------

    def _cache_key(self, intention: RetrievalIntention) -> tuple[str, tuple[int, ...]]:
        # In current mode "now" moves: a cached stream stands for the whole TTL (the spec's cache's trade).
        data = intention.model_dump(mode="json", exclude={"intention_id", "generated_at", "generated_by"})
        payload = json.dumps([data, self.config.model_dump(mode="json")], sort_keys=True)
        versions = tuple(self.memory.graph_version(self._plans(lvl, intention).graph) for lvl in intention.query_levels)
        return hashlib.sha256(payload.encode()).hexdigest(), versions

    def _plans(self, level: str, intention: RetrievalIntention) -> LevelPlans:
        return self.memory.plans(level, intention.citizen_id if level == "N1" else None)

    def _query_names(self, text: str) -> list[str]:
        return self.entity_extractor.extract_query_entities(text)

    def _window_and_filter(self, intention: RetrievalIntention) -> MemoryFilter:
        return MemoryFilter.from_intention(intention, TemporalWindow.from_intention(intention))

    def _score(self, hit: Any) -> float:
        if isinstance(hit, ch.GraphHit):
            if hit.activation is not None:
                return hit.activation
            return path_relevance(hit.path_energy, self.config.graph_depth)
        return hit.similarity if isinstance(hit, VectorHit) else hit.score

    # -- the retrieval ----------------------------------------------------------------

    def gather(self, intention: RetrievalIntention) -> tuple[ConsciousnessStream, list[NodeWithScore]]:
        """Every channel of every level at once, fused; the stream of what they found and the ranked nodes."""
        intention = self.intention_for(intention)
        key = self._cache_key(intention) if self.config.cache_ttl_s is not None else None
        entry = self._cache.get(key[0]) if key else None
        if entry and entry[0] > time.monotonic() and entry[1] == key[1]:
            # copies: a postprocessor that rescores must not rescore the cache; the ids are this retrieval's
            # (record_use and apply_feedback count a retrieval once, not every answer the cache gives)
            stream = entry[2].model_copy(deep=True, update={"intention_id": intention.intention_id})
            nodes = [n.model_copy(deep=True) for n in entry[3]]
            for n in nodes:
                n.node.metadata["retrieval_id"] = intention.intention_id
            return stream, nodes
        started = time.perf_counter()
        retrieved_at = utcnow()
        memory_filter = self._window_and_filter(intention)
        embedding = self.memory.embed_query(intention.query_text)
        names = self._query_names(intention.query_text)
        # one deadline for every query of the retrieval: a stalled server costs channel_timeout_s, once
        deadline = time.monotonic() + self.config.channel_timeout_s
        existing = existing_graphs(self.memory, self.config.channel_timeout_s,
                                   [self._plans(level, intention).graph for level in intention.query_levels])
        outcomes = self._levels_sync(intention, memory_filter, embedding, names, existing, deadline)
        fused = self._rank(outcomes)
        targets = self._neighbour_targets(fused, outcomes)
        if targets:
            self._add_neighbours(fused, self._neighbours_sync(targets, intention, memory_filter, deadline))
        stream, nodes = self._finish(intention, outcomes, retrieved_at, started, fused)
        if key:
            if len(self._cache) > 1000:
                self._cache.clear()
            self._cache[key[0]] = (time.monotonic() + self.config.cache_ttl_s, key[1],
                                   stream.model_copy(deep=True), [n.model_copy(deep=True) for n in nodes])
        return stream, nodes

    def _neighbours_sync(self, targets: dict[str, list[str]], intention: RetrievalIntention,
                         memory_filter: MemoryFilter, deadline: float) -> dict[str, dict[str, list[MemoryNode]]]:
        per_memory = self.config.neighbours_per_memory
        jobs = [(self._plans(level, intention).graph,
                 ch.neighbours(self._plans(level, intention), node_ids, memory_filter, per_memory))
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
                     names: list[str], existing: dict[str, Exception | None] | Exception,
                     deadline: float) -> list[LevelOutcome]:
        """Every channel of every level, all in flight at once (``run_interleaved``)."""
        outcomes: list[LevelOutcome] = []
        jobs: list[tuple[str, Plan]] = []
        # each job's level, its channels, and the vector hits a walk-from-them job built before it failed
        owners: list[tuple[LevelOutcome, tuple[str, ...], list[list[VectorHit]]]] = []
        k = intention.max_results_per_level
        for level in intention.query_levels:
            out = LevelOutcome(level)
            outcomes.append(out)
            plans = self._plans(level, intention)
            problem = graph_problem(existing, plans.graph)
            if problem is False:  # never written: an empty level
                continue
            if problem is not None:  # gone, or the graphs could not even be listed
                for channel in self.config.channels:
                    out.failed(channel, problem)
                continue
            channels = list(self.config.channels)
            if "graph" in channels and self.config.graph_walk == "spreading":
                # the seeds are the other channels' hits: one job for all of them
                owned = tuple(c for c in ("vector", "keyword") if c in channels) + ("graph",)
                for c in owned:
                    channels.remove(c)
                found = []
                jobs.append((plans.graph, self._spread_plan(plans, level, embedding, names, k, memory_filter,
                                                           deadline, intention, owned, found)))
                owners.append((out, owned, found))
            elif "graph" in channels and self.config.fallback_start and "vector" in channels:
                # the walk starts from the vector answers when the question names nothing: one job for both
                channels.remove("vector")
                channels.remove("graph")
                found: list[list[VectorHit]] = []
                jobs.append((plans.graph, self._graph_plan(plans, level, embedding, names, k, memory_filter, deadline,
                                                          found)))
                owners.append((out, ("vector", "graph"), found))
            for channel in channels:
                try:
                    if channel == "vector":
                        plan = self.memory.vectors(level).search(plans, embedding, k, memory_filter, deadline)
                    elif channel == "graph":
                        plan = self._graph_plan(plans, level, embedding, names, k, memory_filter, deadline)
                    else:
                        plan = ch.keyword_search(plans, self.memory.keyword_indexes.get(plans.graph),
                                                 intention.query_text, k, memory_filter)
                except Exception as exc:  # isolate: one channel's failure is an entry, not an exception
                    out.failed(channel, exc)
                    continue
                jobs.append((plans.graph, plan))
                owners.append((out, (channel,), []))
        results = run_interleaved(self.memory.db, jobs, remaining_ms(deadline))
        for (out, channels, found), result in zip(owners, results):
            if isinstance(result, BaseException):
                if found:  # the walk failed after the vector hits were in: the vector channel did not fail
                    out.vector, channels = found[0], tuple(c for c in channels if c != "vector")
                    out.queries += 1
                for channel in channels:
                    out.failed(channel, result)
                continue
            for channel, value in zip(channels, result if len(channels) > 1 else (result,)):
                setattr(out, channel, value)
                out.queries += 1
        return outcomes

    def _named_start(self, plans: LevelPlans, names: list[str]) -> Plan:
        """The memories the question names in this level (``channels.named_memories``), less the hubs: those
        with more than ``max_start_links`` links (a speaker that every turn mentions leads a walk everywhere,
        so anywhere it leads says nothing about the question).  Part of the level's own plan, so a stalled
        level holds back nothing but itself."""
        start = yield from ch.named_memories(self.memory.keyword_indexes.get(plans.graph), names,
                                             self.config.entity_match_threshold, 3, self.config.max_start_entities)
        limit = self.config.max_start_links
        if start and limit is not None:
            counts = yield from ch.link_counts(plans, start)
            start = [node_id for node_id in start if counts.get(node_id, 0) <= limit]
        return start

    def _graph_plan(self, plans: LevelPlans, level: str, embedding: list[float], names: list[str], k: int,
                    memory_filter: MemoryFilter, deadline: float,
                    found: list[list[VectorHit]] | None = None) -> Plan:
        """The walk from the memories the question names, or from the nearest memories when it names none of
        the level's.  With ``found`` it is the vector channel too, asked first: its hits go there at once, so
        a walk failing after them keeps them."""
        vector: list[VectorHit] = []
        if found is not None:
            vector = yield from self.memory.vectors(level).search(plans, embedding, k, memory_filter, deadline)
            found.append(vector)
        start = yield from self._named_start(plans, names)
        if not start and self.config.fallback_start:
            if found is None:
                vector = yield from self.memory.vectors(level).search(plans, embedding, self.config.fallback_start,
                                                                      memory_filter, deadline)
            start = [h.node.node_id for h in vector[: self.config.fallback_start]]
        graph = yield from ch.traverse(plans, start, k, memory_filter, depth=self.config.graph_depth,
                                       include_start=True)
        return graph if found is None else (vector, graph)

    def _spread_plan(self, plans: LevelPlans, level: str, embedding: list[float], names: list[str], k: int,
                     memory_filter: MemoryFilter, deadline: float, intention: RetrievalIntention,
                     owned: tuple[str, ...], found: list[Any]) -> Plan:
        """Vector and keyword hits (those of ``owned``), then activation spread from them and from the named
        memories; returns each owned channel's hits in ``owned`` order (``found`` keeps the vector hits
        for when the spreading fails after them)."""
        seeds: list[tuple[str, float]] = []
        results: dict[str, Any] = {}
        if "vector" in owned:
            hits = yield from self.memory.vectors(level).search(plans, embedding, k, memory_filter, deadline)
            found.append(hits)
            results["vector"] = hits
            seeds += scaled_to_best([(h.node.node_id, h.similarity) for h in hits])
        if "keyword" in owned:
            hits = yield from ch.keyword_search(plans, self.memory.keyword_indexes.get(plans.graph),
                                                intention.query_text, k, memory_filter)
            results["keyword"] = hits
            seeds += scaled_to_best([(h.node.node_id, h.score) for h in hits])
        start = yield from self._named_start(plans, names)
        seeds = [(node_id, 1.0) for node_id in start] + seeds
        if not seeds and self.config.fallback_start:
            # nothing named and no other channel here: the nearest memories start it, as they start a walk
            hits = yield from self.memory.vectors(level).search(plans, embedding, self.config.fallback_start,
                                                                memory_filter, deadline)
            seeds = scaled_to_best([(h.node.node_id, h.similarity) for h in hits])
        emotions = {e: 1.0 for e in intention.required_emotions or []}
        c = self.config
        settings = SpreadSettings(decay=c.spread_decay, threshold=c.spread_threshold, budget=c.spread_budget,
                                  fanout=c.spread_fanout)
        results["graph"] = yield from spread(
            plans, seeds, k, memory_filter,
            lambda link: calculate_traversal_probability(link, None, emotions or None), settings)
        # one channel's result alone, as every single-channel job gives it
        return tuple(results[c] for c in owned) if len(owned) > 1 else results[owned[0]]

    # -- assembly -------------------------------------------------------------------

    def _finish(self, intention: RetrievalIntention, outcomes: list[LevelOutcome], retrieved_at: Any,
                started: float, fused: _Fused | None = None) -> tuple[ConsciousnessStream, list[NodeWithScore]]:
        found, ranked = fused or self._rank(outcomes)
        if self.config.fusion != "concatenate":  # the spec's six ways keep every channel's results
            ranked = per_level_cap(ranked, found, intention.max_results_per_level)
        ranked = later_statements_first(ranked, found)  # a later statement may replace it: never ranked above
        if self.config.later_versions_first and self.config.fusion != "concatenate":  # concatenation keeps its order
            ranked = later_versions_first(ranked, found, intention.query_text, intention.temporal_mode)

        def channel_node(level: str, channel: str, hit: Any) -> Any:
            """A channel's hit as the stream's node, with this answer's read-time mark when it has one."""
            details = found.get(f"{level}:{hit.node.node_id}", {}).get("details", {})
            since = details.get("possibly_outdated_since")
            return retrieved_node(hit.node, f"{level}_{channel}", self._score(hit),
                                  outdated_by=details.get("possibly_outdated_by") if since else None,
                                  outdated_since=parse_time(since))

        levels = {
            LEVEL_KEYS[out.level]: ConsciousnessLevelResults(
                **{f"{c}_results": [channel_node(out.level, c, h) for h in getattr(out, c)] for c in CHANNELS},
                relationships=dedupe_relationships([r for hit in out.graph for r in hit.path]),
                error="; ".join(out.errors) or None,
            )
            for out in outcomes
        }
        if self.config.final_top_k is not None:
            ranked = ranked[: self.config.final_top_k]
        nodes = [result_node(found[key], score, intention.temporal_mode, retrieval_id=intention.intention_id)
                 for key, score in ranked]
        latency_ms = int((time.perf_counter() - started) * 1000)
        stream = assemble_stream(intention.intention_id, levels, retrieved_at=retrieved_at,
                                 latency_ms=latency_ms, query_count=sum(o.queries for o in outcomes))
        return stream, nodes

    def _rank(self, outcomes: list[LevelOutcome]) -> _Fused:
        """Every memory found once (with each channel that found it), and the fused order."""
        found: dict[str, dict[str, Any]] = {}
        keyed: dict[str, list[tuple[str, float]]] = {}
        for channel in CHANNELS:
            for out in outcomes:
                source = keyed.setdefault(f"{out.level}_{channel}", [])
                for hit in getattr(out, channel):
                    key, score = f"{out.level}:{hit.node.node_id}", self._score(hit)
                    source.append((key, score))
                    entry = found.setdefault(key, {"node": hit.node, "level": out.level, "score": score,
                                                   "sources": [], "details": {}})
                    if f"{out.level}_{channel}" not in entry["sources"]:
                        entry["sources"].append(f"{out.level}_{channel}")
                    entry["details"].update(ch.describe(hit))
        if self.config.fusion == "rrf":
            weights = {s: self.config.channel_weights.get(s.split("_", 1)[1], 1.0) for s in keyed}
            ranked = weighted_rrf({s: [key for key, _ in items] for s, items in keyed.items()}, weights,
                                  k=self.config.rrf_k)
        elif self.config.fusion == "score":
            chosen = self.config.score_weights
            if self.config.long_score_weights is not None and mostly_long(found, self.config.long_memory_chars):
                chosen = self.config.long_score_weights
            weights = {s: chosen.get(s.split("_", 1)[1], 0.0) for s in keyed}
            ranked = weighted_score_fusion(keyed, weights)
        else:
            ranked = [(key, entry["score"]) for key, entry in found.items()]
        return found, list(ranked)

    def _neighbour_targets(self, fused: _Fused, outcomes: list[LevelOutcome]) -> dict[str, list[str]]:
        """Per level, the node ids of the top fused memories whose neighbours join the answer."""
        if self.config.neighbour_expansion <= 0 or "graph" not in self.config.channels:
            return {}
        found, ranked = fused
        targets: dict[str, list[str]] = {}
        failed = {out.level for out in outcomes if out.errors}
        longest = self.config.long_memory_chars
        for key, _ in ranked[: self.config.neighbour_expansion]:
            entry = found[key]
            node = entry["node"]
            if entry["level"] not in failed and not is_long(node, longest):
                targets.setdefault(entry["level"], []).append(node.node_id)
        return targets

    def _add_neighbours(self, fused: _Fused, near: dict[str, dict[str, list[MemoryNode]]]) -> None:
        """Put the neighbours of the top memories (one link away: in a conversation, the turns around the
        one that matched) after the first ``neighbours_after``, in place, at the score of that rank so that
        scores never increase down the list."""
        found, ranked = fused
        keep = self.config.neighbours_after
        inserted: list[tuple[str, float]] = []
        seen = {key for key, _ in ranked[:keep]}
        floor = ranked[min(keep, len(ranked)) - 1][1] if ranked else 0.0
        longest = self.config.long_memory_chars
        for key, _ in ranked[: self.config.neighbour_expansion]:
            entry = found[key]
            for node in near.get(entry["level"], {}).get(entry["node"].node_id, []):
                near_key = f"{entry['level']}:{node.node_id}"
                if near_key in seen or is_long(node, longest):
                    continue
                seen.add(near_key)
                source = f"{entry['level']}_neighbour"
                if near_key not in found:
                    found[near_key] = {"node": node, "level": entry["level"], "score": floor, "sources": [source],
                                       "details": {"neighbour_of": entry["node"].node_id}}
                elif source not in found[near_key]["sources"]:
                    found[near_key]["sources"].append(source)
                inserted.append((near_key, floor))
        if inserted:
            ranked[:] = ranked[:keep] + inserted + [(key, score) for key, score in ranked[keep:] if key not in seen]
