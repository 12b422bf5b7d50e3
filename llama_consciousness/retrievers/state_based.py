"""``StateBasedRetriever``: retrieval driven by the current energy, emotions and goal.

The spec's decision #8: when a citizen wakes without a specific question
(S6 autonomous continuation), it retrieves what fits its current state.  A
:class:`~llama_consciousness.schema.StateBasedRetrieval` names that state
(energy, emotions, optional goal) and one of four modes:

``find_related_unresolved``
    blocked / in_progress memories whose goal matches the current goal,
    currently valid, ranked by energy (x the goal match, see below).  With
    ``include_only_unresolved=False`` resolved memories of the goal come too.
    Without a goal: every unresolved memory, the emotionally resonant first
    (``energy * (0.5 + 0.5 * emotional similarity)``).
``find_similar_state``
    memories whose emotion vector has a cosine above
    ``similar_state_threshold`` (0.7, the spec's) with the current emotions
    and whose energy lies within ``energy_tolerance`` (0.2) of the current
    energy; ranked by ``cosine * (1 - |energy difference|)``.  Needs emotions.
``find_what_i_was_doing``
    in_progress memories ranked by ``energy / (1 + days / 30)``.
``find_resolution_patterns``
    past *resolved* memories with a similar goal and emotions (cosine above
    ``resolution_threshold``, 0.6 as the spec), that something RESOLVED_BY;
    ranked by ``discovery_energy`` (their energy when unset), then by
    similarity; each followed by its resolutions and by the Decision / Action /
    Learning memories within two links of the resolution (paths back through
    the past state do not count).  Needs a goal or emotions.  Unlike the
    spec's sketch, the RESOLVED_BY link's own ``resolution_state`` is not
    required to be "resolved": links default to "in_progress" when written,
    and the link's type already says what it means.

**Scope.**  Every mode only sees memories that are current (valid now and
believed now: an unresolved item whose ``invalid_at`` or ``expired_at`` has
passed is not unfinished business any more), not quarantined and not entity
hubs.  ``temporal_scope="recent"`` keeps the memories the state matches to
those created within the last ``recent_days`` (30); ``"all_time"`` has no
limit.  Resolutions and the memories around them are reached by links and
are not limited by age.  "Now" is the state's ``generated_at`` (the moment
the state was felt, by default its creation).

**include_only_unresolved** applies to ``find_related_unresolved`` only, as
the spec says: the other modes fix the resolution state by what they mean
(in_progress for what I was doing, resolved for resolution patterns, any
for similar states).

**Goal matching** (``config.goal_match``; see ``scoring.state``):

* ``exact``: the memory's goal is the same string (range index on ``goal``);
* ``partial`` (default): equal after normalising case and ``_``/``-``
  (1.0), one containing the other (0.8), or sharing content words with the
  goal, in the memory's goal or its ``concepts`` (0.6 x the shared share;
  half the words at least);
* ``semantic``: exact matches, plus memories whose embedding (name and
  description) has a cosine of at least ``semantic_threshold`` with the
  embedded goal (normalised first, so "design_retrieval_architecture" is
  embedded as words), among the ``semantic_fetch`` nearest (vector index;
  Postgres for pgvector levels).

**Emotional similarity** is Cypher arithmetic over the stored emotion
arrays (FalkorDB has no ``gds``); see ``storage.state_queries`` and
``benchmarks/state_speed.py`` for the choice and its measurements.

Results mirror the six-way retriever: ``NodeWithScore`` ids
``"<level>:<node_id>"`` with every memory field, ``level``,
``retrieval_source(s)`` (``N1_state`` for memories matched by the state,
``N1_resolution`` for resolutions and the memories around them),
``relevance_score``, ``temporal_mode`` ("current") and the state's numbers
(``state_mode``, ``state_role``, ``goal_match``, ``emotion_similarity``,
``days_ago``, ``pattern_id``...) in the metadata; and the spec's
``ConsciousnessStream`` (state matches as each level's ``vector_results``,
the state-based counterpart of semantic search, resolutions and related
memories as ``graph_results``, the links met as ``relationships``), which
``stream_postprocessors`` complete exactly as for the six-way retriever.
The levels run side by side on both paths (threads on the sync one, asyncio on the
async one); a level that fails or is slow becomes an error entry.

As a plain LlamaIndex retriever it needs ``default_state``: ``retrieve(text)``
runs that state now (fresh ``state_id`` and ``generated_at``), with the
query text, when not empty, as the current goal.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from llama_index.core.callbacks import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from llama_consciousness.retrievers.base import StreamRetriever, existing_graphs, remaining_ms
from llama_consciousness.retrievers.six_way import _LLM_HIDDEN, _LLM_HIDDEN_UNLESS_SET
from llama_consciousness.schema import (
    ConsciousnessLevelResults,
    ConsciousnessNode,
    ConsciousnessRelationship,
    ConsciousnessStream,
    LevelName,
    StateBasedRetrieval,
)
from llama_consciousness.schema._time import utcnow
from llama_consciousness.schema.common import MAX_QUERY_CHARS, MAX_RESULTS_PER_LEVEL
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
from llama_consciousness.storage import state_queries as sq
from llama_consciousness.storage.filters import MemoryFilter
from llama_consciousness.storage.level_store import MAX_FETCH, LevelGraphStore, LevelPlans
from llama_consciousness.storage import run_interleaved
from llama_consciousness.stream import assemble_stream, dedupe_relationships
from llama_consciousness.storage.reader import MemoryReader

logger = logging.getLogger(__name__)

SOURCE_STATE = "state"
SOURCE_RESOLUTION = "resolution"
# Partial goal matching narrows by index through the distinct goals of a level,
# cached like the six-way retriever's entity names (per graph version, for a TTL);
# a level with more distinct goals than GOAL_VOCABULARY_MAX is scanned instead.
GOAL_VOCABULARY_TTL_S = 60.0
GOAL_VOCABULARY_MAX = 5000
_GOAL_MODES = ("find_related_unresolved", "find_resolution_patterns")
_STALE = object()
_HIDDEN = [*_LLM_HIDDEN, "pattern_id", "resolution_id"]


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
    """Memories that fit the current state, over N1, N2 and N3 (see the module doc).

    ``memory`` is a :class:`~llama_consciousness.ConsciousnessMemory`.  Call
    :meth:`retrieve_state` / :meth:`retrieve_stream` (or their async forms)
    with a :class:`StateBasedRetrieval`; ``default_state`` makes the
    retriever usable wherever LlamaIndex expects a ``BaseRetriever``.
    """

    def __init__(
        self,
        memory: MemoryReader,
        default_state: StateBasedRetrieval | None = None,
        *,
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
        self.memory = memory
        self.default_state = default_state
        self.config = config or StateRetrievalConfig()
        self._indexed: set[str] = set()
        self._goals: dict[str, tuple[int, float, tuple[str, ...] | None]] = {}
        if default_state is not None:
            self.check_state(default_state)

    # -- states -----------------------------------------------------------------------

    def state_for(self, query: StateBasedRetrieval | str | QueryBundle | None = None) -> StateBasedRetrieval:
        """The state a call stands for: a given state as is, else ``default_state`` felt now.

        A non-empty query text becomes the current goal of the default state.
        """
        if isinstance(query, StateBasedRetrieval):
            return query
        if query is not None and not isinstance(query, (str, QueryBundle)):
            raise TypeError(f"expected a StateBasedRetrieval, a query string or None, not {type(query).__name__}")
        if self.default_state is None:
            raise ValueError("StateBasedRetriever has no default_state: pass a StateBasedRetrieval to "
                             "retrieve_state()/retrieve_stream(), or construct it with default_state=...")
        text = query.query_str if isinstance(query, QueryBundle) else query
        data = self.default_state.model_dump(exclude={"state_id", "generated_at"})
        if text is not None and text.strip():
            data["current_goal"] = text.strip()
        try:
            return StateBasedRetrieval(**data)
        except ValidationError as exc:
            raise ValueError(f"the query does not make a valid state: {exc}") from exc

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
        emotions = {k: v for k, v in emotions.items() if v > 0}
        goal = state.current_goal.strip() if state.current_goal else None
        c = self.config
        return sq.StateQuery(
            mode=state.query_mode, now=state.generated_at, energy=state.current_energy,
            emotions=emotions, emotion_norm=norm, goal=goal, goal_match=c.goal_match,
            goal_embedding=goal_embedding, semantic_threshold=c.semantic_threshold, semantic_fetch=c.semantic_fetch,
            recent_days=c.recent_days if state.temporal_scope == "recent" else None,
            unresolved_only=state.include_only_unresolved, emotion_threshold=c.similar_state_threshold,
            pattern_threshold=c.resolution_threshold, energy_tolerance=c.energy_tolerance,
            detail_types=tuple(c.resolution_detail_types), max_related=c.max_related,
        )

    @staticmethod
    def _goal_text(state: StateBasedRetrieval) -> str:
        """The goal as embedded: "design_retrieval_architecture" reads as words."""
        return normalise_goal(state.current_goal) or state.current_goal.strip()

    def _needs_goal_embedding(self, state: StateBasedRetrieval) -> bool:
        return (self.config.goal_match == "semantic" and bool(state.current_goal)
                and state.query_mode in ("find_related_unresolved", "find_resolution_patterns"))

    request_for = state_for

    def retrieve_state(self, state: StateBasedRetrieval | str | None = None) -> list[NodeWithScore]:
        """The memories that fit ``state``, as ``NodeWithScore`` (no stream postprocessors)."""
        return self.gather(self.state_for(state))[1]

    async def aretrieve_state(self, state: StateBasedRetrieval | str | None = None) -> list[NodeWithScore]:
        return await asyncio.to_thread(self.retrieve_state, state)

    # -- sync path ------------------------------------------------------------------------

    def _plans(self, level: str, state: StateBasedRetrieval) -> Any:
        return self.memory.plans(level, state.citizen_id if level == "N1" else None)

    def gather(self, state: StateBasedRetrieval) -> tuple[ConsciousnessStream, list[NodeWithScore]]:
        """Every level's state query side by side; the stream of what they found and the ranked nodes."""
        state = self.state_for(state)
        self.check_state(state)
        started = time.perf_counter()
        retrieved_at = utcnow()
        embedding = self.memory.embed_query(self._goal_text(state)) if self._needs_goal_embedding(state) else None
        q = self._state_query(state, embedding)
        deadline = time.monotonic() + self.config.level_timeout_s
        existing = existing_graphs(self.memory, self.config.level_timeout_s)
        outcomes = self._levels(state, q, existing, deadline)
        return self._finish(state, q, outcomes, retrieved_at, started)

    def _candidates(self, level: str, plans: LevelPlans, q: sq.StateQuery) -> list[tuple[str, float]] | None:
        """Nearest memories to a semantic goal from a level whose vectors the graph queries cannot search."""
        if q.goal_embedding is None:
            return None
        return self.memory.vectors(level).candidates(plans, q.goal_embedding, q.semantic_fetch, MemoryFilter(q.window))

    def _levels(self, state: StateBasedRetrieval, q: sq.StateQuery,
                existing: set[str] | Exception, deadline: float) -> list[StateLevelOutcome]:
        """Every level's plan, all in flight at once (``run_interleaved``); a failed level is an error entry."""
        outcomes = [StateLevelOutcome(level) for level in self.config.query_levels]
        jobs: list[tuple[str, Any]] = []
        owners: list[StateLevelOutcome] = []
        timeout_ms = int(self.config.level_timeout_s * 1000)
        for out in outcomes:
            plans = self._plans(out.level, state)
            if isinstance(existing, Exception):
                self._failed(out, existing)
                continue
            if plans.graph not in existing:
                continue
            if plans.graph not in self._indexed:
                store = LevelGraphStore(self.memory.db, plans, timeout_ms=timeout_ms)
                self._ensure_indexes(plans.graph, lambda: store.run(sq.ensure_state_indexes(plans)))
            try:
                candidates = self._candidates(out.level, plans, q)
            except Exception as exc:  # isolate: one level's failure is an entry, not an exception
                self._failed(out, exc)
                continue
            jobs.append((plans.graph, _counted(self._level_plan(plans, q, candidates), out)))
            owners.append(out)
        for out, result in zip(owners, run_interleaved(self.memory.db, jobs, remaining_ms(deadline))):
            if isinstance(result, BaseException):
                out.queries = 0  # nothing it ran counts when the level failed
                self._failed(out, result)
            else:
                out.hits, out.relationships = result
        return outcomes

    def _level_plan(self, plans: Any, q: sq.StateQuery, candidates: list[tuple[str, float]] | None) -> Any:
        """What one level runs (both paths): goal vocabulary if due, the mode's plan, the links met."""
        if self.config.goal_match == "partial" and q.goal is not None and q.mode in _GOAL_MODES:
            vocabulary = self._vocabulary(plans.graph)
            if vocabulary is _STALE:
                goals = yield from sq.goal_vocabulary(plans)
                vocabulary = self._remember_vocabulary(plans.graph, goals)
            q = replace(q, goal_vocabulary=vocabulary)
        hits = yield from sq.state_plan(plans, q, self.config.max_results_per_level,
                                        max_patterns=self.config.max_patterns, candidates=candidates)
        relationships = self._path_links(hits)
        among = self._among(hits, q)
        if among is not None:
            relationships += yield from sq.relationships_among(plans, among, q)
        return hits, relationships

    def _vocabulary(self, graph: str) -> Any:
        """The cached goal vocabulary of a level (None: too large to use), or _STALE."""
        entry = self._goals.get(graph)
        if entry and entry[0] == self.memory.graph_version(graph) and time.monotonic() - entry[1] < GOAL_VOCABULARY_TTL_S:
            return entry[2]
        return _STALE

    def _remember_vocabulary(self, graph: str, goals: list[str]) -> tuple[str, ...] | None:
        vocabulary = tuple(goals) if len(goals) <= GOAL_VOCABULARY_MAX else None
        self._goals[graph] = (self.memory.graph_version(graph), time.monotonic(), vocabulary)
        return vocabulary

    def _ensure_indexes(self, graph: str, create: Any) -> None:
        """The emotion index, once per graph (filters are correct without it, only slower)."""
        try:
            create()
        except Exception as exc:  # e.g. a read-only replica: retrieval still works
            logger.info("could not create the state indexes of %s: %s", graph, exc)
        self._indexed.add(graph)

    # -- assembly ---------------------------------------------------------------------------

    @staticmethod
    def _path_links(hits: list[sq.StateHit]) -> list[ConsciousnessRelationship]:
        return [r for hit in hits for r in hit.path]

    def _among(self, hits: list[sq.StateHit], q: sq.StateQuery) -> list[str] | None:
        """Ids whose mutual links the stream should carry (None: no query needed)."""
        if not self.config.include_relationships or q.mode == "find_resolution_patterns" or len(hits) < 2:
            return None
        return [h.node.node_id for h in hits]

    def _failed(self, out: StateLevelOutcome, exc: BaseException) -> None:
        what = "timed out" if isinstance(exc, (asyncio.TimeoutError, TimeoutError)) else f"{type(exc).__name__}: {exc}"
        message = f"{out.level}_{SOURCE_STATE} {what}"
        out.hits, out.relationships = [], []
        out.errors.append(message)
        logger.warning("state-based retrieval failed on a level: %s", message)

    def _details(self, hit: sq.StateHit, state: StateBasedRetrieval, q: sq.StateQuery) -> dict[str, Any]:
        """The numbers behind a hit, for ``node.metadata``."""
        node = hit.node
        details: dict[str, Any] = {"state_mode": state.query_mode, "state_role": hit.role,
                                   "state_id": state.state_id}
        if hit.role == "state":
            if q.goal is not None and hit.goal_match is not None:
                details["goal_match"] = hit.goal_match
            if q.emotions:
                details["emotion_similarity"] = emotional_similarity(state.current_emotions, node.emotion_vector)
            details["energy_proximity"] = energy_proximity(state.current_energy, node.energy)
            age = days_ago(node.created_at, q.now)
            details["days_ago"] = age
            if q.mode == "find_what_i_was_doing":
                details["recency_weight"] = recency_weight(age)
        else:
            details.update({"pattern_id": hit.pattern_id, "resolution_id": hit.resolution_id, "depth": hit.depth})
        return details

    def _finish(self, state: StateBasedRetrieval, q: sq.StateQuery, outcomes: list[StateLevelOutcome],
                retrieved_at: Any, started: float) -> tuple[ConsciousnessStream, list[NodeWithScore]]:
        levels: dict[str, ConsciousnessLevelResults] = {}
        found: dict[str, dict[str, Any]] = {}
        for out in outcomes:
            matched, linked = [], []
            for hit in out.hits:
                source = f"{out.level}_{SOURCE_STATE if hit.role == 'state' else SOURCE_RESOLUTION}"
                # the memory was validated when read: no second validation of the same values
                data = {k: v for k, v in hit.node.__dict__.items() if k != "embedding"}
                cnode = ConsciousnessNode.model_construct(**data, retrieval_source=source,
                                                          relevance_score=float(hit.score))
                (matched if hit.role == "state" else linked).append(cnode)
                key = f"{out.level}:{hit.node.node_id}"
                entry = found.get(key)
                if entry is None:
                    found[key] = {"hit": hit, "level": out.level, "score": float(hit.score), "sources": [source],
                                  "details": self._details(hit, state, q)}
                elif source not in entry["sources"]:
                    entry["sources"].append(source)
            levels[LEVEL_KEYS[out.level]] = ConsciousnessLevelResults(
                vector_results=matched,
                graph_results=linked,
                relationships=dedupe_relationships(out.relationships),
                error="; ".join(out.errors) or None,
            )
        nodes = [self._node_with_score(entry) for entry in found.values()]
        if self.config.final_top_k is not None:
            nodes = nodes[: self.config.final_top_k]
        latency_ms = int((time.perf_counter() - started) * 1000)
        stream = assemble_stream(state.state_id, levels, retrieved_at=retrieved_at, latency_ms=latency_ms,
                                 query_count=sum(o.queries for o in outcomes))
        return stream, nodes

    @staticmethod
    def _node_with_score(entry: dict[str, Any]) -> NodeWithScore:
        hit: sq.StateHit = entry["hit"]
        node = hit.node
        metadata = node.model_dump(mode="json", exclude={"embedding"})
        metadata.update(entry["details"])
        metadata.update({
            "level": entry["level"],
            "retrieval_source": entry["sources"][0],
            "retrieval_sources": list(entry["sources"]),
            "relevance_score": entry["score"],
            # a state looks at what is believed now (postprocessors read the mode here)
            "temporal_mode": "current",
        })
        text_node = TextNode(
            id_=f"{entry['level']}:{node.node_id}",
            text=node.description or node.name,
            metadata=metadata,
            excluded_embed_metadata_keys=list(metadata),
            excluded_llm_metadata_keys=[k for k in _HIDDEN if k in metadata] + ["temporal_mode", "state_id"]
            + [k for k in _LLM_HIDDEN_UNLESS_SET if k in metadata and not metadata[k]],
        )
        return NodeWithScore(node=text_node, score=entry["score"])

