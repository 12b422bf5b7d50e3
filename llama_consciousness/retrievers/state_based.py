"""``StateBasedRetriever``: retrieval driven by the current energy, emotions and goal (the spec's decision #8).

When a citizen wakes without a question (S6), it retrieves what fits its state in one of four modes
(``find_related_unresolved``, ``find_similar_state``, ``find_what_i_was_doing``,
``find_resolution_patterns``; scores in ``scoring.state``, computed inside FalkorDB by
``storage.state_queries``).  Every mode sees only memories current at the state's ``generated_at`` (an
expired item is not unfinished business any more).  A RESOLVED_BY link's own ``resolution_state`` is not
required to be "resolved": links default to "in_progress", and the link's type says what it means.
Results mirror the six-way retriever: sources ``N1_state`` / ``N1_resolution``, a stream whose
``vector_results`` are the state matches and ``graph_results`` the resolutions and their neighbours.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from llama_consciousness.retrievers.base import (
    LLM_HIDDEN,
    MISSING,
    StreamRetriever,
    cached,
    channel_error,
    existing_graphs,
    graph_problem,
    later_statements_first,
    remaining_ms,
    remember,
    result_node,
)
from llama_consciousness.schema import (
    ConsciousnessLevelResults,
    ConsciousnessNode,
    ConsciousnessRelationship,
    ConsciousnessStream,
    LevelName,
    StateBasedRetrieval,
)
from llama_consciousness.schema._time import utcnow
from llama_consciousness.schema.common import MAX_QUERY_CHARS, MAX_RESULTS_PER_LEVEL, validate_citizen_id
from llama_consciousness.schema.stream import LEVEL_KEYS
from llama_consciousness.scoring.state import (
    GoalMatch,
    days_ago,
    emotion_query,
    emotional_similarity,
    energy_proximity,
    normalise_goal,
    recency_weight,
)
from llama_consciousness.storage import run_interleaved
from llama_consciousness.storage import state_queries as sq
from llama_consciousness.storage.channels import links_among
from llama_consciousness.storage.filters import MemoryFilter
from llama_consciousness.storage.level_store import MAX_FETCH, LevelGraphStore
from llama_consciousness.storage.reader import MemoryReader
from llama_consciousness.stream import assemble_stream, dedupe_relationships

logger = logging.getLogger(__name__)

# Partial goal matching narrows by index through the distinct goals of a level,
# cached like the entity names (per graph version, for a TTL); a level with more
# distinct goals than GOAL_VOCABULARY_MAX is scanned instead.
GOAL_VOCABULARY_TTL_S = 60.0
GOAL_VOCABULARY_MAX = 5000
_GOAL_MODES = ("find_related_unresolved", "find_resolution_patterns")
_HIDDEN = (*LLM_HIDDEN, "pattern_id", "resolution_id", "state_id")


class StateRetrievalConfig(BaseModel):
    """How a state becomes queries (thresholds, goal matching, sizes)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    query_levels: tuple[LevelName, ...] = ("N1", "N2", "N3")
    max_results_per_level: int = Field(default=20, ge=1, le=MAX_RESULTS_PER_LEVEL)
    goal_match: GoalMatch = "partial"
    semantic_threshold: float = Field(default=0.5, ge=0.0, le=1.0,
                                      description="semantic goals: least cosine of goal and memory embeddings")
    semantic_fetch: int = Field(default=200, ge=1, le=MAX_FETCH,
                                description="semantic goals: nearest memories considered per level")
    similar_state_threshold: float = Field(default=0.7, ge=0.0, lt=1.0,
                                           description="find_similar_state: emotional cosine must be above")
    resolution_threshold: float = Field(default=0.6, ge=0.0, lt=1.0,
                                        description="find_resolution_patterns: emotional cosine must be above")
    energy_tolerance: float = Field(default=0.2, ge=0.0, le=1.0,
                                    description="find_similar_state: |energy - current energy| at most")
    recent_days: int = Field(default=30, ge=1, le=36_500, description="temporal_scope='recent'")
    max_patterns: int = Field(default=5, ge=1, le=100, description="resolution patterns per level")
    max_related: int = Field(default=3, ge=0, le=100,
                             description="Decision/Action/Learning memories kept per resolution (within "
                                         "max_results_per_level: past states and resolutions come first)")
    resolution_detail_types: tuple[str, ...] = ("Decision", "Action", "Learning")
    include_relationships: bool = Field(
        default=True, description="put the links among the retrieved memories in the stream (energy feedback)")
    level_timeout_s: float = Field(default=5.0, gt=0, le=600, description="per level; a slow level is an error entry")
    final_top_k: int | None = Field(default=None, ge=1, description="cut the node list (None: keep all)")

    @field_validator("query_levels")
    @classmethod
    def _levels(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("query_levels must name at least one of 'N1', 'N2', 'N3'")
        return tuple(dict.fromkeys(value))


@dataclass
class StateLevelOutcome:
    """What one level gave for a state."""

    level: str
    hits: list[sq.StateHit] = field(default_factory=list)
    relationships: list[ConsciousnessRelationship] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    queries: int = 0

    def failed(self, exc: BaseException) -> None:
        self.hits, self.relationships, self.queries = [], [], 0  # nothing it ran counts
        self.errors.append(channel_error(self.level, "state", exc, logger))


def _counted(plan: Any, out: StateLevelOutcome) -> Any:
    """The plan, counting the queries it runs into ``out.queries`` (the stream's ``query_count``)."""
    result = None
    try:
        while True:
            step = plan.send(result)
            out.queries += 1
            result = yield step
    except StopIteration as stop:
        return stop.value


class StateBasedRetriever(StreamRetriever[StateBasedRetrieval]):
    """Memories that fit a :class:`StateBasedRetrieval` over N1, N2 and N3; with ``default_state`` (felt now,
    a non-empty query text as its goal) it works wherever LlamaIndex expects a ``BaseRetriever``."""

    def __init__(
        self,
        memory: MemoryReader,
        default_state: StateBasedRetrieval | None = None,
        *,
        citizen_id: str | None = None,
        query_mode: str = "find_related_unresolved",
        include_only_unresolved: bool = True,
        temporal_scope: str = "recent",
        config: StateRetrievalConfig | None = None,
        stream_postprocessors: Sequence[Any] | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        super().__init__(stream_postprocessors, callback_manager=callback_manager, verbose=verbose)
        if default_state is not None and not isinstance(default_state, StateBasedRetrieval):
            raise TypeError(f"default_state must be a StateBasedRetrieval, not {type(default_state).__name__}")
        if config is not None and not isinstance(config, StateRetrievalConfig):
            raise TypeError(f"config must be a StateRetrievalConfig, not {type(config).__name__}")
        if citizen_id is not None and default_state is not None and citizen_id != default_state.citizen_id:
            raise ValueError(f"citizen_id {citizen_id!r} differs from default_state's {default_state.citizen_id!r}")
        self.memory = memory
        self.default_state = default_state
        self.citizen_id = validate_citizen_id(citizen_id) if citizen_id is not None else None
        # how the stored state is asked with; checked now: a typo must not wait for the first call
        self.state_fields = StateBasedRetrieval(
            current_energy=0.5, current_emotions={}, citizen_id="x", query_mode=query_mode,
            include_only_unresolved=include_only_unresolved, temporal_scope=temporal_scope,
        ).model_dump(include={"query_mode", "include_only_unresolved", "temporal_scope"})
        self.config = config or StateRetrievalConfig()
        self._indexed: set[str] = set()
        self._goals: dict[str, tuple[int, float, tuple[str, ...] | None]] = {}
        if default_state is not None:
            self.check_state(default_state)

    def state_for(self, query: StateBasedRetrieval | str | QueryBundle | None = None) -> StateBasedRetrieval:
        """A given state as is, else ``default_state`` felt now, else the citizen's stored state now (its
        ``query_mode``); a non-empty query text is the goal."""
        if isinstance(query, StateBasedRetrieval):
            return query
        if query is not None and not isinstance(query, (str, QueryBundle)):
            raise TypeError(f"expected a StateBasedRetrieval, a query string or None, not {type(query).__name__}")
        text = query.query_str if isinstance(query, QueryBundle) else query
        if self.default_state is None:
            if self.citizen_id is None:
                raise ValueError("StateBasedRetriever has no default_state: pass a StateBasedRetrieval to "
                                 "retrieve_state()/retrieve_stream(), or construct it with default_state=... or "
                                 "citizen_id=... (the citizen's stored state)")
            stored = self.memory.citizen_state(self.citizen_id)
            if stored is None:
                raise ValueError(f"citizen {self.citizen_id!r} has no stored state: record one with "
                                 "memory.update_citizen_state(...), or pass a StateBasedRetrieval")
            data = stored.to_retrieval(**self.state_fields).model_dump(exclude={"state_id", "generated_at"})
        else:
            data = self.default_state.model_dump(exclude={"state_id", "generated_at"})
        if text is not None and text.strip():
            data["current_goal"] = text.strip()
        try:
            return StateBasedRetrieval(**data)
        except ValidationError as exc:
            raise ValueError(f"the query does not make a valid state: {exc}") from exc

    request_for = state_for

    def check_state(self, state: StateBasedRetrieval) -> None:
        """Raise ``ValueError`` when the mode cannot run on this state."""
        if state.current_goal is not None and not state.current_goal.strip():
            raise ValueError("current_goal is empty or whitespace; use None for 'no goal'")
        if state.current_goal is not None and len(state.current_goal) > MAX_QUERY_CHARS:
            raise ValueError(f"current_goal has {len(state.current_goal)} characters; at most {MAX_QUERY_CHARS} "
                             "allowed")
        has_emotions = any(v > 0 for v in state.current_emotions.values())
        if state.query_mode == "find_similar_state" and not has_emotions:
            raise ValueError("find_similar_state compares emotions: current_emotions must hold at least one "
                             "emotion with an intensity above 0")
        if state.query_mode == "find_resolution_patterns" and state.current_goal is None and not has_emotions:
            raise ValueError("find_resolution_patterns needs a current_goal or current_emotions to compare "
                             "past states with")

    def _state_query(self, state: StateBasedRetrieval, goal_embedding: list[float] | None) -> sq.StateQuery:
        emotions, norm = emotion_query(state.current_emotions)
        c = self.config
        return sq.StateQuery(
            mode=state.query_mode, now=state.generated_at, energy=state.current_energy,
            emotions={k: v for k, v in emotions.items() if v > 0}, emotion_norm=norm,
            goal=state.current_goal.strip() if state.current_goal else None, goal_match=c.goal_match,
            goal_embedding=goal_embedding, semantic_threshold=c.semantic_threshold, semantic_fetch=c.semantic_fetch,
            recent_days=c.recent_days if state.temporal_scope == "recent" else None,
            unresolved_only=state.include_only_unresolved, emotion_threshold=c.similar_state_threshold,
            pattern_threshold=c.resolution_threshold, energy_tolerance=c.energy_tolerance,
            detail_types=tuple(c.resolution_detail_types), max_related=c.max_related,
        )

    def retrieve_state(self, state: StateBasedRetrieval | str | None = None) -> list[NodeWithScore]:
        """The memories that fit ``state``, as ``NodeWithScore`` (no stream postprocessors)."""
        return self.gather(self.state_for(state))[1]

    async def aretrieve_state(self, state: StateBasedRetrieval | str | None = None) -> list[NodeWithScore]:
        return await asyncio.to_thread(self.retrieve_state, state)

    # -- the retrieval ----------------------------------------------------------------------

    def gather(self, state: StateBasedRetrieval) -> tuple[ConsciousnessStream, list[NodeWithScore]]:
        """Every level's state query side by side; the stream of what they found and the ranked nodes."""
        state = self.state_for(state)
        self.check_state(state)
        started = time.perf_counter()
        retrieved_at = utcnow()
        embedding = None
        if self.config.goal_match == "semantic" and state.current_goal and state.query_mode in _GOAL_MODES:
            # the goal as embedded: "design_retrieval_architecture" reads as words
            embedding = self.memory.embed_query(normalise_goal(state.current_goal) or state.current_goal.strip())
        q = self._state_query(state, embedding)
        deadline = time.monotonic() + self.config.level_timeout_s
        existing = existing_graphs(self.memory, self.config.level_timeout_s, [
            self.memory.plans(level, state.citizen_id if level == "N1" else None).graph
            for level in self.config.query_levels])
        outcomes = [StateLevelOutcome(level) for level in self.config.query_levels]
        jobs: list[tuple[str, Any]] = []
        owners: list[StateLevelOutcome] = []
        for out in outcomes:
            plans = self.memory.plans(out.level, state.citizen_id if out.level == "N1" else None)
            problem = graph_problem(existing, plans.graph)
            if problem is False:  # never written: an empty level
                continue
            if problem is not None:
                out.failed(problem)
                continue
            if plans.graph not in self._indexed:  # the emotion index: filters are correct without it, only slower
                try:
                    LevelGraphStore(self.memory.db, plans, timeout_ms=int(self.config.level_timeout_s * 1000)).run(
                        sq.ensure_state_indexes(plans))
                except Exception as exc:  # e.g. a read-only replica: retrieval still works
                    logger.info("could not create the state indexes of %s: %s", plans.graph, exc)
                self._indexed.add(plans.graph)
            # the nearest memories to a semantic goal, from vectors the graph queries cannot search (started now)
            nearest = None if q.goal_embedding is None else self.memory.vectors(out.level).candidates(
                plans, q.goal_embedding, q.semantic_fetch, MemoryFilter(q.window), deadline)
            jobs.append((plans.graph, _counted(self._level_plan(plans, q, nearest), out)))
            owners.append(out)
        for out, result in zip(owners, run_interleaved(self.memory.db, jobs, remaining_ms(deadline))):
            if isinstance(result, BaseException):
                out.failed(result)
            else:
                out.hits, out.relationships = result
        return self._finish(state, q, outcomes, retrieved_at, started)

    def _level_plan(self, plans: Any, q: sq.StateQuery, nearest: Any) -> Any:
        """What one level runs: the goal vocabulary if due, the mode's plan (``nearest``: the plan of the
        goal's nearest memories from Postgres vectors, or None), the links met."""
        if self.config.goal_match == "partial" and q.goal is not None and q.mode in _GOAL_MODES:
            vocabulary = cached(self._goals, self.memory, plans.graph, GOAL_VOCABULARY_TTL_S)
            if vocabulary is MISSING:
                version = self.memory.graph_version(plans.graph)
                goals = yield from sq.goal_vocabulary(plans)
                vocabulary = remember(self._goals, plans.graph,
                                      tuple(goals) if len(goals) <= GOAL_VOCABULARY_MAX else None, version)
            q = replace(q, goal_vocabulary=vocabulary)
        candidates = None if nearest is None else (yield from nearest)
        hits = yield from sq.state_plan(plans, q, self.config.max_results_per_level,
                                        max_patterns=self.config.max_patterns, candidates=candidates)
        relationships = [r for hit in hits for r in hit.path]
        if self.config.include_relationships and q.mode != "find_resolution_patterns" and len(hits) >= 2:
            found = yield from links_among(plans, [h.node.node_id for h in hits], MemoryFilter(q.window))
            relationships += [rel for rel, _ in found]
        return hits, relationships

    # -- assembly ---------------------------------------------------------------------------

    def _details(self, hit: sq.StateHit, state: StateBasedRetrieval, q: sq.StateQuery) -> dict[str, Any]:
        """The numbers behind a hit, for ``node.metadata``."""
        node = hit.node
        details: dict[str, Any] = {"state_mode": state.query_mode, "state_role": hit.role,
                                   "state_id": state.state_id}
        if hit.role != "state":
            return {**details, "pattern_id": hit.pattern_id, "resolution_id": hit.resolution_id, "depth": hit.depth}
        if q.goal is not None and hit.goal_match is not None:
            details["goal_match"] = hit.goal_match
        if q.emotions:
            details["emotion_similarity"] = emotional_similarity(state.current_emotions, node.emotion_vector)
        details["energy_proximity"] = energy_proximity(state.current_energy, node.energy)
        details["days_ago"] = days_ago(node.created_at, q.now)
        if q.mode == "find_what_i_was_doing":
            details["recency_weight"] = recency_weight(details["days_ago"])
        return details

    def _finish(self, state: StateBasedRetrieval, q: sq.StateQuery, outcomes: list[StateLevelOutcome],
                retrieved_at: Any, started: float) -> tuple[ConsciousnessStream, list[NodeWithScore]]:
        levels: dict[str, ConsciousnessLevelResults] = {}
        found: dict[str, dict[str, Any]] = {}
        for out in outcomes:
            matched, linked = [], []
            for hit in out.hits:
                source = f"{out.level}_{'state' if hit.role == 'state' else 'resolution'}"
                # the memory was validated when read: no second validation of the same values
                data = {k: v for k, v in hit.node.__dict__.items() if k != "embedding"}
                (matched if hit.role == "state" else linked).append(ConsciousnessNode.model_construct(
                    **data, retrieval_source=source, relevance_score=float(hit.score)))
                entry = found.setdefault(f"{out.level}:{hit.node.node_id}", {
                    "node": hit.node, "level": out.level, "score": float(hit.score), "sources": [],
                    "details": self._details(hit, state, q)})
                if source not in entry["sources"]:
                    entry["sources"].append(source)
            levels[LEVEL_KEYS[out.level]] = ConsciousnessLevelResults(
                vector_results=matched, graph_results=linked,
                relationships=dedupe_relationships(out.relationships), error="; ".join(out.errors) or None)
        # a state looks at what is believed now (postprocessors read the mode from the nodes)
        ranked = later_statements_first([(key, entry["score"]) for key, entry in found.items()], found)
        nodes = [result_node(found[key], score, "current", _HIDDEN, retrieval_id=state.state_id)
                 for key, score in ranked]
        if self.config.final_top_k is not None:
            nodes = nodes[: self.config.final_top_k]
        latency_ms = int((time.perf_counter() - started) * 1000)
        stream = assemble_stream(state.state_id, levels, retrieved_at=retrieved_at, latency_ms=latency_ms,
                                 query_count=sum(o.queries for o in outcomes))
        return stream, nodes
