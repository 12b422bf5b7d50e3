"""Throughput with 1, 4, 16 and 64 callers sharing one memory and one retriever.

A chatbot serves many users from one ``ConsciousnessMemory`` and one
retriever.  This builds the synthetic data of ``synthetic.py`` (``--nodes``
memories and ``--rels`` relationships per level, N1 for citizen ``ada``,
N2, N3), then, for each number of callers, runs the same questions
(``synthetic.make_queries``) for ``--seconds`` through

1. the package default retrieval: ``memory.retriever("ada").retrieve(q)``
   from that many threads, and
2. the complete stream: ``memory.stream_retriever("ada").aretrieve_stream(...)``
   from that many asyncio tasks on one event loop,

and checks every answer against the same question asked alone (node ids in
order).  It prints a markdown table: callers, calls per second, p50 and p95
latency, answers that differ from alone (must be 0), errors (must be 0) and
the most FalkorDB connections open at once (the memory's bound,
``max_connections``, is 64 by default).

    python benchmarks/concurrency_speed.py --nodes 50000 --rels 250000
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from machine import machine  # noqa: E402
from synthetic import CITIZEN, load_level, log, make_queries, settle_persistence  # noqa: E402

from llama_consciousness import RetrievalIntention  # noqa: E402
from llama_consciousness.memory import ConsciousnessMemory  # noqa: E402


def _ids(nodes: list[Any]) -> list[str]:
    return [n.node.node_id for n in nodes]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def _open_connections(memory: ConsciousnessMemory) -> int:
    return len(memory.db.connection.connection_pool._connections)


def run_threads(call: Any, questions: list[str], alone: dict[str, list[str]], callers: int,
                seconds: float) -> dict[str, Any]:
    latencies: list[float] = []
    wrong = errors = 0
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def worker(k: int) -> None:
        nonlocal wrong, errors
        i = k
        while time.monotonic() < stop:
            q = questions[i % len(questions)]
            i += callers
            t0 = time.perf_counter()
            try:
                got = _ids(call(q))
            except Exception:
                with lock:
                    errors += 1
                continue
            with lock:
                latencies.append(time.perf_counter() - t0)
                wrong += got != alone[q]

    started = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(callers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"calls": len(latencies), "elapsed": time.perf_counter() - started, "latencies": latencies,
            "wrong": wrong, "errors": errors}


def run_tasks(acall: Any, questions: list[str], alone: dict[str, list[str]], callers: int,
              seconds: float) -> dict[str, Any]:
    latencies: list[float] = []
    counts = {"wrong": 0, "errors": 0}

    async def main() -> None:
        stop = time.monotonic() + seconds

        async def task(k: int) -> None:
            i = k
            while time.monotonic() < stop:
                q = questions[i % len(questions)]
                i += callers
                t0 = time.perf_counter()
                try:
                    got = _ids(await acall(q))
                except Exception:
                    counts["errors"] += 1
                    continue
                latencies.append(time.perf_counter() - t0)
                counts["wrong"] += got != alone[q]

        await asyncio.gather(*(task(k) for k in range(callers)))

    started = time.perf_counter()
    asyncio.run(main())
    return {"calls": len(latencies), "elapsed": time.perf_counter() - started, "latencies": latencies, **counts}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog="More detail: the module docstring of benchmarks/concurrency_speed.py.")
    parser.add_argument("--nodes", type=int, default=5000, help="memories per level (default 5000)")
    parser.add_argument("--rels", type=int, default=25000, help="relationships per level (default 25000)")
    parser.add_argument("--queries", type=int, default=64, help="distinct questions (default 64)")
    parser.add_argument("--callers", default="1,4,16,64", help="numbers of concurrent callers (default 1,4,16,64)")
    parser.add_argument("--seconds", type=float, default=15.0, help="measured seconds per row (default 15)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    callers = [int(c) for c in args.callers.split(",")]
    data_dir = Path(tempfile.mkdtemp(prefix="lccs", dir="/tmp"))
    rows = []
    try:
        with ConsciousnessMemory(data_dir=data_dir) as memory:
            log(f"== building {args.nodes:,} memories + {args.rels:,} relationships per level ==")
            for level in ("N1", "N2", "N3"):
                load_level(memory, level, args.nodes, args.rels, args.seed, 2000, 10000)
            settle_persistence(memory)
            questions = make_queries(args.queries, random.Random(args.seed))
            default = memory.retriever(CITIZEN)
            stream = memory.stream_retriever(CITIZEN)

            def intention(q: str) -> RetrievalIntention:
                return RetrievalIntention(query_text=q, citizen_id=CITIZEN)

            async def complete(q: str) -> list[Any]:
                return (await stream.aretrieve_stream_and_nodes(intention(q)))[1]

            figures = [
                ("package default retrieval (threads)", lambda q: default.retrieve(q), run_threads,
                 {q: _ids(default.retrieve(q)) for q in questions}),
                ("complete stream (asyncio tasks)", complete, run_tasks,
                 {q: _ids(stream.retrieve_stream_and_nodes(intention(q))[1]) for q in questions}),
            ]
            for name, call, runner, alone in figures:
                for n in callers:
                    log(f"== {name}: {n} callers for {args.seconds:.0f} s ==")
                    peak = [0]
                    sampling = threading.Event()

                    def sample() -> None:
                        while not sampling.wait(0.01):
                            peak[0] = max(peak[0], _open_connections(memory))

                    sampler = threading.Thread(target=sample)
                    sampler.start()
                    try:
                        r = runner(call, questions, alone, n, args.seconds)
                    finally:
                        sampling.set()
                        sampler.join()
                    lat = r["latencies"]
                    rows.append((name, n, r["calls"] / r["elapsed"], 1000 * statistics.median(lat) if lat else 0,
                                 1000 * _percentile(lat, 0.95), r["wrong"], r["errors"], peak[0]))
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(__file__).resolve().parents[1]).stdout.strip()
    print("| figure | callers | calls/s | p50 ms | p95 ms | differ from alone | errors | connections (peak) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, n, rate, p50, p95, wrong, errors, peak in rows:
        print(f"| {name} | {n} | {rate:.1f} | {p50:.1f} | {p95:.1f} | {wrong} | {errors} | {peak} |")
    print()
    print(f"Date: {time.strftime('%Y-%m-%d')}. Commit: {commit}. "
          f"Command: python benchmarks/concurrency_speed.py {' '.join(sys.argv[1:])}")
    print(f"Machine: {machine(['falkordb', 'redis', 'llama-index-core'])}; load average "
          f"{'/'.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 1 if any(r[5] or r[6] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
